//! Transport security over real sockets: TLS and mutual TLS between the
//! dispatcher, workers and readers, the bearer token on every service,
//! and the clear refusals of everything else (docs/security.md).
//! Certificates are made at test time.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code

mod common;
#[path = "common/pki.rs"]
mod pki;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use pki::Pki;
use tfdata::{
    Dataset, DispatchServer, DispatcherConfig, ProcessingMode, WorkerConfig, WorkerServer,
    distribute,
};
use tfdata_proto::data as wire;
use tfdata_rpc::security::{TlsConfig, TransportSecurity};
use tonic::Code;

const TOKEN: &str = "s3cret-token.for_tests";

/// A dispatcher with `security` and one worker per entry of `workers`,
/// all registered.
fn cluster(
    security: TransportSecurity,
    workers: Vec<(TransportSecurity, bool)>,
) -> (DispatchServer, Vec<WorkerServer>) {
    let dispatcher = DispatchServer::new(DispatcherConfig {
        security,
        ..Default::default()
    })
    .unwrap();
    let workers: Vec<WorkerServer> = workers
        .into_iter()
        .map(|(security, element_stream)| {
            let mut config = WorkerConfig::new(dispatcher.address());
            config.security = security;
            config.element_stream = element_stream;
            WorkerServer::new(config).unwrap()
        })
        .collect();
    common::wait_for_these_workers(&dispatcher, &workers);
    (dispatcher, workers)
}

fn read_all(
    dispatcher: &DispatchServer,
    mode: ProcessingMode,
    n: i64,
    security: TransportSecurity,
) -> tfdata::Result<Vec<i64>> {
    let ds = distribute(mode, &dispatcher.target())
        .security(security)
        .dispatcher_timeout(Duration::from_secs(30))
        .apply(&Dataset::range(n))?;
    let mut values = ds
        .iter()?
        .map(|e| e.map(|e| e.components[0].to_scalar::<i64>().unwrap()))
        .collect::<tfdata::Result<Vec<i64>>>()?;
    values.sort();
    Ok(values)
}

/// A read that must be refused, and refused at once (not after retrying
/// until its deadline): its error.
fn refused_read(dispatcher: &DispatchServer, security: TransportSecurity) -> tfdata::Error {
    let started = Instant::now();
    let err = read_all(dispatcher, ProcessingMode::ParallelEpochs, 10, security).unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "refused only after {:?}: {err}",
        started.elapsed()
    );
    assert!(!err.is_retryable(), "{err}");
    eprintln!("refused: {err}");
    err
}

#[test]
fn a_tls_cluster_with_a_token_reads_every_element_both_ways() {
    let pki = Pki::new("tfdata test CA");
    // One worker streams, the other serves GetElement only; both take
    // splits from the dispatcher (distributed_epoch), over TLS.
    let (dispatcher, _workers) = cluster(
        pki.server("dispatcher", false, Some(TOKEN)),
        vec![
            (pki.server("w1", false, Some(TOKEN)), true),
            (pki.server("w2", false, Some(TOKEN)), false),
        ],
    );
    let values = read_all(
        &dispatcher,
        ProcessingMode::DistributedEpoch,
        300,
        pki.reader(None, Some(TOKEN)),
    )
    .unwrap();
    assert_eq!(values, (0..300).collect::<Vec<_>>());
    // Every worker got its task pushed or heartbeated over TLS, and the
    // parallel-epochs read gets each element once per worker.
    let values = read_all(
        &dispatcher,
        ProcessingMode::ParallelEpochs,
        50,
        pki.reader(None, Some(TOKEN)),
    )
    .unwrap();
    let twice: Vec<i64> = (0..50).flat_map(|v| [v, v]).collect();
    assert_eq!(values, twice);
}

#[test]
fn mutual_tls_reads_with_a_client_certificate_and_refuses_readers_without_one() {
    let pki = Pki::new("tfdata test CA");
    let (dispatcher, _workers) = cluster(
        pki.server("dispatcher", true, None),
        vec![(pki.server("worker", true, None), true)],
    );
    let reader = pki.reader(Some(pki.issue("trainer")), None);
    let values = read_all(&dispatcher, ProcessingMode::ParallelEpochs, 20, reader).unwrap();
    assert_eq!(values, (0..20).collect::<Vec<_>>());

    let err = refused_read(&dispatcher, pki.reader(None, None));
    assert_eq!(err.code(), Code::Unauthenticated, "{err}");
    assert!(
        err.to_string().contains("requires a client certificate"),
        "{err}"
    );

    // A certificate from another CA is no better.
    let stranger = Pki::new("another CA");
    let mut reader = pki.reader(None, None);
    reader.tls.as_mut().unwrap().client_identity = Some(stranger.issue("intruder"));
    let err = refused_read(&dispatcher, reader);
    assert_eq!(err.code(), Code::Unauthenticated, "{err}");
    assert!(
        err.to_string()
            .contains("refused this client's certificate"),
        "{err}"
    );
}

#[test]
fn a_reader_trusting_another_ca_is_refused_with_the_reason() {
    let pki = Pki::new("tfdata test CA");
    let (dispatcher, _workers) = cluster(pki.server("dispatcher", false, None), vec![]);
    let other = Pki::new("another CA");
    let err = refused_read(&dispatcher, other.reader(None, None));
    assert_eq!(err.code(), Code::Unauthenticated, "{err}");
    let message = err.to_string();
    assert!(
        message.contains("TLS handshake with localhost:"),
        "{message}"
    );
    assert!(
        message.contains(&format!("not signed by a CA in {}", other.ca().display())),
        "{message}"
    );
}

#[test]
fn a_server_certificate_for_another_host_is_refused() {
    let pki = Pki::new("tfdata test CA");
    let elsewhere = pki.issue_for("elsewhere", &["data.example.org"]);
    let security = TransportSecurity {
        tls: Some(pki.tls(Some(elsewhere), false)),
        auth_token: None,
    };
    let (dispatcher, _workers) = cluster(security, vec![]);
    let err = refused_read(&dispatcher, pki.reader(None, None));
    assert_eq!(err.code(), Code::Unauthenticated, "{err}");
    assert!(err.to_string().contains("does not name the host"), "{err}");
}

#[test]
fn readers_without_the_token_or_with_a_wrong_one_are_unauthenticated() {
    let pki = Pki::new("tfdata test CA");
    let (dispatcher, _workers) = cluster(
        pki.server("dispatcher", false, Some(TOKEN)),
        vec![(pki.server("worker", false, Some(TOKEN)), true)],
    );
    let err = refused_read(&dispatcher, pki.reader(None, None));
    assert_eq!(err.code(), Code::Unauthenticated, "{err}");
    assert!(err.to_string().contains("missing bearer token"), "{err}");
    let err = refused_read(&dispatcher, pki.reader(None, Some("not-the-token")));
    assert_eq!(err.code(), Code::Unauthenticated, "{err}");
    assert!(err.to_string().contains("wrong bearer token"), "{err}");
    // The token never shows in what the reader reports.
    assert!(!err.to_string().contains("not-the-token"), "{err}");
}

#[test]
fn a_token_alone_works_over_plaintext() {
    let (dispatcher, _workers) =
        cluster(pki::token_only(TOKEN), vec![(pki::token_only(TOKEN), true)]);
    let values = read_all(
        &dispatcher,
        ProcessingMode::ParallelEpochs,
        10,
        pki::token_only(TOKEN),
    )
    .unwrap();
    assert_eq!(values, (0..10).collect::<Vec<_>>());
    let err = refused_read(&dispatcher, TransportSecurity::plaintext());
    assert!(err.to_string().contains("missing bearer token"), "{err}");
}

/// Calls each service of a dispatcher and a worker directly: the
/// dispatcher's, the status service, the worker's and its element stream
/// all refuse a call without the token, and take one with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_service_checks_the_token() {
    use tfdata_proto::tfdata::status::{
        GetStatusRequest, status_service_client::StatusServiceClient,
    };
    use tfdata_proto::tfdata::stream::StreamRequest;
    use tfdata_rpc::channel::{channel, dispatcher_client, open_element_stream, worker_client};

    let pki = Pki::new("tfdata test CA");
    let dispatcher_security = pki.server("dispatcher", false, Some(TOKEN));
    let worker_security = pki.server("worker", false, Some(TOKEN));
    let (dispatcher, workers) = tokio::task::spawn_blocking(move || {
        cluster(dispatcher_security, vec![(worker_security, true)])
    })
    .await
    .unwrap();
    let worker = workers[0].address().to_string();

    for (token, expect_refusal) in [(None, true), (Some("wrong"), true), (Some(TOKEN), false)] {
        let security = pki.reader(None, token).client().unwrap();
        let refused = |code: tonic::Code, what: &str| {
            assert_eq!(
                code == tonic::Code::Unauthenticated,
                expect_refusal,
                "{what} with token {token:?}: {code:?}"
            );
        };
        let to_dispatcher = channel(&dispatcher.address(), &security).unwrap();
        let version = dispatcher_client(to_dispatcher.clone())
            .get_version(wire::GetVersionRequest {})
            .await;
        refused(
            version.as_ref().err().map_or(tonic::Code::Ok, |s| s.code()),
            "GetVersion",
        );
        let status = StatusServiceClient::new(to_dispatcher)
            .get_status(GetStatusRequest {})
            .await;
        refused(
            status.as_ref().err().map_or(tonic::Code::Ok, |s| s.code()),
            "GetStatus",
        );
        let to_worker = channel(&worker, &security).unwrap();
        let element = worker_client(to_worker.clone())
            .get_element(wire::GetElementRequest {
                task_id: 12345,
                ..Default::default()
            })
            .await;
        // With the token, the worker answers (it has no such task).
        refused(element.err().unwrap().code(), "GetElement");
        let open = StreamRequest {
            task_id: 12345,
            credit_elements: 1,
            credit_bytes: 1,
            ..Default::default()
        };
        let stream = open_element_stream(to_worker, futures::stream::iter(vec![open])).await;
        refused(
            stream.err().map_or(tonic::Code::Ok, |s| s.code()),
            "StreamElements",
        );
    }
}

#[test]
fn a_plaintext_client_is_refused_by_a_tls_server_with_the_reason() {
    let pki = Pki::new("tfdata test CA");
    let (dispatcher, _workers) = cluster(pki.server("dispatcher", false, None), vec![]);
    let err = refused_read(&dispatcher, TransportSecurity::plaintext());
    assert_eq!(err.code(), Code::Unauthenticated, "{err}");
    assert!(
        err.to_string()
            .contains("requires TLS and this client connects in plaintext"),
        "{err}"
    );
}

#[test]
fn a_tls_client_is_refused_by_a_plaintext_server_with_the_reason() {
    let (dispatcher, _workers) = cluster(TransportSecurity::plaintext(), vec![]);
    let pki = Pki::new("tfdata test CA");
    let err = refused_read(&dispatcher, pki.reader(None, None));
    assert_eq!(err.code(), Code::Unauthenticated, "{err}");
    let message = err.to_string();
    assert!(
        message.contains("TLS handshake with localhost:")
            && message.contains("the server does not speak TLS"),
        "{message}"
    );
}

/// HTTP/2 frames as (type, flags, stream, payload).
fn frames(mut bytes: &[u8]) -> Vec<(u8, u8, u32, Vec<u8>)> {
    let mut out = Vec::new();
    while bytes.len() >= 9 {
        let length = u32::from_be_bytes([0, bytes[0], bytes[1], bytes[2]]) as usize;
        let stream = u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]) & 0x7fff_ffff;
        let end = (9 + length).min(bytes.len());
        out.push((bytes[3], bytes[4], stream, bytes[9..end].to_vec()));
        bytes = &bytes[end..];
    }
    out
}

/// A gRPC call written by hand in cleartext HTTP/2 (prior knowledge):
/// `GetVersion` on stream 1. Returns every byte the server sends back
/// until it closes the connection (or 5 s pass).
fn plaintext_get_version(port: u16) -> Vec<u8> {
    fn literal(block: &mut Vec<u8>, name: &str, value: &str) {
        // "Literal header field without indexing, new name", no Huffman.
        block.push(0);
        block.push(name.len() as u8);
        block.extend_from_slice(name.as_bytes());
        block.push(value.len() as u8);
        block.extend_from_slice(value.as_bytes());
    }
    fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
        out.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
        out.extend_from_slice(&[kind, flags]);
        out.extend_from_slice(&stream.to_be_bytes());
        out.extend_from_slice(payload);
    }
    let mut headers = Vec::new();
    literal(&mut headers, ":method", "POST");
    literal(&mut headers, ":scheme", "http");
    literal(
        &mut headers,
        ":path",
        "/tensorflow.data.DispatcherService/GetVersion",
    );
    literal(&mut headers, ":authority", "localhost");
    literal(&mut headers, "content-type", "application/grpc");
    literal(&mut headers, "te", "trailers");
    let mut request = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    frame(&mut request, 0x4, 0, 0, &[]); // SETTINGS
    frame(&mut request, 0x1, 0x4, 1, &headers); // HEADERS, END_HEADERS
    frame(&mut request, 0x0, 0x1, 1, &[0, 0, 0, 0, 0]); // DATA: an empty message, END_STREAM

    let mut socket = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    socket.write_all(&request).unwrap();
    let mut received = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut buf = [0u8; 4096];
    while Instant::now() < deadline {
        match socket.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => received.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                // A plaintext server keeps the connection open: done once
                // its answer (HEADERS with END_STREAM, trailers) came.
                if frames(&received).iter().any(|(kind, flags, stream, _)| {
                    *kind == 0x1 && *stream == 1 && flags & 0x1 != 0
                }) {
                    break;
                }
            }
            Err(_) => break,
        }
    }
    received
}

/// Whether `received` holds any answer on a stream (HEADERS or DATA).
fn answers_a_stream(received: &[u8]) -> bool {
    frames(received)
        .iter()
        .any(|(kind, _, stream, _)| (*kind == 0x0 || *kind == 0x1) && *stream != 0)
}

#[test]
fn a_tls_port_answers_nothing_in_plaintext() {
    // The probe is a real call: a plaintext dispatcher answers it.
    let (plain, _) = cluster(TransportSecurity::plaintext(), vec![]);
    let answer = plaintext_get_version(plain.port());
    assert!(
        answers_a_stream(&answer),
        "no answer from a plaintext server"
    );

    let pki = Pki::new("tfdata test CA");
    let (dispatcher, workers) = cluster(
        pki.server("dispatcher", false, None),
        vec![(pki.server("worker", false, None), true)],
    );
    for port in [dispatcher.port(), workers[0].port()] {
        let received = plaintext_get_version(port);
        assert!(!answers_a_stream(&received), "answered in plaintext");
        // Only the refusal: SETTINGS, then GOAWAY with INADEQUATE_SECURITY.
        let kinds: Vec<u8> = frames(&received).iter().map(|f| f.0).collect();
        assert_eq!(kinds, vec![0x4, 0x7], "{received:?}");
        let goaway = &frames(&received)[1].3;
        assert_eq!(&goaway[4..8], &[0, 0, 0, 0xc], "INADEQUATE_SECURITY");
        assert!(String::from_utf8_lossy(&goaway[8..]).contains("requires TLS"));

        // HTTP/1.1 gets the connection closed and not one byte.
        let mut socket = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        socket
            .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
            .unwrap();
        let mut rest = Vec::new();
        let read = socket.read_to_end(&mut rest);
        assert!(read.is_ok(), "the server should close: {read:?}");
        assert!(rest.is_empty(), "{:?}", String::from_utf8_lossy(&rest));
    }
    // And the TLS port still serves TLS readers.
    let values = read_all(
        &dispatcher,
        ProcessingMode::ParallelEpochs,
        5,
        pki.reader(None, None),
    )
    .unwrap();
    assert_eq!(values, (0..5).collect::<Vec<_>>());
}

#[test]
fn a_worker_with_the_wrong_token_stops_with_the_reason() {
    let pki = Pki::new("tfdata test CA");
    let dispatcher = DispatchServer::new(DispatcherConfig {
        security: pki.server("dispatcher", false, Some(TOKEN)),
        ..Default::default()
    })
    .unwrap();
    let mut config = WorkerConfig::new(dispatcher.address());
    config.security = pki.server("worker", false, Some("not-the-token"));
    let worker = WorkerServer::new(config).unwrap();
    let err = worker
        .join_timeout(Duration::from_secs(20))
        .expect("the worker should stop")
        .unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated, "{err}");
    assert!(err.to_string().contains("wrong bearer token"), "{err}");
    assert_eq!(dispatcher.num_workers(), 0);
}

#[test]
fn unusable_certificate_files_are_config_errors_naming_the_file() {
    let pki = Pki::new("tfdata test CA");
    let good = pki.issue("good");
    let other = pki.issue("other");
    let garbage = pki.dir().join("garbage.pem");
    std::fs::write(&garbage, "not a certificate").unwrap();
    let start = |tls: TlsConfig| {
        DispatchServer::new(DispatcherConfig {
            security: TransportSecurity {
                tls: Some(tls),
                auth_token: None,
            },
            ..Default::default()
        })
        .err()
        .expect("the dispatcher should not start")
    };
    let missing = pki.dir().join("missing.pem");
    let mut tls = pki.tls(Some(good.clone()), false);
    tls.identity.as_mut().unwrap().cert = missing.clone();
    let err = start(tls).to_string();
    assert!(
        err.contains("tls_cert") && err.contains(&missing.display().to_string()),
        "{err}"
    );

    let mut tls = pki.tls(Some(good.clone()), false);
    tls.identity.as_mut().unwrap().cert = garbage.clone();
    let err = start(tls).to_string();
    assert!(err.contains("holds no PEM certificate"), "{err}");

    let mut tls = pki.tls(Some(good.clone()), false);
    tls.identity.as_mut().unwrap().key = other.key.clone();
    let err = start(tls).to_string();
    assert!(err.contains("do not make an identity"), "{err}");

    let mut tls = pki.tls(Some(good), false);
    tls.ca = garbage;
    let err = start(tls).to_string();
    assert!(
        err.contains("tls_ca") && err.contains("holds no PEM certificate"),
        "{err}"
    );

    // A server needs its own certificate.
    let err = start(pki.tls(None, false)).to_string();
    assert!(err.contains("--tls-cert"), "{err}");
}

/// A GET over HTTPS trusting `ca`, with `token` if given: the status code
/// and body, or why the connection failed.
fn https_get(
    port: u16,
    ca: &std::path::Path,
    token: Option<&str>,
    path: &str,
) -> Result<(u16, String), String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio_rustls::rustls::pki_types::pem::PemObject;
    use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};
    use tokio_rustls::rustls::{ClientConfig, RootCertStore};
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = std::sync::Arc::new(tokio_rustls::rustls::crypto::aws_lc_rs::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let request = format!(
        "GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n{}\r\n",
        token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"))
    );
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(async {
            let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .map_err(|e| e.to_string())?;
            let mut tls = connector
                .connect(ServerName::try_from("localhost").unwrap(), tcp)
                .await
                .map_err(|e| e.to_string())?;
            tls.write_all(request.as_bytes())
                .await
                .map_err(|e| e.to_string())?;
            let mut response = Vec::new();
            tls.read_to_end(&mut response)
                .await
                .map_err(|e| e.to_string())?;
            let response = String::from_utf8_lossy(&response).into_owned();
            let (head, body) = response
                .split_once("\r\n\r\n")
                .ok_or_else(|| format!("not an HTTP response: {response:?}"))?;
            let code = head
                .split(' ')
                .nth(1)
                .and_then(|c| c.parse().ok())
                .ok_or_else(|| format!("no status in {head:?}"))?;
            Ok((code, body.to_string()))
        })
}

/// What a plaintext HTTP/1.1 GET gets back: every byte the server sent
/// before closing (nothing, from a TLS port).
fn plaintext_http_get(port: u16, path: &str) -> Vec<u8> {
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
        .write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
        .unwrap();
    let mut received = Vec::new();
    let _ = stream.read_to_end(&mut received);
    received
}

/// With TLS configured, the admin endpoint is HTTPS with the server's own
/// certificate (and never plaintext); the token guards everything but the
/// probes' paths; client certificates are not required there even with
/// mutual TLS on gRPC, since kubelet probes cannot present one.
#[test]
fn the_admin_endpoint_is_https_and_checks_the_token_but_not_on_probes() {
    let pki = Pki::new("tfdata test CA");
    let dispatcher = DispatchServer::new(DispatcherConfig {
        security: pki.server("dispatcher", true, Some(TOKEN)),
        http_port: Some(0),
        ..Default::default()
    })
    .unwrap();
    let mut config = WorkerConfig::new(dispatcher.address());
    config.security = pki.server("worker", true, Some(TOKEN));
    config.http_port = Some(0);
    let worker = WorkerServer::new(config).unwrap();
    common::wait_for_workers(&dispatcher, 1);
    for (role, port) in [
        ("dispatcher", dispatcher.http_port().unwrap()),
        ("worker", worker.http_port().unwrap()),
    ] {
        // Probes: no token, no client certificate.
        assert_eq!(
            https_get(port, pki.ca(), None, "/healthz"),
            Ok((200, "ok\n".to_string())),
            "{role}"
        );
        let (code, _) = https_get(port, pki.ca(), None, "/readyz").unwrap();
        assert!(code == 200 || code == 503, "{role}: {code}");
        // The data: only with the token.
        assert_eq!(
            https_get(port, pki.ca(), None, "/metrics").unwrap().0,
            401,
            "{role}"
        );
        assert_eq!(
            https_get(port, pki.ca(), Some("not-the-token"), "/metrics")
                .unwrap()
                .0,
            401,
            "{role}"
        );
        let (code, body) = https_get(port, pki.ca(), Some(TOKEN), "/metrics").unwrap();
        assert_eq!(code, 200, "{role}: {body}");
        assert!(body.contains(&format!("tfdata_{role}_")), "{role}: {body}");
        // A client trusting another CA does not get through the handshake.
        let other = Pki::new("another CA");
        let err = https_get(port, other.ca(), Some(TOKEN), "/healthz").unwrap_err();
        assert!(err.to_lowercase().contains("certificate"), "{role}: {err}");
        // Nothing in plaintext, not even the probes.
        let answer = plaintext_http_get(port, "/healthz");
        assert!(
            !String::from_utf8_lossy(&answer).contains("HTTP/1.1"),
            "{role} answered plaintext HTTP: {:?}",
            String::from_utf8_lossy(&answer)
        );
    }
}

/// One of the addresses a name resolves to (`channel_via`, what a client
/// does with a name that has several): the connection goes to that address
/// and TLS still checks the certificate against the name. A name nothing
/// resolves is reached all the same; a certificate that does not name it is
/// refused, as for any name.
#[test]
fn a_channel_to_one_of_a_names_addresses_checks_the_certificate_against_the_name() {
    let pki = Pki::new("tfdata test CA");
    let group = pki.issue_for("group", &["dispatchers.tfdata.test"]);
    let (dispatcher, _workers) = cluster(
        TransportSecurity {
            tls: Some(pki.tls(Some(group), false)),
            auth_token: None,
        },
        vec![],
    );
    let (plain, _) = cluster(TransportSecurity::default(), vec![]);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let version = |name: &str, port: u16, security: &TransportSecurity| {
        let via = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let security = security.client().unwrap();
        rt.block_on(async {
            let channel =
                tfdata_rpc::channel::channel_via(&format!("{name}:{port}"), Some(via), &security)
                    .unwrap();
            tfdata_rpc::channel::dispatcher_client(channel)
                .get_version(wire::GetVersionRequest {})
                .await
                .map(|r| r.into_inner().version)
        })
    };
    let reader = pki.reader(None, None);
    let version_9 = version("dispatchers.tfdata.test", dispatcher.port(), &reader).unwrap();
    assert_eq!(version_9, tfdata_proto::DATA_SERVICE_VERSION);
    let err = version("elsewhere.tfdata.test", dispatcher.port(), &reader).unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated, "{err}");
    assert!(err.message().contains("does not name the host"), "{err}");
    let plaintext = TransportSecurity::default();
    assert_eq!(
        version("no-such-name.invalid", plain.port(), &plaintext).unwrap(),
        tfdata_proto::DATA_SERVICE_VERSION
    );
}
