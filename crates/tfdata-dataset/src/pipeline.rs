//! A [`Dataset`] as the `PipelineDef` that travels inside `DatasetDef`
//! (field 100, which TensorFlow ignores), and back.

use tfdata_core::{Error, Result};
use tfdata_proto::tfdata::pipeline::{self as wire, op_def::Op as WireOp};

use crate::dataset::{Dataset, Op};

/// Bumped on every change an older worker would misread.
pub const PIPELINE_FORMAT_VERSION: u32 = 1;

/// Upper bound on graph depth accepted from the wire, so a malicious or
/// corrupt pipeline cannot overflow the stack while being decoded.
const MAX_DEPTH: usize = 256;

/// Serialises `dataset`; `compress` asks workers to send Snappy-compressed
/// elements (TensorFlow's `compression="AUTO"`).
pub fn to_pipeline_def(dataset: &Dataset, compress: bool) -> Result<wire::PipelineDef> {
    dataset.validate()?;
    Ok(wire::PipelineDef {
        format_version: PIPELINE_FORMAT_VERSION,
        root: Some(op_to_wire(dataset)),
        compress,
    })
}

fn op_to_wire(ds: &Dataset) -> wire::OpDef {
    let boxed = |d: &Dataset| Some(Box::new(op_to_wire(d)));
    let op = match &*ds.op {
        Op::Range { start, stop, step } => WireOp::Range(wire::RangeOp {
            start: *start,
            stop: *stop,
            step: *step,
        }),
        Op::Map { input, function } => WireOp::Map(Box::new(wire::MapOp {
            input: boxed(input),
            function: function.clone(),
        })),
        Op::Batch {
            input,
            batch_size,
            drop_remainder,
        } => WireOp::Batch(Box::new(wire::BatchOp {
            input: boxed(input),
            batch_size: *batch_size,
            drop_remainder: *drop_remainder,
        })),
        Op::Take { input, count } => WireOp::Take(Box::new(wire::TakeOp {
            input: boxed(input),
            count: *count,
        })),
    };
    wire::OpDef { op: Some(op) }
}

/// Rebuilds and validates a pipeline received from the wire.
pub fn from_pipeline_def(def: &wire::PipelineDef) -> Result<Dataset> {
    if def.format_version != PIPELINE_FORMAT_VERSION {
        return Err(Error::InvalidArgument(format!(
            "pipeline format version {} is not supported (this build reads version \
             {PIPELINE_FORMAT_VERSION}); upgrade the workers",
            def.format_version
        )));
    }
    let root = def
        .root
        .as_ref()
        .ok_or_else(|| Error::InvalidArgument("pipeline has no root op".into()))?;
    let ds = op_from_wire(root, 0)?;
    ds.validate()?;
    Ok(ds)
}

fn op_from_wire(def: &wire::OpDef, depth: usize) -> Result<Dataset> {
    if depth > MAX_DEPTH {
        return Err(Error::InvalidArgument(format!(
            "pipeline is deeper than {MAX_DEPTH} ops"
        )));
    }
    let input = |op: &str, i: &Option<Box<wire::OpDef>>| -> Result<Dataset> {
        let i = i
            .as_deref()
            .ok_or_else(|| Error::InvalidArgument(format!("{op}: missing input")))?;
        op_from_wire(i, depth + 1)
    };
    let op = match def.op.as_ref() {
        None => {
            return Err(Error::InvalidArgument(
                "pipeline op is empty or of a kind this build does not know; upgrade the workers"
                    .into(),
            ));
        }
        Some(WireOp::Range(r)) => Op::Range {
            start: r.start,
            stop: r.stop,
            step: r.step,
        },
        Some(WireOp::Map(m)) => Op::Map {
            input: input("map", &m.input)?,
            function: m.function.clone(),
        },
        Some(WireOp::Batch(b)) => Op::Batch {
            input: input("batch", &b.input)?,
            batch_size: b.batch_size,
            drop_remainder: b.drop_remainder,
        },
        Some(WireOp::Take(t)) => Op::Take {
            input: input("take", &t.input)?,
            count: t.count,
        },
    };
    Ok(Dataset {
        op: std::sync::Arc::new(op),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost_free::encode_decode;

    mod prost_free {
        // Round-trips through the real protobuf encoding.
        pub fn encode_decode(def: &super::wire::PipelineDef) -> super::wire::PipelineDef {
            use tfdata_proto::prost::Message;
            super::wire::PipelineDef::decode(def.encode_to_vec().as_slice()).unwrap()
        }
    }

    #[test]
    fn round_trip_through_protobuf() {
        let ds = Dataset::range_with_step(3, 40, 2)
            .map("f")
            .batch(4, true)
            .take(2);
        let def = to_pipeline_def(&ds, true).unwrap();
        assert!(def.compress);
        let back = from_pipeline_def(&encode_decode(&def)).unwrap();
        assert_eq!(back, ds);
    }

    #[test]
    fn bad_pipelines_are_rejected() {
        let mut def = to_pipeline_def(&Dataset::range(3), false).unwrap();
        def.format_version = 99;
        assert!(
            from_pipeline_def(&def)
                .unwrap_err()
                .to_string()
                .contains("version 99")
        );

        let def = wire::PipelineDef {
            format_version: PIPELINE_FORMAT_VERSION,
            root: Some(wire::OpDef { op: None }),
            compress: false,
        };
        assert!(from_pipeline_def(&def).is_err());

        let bad_batch = wire::PipelineDef {
            format_version: PIPELINE_FORMAT_VERSION,
            root: Some(wire::OpDef {
                op: Some(WireOp::Batch(Box::new(wire::BatchOp {
                    input: Some(Box::new(op_to_wire(&Dataset::range(3)))),
                    batch_size: -4,
                    drop_remainder: false,
                }))),
            }),
            compress: false,
        };
        assert!(
            from_pipeline_def(&bad_batch)
                .unwrap_err()
                .to_string()
                .contains("batch_size")
        );
    }
}
