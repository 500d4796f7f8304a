//! In-memory sources: `range`, `from_tensors`, `from_tensor_slices`.

use std::collections::BTreeMap;
use std::sync::Arc;

use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Element, Error, Result, Tensor};

use super::tensor_util::{slice, slice_rows};
use crate::attrs::Attrs;
use crate::dataset::{Dataset, DatasetOp, IterContext};
use crate::iterators::{ElementIterator, StackedRows};
use crate::spec::{Shape, Structure, TensorSpec};
use crate::splits::{IndexSplitProvider, RangeSplitProvider, SplitProvider, range_len};

/// The in-memory sources, as `tf.data.Dataset`'s constructors.
impl Dataset {
    /// `tf.data.Dataset.range(stop)`: 0, 1, …, stop − 1 as scalar int64.
    pub fn range(stop: i64) -> Dataset {
        Dataset::range_with_step(0, stop, 1)
    }

    /// `tf.data.Dataset.range(start, stop, step)`.
    pub fn range_with_step(start: i64, stop: i64, step: i64) -> Dataset {
        Dataset::from_op(Range { start, stop, step })
    }

    /// `from_tensors(components)`: one element.
    pub fn from_tensors(components: Vec<Tensor>) -> Dataset {
        Dataset::from_op(FromTensors {
            components,
            names: None,
        })
    }

    /// `from_tensors({name: tensor, ...})`: one dictionary element.
    pub fn from_named_tensors(components: Vec<(String, Tensor)>) -> Dataset {
        let (names, components) = sorted_named(components);
        Dataset::from_op(FromTensors {
            components,
            names: Some(names),
        })
    }

    /// `from_tensor_slices(components)`: one element per slice of the
    /// components' first dimension.
    pub fn from_tensor_slices(components: Vec<Tensor>) -> Dataset {
        Dataset::from_op(FromTensorSlices {
            components,
            names: None,
            is_files: false,
        })
    }

    /// `from_tensor_slices(filenames)` of file names that later ops read
    /// (TensorFlow's `is_files`, what `TFRecordDataset([...])` and
    /// `list_files` make): FILE sharding shards its rows.
    pub fn from_file_names(filenames: Tensor) -> Dataset {
        Dataset::from_op(FromTensorSlices {
            components: vec![filenames],
            names: None,
            is_files: true,
        })
    }

    /// `from_tensor_slices({name: tensor, ...})`: dictionary elements.
    pub fn from_named_tensor_slices(components: Vec<(String, Tensor)>) -> Dataset {
        let (names, components) = sorted_named(components);
        Dataset::from_op(FromTensorSlices {
            components,
            names: Some(names),
            is_files: false,
        })
    }
}

#[derive(Debug)]
pub struct Range {
    pub start: i64,
    pub stop: i64,
    pub step: i64,
}

impl DatasetOp for Range {
    fn name(&self) -> &'static str {
        "range"
    }

    fn attrs(&self) -> Attrs {
        Attrs::new()
            .with("start", self.start)
            .with("stop", self.stop)
            .with("step", self.step)
    }

    fn element_spec(&self) -> Result<Option<Structure>> {
        if self.step == 0 {
            return Err(Error::InvalidArgument("range: step must not be 0".into()));
        }
        Ok(Some(Structure::Tensor(TensorSpec::new(
            DType::Int64,
            Shape::scalar(),
        ))))
    }

    fn cardinality(&self) -> i64 {
        range_len(self.start, self.stop, self.step) as i64
    }

    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        if let Some(splits) = ctx.split_provider_for(self) {
            // Dynamic sharding: the splits are the values.
            return Ok(Box::new(SplitValues { splits }));
        }
        Ok(Box::new(RangeIter {
            start: self.start,
            step: self.step,
            count: range_len(self.start, self.stop, self.step),
            next: 0,
        }))
    }

    fn split_provider(&self) -> Option<Result<Box<dyn SplitProvider>>> {
        Some(Ok(Box::new(RangeSplitProvider::new(
            self.start, self.stop, self.step,
        ))))
    }
}

struct RangeIter {
    start: i64,
    step: i64,
    count: u64,
    next: u64,
}

impl ElementIterator for RangeIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        if self.next >= self.count {
            return Ok(None);
        }
        let value = self
            .start
            .wrapping_add((self.next as i64).wrapping_mul(self.step));
        self.next += 1;
        Ok(Some(Element::single(Tensor::scalar(value))))
    }

    /// The values written straight into one int64 buffer: no tensor or
    /// element per value.
    fn next_stacked(&mut self, max: usize) -> Result<StackedRows> {
        let rows = (self.count - self.next).min(max as u64) as usize;
        if rows == 0 {
            return Ok(StackedRows::End);
        }
        // Appended, not written over a zero-filled buffer: no memset.
        let mut buf = Vec::with_capacity(rows * 8);
        let mut value = self
            .start
            .wrapping_add((self.next as i64).wrapping_mul(self.step));
        for _ in 0..rows {
            buf.extend_from_slice(&value.to_le_bytes());
            value = value.wrapping_add(self.step);
        }
        self.next += rows as u64;
        let values = Tensor::new(
            DType::Int64,
            vec![rows as i64],
            TensorData::Buffer(buf.into()),
        )?;
        Ok(StackedRows::Rows {
            batch: Element::single(values),
            rows,
        })
    }

    fn skip_elements(&mut self, n: u64) -> Result<u64> {
        let skipped = n.min(self.count - self.next);
        self.next += skipped;
        Ok(skipped)
    }
}

/// Emits each split as a one-component element.
struct SplitValues {
    splits: Arc<dyn SplitProvider>,
}

impl ElementIterator for SplitValues {
    fn next_element(&mut self) -> Result<Option<Element>> {
        Ok(self
            .splits
            .get_next_leased()?
            .map(|(split, lineage)| Element::single(split).with_lineage(lineage)))
    }
}

fn named_structure(names: &Option<Vec<String>>, specs: Vec<TensorSpec>) -> Structure {
    match names {
        Some(names) => Structure::Dict(
            names
                .iter()
                .cloned()
                .zip(specs.into_iter().map(Structure::Tensor))
                .collect::<BTreeMap<_, _>>(),
        ),
        None => Structure::from_components(specs),
    }
}

fn components_attrs(components: &[Tensor], names: &Option<Vec<String>>) -> Attrs {
    let mut attrs = Attrs::new().with("components", components.to_vec());
    if let Some(names) = names {
        attrs = attrs.with("names", names.clone());
    }
    attrs
}

fn check_names(op: &str, components: &[Tensor], names: &Option<Vec<String>>) -> Result<()> {
    if components.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "{op}: needs at least one component"
        )));
    }
    if let Some(names) = names {
        if names.len() != components.len() {
            return Err(Error::InvalidArgument(format!(
                "{op}: {} names for {} components",
                names.len(),
                components.len()
            )));
        }
        if names.windows(2).any(|w| w[0] >= w[1]) {
            return Err(Error::InvalidArgument(format!(
                "{op}: component names must be unique and sorted"
            )));
        }
    }
    Ok(())
}

#[derive(Debug)]
pub struct FromTensors {
    pub components: Vec<Tensor>,
    pub names: Option<Vec<String>>,
}

impl DatasetOp for FromTensors {
    fn name(&self) -> &'static str {
        "from_tensors"
    }

    fn attrs(&self) -> Attrs {
        components_attrs(&self.components, &self.names)
    }

    fn element_spec(&self) -> Result<Option<Structure>> {
        check_names("from_tensors", &self.components, &self.names)?;
        Ok(Some(named_structure(
            &self.names,
            self.components.iter().map(TensorSpec::of).collect(),
        )))
    }

    fn cardinality(&self) -> i64 {
        1
    }

    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        Ok(Box::new(TensorIter {
            components: Some(self.components.clone()),
            splits: ctx.split_provider_for(self),
        }))
    }

    /// One split, the element itself, as TensorFlow's `TensorDataset` has
    /// (so `from_tensors(x).repeat(n)` can be read in distributed_epoch and
    /// saved with `distributed_save`: `repeat` starts the split over n times).
    fn split_provider(&self) -> Option<Result<Box<dyn SplitProvider>>> {
        Some(Ok(Box::new(IndexSplitProvider::new(1))))
    }
}

/// `from_tensors`' one element; in dynamic sharding, only if this iterator
/// gets the split (as TensorFlow's iterator, which asks for a split once).
struct TensorIter {
    components: Option<Vec<Tensor>>,
    splits: Option<Arc<dyn SplitProvider>>,
}

impl ElementIterator for TensorIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        let Some(components) = self.components.take() else {
            return Ok(None);
        };
        let element = Element::new(components);
        match &self.splits {
            None => Ok(Some(element)),
            Some(splits) => Ok(splits
                .get_next_leased()?
                .map(|(_, lineage)| element.with_lineage(lineage))),
        }
    }
}

#[derive(Debug)]
pub struct FromTensorSlices {
    pub components: Vec<Tensor>,
    pub names: Option<Vec<String>>,
    /// The rows are file names (see [`Dataset::from_file_names`]).
    pub is_files: bool,
}

impl FromTensorSlices {
    fn rows(&self) -> Result<usize> {
        check_names("from_tensor_slices", &self.components, &self.names)?;
        let mut rows = None;
        for (i, t) in self.components.iter().enumerate() {
            let Some(&n) = t.shape().first() else {
                return Err(Error::InvalidArgument(format!(
                    "from_tensor_slices: component {i} is a scalar; slicing needs at least one dimension"
                )));
            };
            match rows {
                None => rows = Some(n),
                Some(r) if r == n => {}
                Some(r) => {
                    return Err(Error::InvalidArgument(format!(
                        "from_tensor_slices: all components must have the same first dimension; \
                         component 0 has {r} and component {i} has {n}"
                    )));
                }
            }
        }
        Ok(rows.unwrap_or(0) as usize)
    }

    pub(crate) fn element(&self, index: usize) -> Result<Element> {
        self.components
            .iter()
            .map(|t| slice(t, index))
            .collect::<Result<_>>()
            .map(Element::new)
    }
}

impl DatasetOp for FromTensorSlices {
    fn name(&self) -> &'static str {
        "from_tensor_slices"
    }

    fn attrs(&self) -> Attrs {
        let attrs = components_attrs(&self.components, &self.names);
        if self.is_files {
            attrs.with("is_files", true)
        } else {
            attrs
        }
    }

    fn element_spec(&self) -> Result<Option<Structure>> {
        self.rows()?;
        let specs = self
            .components
            .iter()
            .map(|t| TensorSpec::new(t.dtype(), Shape::known(&t.shape()[1..])))
            .collect();
        Ok(Some(named_structure(&self.names, specs)))
    }

    fn cardinality(&self) -> i64 {
        self.rows().map_or(crate::UNKNOWN_CARDINALITY, |n| n as i64)
    }

    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        let rows = self.rows()?;
        let source = Arc::new(FromTensorSlices {
            components: self.components.clone(),
            names: self.names.clone(),
            is_files: self.is_files,
        });
        Ok(Box::new(SliceIter {
            source,
            splits: ctx.split_provider_for(self),
            rows,
            next: 0,
        }))
    }

    fn split_provider(&self) -> Option<Result<Box<dyn SplitProvider>>> {
        Some(
            self.rows()
                .map(|n| Box::new(IndexSplitProvider::new(n as u64)) as Box<dyn SplitProvider>),
        )
    }
}

struct SliceIter {
    source: Arc<FromTensorSlices>,
    splits: Option<Arc<dyn SplitProvider>>,
    rows: usize,
    next: usize,
}

impl ElementIterator for SliceIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        let mut lineage = tfdata_core::Lineage::default();
        let index = match &self.splits {
            Some(splits) => match splits.get_next_leased()? {
                Some((t, leased)) => {
                    lineage = leased;
                    let i = t.to_scalar::<i64>()?;
                    usize::try_from(i)
                        .ok()
                        .filter(|&i| i < self.rows)
                        .ok_or_else(|| {
                            Error::InvalidArgument(format!(
                                "split index {i} out of range for {} slices",
                                self.rows
                            ))
                        })?
                }
                None => return Ok(None),
            },
            None => {
                if self.next >= self.rows {
                    return Ok(None);
                }
                self.next += 1;
                self.next - 1
            }
        };
        Ok(Some(self.source.element(index)?.with_lineage(lineage)))
    }

    /// Without splits, the next rows are one slice of each component
    /// (shared, not copied).
    fn next_stacked(&mut self, max: usize) -> Result<StackedRows> {
        if self.splits.is_some() {
            return Ok(StackedRows::NotStackable);
        }
        let rows = (self.rows - self.next).min(max);
        if rows == 0 {
            return Ok(StackedRows::End);
        }
        let components = self
            .source
            .components
            .iter()
            .map(|t| slice_rows(t, self.next..self.next + rows))
            .collect::<Result<Vec<_>>>()?;
        self.next += rows;
        Ok(StackedRows::Rows {
            batch: Element::new(components),
            rows,
        })
    }

    /// Without splits, seeks; with them, every split is taken (and its
    /// lease released) as reading would.
    fn skip_elements(&mut self, n: u64) -> Result<u64> {
        if self.splits.is_some() {
            let mut skipped = 0;
            while skipped < n && self.next_element()?.is_some() {
                skipped += 1;
            }
            return Ok(skipped);
        }
        let skipped = n.min((self.rows - self.next) as u64);
        self.next += skipped as usize;
        Ok(skipped)
    }
}

/// Rebuilds in-memory sources from wire attributes.
pub(crate) fn from_attrs(op: &str, attrs: &Attrs) -> Result<Option<Dataset>> {
    let names = |attrs: &Attrs| -> Result<Option<Vec<String>>> {
        match attrs.get("names") {
            None => Ok(None),
            Some(_) => attrs.strings(op, "names").map(Some),
        }
    };
    Ok(Some(match op {
        "range" => {
            attrs.check_known(op, &["start", "stop", "step"])?;
            Dataset::range_with_step(
                attrs.int_or(op, "start", 0)?,
                attrs.int(op, "stop")?,
                attrs.int_or(op, "step", 1)?,
            )
        }
        "from_tensors" => {
            attrs.check_known(op, &["components", "names"])?;
            Dataset::from_op(FromTensors {
                components: attrs.tensors(op, "components")?,
                names: names(attrs)?,
            })
        }
        "from_tensor_slices" => {
            attrs.check_known(op, &["components", "names", "is_files"])?;
            Dataset::from_op(FromTensorSlices {
                components: attrs.tensors(op, "components")?,
                names: names(attrs)?,
                is_files: attrs.bool_or(op, "is_files", false)?,
            })
        }
        _ => return Ok(None),
    }))
}

/// Sorts named components by name (TensorFlow's dictionary flattening order).
fn sorted_named(mut named: Vec<(String, Tensor)>) -> (Vec<String>, Vec<Tensor>) {
    named.sort_by(|a, b| a.0.cmp(&b.0));
    named.into_iter().unzip()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Dataset;

    fn collect(ds: &Dataset) -> Vec<Element> {
        let mut it = ds.iter().unwrap();
        let mut out = Vec::new();
        while let Some(e) = it.next_element().unwrap() {
            out.push(e);
        }
        out
    }

    #[test]
    fn slices_and_named_slices() {
        let ds = Dataset::from_named_tensor_slices(vec![
            ("y".into(), Tensor::vector(&[1i64, 2, 3])),
            (
                "x".into(),
                Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], vec![3, 2]).unwrap(),
            ),
        ]);
        let spec = ds.element_spec().unwrap().unwrap();
        assert_eq!(spec.component_index("y").unwrap(), 1);
        let elements = collect(&ds);
        assert_eq!(elements.len(), 3);
        assert_eq!(
            elements[2].components[0].to_vec::<f32>().unwrap(),
            vec![5.0, 6.0]
        );
        assert_eq!(elements[2].components[1].to_scalar::<i64>().unwrap(), 3);

        let bad =
            Dataset::from_tensor_slices(vec![Tensor::vector(&[1i64, 2]), Tensor::vector(&[1i64])]);
        assert!(
            bad.validate()
                .unwrap_err()
                .to_string()
                .contains("same first dimension")
        );
    }

    #[test]
    fn sources_read_dynamic_splits_when_given() {
        let ds = Dataset::from_tensor_slices(vec![Tensor::vector(&[10i64, 20, 30, 40])]);
        let provider: Arc<dyn SplitProvider> = Arc::new(IndexSplitProvider::new(4));
        provider.skip(2).unwrap();
        let mut ctx = IterContext::new();
        ctx.split_providers.insert(ds.op_key(), provider);
        let mut it = ds.iter_with(&ctx).unwrap();
        let mut got = Vec::new();
        while let Some(e) = it.next_element().unwrap() {
            got.push(e.components[0].to_scalar::<i64>().unwrap());
        }
        assert_eq!(got, vec![30, 40]);
    }

    /// `from_tensors` has one split; with a provider, an iterator yields
    /// the element only when it gets that split, and `repeat` starts the
    /// split over for each pass (`from_tensors(x).repeat(3)` gives x three
    /// times in distributed_epoch, as in TensorFlow).
    #[test]
    fn from_tensors_is_one_split() {
        let ds = Dataset::from_tensors(vec![Tensor::scalar(7i64)]);
        let op = ds.op();
        let provider: Arc<dyn SplitProvider> = Arc::from(op.split_provider().unwrap().unwrap());
        let mut ctx = IterContext::new();
        ctx.split_providers
            .insert(ds.op_key(), Arc::clone(&provider));
        let count = |ds: &Dataset| {
            let mut it = ds.iter_with(&ctx).unwrap();
            let mut n = 0;
            while let Some(e) = it.next_element().unwrap() {
                assert_eq!(e.components[0].to_scalar::<i64>().unwrap(), 7);
                n += 1;
            }
            n
        };
        assert_eq!(count(&ds), 1);
        // The split is taken: another iterator in this repetition gets none.
        assert_eq!(count(&ds), 0);
        provider.reset().unwrap();
        let repeated = ds.clone().repeat(Some(3));
        assert_eq!(count(&repeated), 3);
    }
}
