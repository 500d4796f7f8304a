//! The named keys of the state's maps, where tuples and raw strings stood
//! before: their fields say what each value is. Each orders as the value it
//! replaced (fields in that order), so maps iterate, and compactions are
//! written, as before.

use std::borrow::Borrow;
use std::fmt;

/// A worker's address (`host:port`), the id the dispatcher knows it by.
/// Maps keyed by it are looked up with a `&str` (it borrows as one), and
/// it reads as a `&str` where one is wanted; wire messages carry it as a
/// `String` (`From` both ways).
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WorkerAddress(pub String);

impl WorkerAddress {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for WorkerAddress {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for WorkerAddress {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for WorkerAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for WorkerAddress {
    fn from(address: &str) -> Self {
        WorkerAddress(address.to_string())
    }
}

impl From<String> for WorkerAddress {
    fn from(address: String) -> Self {
        WorkerAddress(address)
    }
}

impl From<WorkerAddress> for String {
    fn from(address: WorkerAddress) -> Self {
        address.0
    }
}

impl PartialEq<str> for WorkerAddress {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for WorkerAddress {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for WorkerAddress {
    fn eq(&self, other: &String) -> bool {
        self.0 == *other
    }
}

/// A repetition: which pass of a job (the iteration's), or which pass of a
/// split provider over its data, a value belongs to. The wire and the
/// journal carry it as an `i64`; it orders as that `i64`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Repetition(pub i64);

impl fmt::Display for Repetition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A split provider's index among its iteration's providers (one per
/// source of the dataset graph). The wire and the journal carry it as an
/// `i64`; it orders as that `i64`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProviderIndex(pub i64);

impl fmt::Display for ProviderIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A live iteration's key: its job's name and repetition
/// ([`DispatcherState::iteration_by_key`](super::DispatcherState::iteration_by_key)).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IterationKey {
    pub job_name: String,
    pub repetition: Repetition,
}

/// One pass of a split provider over its data: its index among the
/// iteration's providers and the repetition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProviderPass {
    pub provider: ProviderIndex,
    pub repetition: Repetition,
}

/// A split's name: its provider, the repetition it was produced in, and
/// its index there (`TfdataSplitName` on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SplitName {
    pub provider: ProviderIndex,
    pub repetition: Repetition,
    pub index: i64,
}

impl SplitName {
    /// The pass it belongs to.
    pub fn pass(&self) -> ProviderPass {
        ProviderPass {
            provider: self.provider,
            repetition: self.repetition,
        }
    }
}

impl From<&tfdata_proto::data::TfdataSplitName> for SplitName {
    fn from(n: &tfdata_proto::data::TfdataSplitName) -> Self {
        SplitName {
            provider: ProviderIndex(n.provider),
            repetition: Repetition(n.repetition),
            index: n.index,
        }
    }
}

impl From<SplitName> for tfdata_proto::data::TfdataSplitName {
    fn from(n: SplitName) -> Self {
        tfdata_proto::data::TfdataSplitName {
            provider: n.provider.0,
            repetition: n.repetition.0,
            index: n.index,
        }
    }
}
