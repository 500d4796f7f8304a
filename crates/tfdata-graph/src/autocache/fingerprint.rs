//! What names a graph's cache: a structural hash of the prefix graph and
//! the files it reads.
//!
//! **Structure, not names.** TensorFlow names a traced function with a
//! per-process counter (`__inference_Dataset_map_lambda_123`) and a
//! dataset node after how many datasets the process built before
//! (`MapDataset/_3`, and the same in its `metadata` attribute), so two
//! registrations of one `tf.data` pipeline differ in names only. A node
//! hashes as its op, its attributes (sorted by key) and its inputs' hashes
//! in order (control inputs as a sorted set); a function-valued attribute
//! (or a call by op name) as the function's body: its signature's types,
//! its attributes, and the hashes of what its outputs and control outputs
//! are computed from, arguments by position. Left out, as names: the
//! attributes `metadata` (the dataset's debug name), `shared_name` and
//! `container` (resource names TensorFlow makes unique per process), and
//! every attribute starting with `_` (TensorFlow's annotations, e.g.
//! `_construction_context`, `_output_shapes`). The idea is TensorFlow's
//! `hash_utils.cc`; the code is ours.
//!
//! **Files.** Every string constant of the prefix (its nodes and every
//! function they reach) is given to the engine's resolver
//! (`tfdata_dataset::autocache::fingerprint::named_by_strings`), which
//! stats those that name files (path, size, mtime) exactly as a pipeline's
//! strings are. File names computed when the pipeline runs cannot be
//! watched: a prefix with `MatchingFiles` (`list_files`,
//! `TFRecordDataset(pattern)`), or a file source whose file names come
//! from neither a constant nor a function argument, is not fingerprinted,
//! and says why.

use std::collections::{BTreeSet, HashMap, HashSet};

use prost::Message;
use sha2::{Digest, Sha256};
use tfdata_core::{DType, Error, Result};
use tfdata_dataset::autocache::fingerprint::{
    NamedFiles, files_fingerprint, named_by_strings_with,
};
use tfdata_dataset::autocache::{FINGERPRINT_VERSION, Fingerprint, Resolver};
use tfdata_proto::tensorflow::{AttrValue, FunctionDef, GraphDef, NodeDef, attr_value};

use super::GraphCandidate;
use super::analyse::GraphAnalysis;
use super::graph_view::function_names;
use crate::attrs::NodeAttrs;
use crate::graph::{InputRef, Library, parse_input, retval};
use crate::{MAX_CALL_DEPTH, MAX_NODES};

/// The most nodes one hash walks through (a graph's and every function
/// body's, each counted once): a graph from the network cannot make the
/// hash take longer than reading it.
pub const MAX_HASH_DEPTH: usize = MAX_NODES;

/// Attributes that name rather than define (see the module docs).
const NAME_ATTRIBUTES: &[&str] = &["metadata", "shared_name", "container"];

/// File sources and the input that holds their file names.
const FILE_SOURCES: &[&str] = &[
    "TFRecordDataset",
    "TFRecordDatasetV2",
    "TextLineDataset",
    "FixedLengthRecordDataset",
    "FixedLengthRecordDatasetV2",
];

type Digest32 = [u8; 32];

/// The fingerprints of `candidate`: its prefix's structure and its files.
pub fn fingerprint(candidate: &GraphCandidate, fs: Resolver<'_>) -> Result<Fingerprint> {
    fingerprint_with(candidate, fs, &mut NamedFiles::default())
}

/// [`fingerprint`], each file string looked up once across calls sharing `seen`.
fn fingerprint_with(
    candidate: &GraphCandidate,
    fs: Resolver<'_>,
    seen: &mut NamedFiles,
) -> Result<Fingerprint> {
    let strings = file_strings(&candidate.prefix)?;
    let files = named_by_strings_with(strings, fs, seen)?;
    Ok(Fingerprint {
        prefix: prefix_fingerprint(&candidate.prefix)?,
        files: files_fingerprint(&files),
    })
}

/// The fingerprints of every candidate of `analysis`, in its order.
/// Every candidate names its source's files again: each is stat'ed once.
pub fn fingerprints(analysis: &GraphAnalysis, fs: Resolver<'_>) -> Vec<Result<Fingerprint>> {
    let mut seen = NamedFiles::default();
    analysis
        .candidates
        .iter()
        .map(|c| fingerprint_with(c, fs, &mut seen))
        .collect()
}

/// SHA-256 (hex) of the structure of what `prefix` (a prefix graph, or any
/// dataset graph) returns.
pub fn prefix_fingerprint(prefix: &GraphDef) -> Result<String> {
    let library = Library::of(prefix)?;
    let ret = retval(prefix)?;
    let result = ret
        .input
        .first()
        .ok_or_else(|| Error::InvalidArgument("dataset graph: the _Retval has no input".into()))?;
    let mut hasher = Hasher {
        library: &library,
        functions: HashMap::new(),
        in_progress: HashSet::new(),
        walked: 0,
    };
    let scope = Scope::graph(prefix);
    let mut memo = HashMap::new();
    let digest = hasher.input(&scope, result, &mut memo, 0)?;
    let mut h = Sha256::new();
    h.update(b"tfdata autocache graph prefix\0");
    h.update(FINGERPRINT_VERSION.to_le_bytes());
    h.update(digest);
    Ok(hex(&h.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The nodes an input name is resolved in: the graph, or one function's
/// body with its arguments by position.
struct Scope<'a> {
    nodes: HashMap<&'a str, &'a NodeDef>,
    args: HashMap<&'a str, usize>,
    in_function: bool,
}

impl<'a> Scope<'a> {
    fn graph(graph: &'a GraphDef) -> Self {
        Scope {
            nodes: graph.node.iter().map(|n| (n.name.as_str(), n)).collect(),
            args: HashMap::new(),
            in_function: false,
        }
    }

    fn function(def: &'a FunctionDef) -> Self {
        let args = def
            .signature
            .iter()
            .flat_map(|s| s.input_arg.iter())
            .enumerate()
            .map(|(i, a)| (a.name.as_str(), i))
            .collect();
        Scope {
            nodes: def.node_def.iter().map(|n| (n.name.as_str(), n)).collect(),
            args,
            in_function: true,
        }
    }

    fn node(&self, name: &str) -> Result<&'a NodeDef> {
        self.nodes.get(name).copied().ok_or_else(|| {
            Error::InvalidArgument(format!("autocache fingerprint: no node named {name:?}"))
        })
    }

    /// The node an input reads (`None`: a function argument).
    fn source(&self, input: &str) -> Result<Option<&'a NodeDef>> {
        match parse_input(input, self.in_function)? {
            InputRef::Arg(_) => Ok(None),
            other => self.node(other.source()).map(Some),
        }
    }
}

struct Hasher<'l> {
    library: &'l Library,
    /// Function hashes by name.
    functions: HashMap<String, Digest32>,
    /// Functions being hashed (a call back into one is a cycle).
    in_progress: HashSet<String>,
    /// Nodes hashed so far, against [`MAX_HASH_DEPTH`].
    walked: usize,
}

impl Hasher<'_> {
    /// The hash of one input reference of `scope`: the node's hash and
    /// which of its outputs, or the argument's position.
    fn input<'a>(
        &mut self,
        scope: &Scope<'a>,
        input: &str,
        memo: &mut HashMap<&'a str, Digest32>,
        depth: usize,
    ) -> Result<Digest32> {
        let mut h = Sha256::new();
        match parse_input(input, scope.in_function)? {
            InputRef::Arg(name) => {
                let position = scope.args.get(name).ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "autocache fingerprint: {name:?} is no argument of its function"
                    ))
                })?;
                h.update(b"arg");
                h.update((*position as u64).to_le_bytes());
            }
            InputRef::Control(node) => {
                h.update(b"control");
                h.update(self.node(scope, node, memo, depth)?);
            }
            InputRef::Output { node, arg, index } => {
                h.update(b"output");
                h.update(self.node(scope, node, memo, depth)?);
                put_str(&mut h, arg.unwrap_or(""));
                h.update((index as u64).to_le_bytes());
            }
        }
        Ok(h.finalize().into())
    }

    /// The hash of node `root` of `scope`, its inputs first: an explicit
    /// stack, not recursion, as bodies can chain thousands of nodes.
    fn node<'a>(
        &mut self,
        scope: &Scope<'a>,
        root: &str,
        memo: &mut HashMap<&'a str, Digest32>,
        depth: usize,
    ) -> Result<Digest32> {
        let root = scope.node(root)?;
        let mut stack: Vec<(&'a NodeDef, bool)> = vec![(root, false)];
        let mut open: HashSet<&'a str> = HashSet::new();
        while let Some((node, expanded)) = stack.pop() {
            if memo.contains_key(node.name.as_str()) {
                continue;
            }
            if !expanded {
                stack.push((node, true));
                open.insert(node.name.as_str());
                for input in &node.input {
                    if let Some(source) = scope.source(input)? {
                        if open.contains(source.name.as_str()) {
                            return Err(Error::InvalidArgument(format!(
                                "autocache fingerprint: node {} depends on itself",
                                source.name
                            )));
                        }
                        if !memo.contains_key(source.name.as_str()) {
                            stack.push((source, false));
                        }
                    }
                }
                continue;
            }
            self.walked += 1;
            if self.walked > MAX_HASH_DEPTH {
                return Err(Error::InvalidArgument(format!(
                    "autocache fingerprint: more than {MAX_HASH_DEPTH} nodes to hash"
                )));
            }
            let digest = self.one_node(scope, node, memo, depth)?;
            open.remove(node.name.as_str());
            memo.insert(node.name.as_str(), digest);
        }
        memo.get(root.name.as_str())
            .copied()
            .ok_or_else(|| Error::Internal("autocache fingerprint: a node went unhashed".into()))
    }

    /// One node whose inputs are hashed already.
    fn one_node<'a>(
        &mut self,
        scope: &Scope<'a>,
        node: &'a NodeDef,
        memo: &mut HashMap<&'a str, Digest32>,
        depth: usize,
    ) -> Result<Digest32> {
        let mut h = Sha256::new();
        if self.library.contains(&node.op) {
            h.update(b"call");
            h.update(self.function(&node.op, depth + 1)?);
        } else {
            h.update(b"op");
            put_str(&mut h, &node.op);
        }
        self.attrs(&mut h, &node.attr, depth)?;
        let mut controls = BTreeSet::new();
        let mut data = 0u64;
        for input in &node.input {
            let digest = self.input(scope, input, memo, depth)?;
            if input.starts_with('^') {
                controls.insert(digest);
            } else {
                data += 1;
                h.update(digest);
            }
        }
        h.update(data.to_le_bytes());
        h.update((controls.len() as u64).to_le_bytes());
        for c in controls {
            h.update(c);
        }
        Ok(h.finalize().into())
    }

    fn attrs(
        &mut self,
        h: &mut Sha256,
        attrs: &HashMap<String, AttrValue>,
        depth: usize,
    ) -> Result<()> {
        let mut keys: Vec<&String> = attrs
            .keys()
            .filter(|k| !k.starts_with('_') && !NAME_ATTRIBUTES.contains(&k.as_str()))
            .collect();
        keys.sort();
        h.update((keys.len() as u64).to_le_bytes());
        for key in keys {
            put_str(h, key);
            let digest = self.attr(&attrs[key], depth)?;
            h.update(digest);
        }
        Ok(())
    }

    fn attr(&mut self, value: &AttrValue, depth: usize) -> Result<Digest32> {
        let mut h = Sha256::new();
        match &value.value {
            Some(attr_value::Value::Func(f)) => {
                h.update(b"func");
                h.update(self.function(&f.name, depth + 1)?);
                self.attrs(&mut h, &f.attr, depth)?;
            }
            Some(attr_value::Value::List(list)) if !list.func.is_empty() => {
                h.update(b"list");
                let mut rest = list.clone();
                rest.func.clear();
                h.update(rest.encode_to_vec());
                for f in &list.func {
                    h.update(self.function(&f.name, depth + 1)?);
                    self.attrs(&mut h, &f.attr, depth)?;
                }
            }
            // No maps below these: their encoding is canonical.
            _ => {
                h.update(b"value");
                h.update(value.encode_to_vec());
            }
        }
        Ok(h.finalize().into())
    }

    /// A function's hash: its signature's types, its attributes, and what
    /// its outputs and control outputs are computed from.
    fn function(&mut self, name: &str, depth: usize) -> Result<Digest32> {
        if let Some(digest) = self.functions.get(name) {
            return Ok(*digest);
        }
        if depth > MAX_CALL_DEPTH {
            return Err(Error::InvalidArgument(format!(
                "autocache fingerprint: functions nest more than {MAX_CALL_DEPTH} deep"
            )));
        }
        if !self.in_progress.insert(name.to_string()) {
            return Err(Error::InvalidArgument(format!(
                "autocache fingerprint: function {name} calls itself"
            )));
        }
        let library = self.library;
        let def = library.get(name).ok_or_else(|| {
            Error::InvalidArgument(format!("autocache fingerprint: no function {name}"))
        })?;
        let signature = def.signature.clone().unwrap_or_default();
        let mut h = Sha256::new();
        h.update(b"function");
        for args in [&signature.input_arg, &signature.output_arg] {
            h.update((args.len() as u64).to_le_bytes());
            for arg in args {
                let mut anonymous = arg.clone();
                anonymous.name.clear();
                h.update(anonymous.encode_to_vec());
            }
        }
        h.update([u8::from(signature.is_stateful)]);
        self.attrs(&mut h, &def.attr, depth)?;
        let scope = Scope::function(def);
        let mut memo = HashMap::new();
        for arg in &signature.output_arg {
            let returned = def.ret.get(&arg.name).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "autocache fingerprint: function {name} returns nothing for {:?}",
                    arg.name
                ))
            })?;
            let digest = self.input(&scope, returned, &mut memo, depth)?;
            h.update(digest);
        }
        let mut controls = BTreeSet::new();
        for node in def.control_ret.values() {
            controls.insert(self.node(&scope, node, &mut memo, depth)?);
        }
        h.update((controls.len() as u64).to_le_bytes());
        for c in controls {
            h.update(c);
        }
        let digest: Digest32 = h.finalize().into();
        self.in_progress.remove(name);
        self.functions.insert(name.to_string(), digest);
        Ok(digest)
    }
}

/// Length-prefixed, so no two sequences hash the same bytes.
fn put_str(h: &mut Sha256, s: &str) {
    h.update((s.len() as u64).to_le_bytes());
    h.update(s.as_bytes());
}

/// The strings of every string constant of `prefix` (its nodes and every
/// function they reach); an error naming a node whose file names are
/// computed when the pipeline runs.
fn file_strings(prefix: &GraphDef) -> Result<Vec<String>> {
    let library = Library::of(prefix)?;
    let mut out = Vec::new();
    let graph_scope = Scope::graph(prefix);
    let mut functions: Vec<&str> = Vec::new();
    for node in &prefix.node {
        visit_for_files(&graph_scope, node, &mut out)?;
        functions.extend(function_names(node));
        if library.contains(&node.op) {
            functions.push(&node.op);
        }
    }
    let mut seen = HashSet::new();
    while let Some(name) = functions.pop() {
        if !seen.insert(name) {
            continue;
        }
        let def = library.get(name).ok_or_else(|| {
            Error::InvalidArgument(format!("autocache fingerprint: no function {name}"))
        })?;
        let scope = Scope::function(def);
        for node in &def.node_def {
            visit_for_files(&scope, node, &mut out)?;
            functions.extend(function_names(node));
            if library.contains(&node.op) {
                functions.push(&node.op);
            }
        }
    }
    Ok(out)
}

fn visit_for_files(scope: &Scope<'_>, node: &NodeDef, out: &mut Vec<String>) -> Result<()> {
    match node.op.as_str() {
        "MatchingFiles" => Err(Error::FailedPrecondition(format!(
            "`MatchingFiles` (node {}) lists files when the pipeline runs, so autocache cannot \
             tell which files the prefix reads nor drop its cache when they change (give the \
             file names as a list)",
            node.name
        ))),
        "Const" => {
            let attrs = NodeAttrs::of(node);
            if attrs.dtype("dtype").ok() != Some(DType::String) {
                return Ok(());
            }
            let tensor = attrs.tensor("value")?;
            for value in tensor.string_values()? {
                // Bytes that are not UTF-8 cannot be a path the io layer opens.
                if let Ok(s) = std::str::from_utf8(value) {
                    out.push(s.to_string());
                }
                if out.len() > tfdata_dataset::autocache::MAX_FINGERPRINT_FILES {
                    // `named_by_strings` words the limit.
                    return Ok(());
                }
            }
            Ok(())
        }
        op if FILE_SOURCES.contains(&op) => {
            let Some(first) = node.input.first() else {
                return Ok(());
            };
            let mut source = scope.source(first)?;
            for _ in 0..16 {
                match source {
                    Some(n) if n.op == "Identity" => {
                        source = match n.input.first() {
                            Some(i) => scope.source(i)?,
                            None => None,
                        }
                    }
                    _ => break,
                }
            }
            match source {
                // A function argument: the caller's constants were read.
                None => Ok(()),
                Some(n) if n.op == "Const" => Ok(()),
                Some(n) => Err(Error::FailedPrecondition(format!(
                    "`{op}` (node {}) reads file names that `{}` (node {}) computes when the \
                     pipeline runs, so autocache cannot tell which files it reads",
                    node.name, n.op, n.name
                ))),
            }
        }
        _ => Ok(()),
    }
}
