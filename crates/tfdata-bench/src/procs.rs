//! The `tfdata` binary's processes for the issue 36 scenarios (`autoscale`,
//! `autocache`): a dispatcher, workers and the `tfdata workers`
//! supervisor, started from the release build next to this binary and
//! stopped by SIGTERM (the CLI drains on it; stdin means nothing to it),
//! then SIGKILL if they outlive [`STOP_TIMEOUT`].

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// How long a process gets to stop after SIGTERM (a draining worker hands
/// its splits back within its drain timeout, a second or two here).
const STOP_TIMEOUT: Duration = Duration::from_secs(20);

/// The `tfdata` binary: `explicit`, else the one built beside this binary
/// (`cargo build --release -p tfdata-bench -p tfdata-cli` puts both in
/// `target/release`).
pub fn tfdata_binary(explicit: Option<&Path>) -> Result<PathBuf> {
    if let Some(p) = explicit {
        return Ok(p.to_path_buf());
    }
    let exe = std::env::current_exe()?;
    let beside = exe.with_file_name("tfdata");
    if beside.is_file() {
        return Ok(beside);
    }
    bail!(
        "no `tfdata` binary beside {} (build it: cargo build --release -p tfdata-cli), \
         or give --tfdata-bin",
        exe.display()
    )
}

/// A `tfdata` process, stopped (SIGTERM, then SIGKILL) on drop.
pub struct Process {
    pub child: Child,
    pub what: String,
}

/// Sends `signal` to `pid` with `kill(1)` (the workspace forbids unsafe
/// code, so no `libc::kill`).
pub fn signal(pid: u32, signal: &str) -> Result<()> {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .context("running kill")?;
    if !status.success() {
        bail!("kill -{signal} {pid} failed ({status})");
    }
    Ok(())
}

impl Process {
    /// Starts `binary args` and waits for a stdout line starting with
    /// `ready_prefix`, returning the process and that line's rest. Its
    /// stderr (logs) goes to `log` when given, else nowhere.
    pub fn start(
        binary: &Path,
        args: &[String],
        ready_prefix: &str,
        log: Option<&Path>,
        what: &str,
    ) -> Result<(Process, String)> {
        let stderr = match log {
            Some(path) => Stdio::from(std::fs::File::create(path)?),
            None => Stdio::null(),
        };
        let mut child = Command::new(binary)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .with_context(|| format!("starting {what} ({})", binary.display()))?;
        let stdout = child.stdout.take().context("no stdout")?;
        let mut process = Process {
            child,
            what: what.to_string(),
        };
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        loop {
            line.clear();
            if reader.read_line(&mut line)? == 0 {
                bail!("{what} exited before it was ready");
            }
            if let Some(rest) = line.trim().strip_prefix(ready_prefix) {
                let rest = rest.trim().to_string();
                // Drain the rest of stdout on a thread, so the child never blocks.
                std::thread::spawn(move || {
                    let mut sink = Vec::new();
                    let _ = reader.read_to_end(&mut sink);
                });
                process.child.stdout = None;
                return Ok((process, rest));
            }
        }
    }

    /// Starts `binary args` without waiting for anything (the caller
    /// knows when it is ready); stdout and stderr go to `log`.
    pub fn spawn(binary: &Path, args: &[String], log: &Path, what: &str) -> Result<Process> {
        let out = std::fs::File::create(log)?;
        let child = Command::new(binary)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(out.try_clone()?))
            .stderr(Stdio::from(out))
            .spawn()
            .with_context(|| format!("starting {what} ({})", binary.display()))?;
        Ok(Process {
            child,
            what: what.to_string(),
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, then waits up to [`STOP_TIMEOUT`], then SIGKILL.
    pub fn stop(&mut self) -> Result<()> {
        if self.child.try_wait()?.is_some() {
            return Ok(());
        }
        signal(self.pid(), "TERM")?;
        let deadline = Instant::now() + STOP_TIMEOUT;
        while Instant::now() < deadline {
            if self.child.try_wait()?.is_some() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!(
            "{} did not stop within {STOP_TIMEOUT:?}: SIGKILL",
            self.what
        );
        self.child.kill()?;
        self.child.wait()?;
        Ok(())
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            eprintln!("stopping {}: {e:#}", self.what);
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The port in a `tfdata <role> listening on port N[ as ...]` line's rest
/// (`N[ as ...]`).
pub fn port_of(rest: &str) -> Result<u16> {
    rest.split_whitespace()
        .next()
        .and_then(|p| p.parse().ok())
        .with_context(|| format!("no port in {rest:?}"))
}

/// The processes whose parent is `parent` (from `/proc/*/stat`), e.g. the
/// workers `tfdata workers` runs.
pub fn children_of(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    // Fields after the command name's ')': state, ppid, ...
                    let rest = &stat[stat.rfind(')')? + 1..];
                    rest.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(parent)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_read_from_the_ready_lines() {
        assert_eq!(port_of("5050").unwrap(), 5050);
        assert_eq!(port_of("41234 as localhost:41234").unwrap(), 41234);
        assert!(port_of("").is_err());
    }

    #[test]
    fn children_are_found_by_parent() {
        let mut child = Command::new("sleep").arg("5").spawn().unwrap();
        assert!(children_of(std::process::id()).contains(&child.id()));
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
