//! Dataset nodes of SparseTensors: `SparseTensorSliceDataset` (the rows of
//! a SparseTensor, each as its three tensors: indices, values, dense shape)
//! and `DenseToSparseBatchDataset` (`dense_to_sparse_batch`), whose
//! elements are the `[3]` string form a pipeline carries a SparseTensor in
//! (built by the `SerializeSparse` kernel), which a later map reads back;
//! TensorFlow's clients cannot be served that directly (see
//! `tests/sparse_elements.rs`).

use std::sync::Arc;

use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Element, Error, Result, Tensor};
use tfdata_dataset::ops::tensor_util::joined_data;
use tfdata_dataset::spec::{Shape, Structure, TensorSpec};
use tfdata_dataset::{Attrs, Dataset, DatasetOp, ElementIterator, IterContext};
use tfdata_proto::tensorflow::NodeDef;

use super::node::{handle, sparse_serializer};
use crate::attrs::NodeAttrs;
use crate::function::CompiledNode;
use crate::kernels::check_size;

/// The node compiled, if it is one of this module's.
pub(super) fn compile(node: &NodeDef, attrs: &NodeAttrs) -> Result<Option<CompiledNode>> {
    Ok(Some(match node.op.as_str() {
        "SparseTensorSliceDataset" => handle(
            move |mut i| {
                let indices = i.tensor("indices")?;
                let values = i.tensor("values")?;
                let shape = i.tensor("dense_shape")?;
                slices(&indices, &values, &shape)
            },
            node,
        ),
        "DenseToSparseBatchDataset" | "ExperimentalDenseToSparseBatchDataset" => {
            let types = attrs.dtype_codes("output_types")?;
            let [code] = types[..] else {
                return Err(attrs.error(
                    "DenseToSparseBatchDataset only supports inputs with a single component.",
                ));
            };
            handle(
                move |mut i| {
                    let input = i.dataset()?;
                    let batch_size = i.int("batch_size")?;
                    if batch_size <= 0 {
                        return Err(Error::InvalidArgument(
                            "Batch size must be greater than zero.".into(),
                        ));
                    }
                    let row_shape = i.tensor("row_shape")?.to_vec::<i64>()?;
                    let _ = code;
                    Ok(Dataset::from_op(DenseToSparseBatch {
                        input,
                        batch_size,
                        row_shape,
                        name: i.err("").to_string(),
                    }))
                },
                node,
            )
        }
        _ => return Ok(None),
    }))
}

fn shape_str(dims: &[i64]) -> String {
    let d: Vec<String> = dims.iter().map(i64::to_string).collect();
    format!("[{}]", d.join(","))
}

/// `SparseTensorSliceDataset`: one sparse row per index of the first
/// dimension, its entries those whose first index is the row's.
fn slices(indices: &Tensor, values: &Tensor, shape: &Tensor) -> Result<Dataset> {
    let bad = |m: String| Error::InvalidArgument(m);
    if indices.shape().len() != 2 {
        return Err(bad(format!(
            "Input indices must be a matrix. Got: {}",
            shape_str(indices.shape())
        )));
    }
    if values.shape().len() != 1 {
        return Err(bad(format!(
            "Input values must be a vector. Got: {}",
            shape_str(values.shape())
        )));
    }
    if shape.shape().len() != 1 {
        return Err(bad(format!(
            "Input shape must be a vector. Got: {}",
            shape_str(shape.shape())
        )));
    }
    if values.shape()[0] != indices.shape()[0] {
        return Err(bad(format!(
            "Number of values must match first dimension of indices. Got {} values, indices shape: {}",
            values.shape()[0],
            shape_str(indices.shape())
        )));
    }
    let rank = indices.shape()[1] as usize;
    let dense = shape.to_vec::<i64>()?;
    if dense.len() != rank {
        return Err(bad(format!(
            "Number of dimensions must match second dimension of indices. Got {} dimensions, indices shape: {}",
            dense.len(),
            shape_str(indices.shape())
        )));
    }
    if rank == 0 {
        return Err(bad("Sparse tensor must have rank > 0".into()));
    }
    let idx = indices.to_vec::<i64>()?;
    let n = values.shape()[0] as usize;
    // TensorFlow needs the entries ordered by row.
    if (1..n).any(|e| idx[e * rank] < idx[(e - 1) * rank]) {
        return Err(Error::Unimplemented(
            "The SparseTensor must be ordered in the batch dimension; handling arbitrarily \
             ordered input is not currently supported."
                .into(),
        ));
    }
    Ok(Dataset::from_op(SparseSlices {
        rows: Arc::new(SparseRows {
            indices: idx,
            values: values.clone(),
            dense,
            rank,
        }),
    }))
}

/// The SparseTensor `SparseTensorSliceDataset` slices.
#[derive(Debug)]
struct SparseRows {
    /// Row-major `[n, rank]`.
    indices: Vec<i64>,
    values: Tensor,
    dense: Vec<i64>,
    rank: usize,
}

#[derive(Debug)]
struct SparseSlices {
    rows: Arc<SparseRows>,
}

impl DatasetOp for SparseSlices {
    fn name(&self) -> &'static str {
        "sparse_tensor_slices"
    }
    fn attrs(&self) -> Attrs {
        Attrs::new().with("dense_shape", self.rows.dense.clone())
    }
    fn element_spec(&self) -> Result<Option<Structure>> {
        let r = self.rows.rank as i64 - 1;
        Ok(Some(Structure::from_components(vec![
            TensorSpec::new(DType::Int64, Shape(Some(vec![None, Some(r)]))),
            TensorSpec::new(self.rows.values.dtype(), Shape(Some(vec![None]))),
            TensorSpec::new(DType::Int64, Shape::known(&[r])),
        ])))
    }
    fn cardinality(&self) -> i64 {
        self.rows.dense[0].max(0)
    }
    fn make_iterator(&self, _ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        Ok(Box::new(SparseSliceIter {
            rows: self.rows.clone(),
            row: 0,
            entry: 0,
        }))
    }
}

struct SparseSliceIter {
    rows: Arc<SparseRows>,
    row: i64,
    entry: usize,
}

impl ElementIterator for SparseSliceIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        let s = &*self.rows;
        if self.row >= s.dense[0] {
            return Ok(None);
        }
        let (rank, n) = (s.rank, s.values.shape()[0] as usize);
        // Entries of earlier (negative) rows are never reached, as in TensorFlow.
        while self.entry < n && s.indices[self.entry * rank] < self.row {
            self.entry += 1;
        }
        let start = self.entry;
        while self.entry < n && s.indices[self.entry * rank] == self.row {
            self.entry += 1;
        }
        let end = self.entry;
        self.row += 1;
        let sub: Vec<i64> = (start..end)
            .flat_map(|k| s.indices[k * rank + 1..(k + 1) * rank].iter().copied())
            .collect();
        Ok(Some(Element::new(vec![
            Tensor::from_slice(&sub, vec![(end - start) as i64, rank as i64 - 1])?,
            values_range(&s.values, start, end)?,
            Tensor::from_slice(&s.dense[1..], vec![rank as i64 - 1])?,
        ])))
    }
}

/// `values[start..end]` of a vector.
fn values_range(values: &Tensor, start: usize, end: usize) -> Result<Tensor> {
    let data = match values.data() {
        TensorData::Strings(s) => TensorData::Strings(s[start..end].to_vec()),
        TensorData::Buffer(b) => {
            let size = values.dtype().size().unwrap_or(1);
            TensorData::Buffer(b.slice(start * size..end * size))
        }
    };
    Tensor::new(values.dtype(), vec![(end - start) as i64], data)
}

/// `DenseToSparseBatchDataset`.
#[derive(Debug)]
struct DenseToSparseBatch {
    input: Dataset,
    batch_size: i64,
    row_shape: Vec<i64>,
    name: String,
}

impl DatasetOp for DenseToSparseBatch {
    fn name(&self) -> &'static str {
        "dense_to_sparse_batch"
    }
    fn inputs(&self) -> Vec<Dataset> {
        vec![self.input.clone()]
    }
    fn attrs(&self) -> Attrs {
        Attrs::new()
            .with("batch_size", self.batch_size)
            .with("row_shape", self.row_shape.clone())
    }
    fn element_spec(&self) -> Result<Option<Structure>> {
        Ok(Some(Structure::Tensor(TensorSpec::new(
            DType::String,
            Shape::unknown_rank(),
        ))))
    }
    fn cardinality(&self) -> i64 {
        let n = self.input.cardinality();
        if n < 0 {
            n
        } else {
            (n + self.batch_size - 1) / self.batch_size
        }
    }
    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        Ok(Box::new(DenseToSparseIter {
            input: self.input.iter_with(ctx)?,
            batch_size: self.batch_size as usize,
            row_shape: self.row_shape.clone(),
            name: self.name.clone(),
            done: false,
        }))
    }
}

struct DenseToSparseIter {
    input: Box<dyn ElementIterator>,
    batch_size: usize,
    row_shape: Vec<i64>,
    name: String,
    done: bool,
}

impl ElementIterator for DenseToSparseIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        if self.done {
            return Ok(None);
        }
        let mut rows = Vec::new();
        while rows.len() < self.batch_size {
            match self.input.next_element()? {
                Some(mut e) if e.components.len() == 1 => {
                    let t = e
                        .components
                        .pop()
                        .ok_or_else(|| Error::Internal("empty".into()))?;
                    let shape = t.shape();
                    if shape.len() != self.row_shape.len() {
                        return Err(Error::InvalidArgument(format!(
                            "Input element had shape ({}) that is incompatible with the row shape ({}).",
                            shape_str(shape),
                            shape_str(&self.row_shape)
                        )));
                    }
                    if shape
                        .iter()
                        .zip(&self.row_shape)
                        .any(|(&d, &r)| r >= 0 && d > r)
                    {
                        return Err(Error::DataLoss {
                            location: self.name.clone(),
                            reason: format!(
                                "Input element had shape ({}) that is larger than the row shape ({}).",
                                shape_str(shape),
                                shape_str(&self.row_shape)
                            ),
                        });
                    }
                    rows.push(t);
                }
                Some(e) => {
                    return Err(Error::InvalidArgument(format!(
                        "DenseToSparseBatchDataset only supports inputs with a single component, got {}",
                        e.components.len()
                    )));
                }
                None => {
                    self.done = true;
                    break;
                }
            }
        }
        if rows.is_empty() {
            return Ok(None);
        }
        let rank = self.row_shape.len();
        let mut dense = vec![rows.len() as i64];
        for (k, &r) in self.row_shape.iter().enumerate() {
            dense.push(if r >= 0 {
                r
            } else {
                rows.iter().map(|t| t.shape()[k]).max().unwrap_or(0)
            });
        }
        let total: u64 = rows.iter().map(Tensor::num_elements).sum();
        check_size(
            "DenseToSparseBatchDataset",
            DType::Int64,
            total * (rank as u64 + 1),
        )?;
        let mut idx = Vec::with_capacity(total as usize * (rank + 1));
        for (b, t) in rows.iter().enumerate() {
            let shape = t.shape();
            let mut pos = vec![0i64; rank];
            for _ in 0..t.num_elements() {
                idx.push(b as i64);
                idx.extend_from_slice(&pos);
                // Row-major: the last dimension moves fastest.
                for d in (0..rank).rev() {
                    pos[d] += 1;
                    if pos[d] < shape[d] {
                        break;
                    }
                    pos[d] = 0;
                }
            }
        }
        let parts: Vec<&Tensor> = rows.iter().collect();
        let values = Tensor::new(rows[0].dtype(), vec![total as i64], joined_data(&parts))?;
        let indices = Tensor::from_slice(&idx, vec![total as i64, rank as i64 + 1])?;
        let shape = Tensor::from_slice(&dense, vec![rank as i64 + 1])?;
        let serialize = sparse_serializer(&self.name, values.dtype().code())?;
        let mut out = serialize(vec![indices, values, shape])?;
        Ok(Some(Element::new(vec![out.pop().ok_or_else(|| {
            Error::Internal("SerializeSparse gave nothing".into())
        })?])))
    }
}
