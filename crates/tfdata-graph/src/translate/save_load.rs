//! `SaveDataset`, `SaveDatasetV2` (writing `Dataset.save`'s format, below),
//! `SnapshotDatasetReader` (one shard of it), `SnapshotChunkDataset` (one
//! file in the chunk record format) and `LoadDataset`
//! (`tf.data.Dataset.load` of a directory `Dataset.save`
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

use super::inline::Bound;
use super::node::{Inputs, element_args, function, handle};
use crate::attrs::NodeAttrs;
use crate::function::{CompiledNode, Compiler};
use crate::graph::Library;
use crate::value::Value;

/// The node compiled, if it is one of this module's.
pub(super) fn compile(
    node: &NodeDef,
    compiler: &mut Compiler<'_>,
    attrs: &NodeAttrs,
    spec: &Option<Structure>,
) -> Result<Option<CompiledNode>> {
    match node.op.as_str() {
        "LoadDataset" => compile_load(node, compiler, attrs, spec).map(Some),
        "SaveDataset" | "SaveDatasetV2" => compile_save(node, compiler, attrs).map(Some),
        "SnapshotDatasetReader" => compile_shard_reader(node, attrs, spec).map(Some),
        "SnapshotChunkDataset" => compile_chunk_file(node, attrs, spec).map(Some),
        _ => Ok(None),
    }
}

/// The node's declared element structure, which every reader here needs.
fn declared_spec(attrs: &NodeAttrs, spec: &Option<Structure>) -> Result<Structure> {
    spec.clone()
        .ok_or_else(|| attrs.error(format!("{} declares no output_types", attrs.op)))
}

/// The node's `compression` attribute (`""` is none).
fn compression(attrs: &NodeAttrs) -> Result<SnapshotCompression> {
    SnapshotCompression::parse(attrs.string_or("compression", "")?).map_err(|e| attrs.error(e))
}

fn compile_load(
    node: &NodeDef,
    compiler: &Compiler<'_>,
    attrs: &NodeAttrs,
    spec: &Option<Structure>,
) -> Result<CompiledNode> {
    let spec = declared_spec(attrs, spec)?;
    let compression = compression(attrs)?;
    let reader = ReaderPlan::of(compiler.library(), &attrs.func("reader_func")?.name)?;
    Ok(handle(
        move |mut i| {
            let path = i.string("path")?;
            // The reader function's captured inputs: it was checked to use none.
            let _captured = i.take(None)?;
            load(&path, compression, &spec, reader)
        },
        node,
    ))
}

/// `SnapshotDatasetReader`: one shard directory of a saved dataset (the
/// datasets `load` hands its reader function), from `start_index` on. Only
/// file format version 2 (what `Dataset.save` writes) is read; the older
/// custom formats are refused.
fn compile_shard_reader(
    node: &NodeDef,
    attrs: &NodeAttrs,
    spec: &Option<Structure>,
) -> Result<CompiledNode> {
    let spec = declared_spec(attrs, spec)?;
    let compression = compression(attrs)?;
    let version = attrs.int("version")?;
    if version != saved::FILE_FORMAT_VERSION {
        return Err(Error::Unimplemented(format!(
            "SnapshotDatasetReader: snapshot file format version {version} is not supported \
             (only {}, what Dataset.save writes)",
            saved::FILE_FORMAT_VERSION
        )));
    }
    Ok(handle(
        move |mut i| {
            let dir = i.string("shard_dir")?;
            let start = i.int("start_index")?;
            Ok(Dataset::saved_shard_from(
                &dir,
                compression,
                spec.clone(),
                start,
            ))
        },
        node,
    ))
}

/// `SnapshotChunkDataset`: the elements of one file in the chunk record
/// format (a distributed snapshot's chunk, or a saved dataset's checkpoint
/// file).
fn compile_chunk_file(
    node: &NodeDef,
    attrs: &NodeAttrs,
    spec: &Option<Structure>,
) -> Result<CompiledNode> {
    let spec = declared_spec(attrs, spec)?;
    let compression = compression(attrs)?;
    Ok(handle(
        move |mut i| {
            let file = i.string("chunk_file")?;
            Ok(Dataset::snapshot_chunk_file(
                &file,
                compression,
                spec.clone(),
            ))
        },
        node,
    ))
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

// ------------------------------------------------------------------ saving

/// `SaveDataset` (`Dataset.save` as an op: writes the whole input when it
/// runs, no output) and `SaveDatasetV2` (a dataset passing its input's
/// elements through while it writes them, finishing the save at their end).
fn compile_save(
    node: &NodeDef,
    compiler: &mut Compiler<'_>,
    attrs: &NodeAttrs,
) -> Result<CompiledNode> {
    let compression = compression(attrs)?;
    let use_shard_func = attrs.bool_or("use_shard_func", true)?;
    let f = function(attrs, "shard_func", compiler)?;
    let n = attrs.dtype_codes("Tshard_func_args")?.len();
    let args = element_args(attrs, "shard_func", n, compiler)?;
    let (name, op) = (node.name.clone(), node.op.clone());
    let v2 = node.op == "SaveDatasetV2";
    let run = move |values: Vec<Value>| -> Result<(Dataset, String, Sharding)> {
        let mut i = Inputs::new(values, &name, &op);
        let input = i.dataset()?;
        let path = i.string("path")?;
        let captured = i.take(Some(n))?;
        let sharding = if use_shard_func {
            Sharding::Function(Bound {
                function: f.clone(),
                captured,
                node: name.clone(),
                args: args.clone(),
            })
        } else {
            Sharding::RoundRobin(cpu_budget())
        };
        Ok((input, path, sharding))
    };
    if v2 {
        return Ok(CompiledNode {
            outputs: vec![("handle".into(), 1)],
            run: Arc::new(move |values| {
                let (input, path, sharding) = run(values)?;
                Ok(vec![Value::Dataset(Dataset::from_op(SaveV2 {
                    input,
                    path,
                    compression,
                    sharding: Arc::new(sharding),
                }))])
            }),
        });
    }
    Ok(CompiledNode {
        outputs: Vec::new(),
        run: Arc::new(move |values| {
            let (input, path, sharding) = run(values)?;
            save_all(&input, &path, compression, &sharding)?;
            Ok(Vec::new())
        }),
    })
}

/// How an element's shard index is chosen.
enum Sharding {
    /// `shard_func` on the element: one int64 scalar.
    Function(Bound),
    /// Without a shard function: 0, 1, ..., n − 1, 0, ... (TensorFlow's n
    /// is its CPU budget).
    RoundRobin(i64),
}

impl Sharding {
    /// The shard of the element after one in `previous` (−1 before the first).
    fn shard(&self, previous: i64, element: &Element) -> Result<i64> {
        match self {
            Sharding::RoundRobin(n) => Ok((previous + 1) % n),
            Sharding::Function(bound) => {
                let out = bound.call(element.clone())?;
                match out.as_slice() {
                    [Value::Tensor(t)]
                        if t.dtype() == tfdata_core::DType::Int64 && t.num_elements() == 1 =>
                    {
                        Ok(t.to_vec::<i64>()?[0])
                    }
                    _ => Err(Error::InvalidArgument(
                        "`shard_func` must return a scalar int64.".into(),
                    )),
                }
            }
        }
    }
}

/// TensorFlow's `GetCpuBudget()`: the cores this process may use.
fn cpu_budget() -> i64 {
    std::thread::available_parallelism().map_or(1, |n| n.get() as i64)
}

/// `SaveDataset`: the whole of `input` written to `path`.
fn save_all(
    input: &Dataset,
    path: &str,
    compression: SnapshotCompression,
    sharding: &Sharding,
) -> Result<()> {
    let spec = input.element_spec()?.ok_or_else(|| {
        Error::InvalidArgument("SaveDataset: the input's element spec is unknown".into())
    })?;
    let mut writer = saved::SavedWriter::start(path, &spec, compression)?;
    let mut it = input.iter()?;
    let (mut count, mut shard) = (0i64, -1i64);
    // Ends with the input: an infinite one writes until the disk is full,
    // as TensorFlow's does.
    while let Some(element) = it.next_element()? {
        count += 1;
        shard = sharding.shard(shard, &element)?;
        writer.write(shard, &element)?;
    }
    writer.finish(count)
}

/// `SaveDatasetV2`'s dataset (see [`compile_save`]).
struct SaveV2 {
    input: Dataset,
    path: String,
    compression: SnapshotCompression,
    sharding: Arc<Sharding>,
}

impl std::fmt::Debug for SaveV2 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaveV2")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl tfdata_dataset::DatasetOp for SaveV2 {
    fn name(&self) -> &'static str {
        "save_v2"
    }

    fn inputs(&self) -> Vec<Dataset> {
        vec![self.input.clone()]
    }

    fn attrs(&self) -> tfdata_dataset::Attrs {
        tfdata_dataset::Attrs::new()
            .with("path", self.path.as_str())
            .with("compression", self.compression.as_str())
    }

    fn element_spec(&self) -> Result<Option<Structure>> {
        self.input.element_spec()
    }

    fn cardinality(&self) -> i64 {
        self.input.cardinality()
    }

    fn make_iterator(
        &self,
        ctx: &tfdata_dataset::IterContext,
    ) -> Result<Box<dyn tfdata_dataset::ElementIterator>> {
        let spec = self.input.element_spec()?.ok_or_else(|| {
            Error::InvalidArgument("SaveDatasetV2: the input's element spec is unknown".into())
        })?;
        // As TensorFlow's iterator: the run directory and unfinished
        // metadata when the iterator is made.
        let writer = saved::SavedWriter::start(&self.path, &spec, self.compression)?;
        Ok(Box::new(SaveV2Iter {
            input: self.input.iter_with(ctx)?,
            writer: Some(writer),
            sharding: self.sharding.clone(),
            cardinality: self.input.cardinality(),
        }))
    }
}

struct SaveV2Iter {
    input: Box<dyn tfdata_dataset::ElementIterator>,
    /// `None` once finished (or failed): later calls end.
    writer: Option<saved::SavedWriter>,
    sharding: Arc<Sharding>,
    cardinality: i64,
}

impl tfdata_dataset::ElementIterator for SaveV2Iter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        let Some(writer) = self.writer.as_mut() else {
            return Ok(None);
        };
        let next = self.input.next_element();
        let result = match next {
            // TensorFlow's V2 starts each element's round robin from 0
            // afresh: without a shard function every element goes to shard
            // 1 (0 with one CPU).
            Ok(Some(element)) => self
                .sharding
                .shard(0, &element)
                .and_then(|shard| writer.write(shard, &element))
                .map(|()| Some(element)),
            Ok(None) => {
                let writer = self.writer.take().expect("checked above");
                // TensorFlow records the input's cardinality, not a count.
                return writer.finish(self.cardinality).map(|()| None);
            }
            Err(e) => Err(e),
        };
        if result.is_err() {
            self.writer = None;
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tfdata_dataset::io::registry::file_system;
    use tfdata_dataset::spec::{Shape, TensorSpec};

    fn triples_spec() -> Structure {
        Structure::from_components(vec![
            TensorSpec::new(tfdata_core::DType::Int64, Shape::scalar()),
            TensorSpec::new(tfdata_core::DType::String, Shape::scalar()),
            TensorSpec::new(tfdata_core::DType::Float, Shape::known(&[2])),
        ])
    }

    /// A library with `reader`, a function of one dataset argument `d`
    /// whose body is `nodes` and whose output is `out`, and `identity`.
    fn library(nodes: Vec<NodeDef>, out: &str) -> Library {
        use tfdata_proto::tensorflow::{FunctionDefLibrary, GraphDef, OpDef, op_def::ArgDef};
        let arg = |name: &str| ArgDef {
            name: name.into(),
            r#type: 21,
            ..Default::default()
        };
        let function = |name: &str, nodes: Vec<NodeDef>, out: &str| FunctionDef {
            signature: Some(OpDef {
                name: name.into(),
                input_arg: vec![arg("d")],
                output_arg: vec![arg("out")],
                ..Default::default()
            }),
            node_def: nodes,
            ret: [("out".to_string(), out.to_string())].into(),
            ..Default::default()
        };
        Library::of(&GraphDef {
            library: Some(FunctionDefLibrary {
                function: vec![
                    function("reader", nodes, out),
                    function("identity", vec![], "d"),
                ],
            }),
            ..Default::default()
        })
        .unwrap()
    }

    fn node(name: &str, op: &str, inputs: &[&str]) -> NodeDef {
        use tfdata_proto::tensorflow::{AttrValue, NameAttrList};
        let mut n = NodeDef {
            name: name.into(),
            op: op.into(),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        };
        let func = NameAttrList {
            name: "identity".into(),
            ..Default::default()
        };
        n.attr.insert(
            "f".into(),
            AttrValue {
                value: Some(attr_value::Value::Func(func)),
            },
        );
        n
    }

    #[test]
    fn reader_funcs_other_than_an_interleave_of_the_shards_are_refused() {
        // flat_map(identity) of the argument: read in order.
        let lib = library(vec![node("fm", "FlatMapDataset", &["d"])], "fm:handle:0");
        let plan = ReaderPlan::of(&lib, "reader").unwrap();
        assert_eq!((plan.cycle_length, plan.block_length), (1, 1));
        // Anything after the interleave (here a take) is refused, not ignored.
        let lib = library(
            vec![
                node("fm", "FlatMapDataset", &["d"]),
                node("take", "TakeDataset", &["fm:handle:0", "n"]),
            ],
            "take:handle:0",
        );
        let err = ReaderPlan::of(&lib, "reader").unwrap_err();
        assert!(matches!(err, Error::Unimplemented(_)), "{err}");
        // The function returning its argument (a dataset of datasets).
        let lib = library(vec![], "d");
        assert!(ReaderPlan::of(&lib, "reader").is_err());
    }

    fn gunzip(bytes: &[u8]) -> Vec<u8> {
        use std::io::Read;
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(bytes)
            .read_to_end(&mut out)
            .unwrap();
        out
    }

    /// TensorFlow's snappy framing: blocks of a big-endian `u32`
    /// compressed length and one raw snappy block.
    fn unsnappy(mut bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        while !bytes.is_empty() {
            let (len, rest) = bytes.split_at(4);
            let len = u32::from_be_bytes(len.try_into().unwrap()) as usize;
            let (block, rest) = rest.split_at(len);
            out.extend(snap::raw::Decoder::new().decompress_vec(block).unwrap());
            bytes = rest;
        }
        out
    }

    /// Our shard files hold what TensorFlow's do, byte for byte (GZIP's and
    /// SNAPPY's once decompressed), so TensorFlow's `load` reads ours: each shard TensorFlow wrote
    /// (tests/data/save_load, from the differential family) is read and
    /// written again, and compared.
    #[test]
    fn shard_files_are_tensorflows_byte_for_byte() {
        let data = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/save_load");
        let out = tempfile::tempdir().unwrap();
        let fs = file_system(data).unwrap();
        for (name, compression) in [
            ("triples_none", SnapshotCompression::None),
            ("triples_gzip", SnapshotCompression::Gzip),
            ("triples_snappy", SnapshotCompression::Snappy),
        ] {
            let run = format!("{data}/{name}/1234567890");
            let shards = saved::shard_dirs(&*fs, &run).unwrap();
            assert_eq!(shards.len(), 3, "{name}");
            for shard in shards {
                let mut it = Dataset::saved_shard(&shard, compression, triples_spec())
                    .iter()
                    .unwrap();
                let ours = format!("{}/{name}", out.path().display());
                let mut writer = saved::create_shard_writer(&*fs, &ours, 0, compression).unwrap();
                while let Some(element) = it.next_element().unwrap() {
                    writer.write(&element).unwrap();
                }
                writer.finish().unwrap();
                let theirs = std::fs::read(saved::checkpoint_file(&shard, 0)).unwrap();
                let ours = std::fs::read(saved::checkpoint_file(&ours, 0)).unwrap();
                // Compressors may encode the same stream in other bytes
                // (deflate's choices, snappy's matches): compressed files
                // are compared decompressed.
                let (ours, theirs) = match compression {
                    SnapshotCompression::Gzip => (gunzip(&ours), gunzip(&theirs)),
                    SnapshotCompression::Snappy => (unsnappy(&ours), unsnappy(&theirs)),
                    _ => (ours, theirs),
                };
                assert!(
                    ours == theirs,
                    "{shard}: our file differs from TensorFlow's"
                );
            }
        }
    }
}
