//! A [`Dataset`] as the `PipelineDef` that travels inside `DatasetDef`
//! (field 100, which TensorFlow ignores), and back.

use tfdata_core::{Error, Result};
use tfdata_proto::tfdata::pipeline as wire;

use crate::attrs::{InlineBody, attach_inline, attrs_from_wire, attrs_to_wire};
use crate::dataset::Dataset;

/// Bumped on every change an older worker would misread.
/// 1: a fixed set of ops in a oneof; 2: named ops with attributes.
pub const PIPELINE_FORMAT_VERSION: u32 = 2;

/// Upper bound on graph depth accepted from the wire, so a malicious or
/// corrupt pipeline cannot overflow the stack while being decoded.
pub const MAX_DEPTH: usize = 256;

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

/// Two datasets are equal when they serialise to the same pipeline.
impl PartialEq for Dataset {
    fn eq(&self, other: &Self) -> bool {
        op_to_wire(self) == op_to_wire(other)
    }
}

fn op_to_wire(ds: &Dataset) -> wire::OpDef {
    wire::OpDef {
        op: ds.op.name().to_string(),
        inputs: ds.op.inputs().iter().map(op_to_wire).collect(),
        attrs: attrs_to_wire(&ds.op.attrs()),
    }
}

/// Rebuilds and validates a pipeline received from the wire.
pub fn from_pipeline_def(def: &wire::PipelineDef) -> Result<Dataset> {
    from_pipeline_def_with(def, &|_| None)
}

/// Rebuilds a pipeline whose functions `scope` may carry inline (see
/// [`crate::attrs::Inline`]): a translated TensorFlow graph serialised for a
/// rewrite (static sharding) and rebuilt.
pub fn from_pipeline_def_with(
    def: &wire::PipelineDef,
    scope: &dyn Fn(&str) -> Option<InlineBody>,
) -> Result<Dataset> {
    if def.format_version != PIPELINE_FORMAT_VERSION {
        return Err(Error::InvalidArgument(format!(
            "pipeline format version {} is not supported (this build reads version \
             {PIPELINE_FORMAT_VERSION}); run the same tfdata version on clients and workers",
            def.format_version
        )));
    }
    let root = def
        .root
        .as_ref()
        .ok_or_else(|| Error::InvalidArgument("pipeline has no root op".into()))?;
    let ds = op_from_wire(root, 0, scope)?;
    ds.validate()?;
    Ok(ds)
}

fn op_from_wire(
    def: &wire::OpDef,
    depth: usize,
    scope: &dyn Fn(&str) -> Option<InlineBody>,
) -> Result<Dataset> {
    if depth > MAX_DEPTH {
        return Err(Error::InvalidArgument(format!(
            "pipeline is deeper than {MAX_DEPTH} ops"
        )));
    }
    let inputs = def
        .inputs
        .iter()
        .map(|i| op_from_wire(i, depth + 1, scope))
        .collect::<Result<Vec<_>>>()?;
    let mut attrs = attrs_from_wire(&def.attrs, 0)?;
    attach_inline(&mut attrs, scope);
    crate::ops::build(&def.op, inputs, &attrs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attrs::FunctionRef;
    use prost::Message;
    use tfdata_core::Tensor;

    fn encode_decode(def: &wire::PipelineDef) -> wire::PipelineDef {
        wire::PipelineDef::decode(def.encode_to_vec().as_slice()).unwrap()
    }

    #[test]
    fn round_trip_through_protobuf() {
        crate::register_function("pipeline_test_f", Ok);
        crate::functions::register_predicate("pipeline_test_p", |_| Ok(true));
        let ds = Dataset::range_with_step(3, 40, 2)
            .map("pipeline_test_f")
            .filter("pipeline_test_p")
            .shuffle(10, Some(7), false)
            .batch(4, true)
            .unbatch()
            .repeat(Some(2))
            .skip(1)
            .shard(2, 1)
            .take(2)
            .prefetch(-1)
            .enumerate(5)
            .concatenate(Dataset::from_tensors(vec![
                Tensor::scalar(1i64),
                Tensor::scalar(2i64),
            ]))
            .cache("");
        let def = to_pipeline_def(&ds, true).unwrap();
        assert!(def.compress);
        let back = from_pipeline_def(&encode_decode(&def)).unwrap();
        assert_eq!(back, ds);
    }

    #[test]
    fn tensorflow_graph_ops_round_trip() {
        crate::register_function("pipeline_test_scan", |e: tfdata_core::Element| {
            Ok(tfdata_core::Element::new(vec![
                e.components[0].clone(),
                e.components[1].clone(),
            ]))
        });
        crate::register_function("pipeline_test_key", |_e: tfdata_core::Element| {
            Ok(tfdata_core::Element::new(vec![Tensor::scalar(0i64)]))
        });
        crate::functions::register_predicate("pipeline_test_lt", |e| {
            Ok(e.components[0].to_scalar::<i64>()? < 5)
        });
        crate::register_dataset_function("pipeline_test_reduce", None, |e| {
            Dataset::window_from_pairs(e.components[1..].to_vec())
        });
        let selector = Dataset::random(3, 4, true)
            .take(20)
            .map("pipeline_test_key");
        let ds = Dataset::directed_interleave(
            selector,
            vec![
                Dataset::range(30)
                    .scan(
                        vec![Tensor::scalar(0i64)],
                        FunctionRef::named("pipeline_test_scan"),
                        true,
                    )
                    .take_while(FunctionRef::named("pipeline_test_lt"))
                    .unique()
                    .ignore_errors(),
            ],
            false,
        )
        .group_by_window(
            FunctionRef::named("pipeline_test_key"),
            FunctionRef::named("pipeline_test_reduce"),
            FunctionRef::named("pipeline_test_key"),
        )
        .window(2, 1, 1, false)
        .take(3);
        let rebatched = Dataset::range(9).batch(4, false).rebatch(vec![3, 2], true);
        for ds in [ds, rebatched] {
            let def = to_pipeline_def(&ds, false).unwrap();
            let back = from_pipeline_def(&encode_decode(&def)).unwrap();
            assert_eq!(back, ds);
            assert_eq!(back.cardinality(), ds.cardinality());
        }
        let w = Dataset::window_from_pairs(vec![
            Tensor::vector(&[1i64, 2, 3]),
            Tensor::from_slice(&[1i64, 2], vec![2, 1]).unwrap(),
        ])
        .unwrap();
        let def = to_pipeline_def(&w, false).unwrap();
        assert_eq!(from_pipeline_def(&encode_decode(&def)).unwrap(), w);
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

        let unknown = wire::PipelineDef {
            format_version: PIPELINE_FORMAT_VERSION,
            root: Some(wire::OpDef {
                op: "frobnicate".into(),
                ..Default::default()
            }),
            compress: false,
        };
        let err = from_pipeline_def(&unknown).unwrap_err().to_string();
        assert!(err.contains("frobnicate") && err.contains("batch"), "{err}");

        let bad_batch = to_pipeline_def(&Dataset::range(3).batch(2, false), false).unwrap();
        let mut bad_batch = encode_decode(&bad_batch);
        let root = bad_batch.root.as_mut().unwrap();
        root.attrs.insert(
            "batch_size".into(),
            crate::attrs::attr_to_wire(&crate::attrs::Attr::Int(-4)),
        );
        assert!(
            from_pipeline_def(&bad_batch)
                .unwrap_err()
                .to_string()
                .contains("batch_size")
        );

        let mut typo = encode_decode(&to_pipeline_def(&Dataset::range(3).take(1), false).unwrap());
        typo.root.as_mut().unwrap().attrs.insert(
            "cuont".into(),
            crate::attrs::attr_to_wire(&crate::attrs::Attr::Int(1)),
        );
        assert!(
            from_pipeline_def(&typo)
                .unwrap_err()
                .to_string()
                .contains("cuont")
        );

        let _ = FunctionRef::named("x");
    }
}
