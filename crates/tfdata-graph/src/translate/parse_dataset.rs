//! `ParseExampleDataset`, `ParseExampleDatasetV2` and
//! `ExperimentalParseExampleDataset`
//! (`tf.data.experimental.parse_example_dataset`): each element, a batch
//! (or one) of serialized `tf.train.Example`s, parsed as `ParseExampleV2`
//! parses it (the kernel in `kernels/parse_example.rs` runs it), its features in
//! the order of their keys (the order of the element's dict). A sparse
//! feature becomes a serialized SparseTensor, the form a SparseTensor
//! travels in inside a pipeline (`SerializeSparse`'s kernel).

use std::sync::Arc;

use bytes::Bytes;
use tfdata_core::{Element, Error, Result, Tensor};
use tfdata_dataset::functions::ResolvedMap;
use tfdata_dataset::spec::Structure;
use tfdata_dataset::{FunctionRef, Inline};
use tfdata_proto::tensorflow::{AttrValue, NodeDef, attr_value};

use super::node::{handle, kernel, sparse_serializer, tensors};
use crate::attrs::NodeAttrs;
use crate::function::CompiledNode;
use crate::kernels::Compute;

/// The node compiled, if it is one of this module's.
pub(super) fn compile(
    node: &NodeDef,
    attrs: &NodeAttrs,
    spec: &Option<Structure>,
) -> Result<Option<CompiledNode>> {
    if !matches!(
        node.op.as_str(),
        "ParseExampleDataset" | "ParseExampleDatasetV2" | "ExperimentalParseExampleDataset"
    ) {
        return Ok(None);
    }
    let parser = Arc::new(Parser::of(node, attrs)?);
    let n_dense = parser.dense_keys.len();
    let spec = spec.clone();
    Ok(Some(handle(
        move |mut i| {
            let input = i.dataset()?;
            let calls = i.int("num_parallel_calls")?;
            if calls <= 0 && calls != -1 {
                return Err(i.err("num_parallel_calls must be greater than zero."));
            }
            let defaults = tensors(i.take(Some(n_dense))?, "dense_defaults")?;
            let parser = parser.clone();
            let f: tfdata_dataset::MapFn =
                Arc::new(move |e: Element| parser.parse(e, &defaults).map(Element::new));
            let output = spec.clone();
            let inline = Inline {
                map: Some(Arc::new(move |_| {
                    Ok(ResolvedMap {
                        f: f.clone(),
                        output: output.clone(),
                    })
                })),
                ..Default::default()
            };
            Ok(input.map_with(
                FunctionRef::inline("parse_example", inline),
                Some(calls),
                true,
            ))
        },
        node,
    )))
}

struct Parser {
    parse: Compute,
    /// `SerializeSparse` for each sparse feature's dtype.
    serialize: Vec<Compute>,
    sparse_keys: Vec<Bytes>,
    dense_keys: Vec<Bytes>,
    /// Output slot of each parsed feature (sparse, then dense): its key's
    /// rank among all keys.
    order: Vec<usize>,
}

fn list(values: attr_value::ListValue) -> AttrValue {
    AttrValue {
        value: Some(attr_value::Value::List(values)),
    }
}

impl Parser {
    fn of(node: &NodeDef, attrs: &NodeAttrs) -> Result<Parser> {
        let keys = |k: &str| -> Result<Vec<Bytes>> {
            Ok(if attrs.has(k) {
                attrs
                    .strings(k)?
                    .into_iter()
                    .map(Bytes::copy_from_slice)
                    .collect()
            } else {
                Vec::new()
            })
        };
        let sparse_keys = keys("sparse_keys")?;
        let dense_keys = keys("dense_keys")?;
        if !keys("ragged_keys")?.is_empty() {
            return Err(Error::Unimplemented(format!(
                "{} node {:?}: ragged features (RaggedFeature) are not supported in a parsed \
                 dataset's elements",
                node.op, node.name
            )));
        }
        let sparse_types = attrs.dtype_codes("sparse_types")?;
        if sparse_types.len() != sparse_keys.len() {
            return Err(attrs.error("len(sparse_keys) != len(sparse_types)"));
        }
        let dense_types = attrs.dtype_codes("Tdense")?;
        if dense_types.len() != dense_keys.len() {
            return Err(attrs.error("len(dense_keys) != len(Tdense)"));
        }
        // The `ParseExampleV2` node this one's parse is.
        let mut parse = NodeDef {
            op: "ParseExampleV2".into(),
            name: node.name.clone(),
            ..Default::default()
        };
        let a = &mut parse.attr;
        a.insert(
            "num_sparse".into(),
            AttrValue {
                value: Some(attr_value::Value::I(sparse_keys.len() as i64)),
            },
        );
        a.insert(
            "sparse_types".into(),
            list(attr_value::ListValue {
                r#type: sparse_types.clone(),
                ..Default::default()
            }),
        );
        a.insert(
            "Tdense".into(),
            list(attr_value::ListValue {
                r#type: dense_types,
                ..Default::default()
            }),
        );
        a.insert(
            "dense_shapes".into(),
            list(attr_value::ListValue {
                shape: attrs.shapes("dense_shapes")?.to_vec(),
                ..Default::default()
            }),
        );
        for k in ["ragged_value_types", "ragged_split_types"] {
            a.insert(k.into(), list(attr_value::ListValue::default()));
        }
        let parse = kernel("ParseExampleV2", &parse)?;
        let serialize = sparse_types
            .iter()
            .map(|&t| sparse_serializer(&node.name, t))
            .collect::<Result<Vec<_>>>()?;
        let mut all: Vec<(&Bytes, usize)> = sparse_keys
            .iter()
            .chain(&dense_keys)
            .enumerate()
            .map(|(i, k)| (k, i))
            .collect();
        all.sort();
        let mut order = vec![0; all.len()];
        for (slot, (_, feature)) in all.iter().enumerate() {
            order[*feature] = slot;
        }
        Ok(Parser {
            parse,
            serialize,
            sparse_keys,
            dense_keys,
            order,
        })
    }

    fn parse(&self, e: Element, defaults: &[Tensor]) -> Result<Vec<Tensor>> {
        let [serialized] = <[Tensor; 1]>::try_from(e.components).map_err(|c| {
            Error::InvalidArgument(format!(
                "ParseExampleDataset: an element must be one string tensor, got {} components",
                c.len()
            ))
        })?;
        let keys = |k: &[Bytes]| Tensor::strings(k.to_vec(), vec![k.len() as i64]);
        let mut inputs = vec![
            serialized,
            Tensor::strings(Vec::new(), vec![0])?,
            keys(&self.sparse_keys)?,
            keys(&self.dense_keys)?,
            Tensor::strings(Vec::new(), vec![0])?,
        ];
        inputs.extend(defaults.iter().cloned());
        let out = (self.parse)(inputs)?;
        // Sparse indices, values and shapes as three lists, then the dense.
        let ns = self.sparse_keys.len();
        let mut features: Vec<Option<Tensor>> = Vec::with_capacity(self.order.len());
        for s in 0..ns {
            let triple = vec![out[s].clone(), out[ns + s].clone(), out[2 * ns + s].clone()];
            let mut serialized = (self.serialize[s])(triple)?;
            features.push(serialized.pop());
        }
        features.extend(out.into_iter().skip(3 * ns).map(Some));
        let mut slots: Vec<Option<Tensor>> = vec![None; self.order.len()];
        for (feature, t) in features.into_iter().enumerate() {
            slots[self.order[feature]] = t;
        }
        slots
            .into_iter()
            .map(|t| {
                t.ok_or_else(|| Error::Internal("ParseExampleDataset: a feature is missing".into()))
            })
            .collect()
    }
}
