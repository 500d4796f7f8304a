//! Server child processes of the scenarios (a dispatcher or a worker, ours
//! or TensorFlow's): started, waited for until ready, stopped by closing
//! their stdin.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// A server child process: stdin closed and waited for on drop.
pub struct Server {
    pub child: Child,
    /// Drained on a thread after the first line, so the child never blocks.
    pub first_line: String,
}

impl Server {
    /// Starts `command` and reads its first stdout line (its readiness).
    pub fn start(mut command: Command, what: &str) -> Result<Self> {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .env("TF_CPP_MIN_LOG_LEVEL", "2")
            .spawn()
            .with_context(|| format!("starting {what}"))?;
        let mut reader = BufReader::new(child.stdout.take().context("no stdout")?);
        let mut server = Server {
            child,
            first_line: String::new(),
        };
        reader.read_line(&mut server.first_line)?;
        drain(reader);
        if server.first_line.trim().is_empty() {
            bail!("{what} exited before it was ready");
        }
        Ok(server)
    }

    /// Starts a server and does not wait for it (the caller knows when
    /// it is ready).
    pub fn spawn(mut command: Command, what: &str) -> Result<Self> {
        let child = command
            .stdin(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {what}"))?;
        Ok(Server {
            child,
            first_line: String::new(),
        })
    }

    /// Starts a server that prints nothing; ready when `ready` says so.
    pub fn start_quiet(mut command: Command, what: &str, ready: impl Fn() -> bool) -> Result<Self> {
        let child = command
            .stdin(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {what}"))?;
        let mut server = Server {
            child,
            first_line: String::new(),
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        while !ready() {
            if Instant::now() > deadline {
                bail!("{what} was not ready within 60 s");
            }
            if let Some(status) = server.child.try_wait()? {
                bail!("{what} exited ({status})");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(server)
    }

    pub fn status_bytes(&self, key: &str) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).ok()?;
        crate::measure::status_kib(&status, key).map(|kib| kib * 1024)
    }
}

/// A worker of this binary (`--serve-worker`) for the dispatcher at
/// `dispatcher_address`, in a process of its own; `heartbeat` overrides its
/// heartbeat interval. Registration is the caller's to wait for.
pub fn worker_process(
    dispatcher_address: &str,
    heartbeat: Option<std::time::Duration>,
) -> Result<Server> {
    let mut command = Command::new(std::env::current_exe()?);
    command
        .arg(crate::service::SERVE_WORKER_FLAG)
        .arg(dispatcher_address);
    if let Some(h) = heartbeat {
        command
            .arg("--serve-worker-heartbeat-ms")
            .arg(h.as_millis().to_string());
    }
    Server::spawn(command, "a worker process")
}

impl Drop for Server {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

fn drain(mut reader: BufReader<ChildStdout>) {
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = reader.read_to_end(&mut sink);
    });
}
