//! The `worker_addresses` resolver: which configured entry a worker is.
//! Static sharding gives the worker at entry `i` shard `i` of
//! `worker_addresses.len()` (TensorFlow's `worker_index` in `TaskDef`).

use tfdata_core::{Error, Result};

/// The dispatcher's configured `worker_addresses`.
pub(crate) struct WorkerAddresses<'a>(pub &'a [String]);

impl WorkerAddresses<'_> {
    /// The entry `address` is bound to, or `None` when no list is
    /// configured. Entries are `host:port`, a bare `host`, or
    /// `host:%port%`-style placeholders. Exact entries match their address;
    /// placeholder and bare entries are bound, in registration order
    /// (`registered`, then `address`), to the first worker on that host
    /// that has no exact entry (TensorFlow's resolver). A worker that
    /// matches no free entry is refused.
    pub fn entry_of<'w>(
        &self,
        registered: impl Iterator<Item = &'w str>,
        address: &'w str,
    ) -> Result<Option<usize>> {
        let entries = self.0;
        if entries.is_empty() {
            return Ok(None);
        }
        if let Some(i) = entries.iter().position(|e| e == address) {
            return Ok(Some(i));
        }
        let mut bound: Vec<Option<&str>> = vec![None; entries.len()];
        for worker in registered.chain(std::iter::once(address)) {
            if entries.iter().any(|e| e == worker) || bound.contains(&Some(worker)) {
                continue;
            }
            let host = host_of(worker);
            if let Some(j) = (0..entries.len()).find(|&j| {
                bound[j].is_none() && is_placeholder(&entries[j]) && host_of(&entries[j]) == host
            }) {
                bound[j] = Some(worker);
            }
        }
        match bound.iter().position(|b| *b == Some(address)) {
            Some(i) => Ok(Some(i)),
            None => Err(Error::FailedPrecondition(format!(
                "worker {address} is not in the dispatcher's configured worker_addresses {entries:?} \
                 (or every matching entry is taken by another worker)"
            ))),
        }
    }
}

fn host_of(address: &str) -> &str {
    address.rsplit_once(':').map_or(address, |(h, _)| h)
}

/// A bare host, or `host:%port%`.
fn is_placeholder(entry: &str) -> bool {
    match entry.rsplit_once(':') {
        None => true,
        Some((_, port)) => port.starts_with('%') && port.ends_with('%'),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn no_list_means_no_entry() {
        assert_eq!(
            WorkerAddresses(&[])
                .entry_of([].into_iter(), "h:1")
                .unwrap(),
            None
        );
    }

    #[test]
    fn exact_entries_match_their_address_and_placeholders_bind_in_order() {
        let list = entries(&["a:1", "b:%port%", "b"]);
        let r = WorkerAddresses(&list);
        assert_eq!(r.entry_of([].into_iter(), "a:1").unwrap(), Some(0));
        assert_eq!(r.entry_of(["b:7"].into_iter(), "b:7").unwrap(), Some(1));
        assert_eq!(r.entry_of(["b:7"].into_iter(), "b:8").unwrap(), Some(2));
        let e = r.entry_of(["b:7", "b:8"].into_iter(), "b:9").unwrap_err();
        assert!(
            e.to_string()
                .contains("not in the dispatcher's configured worker_addresses"),
            "{e}"
        );
        assert!(r.entry_of([].into_iter(), "c:1").is_err());
    }
}
