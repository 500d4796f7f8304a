//! The supervisor's worker processes: `tfdata worker` children of this
//! executable, each in a slot (its index, for `--base-port + slot`), started
//! in their own process group (a Ctrl-C in the terminal reaches the
//! supervisor alone, which then drains them) with `--exit-with-parent`
//! (each drains and stops if the supervisor dies, even by SIGKILL).

use std::ffi::OsString;
use std::io::{BufRead, BufReader};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Instant;

pub use rustix::process::Signal;

/// A running or draining worker process.
pub struct Worker {
    pub slot: usize,
    child: Child,
    /// When it was sent SIGTERM to drain, if it was.
    pub draining_since: Option<Instant>,
}

impl Worker {
    /// Starts `exe worker <args>` in `slot`. Its stdout (the port line) is
    /// logged line by line; its stderr (its logs) goes to the supervisor's.
    pub fn start(exe: &std::path::Path, slot: usize, args: &[OsString]) -> std::io::Result<Worker> {
        let mut command = Command::new(exe);
        command
            .arg("worker")
            .arg("--exit-with-parent")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .process_group(0);
        let mut child = command.spawn()?;
        let pid = child.id();
        if let Some(stdout) = child.stdout.take() {
            // One short-lived thread per worker: it ends when the worker's
            // stdout closes (the worker exits).
            std::thread::Builder::new()
                .name(format!("worker-{slot}-stdout"))
                .spawn(move || {
                    for line in BufReader::new(stdout).lines() {
                        let Ok(line) = line else { break };
                        tracing::info!(slot, pid, "worker: {line}");
                    }
                })?;
        }
        Ok(Worker {
            slot,
            child,
            draining_since: None,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` to the worker (not its group: it has none of its own).
    /// The pid is our own unreaped child's: it cannot have been reused.
    pub fn signal(&self, signal: Signal) -> std::io::Result<()> {
        rustix::process::kill_process(rustix::process::Pid::from_child(&self.child), signal)?;
        Ok(())
    }

    /// Asks the worker to drain and stop (SIGTERM), once.
    pub fn drain(&mut self, now: Instant) -> std::io::Result<()> {
        if self.draining_since.is_none() {
            self.signal(Signal::TERM)?;
            self.draining_since = Some(now);
        }
        Ok(())
    }

    /// Its exit status, if it has exited (reaping it).
    pub fn exited(&mut self) -> std::io::Result<Option<ExitStatus>> {
        self.child.try_wait()
    }

    /// Stops it at once and reaps it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How an exit status reads in a log line.
pub fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("signal {signal}"),
        (None, None) => status.to_string(),
    }
}
