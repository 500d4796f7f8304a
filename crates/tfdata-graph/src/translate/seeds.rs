//! Shuffles and random datasets, and the seed generators that seed them:
//! `ShuffleDataset` (V1, V2, V3), `ShuffleAndRepeatDataset` (V1, V2),
//! `RandomDatasetV2` and `AnonymousSeedGenerator`.
//!
//! The later versions take a seed generator resource. TensorFlow looks it
//! up: one an `AnonymousSeedGenerator` node made gives its seeds (and
//! whether each iteration reshuffles) in place of the op's own; a handle
//! that names no generator (a serialized resource `Const`, a
//! `DummySeedGenerator`) leaves the op to seed itself (`ShuffleDatasetV2`,
//! which has no seeds of its own, then draws fresh ones and reshuffles).

use tfdata_core::Result;
use tfdata_dataset::Dataset;
use tfdata_proto::tensorflow::NodeDef;

use super::node::{Inputs, handle};
use crate::attrs::NodeAttrs;
use crate::function::CompiledNode;
use crate::value::{SeedGenerator, Value};

/// The node compiled, if it is one of this module's.
pub(super) fn compile(node: &NodeDef, attrs: &NodeAttrs) -> Result<Option<CompiledNode>> {
    Ok(Some(match node.op.as_str() {
        "AnonymousSeedGenerator" => {
            let (name, op) = (node.name.clone(), node.op.clone());
            CompiledNode {
                outputs: vec![("handle".into(), 1), ("deleter".into(), 1)],
                run: std::sync::Arc::new(move |values| {
                    let mut i = Inputs::new(values, &name, &op);
                    let generator = SeedGenerator {
                        seed: i.int("seed")?,
                        seed2: i.int("seed2")?,
                        reshuffle: i.bool("reshuffle")?,
                    };
                    Ok(vec![Value::SeedGenerator(generator), Value::Resource])
                }),
            }
        }
        "ShuffleDataset" | "ShuffleDatasetV3" => {
            let reshuffle = attrs.bool_or("reshuffle_each_iteration", true)?;
            let v3 = node.op == "ShuffleDatasetV3";
            handle(
                move |mut i| {
                    let input = i.dataset()?;
                    let buffer = buffer_size(&mut i)?;
                    let own = Seeds(i.int("seed")?, i.int("seed2")?, reshuffle);
                    let Seeds(seed, seed2, reshuffle) =
                        if v3 { generated(&mut i, own)? } else { own };
                    Ok(input.shuffle_with_seeds(buffer, seed, seed2, reshuffle))
                },
                node,
            )
        }
        "ShuffleDatasetV2" => handle(
            |mut i| {
                let input = i.dataset()?;
                let buffer = buffer_size(&mut i)?;
                let Seeds(seed, seed2, reshuffle) = generated(&mut i, Seeds(0, 0, true))?;
                Ok(input.shuffle_with_seeds(buffer, seed, seed2, reshuffle))
            },
            node,
        ),
        "ShuffleAndRepeatDataset" | "ShuffleAndRepeatDatasetV2" => {
            let reshuffle = attrs.bool_or("reshuffle_each_iteration", true)?;
            let v2 = node.op == "ShuffleAndRepeatDatasetV2";
            handle(
                move |mut i| {
                    let input = i.dataset()?;
                    let buffer = buffer_size(&mut i)?;
                    let own = Seeds(i.int("seed")?, i.int("seed2")?, reshuffle);
                    let count = i.int("count")?;
                    if count <= 0 && count != -1 {
                        return Err(i.err("count must be greater than zero or equal to -1."));
                    }
                    let Seeds(seed, seed2, reshuffle) =
                        if v2 { generated(&mut i, own)? } else { own };
                    Ok(input
                        .shuffle_with_seeds(buffer, seed, seed2, reshuffle)
                        .repeat(Some(count)))
                },
                node,
            )
        }
        "RandomDatasetV2" => {
            let rerandomize = attrs.bool_or("rerandomize_each_iteration", false)?;
            handle(
                move |mut i| {
                    let own = Seeds(i.int("seed")?, i.int("seed2")?, rerandomize);
                    let Seeds(seed, seed2, rerandomize) = generated(&mut i, own)?;
                    Ok(Dataset::random(seed, seed2, rerandomize))
                },
                node,
            )
        }
        _ => return Ok(None),
    }))
}

/// Two seeds and whether each iteration draws new ones from them.
struct Seeds(i64, i64, bool);

/// The seeds of the `seed_generator` input if an `AnonymousSeedGenerator`
/// made it, else `own`.
fn generated(i: &mut Inputs, own: Seeds) -> Result<Seeds> {
    Ok(match i.next("seed_generator")? {
        Value::SeedGenerator(g) => Seeds(g.seed, g.seed2, g.reshuffle),
        _ => own,
    })
}

/// The `buffer_size` input, checked as TensorFlow's shuffles check it (−2,
/// TensorFlow's unknown cardinality, asks for a buffer of the whole input,
/// which the engine's shuffle gives).
fn buffer_size(i: &mut Inputs) -> Result<i64> {
    let buffer = i.int("buffer_size")?;
    if buffer <= 0 && buffer != -2 {
        return Err(i.err("buffer_size must be greater than zero or UNKNOWN_CARDINALITY"));
    }
    Ok(buffer)
}
