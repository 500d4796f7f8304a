//! Telling a dead peer from a slow one. A process that died leaves its host
//! answering for it: the kernel resets the process's connections and refuses
//! new ones on its port. A peer that is only slow, paused (SIGSTOP) or cut
//! off by the network does neither: its host still accepts connections (a
//! stopped process's kernel queues them), or nothing answers at all. So a
//! refused connection is evidence of death and a timeout is not; readers
//! report the first (`is_refused`) and the dispatcher confirms it with its
//! own [`probe`] before it declares a worker lost.

use std::time::Duration;

/// Whether `status` failed because the peer's host refused the connection
/// (nothing listens on its port any more).
pub fn is_refused(status: &tonic::Status) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(status);
    // Bounded: error chains are a few links long.
    for _ in 0..16 {
        let Some(err) = source else {
            break;
        };
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return true;
        }
        source = err.source();
    }
    false
}

/// What a [`probe`] of an address found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// Something accepted the connection: the process (or a new one) is
    /// there, perhaps slow or paused.
    Accepted,
    /// The host refused the connection: nothing listens on the port.
    Refused,
    /// No answer in time, or no route: nothing can be concluded.
    Unknown,
}

/// Opens (and closes) one TCP connection to `address` (`host:port`), every
/// address its host resolves to in turn, within `timeout` in all.
pub async fn probe(address: &str, timeout: Duration) -> Probe {
    let attempt = async {
        let Ok(addrs) = tokio::net::lookup_host(address).await else {
            return Probe::Unknown;
        };
        let mut outcome = Probe::Unknown;
        for addr in addrs.take(16) {
            match tokio::net::TcpStream::connect(addr).await {
                Ok(_) => return Probe::Accepted,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                    outcome = Probe::Refused;
                }
                // Unreachable, or another error: it says nothing of the
                // process, and another address may still accept.
                Err(_) => return Probe::Unknown,
            }
        }
        outcome
    };
    tokio::time::timeout(timeout, attempt)
        .await
        .unwrap_or(Probe::Unknown)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::ClientSecurity;

    fn closed_port() -> u16 {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    }

    #[tokio::test]
    async fn a_call_to_a_closed_port_is_refused_one_to_a_silent_listener_is_not() {
        let port = closed_port();
        let address = format!("127.0.0.1:{port}");
        let channel = crate::channel::channel(&address, &ClientSecurity::default()).unwrap();
        let mut client = crate::channel::worker_client(channel);
        let status = client
            .get_worker_tasks(tfdata_proto::data::GetWorkerTasksRequest::default())
            .await
            .unwrap_err();
        assert!(is_refused(&status), "{status:?}");
        assert_eq!(
            probe(&address, Duration::from_secs(2)).await,
            Probe::Refused
        );
        // The element stream's own call path too.
        let channel = crate::channel::channel(&address, &ClientSecurity::default()).unwrap();
        let stream = crate::channel::open_element_stream(channel, futures::stream::pending())
            .await
            .err()
            .unwrap();
        assert!(is_refused(&stream), "{stream:?}");

        // A listener that never answers (a paused process's port): the
        // connection is accepted, the call times out, nothing is refused.
        let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = silent.local_addr().unwrap().to_string();
        let channel = crate::channel::channel(&address, &ClientSecurity::default()).unwrap();
        let mut client = crate::channel::worker_client(channel);
        let mut request = tonic::Request::new(tfdata_proto::data::GetWorkerTasksRequest::default());
        request.set_timeout(Duration::from_millis(300));
        let status = client.get_worker_tasks(request).await.unwrap_err();
        assert!(!is_refused(&status), "{status:?}");
        assert_eq!(
            probe(&address, Duration::from_secs(2)).await,
            Probe::Accepted
        );
        assert!(!is_refused(&tonic::Status::unavailable(
            "connection refused"
        )));
    }
}
