//! `LoadDataset` (`tf.data.Dataset.load` of a directory `Dataset.save`
//! wrote): the saved run's shard directories, sorted, each read as
//! `tfdata_dataset::snapshot::saved` reads a shard, and combined as the
//! node's `reader_func` says.
//!
//! TensorFlow hands `reader_func` a dataset of datasets, which the engine's
//! elements cannot carry; so the function is read, not run: it must be an
//! interleave (or `flat_map`) of its argument with an identity function,
//! which is what `load`'s default reader (`interleave(lambda x: x,
//! cycle_length=<cpus>, num_parallel_calls=AUTOTUNE)`) and the usual custom
//! ones are. Any other `reader_func` is refused as unimplemented rather than
//! read in another order. A distributed snapshot (which TensorFlow's `load`
//! also reads) is refused the same way here: its reader is the engine's
//! `load` source, reached through the client.

use std::sync::Arc;

use tfdata_core::{Element, Error, Result, Tensor};
use tfdata_dataset::functions::ResolvedDatasetFn;
use tfdata_dataset::snapshot::layout::{self, SnapshotCompression};
use tfdata_dataset::snapshot::saved;
use tfdata_dataset::spec::Structure;
use tfdata_dataset::{Dataset, FunctionRef, Inline};
use tfdata_proto::tensorflow::{FunctionDef, NodeDef, attr_value};

use super::node::handle;
use crate::attrs::NodeAttrs;
use crate::function::{CompiledNode, Compiler};
use crate::graph::Library;

/// The node compiled, if it is this module's.
pub(super) fn compile(
    node: &NodeDef,
    compiler: &Compiler<'_>,
    attrs: &NodeAttrs,
    spec: &Option<Structure>,
) -> Result<Option<CompiledNode>> {
    if node.op != "LoadDataset" {
        return Ok(None);
    }
    let spec = spec
        .clone()
        .ok_or_else(|| attrs.error("LoadDataset declares no output_types"))?;
    let compression = SnapshotCompression::parse(attrs.string_or("compression", "")?)
        .map_err(|e| attrs.error(e))?;
    let reader = ReaderPlan::of(compiler.library(), &attrs.func("reader_func")?.name)?;
    Ok(Some(handle(
        move |mut i| {
            let path = i.string("path")?;
            // The reader function's captured inputs: it was checked to use none.
            let _captured = i.take(None)?;
            load(&path, compression, &spec, reader)
        },
        node,
    )))
}

/// The saved dataset at `path`, as the `LoadDataset` kernel makes it.
fn load(
    path: &str,
    compression: SnapshotCompression,
    spec: &Structure,
    reader: ReaderPlan,
) -> Result<Dataset> {
    let fs = tfdata_dataset::io::registry::file_system(path)?;
    if fs.exists(&layout::dataset_def_file(path))? {
        return Err(Error::Unimplemented(format!(
            "LoadDataset: {path} is a distributed snapshot; loading one inside a graph is not \
             supported (tf.data.Dataset.load through the client reads it)"
        )));
    }
    let Some(metadata) = saved::read_metadata(&*fs, path)? else {
        return Err(Error::NotFound {
            what: "LoadDataset:",
            id: format!("Could not find metadata file [{path}]"),
        });
    };
    let run_dir = saved::run_dir(path, &metadata.run_id);
    let shards = saved::shard_dirs(&*fs, &run_dir)?;
    let count = shards.len() as i64;
    let shards = Dataset::from_tensor_slices(vec![Tensor::strings(
        shards.into_iter().map(bytes::Bytes::from).collect(),
        vec![count],
    )?]);
    let shard_spec = spec.clone();
    let open: tfdata_dataset::functions::DatasetFn = Arc::new(move |e: Element| {
        let dir = match e.components.first().map(|t| t.string_values()) {
            Some(Ok([dir])) => String::from_utf8_lossy(dir).into_owned(),
            _ => {
                return Err(Error::Internal(
                    "a shard directory is a scalar string".into(),
                ));
            }
        };
        Ok(Dataset::saved_shard(&dir, compression, shard_spec.clone()))
    });
    let output = Some(spec.clone());
    let f = FunctionRef::inline(
        "LoadDataset.shard",
        Inline {
            dataset: Some(Arc::new(move |_input| {
                Ok(ResolvedDatasetFn {
                    f: open.clone(),
                    output: output.clone(),
                })
            })),
            ..Default::default()
        },
    );
    let read = shards.interleave(f, reader.cycle_length, reader.block_length, None);
    Ok(Dataset::saved_load(read, metadata.num_elements))
}

/// What a `reader_func` of the supported form does: interleave the shards
/// with these parameters.
#[derive(Clone, Copy, Debug)]
struct ReaderPlan {
    cycle_length: i64,
    block_length: i64,
}

impl ReaderPlan {
    /// Reads the function `name`; refuses any other form (module docs).
    fn of(library: &Library, name: &str) -> Result<ReaderPlan> {
        let unsupported = |why: &str| {
            Error::Unimplemented(format!(
                "LoadDataset: reader_func {name} is not supported ({why}); only an interleave or \
                 flat_map of the shard datasets with an identity function is"
            ))
        };
        let def = library
            .get(name)
            .ok_or_else(|| Error::InvalidArgument(format!("LoadDataset: no function {name}")))?;
        let sig = def
            .signature
            .as_ref()
            .ok_or_else(|| unsupported("no signature"))?;
        let [arg] = sig.input_arg.as_slice() else {
            return Err(unsupported("it takes captured inputs"));
        };
        let [out] = sig.output_arg.as_slice() else {
            return Err(unsupported("it has several outputs"));
        };
        let source = def
            .ret
            .get(&out.name)
            .ok_or_else(|| unsupported("its output is unbound"))?;
        let node = producer(def, source).ok_or_else(|| unsupported("its output is its input"))?;
        let interleave = matches!(
            node.op.as_str(),
            "InterleaveDataset"
                | "ParallelInterleaveDatasetV2"
                | "ParallelInterleaveDatasetV3"
                | "ParallelInterleaveDatasetV4"
        );
        if !interleave && node.op != "FlatMapDataset" {
            return Err(unsupported(&format!("it ends in {}", node.op)));
        }
        if node.input.first().map(|s| base(s)) != Some(arg.name.as_str()) {
            return Err(unsupported("the interleave's input is not the shards"));
        }
        let attrs = NodeAttrs::of(node);
        if !attrs.dtype_codes("Targuments")?.is_empty() {
            return Err(unsupported("its interleave function captures inputs"));
        }
        if !is_identity(library, &attrs.func("f")?.name) {
            return Err(unsupported("its interleave function is not the identity"));
        }
        if !interleave {
            return Ok(ReaderPlan {
                cycle_length: 1,
                block_length: 1,
            });
        }
        let constant = |index: usize| -> Result<i64> {
            let input = node
                .input
                .get(index)
                .ok_or_else(|| unsupported("an interleave input is missing"))?;
            let value = def
                .node_def
                .iter()
                .find(|n| n.name == base(input) && n.op == "Const")
                .and_then(|n| n.attr.get("value"))
                .and_then(|v| match &v.value {
                    Some(attr_value::Value::Tensor(t)) => t
                        .int64_val
                        .first()
                        .copied()
                        .or(t.int_val.first().map(|&v| v.into())),
                    _ => None,
                });
            value.ok_or_else(|| unsupported("an interleave parameter is not a constant"))
        };
        let plan = ReaderPlan {
            cycle_length: constant(1)?,
            block_length: constant(2)?,
        };
        if plan.cycle_length <= 0 || plan.block_length <= 0 {
            // AUTOTUNE's cycle length is the machine's CPU count in
            // TensorFlow: an order that depends on the machine.
            return Err(unsupported(
                "its cycle or block length is not a positive constant",
            ));
        }
        Ok(plan)
    }
}

/// The node of `def` whose output `source` (`node:output:0`) is, through
/// any `Identity`s; `None` if it is an argument.
fn producer<'a>(def: &'a FunctionDef, source: &str) -> Option<&'a NodeDef> {
    let mut name = base(source);
    // Each step follows one Identity of the function's finite body.
    for _ in 0..=def.node_def.len() {
        let node = def.node_def.iter().find(|n| n.name == name)?;
        if node.op != "Identity" {
            return Some(node);
        }
        name = base(node.input.first()?);
    }
    None
}

/// Whether the library function `name` returns its only argument.
fn is_identity(library: &Library, name: &str) -> bool {
    let Some(def) = library.get(name) else {
        return false;
    };
    let Some(sig) = &def.signature else {
        return false;
    };
    let ([arg], [out]) = (sig.input_arg.as_slice(), sig.output_arg.as_slice()) else {
        return false;
    };
    let Some(source) = def.ret.get(&out.name) else {
        return false;
    };
    // Through Identities back to the argument itself.
    let mut name = base(source).to_string();
    for _ in 0..=def.node_def.len() {
        if name == arg.name {
            return true;
        }
        let Some(node) = def.node_def.iter().find(|n| n.name == name) else {
            return false;
        };
        if node.op != "Identity" {
            return false;
        }
        let Some(input) = node.input.first() else {
            return false;
        };
        name = base(input).to_string();
    }
    false
}

/// A function body's input reference without its output index
/// (`node:output:0` → `node`).
fn base(input: &str) -> &str {
    input.split(':').next().unwrap_or(input)
}
