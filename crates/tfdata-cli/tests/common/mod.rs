//! Helpers shared by the process-level tests.

#![allow(clippy::unwrap_used, dead_code)] // test code

pub mod process;

use std::io::{Read as _, Write as _};
use std::time::{Duration, Instant};

/// Registers `pipeline` (JSON, written into `dir`) with `tfdata register`
/// at `service` and returns its dataset id.
pub fn register(dir: &std::path::Path, service: &str, pipeline: &str) -> String {
    let path = dir.join("pipeline.json");
    std::fs::write(&path, pipeline).unwrap();
    let out = std::process::Command::new(process::BIN)
        .args(["register", "--service", service, "--pipeline"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

/// Waits until the dispatcher at `address` knows `n` workers.
pub fn wait_for_workers(address: &str, n: usize) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    rt.block_on(async {
        let client = tfdata::DispatcherClient::new(address).unwrap();
        loop {
            let request = tfdata_proto::data::GetWorkersRequest {};
            if let Ok(r) = client.get_workers(request).await
                && r.workers.len() >= n
            {
                return;
            }
            assert!(Instant::now() < deadline, "workers did not register");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
}

/// Whether `GET /readyz` at `admin` (a dispatcher's admin HTTP port)
/// answers 200. A stopped process accepts the TCP connection but answers
/// nothing: not ready.
pub fn ready(admin: std::net::SocketAddr) -> bool {
    let Ok(mut stream) = std::net::TcpStream::connect_timeout(&admin, Duration::from_millis(300))
    else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(300)));
    if write!(stream, "GET /readyz HTTP/1.0\r\nHost: localhost\r\n\r\n").is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    // `HTTP/1.x 200`
    stream.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.") && &head[9..12] == b"200"
}
