//! A userspace TCP proxy that adds a one-way delay, standing in for `tc
//! netem` (its kernel module is missing here).
//!
//! It runs on the switch (the sandbox's namespace) with one *line* per
//! service: it listens on the service's delayed address (`10.77.1.<n>:port`)
//! and forwards every connection to its real address (`10.77.0.<n>:port`).
//! Each chunk read from one side is written to the other `delay` later, in
//! order, while later chunks keep flowing: a pipe with latency, not a
//! bandwidth cap. Everything is bounded: connections per line, chunk size,
//! and chunks in flight per direction (when that many are on their way, the
//! proxy stops reading and TCP's flow control pushes back on the sender).

use std::net::SocketAddrV4;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Connections one line carries at once; more are refused (closed).
const MAX_CONNECTIONS_PER_LINE: usize = 64;
/// Bytes read at a time.
const CHUNK_BYTES: usize = 64 << 10;
/// Chunks on their way per direction: at most 16 MiB in flight, far above
/// what 50 ms at these rates needs.
const MAX_CHUNKS_IN_FLIGHT: usize = 256;
/// How long connecting to the real address may take.
const CONNECT_LIMIT: Duration = Duration::from_secs(5);

/// What a line carried.
#[derive(Default, Debug)]
pub struct LineStats {
    pub connections: AtomicU64,
    /// Bytes forwarded client → server and server → client.
    pub bytes_up: AtomicU64,
    pub bytes_down: AtomicU64,
    open: AtomicUsize,
}

/// The proxy: its own runtime, its lines, and the delay they add.
pub struct DelayProxy {
    runtime: tokio::runtime::Runtime,
    delay_micros: Arc<AtomicU64>,
}

impl DelayProxy {
    /// A proxy adding `one_way_delay` in each direction of every line.
    pub fn new(one_way_delay: Duration) -> DelayProxy {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("delay-proxy")
            .enable_all()
            .build()
            .expect("the proxy's runtime");
        DelayProxy {
            runtime,
            delay_micros: Arc::new(AtomicU64::new(micros(one_way_delay))),
        }
    }

    /// Changes the delay for data read from now on.
    pub fn set_delay(&self, one_way_delay: Duration) {
        self.delay_micros
            .store(micros(one_way_delay), Ordering::SeqCst);
    }

    /// Listens on `listen` and forwards each connection to `target`.
    pub fn add_line(&self, listen: SocketAddrV4, target: SocketAddrV4) -> Arc<LineStats> {
        let listener = std::net::TcpListener::bind(listen)
            .unwrap_or_else(|e| panic!("delay line cannot listen on {listen}: {e}"));
        listener
            .set_nonblocking(true)
            .expect("non-blocking listener");
        let _entered = self.runtime.enter();
        let listener = TcpListener::from_std(listener).expect("tokio listener");
        let stats = Arc::new(LineStats::default());
        let line_stats = Arc::clone(&stats);
        let delay = Arc::clone(&self.delay_micros);
        self.runtime.spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    // Out of descriptors, say: try again a little later.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                if line_stats.open.load(Ordering::SeqCst) >= MAX_CONNECTIONS_PER_LINE {
                    continue; // dropped: closed at once
                }
                line_stats.connections.fetch_add(1, Ordering::SeqCst);
                line_stats.open.fetch_add(1, Ordering::SeqCst);
                let (stats, delay) = (Arc::clone(&line_stats), Arc::clone(&delay));
                tokio::spawn(async move {
                    forward(client, target, &stats, delay).await;
                    stats.open.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        stats
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Carries one connection until both directions end.
async fn forward(
    client: TcpStream,
    target: SocketAddrV4,
    stats: &LineStats,
    delay: Arc<AtomicU64>,
) {
    let Ok(Ok(server)) = tokio::time::timeout(CONNECT_LIMIT, TcpStream::connect(target)).await
    else {
        return; // the client sees its connection closed, as with a refused one
    };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    tokio::join!(
        pump(
            client_read,
            server_write,
            &stats.bytes_up,
            Arc::clone(&delay)
        ),
        pump(server_read, client_write, &stats.bytes_down, delay),
    );
}

/// Copies `from` to `to`, each chunk `delay` after it was read; shuts `to`'s
/// write side down after `from`'s end (half-close travels with the delay).
async fn pump(
    mut from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    counter: &AtomicU64,
    delay: Arc<AtomicU64>,
) {
    let (tx, mut rx) = mpsc::channel::<(Instant, Vec<u8>)>(MAX_CHUNKS_IN_FLIGHT);
    let read = async move {
        loop {
            let mut chunk = vec![0; CHUNK_BYTES];
            let n = match from.read(&mut chunk).await {
                Ok(0) | Err(_) => return, // dropping tx ends the writer
                Ok(n) => n,
            };
            chunk.truncate(n);
            let due = Instant::now() + Duration::from_micros(delay.load(Ordering::SeqCst));
            if tx.send((due, chunk)).await.is_err() {
                return;
            }
        }
    };
    let write = async move {
        while let Some((due, chunk)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            if to.write_all(&chunk).await.is_err() {
                return; // rx dropped: the reader stops at its next send
            }
            counter.fetch_add(chunk.len() as u64, Ordering::Relaxed);
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(read, write);
}
