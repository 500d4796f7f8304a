//! [`Dataset`]: an immutable graph of ops, cheap to clone and share.

use std::sync::Arc;

use tfdata_core::{Error, Result};

use crate::iterators::{self, ElementIterator};

/// `cardinality()` of an infinite dataset (TensorFlow's `INFINITE`).
pub const INFINITE_CARDINALITY: i64 = -1;
/// `cardinality()` when it cannot be known without running (TensorFlow's `UNKNOWN`).
pub const UNKNOWN_CARDINALITY: i64 = -2;

/// One op of a pipeline. Transformations own their input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Op {
    Range {
        start: i64,
        stop: i64,
        step: i64,
    },
    Map {
        input: Dataset,
        function: String,
    },
    Batch {
        input: Dataset,
        batch_size: i64,
        drop_remainder: bool,
    },
    Take {
        input: Dataset,
        count: i64,
    },
}

/// A dataset pipeline, built like `tf.data.Dataset`:
///
/// ```
/// use tfdata_dataset::Dataset;
/// let ds = Dataset::range(10).take(4).batch(2, false);
/// let batches: Vec<_> = ds.iter().unwrap().collect::<Result<_, _>>().unwrap();
/// assert_eq!(batches.len(), 2);
/// ```
///
/// Builders never fail; arguments are validated when the dataset is iterated
/// or serialised, with TensorFlow's rules and a message naming the op.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dataset {
    pub(crate) op: Arc<Op>,
}

impl Dataset {
    fn from_op(op: Op) -> Dataset {
        Dataset { op: Arc::new(op) }
    }

    /// `tf.data.Dataset.range(stop)`: 0, 1, …, stop − 1 as scalar int64.
    pub fn range(stop: i64) -> Dataset {
        Dataset::range_with_step(0, stop, 1)
    }

    /// `tf.data.Dataset.range(start, stop, step)`.
    pub fn range_with_step(start: i64, stop: i64, step: i64) -> Dataset {
        Dataset::from_op(Op::Range { start, stop, step })
    }

    /// `map(f)` with a function registered under `function`
    /// (see [`crate::register_function`]).
    pub fn map(self, function: &str) -> Dataset {
        Dataset::from_op(Op::Map {
            input: self,
            function: function.to_string(),
        })
    }

    /// `batch(batch_size, drop_remainder)`: stacks consecutive elements
    /// component-wise into tensors with a new leading dimension.
    pub fn batch(self, batch_size: i64, drop_remainder: bool) -> Dataset {
        Dataset::from_op(Op::Batch {
            input: self,
            batch_size,
            drop_remainder,
        })
    }

    /// `take(count)`: the first `count` elements; −1 takes all.
    pub fn take(self, count: i64) -> Dataset {
        Dataset::from_op(Op::Take { input: self, count })
    }

    /// Checks every op's arguments (not function names: those are resolved
    /// by the process that runs the pipeline).
    pub fn validate(&self) -> Result<()> {
        match &*self.op {
            Op::Range { step, .. } => {
                if *step == 0 {
                    return Err(Error::InvalidArgument("range: step must not be 0".into()));
                }
                Ok(())
            }
            Op::Map { input, function } => {
                if function.is_empty() {
                    return Err(Error::InvalidArgument("map: function name is empty".into()));
                }
                input.validate()
            }
            Op::Batch {
                input, batch_size, ..
            } => {
                if *batch_size <= 0 {
                    return Err(Error::InvalidArgument(format!(
                        "batch: batch_size must be greater than zero, got {batch_size}"
                    )));
                }
                input.validate()
            }
            Op::Take { input, count } => {
                if *count < -1 {
                    return Err(Error::InvalidArgument(format!(
                        "take: count must be -1 or at least 0, got {count}"
                    )));
                }
                input.validate()
            }
        }
    }

    /// The number of elements, as TensorFlow reports it: −1 infinite, −2 unknown.
    pub fn cardinality(&self) -> i64 {
        match &*self.op {
            Op::Range { start, stop, step } => {
                let (start, stop, step) = (*start as i128, *stop as i128, *step as i128);
                let n = if step > 0 {
                    (stop - start + step - 1).div_euclid(step)
                } else if step < 0 {
                    (start - stop - step - 1).div_euclid(-step)
                } else {
                    return UNKNOWN_CARDINALITY;
                };
                n.max(0) as i64
            }
            Op::Map { input, .. } => input.cardinality(),
            Op::Batch {
                input,
                batch_size,
                drop_remainder,
            } => {
                let n = input.cardinality();
                if n < 0 || *batch_size <= 0 {
                    return n;
                }
                if *drop_remainder {
                    n / batch_size
                } else {
                    (n + batch_size - 1) / batch_size
                }
            }
            Op::Take { input, count } => {
                let n = input.cardinality();
                match (*count, n) {
                    (-1, n) => n,
                    (c, INFINITE_CARDINALITY) => c,
                    (0, UNKNOWN_CARDINALITY) => 0,
                    (_, UNKNOWN_CARDINALITY) => UNKNOWN_CARDINALITY,
                    (c, n) => c.min(n),
                }
            }
        }
    }

    /// A fresh iterator over the elements, in this thread. Fails at once on
    /// invalid arguments or an unregistered function.
    pub fn iter(&self) -> Result<Box<dyn ElementIterator>> {
        self.validate()?;
        iterators::build(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cardinality_matches_tensorflow() {
        assert_eq!(Dataset::range(10).cardinality(), 10);
        assert_eq!(Dataset::range_with_step(10, 0, -3).cardinality(), 4);
        assert_eq!(Dataset::range_with_step(0, 10, 3).cardinality(), 4);
        assert_eq!(Dataset::range_with_step(5, 0, 1).cardinality(), 0);
        assert_eq!(Dataset::range(10).batch(3, false).cardinality(), 4);
        assert_eq!(Dataset::range(10).batch(3, true).cardinality(), 3);
        assert_eq!(Dataset::range(10).take(3).cardinality(), 3);
        assert_eq!(Dataset::range(2).take(5).cardinality(), 2);
        assert_eq!(Dataset::range(2).take(-1).cardinality(), 2);
    }

    #[test]
    fn bad_arguments_are_named() {
        let err = Dataset::range(3).batch(0, false).iter().err().unwrap();
        assert!(err.to_string().contains("batch_size"), "{err}");
        let err = Dataset::range_with_step(0, 3, 0).iter().err().unwrap();
        assert!(err.to_string().contains("step"), "{err}");
    }
}
