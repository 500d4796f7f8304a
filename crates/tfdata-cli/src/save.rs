//! `tfdata save`: `distributed_save` of a JSON pipeline, then its progress
//! until the snapshot is done: a progress bar on a terminal, one plain line
//! every few seconds otherwise (logs, CI).

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use anyhow::Context;

#[derive(clap::Args)]
pub struct SaveArgs {
    /// The dispatcher, as `grpc://host:port` or `host:port`.
    #[arg(long)]
    service: String,
    /// The pipeline file (JSON, see docs/pipelines.md).
    #[arg(long)]
    pipeline: std::path::PathBuf,
    /// The snapshot directory or object-store URL; must not exist.
    #[arg(long)]
    path: String,
    /// AUTO (Snappy), SNAPPY, GZIP, ZLIB or NONE.
    #[arg(long, default_value = "AUTO")]
    compression: String,
    /// Return once the dispatcher accepted the snapshot, without waiting.
    #[arg(long)]
    no_wait: bool,
    /// Give up waiting after this many seconds.
    #[arg(long)]
    timeout_secs: Option<u64>,

    #[command(flatten)]
    security: crate::security::ClientSecurityArgs,
}

/// Plain-line interval when not on a terminal.
const LINE_INTERVAL: Duration = Duration::from_secs(5);
const POLL_INTERVAL: Duration = Duration::from_millis(500);

pub async fn run(mut args: SaveArgs) -> anyhow::Result<()> {
    std::mem::take(&mut args.security).install()?;
    let text = std::fs::read_to_string(&args.pipeline)
        .with_context(|| format!("reading {}", args.pipeline.display()))?;
    let parsed = tfdata_dataset::json::from_json(&text)
        .with_context(|| format!("in {}", args.pipeline.display()))?;
    let compression = (args.compression != "NONE").then_some(args.compression.as_str());
    tfdata_client::distributed_save_async(&parsed.dataset, &args.path, &args.service, compression)
        .await?;
    eprintln!("tfdata save: writing {}", args.path);
    if args.no_wait {
        return Ok(());
    }
    let total = parsed.dataset.cardinality();
    let tty = std::io::stderr().is_terminal();
    let started = Instant::now();
    let mut last_line = Instant::now();
    let mut streams = Vec::new();
    loop {
        // The dispatcher may be restarting: the files still tell the
        // progress, and the last streams it reported stand in for its own.
        let mut p = match tfdata_client::snapshot_progress(&args.path, Some(&args.service)).await {
            Ok(p) => p,
            Err(e) if e.is_retryable() => {
                tfdata_client::snapshot_progress(&args.path, None).await?
            }
            Err(e) => return Err(e.into()),
        };
        if p.streams.is_empty() {
            p.streams.clone_from(&streams);
        } else {
            streams.clone_from(&p.streams);
        }
        let finished = p.done || p.error.is_some();
        if tty || finished || last_line.elapsed() >= LINE_INTERVAL {
            let line = describe(&p, total, started.elapsed());
            if tty {
                eprint!("\r\x1b[2K{line}");
            } else {
                eprintln!("{line}");
            }
            last_line = Instant::now();
        }
        if let Some(error) = p.error {
            if tty {
                eprintln!();
            }
            anyhow::bail!("the snapshot at {} failed: {error}", args.path);
        }
        if p.done {
            if tty {
                eprintln!();
            }
            println!("{}", args.path);
            return Ok(());
        }
        if args
            .timeout_secs
            .is_some_and(|t| started.elapsed() >= Duration::from_secs(t))
        {
            anyhow::bail!(
                "the snapshot at {} is not done after --timeout-secs",
                args.path
            );
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// One progress line: streams, chunks, elements (of the total when the
/// pipeline's cardinality is known), bytes, rate and ETA.
fn describe(p: &tfdata_client::SnapshotProgress, total: i64, elapsed: Duration) -> String {
    let done_streams = p.streams.iter().filter(|(_, done)| *done).count();
    let secs = elapsed.as_secs_f64().max(1e-3);
    let rate = p.elements as f64 / secs;
    let mb = p.bytes as f64 / 1e6;
    let (bar, eta) = if total > 0 {
        let fraction = (p.elements as f64 / total as f64).min(1.0);
        let filled = (fraction * 30.0).round() as usize;
        let eta = if rate > 0.0 && !p.done {
            format!(
                ", ETA {:.0} s",
                (total as f64 - p.elements as f64).max(0.0) / rate
            )
        } else {
            String::new()
        };
        (
            format!(
                "[{}{}] {}/{} elements",
                "#".repeat(filled),
                " ".repeat(30 - filled),
                p.elements,
                total
            ),
            eta,
        )
    } else {
        (format!("{} elements", p.elements), String::new())
    };
    format!(
        "{bar}, {} chunks, {mb:.1} MB, streams {done_streams}/{} done, {rate:.0} elements/s, {:.1} MB/s{eta}{}",
        p.chunks,
        p.streams.len(),
        mb / secs,
        if p.done { " (done)" } else { "" }
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_lines_say_how_far_and_how_fast() {
        let p = tfdata_client::SnapshotProgress {
            done: false,
            error: None,
            streams: vec![(0, true), (1, false)],
            chunks: 3,
            elements: 500,
            bytes: 2_000_000,
        };
        let line = describe(&p, 1000, Duration::from_secs(10));
        assert!(line.contains("500/1000 elements"), "{line}");
        assert!(
            line.contains("3 chunks") && line.contains("2.0 MB"),
            "{line}"
        );
        assert!(
            line.contains("streams 1/2 done") && line.contains("50 elements/s"),
            "{line}"
        );
        assert!(line.contains("ETA 10 s"), "{line}");
        let unknown = describe(&p, -2, Duration::from_secs(10));
        assert!(unknown.starts_with("500 elements"), "{unknown}");
    }
}
