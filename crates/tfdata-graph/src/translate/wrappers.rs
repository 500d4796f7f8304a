//! Dataset nodes that pass their input's elements on unchanged while
//! TensorFlow does something beside them: thread pools
//! (`ThreadPoolDataset`, `PrivateThreadPoolDataset`), a cap on intra-op
//! threads (`MaxIntraOpParallelismDataset`), statistics (`LatencyStatsDataset`,
//! `BytesProducedStatsDataset`, `SetStatsAggregatorDataset`), a
//! serialization guard (`NonSerializableDataset`), a delay
//! (`SleepDataset`), a check of the optimized pipeline
//! (`ExperimentalAssertNextDataset`) and the choice among equivalent
//! inputs (`ChooseFastestDataset`), with their older `Experimental*` names,
//! and a named static rewrite (`RewriteDataset`).

use std::sync::Arc;
use std::time::Duration;

use tfdata_core::{Element, Result};
use tfdata_dataset::functions::ResolvedMap;
use tfdata_dataset::spec::Structure;
use tfdata_dataset::{Dataset, FunctionRef, Inline};
use tfdata_proto::tensorflow::NodeDef;

use super::node::{handle, placeholder};
use crate::attrs::NodeAttrs;
use crate::function::CompiledNode;

/// The longest delay `SleepDataset` may ask for per element (one minute):
/// a worker must not be parked for hours by one graph constant.
const MAX_SLEEP_MICROS: i64 = 60_000_000;

/// The node compiled, if it is one of this module's.
pub(super) fn compile(
    node: &NodeDef,
    attrs: &NodeAttrs,
    spec: &Option<Structure>,
) -> Result<Option<CompiledNode>> {
    Ok(Some(match node.op.as_str() {
        // The engine schedules its own work: a private pool changes which
        // threads run the input, never its elements.
        "ThreadPoolDataset" | "ExperimentalThreadPoolDataset" => handle(
            |mut i| {
                let input = i.dataset()?;
                i.next("thread_pool")?;
                Ok(input)
            },
            node,
        ),
        "ThreadPoolHandle" | "ExperimentalThreadPoolHandle" => {
            let threads = attrs.int("num_threads")?;
            if threads < 0 {
                return Err(attrs.error("`num_threads` must be >= 0"));
            }
            placeholder(&["handle"])
        }
        // A private pool of `num_threads` (0: the default) and a cap on the
        // threads one op may use (0: no cap): scheduling, checked as
        // TensorFlow checks them.
        "PrivateThreadPoolDataset" | "ExperimentalPrivateThreadPoolDataset" => handle(
            |mut i| {
                let input = i.dataset()?;
                if i.int("num_threads")? < 0 {
                    return Err(i.err("`num_threads` must be >= 0"));
                }
                Ok(input)
            },
            node,
        ),
        "MaxIntraOpParallelismDataset" | "ExperimentalMaxIntraOpParallelismDataset" => handle(
            |mut i| {
                let input = i.dataset()?;
                if i.int("max_intra_op_parallelism")? < 0 {
                    return Err(i.err("`max_intra_op_parallelism` must be >= 0"));
                }
                Ok(input)
            },
            node,
        ),
        // It only makes serializing the pipeline fail; a worker runs the
        // graph it was given, which was serialized before this node.
        "NonSerializableDataset" | "ExperimentalNonSerializableDataset" => {
            handle(|mut i| i.dataset(), node)
        }
        "SleepDataset" | "ExperimentalSleepDataset" => {
            let spec = spec.clone();
            handle(
                move |mut i| {
                    let input = i.dataset()?;
                    let micros = i.int("sleep_microseconds")?;
                    if micros < 0 {
                        return Err(tfdata_core::Error::InvalidArgument(
                            "`sleep_microseconds` must be >= 0".into(),
                        ));
                    }
                    if micros > MAX_SLEEP_MICROS {
                        return Err(i.err(format!(
                            "`sleep_microseconds` {micros} is over the {MAX_SLEEP_MICROS} a worker allows"
                        )));
                    }
                    Ok(sleeping(input, micros as u64, spec.clone()))
                },
                node,
            )
        }
        // Checks that the optimizer put given transformations next: checked
        // on the graph before translation, as `AssertNextDataset`
        // (`assert_next`).
        "ExperimentalAssertNextDataset" => handle(
            |mut i| {
                let input = i.dataset()?;
                i.next("transformations")?;
                Ok(input)
            },
            node,
        ),
        // Statistics go to a `StatsAggregator` the pipeline's options set;
        // the elements are unchanged. The worker keeps no aggregator (and
        // `StatsAggregatorSummary`, the only way to read one, is not
        // supported), so nothing is recorded.
        "LatencyStatsDataset"
        | "ExperimentalLatencyStatsDataset"
        | "BytesProducedStatsDataset"
        | "ExperimentalBytesProducedStatsDataset" => handle(
            |mut i| {
                let input = i.dataset()?;
                i.string("tag")?;
                Ok(input)
            },
            node,
        ),
        "SetStatsAggregatorDataset" | "ExperimentalSetStatsAggregatorDataset" => handle(
            |mut i| {
                let input = i.dataset()?;
                i.next("stats_aggregator")?;
                i.string("tag")?;
                i.string("counter_prefix")?;
                Ok(input)
            },
            node,
        ),
        "StatsAggregatorHandle"
        | "StatsAggregatorHandleV2"
        | "ExperimentalStatsAggregatorHandle" => placeholder(&["handle"]),
        // The inputs are, by the op's contract, the same elements computed
        // differently; TensorFlow times them and keeps the fastest. The
        // engine does not time them: it iterates the first.
        // One of TensorFlow's static rewrites by name: each keeps the
        // elements (as for `OptimizeDataset`), and TensorFlow accepts an
        // unknown name and changes nothing. The two that need a
        // configuration the op cannot give fail, with TensorFlow's messages.
        "RewriteDataset" => handle(
            |mut i| {
                let input = i.dataset()?;
                match i.string("rewrite_name")?.as_str() {
                    "tf_auto_shard" => Err(tfdata_core::Error::InvalidArgument(
                        "RewriterConfig not found.".into(),
                    )),
                    "slack" => Err(tfdata_core::Error::InvalidArgument(
                        "Config parameter required.".into(),
                    )),
                    _ => Ok(input),
                }
            },
            node,
        ),
        "ChooseFastestDataset" | "ExperimentalChooseFastestDataset" => {
            let n = attrs.int("N")?;
            if n < 2 {
                return Err(attrs.error("`N` must be >= 2"));
            }
            handle(
                |mut i| {
                    let first = i.dataset()?;
                    for v in i.take(None)? {
                        v.into_dataset("ChooseFastestDataset input")?;
                    }
                    Ok(first)
                },
                node,
            )
        }
        _ => return Ok(None),
    }))
}

/// `input` with a delay of `micros` before each element.
fn sleeping(input: Dataset, micros: u64, spec: Option<Structure>) -> Dataset {
    let f: tfdata_dataset::MapFn = Arc::new(move |e: Element| {
        std::thread::sleep(Duration::from_micros(micros));
        Ok(e)
    });
    let inline = Inline {
        map: Some(Arc::new(move |input: Option<&Structure>| {
            Ok(ResolvedMap {
                f: f.clone(),
                output: spec.clone().or_else(|| input.cloned()),
            })
        })),
        ..Default::default()
    };
    input.map_with(FunctionRef::inline("sleep", inline), None, true)
}
