//! Autocache's flags on the real binaries (issue 36): `tfdata read --cache
//! auto` asks for it per job, `tfdata dispatcher --autocache` for every
//! job, `--autocache-dir` says where caches live, and `tfdata status`
//! shows what was decided. (What a cache does for a read is
//! `crates/tfdata/tests/autocache.rs`'s.)

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::process::{BIN, Process};

/// Registers `pipeline` (JSON) and reads it to the end with `tfdata read`
/// and `extra` flags; the elements printed.
fn register_and_read(address: &str, pipeline: &str, extra: &[&str]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let service = format!("grpc://{address}");
    let id = common::register(dir.path(), &service, pipeline);
    let out = Command::new(BIN)
        .args([
            "read",
            "--service",
            &service,
            "--dataset-id",
            &id,
            "--processing-mode",
            "distributed_epoch",
        ])
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// `tfdata status`'s text once it has an autocache row matching `done`
/// (20 s at most).
fn status_until(address: &str, done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let out = Command::new(BIN)
            .args(["status", "--dispatcher", address])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        if done(&text) {
            return text;
        }
        assert!(Instant::now() < deadline, "status never showed it:\n{text}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn read_with_cache_auto_asks_the_dispatcher_to_autocache_the_job() {
    let caches = tempfile::tempdir().unwrap();
    let (dispatcher, port) = Process::start(&[
        "dispatcher",
        "--port",
        "0",
        "--autocache-dir",
        caches.path().to_str().unwrap(),
    ]);
    let address = format!("localhost:{port}");
    let (worker, _) = Process::start(&[
        "worker",
        "--dispatcher-address",
        &address,
        "--heartbeat-interval-ms",
        "200",
    ]);
    common::wait_for_workers(&address, 1);

    // Without --cache: nothing to say.
    let plain = register_and_read(&address, r#"{"op": "range", "stop": 50}"#, &[]);
    assert_eq!(plain.len(), 50);
    // With it: the job profiles `range` and decides (a range is an
    // in-memory source, which reading a cache back cannot beat).
    let read = register_and_read(
        &address,
        r#"{"op": "range", "stop": 60}"#,
        &["--cache", "auto"],
    );
    assert_eq!(read.len(), 60);
    let text = status_until(&address, |t| t.contains("not cached"));
    assert!(text.contains("Autocache (1)"), "{text}");
    assert!(text.contains("in-memory source"), "{text}");

    let out = Command::new(BIN)
        .args([
            "read",
            "--service",
            "grpc://x:1",
            "--dataset-id",
            "1",
            "--cache",
            "always",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("auto"));

    assert!(worker.terminate().success());
    assert!(dispatcher.terminate().success());
}

#[test]
fn dispatcher_autocache_covers_every_job_and_says_when_it_has_no_storage() {
    // Neither --autocache-dir nor --work-dir: jobs run uncached, and the
    // status says why.
    let (dispatcher, port) = Process::start(&["dispatcher", "--port", "0", "--autocache"]);
    let address = format!("localhost:{port}");
    let (worker, _) = Process::start(&["worker", "--dispatcher-address", &address]);
    common::wait_for_workers(&address, 1);
    let read = register_and_read(&address, r#"{"op": "range", "stop": 40}"#, &[]);
    assert_eq!(read.len(), 40, "the job runs, uncached");
    let text = status_until(&address, |t| t.contains("no storage"));
    assert!(text.contains("not cached"), "{text}");
    assert!(worker.terminate().success());
    assert!(dispatcher.terminate().success());
}
