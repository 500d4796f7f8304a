//! `ChooseFastestBranchDataset`: functions ("branches") from a dataset to a
//! dataset, by contract giving the same elements, of which TensorFlow keeps
//! the fastest.
//!
//! TensorFlow's iterator reads one input iterator throughout. It first runs
//! each branch in turn as an experiment: the branch applied to the next
//! `num_elements_per_branch * ratio_numerator / ratio_denominator` input
//! elements, giving at most `num_elements_per_branch` elements (a branch
//! ending early ends the whole dataset). Then it applies the fastest branch
//! to the rest of the input. The engine runs the same experiments in the
//! same order on the same chunks, and then applies the first branch, which
//! the contract makes as good as the fastest: so branches that keep it give
//! TensorFlow's elements, and a ratio that does not match the branches cuts
//! the dataset short where TensorFlow's does. Its cardinality is
//! TensorFlow's: the input's times the ratio, truncated.

use std::sync::{Arc, Mutex};

use tfdata_core::{Element, Error, Result};
use tfdata_dataset::spec::Structure;
use tfdata_dataset::{
    Attrs, Dataset, DatasetOp, ElementIterator, INFINITE_CARDINALITY, IterContext,
    UNKNOWN_CARDINALITY,
};
use tfdata_proto::tensorflow::NodeDef;
use tfdata_proto::tensorflow::attr_value;

use super::node::{handle, tensors};
use crate::attrs::NodeAttrs;
use crate::function::{CompiledNode, Compiler, Function};
use crate::value::Value;

/// The node compiled, if it is one of this module's.
pub(super) fn compile(
    node: &NodeDef,
    compiler: &mut Compiler<'_>,
    attrs: &NodeAttrs,
    spec: &Option<Structure>,
) -> Result<Option<CompiledNode>> {
    if node.op != "ChooseFastestBranchDataset" {
        return Ok(None);
    }
    let names: Vec<String> = match node.attr.get("branches").and_then(|a| a.value.as_ref()) {
        Some(attr_value::Value::List(l)) => l.func.iter().map(|f| f.name.clone()).collect(),
        _ => return Err(attrs.error("attribute `branches` is missing")),
    };
    let lengths = attrs.ints("other_arguments_lengths")?.to_vec();
    if names.len() != lengths.len() {
        return Err(Error::InvalidArgument(
            "branches and other_arguments_lengths must have the same length.".into(),
        ));
    }
    if names.is_empty() || lengths.iter().any(|&l| l < 0) {
        return Err(attrs.error("needs at least one branch and non-negative argument counts"));
    }
    let branches = names
        .iter()
        .map(|n| compiler.function(n))
        .collect::<Result<Vec<_>>>()?;
    let per_branch = attrs.int("num_elements_per_branch")?;
    let spec = spec.clone();
    Ok(Some(handle(
        move |mut i| {
            let input = i.dataset()?;
            let numerator = i.int("ratio_numerator")?;
            let denominator = i.int("ratio_denominator")?;
            if numerator <= 0 {
                return Err(Error::InvalidArgument(
                    "`ratio_numerator` must be greater than zero.".into(),
                ));
            }
            if denominator <= 0 {
                return Err(Error::InvalidArgument(
                    "`ratio_denominator` must be greater than zero.".into(),
                ));
            }
            if per_branch % denominator != 0 {
                return Err(Error::InvalidArgument(
                    "`num_elements_per_branch` must be divisible by `ratio_denominator`.".into(),
                ));
            }
            let mut captured = i.take(None)?.into_iter();
            let mut bound = Vec::with_capacity(branches.len());
            for (f, &n) in branches.iter().zip(&lengths) {
                let args: Vec<Value> = captured.by_ref().take(n as usize).collect();
                if args.len() != n as usize {
                    return Err(
                        i.err("fewer `other_arguments` than `other_arguments_lengths` says")
                    );
                }
                tensors(args.clone(), "other_arguments")?;
                bound.push((f.clone(), args));
            }
            Ok(Dataset::from_op(ChooseFastestBranch {
                input,
                branches: bound,
                per_branch,
                // Input elements per experiment (TensorFlow's product, in
                // 128 bits so that no graph constant overflows it).
                chunk: (i128::from(per_branch) * i128::from(numerator) / i128::from(denominator))
                    .clamp(0, i128::from(i64::MAX)) as i64,
                ratio: (numerator, denominator),
                spec: spec.clone(),
            }))
        },
        node,
    )))
}

struct ChooseFastestBranch {
    input: Dataset,
    branches: Vec<(Arc<Function>, Vec<Value>)>,
    per_branch: i64,
    chunk: i64,
    ratio: (i64, i64),
    spec: Option<Structure>,
}

impl std::fmt::Debug for ChooseFastestBranch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChooseFastestBranch")
            .field("input", &self.input)
            .field("branches", &self.branches.len())
            .field("per_branch", &self.per_branch)
            .finish()
    }
}

impl DatasetOp for ChooseFastestBranch {
    fn name(&self) -> &'static str {
        "choose_fastest_branch"
    }
    fn inputs(&self) -> Vec<Dataset> {
        vec![self.input.clone()]
    }
    fn attrs(&self) -> Attrs {
        Attrs::new()
            .with("num_elements_per_branch", self.per_branch)
            .with("ratio_numerator", self.ratio.0)
            .with("ratio_denominator", self.ratio.1)
    }
    fn element_spec(&self) -> Result<Option<Structure>> {
        self.input.element_spec()?;
        Ok(self.spec.clone())
    }
    fn cardinality(&self) -> i64 {
        let n = self.input.cardinality();
        if n == INFINITE_CARDINALITY || n == UNKNOWN_CARDINALITY {
            return n;
        }
        // TensorFlow's: as a double, truncated.
        (n as f64 * self.ratio.0 as f64 / self.ratio.1 as f64) as i64
    }
    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        Ok(Box::new(ChooseFastestBranchIter {
            input: Arc::new(Mutex::new(self.input.iter_with(ctx)?)),
            input_spec: self.input.element_spec()?,
            branches: self.branches.clone(),
            per_branch: self.per_branch,
            chunk: self.chunk,
            ctx: ctx.clone(),
            experiment: 0,
            produced: 0,
            current: None,
            ended: false,
        }))
    }
}

type Shared = Arc<Mutex<Box<dyn ElementIterator>>>;

struct ChooseFastestBranchIter {
    input: Shared,
    input_spec: Option<Structure>,
    branches: Vec<(Arc<Function>, Vec<Value>)>,
    per_branch: i64,
    chunk: i64,
    ctx: IterContext,
    /// The branch being tried; `branches.len()` once the experiments end.
    experiment: usize,
    /// Elements the current experiment gave.
    produced: i64,
    current: Option<Box<dyn ElementIterator>>,
    ended: bool,
}

impl ChooseFastestBranchIter {
    /// Branch `b` applied to the rest of the shared input, or its next
    /// `limit` elements.
    fn branch_iterator(&self, b: usize, limit: Option<i64>) -> Result<Box<dyn ElementIterator>> {
        let mut rest = Dataset::from_op(SharedInput {
            input: self.input.clone(),
            spec: self.input_spec.clone(),
        });
        if let Some(n) = limit {
            rest = rest.take(n);
        }
        let (f, captured) = &self.branches[b];
        let mut args = vec![Value::Dataset(rest)];
        args.extend(captured.iter().cloned());
        let mut out = f.call(args)?;
        let ds = match (out.pop(), out.is_empty()) {
            (Some(v), true) => v.into_dataset(&format!("{} output", f.name))?,
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "ChooseFastestBranchDataset: branch {} must return one dataset",
                    f.name
                )));
            }
        };
        ds.iter_with(&self.ctx)
    }
}

impl ElementIterator for ChooseFastestBranchIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        if self.ended {
            return Ok(None);
        }
        if self.experiment < self.branches.len() {
            if self.current.is_none() {
                self.current = Some(self.branch_iterator(self.experiment, Some(self.chunk))?);
            }
            let next = match self.current.as_mut() {
                Some(it) => it.next_element(),
                None => Ok(None),
            };
            self.produced += 1;
            if self.produced >= self.per_branch {
                self.produced = 0;
                self.experiment += 1;
                self.current = None;
            }
            // An experiment ending early ends the dataset, as in TensorFlow.
            if matches!(next, Ok(None)) {
                self.ended = true;
            }
            return next;
        }
        if self.current.is_none() {
            self.current = Some(self.branch_iterator(0, None)?);
        }
        let next = match self.current.as_mut() {
            Some(it) => it.next_element()?,
            None => None,
        };
        if next.is_none() {
            self.ended = true;
        }
        Ok(next)
    }
}

/// The rest of the branch dataset's shared input iterator, as a dataset
/// (TensorFlow's `WrapperDataset`).
struct SharedInput {
    input: Shared,
    spec: Option<Structure>,
}

impl std::fmt::Debug for SharedInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SharedInput")
    }
}

impl DatasetOp for SharedInput {
    fn name(&self) -> &'static str {
        "shared_input"
    }
    fn attrs(&self) -> Attrs {
        Attrs::new()
    }
    fn element_spec(&self) -> Result<Option<Structure>> {
        Ok(self.spec.clone())
    }
    fn cardinality(&self) -> i64 {
        UNKNOWN_CARDINALITY
    }
    fn make_iterator(&self, _ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        Ok(Box::new(SharedIter {
            input: self.input.clone(),
        }))
    }
}

struct SharedIter {
    input: Shared,
}

impl ElementIterator for SharedIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        let mut input = self.input.lock().map_err(|_| {
            Error::Internal("ChooseFastestBranchDataset: input lock poisoned".into())
        })?;
        input.next_element()
    }
}
