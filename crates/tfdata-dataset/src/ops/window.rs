//! `window`: datasets of consecutive elements, and how such a dataset
//! travels inside an element.
//!
//! TensorFlow's `window` yields, per window, one dataset per component
//! (variant tensors the next `flat_map` function receives and typically
//! batches). Our elements are tensors only, so a window travels encoded:
//! each component of the window's rows as two tensors, `values` (every
//! row's values flattened and concatenated, rank 1) and `shapes` (int64
//! `[rows, rank]`, each row's shape). The encoding is lossless for rows of
//! different shapes (`group_by_window` groups sequences of different
//! lengths), and [`Dataset::window_elements`] turns it back into a
//! dataset, which a translated graph hands the function as its variant
//! argument (`tfdata-graph`'s `translate::inline`).

use std::collections::VecDeque;

use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Element, Error, Lineage, Result, Tensor};

use crate::UNKNOWN_CARDINALITY;
use crate::attrs::Attrs;
use crate::dataset::{Dataset, DatasetOp, IterContext};
use crate::iterators::ElementIterator;
use crate::spec::{Shape, Structure, TensorSpec};

impl Dataset {
    /// `window(size, shift, stride, drop_remainder)`: each element is a
    /// window of up to `size` input elements, `stride` apart, windows
    /// starting `shift` apart; encoded as the module docs say.
    pub fn window(self, size: i64, shift: i64, stride: i64, drop_remainder: bool) -> Dataset {
        Dataset::from_op(Window {
            input: self,
            size,
            shift,
            stride,
            drop_remainder,
        })
    }

    /// The dataset of the rows one encoded window holds: `values[i]` and
    /// `shapes[i]` are component `i` (see the module docs). Fails on an
    /// inconsistent encoding.
    pub fn window_elements(values: Vec<Tensor>, shapes: Vec<Tensor>) -> Result<Dataset> {
        let ds = Dataset::from_op(WindowElements { values, shapes });
        ds.validate()?;
        Ok(ds)
    }

    /// [`window_elements`](Self::window_elements) of encoded components
    /// given as consecutive `values, shapes` pairs.
    pub fn window_from_pairs(pairs: Vec<Tensor>) -> Result<Dataset> {
        if !pairs.len().is_multiple_of(2) {
            return Err(Error::InvalidArgument(format!(
                "an encoded window has a values and a shapes tensor per component, got {} tensors",
                pairs.len()
            )));
        }
        let (mut values, mut shapes) = (Vec::new(), Vec::new());
        for (i, t) in pairs.into_iter().enumerate() {
            if i % 2 == 0 {
                values.push(t);
            } else {
                shapes.push(t);
            }
        }
        Dataset::window_elements(values, shapes)
    }
}

/// The encoded form of rows (each with the same number of components):
/// `values, shapes` per component, in component order.
pub fn encode_rows(op: &str, rows: &[Element]) -> Result<Vec<Tensor>> {
    let Some(first) = rows.first() else {
        return Err(Error::Internal(format!("{op}: an empty window")));
    };
    let n = first.components.len();
    let mut out = Vec::with_capacity(2 * n);
    for c in 0..n {
        let mut parts = Vec::with_capacity(rows.len());
        for (i, row) in rows.iter().enumerate() {
            let t = row
                .components
                .get(c)
                .filter(|_| row.components.len() == n)
                .ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "{op}: element {i} has {} components, element 0 has {n}",
                        row.components.len()
                    ))
                })?;
            parts.push(t);
        }
        let (values, shapes) = encode_component(op, c, &parts)?;
        out.push(values);
        out.push(shapes);
    }
    Ok(out)
}

fn encode_component(op: &str, c: usize, parts: &[&Tensor]) -> Result<(Tensor, Tensor)> {
    let first = parts[0];
    let (dtype, rank) = (first.dtype(), first.shape().len());
    let mut dims = Vec::with_capacity(parts.len() * rank);
    let mut total = 0u64;
    for (i, t) in parts.iter().enumerate() {
        if t.dtype() != dtype || t.shape().len() != rank {
            // TensorFlow allows rows of different ranks under an
            // unknown-rank spec; the encoding has one rank per component.
            return Err(Error::InvalidArgument(format!(
                "{op}: component {c} of element {i} is {} of rank {}, element 0's is {dtype} of \
                 rank {rank}; a window's rows must agree in dtype and rank",
                t.dtype(),
                t.shape().len()
            )));
        }
        dims.extend_from_slice(t.shape());
        total += t.num_elements();
    }
    let data = super::tensor_util::joined_data(parts);
    let values = Tensor::new(dtype, vec![total as i64], data)?;
    let shapes = Tensor::from_slice(&dims, vec![parts.len() as i64, rank as i64])?;
    Ok((values, shapes))
}

/// The number of rows of an encoded window.
fn encoded_rows(shapes: &Tensor) -> Result<usize> {
    match (shapes.dtype(), shapes.shape()) {
        (DType::Int64, [rows, _]) => Ok(*rows as usize),
        (dtype, shape) => Err(Error::InvalidArgument(format!(
            "window_elements: a shapes tensor must be int64 [rows, rank], got {dtype} {shape:?}"
        ))),
    }
}

/// `window`.
#[derive(Debug)]
pub struct Window {
    pub input: Dataset,
    pub size: i64,
    pub shift: i64,
    pub stride: i64,
    pub drop_remainder: bool,
}

impl Window {
    /// How many input elements a full window spans: TensorFlow's bound on
    /// the elements it buffers, `(size - 1) * stride + 1`.
    fn span(&self) -> Result<usize> {
        (self.size - 1)
            .checked_mul(self.stride)
            .and_then(|s| s.checked_add(1))
            .and_then(|s| usize::try_from(s).ok())
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "window: size {} with stride {} spans more elements than can be held",
                    self.size, self.stride
                ))
            })
    }
}

impl DatasetOp for Window {
    fn name(&self) -> &'static str {
        "window"
    }

    fn inputs(&self) -> Vec<Dataset> {
        vec![self.input.clone()]
    }

    fn attrs(&self) -> Attrs {
        Attrs::new()
            .with("size", self.size)
            .with("shift", self.shift)
            .with("stride", self.stride)
            .with("drop_remainder", self.drop_remainder)
    }

    fn element_spec(&self) -> Result<Option<Structure>> {
        // TensorFlow's messages.
        for (value, what) in [
            (self.size, "size"),
            (self.shift, "shift"),
            (self.stride, "stride"),
        ] {
            if value <= 0 {
                return Err(Error::InvalidArgument(format!(
                    "Window {what} must be greater than zero."
                )));
            }
        }
        self.span()?;
        Ok(self.input.element_spec()?.map(|s| encoded_spec(&s)))
    }

    fn cardinality(&self) -> i64 {
        let n = self.input.cardinality();
        if n < 0 {
            return n;
        }
        if self.size <= 0 || self.shift <= 0 || self.stride <= 0 {
            // Invalid: iterating fails.
            return UNKNOWN_CARDINALITY;
        }
        if self.drop_remainder {
            // Windows after the first: how many shifts fit after its span.
            match self.span() {
                Ok(span) if n >= span as i64 => (n - span as i64) / self.shift + 1,
                _ => 0,
            }
        } else {
            n / self.shift + i64::from(n % self.shift != 0)
        }
    }

    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        Ok(Box::new(WindowIter {
            input: Some(self.input.op.make_iterator(ctx)?),
            buffer: VecDeque::new(),
            span: self.span()?,
            shift: self.shift as u64,
            stride: self.stride as usize,
            drop_remainder: self.drop_remainder,
        }))
    }
}

/// The spec of an encoded window of elements of spec `s`: per component,
/// `values` `[None]` and `shapes` `[None, rank]`, flat.
pub fn encoded_spec(s: &Structure) -> Structure {
    let mut specs = Vec::new();
    for c in s.flatten() {
        specs.push(TensorSpec::new(c.dtype, Shape(Some(vec![None]))));
        let rank = c.shape.rank().map(|r| r as i64);
        specs.push(TensorSpec::new(DType::Int64, Shape(Some(vec![None, rank]))));
    }
    Structure::from_components(specs)
}

struct WindowIter {
    /// `None` once the input has ended.
    input: Option<Box<dyn ElementIterator>>,
    /// At most `span` elements (TensorFlow's bound: one full window).
    buffer: VecDeque<Element>,
    span: usize,
    shift: u64,
    stride: usize,
    drop_remainder: bool,
}

impl ElementIterator for WindowIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        while self.buffer.len() < self.span
            && let Some(input) = &mut self.input
        {
            match input.next_element()? {
                Some(e) => self.buffer.push_back(e),
                None => self.input = None,
            }
        }
        if self.buffer.is_empty() || (self.drop_remainder && self.buffer.len() < self.span) {
            self.buffer.clear();
            return Ok(None);
        }
        let rows: Vec<Element> = self
            .buffer
            .iter()
            .step_by(self.stride)
            .map(|e| Element::new(e.components.clone()))
            .collect();
        let lineage = Lineage::of_rows(self.buffer.iter().step_by(self.stride).map(|e| &e.lineage));
        let encoded = encode_rows("window", &rows)?;
        // Move on by `shift`: past the buffer, the input's next elements
        // are skipped.
        let buffered = self.buffer.len() as u64;
        if self.shift >= buffered {
            self.buffer.clear();
            if let Some(input) = &mut self.input {
                let want = self.shift - buffered;
                if want > 0 && input.skip_elements(want)? < want {
                    self.input = None;
                }
            }
        } else {
            self.buffer.drain(..self.shift as usize);
        }
        Ok(Some(Element::new(encoded).with_lineage(lineage)))
    }
}

/// One row of an encoded component: its shape and its offset into the values.
type Row = (Vec<i64>, usize);

/// An encoded window's rows as a dataset (see the module docs).
#[derive(Debug)]
pub struct WindowElements {
    pub values: Vec<Tensor>,
    pub shapes: Vec<Tensor>,
}

impl WindowElements {
    /// Each component's rows' shapes and offsets into its values, checked
    /// against the values.
    fn layout(&self) -> Result<Vec<Vec<Row>>> {
        if self.values.len() != self.shapes.len() || self.values.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "window_elements: {} values tensors and {} shapes tensors; needs one pair or more",
                self.values.len(),
                self.shapes.len()
            )));
        }
        let rows = encoded_rows(&self.shapes[0])?;
        let mut out = Vec::with_capacity(self.values.len());
        for (c, (values, shapes)) in self.values.iter().zip(&self.shapes).enumerate() {
            if encoded_rows(shapes)? != rows || values.shape().len() != 1 {
                return Err(Error::InvalidArgument(format!(
                    "window_elements: component {c} is not {rows} rows of rank-1 values"
                )));
            }
            let rank = shapes.shape()[1] as usize;
            let dims = shapes.to_vec::<i64>()?;
            let mut offset = 0u64;
            let mut comp = Vec::with_capacity(rows);
            for r in 0..rows {
                let shape = dims[r * rank..(r + 1) * rank].to_vec();
                let n = tfdata_core::tensor::num_elements(&shape)?;
                comp.push((shape, offset as usize));
                offset = offset.saturating_add(n);
            }
            if offset != values.num_elements() {
                return Err(Error::InvalidArgument(format!(
                    "window_elements: component {c}'s shapes hold {offset} values, its values tensor {}",
                    values.num_elements()
                )));
            }
            out.push(comp);
        }
        Ok(out)
    }
}

impl DatasetOp for WindowElements {
    fn name(&self) -> &'static str {
        "window_elements"
    }

    fn attrs(&self) -> Attrs {
        Attrs::new()
            .with("values", self.values.clone())
            .with("shapes", self.shapes.clone())
    }

    fn element_spec(&self) -> Result<Option<Structure>> {
        let layout = self.layout()?;
        let specs = layout
            .iter()
            .zip(&self.values)
            .map(|(rows, values)| {
                let shape = rows
                    .iter()
                    .map(|(s, _)| Shape::known(s))
                    .reduce(|a, b| a.merge(&b))
                    .unwrap_or_else(Shape::unknown_rank);
                TensorSpec::new(values.dtype(), shape)
            })
            .collect();
        Ok(Some(Structure::from_components(specs)))
    }

    fn cardinality(&self) -> i64 {
        self.shapes
            .first()
            .and_then(|s| encoded_rows(s).ok())
            .map_or(0, |n| n as i64)
    }

    fn make_iterator(&self, _ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        Ok(Box::new(WindowElementsIter {
            layout: self.layout()?,
            values: self.values.clone(),
            next: 0,
        }))
    }
}

struct WindowElementsIter {
    layout: Vec<Vec<Row>>,
    values: Vec<Tensor>,
    next: usize,
}

impl ElementIterator for WindowElementsIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        let r = self.next;
        if self.layout.first().is_none_or(|rows| r >= rows.len()) {
            return Ok(None);
        }
        self.next += 1;
        let mut components = Vec::with_capacity(self.values.len());
        for (rows, values) in self.layout.iter().zip(&self.values) {
            let (shape, offset) = &rows[r];
            let n = tfdata_core::tensor::num_elements(shape)? as usize;
            let data = match values.data() {
                TensorData::Buffer(b) => {
                    let size = values.dtype().size().unwrap_or(1);
                    TensorData::Buffer(b.slice(offset * size..(offset + n) * size))
                }
                TensorData::Strings(s) => TensorData::Strings(s[*offset..offset + n].to_vec()),
            };
            components.push(Tensor::new(values.dtype(), shape.clone(), data)?);
        }
        Ok(Some(Element::new(components)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn windows(ds: &Dataset) -> Vec<Vec<i64>> {
        let mut out = Vec::new();
        for e in ds.iter().unwrap() {
            let w = Dataset::window_from_pairs(e.unwrap().components).unwrap();
            let rows: Vec<i64> = w
                .iter()
                .unwrap()
                .map(|r| r.unwrap().components[0].to_scalar::<i64>().unwrap())
                .collect();
            out.push(rows);
        }
        out
    }

    #[test]
    fn windows_follow_tensorflow() {
        let ds = Dataset::range(7).window(3, 2, 1, false);
        assert_eq!(
            windows(&ds),
            vec![vec![0, 1, 2], vec![2, 3, 4], vec![4, 5, 6], vec![6]]
        );
        assert_eq!(ds.cardinality(), 4);
        let ds = Dataset::range(7).window(3, 2, 2, true);
        assert_eq!(windows(&ds), vec![vec![0, 2, 4], vec![2, 4, 6]]);
        assert_eq!(ds.cardinality(), 2);
        let ds = Dataset::range(10).window(2, 5, 1, true);
        assert_eq!(windows(&ds), vec![vec![0, 1], vec![5, 6]]);
        let ds = Dataset::range(3).window(5, 1, 1, true);
        assert!(windows(&ds).is_empty());
        assert_eq!(ds.cardinality(), 0);
        let err = Dataset::range(3)
            .window(0, 1, 1, true)
            .iter()
            .err()
            .unwrap();
        assert!(
            err.to_string()
                .contains("Window size must be greater than zero.")
        );
    }

    #[test]
    fn rows_of_different_shapes_round_trip() {
        let rows = vec![
            Element::new(vec![
                Tensor::vector(&[1i32, 2, 3]),
                Tensor::scalar_string("a"),
            ]),
            Element::new(vec![Tensor::vector(&[4i32]), Tensor::scalar_string("bc")]),
        ];
        let ds = Dataset::window_from_pairs(encode_rows("t", &rows).unwrap()).unwrap();
        let back: Vec<Element> = ds.iter().unwrap().map(|e| e.unwrap()).collect();
        assert_eq!(back, rows);
        let spec = ds.element_spec().unwrap().unwrap();
        assert_eq!(spec.flatten()[0].shape, Shape(Some(vec![None])));
        assert!(Dataset::window_from_pairs(vec![Tensor::vector(&[1i64])]).is_err());
        let bad = vec![
            Tensor::vector(&[1i64]),
            Tensor::from_slice(&[2i64], vec![1, 1]).unwrap(),
        ];
        assert!(Dataset::window_from_pairs(bad).is_err());
    }
}
