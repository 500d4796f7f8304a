//! The status page's autocache section and its `/api/status` rows (issue
//! 36): per dataset a job asked for, what autocache decided and why.

use std::fmt::Write;

use serde_json::{Value, json};

use super::format::{self, escape, truncate};
use super::table::{close_table, name_cell, open_table};
use crate::overview::AutocacheOverview;

/// Rows shown on the page (`/api/status` has them all).
pub const MAX_AUTOCACHE_ROWS: usize = 200;

/// The longest reason shown in a cell.
const MAX_REASON_CHARS: usize = 400;

pub fn html(h: &mut String, rows: &[AutocacheOverview]) {
    let total = rows.len();
    let shown = total.min(MAX_AUTOCACHE_ROWS);
    open_table(
        h,
        "autocache",
        "Autocache",
        total,
        shown,
        &[
            "Dataset",
            "State",
            "Point",
            ">Compute / element",
            ">Read / element",
            ">Bytes / element",
            ">Jobs served",
            "Why",
        ],
    );
    for r in rows.iter().take(shown) {
        let state_class = match r.state {
            "cached" => "done",
            "not cached" | "dropped" => "warn",
            _ => "ok",
        };
        let measured = r.compute_seconds_per_element > 0.0 || r.read_seconds_per_element > 0.0;
        let seconds = |s: f64| {
            if measured {
                format::nanos(s * 1e9)
            } else {
                "–".to_string()
            }
        };
        let _ = write!(
            h,
            r#"<tr>{}<td><span class="pill {state_class}">{}</span></td>{}<td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td class="error" title="{}">{}</td></tr>"#,
            name_cell(&r.dataset_id.0, "id"),
            escape(r.state),
            name_cell(&r.point, "path"),
            seconds(r.compute_seconds_per_element),
            seconds(r.read_seconds_per_element),
            if measured {
                format::bytes(r.bytes_per_element)
            } else {
                "–".to_string()
            },
            r.jobs_served,
            escape(&truncate(&r.path, MAX_REASON_CHARS)),
            escape(&truncate(&r.reason, MAX_REASON_CHARS)),
        );
    }
    close_table(
        h,
        "autocached datasets",
        total,
        shown,
        "in dataset id order",
    );
}

pub fn json(rows: &[AutocacheOverview]) -> Value {
    rows.iter()
        .map(|r| {
            json!({
                "dataset_id": r.dataset_id.0,
                "state": r.state,
                "reason": r.reason,
                "point": r.point,
                "path": r.path,
                "compute_seconds_per_element": r.compute_seconds_per_element,
                "read_seconds_per_element": r.read_seconds_per_element,
                "bytes_per_element": r.bytes_per_element,
                "jobs_served": r.jobs_served,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serving::status_page::fixtures::HOSTILE;
    use tfdata_core::DatasetId;

    fn row(state: &'static str, reason: &str) -> AutocacheOverview {
        AutocacheOverview {
            dataset_id: DatasetId("7".into()),
            state,
            reason: reason.into(),
            point: "1: map(decode_jpeg)".into(),
            path: "/cache/ab/cd".into(),
            compute_seconds_per_element: 0.004,
            read_seconds_per_element: 0.0002,
            bytes_per_element: 150_528.0,
            jobs_served: 2,
        }
    }

    #[test]
    fn the_section_says_why_and_escapes() {
        let mut h = String::new();
        html(
            &mut h,
            &[
                row("cached", "jobs read the cache"),
                row("not cached", HOSTILE),
            ],
        );
        assert!(h.contains("Autocache"), "{h}");
        assert!(h.contains("not cached"), "{h}");
        assert!(h.contains("1: map(decode_jpeg)"), "{h}");
        assert!(!h.contains("<img"), "{h}");
        let mut empty = String::new();
        html(&mut empty, &[]);
        assert!(empty.contains("No autocached datasets."), "{empty}");
    }

    #[test]
    fn api_rows_carry_every_figure() {
        let v = json(&[row("writing", "its cache is being written")]);
        assert_eq!(v[0]["state"], "writing");
        assert_eq!(v[0]["jobs_served"], 2);
        assert_eq!(v[0]["bytes_per_element"], 150_528.0);
        assert_eq!(v[0]["point"], "1: map(decode_jpeg)");
    }
}
