//! The private sandbox each multi-host scenario runs in.
//!
//! A scenario's test re-executes its own test binary (that one test only)
//! under `unshare --net --mount --pid`: a network namespace with nothing in
//! it, so no packet can reach a real network; a private mount namespace, so
//! the named namespaces `ip netns` keeps under `/run/netns` exist only there;
//! and a PID namespace whose first process is the test, so when it ends (or
//! is killed) the kernel kills every process it started and the namespaces
//! go away with them. The sandbox in turn dies with the test that started it
//! (a parent-death signal). Nothing outlives it, even after a panic or a
//! SIGKILL of either test process.
//!
//! Where the sandbox cannot be made (not root, or `unshare` refused), the
//! scenario is skipped with a line on stderr that says so.

use std::io::Write as _;
use std::process::Command;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::common::process::Process;

/// Set in the environment of the re-executed test: "you are in the sandbox".
const INSIDE: &str = "TFDATA_MULTI_HOST_SANDBOX";
/// Lines the scenario prints with this prefix are shown even when the test
/// passes (its timings and measurements).
pub const REPORT_PREFIX: &str = "multi-host: ";
/// The most a scenario may take, sandbox included.
const SCENARIO_LIMIT: Duration = Duration::from_secs(150);

/// The scenarios time heartbeats and timeouts on two shared cores: run them
/// one at a time.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// `setpriv` gives `unshare` a parent-death signal, so the sandbox dies
/// with the test even when the test is SIGKILLed (no `Drop` runs then);
/// `unshare --kill-child` passes it on to the sandbox's first process.
const SANDBOX: [&str; 11] = [
    "--pdeathsig",
    "KILL",
    "--",
    "unshare",
    "--net",
    "--mount",
    "--pid",
    "--fork",
    "--kill-child",
    "--mount-proc",
    "--",
];

/// Runs `scenario` (the body of the test named `test_name`) inside a fresh
/// sandbox, or prints why it is skipped.
pub fn run(test_name: &str, scenario: impl FnOnce()) {
    if std::env::var_os(INSIDE).is_some() {
        private_netns_dir();
        scenario();
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(PoisonError::into_inner);
    match sandbox_available() {
        Ok(()) => {}
        // A tool .ci/run installs: skipped outside CI only.
        Err(Unavailable::Tool(why)) => {
            super::optional_tool::missing(
                &format!("multi-host test {test_name}"),
                &why,
                "iproute2 and util-linux: apt-get install iproute2 util-linux",
            );
            return;
        }
        // Root and namespace rights are the machine's, not a tool to
        // install: skipped everywhere (docs/multi-host-tests.md).
        Err(Unavailable::Rights(why)) => {
            shout(&format!("SKIPPED: multi-host test {test_name}: {why}"));
            return;
        }
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut command = Command::new("setpriv");
    command
        .args(SANDBOX)
        .arg(exe)
        .args([test_name, "--exact", "--nocapture", "--test-threads=1"])
        .env(INSIDE, "1");
    let started = Instant::now();
    let mut sandbox = Process::spawn(&format!("sandbox of {test_name}"), command);
    let status = sandbox.wait_exit(SCENARIO_LIMIT);
    let output = || {
        format!(
            "--- its stdout:\n{}\n{}",
            sandbox.stdout_lines().join("\n"),
            sandbox.logs()
        )
    };
    match status {
        None => panic!(
            "{test_name} did not finish within {SCENARIO_LIMIT:?}; its sandbox is killed\n{}",
            output()
        ),
        Some(status) if !status.success() => {
            panic!("{test_name} failed in its sandbox ({status})\n{}", output())
        }
        Some(_) => {
            // The harness prints "test <name> ... " before the test's output.
            for line in sandbox.stdout_lines() {
                if let Some(at) = line.find(REPORT_PREFIX) {
                    shout(&line[at..]);
                }
            }
            shout(&format!(
                "{REPORT_PREFIX}{test_name}: passed in {:.1} s (sandbox included)",
                started.elapsed().as_secs_f64()
            ));
        }
    }
}

/// Why no sandbox can be made here.
enum Unavailable {
    /// A tool is missing.
    Tool(String),
    /// This process may not make namespaces.
    Rights(String),
}

/// Why no sandbox can be made here, if so.
fn sandbox_available() -> Result<(), Unavailable> {
    let uid = effective_uid().map_err(Unavailable::Rights)?;
    if uid != 0 {
        return Err(Unavailable::Rights(format!(
            "network namespaces need root (running as uid {uid}); run the tests as root to include it"
        )));
    }
    let ip = Command::new("ip").arg("-V").output();
    if !ip.is_ok_and(|o| o.status.success()) {
        return Err(Unavailable::Tool("iproute2's `ip` is not installed".into()));
    }
    let probe = Command::new("setpriv")
        .args(SANDBOX)
        .arg("true")
        .output()
        .map_err(|e| {
            Unavailable::Tool(format!("cannot run setpriv and unshare (util-linux): {e}"))
        })?;
    if !probe.status.success() {
        return Err(Unavailable::Rights(format!(
            "unshare refused to create the sandbox: {}",
            String::from_utf8_lossy(&probe.stderr).trim()
        )));
    }
    Ok(())
}

fn effective_uid() -> Result<u32, String> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("cannot read /proc/self/status: {e}"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        .and_then(|euid| euid.parse().ok())
        .ok_or_else(|| "no effective uid in /proc/self/status".into())
}

/// Mounts a tmpfs over `/run/netns` in the sandbox's private mount namespace,
/// so `ip netns` creates its files there and not on the host.
fn private_netns_dir() {
    std::fs::create_dir_all("/run/netns").expect("create /run/netns");
    super::network::run(
        "mount",
        &["-t", "tmpfs", "-o", "size=1m", "tmpfs", "/run/netns"],
    );
}

/// Writes `line` to stderr past the test harness's output capture, so a
/// skip or a measurement shows in `cargo test`'s output.
fn shout(line: &str) {
    let _ = writeln!(std::io::stderr(), "{line}");
}
