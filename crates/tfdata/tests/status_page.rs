//! The dispatcher's status page in a real headless Chromium, against a
//! live in-process cluster mid-read: what the browser rendered after the
//! page's script ran (its refresh included), not only what was served.
//!
//! Needs Debian's `chromium` (`apt-get install chromium`; `.ci/run`
//! installs it). Without it the test prints `SKIPPED: ...` and passes, or
//! fails under `CI=true` (`optional_tool`). With `TFDATA_STATUS_SCREENSHOT=PATH` it
//! also saves a screenshot there (docs/status-page.png is made this way).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

mod common;
#[path = "../../tfdata-dataset/tests/optional_tool/mod.rs"]
mod optional_tool;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tfdata::{
    Dataset, DispatchServer, DispatcherConfig, Element, ProcessingMode, WorkerConfig, WorkerServer,
    distribute,
};

/// A job name a hostile client could choose: markup that would run script
/// if the page let it through.
const HOSTILE_JOB: &str = r#"eval"><img src=x onerror=alert(1)><script>alert(2)</script>"#;
/// How long one Chromium run may take before it is killed.
const BROWSER_TIMEOUT: Duration = Duration::from_secs(120);

/// The `chromium` on PATH; `None` (after saying the test is skipped) if
/// there is none.
fn chromium() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("chromium"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        optional_tool::missing(
            &optional_tool::current_test(),
            "no chromium on PATH: the status page's browser test needs a headless Chromium",
            "Debian's chromium package: apt-get install chromium",
        );
    }
    found
}

/// Runs Chromium headless on `url` with `args`, letting the page's timers
/// run for `virtual_ms` of virtual time; returns its stdout.
fn run_chromium(chromium: &Path, profile: &Path, args: &[String], url: &str) -> String {
    let mut child = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-extensions",
            "--hide-scrollbars",
            // The page refreshes every 5 s: let one refresh run.
            "--virtual-time-budget=7000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start chromium");
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut out = String::new();
        stdout.read_to_string(&mut out).unwrap();
        out
    });
    let deadline = Instant::now() + BROWSER_TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("chromium did not finish within {BROWSER_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert!(status.success(), "chromium failed ({status}): {stderr}");
    reader.join().unwrap()
}

fn api_status(port: u16) -> serde_json::Value {
    let (status, _, body) = common::http_get(port, "/api/status");
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// The part of `dom` from the element with `id` to the next section.
fn section<'a>(dom: &'a str, id: &str) -> &'a str {
    let start = dom
        .find(&format!(r#"id="{id}""#))
        .unwrap_or_else(|| panic!("no #{id} in {dom}"));
    let rest = &dom[start..];
    &rest[..rest.find("</details>").unwrap_or(rest.len())]
}

#[test]
fn the_status_page_renders_a_live_cluster_in_chromium() {
    let Some(chromium) = chromium() else { return };

    let dispatcher = DispatchServer::new(DispatcherConfig {
        http_port: Some(0),
        ..Default::default()
    })
    .unwrap();
    let port = dispatcher.http_port().unwrap();
    let workers: Vec<WorkerServer> = (0..2)
        .map(|_| {
            let mut config = WorkerConfig::new(dispatcher.address());
            config.heartbeat_interval = Duration::from_millis(100);
            WorkerServer::new(config).unwrap()
        })
        .collect();
    common::wait_for_these_workers(&dispatcher, &workers);

    // A trainer reading a slow pipeline in distributed_epoch, so the page
    // has splits to show and a verdict to give: the reader is starved while
    // the workers' pipelines run flat out.
    tfdata::register_function("status_page_test_slow", |e: Element| {
        std::thread::sleep(Duration::from_millis(5));
        Ok(e)
    });
    let ds = distribute(ProcessingMode::DistributedEpoch, &dispatcher.target())
        .job_name("imagenet-train")
        .task_refresh_interval(Duration::from_millis(100))
        .apply(&Dataset::range(1_000_000).map("status_page_test_slow"))
        .unwrap();
    let reader = common::BackgroundRead::start(ds);
    // A second job whose name a hostile client chose, with a reader
    // holding its iteration open. Three elements: its tasks finish at
    // once, rather than sit blocked on full buffers nobody reads.
    let hostile = distribute(ProcessingMode::ParallelEpochs, &dispatcher.target())
        .job_name(HOSTILE_JOB)
        .apply(&Dataset::range(3))
        .unwrap();
    let mut hostile_it = hostile.iter().unwrap();
    hostile_it.next().unwrap().unwrap();

    // Wait (on the JSON the page shares its figures with) until the
    // readers and workers have reported enough for a verdict.
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        let status = api_status(port);
        if status["verdict"]["bottleneck"] != "not_enough_data"
            && status["verdict"]["evidence"]["demand_measured"] == true
        {
            break status;
        }
        assert!(Instant::now() < deadline, "no verdict: {status:#}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(
        status["verdict"]["bottleneck"], "add_workers",
        "a 5 ms/element pipeline starves a trainer that takes no time: {status:#}"
    );
    assert_eq!(status["summary"]["live_workers"], 2, "{status:#}");
    assert_eq!(status["iterations"].as_array().unwrap().len(), 2);
    let epoch = &status["iterations"][0];
    assert_eq!(epoch["job_name"], "imagenet-train", "{status:#}");
    assert!(epoch["splits_produced"].as_i64().unwrap() > 0, "{status:#}");

    let profile = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{port}/");
    let dom = run_chromium(&chromium, profile.path(), &["--dump-dom".into()], &url);

    // The script ran and refreshed the content in place at least once, so
    // the tables below are the ones it fetched and inserted.
    let refreshes: u32 = dom
        .split(r#"data-refreshes=""#)
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no data-refreshes in {dom}"));
    assert!(refreshes >= 1, "the page did not refresh itself: {dom}");
    assert!(dom.contains("live · refreshes every 5 s"), "{dom}");
    assert!(
        dom.contains("<title>add workers · tfdata dispatcher</title>"),
        "{dom}"
    );
    let verdict = section(&dom, "verdict");
    assert!(
        verdict.contains(r#"class="verdict-kind">add workers<"#),
        "{verdict}"
    );
    assert!(verdict.contains("of their time in next()"), "{verdict}");

    let worker_rows = section(&dom, "workers");
    for worker in &workers {
        assert!(
            worker_rows.contains(&format!(">{}<", worker.address())),
            "worker {} not rendered: {worker_rows}",
            worker.address()
        );
    }
    assert_eq!(
        worker_rows.matches("<tr>").count(),
        1 + workers.len(),
        "a header and a row per worker: {worker_rows}"
    );
    assert!(worker_rows.contains(r#"<span class="pill ok">live</span>"#));

    let iterations = section(&dom, "iterations");
    assert!(iterations.contains(">imagenet-train<"), "{iterations}");
    assert!(iterations.contains("distributed_epoch"), "{iterations}");
    assert_eq!(iterations.matches("<tr>").count(), 3, "{iterations}");
    // The trainer's reader, starved (the hostile job's iteration has
    // finished, so its reader may have left).
    let readers = section(&dom, "readers");
    assert!(readers.contains(r#"title="imagenet-train""#), "{readers}");
    assert!(readers.contains(r#"<span class="bar bad">"#), "{readers}");

    // The hostile name is shown as text, and made no element.
    let escaped =
        "eval\"&gt;&lt;img src=x onerror=alert(1)&gt;&lt;script&gt;alert(2)&lt;/script&gt;";
    assert!(dom.contains(escaped), "the job name is not shown: {dom}");
    assert!(!dom.contains("<img"), "markup got through: {dom}");
    assert_eq!(
        dom.matches("<script").count(),
        1,
        "only the page's own script: {dom}"
    );

    if let Some(path) = std::env::var_os("TFDATA_STATUS_SCREENSHOT") {
        let path = std::path::absolute(path).unwrap();
        run_chromium(
            &chromium,
            profile.path(),
            &[
                format!("--screenshot={}", path.display()),
                "--window-size=1280,900".into(),
            ],
            &url,
        );
        let png = std::fs::read(&path).unwrap();
        assert!(png.starts_with(b"\x89PNG"), "not a PNG: {}", path.display());
        eprintln!("screenshot: {} ({} bytes)", path.display(), png.len());
    }

    let read = reader.stop();
    assert!(read > 0);
    drop(hostile_it);
}

#[test]
fn the_page_is_served_self_contained_with_its_json() {
    // No browser needed: what the server sends, on an idle dispatcher.
    let dispatcher = DispatchServer::new(DispatcherConfig {
        http_port: Some(0),
        ..Default::default()
    })
    .unwrap();
    let port = dispatcher.http_port().unwrap();

    let (status, head, page) = common::http_get(port, "/");
    assert_eq!(status, 200, "{head}");
    assert!(
        head.contains("content-type: text/html; charset=utf-8"),
        "{head}"
    );
    assert!(head.contains("cache-control: no-store"), "{head}");
    let policy = head
        .lines()
        .find_map(|l| l.strip_prefix("content-security-policy: "))
        .unwrap_or_else(|| panic!("no content-security-policy: {head}"));
    assert!(policy.contains("default-src 'none'"), "{policy}");
    let nonce = policy
        .split("'nonce-")
        .nth(1)
        .and_then(|rest| rest.split('\'').next())
        .unwrap();
    assert!(
        page.contains(&format!(r#"<script nonce="{nonce}">"#)),
        "{page}"
    );
    assert!(page.contains("<title>not enough data · tfdata dispatcher</title>"));
    assert!(page.contains("No workers.") && page.contains("No readers."));
    for external in ["src=\"http", "href=\"http", "://", "@import"] {
        assert!(!page.contains(external), "{external} in {page}");
    }
    // Each request gets a fresh nonce.
    let (_, again, _) = common::http_get(port, "/");
    assert!(!again.contains(nonce), "{again}");

    // What the script fetches: the content alone, allowed no script.
    let (status, head, part) = common::http_get(port, "/?part=main");
    assert_eq!(status, 200);
    assert!(head.contains("script-src 'none'"), "{head}");
    assert!(part.starts_with("<div data-title="), "{part}");
    assert!(
        !part.contains("<html") && !part.contains("<script"),
        "{part}"
    );

    let (status, head, body) = common::http_get(port, "/api/status");
    assert_eq!(status, 200);
    assert!(head.contains("content-type: application/json"), "{head}");
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(status["verdict"]["bottleneck"], "not_enough_data");
    assert_eq!(status["summary"]["live_workers"], 0);
    assert_eq!(status["workers"], serde_json::json!([]));
}
