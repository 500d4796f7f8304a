//! The status page's "Scaling" section and its `/api/status` object: the
//! scaling controller's last decision (docs/operations.md, "Scaling").

use std::fmt::Write as _;

use serde_json::{Value, json};

use super::format::{self, escape, truncate};
use crate::overview::ScalingOverview;

/// Characters shown of the controller's reason (it is ours, but bounded
/// like every text on the page).
const MAX_REASON_CHARS: usize = 600;

/// The section: target, live workers, estimate, phase, the readers' wait
/// the decision used, decisions and reverts, bounds and period, and why.
pub fn section(h: &mut String, scaling: &ScalingOverview) {
    let phase = scaling
        .decision
        .as_ref()
        .map_or("no decision yet", |d| d.phase.as_str());
    let _ = write!(
        h,
        r#"<details class="panel" id="scaling" open><summary><h2>Scaling</h2><span class="count">{phase}</span></summary>"#
    );
    let Some(d) = &scaling.decision else {
        let _ = write!(
            h,
            r#"<p class="empty">The controller decides every {}; nothing decided yet.</p></details>"#,
            seconds(scaling.period)
        );
        return;
    };
    h.push_str(
        r#"<div class="scroll"><table><thead><tr><th class="num">Target</th><th class="num">Live</th><th class="num">Estimate</th><th>Phase</th><th class="num">Starved</th><th class="num">Wait / element</th><th class="num">Decisions</th><th class="num">Reverts</th><th>Bounds</th><th class="num">Period</th></tr></thead><tbody>"#,
    );
    let _ = write!(
        h,
        r#"<tr><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td>{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td>{}</td><td class="num">{}</td></tr>"#,
        d.target_workers,
        d.live_workers,
        d.estimate
            .map_or_else(|| "not measured".to_string(), |e| e.to_string()),
        d.phase.as_str(),
        format::percent(d.starvation),
        format::nanos(d.wait_seconds_per_element * 1e9),
        d.decisions,
        d.reverts,
        bounds(scaling),
        seconds(scaling.period),
    );
    let _ = write!(
        h,
        r#"</tbody></table></div><p class="more">{}</p></details>"#,
        escape(&truncate(&d.reason, MAX_REASON_CHARS))
    );
}

/// The `/api/status` object (`null` before the first decision).
pub fn json(scaling: &ScalingOverview) -> Value {
    let Some(d) = &scaling.decision else {
        return Value::Null;
    };
    json!({
        "target_workers": d.target_workers,
        "live_workers": d.live_workers,
        "estimate": d.estimate,
        "phase": d.phase.as_str(),
        "reason": d.reason,
        "starvation": d.starvation,
        "wait_seconds_per_element": d.wait_seconds_per_element,
        "decisions": d.decisions,
        "reverts": d.reverts,
        "min_workers": scaling.bounds.min,
        "max_workers": scaling.bounds.max,
        "period_seconds": scaling.period.as_secs_f64(),
    })
}

fn bounds(scaling: &ScalingOverview) -> String {
    match scaling.bounds.max {
        Some(max) => format!("{} – {max}", scaling.bounds.min),
        None => format!("at least {}", scaling.bounds.min),
    }
}

fn seconds(d: std::time::Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::scaling::{Bounds, Decision, Phase};

    fn probing() -> ScalingOverview {
        ScalingOverview {
            period: Duration::from_secs(5),
            bounds: Bounds {
                min: 1,
                max: Some(8),
            },
            decision: Some(Decision {
                target_workers: 4,
                live_workers: 1,
                estimate: Some(4),
                phase: Phase::ProbingUp,
                reason: "readers starve 50.0% (>= 5%), estimate 4: 1 -> 4 <b>".into(),
                starvation: 0.5,
                wait_seconds_per_element: 0.002,
                decisions: 3,
                reverts: 1,
                changed: true,
                judged: vec![],
            }),
        }
    }

    #[test]
    fn the_section_shows_the_decision_and_why() {
        let mut h = String::new();
        section(&mut h, &probing());
        for shown in [
            "Scaling",
            "probing up",
            "1 – 8",
            "5.0 s",
            "50%",
            "1 -&gt; 4 &lt;b&gt;",
        ] {
            assert!(h.contains(shown), "{shown} not in {h}");
        }
        let mut h = String::new();
        section(&mut h, &ScalingOverview::default());
        assert!(h.contains("nothing decided yet"), "{h}");
    }

    #[test]
    fn the_json_has_every_figure() {
        let v = json(&probing());
        assert_eq!(v["target_workers"], 4);
        assert_eq!(v["phase"], "probing up");
        assert_eq!(v["max_workers"], 8);
        assert_eq!(v["period_seconds"], 5.0);
        assert_eq!(v["wait_seconds_per_element"], 0.002);
        assert!(json(&ScalingOverview::default()).is_null());
    }
}
