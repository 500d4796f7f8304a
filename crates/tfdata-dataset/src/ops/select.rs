//! Small ops that keep, drop or regroup elements: `unique`, `take_while`,
//! `ignore_errors`, `rebatch`. TensorFlow 2.21 reports each one's
//! cardinality as unknown, whatever its input's (even infinite or empty).

use std::collections::HashSet;

use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Element, Error, Result, Tensor};

use super::resolve::{allow_unregistered, resolve_predicate};
use super::tensor_util::slice_rows;
use crate::UNKNOWN_CARDINALITY;
use crate::attrs::{Attrs, FunctionRef};
use crate::dataset::{Dataset, DatasetOp, IterContext};
use crate::functions::{self, PredicateFn};
use crate::iterators::ElementIterator;
use crate::spec::{Shape, Structure, TensorSpec};

impl Dataset {
    /// `unique()`: each distinct element once, in first-seen order.
    pub fn unique(self) -> Dataset {
        Dataset::from_op(Unique { input: self })
    }

    /// `take_while(predicate)`: elements up to the first the predicate refuses.
    pub fn take_while(self, predicate: FunctionRef) -> Dataset {
        Dataset::from_op(TakeWhile {
            input: self,
            predicate,
        })
    }

    /// `ignore_errors()`: the input's elements, skipping the ones whose
    /// making failed.
    pub fn ignore_errors(self) -> Dataset {
        Dataset::from_op(IgnoreErrors { input: self })
    }

    /// `rebatch(batch_sizes, drop_remainder)`: the input's batches cut and
    /// joined into batches of the given sizes, in turn.
    pub fn rebatch(self, batch_sizes: Vec<i64>, drop_remainder: bool) -> Dataset {
        Dataset::from_op(Rebatch {
            input: self,
            batch_sizes,
            drop_remainder,
        })
    }
}

#[derive(Debug)]
pub struct Unique {
    pub input: Dataset,
}

const UNIQUE_TYPES: &str = "UniqueDataset only supports inputs with a single `tf.int32`, `tf.int64`, or `tf.string` component.";

impl DatasetOp for Unique {
    fn name(&self) -> &'static str {
        "unique"
    }

    fn inputs(&self) -> Vec<Dataset> {
        vec![self.input.clone()]
    }

    fn attrs(&self) -> Attrs {
        Attrs::new()
    }

    fn element_spec(&self) -> Result<Option<Structure>> {
        let spec = self.input.element_spec()?;
        if let Some(s) = &spec {
            match s.flatten().as_slice() {
                [t] if matches!(t.dtype, DType::Int32 | DType::Int64 | DType::String) => {}
                [_] => return Err(Error::InvalidArgument(UNIQUE_TYPES.into())),
                _ => {
                    return Err(Error::InvalidArgument(
                        "UniqueDataset only supports inputs with a single component.".into(),
                    ));
                }
            }
        }
        Ok(spec)
    }

    fn cardinality(&self) -> i64 {
        UNKNOWN_CARDINALITY
    }

    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        Ok(Box::new(UniqueIter {
            input: self.input.op.make_iterator(ctx)?,
            seen: HashSet::new(),
        }))
    }
}

struct UniqueIter {
    input: Box<dyn ElementIterator>,
    /// Every distinct element so far, as TensorFlow keeps them: as many as
    /// the input has distinct values (its bound is the input's).
    seen: HashSet<(Vec<i64>, Key)>,
}

/// A tensor's values, hashable (the dtype is the input's, one for all).
#[derive(PartialEq, Eq, Hash)]
enum Key {
    Buffer(bytes::Bytes),
    Strings(Vec<bytes::Bytes>),
}

impl ElementIterator for UniqueIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        while let Some(e) = self.input.next_element()? {
            let t = match e.components.as_slice() {
                [t] if matches!(t.dtype(), DType::Int32 | DType::Int64 | DType::String) => t,
                _ => return Err(Error::InvalidArgument(UNIQUE_TYPES.into())),
            };
            let key = match t.data() {
                TensorData::Buffer(b) => Key::Buffer(b.clone()),
                TensorData::Strings(s) => Key::Strings(s.clone()),
            };
            if self.seen.insert((t.shape().to_vec(), key)) {
                return Ok(Some(e));
            }
        }
        Ok(None)
    }
}

#[derive(Debug)]
pub struct TakeWhile {
    pub input: Dataset,
    pub predicate: FunctionRef,
}

impl DatasetOp for TakeWhile {
    fn name(&self) -> &'static str {
        "take_while"
    }

    fn inputs(&self) -> Vec<Dataset> {
        vec![self.input.clone()]
    }

    fn attrs(&self) -> Attrs {
        Attrs::new().with("predicate", self.predicate.clone())
    }

    fn element_spec(&self) -> Result<Option<Structure>> {
        let input = self.input.element_spec()?;
        allow_unregistered(resolve_predicate(&self.predicate, input.as_ref()))?;
        Ok(input)
    }

    fn cardinality(&self) -> i64 {
        UNKNOWN_CARDINALITY
    }

    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        let spec = self.input.element_spec()?;
        Ok(Box::new(TakeWhileIter {
            input: Some(self.input.op.make_iterator(ctx)?),
            name: self.predicate.name.clone(),
            predicate: resolve_predicate(&self.predicate, spec.as_ref())?,
        }))
    }
}

struct TakeWhileIter {
    /// `None` once the predicate refused an element (or the input ended).
    input: Option<Box<dyn ElementIterator>>,
    name: String,
    predicate: PredicateFn,
}

impl ElementIterator for TakeWhileIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        let Some(input) = &mut self.input else {
            return Ok(None);
        };
        let Some(e) = input.next_element()? else {
            self.input = None;
            return Ok(None);
        };
        if functions::guarded(&self.name, || (self.predicate)(&e))? {
            return Ok(Some(e));
        }
        self.input = None;
        Ok(None)
    }
}

#[derive(Debug)]
pub struct IgnoreErrors {
    pub input: Dataset,
}

/// Consecutive errors `ignore_errors` skips before it gives up with the
/// last one. TensorFlow retries for ever; an input that fails every call
/// without moving on (a broken source) would spin a worker for ever.
pub const MAX_CONSECUTIVE_ERRORS: u32 = 1 << 20;

impl DatasetOp for IgnoreErrors {
    fn name(&self) -> &'static str {
        "ignore_errors"
    }

    fn inputs(&self) -> Vec<Dataset> {
        vec![self.input.clone()]
    }

    fn attrs(&self) -> Attrs {
        Attrs::new()
    }

    fn element_spec(&self) -> Result<Option<Structure>> {
        self.input.element_spec()
    }

    fn cardinality(&self) -> i64 {
        UNKNOWN_CARDINALITY
    }

    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        Ok(Box::new(IgnoreErrorsIter {
            input: Some(self.input.op.make_iterator(ctx)?),
        }))
    }
}

struct IgnoreErrorsIter {
    input: Option<Box<dyn ElementIterator>>,
}

impl ElementIterator for IgnoreErrorsIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        let Some(input) = &mut self.input else {
            return Ok(None);
        };
        let mut errors = 0u32;
        loop {
            match input.next_element() {
                Ok(Some(e)) => return Ok(Some(e)),
                Ok(None) => {
                    self.input = None;
                    return Ok(None);
                }
                // Cancellation is not the data's fault: it ends the
                // iteration, as in TensorFlow.
                Err(e @ Error::Cancelled(_)) => return Err(e),
                Err(e) => {
                    errors += 1;
                    if errors >= MAX_CONSECUTIVE_ERRORS {
                        return Err(Error::InvalidArgument(format!(
                            "ignore_errors: the input failed {errors} times in a row without \
                             producing an element; the last error: {e}"
                        )));
                    }
                }
            }
        }
    }
}

#[derive(Debug)]
pub struct Rebatch {
    pub input: Dataset,
    pub batch_sizes: Vec<i64>,
    pub drop_remainder: bool,
}

impl DatasetOp for Rebatch {
    fn name(&self) -> &'static str {
        "rebatch"
    }

    fn inputs(&self) -> Vec<Dataset> {
        vec![self.input.clone()]
    }

    fn attrs(&self) -> Attrs {
        Attrs::new()
            .with("batch_sizes", self.batch_sizes.clone())
            .with("drop_remainder", self.drop_remainder)
    }

    fn element_spec(&self) -> Result<Option<Structure>> {
        if self.batch_sizes.is_empty() {
            return Err(Error::InvalidArgument(
                "rebatch: `batch_sizes` must not be empty".into(),
            ));
        }
        if let Some(&b) = self.batch_sizes.iter().find(|&&b| b < 0) {
            return Err(Error::InvalidArgument(format!(
                "rebatch: batch sizes must be non-negative, got {b}"
            )));
        }
        // As TensorFlow's `rebatch`: the batch dimension is known when every
        // batch is full and of one size.
        let first = self.batch_sizes[0];
        let dim =
            (self.drop_remainder && self.batch_sizes.iter().all(|&b| b == first)).then_some(first);
        let Some(spec) = self.input.element_spec()? else {
            return Ok(None);
        };
        Ok(Some(spec.map_components(
            &mut |t: &TensorSpec| match &t.shape.0 {
                Some(dims) if dims.is_empty() => Err(Error::InvalidArgument(
                    "Input element must have a non-scalar value in each component.".into(),
                )),
                Some(dims) => {
                    let mut dims = dims.clone();
                    dims[0] = dim;
                    Ok(TensorSpec::new(t.dtype, Shape(Some(dims))))
                }
                None => Ok(t.clone()),
            },
        )?))
    }

    fn cardinality(&self) -> i64 {
        UNKNOWN_CARDINALITY
    }

    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        let spec = self.element_spec()?;
        Ok(Box::new(RebatchIter {
            input: self.input.op.make_iterator(ctx)?,
            batch_sizes: self.batch_sizes.iter().map(|&b| b as usize).collect(),
            next_size: 0,
            drop_remainder: self.drop_remainder,
            current: None,
            offset: 0,
            ended: false,
            empty: spec.map(|s| s.flatten().into_iter().cloned().collect()),
        }))
    }
}

struct RebatchIter {
    input: Box<dyn ElementIterator>,
    batch_sizes: Vec<usize>,
    next_size: usize,
    drop_remainder: bool,
    /// The input batch being cut, and how many of its rows are taken: at
    /// most one input batch is held (TensorFlow's bound).
    current: Option<Element>,
    offset: usize,
    ended: bool,
    /// The output's component specs, for a batch of size 0.
    empty: Option<Vec<TensorSpec>>,
}

/// The rows of an input batch, checked as TensorFlow checks them.
fn rows_of(e: &Element) -> Result<usize> {
    let mut rows = None;
    for (i, t) in e.components.iter().enumerate() {
        let Some(&n) = t.shape().first() else {
            return Err(Error::InvalidArgument(
                "Input element must have a non-scalar value in each component.".into(),
            ));
        };
        match rows {
            None => rows = Some(n),
            Some(r) if r != n => {
                return Err(Error::InvalidArgument(format!(
                    "Input element must have the same batch size in each component. Component 0 \
                     had size {r} but component {i} had size, {n}."
                )));
            }
            _ => {}
        }
    }
    Ok(rows.unwrap_or(0) as usize)
}

impl RebatchIter {
    /// A batch of no rows: the output's shape with every unknown dimension 0.
    fn empty_batch(&self) -> Result<Element> {
        let Some(specs) = &self.empty else {
            return Err(Error::InvalidArgument(
                "rebatch: a batch size of 0 needs the input's element spec".into(),
            ));
        };
        let components = specs
            .iter()
            .map(|s| {
                let mut dims: Vec<i64> = match &s.shape.0 {
                    Some(d) => d.iter().map(|d| d.unwrap_or(0)).collect(),
                    None => vec![0],
                };
                dims[0] = 0;
                let data = if s.dtype == DType::String {
                    TensorData::Strings(Vec::new())
                } else {
                    TensorData::Buffer(Default::default())
                };
                Tensor::new(s.dtype, dims, data)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Element::new(components))
    }
}

impl ElementIterator for RebatchIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        if self.ended {
            return Ok(None);
        }
        let want = self.batch_sizes[self.next_size];
        self.next_size = (self.next_size + 1) % self.batch_sizes.len();
        let mut parts: Vec<Element> = Vec::new();
        let mut have = 0;
        while have < want {
            if self.current.is_none() {
                match self.input.next_element()? {
                    Some(e) => {
                        rows_of(&e)?;
                        self.current = Some(e);
                        self.offset = 0;
                    }
                    None => {
                        self.ended = true;
                        break;
                    }
                }
            }
            let Some(current) = &self.current else {
                break;
            };
            let rows = rows_of(current)?;
            let end = rows.min(self.offset + want - have);
            if end > self.offset {
                let components = current
                    .components
                    .iter()
                    .map(|t| slice_rows(t, self.offset..end))
                    .collect::<Result<Vec<_>>>()?;
                parts.push(Element::new(components));
            }
            have += end - self.offset;
            self.offset = end;
            if self.offset == rows {
                self.current = None;
            }
        }
        if (have == 0 && want > 0) || (self.drop_remainder && have < want) {
            self.ended = true;
            return Ok(None);
        }
        if want == 0 {
            return self.empty_batch().map(Some);
        }
        if parts.len() == 1 {
            return Ok(parts.pop());
        }
        let n = parts[0].components.len();
        let components = (0..n)
            .map(|c| {
                let pieces: Vec<&Tensor> = parts.iter().map(|p| &p.components[c]).collect();
                concat_rows(&pieces)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Some(Element::new(components)))
    }
}

/// Tensors of one dtype and row shape joined along their first dimension.
fn concat_rows(parts: &[&Tensor]) -> Result<Tensor> {
    let first = parts[0];
    let mut shape = first.shape().to_vec();
    shape[0] = 0;
    for t in parts {
        if t.dtype() != first.dtype() || t.shape()[1..] != first.shape()[1..] {
            return Err(Error::InvalidArgument(format!(
                "rebatch: cannot join batches of {} {:?} and {} {:?}",
                first.dtype(),
                first.shape(),
                t.dtype(),
                t.shape()
            )));
        }
        shape[0] += t.shape()[0];
    }
    let data = super::tensor_util::joined_data(parts);
    Tensor::new(first.dtype(), shape, data)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(ds: &Dataset) -> Vec<Vec<i64>> {
        ds.iter()
            .unwrap()
            .map(|e| e.unwrap().components[0].to_vec::<i64>().unwrap())
            .collect()
    }

    #[test]
    fn rebatch_cuts_and_joins() {
        let ds = Dataset::range(10).batch(4, false).rebatch(vec![3], false);
        assert_eq!(
            rows(&ds),
            vec![vec![0, 1, 2], vec![3, 4, 5], vec![6, 7, 8], vec![9]]
        );
        let ds = Dataset::range(10).batch(4, false).rebatch(vec![2, 3], true);
        assert_eq!(
            rows(&ds),
            vec![vec![0, 1], vec![2, 3, 4], vec![5, 6], vec![7, 8, 9]]
        );
        let ds = Dataset::range(3).batch(2, false).rebatch(vec![0, 2], false);
        assert_eq!(rows(&ds), vec![vec![], vec![0, 1], vec![], vec![2]]);
        assert!(Dataset::range(3).rebatch(vec![2], false).iter().is_err());
    }

    #[test]
    fn ignore_errors_skips_failed_maps_sequential_and_parallel() {
        crate::register_function("ignore_errors_test_odd", |e: Element| {
            let x = e.components[0].to_scalar::<i64>()?;
            if x % 2 == 0 {
                return Err(Error::InvalidArgument(format!("{x} is even")));
            }
            Ok(e)
        });
        for calls in [None, Some(3)] {
            let ds = Dataset::range(9)
                .map_with(FunctionRef::named("ignore_errors_test_odd"), calls, true)
                .ignore_errors();
            let got: Vec<i64> = ds
                .iter()
                .unwrap()
                .map(|e| e.unwrap().components[0].to_scalar::<i64>().unwrap())
                .collect();
            assert_eq!(got, [1, 3, 5, 7], "num_parallel_calls {calls:?}");
        }
    }

    #[test]
    fn unique_and_take_while() {
        let ds = Dataset::from_tensor_slices(vec![Tensor::vector(&[3i64, 1, 3, 2, 1])]).unique();
        let got: Vec<i64> = ds
            .iter()
            .unwrap()
            .map(|e| e.unwrap().components[0].to_scalar::<i64>().unwrap())
            .collect();
        assert_eq!(got, [3, 1, 2]);
        crate::functions::register_predicate("take_while_test_lt3", |e| {
            Ok(e.components[0].to_scalar::<i64>()? < 3)
        });
        let ds = Dataset::range(10).take_while(FunctionRef::named("take_while_test_lt3"));
        assert_eq!(ds.iter().unwrap().count(), 3);
    }
}
