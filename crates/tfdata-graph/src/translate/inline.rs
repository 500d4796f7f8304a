//! Compiled functions as the engine's inline functions: a dataset node's
//! `f`/`predicate` with its captured inputs (`other_arguments`) bound, and
//! its output structure taken from the node's `output_types` and
//! `output_shapes` (what TensorFlow inferred when it traced the function).

use std::sync::Arc;

use tfdata_core::{Element, Error, Result};
use tfdata_dataset::functions::{ResolvedDatasetFn, ResolvedMap};
use tfdata_dataset::spec::{Shape, Structure, TensorSpec};
use tfdata_dataset::{FunctionRef, Inline};
use tfdata_proto::tensorflow::TensorShapeProto;

use crate::attrs::NodeAttrs;
use crate::function::Function;
use crate::value::Value;

/// How an element's components become one of a function's arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Arg {
    /// One component, as is.
    Tensor,
    /// A dataset (a `DT_VARIANT` argument): a window of `n` components,
    /// which the element carries encoded as `2n` components
    /// (`tfdata_dataset::ops::window`).
    Window(usize),
    /// A dataset of the rows of a window encoded in all the remaining
    /// components (`group_by_window`'s group: every component of the
    /// input's elements).
    Group,
}

/// A function with the captured values appended to its arguments.
#[derive(Clone)]
pub(crate) struct Bound {
    pub function: Arc<Function>,
    pub captured: Vec<Value>,
    /// The calling node, so each use of a function has its own name (two
    /// nodes may call one function with different captured values).
    pub node: String,
    /// How the element's components map to the arguments; empty when each
    /// component is one tensor argument (no dataset arguments).
    pub args: Arc<[Arg]>,
}

impl Bound {
    /// The name the engine knows this use by: `function@node`.
    fn label(&self) -> String {
        format!("{}@{}", self.function.name, self.node)
    }

    /// Calls the function on an element's components.
    pub fn call(&self, element: Element) -> Result<Vec<Value>> {
        self.call_components(element.components)
    }

    /// Calls the function on components (see [`Bound::args`]).
    pub fn call_components(&self, components: Vec<tfdata_core::Tensor>) -> Result<Vec<Value>> {
        let mut args: Vec<Value> = Vec::with_capacity(components.len() + self.captured.len());
        let mut components = components.into_iter();
        for arg in self.args.iter() {
            match *arg {
                Arg::Tensor => match components.next() {
                    Some(t) => args.push(Value::Tensor(t)),
                    None => break,
                },
                Arg::Window(_) | Arg::Group => {
                    let pairs: Vec<_> = match *arg {
                        Arg::Window(n) => components.by_ref().take(2 * n).collect(),
                        _ => components.by_ref().collect(),
                    };
                    let ds = tfdata_dataset::Dataset::window_from_pairs(pairs).map_err(|e| {
                        Error::InvalidArgument(format!(
                            "{}: a dataset argument is not an encoded window: {e}",
                            self.function.name
                        ))
                    })?;
                    args.push(Value::Dataset(ds));
                }
            }
        }
        args.extend(components.map(Value::Tensor));
        args.extend(self.captured.iter().cloned());
        self.function.call(args)
    }

    fn tensors(&self, element: Element) -> Result<Vec<tfdata_core::Tensor>> {
        let name = &self.function.name;
        self.call(element)?
            .into_iter()
            .map(|v| v.into_tensor(name))
            .collect()
    }
}

/// `f` as a map function returning `output`.
pub(crate) fn map(bound: Bound, output: Option<Structure>) -> FunctionRef {
    let name = bound.label();
    let f = Arc::new(move |e: Element| bound.tensors(e).map(Element::new));
    FunctionRef::inline(
        &name,
        Inline {
            map: Some(Arc::new(move |_input| {
                Ok(ResolvedMap {
                    f: f.clone(),
                    output: output.clone(),
                })
            })),
            ..Default::default()
        },
    )
}

/// `f` as a `filter` predicate: one boolean scalar.
pub(crate) fn predicate(bound: Bound) -> FunctionRef {
    let name = bound.label();
    let what = bound.function.name.clone();
    let f = Arc::new(move |e: &Element| {
        let out = bound.tensors(e.clone())?;
        match out.as_slice() {
            [t] if t.dtype() == tfdata_core::DType::Bool && t.num_elements() == 1 => {
                t.to_scalar::<bool>()
            }
            _ => Err(Error::InvalidArgument(format!(
                "filter predicate {what} must return a scalar bool"
            ))),
        }
    });
    FunctionRef::inline(
        &name,
        Inline {
            predicate: Some(Arc::new(move |_input| Ok(f.clone()))),
            ..Default::default()
        },
    )
}

/// `f` as a function from an element to a dataset (`flat_map`, `interleave`).
pub(crate) fn dataset_fn(bound: Bound, output: Option<Structure>) -> FunctionRef {
    let name = bound.label();
    let what = bound.function.name.clone();
    let f = Arc::new(move |e: Element| {
        let mut out = bound.call(e)?;
        match (out.pop(), out.is_empty()) {
            (Some(v), true) => {
                let ds = v.into_dataset(&what)?;
                super::check_pipeline_size(&ds)?;
                Ok(ds)
            }
            _ => Err(Error::InvalidArgument(format!(
                "dataset function {what} must return one dataset"
            ))),
        }
    });
    FunctionRef::inline(
        &name,
        Inline {
            dataset: Some(Arc::new(move |_input| {
                Ok(ResolvedDatasetFn {
                    f: f.clone(),
                    output: output.clone(),
                })
            })),
            ..Default::default()
        },
    )
}

/// TensorFlow's `DT_VARIANT` code.
const VARIANT: i32 = 21;

/// The element structure a dataset node declares (`output_types`,
/// `output_shapes`), flat as the graph has it; `None` if it declares none.
///
/// A `DT_VARIANT` component is a serialized SparseTensor (`SerializeSparse`,
/// `SerializeManySparse`), carried as its `[..., 3]` string form, or an
/// encoded RaggedTensor (`RaggedTensorToVariant`), carried as one string per
/// variant entry: the only variants the kernel set makes.
pub(crate) fn declared_structure(attrs: &NodeAttrs) -> Result<Option<Structure>> {
    let key = types_key(attrs);
    let codes = attrs.dtype_codes(key)?;
    // A dataset of datasets (`window`'s): TensorFlow declares each such
    // variant a scalar; its elements are encoded windows, whose structure
    // the engine's op knows.
    if holds_datasets(attrs, &codes) {
        return Ok(None);
    }
    if codes.is_empty() {
        return Ok(None);
    }
    let shapes = attrs.shapes("output_shapes")?;
    let mut specs = Vec::with_capacity(codes.len());
    for (i, &code) in codes.iter().enumerate() {
        specs.push(if code == VARIANT {
            // The carried strings have the variant's own shape.
            TensorSpec::new(
                tfdata_core::DType::String,
                shapes.get(i).map_or(Shape::unknown_rank(), shape),
            )
        } else {
            let dtype = tfdata_core::DType::from_code(code)
                .map_err(|e| attrs.error(format!("attribute `{key}`: {e}")))?;
            TensorSpec::new(dtype, shapes.get(i).map_or(Shape::unknown_rank(), shape))
        });
    }
    Ok(Some(Structure::from_components(specs)))
}

fn types_key(attrs: &NodeAttrs) -> &'static str {
    if attrs.has("output_types") {
        "output_types"
    } else {
        "Toutput_types"
    }
}

/// The components of a dataset node's elements that are `DT_VARIANT`
/// SparseTensors or RaggedTensors (carried as strings inside the pipeline); none for a
/// dataset of datasets.
pub(crate) fn declared_variants(attrs: &NodeAttrs) -> Vec<usize> {
    match attrs.dtype_codes(types_key(attrs)) {
        Ok(codes) if !holds_datasets(attrs, &codes) => codes
            .iter()
            .enumerate()
            .filter(|(_, c)| **c == VARIANT)
            .map(|(i, _)| i)
            .collect(),
        _ => Vec::new(),
    }
}

/// The ops that cut variant vectors into scalar variants: what they yield
/// are RaggedTensors or SparseTensors (TensorFlow batches no datasets),
/// though TensorFlow declares them with a known scalar shape.
pub(crate) const UNBATCH_OPS: &[&str] = &["UnbatchDataset", "ExperimentalUnbatchDataset"];

/// Whether the declared elements are datasets: TensorFlow declares a
/// dataset variant with a known scalar shape, a SparseTensor's (or a
/// RaggedTensor's) with an unknown rank, except after an unbatch.
pub(crate) fn holds_datasets(attrs: &NodeAttrs, codes: &[i32]) -> bool {
    if UNBATCH_OPS.contains(&attrs.op) {
        return false;
    }
    let shapes = attrs.shapes("output_shapes").unwrap_or(&[]);
    codes.iter().enumerate().any(|(i, &c)| {
        c == VARIANT
            && shapes
                .get(i)
                .is_some_and(|s| !s.unknown_rank && s.dim.is_empty())
    })
}

pub(crate) fn shape(s: &TensorShapeProto) -> Shape {
    if s.unknown_rank {
        return Shape::unknown_rank();
    }
    Shape(Some(
        s.dim
            .iter()
            .map(|d| (d.size >= 0).then_some(d.size))
            .collect(),
    ))
}
