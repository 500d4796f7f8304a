//! What a test does when a tool it needs is missing (README, "Testing").
//!
//! Outside CI it prints `SKIPPED: <test>: <why> (install <tool> to run it)`
//! and the test passes, so `cargo test --workspace` passes on a machine
//! with only the Rust toolchain and Python, as the README promises. Under
//! `CI=true` it fails instead: `.ci/run` installs every tool the tests
//! use, so a skip there would hide a test that can no longer fail.
//!
//! Shared by path (`#[path = ".../optional_tool/mod.rs"]`) by the harnesses
//! that need a tool: the S3 server (moto), Chromium, iproute2.

#![allow(dead_code)] // each test binary uses part of it

use std::io::Write;

/// Says `test` is skipped because `why`, or panics under `CI=true`.
/// `install` names what to install (a package, a command).
pub fn missing(test: &str, why: &str, install: &str) {
    if in_ci() {
        panic!(
            "{test}: {why}; under CI=true every tool is installed by .ci/run, \
             so this test must run (install {install})"
        );
    }
    // Written past the test harness's output capture (which takes only
    // `eprintln!`), so the skip shows in `cargo test`'s output.
    let _ = writeln!(
        std::io::stderr(),
        "SKIPPED: {test}: {why} (install {install} to run it)"
    );
}

/// Whether this run is CI's (`CI=true`, as CI services and `.ci/run` set).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v.eq_ignore_ascii_case("true") || v == "1")
}

/// The running test's name (test threads are named after their test).
pub fn current_test() -> String {
    std::thread::current()
        .name()
        .unwrap_or("this test")
        .to_string()
}
