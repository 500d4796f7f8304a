//! The `tfdata` binaries with mutual TLS and a bearer token, as real
//! processes: settings by flag and by environment variable, a read through
//! `register`/`read`/`status`, and the clear refusals of clients with the
//! wrong settings (docs/security.md).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

mod common;
#[path = "../../tfdata/tests/common/pki.rs"]
mod pki;

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::process::Process;
use pki::Pki;

const BIN: &str = env!("CARGO_BIN_EXE_tfdata");
const TOKEN: &str = "process-test-token";

/// Every variable the binaries read for security, cleared so the test's
/// own environment cannot leak in.
const SECURITY_VARS: [&str; 8] = [
    "TFDATA_TLS_CA",
    "TFDATA_TLS_CERT",
    "TFDATA_TLS_KEY",
    "TFDATA_TLS_CLIENT_CERT",
    "TFDATA_TLS_CLIENT_KEY",
    "TFDATA_TLS_REQUIRE_CLIENT_CERT",
    "TFDATA_AUTH_TOKEN",
    "TFDATA_AUTH_TOKEN_FILE",
];

fn tfdata(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = Command::new(BIN);
    command.args(args);
    for var in SECURITY_VARS {
        command.env_remove(var);
    }
    command.envs(env.iter().copied());
    command
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A client command that must fail, and fail at once: its stderr.
fn refused(args: &[&str], env: &[(&str, &str)]) -> String {
    let started = Instant::now();
    let out = tfdata(args, env).output().unwrap();
    let (_, stderr) = text(&out);
    assert!(!out.status.success(), "{args:?} succeeded: {stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{args:?} was refused only after {:?}: {stderr}",
        started.elapsed()
    );
    stderr
}

#[test]
fn a_mutual_tls_cluster_with_a_token_through_the_binaries() {
    let pki = Pki::new("tfdata process test CA");
    let dispatcher_id = pki.issue("dispatcher");
    let worker_id = pki.issue("worker");
    let trainer_id = pki.issue("trainer");
    let token_file = pki.dir().join("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).unwrap();
    let ca = path(pki.ca());

    // The dispatcher by flags.
    let (dispatcher, port) = Process::start_command(
        "tfdata",
        tfdata(
            &[
                "dispatcher",
                "--port",
                "0",
                "--tls-cert",
                path(&dispatcher_id.cert),
                "--tls-key",
                path(&dispatcher_id.key),
                "--tls-ca",
                ca,
                "--tls-require-client-cert",
                "--auth-token-file",
                path(&token_file),
            ],
            &[],
        ),
    );
    let address = format!("localhost:{port}");
    let service = format!("grpc://{address}");
    // The worker by environment variables, the token itself included.
    let (worker, _) = Process::start_command(
        "tfdata",
        tfdata(
            &["worker", "--dispatcher-address", &address],
            &[
                ("TFDATA_TLS_CERT", path(&worker_id.cert)),
                ("TFDATA_TLS_KEY", path(&worker_id.key)),
                ("TFDATA_TLS_CA", ca),
                ("TFDATA_TLS_REQUIRE_CLIENT_CERT", "1"),
                ("TFDATA_AUTH_TOKEN", TOKEN),
            ],
        ),
    );

    let client_flags = [
        "--tls-ca",
        ca,
        "--tls-client-cert",
        path(&trainer_id.cert),
        "--tls-client-key",
        path(&trainer_id.key),
        "--auth-token-file",
        path(&token_file),
    ];
    let client_env = [
        ("TFDATA_TLS_CA", ca),
        ("TFDATA_TLS_CLIENT_CERT", path(&trainer_id.cert)),
        ("TFDATA_TLS_CLIENT_KEY", path(&trainer_id.key)),
        ("TFDATA_AUTH_TOKEN", TOKEN),
    ];

    // `status` (by flags) until the worker has registered.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut args = vec!["status", "--dispatcher", &address];
        args.extend(client_flags);
        let out = tfdata(&args, &[]).output().unwrap();
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{stderr}");
        if stdout.contains("Workers (1)") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the worker did not register: {stdout}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }

    // `register` by flags, `read` by environment.
    let pipeline = pki.dir().join("p.json");
    std::fs::write(&pipeline, r#"{"op": "range", "stop": 40}"#).unwrap();
    let mut args = vec![
        "register",
        "--service",
        &service,
        "--pipeline",
        path(&pipeline),
    ];
    args.extend(client_flags);
    let out = tfdata(&args, &[]).output().unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let id = stdout.trim().to_string();
    let read_args = [
        "read",
        "--service",
        &service,
        "--dataset-id",
        &id,
        "--processing-mode",
        "distributed_epoch",
    ];
    let out = tfdata(&read_args, &client_env).output().unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let mut values: Vec<i64> = stdout.lines().map(|l| l.trim().parse().unwrap()).collect();
    values.sort();
    assert_eq!(values, (0..40).collect::<Vec<_>>());

    // Clients with the wrong settings are refused, and say why.
    let without = |drop: &str| -> Vec<(&str, &str)> {
        client_env
            .iter()
            .copied()
            .filter(|(k, _)| *k != drop)
            .collect()
    };
    let stderr = refused(&read_args, &without("TFDATA_AUTH_TOKEN"));
    assert!(stderr.contains("missing bearer token"), "{stderr}");
    let mut wrong_token = without("TFDATA_AUTH_TOKEN");
    wrong_token.push(("TFDATA_AUTH_TOKEN", "guessed"));
    let stderr = refused(&read_args, &wrong_token);
    assert!(stderr.contains("wrong bearer token"), "{stderr}");
    assert!(
        !stderr.contains("guessed"),
        "the token is never printed: {stderr}"
    );
    let stderr = refused(&read_args, &without("TFDATA_TLS_CLIENT_CERT"));
    assert!(stderr.contains("a key without its certificate"), "{stderr}");
    let stderr = refused(
        &read_args,
        &[("TFDATA_TLS_CA", ca), ("TFDATA_AUTH_TOKEN", TOKEN)],
    );
    assert!(stderr.contains("requires a client certificate"), "{stderr}");
    let other = Pki::new("another CA");
    let mut other_ca = without("TFDATA_TLS_CA");
    other_ca.push(("TFDATA_TLS_CA", path(other.ca())));
    let stderr = refused(&read_args, &other_ca);
    assert!(stderr.contains("not signed by a CA in"), "{stderr}");
    let stderr = refused(&read_args, &[("TFDATA_AUTH_TOKEN", TOKEN)]);
    assert!(stderr.contains("requires TLS"), "{stderr}");

    assert!(worker.terminate().success());
    assert!(dispatcher.terminate().success());
}

#[test]
fn incomplete_security_flags_stop_a_server_with_the_reason() {
    let pki = Pki::new("tfdata process test CA");
    let id = pki.issue("server");
    for (args, needle) in [
        (
            vec!["dispatcher", "--port", "0", "--tls-cert", path(&id.cert)],
            "--tls-key",
        ),
        (
            vec![
                "worker",
                "--dispatcher-address",
                "localhost:1",
                "--tls-cert",
                path(&id.cert),
                "--tls-key",
                path(&id.key),
            ],
            "--tls-ca",
        ),
        (
            vec![
                "dispatcher",
                "--port",
                "0",
                "--tls-cert",
                path(&id.key),
                "--tls-key",
                path(&id.key),
                "--tls-ca",
                path(pki.ca()),
            ],
            "holds no PEM certificate",
        ),
    ] {
        let out = tfdata(&args, &[]).output().unwrap();
        let (_, stderr) = text(&out);
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}
