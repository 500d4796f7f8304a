//! Child processes for the process-level tests: killed when dropped (so a
//! failing test leaves nothing behind), their stdout kept line by line and the
//! tail of their stderr (the logs) kept for failure messages.
//!
//! With `TFDATA_TEST_LOG_DIR` set, every process's whole stderr is also
//! written to `<dir>/<name>-<pid>.log`: a flaky failure's full history (run
//! it with `TFDATA_LOG=debug`, which the processes inherit) outlives the
//! 400-line tail.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// The `tfdata` binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_tfdata");

/// Log lines kept per process: enough to see what it did last.
const LOG_LINES_KEPT: usize = 400;
/// Stdout lines kept per process (one per element for `tfdata read`).
const STDOUT_LINES_KEPT: usize = 4_000_000;
/// Bytes kept of each line: an element's line starts with what identifies it.
const LINE_BYTES_KEPT: usize = 1024;
/// How long a process may take to print its first line (its port).
pub const START_LIMIT: Duration = Duration::from_secs(30);
/// Where to write every process's whole stderr, if set.
pub const LOG_DIR_VAR: &str = "TFDATA_TEST_LOG_DIR";

/// The file `<$TFDATA_TEST_LOG_DIR>/<name>-<pid>.log`, if the variable is set.
fn log_file(name: &str, pid: u32) -> Option<std::fs::File> {
    let dir = std::path::PathBuf::from(std::env::var_os(LOG_DIR_VAR)?);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}-{pid}.log"));
    Some(std::fs::File::create(&path).unwrap_or_else(|e| panic!("cannot create {path:?}: {e}")))
}

#[derive(Default)]
struct Output {
    stdout: Vec<String>,
    stdout_dropped: usize,
    stdout_closed: bool,
    logs: VecDeque<String>,
    logs_dropped: usize,
}

#[derive(Default)]
struct Shared {
    output: Mutex<Output>,
    changed: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Output> {
        self.output.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A child process killed (SIGKILL) when dropped.
pub struct Process {
    pub name: String,
    pub child: Child,
    shared: Arc<Shared>,
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Process {
    /// Starts `tfdata <args>` and returns it with the port from its first
    /// stdout line (`... listening on port N ...`).
    pub fn start(args: &[&str]) -> (Process, u16) {
        let mut command = Command::new(BIN);
        command.args(args);
        Process::start_command(args.first().copied().unwrap_or("tfdata"), command)
    }

    /// [`Process::spawn`], then waits for the port on its first stdout line.
    pub fn start_command(name: &str, command: Command) -> (Process, u16) {
        let process = Process::spawn(name, command);
        let port = process.port();
        (process, port)
    }

    /// Spawns `command` with its stdout and stderr collected; `name` labels
    /// its logs in failure messages.
    pub fn spawn(name: &str, mut command: Command) -> Process {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {name} ({command:?}): {e}"));
        let shared = Arc::new(Shared::default());
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        let out = Arc::clone(&shared);
        std::thread::spawn(move || {
            for line in lines(stdout) {
                let mut o = out.lock();
                if o.stdout.len() < STDOUT_LINES_KEPT {
                    o.stdout.push(line);
                } else {
                    o.stdout_dropped += 1;
                }
                drop(o);
                out.changed.notify_all();
            }
            out.lock().stdout_closed = true;
            out.changed.notify_all();
        });
        let err = Arc::clone(&shared);
        let mut file = log_file(name, child.id()).map(std::io::LineWriter::new);
        std::thread::spawn(move || {
            for line in lines(stderr) {
                if let Some(f) = &mut file {
                    // Best effort, line by line: a failing test exits at once.
                    let _ = writeln!(f, "{line}");
                }
                let mut o = err.lock();
                if o.logs.len() == LOG_LINES_KEPT {
                    o.logs.pop_front();
                    o.logs_dropped += 1;
                }
                o.logs.push_back(line);
            }
        });
        Process {
            name: name.to_string(),
            child,
            shared,
        }
    }

    /// Waits (at most [`START_LIMIT`]) for the first stdout line and returns
    /// the number after its word "port".
    pub fn port(&self) -> u16 {
        self.port_on_line(0)
    }

    /// Waits (at most [`START_LIMIT`]) for stdout line `index` (from 0) and
    /// returns the number after its word "port" (`--http-port`'s is the
    /// second line).
    pub fn port_on_line(&self, index: usize) -> u16 {
        self.wait_for_stdout(index + 1, START_LIMIT);
        let line = self.shared.lock().stdout[index].clone();
        line.split_whitespace()
            .skip_while(|w| *w != "port")
            .nth(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no port in {line:?}\n{}", self.logs()))
    }

    /// Waits until the process printed `n` lines on stdout; panics with its
    /// logs after `limit` or when its stdout closes first.
    pub fn wait_for_stdout(&self, n: usize, limit: Duration) {
        let deadline = Instant::now() + limit;
        let mut o = self.shared.lock();
        while o.stdout.len() + o.stdout_dropped < n {
            let now = Instant::now();
            if o.stdout_closed || now >= deadline {
                let (printed, closed) = (o.stdout.len() + o.stdout_dropped, o.stdout_closed);
                drop(o);
                let why = if closed {
                    "before closing its stdout"
                } else {
                    "in time"
                };
                panic!(
                    "{} printed {printed} of {n} lines {why}\n{}",
                    self.name,
                    self.logs()
                );
            }
            o = self
                .shared
                .changed
                .wait_timeout(o, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// How many lines it printed on stdout so far.
    pub fn stdout_len(&self) -> usize {
        let o = self.shared.lock();
        o.stdout.len() + o.stdout_dropped
    }

    /// Its stdout lines so far (panics if some were dropped).
    pub fn stdout_lines(&self) -> Vec<String> {
        let o = self.shared.lock();
        assert_eq!(o.stdout_dropped, 0, "{} printed too much", self.name);
        o.stdout.clone()
    }

    /// The tail of its stderr, labelled with its name and pid.
    pub fn logs(&self) -> String {
        let o = self.shared.lock();
        let mut text = format!("--- {} (pid {}) logs", self.name, self.child.id());
        if o.logs_dropped > 0 {
            text += &format!(", last {} lines", o.logs.len());
        }
        text += ":\n";
        for line in &o.logs {
            text += line;
            text.push('\n');
        }
        text
    }

    /// Its last log line starting with `prefix`, if any.
    pub fn last_log_line(&self, prefix: &str) -> Option<String> {
        let o = self.shared.lock();
        o.logs.iter().rev().find(|l| l.starts_with(prefix)).cloned()
    }

    /// Sends `signal` (a name `kill` knows: TERM, STOP, CONT, ...).
    pub fn signal(&self, signal: &str) {
        let pid = self.child.id().to_string();
        let status = Command::new("kill")
            .args([&format!("-{signal}"), &pid])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{signal} {} failed", self.name);
    }

    /// Waits at most `limit` for it to exit on its own.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                // Its output is complete once both pipes are drained.
                let o = self.shared.lock();
                let _ = self
                    .shared
                    .changed
                    .wait_timeout_while(o, Duration::from_secs(5), |o| !o.stdout_closed);
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends SIGTERM and waits (bounded) for a clean exit.
    pub fn terminate(mut self) -> ExitStatus {
        self.signal("TERM");
        match self.wait_exit(Duration::from_secs(20)) {
            Some(status) => status,
            None => panic!("{} did not exit after SIGTERM\n{}", self.name, self.logs()),
        }
    }
}

/// The lines of `stream`, lossily decoded (a process may print anything).
fn lines(stream: impl Read) -> impl Iterator<Item = String> {
    let mut reader = BufReader::new(stream);
    std::iter::from_fn(move || {
        let mut buf = Vec::new();
        match reader.read_until(b'\n', &mut buf) {
            Ok(0) | Err(_) => None,
            Ok(_) => {
                if buf.last() == Some(&b'\n') {
                    buf.pop();
                }
                buf.truncate(LINE_BYTES_KEPT);
                Some(String::from_utf8_lossy(&buf).into_owned())
            }
        }
    })
}

/// Polls `check` every 50 ms until it returns a value; after `limit`, panics
/// naming `what` with the logs of `processes`.
pub fn wait_until<T>(
    what: &str,
    limit: Duration,
    processes: &[&Process],
    mut check: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = check() {
            return value;
        }
        if Instant::now() >= deadline {
            let logs: Vec<String> = processes.iter().map(|p| p.logs()).collect();
            panic!(
                "timed out after {limit:?} waiting for {what}\n{}",
                logs.join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
