//! Typed ids of the dispatcher's entities (spec §1), so a task id can never be
//! passed where an iteration id is expected. Dataset ids are strings in
//! protocol version 9; the others are int64 on the wire.

use std::fmt;

/// A registered dataset: user-chosen, or the decimal string of a number ≥ 1000.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DatasetId(pub String);

impl fmt::Display for DatasetId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for DatasetId {
    fn from(s: &str) -> Self {
        DatasetId(s.to_string())
    }
}

macro_rules! int_id {
    ($(#[$doc:meta])* $name:ident, $first:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub i64);

        impl $name {
            /// The first id the dispatcher hands out (TensorFlow's numbering).
            pub const FIRST: i64 = $first;
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}", self.0)
            }
        }
    };
}

int_id!(
    /// A job: a named (or anonymous) way of reading one dataset.
    JobId,
    5000
);
int_id!(
    /// One epoch of a job: (job, repetition).
    IterationId,
    2000
);
int_id!(
    /// One consumer attached to an iteration.
    IterationClientId,
    3000
);
int_id!(
    /// One worker's share of an iteration.
    TaskId,
    4000
);
