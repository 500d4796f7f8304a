//! Data-plane scenarios (issue 7): elements through a real dispatcher and
//! worker over loopback gRPC, and the loopback TCP ceiling to judge them by.
//!
//! `small`: `range(N)` int64 scalars, one in-process worker, one client,
//! parallel_epochs; elements/s. TensorFlow runs the same scenario in its own
//! process (`scripts/tf_service.py`), in the same run.
//!
//! `tcp-loopback`: MB/s of a plain copy through one loopback TCP stream
//! (1 MiB writes, one reader thread): the physical ceiling for `large`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde_json::{Map, Value, json};
use tfdata::{
    Dataset, DispatchServer, DispatcherConfig, ProcessingMode, WorkerConfig, WorkerServer,
    distribute,
};

use crate::data;

/// Elements/s of `range(elements)` through our dispatcher and one worker.
pub fn small_tfdata(elements: u64) -> Result<f64> {
    let dispatcher = DispatchServer::new(DispatcherConfig::default())?;
    let _worker = WorkerServer::new(WorkerConfig::new(dispatcher.address()))?;
    let stop = i64::try_from(elements)?;
    let dataset = distribute(ProcessingMode::ParallelEpochs, &dispatcher.target())
        .apply(&Dataset::range(stop))?;
    let mut iter = dataset.iter()?;
    // Job creation and the first round trip are `first-element`, not throughput.
    iter.next().context("the dataset is empty")??;
    let start = Instant::now();
    let mut n = 0u64;
    for element in iter {
        element?;
        n += 1;
    }
    let seconds = start.elapsed().as_secs_f64();
    if n + 1 != elements {
        bail!("read {} elements, expected {elements}", n + 1);
    }
    Ok(n as f64 / seconds)
}

/// Elements/s of the same scenario in TensorFlow 2.21.
pub fn small_tensorflow(python: &Path, elements: u64) -> Result<f64> {
    let script = data::scripts_dir().join("tf_service.py");
    let output = Command::new(python)
        .arg(&script)
        .args(["--scenario", "small", "--elements", &elements.to_string()])
        .env("TF_CPP_MIN_LOG_LEVEL", "2")
        .output()
        .with_context(|| format!("cannot run {}", python.display()))?;
    if !output.status.success() {
        bail!(
            "{} failed ({}):\n{}",
            script.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .with_context(|| format!("{} printed no JSON: {stdout}", script.display()))?;
    let value: Value = serde_json::from_str(line)?;
    value["elements_per_sec"]
        .as_f64()
        .with_context(|| format!("no elements_per_sec in {line}"))
}

/// The `small` report: ours, and TensorFlow's when a Python is given.
pub fn small(elements: u64, tensorflow: Option<&Path>) -> Result<(Map<String, Value>, String)> {
    let ours = small_tfdata(elements)?;
    let mut report = Map::new();
    report.insert("scenario".into(), json!("small"));
    report.insert("value".into(), json!(ours));
    report.insert("unit".into(), json!("elements/s"));
    report.insert("elements".into(), json!(elements));
    let mut summary = format!("small: tfdata {ours:.0} elements/s");
    if let Some(python) = tensorflow {
        let tf = small_tensorflow(python, elements)?;
        report.insert("tensorflow".into(), json!(tf));
        report.insert("ratio".into(), json!(ours / tf));
        summary += &format!(", TensorFlow {tf:.0} elements/s, ratio {:.2}", ours / tf);
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
    fn small_reads_every_element_through_a_real_service() {
        assert!(small_tfdata(200).unwrap() > 0.0);
    }

    #[test]
    fn tcp_loopback_copies_every_byte() {
        let (report, _) = tcp_loopback(8 << 20).unwrap();
        assert_eq!(report["bytes"], json!(8u64 << 20));
    }
}
