//! Data-plane scenarios (issue 7): elements through a real dispatcher and
//! worker over loopback gRPC, and the loopback TCP ceiling to judge them by.
//!
//! One in-process worker, one client, parallel_epochs (`dynamic`: two
//! workers, distributed_epoch, `range(N)`, elements/s); N elements:
//! `small` `range(N)` int64 scalars (elements/s); `batched` N batches of 1024
//! int64 (elements/s); `large` N tensors of 1 MiB random float32 (MB/s);
//! `first-element` milliseconds from `distribute` to the first element on a
//! warm cluster. The first element is not part of the throughput figures.
//! TensorFlow runs the same scenarios in its own process
//! (`scripts/tf_service.py`), in the same run.
//!
//! `tcp-loopback`: MB/s of a plain copy through one loopback TCP stream
//! (1 MiB writes, one reader thread): the physical ceiling for `large`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value, json};
use tfdata::{
    Dataset, DispatchServer, DispatcherConfig, ProcessingMode, Tensor, WorkerConfig, WorkerServer,
    distribute,
};

use crate::data;

/// A service scenario's measured figure.
struct Measured {
    value: f64,
    unit: &'static str,
}

/// The datasets of the scenarios; `n` is the element count of the stream.
fn scenario_dataset(scenario: &str, n: u64) -> Result<Dataset> {
    let n = i64::try_from(n)?;
    Ok(match scenario {
        "small" | "first-element" | "dynamic" => Dataset::range(n),
        "batched" => Dataset::range(n * BATCH).batch(BATCH, false),
        "large" => {
            // One 1 MiB tensor of random float32 (incompressible), repeated.
            let mut state = 0x9e37_79b9_7f4a_7c15u64;
            let mut values = Vec::with_capacity(LARGE_BYTES / 4);
            while values.len() < LARGE_BYTES / 4 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                values.push((state >> 40) as f32 / (1u64 << 24) as f32);
            }
            let tensor = Tensor::from_slice(&values, vec![(LARGE_BYTES / 4) as i64])?;
            Dataset::from_tensors(vec![tensor]).repeat(Some(n))
        }
        other => bail!("not a service scenario: {other}"),
    })
}

const BATCH: i64 = 1024;
const LARGE_BYTES: usize = 1 << 20;

/// Runs `scenario` through our dispatcher and one worker (in-process, real
/// gRPC over loopback).
fn measure_tfdata(scenario: &str, n: u64) -> Result<Measured> {
    let dispatcher = DispatchServer::new(DispatcherConfig::default())?;
    let _worker = WorkerServer::new(WorkerConfig::new(dispatcher.address()))?;
    let read = |dataset: &Dataset| -> Result<(u64, f64)> {
        let start = Instant::now();
        let distributed =
            distribute(ProcessingMode::ParallelEpochs, &dispatcher.target()).apply(dataset)?;
        let mut iter = distributed.iter()?;
        iter.next().context("the dataset is empty")??;
        let first = start.elapsed().as_secs_f64();
        let start = Instant::now();
        let mut rest = 0u64;
        for element in iter {
            element?;
            rest += 1;
        }
        if rest + 1 != n {
            bail!("read {} elements, expected {n}", rest + 1);
        }
        Ok((
            rest,
            if scenario == "first-element" {
                first
            } else {
                start.elapsed().as_secs_f64()
            },
        ))
    };
    if scenario == "first-element" {
        // A warm cluster: the worker is registered and has run a job.
        read(&scenario_dataset("small", n)?)?;
        let (_, first) = read(&scenario_dataset("small", n)?)?;
        return Ok(Measured {
            value: first * 1e3,
            unit: "ms",
        });
    }
    let (rest, seconds) = read(&scenario_dataset(scenario, n)?)?;
    Ok(match scenario {
        "large" => Measured {
            value: rest as f64 * LARGE_BYTES as f64 / seconds / 1e6,
            unit: "MB/s",
        },
        "batched" => Measured {
            value: rest as f64 * BATCH as f64 / seconds,
            unit: "elements/s",
        },
        _ => Measured {
            value: rest as f64 / seconds,
            unit: "elements/s",
        },
    })
}

/// The same scenario in TensorFlow 2.21 (`scripts/tf_service.py`).
fn measure_tensorflow(python: &Path, scenario: &str, n: u64) -> Result<f64> {
    let args = [
        "--scenario".to_string(),
        scenario.to_string(),
        "--elements".into(),
        n.to_string(),
    ];
    let line = data::run_tensorflow_script(python, "tf_service.py", &args)?;
    let value: Value = serde_json::from_str(&line)?;
    value["value"]
        .as_f64()
        .with_context(|| format!("no value in {line}"))
}

/// One service scenario's report: ours, and TensorFlow's when a Python is
/// given. For `first-element` lower is better, so the ratio is TensorFlow's
/// time over ours (above 1 means faster, as for the others).
pub fn run(
    scenario: &str,
    n: u64,
    tensorflow: Option<&Path>,
) -> Result<(Map<String, Value>, String)> {
    let ours = measure_tfdata(scenario, n)?;
    let mut report = Map::new();
    report.insert("scenario".into(), json!(scenario));
    report.insert("value".into(), json!(ours.value));
    report.insert("unit".into(), json!(ours.unit));
    report.insert("elements".into(), json!(n));
    let mut summary = format!("{scenario}: tfdata {:.1} {}", ours.value, ours.unit);
    if let Some(python) = tensorflow {
        let tf = measure_tensorflow(python, scenario, n)?;
        let ratio = if scenario == "first-element" {
            tf / ours.value
        } else {
            ours.value / tf
        };
        report.insert("tensorflow".into(), json!(tf));
        report.insert("ratio".into(), json!(ratio));
        summary += &format!(", TensorFlow {tf:.1} {}, ratio {ratio:.2}", ours.unit);
    }
    Ok((report, summary))
}

/// MB/s (10^6 bytes) of `bytes` copied through one loopback TCP stream.
pub fn tcp_loopback(bytes: u64) -> Result<(Map<String, Value>, String)> {
    const CHUNK: usize = 1 << 20;
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let address = listener.local_addr()?;
    let reader = std::thread::spawn(move || -> std::io::Result<u64> {
        let (mut socket, _) = listener.accept()?;
        let mut buffer = vec![0u8; CHUNK];
        let mut total = 0u64;
        loop {
            match socket.read(&mut buffer)? {
                0 => return Ok(total),
                n => total += n as u64,
            }
        }
    });
    let mut socket = TcpStream::connect(address)?;
    let chunk = vec![0x5au8; CHUNK];
    let start = Instant::now();
    let mut sent = 0u64;
    while sent < bytes {
        socket.write_all(&chunk)?;
        sent += CHUNK as u64;
    }
    socket.shutdown(std::net::Shutdown::Write)?;
    let received = reader
        .join()
        .map_err(|_| anyhow::anyhow!("the reader thread panicked"))??;
    let seconds = start.elapsed().as_secs_f64();
    if received != sent {
        bail!("sent {sent} bytes, received {received}");
    }
    let mb_per_sec = received as f64 / seconds / 1e6;
    let mut report = Map::new();
    report.insert("scenario".into(), json!("tcp-loopback"));
    report.insert("value".into(), json!(mb_per_sec));
    report.insert("unit".into(), json!("MB/s"));
    report.insert("bytes".into(), json!(received));
    Ok((report, format!("tcp-loopback: {mb_per_sec:.0} MB/s")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_service_scenario_reads_every_element_through_a_real_service() {
        for scenario in ["small", "batched", "large", "first-element", "dynamic"] {
            let (report, _) = run(scenario, 20, None).unwrap();
            assert!(report["value"].as_f64().unwrap() > 0.0, "{scenario}");
        }
    }

    #[test]
    fn tcp_loopback_copies_every_byte() {
        let (report, _) = tcp_loopback(8 << 20).unwrap();
        assert_eq!(report["bytes"], json!(8u64 << 20));
    }
}
