//! The three workloads of the `scaling` scenario: what each worker serves,
//! what a reader counts and checks of each element, and the unit of the
//! figure.

use anyhow::{Context, Result, bail};
use clap::ValueEnum;
use tfdata::{Dataset, Element};

use crate::data::ImageData;
use crate::pipeline::{self, PipelineOptions, Stage};

/// Bytes of one `large` element (as in the `large` scenario).
pub const LARGE_BYTES: u64 = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Workload {
    /// `range(n)` int64 scalars: elements/s.
    Small,
    /// 1 MiB float32 tensors: MB/s.
    Large,
    /// The `pipeline` scenario's image pipeline run by the workers: examples/s.
    Pipeline,
}

impl Workload {
    pub const ALL: [Workload; 3] = [Workload::Small, Workload::Large, Workload::Pipeline];

    pub fn name(self) -> &'static str {
        match self {
            Workload::Small => "small",
            Workload::Large => "large",
            Workload::Pipeline => "pipeline",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Workload::ALL.into_iter().find(|w| w.name() == name)
    }

    /// What a reader counts: an element, or for the pipeline an example
    /// (a batch holds `batch_size` of them).
    pub fn item(self) -> &'static str {
        match self {
            Workload::Small | Workload::Large => "element",
            Workload::Pipeline => "example",
        }
    }

    pub fn unit(self) -> &'static str {
        match self {
            Workload::Small => "elements/s",
            Workload::Large => "MB/s",
            Workload::Pipeline => "examples/s",
        }
    }

    /// The figure in [`unit`](Self::unit) for `items_per_second`.
    pub fn value(self, items_per_second: f64) -> f64 {
        match self {
            Workload::Large => items_per_second * LARGE_BYTES as f64 / 1e6,
            Workload::Small | Workload::Pipeline => items_per_second,
        }
    }

    /// A reader records its count and the time every this many elements
    /// (and at its last): `small`'s millions of elements would otherwise
    /// make a timeline of millions of entries.
    pub fn checkpoint_every(self) -> u64 {
        match self {
            Workload::Small => 1024,
            Workload::Large | Workload::Pipeline => 1,
        }
    }

    /// Items of one element received, and for `small` its value (summed
    /// by the reader, so the bench checks every value arrived once); an
    /// element that is not what the workload produces is an error.
    pub fn tally(self, element: &Element, batch_size: i64) -> Result<(u64, i64)> {
        let first = element.components.first().context("an empty element")?;
        match self {
            Workload::Small => {
                if element.components.len() != 1 {
                    bail!("small: {} components", element.components.len());
                }
                Ok((1, first.to_scalar::<i64>()?))
            }
            Workload::Large => {
                if element.components.len() != 1 || first.byte_size() as u64 != LARGE_BYTES {
                    bail!(
                        "large: {} components, the first {} bytes",
                        element.components.len(),
                        first.byte_size()
                    );
                }
                Ok((1, 0))
            }
            Workload::Pipeline => {
                pipeline::check_batch(Stage::Normalize, batch_size, element)?;
                Ok((crate::measure::batch_examples(element)?, 0))
            }
        }
    }
}

/// How much of a workload each worker serves in one cell, and what the
/// readers must receive in all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Share {
    /// Elements each worker's task produces (parallel_epochs: every worker
    /// runs the whole dataset, which is this long).
    pub elements_per_worker: u64,
    pub workers: u64,
    /// Items per element (the pipeline's batch size; 1 otherwise).
    pub items_per_element: u64,
}

impl Share {
    /// `total` elements over `workers` workers: each serves `total / workers`
    /// (rounded down), so every cell moves about the same data whatever its
    /// worker count.
    pub fn new(total: u64, workers: u64, items_per_element: u64) -> Result<Self> {
        if workers == 0 || total < workers {
            bail!("{total} elements cannot be shared by {workers} workers");
        }
        Ok(Share {
            elements_per_worker: total / workers,
            workers,
            items_per_element,
        })
    }

    pub fn elements(&self) -> u64 {
        self.elements_per_worker * self.workers
    }

    pub fn items(&self) -> u64 {
        self.elements() * self.items_per_element
    }

    /// For `small`: the sum of every value the readers receive (each
    /// worker's `range(n)`).
    pub fn small_sum(&self) -> u128 {
        let n = u128::from(self.elements_per_worker);
        u128::from(self.workers) * n * n.saturating_sub(1) / 2
    }
}

/// The dataset each worker serves for `workload`: `share.elements_per_worker`
/// elements.
pub fn dataset(
    workload: Workload,
    share: &Share,
    images: Option<&ImageData>,
    pipeline_options: &PipelineOptions,
) -> Result<Dataset> {
    let n = i64::try_from(share.elements_per_worker)?;
    Ok(match workload {
        Workload::Small => Dataset::range(n),
        Workload::Large => crate::service::scenario_dataset("large", share.elements_per_worker)?,
        Workload::Pipeline => {
            let images = images.context("the pipeline workload needs the images")?;
            // The pipeline repeats its files forever: `take` its share.
            pipeline::build(images, Stage::Normalize, pipeline_options)?.take(n)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tfdata::Tensor;

    #[test]
    fn shares_split_the_total_and_know_what_arrives() {
        let share = Share::new(10, 4, 1).unwrap();
        assert_eq!(share.elements_per_worker, 2);
        assert_eq!(share.elements(), 8);
        // Four workers each serve range(2): 0 + 1, four times.
        assert_eq!(share.small_sum(), 4);
        let batches = Share::new(64, 2, 64).unwrap();
        assert_eq!(batches.items(), 64 * 64);
        assert!(Share::new(1, 2, 1).is_err());
        assert!(Share::new(1, 0, 1).is_err());
    }

    #[test]
    fn readers_refuse_elements_of_another_workload() {
        let scalar = Element::new(vec![Tensor::scalar(7i64)]);
        assert_eq!(Workload::Small.tally(&scalar, 64).unwrap(), (1, 7));
        assert!(Workload::Large.tally(&scalar, 64).is_err());
        assert!(Workload::Pipeline.tally(&scalar, 64).is_err());
        let values = vec![0f32; (LARGE_BYTES / 4) as usize];
        let large = Element::new(vec![
            Tensor::from_slice(&values, vec![values.len() as i64]).unwrap(),
        ]);
        assert_eq!(Workload::Large.tally(&large, 64).unwrap(), (1, 0));
        assert!(Workload::Small.tally(&large, 64).is_err());
    }

    #[test]
    fn names_round_trip_and_large_is_reported_in_megabytes() {
        for w in Workload::ALL {
            assert_eq!(Workload::parse(w.name()), Some(w));
        }
        assert_eq!(Workload::Large.value(1000.0), 1000.0 * 1.048576);
        assert_eq!(Workload::Pipeline.item(), "example");
    }
}
