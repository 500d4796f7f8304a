//! Log output for every subcommand: human-readable text (the default) or
//! one JSON object per line for log collectors (`--log-format json`).
//!
//! Logs go to stderr, so stdout stays the command's output (a port, a
//! dataset id, elements). `TFDATA_LOG` takes an `EnvFilter` directive
//! (`info` when unset). In JSON, each line carries the event's fields
//! flattened beside `timestamp`, `level`, `target` and `message`, and the
//! enclosing spans (with their dataset, job, iteration, task and worker
//! ids) as `spans`, outermost first, and `span`, the innermost.

use tracing_subscriber::EnvFilter;

/// How log lines are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// `2026-01-01T00:00:00Z  INFO span{id=1}: target: message key=value`.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Installs the process's subscriber. Call once, before anything logs.
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_env("TFDATA_LOG").unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_writer(|| Stderr)
        .with_env_filter(filter);
    match format {
        LogFormat::Text => builder
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(true)
            .init(),
    }
}

/// stderr, where a closed pipe drops the line. A process whose log reader
/// went away (a supervisor's workers after it was killed, `... 2>&1 | head`)
/// keeps running: tracing-subscriber reports a failed write with
/// `eprintln!`, which panics on the same closed pipe and takes down the
/// task that logged (a worker's heartbeat loop, its drain).
struct Stderr;

impl std::io::Write for Stderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match std::io::stderr().write(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(buf.len()),
            other => other,
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match std::io::stderr().flush() {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            other => other,
        }
    }
}
