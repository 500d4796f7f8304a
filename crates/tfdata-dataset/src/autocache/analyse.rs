//! Which points of a pipeline autocache may cache.
//!
//! The main chain is the root, then `inputs[0]` while an op has exactly one
//! dataset input; an op with several (zip, concatenate,
//! directed_interleave) ends it, and is its bottom. Walking the chain up
//! from its bottom, a node is a candidate while every op so far is
//!
//! 1. **deterministic**: no unseeded random op or random built-in, no
//!    `shuffle` (or `list_files`) reshuffling each iteration, no user
//!    function (registered in Rust or Python) without
//!    `FunctionRef.deterministic`. A cache freezes one draw of any
//!    randomness and replays it every epoch; built-ins' determinism is
//!    known ([`DETERMINISTIC_BUILTINS`], [`SEEDED_RANDOM_BUILTINS`]);
//! 2. **split-independent**: the cache is written by the distributed
//!    snapshot writer, one stream per worker, the source's splits handed
//!    out dynamically, and read back the same way. Only ops whose output
//!    is the same multiset of elements however the splits fall survive
//!    that: sources, element-wise ops ([`ELEMENT_WISE`]) and order-only
//!    ops (a seeded `shuffle` without reshuffling). Ops that group or
//!    count elements across splits ([`ACROSS_ELEMENTS`]: `batch`, `take`,
//!    `repeat`, ...) end the chain.
//!
//! The first node that breaks a rule ends the walk; [`Analysis::stopped`]
//! says which op broke which rule, in one sentence for the status page.

use tfdata_proto::tfdata::pipeline::{OpDef, PipelineDef};

use crate::attrs::{Attr, Attrs, FunctionRef, attrs_from_wire};

/// One point of the main chain that may be cached.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// Position on the main chain counted from its bottom (0: the source).
    pub index: usize,
    /// `"2: map(decode_jpeg)"`: the index, the op and its function if any.
    pub label: String,
    /// The subtree whose output the point is: what the cache holds.
    pub prefix: OpDef,
    /// The point is an in-memory source alone ([`IN_MEMORY_SOURCES`]):
    /// profiled (its compute is the reference for the points above it)
    /// but never cached, as reading a cache back cannot beat memory.
    pub in_memory: bool,
}

/// What [`analyse`] found.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Analysis {
    /// The candidates, bottom first (so the last is the deepest prefix,
    /// the one that saves the most work if cached).
    pub candidates: Vec<Candidate>,
    /// Why the points above the last candidate are not candidates (`None`:
    /// the whole pipeline is one).
    pub stopped: Option<String>,
}

/// Sources read files or tensors the same way every time.
const SOURCES: &[&str] = &[
    "range",
    "from_tensors",
    "from_tensor_slices",
    "tfrecord_dataset",
    "text_line_dataset",
    "fixed_length_record_dataset",
    "parquet_dataset",
    "webdataset",
    "array_record_dataset",
    "arrow_dataset",
    "huggingface_dataset",
    "window_elements",
];

/// Sources whose elements are in the dataset's definition (or counted):
/// what a cache of them would hold is what they make without one.
pub const IN_MEMORY_SOURCES: &[&str] = &["range", "from_tensors", "from_tensor_slices"];

/// Ops that turn each element into zero, one or several elements on its
/// own: the multiset of their output does not depend on which worker saw
/// which split. (`map`'s and `interleave`'s parallel forms are the same ops
/// with `num_parallel_calls`; their non-deterministic order is order only.)
pub const ELEMENT_WISE: &[&str] = &[
    "map",
    "filter",
    "flat_map",
    "interleave",
    "prefetch",
    "ignore_errors",
    "unbatch",
];

/// Ops whose output depends on how many elements came before or beside an
/// element: with splits spread over workers, a cache would hold other
/// groups (or counts) than one reader of the whole input makes.
pub const ACROSS_ELEMENTS: &[&str] = &[
    "batch",
    "padded_batch",
    "rebatch",
    "take",
    "skip",
    "repeat",
    "window",
    "scan",
    "enumerate",
    "shard",
    "cache",
    "assert_cardinality",
    "group_by_window",
    "group_by_reducer",
    "unique",
    "take_while",
];

/// Built-in functions with no randomness: the same output for the same
/// input ([`crate::builtins`], the file readers of `interleave`).
pub const DETERMINISTIC_BUILTINS: &[&str] = &[
    "parse_example",
    "select",
    "decode_jpeg",
    "decode_png",
    "decode_image",
    "decode_and_crop_jpeg",
    "resize",
    "resize_normalize",
    "decode_jpeg_resize",
    "central_crop",
    "crop_to_bounding_box",
    "flip_left_right",
    "flip_up_down",
    "cast",
    "normalize",
    "per_image_standardization",
    "scale",
    "one_hot",
    "string_split",
    "lower",
    "lookup",
    "tfrecord_dataset",
    "text_line_dataset",
];

/// Built-ins that draw random numbers: deterministic only with a `seed`
/// argument (their stream is then a function of the seed and the element's
/// position in the function's own count).
pub const SEEDED_RANDOM_BUILTINS: &[&str] = &[
    "random_crop",
    "random_flip_left_right",
    "random_flip_up_down",
    "decode_random_crop_jpeg",
];

/// The candidate points of `def` (see the module docs).
pub fn analyse(def: &PipelineDef) -> Analysis {
    let Some(root) = def.root.as_ref() else {
        return Analysis {
            candidates: Vec::new(),
            stopped: Some("the pipeline has no root op".into()),
        };
    };
    let chain = main_chain(root);
    if chain.last().is_some_and(|bottom| bottom.inputs.len() == 1) {
        return Analysis {
            candidates: Vec::new(),
            stopped: Some(format!(
                "the pipeline is deeper than {} ops",
                crate::pipeline::MAX_DEPTH
            )),
        };
    }
    let mut candidates = Vec::new();
    for (index, node) in chain.iter().rev().enumerate() {
        let label = label(index, node);
        if let Err(rule) = check(node) {
            return Analysis {
                candidates,
                stopped: Some(format!(
                    "{rule} at {label}; nothing from there on is cached"
                )),
            };
        }
        candidates.push(Candidate {
            index,
            label,
            prefix: (*node).clone(),
            in_memory: index == 0 && IN_MEMORY_SOURCES.contains(&node.op.as_str()),
        });
    }
    Analysis {
        candidates,
        stopped: None,
    }
}

/// The main chain, root first: `inputs[0]` while an op has one input, at
/// most [`crate::pipeline::MAX_DEPTH`] + 1 ops (decoding refuses deeper
/// pipelines; [`analyse`] refuses a chain cut there).
pub(super) fn main_chain(root: &OpDef) -> Vec<&OpDef> {
    let mut chain = vec![root];
    let mut node = root;
    while node.inputs.len() == 1 && chain.len() <= crate::pipeline::MAX_DEPTH {
        node = &node.inputs[0];
        chain.push(node);
    }
    chain
}

/// `"2: map(decode_jpeg)"`.
pub(super) fn label(index: usize, node: &OpDef) -> String {
    let function = ["function", "predicate"].iter().find_map(|key| {
        match node.attrs.get(*key).and_then(|a| a.value.as_ref()) {
            Some(tfdata_proto::tfdata::pipeline::attr_value::Value::Function(f)) => {
                Some(f.name.clone())
            }
            _ => None,
        }
    });
    match function {
        Some(f) => format!("{index}: {}({f})", node.op),
        None => format!("{index}: {}", node.op),
    }
}

/// Whether `node` (whose inputs passed already) keeps its output cacheable;
/// the rule it breaks otherwise.
fn check(node: &OpDef) -> Result<(), String> {
    let op = node.op.as_str();
    if node.inputs.len() > 1 {
        return Err(format!(
            "`{op}` combines {} datasets, whose splits the snapshot writer cannot pair up",
            node.inputs.len()
        ));
    }
    let attrs = attrs_from_wire(&node.attrs, 0)
        .map_err(|e| format!("`{op}` has attributes autocache cannot read ({e})"))?;
    deterministic(op, &attrs)?;
    match op {
        _ if SOURCES.contains(&op) || ELEMENT_WISE.contains(&op) => Ok(()),
        // Seeded and not reshuffled, as `deterministic` checked: it only
        // orders elements, which a multiset does not see.
        "shuffle" => Ok(()),
        "list_files" => Ok(()),
        "load" => {
            Err("`load` reads a snapshot already; caching its output again saves nothing".into())
        }
        "random" => Err("`random` is an infinite stream; a cache of it would never end".into()),
        _ if ACROSS_ELEMENTS.contains(&op) => Err(format!(
            "`{op}` groups or counts elements across splits, so a cache written by several \
             workers would not hold what it outputs"
        )),
        _ => Err(format!(
            "`{op}` is not an op autocache knows to be element-wise"
        )),
    }
}

/// The determinism rule for one op: its own randomness and every function
/// it names (at any depth of its attributes).
fn deterministic(op: &str, attrs: &Attrs) -> Result<(), String> {
    let int = |key: &str| match attrs.get(key) {
        Some(Attr::Int(v)) => Some(*v),
        _ => None,
    };
    let flag = |key: &str, default: bool| match attrs.get(key) {
        Some(Attr::Bool(b)) => *b,
        _ => default,
    };
    match op {
        "shuffle" => {
            if flag("reshuffle_each_iteration", true) {
                return Err(
                    "`shuffle` with reshuffle_each_iteration (a cache would fix one order)".into(),
                );
            }
            // TensorFlow's rule: seeds (0, 0) mean "unseeded".
            let seeded = match (int("graph_seed"), int("seed")) {
                (Some(g), s) => g != 0 || s.unwrap_or(0) != 0,
                (None, s) => s.is_some(),
            };
            if !seeded {
                return Err("unseeded random op `shuffle`".into());
            }
        }
        // TensorFlow shuffles the file names by default, anew each epoch.
        "list_files" if flag("shuffle", true) => {
            return Err(
                "`list_files` with shuffle=True (it reshuffles its files each iteration)".into(),
            );
        }
        "random" => {
            let seeded = int("seed").unwrap_or(0) != 0 || int("seed2").unwrap_or(0) != 0;
            if !seeded || flag("rerandomize_each_iteration", false) {
                return Err("unseeded random op `random`".into());
            }
        }
        _ => {}
    }
    for function in functions(attrs) {
        function_deterministic(function)?;
    }
    Ok(())
}

fn function_deterministic(f: &FunctionRef) -> Result<(), String> {
    let name = f.name.as_str();
    if DETERMINISTIC_BUILTINS.contains(&name) {
        return Ok(());
    }
    if SEEDED_RANDOM_BUILTINS.contains(&name) {
        return match f.args.get("seed") {
            Some(Attr::Int(_)) => Ok(()),
            _ => Err(format!("unseeded random op `{name}`")),
        };
    }
    if f.deterministic {
        return Ok(());
    }
    Err(format!(
        "user function `{name}` not declared deterministic (register it with \
         deterministic=True if it returns the same output for the same input)"
    ))
}

/// Every function named in `attrs`, including functions in other
/// functions' arguments.
fn functions(attrs: &Attrs) -> Vec<&FunctionRef> {
    fn visit<'a>(attr: &'a Attr, out: &mut Vec<&'a FunctionRef>) {
        match attr {
            Attr::Function(f) => {
                out.push(f);
                f.args.0.values().for_each(|a| visit(a, out));
            }
            Attr::List(items) => items.iter().for_each(|a| visit(a, out)),
            Attr::Map(m) => m.values().for_each(|a| visit(a, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    attrs.0.values().for_each(|a| visit(a, &mut out));
    out
}
