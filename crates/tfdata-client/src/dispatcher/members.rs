//! The dispatchers an address names, one client each: every
//! comma-separated `host:port`, and a host name that resolves to several
//! addresses (DNS with several records, a Kubernetes headless Service over a
//! high-availability group) as one dispatcher per address.
//!
//! Names are resolved before the first call, and again once a call to every
//! member in turn has failed `UNAVAILABLE` (the group may have moved to new
//! addresses), at most once per [`RESOLVE_INTERVAL`]. A name that resolves
//! to one address, or does not resolve (yet), stays one member whose channel
//! resolves it on each connection, as a single address always did. A member
//! that stays across resolutions keeps its channel. IP addresses are never
//! resolved.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tfdata_core::Result;
use tfdata_proto::data::dispatcher_service_client::DispatcherServiceClient;
use tfdata_rpc::security::{ClientSecurity, RpcChannel};
use tokio::time::Instant;

use super::MAX_DISPATCHER_ADDRESSES;

/// Least time between two resolutions of the names.
pub const RESOLVE_INTERVAL: Duration = Duration::from_secs(1);
/// Bound on one resolution of one name.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

/// One dispatcher: an entry of the address, and the socket address its name
/// resolved to when it resolved to several.
pub(crate) struct Member {
    /// `host:port`, or `host:port (ip:port)` for one of a name's addresses.
    pub label: String,
    entry: usize,
    via: Option<SocketAddr>,
    pub client: DispatcherServiceClient<RpcChannel>,
}

pub(crate) struct Members {
    /// The `host:port`s as given.
    entries: Vec<String>,
    /// Whether any entry is a name (else nothing is ever resolved).
    names: bool,
    security: ClientSecurity,
    list: RwLock<Arc<[Arc<Member>]>>,
    /// Resolve before the next call: nothing was resolved yet, or every
    /// member failed in a row.
    stale: AtomicBool,
    /// When the names were last resolved; held while resolving (at most
    /// one RESOLVE_TIMEOUT: every name at once), so concurrent callers wait
    /// for one resolution instead of each resolving.
    resolved_at: tokio::sync::Mutex<Option<Instant>>,
}

/// Whether `entry`'s host is an IP address (bracketed for IPv6).
fn is_ip(entry: &str) -> bool {
    let host = entry.rsplit_once(':').map_or(entry, |(host, _)| host);
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
        .is_ok()
}

impl Members {
    /// One member per entry, unresolved; channels connect lazily.
    pub fn new(entries: Vec<String>, security: &ClientSecurity) -> Result<Self> {
        let list = (0..entries.len())
            .map(|i| member(&entries, i, None, security).map(Arc::new))
            .collect::<Result<Vec<_>>>()?;
        let names = !entries.iter().all(|e| is_ip(e));
        Ok(Members {
            names,
            entries,
            security: security.clone(),
            list: RwLock::new(list.into()),
            stale: AtomicBool::new(names),
            resolved_at: tokio::sync::Mutex::new(None),
        })
    }

    /// The members now.
    pub fn list(&self) -> Arc<[Arc<Member>]> {
        Arc::clone(&self.list.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Every member failed in a row: resolve the names again before the
    /// next call.
    pub fn mark_stale(&self) {
        if self.names {
            self.stale.store(true, Ordering::Relaxed);
        }
    }

    /// Resolves the names if due; the members after that.
    pub async fn current(&self) -> Arc<[Arc<Member>]> {
        if self.stale.load(Ordering::Relaxed) {
            self.resolve().await;
        }
        self.list()
    }

    async fn resolve(&self) {
        let mut resolved_at = self.resolved_at.lock().await;
        if !self.stale.load(Ordering::Relaxed)
            || resolved_at.is_some_and(|t| t.elapsed() < RESOLVE_INTERVAL)
        {
            return;
        }
        // All names at once: the lock is held for one RESOLVE_TIMEOUT at
        // most, however many entries the address lists.
        let resolved = futures::future::join_all(self.entries.iter().map(|entry| async move {
            if is_ip(entry) {
                Vec::new()
            } else {
                resolve_name(entry).await
            }
        }))
        .await;
        let mut wanted: Vec<(usize, Option<SocketAddr>)> = Vec::new();
        for (i, addresses) in resolved.into_iter().enumerate() {
            if addresses.len() > 1 {
                wanted.extend(addresses.into_iter().map(|a| (i, Some(a))));
            } else {
                wanted.push((i, None));
            }
        }
        if wanted.len() > MAX_DISPATCHER_ADDRESSES {
            tracing::warn!(
                addresses = wanted.len(),
                max = MAX_DISPATCHER_ADDRESSES,
                "the dispatcher address resolves to more dispatchers than a client calls; \
                 calling the first ones"
            );
            wanted.truncate(MAX_DISPATCHER_ADDRESSES);
        }
        let old: HashMap<(usize, Option<SocketAddr>), Arc<Member>> = self
            .list()
            .iter()
            .map(|m| ((m.entry, m.via), Arc::clone(m)))
            .collect();
        let mut list = Vec::with_capacity(wanted.len());
        for (entry, via) in wanted {
            match old.get(&(entry, via)) {
                Some(m) => list.push(Arc::clone(m)),
                None => match member(&self.entries, entry, via, &self.security) {
                    Ok(m) => list.push(Arc::new(m)),
                    Err(e) => {
                        tracing::warn!(entry = %self.entries[entry], ?via, error = %e, "cannot make a channel to a resolved dispatcher address")
                    }
                },
            }
        }
        if !list.is_empty() {
            let changed = list.len() != old.len()
                || list.iter().any(|m| !old.contains_key(&(m.entry, m.via)));
            if changed {
                let labels: Vec<&str> = list.iter().map(|m| m.label.as_str()).collect();
                tracing::info!(dispatchers = ?labels, "dispatcher addresses resolved");
            }
            *self.list.write().unwrap_or_else(|p| p.into_inner()) = list.into();
        }
        *resolved_at = Some(Instant::now());
        self.stale.store(false, Ordering::Relaxed);
    }
}

/// The distinct socket addresses `entry` (`host:port`) resolves to, in the
/// resolver's order; none if it does not resolve in time.
async fn resolve_name(entry: &str) -> Vec<SocketAddr> {
    match tokio::time::timeout(RESOLVE_TIMEOUT, tokio::net::lookup_host(entry)).await {
        Ok(Ok(addresses)) => {
            let mut distinct: Vec<SocketAddr> = Vec::new();
            for a in addresses.take(4 * MAX_DISPATCHER_ADDRESSES) {
                if !distinct.contains(&a) {
                    distinct.push(a);
                }
            }
            distinct
        }
        Ok(Err(e)) => {
            tracing::debug!(entry, error = %e, "dispatcher name does not resolve");
            Vec::new()
        }
        Err(_) => {
            tracing::debug!(entry, "resolving the dispatcher name timed out");
            Vec::new()
        }
    }
}

fn member(
    entries: &[String],
    entry: usize,
    via: Option<SocketAddr>,
    security: &ClientSecurity,
) -> Result<Member> {
    let address = &entries[entry];
    let channel = tfdata_rpc::channel::channel_via(address, via, security)?;
    Ok(Member {
        label: match via {
            Some(via) => format!("{address} ({via})"),
            None => address.clone(),
        },
        entry,
        via,
        client: tfdata_rpc::channel::dispatcher_client(channel),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_addresses_are_told_from_names() {
        for ip in ["127.0.0.1:5050", "[::1]:5050", "10.0.0.3:1"] {
            assert!(is_ip(ip), "{ip}");
        }
        for name in ["localhost:5050", "dispatchers.tfdata.svc:5050", "a:1"] {
            assert!(!is_ip(name), "{name}");
        }
    }

    /// Addresses alone are never resolved; a name is, before the first call,
    /// and a name with one address stays one member.
    #[tokio::test]
    async fn names_are_resolved_before_the_first_call() {
        let security = ClientSecurity::plaintext();
        let ips = Members::new(vec!["127.0.0.1:1".into(), "[::1]:2".into()], &security).unwrap();
        assert!(!ips.stale.load(Ordering::Relaxed));
        ips.mark_stale();
        assert_eq!(ips.current().await.len(), 2);
        assert!(
            ips.resolved_at.lock().await.is_none(),
            "addresses were resolved"
        );

        let name = Members::new(vec!["localhost:1".into()], &security).unwrap();
        let members = name.current().await;
        assert!(name.resolved_at.lock().await.is_some());
        let labels: Vec<&str> = members.iter().map(|m| m.label.as_str()).collect();
        // localhost has one address here (/etc/hosts), or two (IPv4 and 6).
        assert!(
            labels == ["localhost:1"] || labels.iter().all(|l| l.starts_with("localhost:1 (")),
            "{labels:?}"
        );
        // Marked stale within the interval: not resolved again yet.
        name.mark_stale();
        let before = *name.resolved_at.lock().await;
        name.current().await;
        assert_eq!(*name.resolved_at.lock().await, before);
    }
}
