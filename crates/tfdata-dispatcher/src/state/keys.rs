//! The named keys of the state's maps, where tuples stood before: their
//! fields say what each number is. Each orders as the tuple it replaced
//! (fields in that order), so maps iterate, and compactions are written,
//! as before.

/// A live iteration's key: its job's name and repetition
/// ([`DispatcherState::iteration_by_key`](super::DispatcherState::iteration_by_key)).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IterationKey {
    pub job_name: String,
    pub repetition: i64,
}

/// One pass of a split provider over its data: its index among the
/// iteration's providers and the repetition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProviderPass {
    pub provider: i64,
    pub repetition: i64,
}

/// A split's name: its provider, the repetition it was produced in, and
/// its index there (`TfdataSplitName` on the wire).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SplitName {
    pub provider: i64,
    pub repetition: i64,
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
            provider: n.provider,
            repetition: n.repetition,
            index: n.index,
        }
    }
}

impl From<SplitName> for tfdata_proto::data::TfdataSplitName {
    fn from(n: SplitName) -> Self {
        tfdata_proto::data::TfdataSplitName {
            provider: n.provider,
            repetition: n.repetition,
            index: n.index,
        }
    }
}
