//! `--http-port` on the real binaries: the port printed, `/metrics`,
//! `/healthz` and `/readyz` served, and a port in use refused clearly.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

mod common;

use common::process::Process;

use std::io::{Read, Write};
use std::process::Command;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_tfdata");

/// Starts `tfdata <args>`; returns it with the gRPC and HTTP ports it
/// printed (the second line is `... http listening on port N`).
fn start(args: &[&str]) -> (Process, u16, u16) {
    let (process, port) = Process::start(args);
    let http = process.port_on_line(1);
    let lines = process.stdout_lines();
    assert!(lines[0].contains(" listening on port "), "{lines:?}");
    assert!(lines[1].contains(" http listening on port "), "{lines:?}");
    (process, port, http)
}

fn http_get(port: u16, path: &str) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    (
        head.split(' ').nth(1).unwrap().parse().unwrap(),
        body.into(),
    )
}

#[test]
fn binaries_serve_metrics_and_health_on_their_http_port() {
    let (_dispatcher, port, dhttp) = start(&["dispatcher", "--port", "0", "--http-port", "0"]);
    let address = format!("localhost:{port}");
    let (_worker, _, whttp) = start(&[
        "worker",
        "--dispatcher-address",
        &address,
        "--heartbeat-interval-ms",
        "100",
        "--http-port",
        "0",
    ]);
    common::wait_for_workers(&address, 1);
    let deadline = Instant::now() + Duration::from_secs(20);
    while http_get(whttp, "/readyz").0 != 200 {
        assert!(Instant::now() < deadline, "the worker never became ready");
        std::thread::sleep(Duration::from_millis(20));
    }
    for (http, prefix) in [(dhttp, "tfdata_dispatcher_"), (whttp, "tfdata_worker_")] {
        assert_eq!(http_get(http, "/healthz"), (200, "ok\n".into()));
        assert_eq!(http_get(http, "/readyz"), (200, "ready\n".into()));
        let (status, body) = http_get(http, "/metrics");
        assert_eq!(status, 200);
        assert!(body.contains(&format!("# TYPE {prefix}")), "{body}");
        assert!(body.ends_with("# EOF\n"), "{body}");
    }
    let (_, body) = http_get(dhttp, "/metrics");
    assert!(
        body.contains(r#"tfdata_dispatcher_workers{state="live",kind="tfdata"} 1"#),
        "{body}"
    );
}

#[test]
fn an_http_port_in_use_is_a_clear_error() {
    let held = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    let port = held.local_addr().unwrap().port().to_string();
    for args in [
        vec!["dispatcher", "--port", "0", "--http-port", &port],
        vec![
            "worker",
            "--dispatcher-address",
            "localhost:1",
            "--http-port",
            &port,
        ],
    ] {
        let out = Command::new(BIN).args(&args).output().unwrap();
        assert!(!out.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains(&format!("0.0.0.0:{port} (the HTTP port")) && stderr.contains("in use"),
            "{args:?}: {stderr}"
        );
        // Nothing claimed to listen.
        assert!(String::from_utf8_lossy(&out.stdout).is_empty(), "{args:?}");
    }
}
