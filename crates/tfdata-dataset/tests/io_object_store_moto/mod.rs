//! A real S3-compatible server for the object-store tests: `moto_server`
//! (moto, from PyPI) on a free local port, installed on first use.
//!
//! moto is installed into a virtualenv outside the repository,
//! `$TFDATA_MOTO_DIR` or `~/.cache/tfdata-moto/` (`python3 -m venv` + pip;
//! about 30 s once). `TFDATA_MOTO_SERVER` may name an existing
//! `moto_server` instead. An install lock keeps concurrent test processes
//! from installing twice.
//!
//! Without Python's `venv` and `pip`, or without PyPI, moto cannot be
//! installed: [`Moto::start`] then returns `None` after printing
//! `SKIPPED: ...` (under `CI=true` it fails instead; see `optional_tool`).
//!
//! The server runs under a small `sh` wrapper that kills it when the wrapper's
//! stdin closes: dropping a [`Moto`] closes it, and so does the test
//! process dying any other way, so no server outlives its test.

#![allow(dead_code)] // each test binary uses part of the harness

#[path = "../optional_tool/mod.rs"]
mod optional_tool;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use tfdata_dataset::io::ObjectStoreFileSystem;

/// Credentials moto accepts (any are fine; these are its documented ones).
pub const ACCESS_KEY: &str = "testing";
pub const SECRET_KEY: &str = "testing";
pub const REGION: &str = "us-east-1";

/// A running moto server, stopped on drop.
pub struct Moto {
    child: Child,
    stdin: Option<ChildStdin>,
    port: u16,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Moto {
    /// Starts a server (installing moto first if needed) and waits until it
    /// answers HTTP; `None` when moto cannot be installed here (the test
    /// then returns, skipped).
    pub fn start() -> Option<Moto> {
        Self::start_with_env(&[])
    }

    /// [`Moto::start`] with extra environment for the server, e.g.
    /// `INITIAL_NO_AUTH_ACTION_COUNT=0` to make it check credentials.
    pub fn start_with_env(env: &[(&str, &str)]) -> Option<Moto> {
        let server = match moto_server() {
            Ok(server) => server,
            Err(why) => {
                optional_tool::missing(
                    &optional_tool::current_test(),
                    &format!("moto (the S3 server) could not be installed: {why}"),
                    "python3-venv and pip with access to PyPI, or set TFDATA_MOTO_SERVER",
                );
                return None;
            }
        };
        let mut last_error = String::new();
        // A free port can be taken between probing and binding; retry.
        for _ in 0..3 {
            match Self::try_start(&server, env) {
                Ok(moto) => return Some(moto),
                Err(e) => last_error = e,
            }
        }
        panic!("moto_server did not start: {last_error}");
    }

    fn try_start(server: &PathBuf, env: &[(&str, &str)]) -> Result<Moto, String> {
        let port = free_port();
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let log = dir.path().join("moto.log");
        // fd 3 keeps the real stdin: an asynchronous list's own stdin is
        // /dev/null. When it closes (drop, or this process dying), the
        // watcher kills the server; `wait` ends the wrapper with it.
        let script = r#"exec 3<&0
"$0" -H 127.0.0.1 -p "$1" >"$2" 2>&1 </dev/null &
pid=$!
( read -r _ <&3; kill "$pid" 2>/dev/null ) &
wait "$pid""#;
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg(server)
            .arg(port.to_string())
            .arg(&log)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("spawning sh for {}: {e}", server.display()))?;
        let stdin = child.stdin.take();
        let mut moto = Moto {
            child,
            stdin,
            port,
            log,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(Some(status)) = moto.child.try_wait() {
                return Err(format!(
                    "moto_server exited ({status}): {}",
                    moto.log_text()
                ));
            }
            if let Ok(reply) = http(port, "GET", "/")
                && reply.starts_with("HTTP/1.")
            {
                return Ok(moto);
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "moto_server not answering on port {port} after 30 s: {}",
                    moto.log_text()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `http://127.0.0.1:port`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Creates a bucket with a raw, unsigned `PUT /bucket` (moto does not
    /// check signatures; `object_store` has no bucket API).
    pub fn create_bucket(&self, bucket: &str) {
        let reply = http(self.port, "PUT", &format!("/{bucket}")).expect("create bucket");
        assert!(
            reply.starts_with("HTTP/1.1 200") || reply.starts_with("HTTP/1.0 200"),
            "creating bucket {bucket}: {reply}"
        );
    }

    /// Wipes every bucket and object (moto's `POST /moto-api/reset`): the
    /// store's data gone at once, as when a bucket is deleted under a
    /// running job.
    pub fn reset(&self) {
        let reply = http(self.port, "POST", "/moto-api/reset").expect("reset moto");
        assert!(
            reply.starts_with("HTTP/1.1 200") || reply.starts_with("HTTP/1.0 200"),
            "resetting moto: {reply}"
        );
    }

    /// The `object_store` options pointing at this server.
    pub fn options(&self) -> Vec<(&'static str, String)> {
        vec![
            ("aws_endpoint", self.endpoint()),
            ("aws_access_key_id", ACCESS_KEY.into()),
            ("aws_secret_access_key", SECRET_KEY.into()),
            ("aws_region", REGION.into()),
            ("aws_allow_http", "true".into()),
        ]
    }

    /// A file system using this server for every `s3://` bucket, ignoring
    /// the process environment (tests run in parallel threads, and a
    /// developer's real AWS variables must not leak in).
    pub fn file_system(&self) -> ObjectStoreFileSystem {
        ObjectStoreFileSystem::without_env()
            .with_options(self.options())
            .expect("valid options")
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        // EOF on the wrapper's stdin stops the server, then the wrapper.
        drop(self.stdin.take());
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A port nothing listens on right now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// One HTTP/1.1 request with an empty body; the whole reply as text.
fn http(port: u16, method: &str, path: &str) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\n\
         Connection: close\r\n\r\n"
    )?;
    let mut reply = String::new();
    stream.read_to_string(&mut reply)?;
    Ok(reply)
}

/// The `moto_server` to run, installing moto if needed.
/// The `moto_server` to run, installed on first use; why not, if it
/// cannot be installed. Decided once per test process, so a machine
/// without PyPI pays for one failed install, not one per test.
fn moto_server() -> Result<PathBuf, String> {
    static SERVER: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    SERVER.get_or_init(install_moto_server).clone()
}

fn install_moto_server() -> Result<PathBuf, String> {
    if let Some(server) = std::env::var_os("TFDATA_MOTO_SERVER") {
        return Ok(server.into());
    }
    let dir = match std::env::var_os("TFDATA_MOTO_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => {
            let cache = std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
                .expect("HOME or XDG_CACHE_HOME is set");
            cache.join("tfdata-moto")
        }
    };
    let venv = dir.join("venv");
    let server = venv.join("bin").join("moto_server");
    let done = venv.join(".tfdata-installed");
    if done.exists() {
        return Ok(server);
    }
    std::fs::create_dir_all(&dir).expect("create the moto cache directory");
    // Other test threads and processes wait here for one install.
    let lock = std::fs::File::create(dir.join(".lock")).expect("create the install lock");
    lock.lock().expect("take the install lock");
    if done.exists() {
        return Ok(server);
    }
    // A venv without the marker is a failed install: start over.
    let _ = std::fs::remove_dir_all(&venv);
    eprintln!("installing moto into {} (once)", venv.display());
    run(Command::new("python3").arg("-m").arg("venv").arg(&venv))?;
    run(Command::new(venv.join("bin").join("python"))
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .arg("moto[server]>=5,<6"))?;
    assert!(
        server.exists(),
        "{} missing after install",
        server.display()
    );
    std::fs::write(&done, b"").expect("mark the install done");
    Ok(server)
}

/// Runs one install step; its output as the error if it fails.
fn run(command: &mut Command) -> Result<(), String> {
    let out = command
        .output()
        .map_err(|e| format!("running {command:?}: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    Err(format!(
        "{command:?} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}
