//! The legacy reader ops (`TextLineReaderV2` and kin, `ReaderReadV2` and
//! the other reader verbs) and the `FIFOQueueV2` ops that feed them work
//! items, on [`crate::reader::Reader`] and [`crate::queue::FifoQueue`].
//!
//! As in TensorFlow, a resource node with no `shared_name` makes its
//! resource once, when first run, and every later run of that node (a
//! later call of the same function) gets the same resource: a second call
//! of a function that closed its queue finds it closed.
//!
//! The V2 ops (resource handles) are here; the V1 ones (reference-typed
//! handles) are these kernels under their names ([`super::readers_v1`]).

use std::sync::{Arc, OnceLock};

use tfdata_core::{DType, Error, Result, Tensor};
use tfdata_dataset::io::CompressionType;

use super::{OutputArgs, ResourceKernelDef};
use crate::attrs::NodeAttrs;
use crate::kernels::NodeFn;
use crate::queue::FifoQueue;
use crate::reader::{Reader, ReaderKind};
use crate::value::Value;

fn handle(_: &NodeAttrs) -> Result<OutputArgs> {
    Ok(vec![("reader_handle", 1)])
}

pub(super) const KERNELS: &[ResourceKernelDef] = &[
    ResourceKernelDef {
        op: "FIFOQueueV2",
        outputs: |_| Ok(vec![("handle", 1)]),
        build: fifo_queue,
    },
    ResourceKernelDef {
        op: "QueueEnqueueV2",
        outputs: |_| Ok(Vec::new()),
        build: |_| enqueue(false),
    },
    ResourceKernelDef {
        op: "QueueEnqueueManyV2",
        outputs: |_| Ok(Vec::new()),
        build: |_| enqueue(true),
    },
    ResourceKernelDef {
        op: "QueueCloseV2",
        outputs: |_| Ok(Vec::new()),
        build: close,
    },
    ResourceKernelDef {
        op: "QueueSizeV2",
        outputs: |_| Ok(vec![("size", 1)]),
        build: size,
    },
    ResourceKernelDef {
        op: "QueueDequeueV2",
        outputs: |a| Ok(vec![("components", a.dtypes("component_types")?.len())]),
        build: dequeue,
    },
    ResourceKernelDef {
        op: "TextLineReaderV2",
        outputs: handle,
        build: text_line_reader,
    },
    ResourceKernelDef {
        op: "TFRecordReaderV2",
        outputs: handle,
        build: tfrecord_reader,
    },
    ResourceKernelDef {
        op: "FixedLengthRecordReaderV2",
        outputs: handle,
        build: fixed_length_reader,
    },
    ResourceKernelDef {
        op: "WholeFileReaderV2",
        outputs: handle,
        build: |a| make_reader(a, ReaderKind::WholeFile),
    },
    ResourceKernelDef {
        op: "IdentityReaderV2",
        outputs: handle,
        build: |a| make_reader(a, ReaderKind::Identity),
    },
    ResourceKernelDef {
        op: "ReaderReadV2",
        outputs: |_| Ok(vec![("key", 1), ("value", 1)]),
        build: read,
    },
    ResourceKernelDef {
        op: "ReaderReadUpToV2",
        outputs: |_| Ok(vec![("keys", 1), ("values", 1)]),
        build: read_up_to,
    },
    ResourceKernelDef {
        op: "ReaderNumRecordsProducedV2",
        outputs: |_| Ok(vec![("records_produced", 1)]),
        build: |_| verb(|r, _| Ok(vec![int64(r.num_records_produced())])),
    },
    ResourceKernelDef {
        op: "ReaderNumWorkUnitsCompletedV2",
        outputs: |_| Ok(vec![("units_completed", 1)]),
        build: |_| verb(|r, _| Ok(vec![int64(r.num_work_units_completed())])),
    },
    ResourceKernelDef {
        op: "ReaderResetV2",
        outputs: |_| Ok(Vec::new()),
        build: |_| {
            verb(|r, _| {
                r.reset();
                Ok(Vec::new())
            })
        },
    },
    ResourceKernelDef {
        op: "ReaderSerializeStateV2",
        outputs: |_| Ok(vec![("state", 1)]),
        build: |_| verb(|r, _| Ok(vec![Value::Tensor(r.serialize_state()?)])),
    },
    ResourceKernelDef {
        op: "ReaderRestoreStateV2",
        outputs: |_| Ok(Vec::new()),
        build: |_| verb(restore_state),
    },
];

fn int64(v: i64) -> Value {
    Value::Tensor(Tensor::scalar(v))
}

fn node(f: impl Fn(Vec<Value>) -> Result<Vec<Value>> + Send + Sync + 'static) -> Result<NodeFn> {
    Ok(Arc::new(f))
}

fn queue_of(v: &Value) -> Result<Arc<FifoQueue>> {
    match v {
        Value::Queue(q) => Ok(q.clone()),
        other => Err(Error::InvalidArgument(format!(
            "expected a queue handle a FIFOQueueV2 node made, got {}",
            other.describe()
        ))),
    }
}

fn reader_of(v: &Value) -> Result<Arc<Reader>> {
    match v {
        Value::Reader(r) => Ok(r.clone()),
        other => Err(Error::InvalidArgument(format!(
            "expected a reader handle a reader node made, got {}",
            other.describe()
        ))),
    }
}

/// A resource node: its resource made at the first run, then shared by
/// every later run (TensorFlow's `ResourceOpKernel` without `shared_name`).
fn once<T: Send + Sync + 'static>(
    make: impl Fn() -> T + Send + Sync + 'static,
    wrap: fn(Arc<T>) -> Value,
) -> Result<NodeFn> {
    let cell: OnceLock<Arc<T>> = OnceLock::new();
    node(move |_| Ok(vec![wrap(cell.get_or_init(|| Arc::new(make())).clone())]))
}

fn fifo_queue(attrs: &NodeAttrs) -> Result<NodeFn> {
    let types = attrs.dtypes("component_types")?;
    if types.is_empty() {
        return Err(attrs.error("component_types must not be empty"));
    }
    let shapes = attrs
        .shapes("shapes")?
        .iter()
        .map(|p| {
            if p.unknown_rank {
                return Err(attrs.error("a FIFOQueue's shapes must be of known rank"));
            }
            Ok(p.dim.iter().map(|d| d.size).collect::<Vec<i64>>())
        })
        .collect::<Result<Vec<_>>>()?;
    if !shapes.is_empty() && shapes.len() != types.len() {
        return Err(attrs.error(format!(
            "shapes must have the same length as component_types ({} vs. {})",
            shapes.len(),
            types.len()
        )));
    }
    let capacity = attrs.int_or("capacity", -1)?;
    let capacity = usize::try_from(capacity).ok();
    let name = attrs.node.to_string();
    once(
        move || FifoQueue::new(&name, capacity, types.clone(), shapes.clone()),
        Value::Queue,
    )
}

/// The tensors of a tuple after the handle.
fn components(op: &str, inputs: Vec<Value>) -> Result<(Arc<FifoQueue>, Vec<Tensor>)> {
    let mut it = inputs.into_iter();
    let q = queue_of(
        &it.next()
            .ok_or_else(|| Error::InvalidArgument(format!("{op}: no handle")))?,
    )?;
    let tensors = it.map(|v| v.into_tensor(op)).collect::<Result<Vec<_>>>()?;
    Ok((q, tensors))
}

/// Row `i` of `t` along its first dimension.
fn row(t: &Tensor, i: usize) -> Result<Tensor> {
    let shape = t.shape()[1..].to_vec();
    let per: usize = shape.iter().map(|&d| d as usize).product();
    match t.data() {
        tfdata_core::tensor::TensorData::Strings(s) => {
            Tensor::strings(s[i * per..(i + 1) * per].to_vec(), shape)
        }
        tfdata_core::tensor::TensorData::Buffer(b) => {
            let size = t.dtype().size().unwrap_or(1) * per;
            Tensor::new(
                t.dtype(),
                shape,
                tfdata_core::tensor::TensorData::Buffer(b.slice(i * size..(i + 1) * size)),
            )
        }
    }
}

fn enqueue(many: bool) -> Result<NodeFn> {
    node(move |inputs| {
        let op = if many {
            "QueueEnqueueManyV2"
        } else {
            "QueueEnqueueV2"
        };
        let (q, tensors) = components(op, inputs)?;
        check_signature(&q, &tensors)?;
        if !many {
            for (i, t) in tensors.iter().enumerate() {
                check_shape(&q, i, t.shape(), &[])?;
            }
            q.enqueue(vec![tensors])?;
            return Ok(Vec::new());
        }
        let mut batch: Option<i64> = None;
        for (i, t) in tensors.iter().enumerate() {
            // (TensorFlow reads a scalar's missing first dimension: garbage
            // in its message, or a crash when the queue has no shapes.)
            let Some(&n) = t.shape().first() else {
                return Err(Error::InvalidArgument(format!(
                    "Shape mismatch in tuple component {i}. Expected a batch, got []"
                )));
            };
            let b = *batch.get_or_insert(n);
            check_shape(&q, i, t.shape(), &[b])?;
            if b != n {
                return Err(Error::InvalidArgument(format!(
                    "Shape mismatch in tuple component {i}. Expected [{b}], got [{n}]"
                )));
            }
        }
        let n = batch.unwrap_or(0) as usize;
        if n > crate::queue::MAX_QUEUE_ELEMENTS {
            return Err(Error::InvalidArgument(format!(
                "{op}: more than {} elements",
                crate::queue::MAX_QUEUE_ELEMENTS
            )));
        }
        let tuples = (0..n)
            .map(|i| {
                tensors
                    .iter()
                    .map(|t| row(t, i))
                    .collect::<Result<Vec<_>>>()
            })
            .collect::<Result<Vec<_>>>()?;
        q.enqueue(tuples)?;
        Ok(Vec::new())
    })
}

/// TensorFlow's `MatchSignature`: the handle, then the queue's dtypes.
fn check_signature(q: &FifoQueue, tensors: &[Tensor]) -> Result<()> {
    let have: Vec<DType> = tensors.iter().map(Tensor::dtype).collect();
    if have == q.types() {
        return Ok(());
    }
    let show = |ds: &[DType]| {
        std::iter::once("resource")
            .chain(ds.iter().map(|d| super::lookup::tf_name(*d)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    Err(Error::InvalidArgument(format!(
        "Signature mismatch, have: {}-> expected: {}->",
        show(&have),
        show(q.types())
    )))
}

/// A component's shape against the queue's (after `batch`, for
/// `EnqueueMany`), when the queue declares shapes.
fn check_shape(q: &FifoQueue, i: usize, shape: &[i64], batch: &[i64]) -> Result<()> {
    let Some(want) = q.shapes().get(i) else {
        return Ok(());
    };
    let want: Vec<i64> = batch.iter().chain(want).copied().collect();
    let fits = want.len() == shape.len() && want.iter().zip(shape).all(|(w, h)| *w < 0 || w == h);
    if fits {
        return Ok(());
    }
    let show = |s: &[i64]| {
        let dims: Vec<String> = s.iter().map(i64::to_string).collect();
        format!("[{}]", dims.join(","))
    };
    Err(Error::InvalidArgument(format!(
        "Shape mismatch in tuple component {i}. Expected {}, got {}",
        show(&want),
        show(shape)
    )))
}

fn close(_: &NodeAttrs) -> Result<NodeFn> {
    node(|inputs| {
        let (q, _) = components("QueueCloseV2", inputs)?;
        q.close();
        Ok(Vec::new())
    })
}

fn size(_: &NodeAttrs) -> Result<NodeFn> {
    node(|inputs| {
        let (q, _) = components("QueueSizeV2", inputs)?;
        Ok(vec![Value::Tensor(Tensor::scalar(q.size() as i32))])
    })
}

fn dequeue(attrs: &NodeAttrs) -> Result<NodeFn> {
    let types = attrs.dtypes("component_types")?;
    node(move |inputs| {
        let (q, _) = components("QueueDequeueV2", inputs)?;
        let tuple = q.dequeue()?;
        let have: Vec<DType> = tuple.iter().map(Tensor::dtype).collect();
        if have != types {
            return Err(Error::InvalidArgument(format!(
                "QueueDequeueV2: the queue holds {have:?}, the node expects {types:?}"
            )));
        }
        Ok(tuple.into_iter().map(Value::Tensor).collect())
    })
}

fn make_reader(attrs: &NodeAttrs, kind: ReaderKind) -> Result<NodeFn> {
    let name = attrs.node.to_string();
    once(move || Reader::new(kind.clone(), &name), Value::Reader)
}

fn text_line_reader(attrs: &NodeAttrs) -> Result<NodeFn> {
    let skip = attrs.int_or("skip_header_lines", 0)?;
    if skip < 0 {
        return Err(Error::InvalidArgument(format!(
            "skip_header_lines must be >= 0 not {skip}"
        )));
    }
    make_reader(
        attrs,
        ReaderKind::TextLine {
            skip_header_lines: skip,
        },
    )
}

/// `GZIP` and `ZLIB`, and anything else as no compression (the legacy
/// readers' reading of their attributes).
fn compression_or_none(name: &str) -> CompressionType {
    match name {
        "GZIP" => CompressionType::Gzip,
        "ZLIB" => CompressionType::Zlib,
        _ => CompressionType::None,
    }
}

fn tfrecord_reader(attrs: &NodeAttrs) -> Result<NodeFn> {
    // TensorFlow reads an unknown `compression_type` as uncompressed (and
    // logs it).
    let compression = compression_or_none(attrs.string_or("compression_type", "")?);
    make_reader(attrs, ReaderKind::TfRecord { compression })
}

fn fixed_length_reader(attrs: &NodeAttrs) -> Result<NodeFn> {
    let get = |k: &str| -> Result<u64> {
        let v = attrs.int_or(k, 0)?;
        u64::try_from(v).map_err(|_| Error::InvalidArgument(format!("{k} must be >= 0 not {v}")))
    };
    let (header, record, footer, hop) = (
        get("header_bytes")?,
        get("record_bytes")?,
        get("footer_bytes")?,
        get("hop_bytes")?,
    );
    // TensorFlow reads any other `encoding` as uncompressed bytes.
    let compression = compression_or_none(attrs.string_or("encoding", "")?);
    make_reader(
        attrs,
        ReaderKind::FixedLength {
            header,
            record,
            footer,
            hop,
            compression,
        },
    )
}

/// A reader verb: the reader handle, then the op's other inputs.
fn verb(
    f: impl Fn(&Reader, Vec<Value>) -> Result<Vec<Value>> + Send + Sync + 'static,
) -> Result<NodeFn> {
    node(move |inputs| {
        let mut it = inputs.into_iter();
        let r = reader_of(
            &it.next()
                .ok_or_else(|| Error::InvalidArgument("reader op without a handle".into()))?,
        )?;
        f(&r, it.collect())
    })
}

fn read(_: &NodeAttrs) -> Result<NodeFn> {
    verb(|r, rest| {
        let q = queue_of(
            rest.first()
                .ok_or_else(|| Error::InvalidArgument("ReaderReadV2: no queue handle".into()))?,
        )?;
        let (k, v) = r.read(&q)?;
        Ok(vec![
            Value::Tensor(Tensor::scalar_string(k)),
            Value::Tensor(Tensor::scalar_string(v)),
        ])
    })
}

fn read_up_to(_: &NodeAttrs) -> Result<NodeFn> {
    verb(|r, rest| {
        let [q, n] = <[Value; 2]>::try_from(rest)
            .map_err(|_| Error::InvalidArgument("ReaderReadUpToV2: expected 3 inputs".into()))?;
        let q = queue_of(&q)?;
        let n = n.into_tensor("ReaderReadUpToV2 num_records")?;
        if n.dtype() != DType::Int64 || !n.shape().is_empty() {
            return Err(Error::InvalidArgument(
                "ReaderReadUpToV2: num_records must be a scalar int64".into(),
            ));
        }
        let n = n.to_scalar::<i64>()?;
        if n < 0 {
            return Err(Error::InvalidArgument(format!(
                "ReaderReadUpToV2: num_records must be >= 0 not {n}"
            )));
        }
        // TensorFlow reserves room for `num_records` keys and values.
        super::check_size(
            "ReaderReadUpToV2",
            DType::String,
            (n as u64).saturating_mul(2),
        )?;
        let (keys, values) = r.read_up_to(&q, n)?;
        let len = vec![keys.len() as i64];
        Ok(vec![
            Value::Tensor(Tensor::strings(keys, len.clone())?),
            Value::Tensor(Tensor::strings(values, len)?),
        ])
    })
}

fn restore_state(r: &Reader, rest: Vec<Value>) -> Result<Vec<Value>> {
    let state = rest
        .into_iter()
        .next()
        .ok_or_else(|| Error::InvalidArgument("ReaderRestoreStateV2: no state".into()))?
        .into_tensor("ReaderRestoreStateV2 state")?;
    if !state.shape().is_empty() {
        let dims: Vec<String> = state.shape().iter().map(i64::to_string).collect();
        return Err(Error::InvalidArgument(format!(
            "Reader state must be scalar, but had shape: [{}]",
            dims.join(",")
        )));
    }
    let bytes = state.string_values()?[0].clone();
    r.restore_state(&bytes)?;
    Ok(Vec::new())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tfdata_core::Tensor;
    use tonic::Code;

    use crate::queue::FifoQueue;
    use crate::reader::{Reader, ReaderKind};

    fn queue_of(names: &[&str], close: bool) -> FifoQueue {
        let q = FifoQueue::new("q", None, vec![tfdata_core::DType::String], vec![vec![]]);
        q.enqueue(
            names
                .iter()
                .map(|n| vec![Tensor::scalar_string(n.to_string())])
                .collect(),
        )
        .unwrap();
        if close {
            q.close();
        }
        q
    }

    #[test]
    fn an_open_empty_queue_is_an_error_not_a_hang() {
        let q = queue_of(&[], false);
        let r = Reader::new(ReaderKind::Identity, "r");
        let err = r.read(&q).unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{err}");
        let closed = queue_of(&[], true);
        assert_eq!(r.read(&closed).unwrap_err().code(), Code::OutOfRange);
    }

    #[test]
    fn a_full_queue_refuses_instead_of_waiting() {
        let q = FifoQueue::new("q", Some(1), vec![tfdata_core::DType::String], vec![]);
        q.enqueue(vec![vec![Tensor::scalar_string("a")]]).unwrap();
        let err = q
            .enqueue(vec![vec![Tensor::scalar_string("b")]])
            .unwrap_err();
        assert!(err.to_string().contains("capacity"), "{err}");
    }

    #[test]
    fn text_lines_are_keyed_by_file_and_line_and_state_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.txt");
        std::fs::write(&path, "h\nx\r\ny").unwrap();
        let p = path.to_str().unwrap();
        let q = queue_of(&[p], true);
        let r = Reader::new(
            ReaderKind::TextLine {
                skip_header_lines: 1,
            },
            "r",
        );
        let (keys, values) = r.read_up_to(&q, 5).unwrap();
        assert_eq!(keys, vec![format!("{p}:2"), format!("{p}:3")]);
        assert_eq!(values, vec!["x", "y"]);
        assert_eq!(r.num_work_units_completed(), 1);
        // Identity readers keep only the base state, which round-trips.
        let id = Arc::new(Reader::new(ReaderKind::Identity, "i"));
        id.read(&queue_of(&["w"], true)).unwrap();
        let state = id.serialize_state().unwrap();
        let again = Reader::new(ReaderKind::Identity, "j");
        again
            .restore_state(&state.string_values().unwrap()[0])
            .unwrap();
        assert_eq!(again.serialize_state().unwrap(), state);
        assert_eq!(r.serialize_state().unwrap_err().code(), Code::Unimplemented);
    }
}
