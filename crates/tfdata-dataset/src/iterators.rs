//! Local execution: one iterator per op, pulling from its input's iterator.

use tfdata_core::tensor::TensorData;
use tfdata_core::{Element, Error, Result, Tensor};

use crate::dataset::{Dataset, Op};
use crate::functions::{self, MapFn};

/// A running pipeline. `next` returns `Ok(None)` at the end; an `Err` ends
/// the iteration (TensorFlow iterators do not resume after an error).
pub trait ElementIterator: Send {
    fn next_element(&mut self) -> Result<Option<Element>>;
}

impl Iterator for dyn ElementIterator {
    type Item = Result<Element>;
    fn next(&mut self) -> Option<Self::Item> {
        self.next_element().transpose()
    }
}

pub(crate) fn build(ds: &Dataset) -> Result<Box<dyn ElementIterator>> {
    Ok(match &*ds.op {
        Op::Range { start, stop, step } => Box::new(RangeIter {
            next: *start,
            stop: *stop,
            step: *step,
            done: false,
        }),
        Op::Map { input, function } => Box::new(MapIter {
            input: build(input)?,
            name: function.clone(),
            f: functions::lookup(function)?,
        }),
        Op::Batch {
            input,
            batch_size,
            drop_remainder,
        } => Box::new(BatchIter {
            input: build(input)?,
            batch_size: *batch_size as usize,
            drop_remainder: *drop_remainder,
        }),
        Op::Take { input, count } => Box::new(TakeIter {
            input: build(input)?,
            remaining: if *count < 0 {
                None
            } else {
                Some(*count as u64)
            },
        }),
    })
}

struct RangeIter {
    next: i64,
    stop: i64,
    step: i64,
    done: bool,
}

impl ElementIterator for RangeIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        let in_range = if self.step > 0 {
            self.next < self.stop
        } else {
            self.next > self.stop
        };
        if self.done || !in_range {
            return Ok(None);
        }
        let value = self.next;
        match self.next.checked_add(self.step) {
            Some(n) => self.next = n,
            None => self.done = true,
        }
        Ok(Some(Element::single(Tensor::scalar(value))))
    }
}

struct MapIter {
    input: Box<dyn ElementIterator>,
    name: String,
    f: MapFn,
}

impl ElementIterator for MapIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        match self.input.next_element()? {
            Some(e) => functions::call(&self.name, &self.f, e).map(Some),
            None => Ok(None),
        }
    }
}

struct TakeIter {
    input: Box<dyn ElementIterator>,
    remaining: Option<u64>,
}

impl ElementIterator for TakeIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        match &mut self.remaining {
            Some(0) => Ok(None),
            Some(n) => {
                *n -= 1;
                self.input.next_element()
            }
            None => self.input.next_element(),
        }
    }
}

struct BatchIter {
    input: Box<dyn ElementIterator>,
    batch_size: usize,
    drop_remainder: bool,
}

impl ElementIterator for BatchIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        let mut rows = Vec::with_capacity(self.batch_size.min(1 << 16));
        while rows.len() < self.batch_size {
            match self.input.next_element()? {
                Some(e) => rows.push(e),
                None => break,
            }
        }
        if rows.is_empty() || (self.drop_remainder && rows.len() < self.batch_size) {
            return Ok(None);
        }
        stack(&rows).map(Some)
    }
}

/// Stacks elements component-wise; every element must have the same
/// structure, and each component the same dtype and shape.
pub(crate) fn stack(rows: &[Element]) -> Result<Element> {
    let first = &rows[0];
    let mut components = Vec::with_capacity(first.components.len());
    for (c, proto) in first.components.iter().enumerate() {
        let mut shape = Vec::with_capacity(proto.shape().len() + 1);
        shape.push(rows.len() as i64);
        shape.extend_from_slice(proto.shape());
        let mismatch = |i: usize, what: String| {
            Error::InvalidArgument(format!(
                "batch: cannot batch tensors with different {what}: component {c} of element 0 \
                 is {} {:?} but element {i} has {}",
                proto.dtype(),
                proto.shape(),
                match rows[i].components.get(c) {
                    Some(t) => format!("{} {:?}", t.dtype(), t.shape()),
                    None => "no such component".into(),
                }
            ))
        };
        let mut buffer = Vec::new();
        let mut strings = Vec::new();
        for (i, row) in rows.iter().enumerate() {
            if row.components.len() != first.components.len() {
                return Err(mismatch(i, "structures".into()));
            }
            let t = &row.components[c];
            if t.dtype() != proto.dtype() {
                return Err(mismatch(i, "dtypes".into()));
            }
            if t.shape() != proto.shape() {
                return Err(mismatch(i, "shapes".into()));
            }
            match t.data() {
                TensorData::Buffer(b) => buffer.extend_from_slice(b),
                TensorData::Strings(s) => strings.extend(s.iter().cloned()),
            }
        }
        let data = match proto.data() {
            TensorData::Buffer(_) => TensorData::Buffer(buffer.into()),
            TensorData::Strings(_) => TensorData::Strings(strings),
        };
        components.push(Tensor::new(proto.dtype(), shape, data)?);
    }
    Ok(Element::new(components))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::register_function;

    fn collect(ds: &Dataset) -> Result<Vec<Element>> {
        let mut it = ds.iter()?;
        let mut out = Vec::new();
        while let Some(e) = it.next_element()? {
            out.push(e);
        }
        Ok(out)
    }

    fn ints(ds: &Dataset) -> Vec<Vec<i64>> {
        collect(ds)
            .unwrap()
            .iter()
            .map(|e| e.components[0].to_vec::<i64>().unwrap())
            .collect()
    }

    #[test]
    fn range_take_batch() {
        assert_eq!(ints(&Dataset::range(3)), vec![vec![0], vec![1], vec![2]]);
        assert_eq!(
            ints(&Dataset::range_with_step(5, 0, -2)),
            vec![vec![5], vec![3], vec![1]]
        );
        assert_eq!(
            ints(&Dataset::range(7).take(5).batch(2, false)),
            vec![vec![0, 1], vec![2, 3], vec![4]]
        );
        assert_eq!(
            ints(&Dataset::range(5).batch(2, true)),
            vec![vec![0, 1], vec![2, 3]]
        );
        let batch = &collect(&Dataset::range(4).batch(4, false)).unwrap()[0];
        assert_eq!(batch.components[0].shape(), &[4]);
    }

    #[test]
    fn map_with_registered_function() {
        register_function("test_square", |e: Element| {
            let v = e.components[0].to_scalar::<i64>()?;
            Ok(Element::single(Tensor::scalar(v * v)))
        });
        assert_eq!(
            ints(&Dataset::range(4).map("test_square")),
            vec![vec![0], vec![1], vec![4], vec![9]]
        );
    }

    #[test]
    fn unknown_and_failing_functions_are_clear_errors() {
        let err = Dataset::range(4).map("no_such_fn").iter().err().unwrap();
        assert!(err.to_string().contains("`no_such_fn`"), "{err}");

        register_function("test_panics_on_2", |e: Element| {
            if e.components[0].to_scalar::<i64>()? == 2 {
                panic!("two is not allowed");
            }
            Ok(e)
        });
        let err = collect(&Dataset::range(4).map("test_panics_on_2")).unwrap_err();
        assert!(matches!(err, Error::UserFunction { .. }));
        assert!(err.to_string().contains("two is not allowed"), "{err}");
    }

    #[test]
    fn batching_mismatched_shapes_is_a_clear_error() {
        register_function("test_ragged", |e: Element| {
            let v = e.components[0].to_scalar::<i64>()?;
            Ok(Element::single(Tensor::vector(&vec![v; v as usize])))
        });
        let err = collect(&Dataset::range(3).map("test_ragged").batch(3, false)).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("different shapes"), "{msg}");
        assert!(msg.contains("element 1"), "{msg}");
    }
}
