//! The SparseTensorsMap ops of `tf.compat.v1` (what `tf.train.batch` and
//! kin use to pass SparseTensors through queues as int64 handles):
//! `AddSparseToTensorsMap` stores one SparseTensor and answers its handle,
//! `AddManySparseToTensorsMap` stores each row of a minibatch,
//! `TakeManySparseFromTensorsMap` takes stored tensors out again as one
//! batched SparseTensor.
//!
//! As in TensorFlow, a map is a resource named by `container` and
//! `shared_name` (a writer with no `shared_name` uses its node's name; a
//! reader with none gets a map of its own, which holds nothing). Each node
//! finds its map at its first run and keeps it, so a map lives as long as
//! a function using it, across that function's calls; handles count from 0
//! in each map, in the order tensors are added. Beyond TensorFlow, a map
//! holds at most [`MAX_STORED`] tensors: adding without taking is refused
//! (`InvalidArgument`)
//! there rather than growing without bound.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use tfdata_core::{DType, Error, Result, Tensor};

use super::serialize::{checked_triple, indices_valid};
use super::{Indices, gather, int64s, invalid};
use crate::attrs::NodeAttrs;
use crate::kernels::layout::{Out, Src, shape_str, take};
use crate::kernels::lookup::tf_name;
use crate::kernels::{Compute, KernelDef, check_size};

pub(in crate::kernels) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "AddSparseToTensorsMap",
        outputs: |_| Ok(vec![("sparse_handle", 1)]),
        build: add_one,
    },
    KernelDef {
        op: "AddManySparseToTensorsMap",
        outputs: |_| Ok(vec![("sparse_handles", 1)]),
        build: add_many,
    },
    KernelDef {
        op: "TakeManySparseFromTensorsMap",
        outputs: |_| {
            Ok(vec![
                ("sparse_indices", 1),
                ("sparse_values", 1),
                ("sparse_shape", 1),
            ])
        },
        build: take_many,
    },
];

/// The most SparseTensors one map holds at once.
pub const MAX_STORED: usize = 1 << 20;

/// One stored SparseTensor.
struct Stored {
    indices: Indices,
    values: Tensor,
    shape: Vec<i64>,
}

#[derive(Default)]
struct Entries {
    counter: i64,
    stored: HashMap<i64, Stored>,
}

/// A SparseTensorsMap: stored tensors by handle.
struct SparseMap {
    name: String,
    entries: Mutex<Entries>,
}

impl SparseMap {
    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Entries>> {
        self.entries
            .lock()
            .map_err(|_| Error::Internal(format!("SparseTensorsMap {} poisoned", self.name)))
    }

    fn add(&self, entries: &mut Entries, st: Stored) -> Result<i64> {
        if entries.stored.len() >= MAX_STORED {
            return Err(Error::InvalidArgument(format!(
                "SparseTensorsMap {} holds {MAX_STORED} SparseTensors, the most tfdata keeps: \
                 take some out first",
                self.name
            )));
        }
        let handle = entries.counter;
        entries.counter += 1;
        entries.stored.insert(handle, st);
        Ok(handle)
    }
}

/// The live maps by (container, name): TensorFlow's resource manager for
/// this resource. A map is dropped when no node holds it any more.
type Registry = Mutex<HashMap<(String, String), Weak<SparseMap>>>;

fn registry() -> &'static Registry {
    static MAPS: OnceLock<Registry> = OnceLock::new();
    MAPS.get_or_init(Mutex::default)
}

fn lookup_or_create(container: &str, name: &str) -> Result<Arc<SparseMap>> {
    let mut maps = registry()
        .lock()
        .map_err(|_| Error::Internal("the SparseTensorsMap registry is poisoned".into()))?;
    maps.retain(|_, m| m.strong_count() > 0);
    let key = (container.to_string(), name.to_string());
    if let Some(map) = maps.get(&key).and_then(Weak::upgrade) {
        return Ok(map);
    }
    let map = Arc::new(SparseMap {
        name: name.to_string(),
        entries: Mutex::default(),
    });
    maps.insert(key, Arc::downgrade(&map));
    Ok(map)
}

/// A node's map, found at its first run and kept.
struct NodeMap {
    container: String,
    name: String,
    map: OnceLock<Arc<SparseMap>>,
}

impl NodeMap {
    fn of(attrs: &NodeAttrs, writer: bool) -> Result<NodeMap> {
        let container = attrs.string_or("container", "")?.to_string();
        let shared = attrs.string_or("shared_name", "")?;
        let name = if !shared.is_empty() {
            shared.to_string()
        } else if writer {
            attrs.node.to_string()
        } else {
            // TensorFlow's private name for a reader's map of its own.
            static NEXT: AtomicU64 = AtomicU64::new(0);
            format!("_{}_{}", NEXT.fetch_add(1, Ordering::Relaxed), attrs.node)
        };
        Ok(NodeMap {
            container,
            name,
            map: OnceLock::new(),
        })
    }

    fn get(&self) -> Result<Arc<SparseMap>> {
        if let Some(m) = self.map.get() {
            return Ok(m.clone());
        }
        let m = lookup_or_create(&self.container, &self.name)?;
        Ok(self.map.get_or_init(|| m).clone())
    }
}

fn add_one(attrs: &NodeAttrs) -> Result<Compute> {
    let node = NodeMap::of(attrs, true)?;
    Ok(Box::new(move |inputs| {
        let [indices, values, shape] = take::<3>("AddSparseToTensorsMap", inputs)?;
        let ind = checked_triple(&indices, &values, &shape)?;
        let dims = int64s(&shape, "Input shape")?;
        check_shape(&dims)?;
        if ind.rank != dims.len() || values.num_elements() as usize != ind.n {
            return Err(invalid(format!(
                "indices {} and values {} do not match shape {}",
                shape_str(indices.shape()),
                shape_str(values.shape()),
                shape_str(&dims)
            )));
        }
        let map = node.get()?;
        let mut entries = map.lock()?;
        let stored = Stored {
            indices: ind,
            values,
            shape: dims,
        };
        Ok(vec![Tensor::scalar(map.add(&mut entries, stored)?)])
    }))
}

fn check_shape(dims: &[i64]) -> Result<()> {
    match dims.iter().find(|&&d| d < 0) {
        Some(d) => Err(invalid(format!(
            "Input shape {} has a negative dimension {d}",
            shape_str(dims)
        ))),
        None => Ok(()),
    }
}

fn add_many(attrs: &NodeAttrs) -> Result<Compute> {
    let node = NodeMap::of(attrs, true)?;
    Ok(Box::new(move |inputs| {
        let [indices, values, shape] = take::<3>("AddManySparseToTensorsMap", inputs)?;
        let ind = checked_triple(&indices, &values, &shape)?;
        if values.num_elements() as usize != ind.n {
            return Err(invalid(format!(
                "Number of values must match first dimension of indices. Got {} values, \
                 indices shape: {}",
                values.num_elements(),
                shape_str(indices.shape())
            )));
        }
        if shape.num_elements() as usize != ind.rank {
            return Err(invalid(format!(
                "Number of dimensions must match second dimension of indices. Got {} \
                 dimensions, indices shape: {}",
                shape.num_elements(),
                shape_str(indices.shape())
            )));
        }
        let dims = int64s(&shape, "Input shape")?;
        if dims.len() < 2 {
            return Err(invalid(format!(
                "Rank of input SparseTensor should be > 1, but saw rank: {}",
                dims.len()
            )));
        }
        check_shape(&dims)?;
        indices_valid(&ind, &dims)?;
        let rows = dims[0];
        check_size("AddManySparseToTensorsMap", DType::Int64, rows as u64)?;
        if rows as usize > MAX_STORED {
            return Err(Error::InvalidArgument(format!(
                "AddManySparseToTensorsMap: {rows} rows exceed the {MAX_STORED} SparseTensors a \
                 map holds"
            )));
        }
        // The rows, grouped by their first index (the indices are sorted):
        // those with entries get handles first, in order, then the empty
        // ones, as TensorFlow numbers them.
        let mut groups: Vec<(i64, usize, usize)> = Vec::new();
        let mut at = 0;
        while at < ind.n {
            let b = ind.row(at)[0];
            let start = at;
            while at < ind.n && ind.row(at)[0] == b {
                at += 1;
            }
            groups.push((b, start, at));
        }
        let inner = dims[1..].to_vec();
        let map = node.get()?;
        let mut entries = map.lock()?;
        let mut handles = vec![-1i64; rows as usize];
        for &(b, start, end) in &groups {
            let flat: Vec<i64> = (start..end)
                .flat_map(|i| ind.row(i)[1..].to_vec())
                .collect();
            let picks: Vec<Option<usize>> = (start..end).map(Some).collect();
            let stored = Stored {
                indices: Indices {
                    flat,
                    n: end - start,
                    rank: ind.rank - 1,
                },
                values: gather(&values, &picks, None)?,
                shape: inner.clone(),
            };
            handles[b as usize] = map.add(&mut entries, stored)?;
        }
        let empty = Out::new("AddManySparseToTensorsMap", values.dtype(), 0)?
            .finish(values.dtype(), vec![0])?;
        for h in handles.iter_mut().filter(|h| **h < 0) {
            let stored = Stored {
                indices: Indices {
                    flat: Vec::new(),
                    n: 0,
                    rank: ind.rank - 1,
                },
                values: empty.clone(),
                shape: inner.clone(),
            };
            *h = map.add(&mut entries, stored)?;
        }
        Ok(vec![Tensor::vector(&handles)])
    }))
}

fn take_many(attrs: &NodeAttrs) -> Result<Compute> {
    let node = NodeMap::of(attrs, false)?;
    let dtype = attrs.dtype("dtype")?;
    Ok(Box::new(move |inputs| {
        const OP: &str = "TakeManySparseFromTensorsMap";
        let [handles] = take::<1>(OP, inputs)?;
        if handles.shape().len() != 1 {
            return Err(invalid(format!(
                "sparse_handles should be a vector but received shape {}",
                shape_str(handles.shape())
            )));
        }
        if handles.dtype() != DType::Int64 {
            return Err(invalid(format!(
                "{OP}: sparse_handles must be int64, got {}",
                handles.dtype()
            )));
        }
        let handles = handles.to_vec::<i64>()?;
        if handles.is_empty() {
            return Err(invalid(
                "Must have at least 1 serialized SparseTensor, but input matrix has 0 rows",
            ));
        }
        // Taken out one by one, as TensorFlow does: those before a missing
        // handle are gone from the map even when the op fails.
        let map = node.get()?;
        let mut taken = Vec::with_capacity(handles.len());
        {
            let mut entries = map.lock()?;
            for &h in &handles {
                match entries.stored.remove(&h) {
                    Some(st) => taken.push(st),
                    None => {
                        return Err(invalid(format!(
                            "Unable to find SparseTensor: {h} in map: {}",
                            map.name
                        )));
                    }
                }
            }
        }
        let rank = taken[0].shape.len();
        let mut shape = vec![0i64; rank + 1];
        shape[0] = taken.len() as i64;
        let mut total = 0u64;
        for (i, st) in taken.iter().enumerate() {
            if st.values.dtype() != dtype {
                return Err(invalid(format!(
                    "Requested SparseTensor of type {} but SparseTensor[{i}].values.dtype() == {}",
                    tf_name(dtype),
                    tf_name(st.values.dtype())
                )));
            }
            if st.shape.len() != rank {
                return Err(invalid(format!(
                    "Inconsistent rank across SparseTensors: rank prior to SparseTensor[{i}] \
                     was: {} but rank of SparseTensor[{i}] is: {}",
                    rank + 1,
                    st.shape.len() + 1
                )));
            }
            total += st.indices.n as u64;
            for (d, &n) in st.shape.iter().enumerate() {
                shape[d + 1] = shape[d + 1].max(n);
            }
        }
        check_size(OP, DType::Int64, total.saturating_mul(rank as u64 + 1))?;
        let mut flat = Vec::with_capacity(total as usize * (rank + 1));
        let mut values = Out::new(OP, dtype, total)?;
        for (i, st) in taken.iter().enumerate() {
            for r in 0..st.indices.n {
                flat.push(i as i64);
                flat.extend_from_slice(st.indices.row(r));
            }
            values.push(&Src::of(&st.values), 0, st.indices.n)?;
        }
        Ok(vec![
            Indices::tensor(flat, total as usize, rank + 1)?,
            values.finish(dtype, vec![total as i64])?,
            Tensor::vector(&shape),
        ])
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::lookup;
    use crate::kernels::testing::{node, string, ty};

    fn kernel(op: &str, shared_name: &str) -> Compute {
        let mut attrs = vec![("shared_name", string(shared_name))];
        if op == "TakeManySparseFromTensorsMap" {
            attrs.push(("dtype", ty(DType::Int32)));
        }
        let node = node(op, &attrs);
        (lookup(op).unwrap().build)(&NodeAttrs::of(&node)).unwrap()
    }

    fn one_value(v: i32) -> Vec<Tensor> {
        vec![
            Tensor::from_slice(&[0i64], vec![1, 1]).unwrap(),
            Tensor::vector(&[v]),
            Tensor::vector(&[2i64]),
        ]
    }

    #[test]
    fn nodes_share_a_named_map_while_one_holds_it() {
        let add = kernel("AddSparseToTensorsMap", "tensors_map_test");
        let take = kernel("TakeManySparseFromTensorsMap", "tensors_map_test");
        let h0 = add(one_value(5)).unwrap().remove(0);
        let h1 = add(one_value(6)).unwrap().remove(0);
        assert_eq!(h0.to_scalar::<i64>().unwrap(), 0);
        assert_eq!(h1.to_scalar::<i64>().unwrap(), 1);
        let out = take(vec![Tensor::vector(&[1i64, 0])]).unwrap();
        assert_eq!(out[1].to_vec::<i32>().unwrap(), vec![6, 5]);
        // Taken tensors are gone.
        let e = take(vec![Tensor::vector(&[0i64])]).unwrap_err();
        assert!(
            e.to_string().contains("Unable to find SparseTensor: 0"),
            "{e}"
        );
        // A reader with no shared_name has a map of its own.
        let private = kernel("TakeManySparseFromTensorsMap", "");
        add(one_value(7)).unwrap();
        assert!(private(vec![Tensor::vector(&[2i64])]).is_err());
        // Once no node holds the map it is dropped: a new one counts from 0.
        drop((add, take));
        let again = kernel("AddSparseToTensorsMap", "tensors_map_test");
        let h = again(one_value(8)).unwrap().remove(0);
        assert_eq!(h.to_scalar::<i64>().unwrap(), 0);
    }
}
