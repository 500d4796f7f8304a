//! The status page as HTML: [`page`] (the whole document, its CSS and
//! script inline, nothing loaded from elsewhere) and [`content`] (what the
//! page's script fetches every few seconds to refresh itself in place).
//!
//! Every string from the network is escaped ([`escape`]) and cut to a
//! bounded length; every table renders at most a fixed number of rows,
//! the worst first, and says how many it left out.

use std::fmt::Write as _;

use super::format::{self, escape, truncate};
use super::report::{StatusReport, WorkerRow, WorkerState};
use super::table::{MAX_TEXT_CHARS, bar, close_table, na, name_cell, open_table, or_na};
use super::verdict::{BUFFERS_FULL_RATIO, STARVED_RATIO};

/// Rows rendered per table; `/api/status` has them all.
pub const MAX_WORKER_ROWS: usize = 100;
pub const MAX_READER_ROWS: usize = 100;
pub const MAX_ITERATION_ROWS: usize = 100;
pub const MAX_DATASET_ROWS: usize = 100;
pub const MAX_SNAPSHOT_ROWS: usize = 50;
/// How often the page refreshes itself.
pub const REFRESH_SECONDS: u32 = 5;

const CSS: &str = include_str!("page.css");
const SCRIPT: &str = include_str!("page.js");

/// The whole page around `body` (from [`content`], or a notice while the
/// dispatcher replays its journal). `nonce` is the Content-Security-Policy
/// nonce of its one script.
pub fn page(title: &str, body: &str, nonce: &str) -> String {
    format!(
        r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<link rel="icon" href="data:,">
<noscript><meta http-equiv="refresh" content="{REFRESH_SECONDS}"></noscript>
<style>{CSS}</style>
</head>
<body data-refreshes="0" data-refresh-ms="{refresh_ms}">
<header class="top">
<div class="brand"><span class="logo">tfdata</span> dispatcher</div>
<div class="live" id="live"><span class="dot"></span><span id="live-text">live · refreshes every {REFRESH_SECONDS} s</span></div>
<nav><a href="api/status">JSON</a><a href="metrics">metrics</a></nav>
</header>
<main id="main">{body}</main>
<script nonce="{nonce}">{SCRIPT}</script>
</body>
</html>
"#,
        title = escape(title),
        refresh_ms = REFRESH_SECONDS * 1000,
    )
}

/// The page's title for `report`: the verdict first, for a glance at a tab.
pub fn title(report: &StatusReport) -> String {
    format!("{} · tfdata dispatcher", report.verdict.bottleneck.label())
}

/// The notice shown while the dispatcher replays its journal.
pub fn replaying() -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        r#"<div data-title="starting · tfdata dispatcher"></div>
<section class="verdict v-not_enough_data"><div class="verdict-kind">Starting</div>
<p class="headline">The dispatcher is replaying its journal. This page fills in once it serves.</p></section>"#
    );
    h
}

/// Everything below the header.
pub fn content(report: &StatusReport) -> String {
    let mut h = String::with_capacity(16 << 10);
    let _ = write!(h, r#"<div data-title="{}"></div>"#, escape(&title(report)));
    let _ = write!(
        h,
        r#"<p class="taken">As of {} · {} · protocol {}</p>"#,
        format::utc(report.taken_at_micros),
        if report.fault_tolerant {
            "fault-tolerant (journaled state)"
        } else {
            "in-memory state"
        },
        tfdata_proto::DATA_SERVICE_VERSION,
    );
    if report.journal_failed {
        h.push_str(
            r#"<div class="alert">A journal write failed: the dispatcher refuses every state change until it is restarted, and a restart recovers it from the journal.</div>"#,
        );
    }
    verdict(&mut h, report);
    cards(&mut h, report);
    super::scaling::section(&mut h, &report.scaling);
    workers(&mut h, report);
    readers(&mut h, report);
    iterations(&mut h, report);
    datasets(&mut h, report);
    snapshots(&mut h, report);
    super::autocache::html(&mut h, &report.autocache);
    h
}

fn verdict(h: &mut String, report: &StatusReport) {
    let v = &report.verdict;
    let _ = write!(
        h,
        r#"<section class="verdict v-{}" id="verdict"><div class="verdict-kind">{}</div><p class="headline">{}</p>"#,
        v.bottleneck.key(),
        escape(v.bottleneck.label()),
        escape(&v.headline),
    );
    if !v.reasons.is_empty() {
        h.push_str(r#"<ul class="reasons">"#);
        for reason in &v.reasons {
            let _ = write!(h, "<li>{}</li>", escape(reason));
        }
        h.push_str("</ul>");
    }
    h.push_str("</section>");
}

fn card(h: &mut String, label: &str, value: &str, sub: &str, class: &str) {
    let _ = write!(
        h,
        r#"<div class="card {class}"><div class="card-label">{label}</div><div class="card-value">{value}</div><div class="card-sub">{sub}</div></div>"#
    );
}

fn cards(h: &mut String, report: &StatusReport) {
    let s = report.summary();
    let e = &report.verdict.evidence;
    h.push_str(r#"<section class="cards">"#);
    card(
        h,
        "Workers",
        &format!("{} live", s.live_workers),
        &format!(
            "{} stale · {} lost · {} TensorFlow",
            s.stale_workers, s.lost_workers, s.tensorflow_workers
        ),
        if s.lost_workers + s.stale_workers > 0 {
            "warn"
        } else {
            ""
        },
    );
    let starvation = if e.readers_reporting > 0 {
        format!(
            "starved {} mean · {} max",
            format::percent(e.starvation_mean),
            format::percent(e.starvation_max)
        )
    } else {
        "no starvation reported yet".into()
    };
    card(h, "Readers", &s.readers.to_string(), &starvation, "");
    card(
        h,
        "Served",
        &format!("{} el/s", format::count(s.elements_per_second)),
        &format!("{}/s from workers", format::bytes(s.bytes_per_second)),
        "",
    );
    card(
        h,
        "Demand",
        &format!("{} workers", report.demand.optimal_workers),
        &if report.demand.measured {
            format!("estimate for {} live", e.live_workers)
        } else {
            "not measured yet".into()
        },
        "",
    );
    card(
        h,
        "Jobs",
        &report.jobs.to_string(),
        &format!(
            "{} active · {} finished iterations · {} tasks",
            s.active_iterations, s.finished_iterations, report.active_tasks
        ),
        "",
    );
    card(
        h,
        "Datasets",
        &report.datasets.len().to_string(),
        &format!(
            "{} snapshot{}",
            report.snapshots.len(),
            if report.snapshots.len() == 1 { "" } else { "s" }
        ),
        "",
    );
    h.push_str("</section>");
}

fn workers(h: &mut String, report: &StatusReport) {
    let total = report.workers.len();
    let shown = total.min(MAX_WORKER_ROWS);
    open_table(
        h,
        "workers",
        "Workers",
        total,
        shown,
        &[
            "Address",
            "State",
            "Kind",
            ">Tasks",
            ">Elements/s",
            ">Bytes/s",
            "Buffers full",
            ">Credit wait",
            ">Time/element",
            ">Sent",
            "Reorder wait",
            ">Heartbeat",
        ],
    );
    for w in report.workers.iter().take(shown) {
        let state_class = match w.state {
            WorkerState::Live => "ok",
            WorkerState::Stale => "warn",
            WorkerState::Lost => "bad",
        };
        let _ = write!(
            h,
            r#"<tr>{}<td><span class="pill {state_class}">{}</span></td><td>{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td>{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td>{}</td><td class="num">{}</td></tr>"#,
            name_cell(&w.address, "addr"),
            w.state.label(),
            if w.tfdata { "tfdata" } else { "TensorFlow" },
            w.tasks,
            or_na(w.rates.map(|r| format::count(r.elements_per_second))),
            or_na(w.rates.map(|r| format::bytes(r.bytes_per_second))),
            or_na(
                w.rates
                    .map(|r| bar(r.buffer_full_ratio, BUFFERS_FULL_RATIO, 2.0))
            ),
            or_na(
                w.rates
                    .map(|r| format!("{:.2} s/s", r.credit_wait_per_second))
            ),
            or_na(w.processing_time_nsec.map(format::nanos)),
            or_na(w.elements_sent.map(|n| format::count(n as f64))),
            reorder_cell(w),
            heartbeat_cell(w),
        );
    }
    close_table(
        h,
        "workers",
        total,
        shown,
        "the worst first (lost, stale, then the slowest)",
    );
}

/// Deterministic reads' readers' wait on the lanes a worker serves in the
/// last minute, and their fullest reorder window: a worker that holds
/// readers up for a second or more a minute is flagged, so a slow one
/// stands out among the others.
fn reorder_cell(w: &WorkerRow) -> String {
    let Some(wait) = w.reorder_wait else {
        return na().to_string();
    };
    let class = if wait >= REORDER_WAIT_FLAGGED {
        "warn"
    } else {
        "ok"
    };
    let window = w
        .reorder_window
        .map_or_else(String::new, |(elements, limit)| {
            format!(r#" <span class="dim">window {elements}/{limit}</span>"#)
        });
    format!(
        r#"<span class="pill {class}">{:.1} s/min</span>{window}"#,
        wait.as_secs_f64()
    )
}

/// Readers waiting this long a minute on one worker's lanes flag it.
const REORDER_WAIT_FLAGGED: std::time::Duration = std::time::Duration::from_secs(1);

/// The age of a worker's last heartbeat, and a warning pill when
/// `worker_timeout` contradicts its heartbeat interval (the full text on
/// hover).
fn heartbeat_cell(w: &WorkerRow) -> String {
    let age = or_na(
        w.last_heartbeat_age
            .map(|a| format!("{} ago", format::age(a))),
    );
    match &w.heartbeat_warning {
        Some(warning) => format!(
            r#"{age} <span class="pill warn" title="{}">worker_timeout too short</span>"#,
            escape(&truncate(warning, MAX_TEXT_CHARS))
        ),
        None => age,
    }
}

fn readers(h: &mut String, report: &StatusReport) {
    let total = report.readers.len();
    let shown = total.min(MAX_READER_ROWS);
    open_table(
        h,
        "readers",
        "Readers",
        total,
        shown,
        &[
            ">Reader",
            "Job",
            ">Iteration",
            "Starved",
            ">Elements/s",
            ">Bytes/s",
            ">Trainer pace",
            ">Consumed",
        ],
    );
    for r in report.readers.iter().take(shown) {
        let _ = write!(
            h,
            r#"<tr><td class="num">{}</td>{}<td class="num">{}</td><td>{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td><td class="num">{}</td></tr>"#,
            r.client,
            name_cell(&r.job_name, "name"),
            r.iteration,
            or_na(r.rates.map(|r| bar(r.starvation_ratio, STARVED_RATIO, 0.5))),
            or_na(r.rates.map(|r| format::count(r.elements_per_second))),
            or_na(r.rates.map(|r| format::bytes(r.bytes_per_second))),
            or_na(
                r.trainer_elements_per_second
                    .map(|p| format!("{} el/s", format::count(p)))
            ),
            or_na(r.elements_consumed.map(|n| format::count(n as f64))),
        );
    }
    close_table(h, "readers", total, shown, "the most starved first");
}

fn iterations(h: &mut String, report: &StatusReport) {
    let total = report.iterations.len();
    let shown = total.min(MAX_ITERATION_ROWS);
    open_table(
        h,
        "iterations",
        "Jobs and iterations",
        total,
        shown,
        &[
            "Job",
            "Dataset",
            "Mode",
            ">Iteration",
            "State",
            ">Readers",
            ">Tasks",
            "Splits handed out",
            ">Consumed",
            ">Elements/s",
            "Starved",
        ],
    );
    for it in report.iterations.iter().take(shown) {
        let progress = match it.splits_total {
            Some(total) if total > 0 => {
                let ratio = it.splits_produced as f64 / total as f64;
                format!(
                    r#"<span class="bar plain"><span style="width:{:.1}%"></span></span><span class="pct">{} / {}</span>"#,
                    ratio.clamp(0.0, 1.0) * 100.0,
                    it.splits_produced,
                    total
                )
            }
            _ if it.splits_produced > 0 => format!("{} of ?", it.splits_produced),
            _ => na().to_string(),
        };
        let job = if it.job_name.is_empty() {
            format!("job {}", it.job_id)
        } else {
            it.job_name.clone()
        };
        let _ = write!(
            h,
            r#"<tr>{}{}<td>{}</td><td class="num">{} <span class="dim">rep {}</span></td><td><span class="pill {}">{}</span></td><td class="num">{}</td><td class="num">{}</td><td>{progress}</td><td class="num">{}</td><td class="num">{}</td><td>{}</td></tr>"#,
            name_cell(&job, "name"),
            name_cell(&it.dataset_id, "id"),
            escape(&it.processing_mode),
            it.iteration,
            it.repetition,
            if it.finished { "done" } else { "ok" },
            if it.finished { "finished" } else { "active" },
            it.readers,
            it.tasks,
            format::count(it.elements_consumed as f64),
            or_na(it.consumed_per_second.map(format::count)),
            or_na(it.starvation_mean.map(|s| bar(s, STARVED_RATIO, 0.5))),
        );
    }
    close_table(
        h,
        "iterations",
        total,
        shown,
        "active first, the newest first",
    );
}

fn datasets(h: &mut String, report: &StatusReport) {
    let total = report.datasets.len();
    let shown = total.min(MAX_DATASET_ROWS);
    open_table(
        h,
        "datasets",
        "Datasets",
        total,
        shown,
        &["Dataset", ">Cardinality", "Compression", "Runs on", ">Jobs"],
    );
    for d in report.datasets.iter().take(shown) {
        let cardinality = match d.cardinality {
            -1 => "infinite".to_string(),
            c if c < 0 => "unknown".to_string(),
            c => format::count(c as f64),
        };
        let _ = write!(
            h,
            r#"<tr>{}<td class="num">{cardinality}</td><td>{}</td><td>{}</td><td class="num">{}</td></tr>"#,
            name_cell(&d.id, "id"),
            escape(&d.compression),
            d.runs_on,
            d.jobs,
        );
    }
    close_table(h, "datasets", total, shown, "in id order");
}

fn snapshots(h: &mut String, report: &StatusReport) {
    let total = report.snapshots.len();
    let shown = total.min(MAX_SNAPSHOT_ROWS);
    open_table(
        h,
        "snapshots",
        "Snapshots",
        total,
        shown,
        &["Path", "State", "Splits", ">Streams done", "Error"],
    );
    for s in report.snapshots.iter().take(shown) {
        let splits = if s.splits_total > 0 {
            let ratio = s.splits_assigned as f64 / s.splits_total as f64;
            format!(
                r#"<span class="bar plain"><span style="width:{:.1}%"></span></span><span class="pct">{} / {}</span>"#,
                ratio.clamp(0.0, 1.0) * 100.0,
                s.splits_assigned,
                s.splits_total
            )
        } else {
            format!("{} of ?", s.splits_assigned)
        };
        let state_class = match s.state {
            "error" => "bad",
            "done" => "done",
            _ => "ok",
        };
        let _ = write!(
            h,
            r#"<tr>{}<td><span class="pill {state_class}">{}</span></td><td>{splits}</td><td class="num">{} / {}</td><td class="error">{}</td></tr>"#,
            name_cell(&s.path, "path"),
            escape(s.state),
            s.streams_done,
            s.streams,
            escape(&truncate(&s.error, MAX_TEXT_CHARS)),
        );
    }
    close_table(h, "snapshots", total, shown, "in path order");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serving::status_page::fixtures::{HOSTILE, report, worker};
    use crate::serving::status_page::report::{WorkerRow, WorkerState};
    use crate::serving::status_page::table::MAX_NAME_CHARS;
    use crate::serving::status_page::verdict::Bottleneck;

    #[test]
    fn strings_from_the_network_cannot_inject_markup() {
        let r = report(vec![worker(HOSTILE, WorkerState::Live, 10.0)], HOSTILE);
        let html = content(&r);
        for injected in ["<img", "<script", "\"><img", "onerror=alert(1)>"] {
            assert!(!html.contains(injected), "{injected} got through:\n{html}");
        }
        let escaped = "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;&lt;script&gt;";
        // Address, job name (readers, iterations), dataset id (iterations,
        // datasets), snapshot path and error: each shown, escaped, in a
        // cell and in a hover title.
        assert!(html.matches(escaped).count() >= 9, "{html}");
        let page = page(&title(&r), &html, "abc");
        assert_eq!(page.matches("<script").count(), 1, "only the page's own");
        assert!(page.contains(r#"<script nonce="abc">"#));
    }

    #[test]
    fn a_worker_whose_timeout_contradicts_its_heartbeats_is_flagged() {
        let mut w = worker("w:1", WorkerState::Live, 1.0);
        w.heartbeat_warning = Some(format!("worker_timeout_ms=2000 is shorter {HOSTILE}"));
        let html = content(&report(
            vec![w, worker("w:2", WorkerState::Live, 1.0)],
            "job",
        ));
        assert_eq!(
            html.matches("worker_timeout too short").count(),
            1,
            "{html}"
        );
        assert!(html.contains(r#"title="worker_timeout_ms=2000 is shorter &quot;&gt;&lt;img"#));
        assert!(!html.contains("<img"));
    }

    #[test]
    fn long_strings_are_cut() {
        let long = "x".repeat(100_000);
        let r = report(vec![worker(&long, WorkerState::Live, 1.0)], &long);
        let html = content(&r);
        assert!(html.len() < 40_000, "{} bytes", html.len());
        assert!(html.contains(&format!("{}…", "x".repeat(MAX_NAME_CHARS))));
    }

    #[test]
    fn hundreds_of_workers_render_the_worst_hundred() {
        let mut workers: Vec<WorkerRow> = (0..500)
            .map(|i| {
                worker(
                    &format!("worker-{i:03}.pool.svc:5051"),
                    WorkerState::Live,
                    1_000.0 + i as f64,
                )
            })
            .collect();
        workers.push(worker("gone:5051", WorkerState::Lost, 0.0));
        crate::serving::status_page::report::sort_worst_first(&mut workers);
        let html = content(&report(workers, "job"));
        let section =
            &html[html.find(r#"id="workers""#).unwrap()..html.find(r#"id="readers""#).unwrap()];
        assert_eq!(
            section.matches("<tr>").count(),
            MAX_WORKER_ROWS + 1,
            "header + rows"
        );
        assert!(section.contains("501 · showing 100"), "{section}");
        assert!(section.contains("Showing 100 of 501 workers"), "{section}");
        // The lost one first, then the slowest; the fastest left out.
        let lost = section.find("gone:5051").unwrap();
        assert!(lost < section.find("worker-000").unwrap());
        assert!(section.contains("worker-098") && !section.contains("worker-099"));
        // Summaries count every worker, rendered or not.
        assert!(html.contains("500 live"), "{html}");
        assert!(
            html.len() < 120_000,
            "the page stays small: {} bytes",
            html.len()
        );
    }

    #[test]
    fn every_verdict_has_its_own_colours() {
        for b in [
            Bottleneck::AddWorkers,
            Bottleneck::TransferBound,
            Bottleneck::TrainerBound,
            Bottleneck::NotEnoughData,
        ] {
            let rule = format!(".v-{} .verdict-kind", b.key());
            assert!(CSS.contains(&rule), "no {rule} in page.css");
        }
    }

    #[test]
    fn the_page_loads_nothing_from_elsewhere() {
        let r = report(vec![worker("w:1", WorkerState::Live, 1.0)], "job");
        let page = page(&title(&r), &content(&r), "n");
        for external in ["http://", "https://", "//", "@import", "url("] {
            let outside_script = page.replace(SCRIPT, "");
            assert!(!outside_script.contains(external), "{external} in the page");
        }
        assert!(
            !SCRIPT.contains("http"),
            "the script fetches only its own endpoint"
        );
        assert!(page.contains(r#"<meta http-equiv="refresh" content="5">"#));
        assert!(page.contains("<title>add workers · tfdata dispatcher</title>"));
    }

    #[test]
    fn empty_tables_say_so() {
        let mut r = report(vec![], "job");
        r.readers.clear();
        r.snapshots.clear();
        let html = content(&r);
        assert!(html.contains("No workers."), "{html}");
        assert!(html.contains("No readers."), "{html}");
        assert!(html.contains("No snapshots."), "{html}");
    }
}
