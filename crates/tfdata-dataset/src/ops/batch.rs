//! `batch`, `padded_batch` and `unbatch`.

use std::collections::VecDeque;

use tfdata_core::{Element, Error, Result, Tensor};

use super::tensor_util::{pad_to, slice, stack_elements, zero_of};
use crate::attrs::Attrs;
use crate::dataset::{Dataset, DatasetOp, IterContext};
use crate::iterators::{ElementIterator, StackedRows};
use crate::spec::{Shape, Structure, TensorSpec};

/// Batching.
impl Dataset {
    /// `batch(batch_size, drop_remainder)`: stacks consecutive elements
    /// component-wise into tensors with a new leading dimension.
    pub fn batch(self, batch_size: i64, drop_remainder: bool) -> Dataset {
        Dataset::from_op(Batch {
            input: self,
            batch_size,
            drop_remainder,
        })
    }

    /// `padded_batch(batch_size, padded_shapes, padding_values, drop_remainder)`.
    /// `padded_shapes[i]` is component i's shape, −1 meaning "longest in the
    /// batch"; `None` pads every dimension to the longest. Padding values
    /// default to 0 / "".
    pub fn padded_batch(
        self,
        batch_size: i64,
        padded_shapes: Option<Vec<Vec<i64>>>,
        padding_values: Option<Vec<Tensor>>,
        drop_remainder: bool,
    ) -> Dataset {
        Dataset::from_op(PaddedBatch {
            input: self,
            batch_size,
            padded_shapes,
            padding_values,
            drop_remainder,
        })
    }

    /// `unbatch()`: splits each element along its first dimension.
    pub fn unbatch(self) -> Dataset {
        Dataset::from_op(Unbatch { input: self })
    }
}

fn batched_cardinality(n: i64, batch_size: i64, drop_remainder: bool) -> i64 {
    if n < 0 || batch_size <= 0 {
        return n;
    }
    if drop_remainder {
        n / batch_size
    } else {
        (n + batch_size - 1) / batch_size
    }
}

fn check_batch_size(op: &str, batch_size: i64) -> Result<()> {
    if batch_size <= 0 {
        return Err(Error::InvalidArgument(format!(
            "{op}: batch_size must be greater than zero, got {batch_size}"
        )));
    }
    Ok(())
}

/// The leading dimension batching adds: TensorFlow knows it only when
/// partial batches are dropped.
fn batch_dim(batch_size: i64, drop_remainder: bool, _input_cardinality: i64) -> Option<i64> {
    drop_remainder.then_some(batch_size)
}

fn read_rows(input: &mut dyn ElementIterator, n: usize) -> Result<Vec<Element>> {
    let mut rows = Vec::with_capacity(n.min(1 << 16));
    while rows.len() < n {
        match input.next_element()? {
            Some(e) => rows.push(e),
            None => break,
        }
    }
    Ok(rows)
}

#[derive(Debug)]
pub struct Batch {
    pub input: Dataset,
    pub batch_size: i64,
    pub drop_remainder: bool,
}

impl DatasetOp for Batch {
    fn name(&self) -> &'static str {
        "batch"
    }

    fn inputs(&self) -> Vec<Dataset> {
        vec![self.input.clone()]
    }

    fn attrs(&self) -> Attrs {
        Attrs::new()
            .with("batch_size", self.batch_size)
            .with("drop_remainder", self.drop_remainder)
    }

    fn element_spec(&self) -> Result<Option<Structure>> {
        check_batch_size("batch", self.batch_size)?;
        let dim = batch_dim(
            self.batch_size,
            self.drop_remainder,
            self.input.cardinality(),
        );
        match self.input.element_spec()? {
            Some(s) => Ok(Some(s.map_components(&mut |t| {
                Ok(TensorSpec::new(t.dtype, t.shape.prepend(dim)))
            })?)),
            None => Ok(None),
        }
    }

    fn cardinality(&self) -> i64 {
        batched_cardinality(
            self.input.cardinality(),
            self.batch_size,
            self.drop_remainder,
        )
    }

    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        Ok(Box::new(BatchIter {
            input: self.input.op.make_iterator(ctx)?,
            batch_size: self.batch_size as usize,
            drop_remainder: self.drop_remainder,
        }))
    }
}

struct BatchIter {
    input: Box<dyn ElementIterator>,
    batch_size: usize,
    drop_remainder: bool,
}

impl ElementIterator for BatchIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        match self.input.next_stacked(self.batch_size)? {
            StackedRows::NotStackable => {}
            StackedRows::End => return Ok(None),
            StackedRows::Rows { batch, rows } => {
                // Fewer rows than asked for only at the input's end.
                let partial = rows < self.batch_size;
                return Ok((!partial || !self.drop_remainder).then_some(batch));
            }
        }
        let rows = read_rows(&mut *self.input, self.batch_size)?;
        if rows.is_empty() || (self.drop_remainder && rows.len() < self.batch_size) {
            return Ok(None);
        }
        stack_elements("batch", &rows).map(Some)
    }

    /// `n` batches are `n * batch_size` rows of the input; a short last
    /// batch counts unless it would be dropped.
    fn skip_elements(&mut self, n: u64) -> Result<u64> {
        let size = self.batch_size as u64;
        let rows = self.input.skip_elements(n.saturating_mul(size))?;
        let partial = rows % size > 0 && !self.drop_remainder;
        Ok(rows / size + u64::from(partial))
    }
}

#[derive(Debug)]
pub struct PaddedBatch {
    pub input: Dataset,
    pub batch_size: i64,
    /// Per component; −1 = pad to the longest in the batch. `None`: all −1.
    pub padded_shapes: Option<Vec<Vec<i64>>>,
    pub padding_values: Option<Vec<Tensor>>,
    pub drop_remainder: bool,
}

impl PaddedBatch {
    fn check(&self, input: &Structure) -> Result<()> {
        check_batch_size("padded_batch", self.batch_size)?;
        let specs = input.flatten();
        if let Some(shapes) = &self.padded_shapes {
            if shapes.len() != specs.len() {
                return Err(Error::InvalidArgument(format!(
                    "padded_batch: {} padded shapes for {} components",
                    shapes.len(),
                    specs.len()
                )));
            }
            for (i, (shape, spec)) in shapes.iter().zip(&specs).enumerate() {
                if spec.shape.rank().is_some_and(|r| r != shape.len()) {
                    return Err(Error::InvalidArgument(format!(
                        "padded_batch: padded shape {shape:?} of component {i} does not have the \
                         component's rank (its shape is {})",
                        spec.shape
                    )));
                }
                if shape.iter().any(|&d| d < -1) {
                    return Err(Error::InvalidArgument(format!(
                        "padded_batch: invalid padded shape {shape:?} for component {i}"
                    )));
                }
            }
        }
        if let Some(values) = &self.padding_values {
            if values.len() != specs.len() {
                return Err(Error::InvalidArgument(format!(
                    "padded_batch: {} padding values for {} components",
                    values.len(),
                    specs.len()
                )));
            }
            for (i, (v, spec)) in values.iter().zip(&specs).enumerate() {
                if v.dtype() != spec.dtype || !v.shape().is_empty() {
                    return Err(Error::InvalidArgument(format!(
                        "padded_batch: padding value {i} must be a {} scalar, got {} {:?}",
                        spec.dtype,
                        v.dtype(),
                        v.shape()
                    )));
                }
            }
        }
        Ok(())
    }
}

impl DatasetOp for PaddedBatch {
    fn name(&self) -> &'static str {
        "padded_batch"
    }

    fn inputs(&self) -> Vec<Dataset> {
        vec![self.input.clone()]
    }

    fn attrs(&self) -> Attrs {
        let mut a = Attrs::new()
            .with("batch_size", self.batch_size)
            .with("drop_remainder", self.drop_remainder);
        if let Some(shapes) = &self.padded_shapes {
            a = a.with(
                "padded_shapes",
                crate::attrs::Attr::List(shapes.iter().map(|s| s.clone().into()).collect()),
            );
        }
        if let Some(values) = &self.padding_values {
            a = a.with("padding_values", values.clone());
        }
        a
    }

    fn element_spec(&self) -> Result<Option<Structure>> {
        let input = self.input.known_spec("padded_batch")?;
        self.check(&input)?;
        let dim = batch_dim(
            self.batch_size,
            self.drop_remainder,
            self.input.cardinality(),
        );
        let mut index = 0;
        Ok(Some(input.map_components(&mut |t| {
            let shape = match &self.padded_shapes {
                Some(shapes) => Shape(Some(
                    shapes[index]
                        .iter()
                        .map(|&d| (d >= 0).then_some(d))
                        .collect(),
                )),
                // Static dimensions stay; unknown ones pad to the longest.
                None => t.shape.clone(),
            };
            index += 1;
            Ok(TensorSpec::new(t.dtype, shape.prepend(dim)))
        })?))
    }

    fn cardinality(&self) -> i64 {
        batched_cardinality(
            self.input.cardinality(),
            self.batch_size,
            self.drop_remainder,
        )
    }

    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        let input = self.input.known_spec("padded_batch")?;
        self.check(&input)?;
        let padding = match &self.padding_values {
            Some(v) => v.clone(),
            None => input
                .flatten()
                .iter()
                .map(|s| zero_of(s.dtype))
                .collect::<Result<_>>()?,
        };
        Ok(Box::new(PaddedBatchIter {
            input: self.input.op.make_iterator(ctx)?,
            batch_size: self.batch_size as usize,
            drop_remainder: self.drop_remainder,
            padded_shapes: self.padded_shapes.clone(),
            padding,
        }))
    }
}

struct PaddedBatchIter {
    input: Box<dyn ElementIterator>,
    batch_size: usize,
    drop_remainder: bool,
    padded_shapes: Option<Vec<Vec<i64>>>,
    padding: Vec<Tensor>,
}

impl ElementIterator for PaddedBatchIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        let rows = read_rows(&mut *self.input, self.batch_size)?;
        if rows.is_empty() || (self.drop_remainder && rows.len() < self.batch_size) {
            return Ok(None);
        }
        let n = self.padding.len();
        let mut padded_rows: Vec<Element> = rows
            .iter()
            .map(|row| Element::default().with_lineage(row.lineage.clone()))
            .collect();
        for c in 0..n {
            let rank = rows[0].components.get(c).map_or(0, |t| t.shape().len());
            // The longest size of each dimension in this batch.
            let mut longest = vec![0i64; rank];
            for (i, row) in rows.iter().enumerate() {
                let t = row.components.get(c).ok_or_else(|| {
                    Error::InvalidArgument(format!("padded_batch: element {i} lacks component {c}"))
                })?;
                if t.shape().len() != rank {
                    return Err(Error::InvalidArgument(format!(
                        "padded_batch: component {c} has rank {rank} in element 0 but rank {} in element {i}",
                        t.shape().len()
                    )));
                }
                for (l, &d) in longest.iter_mut().zip(t.shape()) {
                    *l = (*l).max(d);
                }
            }
            let target: Vec<i64> = match &self.padded_shapes {
                Some(shapes) => shapes[c]
                    .iter()
                    .zip(&longest)
                    .map(|(&s, &l)| if s < 0 { l } else { s })
                    .collect(),
                None => longest,
            };
            for (row, out) in rows.iter().zip(padded_rows.iter_mut()) {
                out.components
                    .push(pad_to(&row.components[c], &target, &self.padding[c])?);
            }
        }
        stack_elements("padded_batch", &padded_rows).map(Some)
    }
}

#[derive(Debug)]
pub struct Unbatch {
    pub input: Dataset,
}

impl DatasetOp for Unbatch {
    fn name(&self) -> &'static str {
        "unbatch"
    }

    fn inputs(&self) -> Vec<Dataset> {
        vec![self.input.clone()]
    }

    fn attrs(&self) -> Attrs {
        Attrs::new()
    }

    fn element_spec(&self) -> Result<Option<Structure>> {
        match self.input.element_spec()? {
            Some(s) => Ok(Some(s.map_components(&mut |t| {
                Ok(TensorSpec::new(t.dtype, t.shape.drop_first()?))
            })?)),
            None => Ok(None),
        }
    }

    fn cardinality(&self) -> i64 {
        let n = self.input.cardinality();
        if n == crate::INFINITE_CARDINALITY {
            return n;
        }
        // Known when every batch has the same static leading dimension.
        let rows = self.input.element_spec().ok().flatten().and_then(|s| {
            let firsts: Vec<Option<i64>> = s
                .flatten()
                .iter()
                .map(|t| {
                    t.shape
                        .0
                        .as_ref()
                        .and_then(|d| d.first().copied().flatten())
                })
                .collect();
            match firsts.first() {
                Some(Some(r)) if firsts.iter().all(|f| *f == Some(*r)) => Some(*r),
                _ => None,
            }
        });
        match (n, rows) {
            (n, Some(rows)) if n >= 0 => n.saturating_mul(rows),
            _ => crate::UNKNOWN_CARDINALITY,
        }
    }

    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        Ok(Box::new(UnbatchIter {
            input: self.input.op.make_iterator(ctx)?,
            pending: VecDeque::new(),
        }))
    }
}

struct UnbatchIter {
    input: Box<dyn ElementIterator>,
    pending: VecDeque<Element>,
}

impl ElementIterator for UnbatchIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        loop {
            if let Some(e) = self.pending.pop_front() {
                return Ok(Some(e));
            }
            let Some(batch) = self.input.next_element()? else {
                return Ok(None);
            };
            let rows = match batch.components.first().and_then(|t| t.shape().first()) {
                Some(&rows) => rows,
                None => {
                    return Err(Error::InvalidArgument(
                        "unbatch: components must have at least one dimension".into(),
                    ));
                }
            };
            if batch
                .components
                .iter()
                .any(|t| t.shape().first() != Some(&rows))
            {
                return Err(Error::InvalidArgument(
                    "unbatch: all components must have the same first dimension".into(),
                ));
            }
            for i in 0..rows as usize {
                // Each row holds its own piece of the batch's splits; a row
                // readers already received (a split produced again) is dropped.
                let Some(lineage) = batch.lineage.row(i, rows as usize) else {
                    continue;
                };
                self.pending.push_back(
                    Element::new(
                        batch
                            .components
                            .iter()
                            .map(|t| slice(t, i))
                            .collect::<Result<_>>()?,
                    )
                    .with_lineage(lineage),
                );
            }
        }
    }
}
