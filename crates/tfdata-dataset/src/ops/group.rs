//! `group_by_window`: elements grouped by a key, each group handed to a
//! reduce function as a window dataset once it has `window_size` elements
//! (what `group_by_window` and `bucket_by_sequence_length` build); and
//! `group_by_reducer`: a state per key folded over its elements, finalized
//! per key once the input ends.
//!
//! Three functions: `key_func` (element to an int64 scalar key) and
//! `window_size_func` (key to an int64 scalar size, asked once per key) are
//! map functions; `reduce_func` is a dataset function called on the key
//! followed by the group encoded as a window (see [`super::window`]), and
//! its dataset's elements are the output.

use std::collections::BTreeMap;

use tfdata_core::{DType, Element, Error, Result, Tensor};

use super::resolve::{allow_unregistered, resolve_dataset_fn, resolve_map};
use super::window::{encode_rows, encoded_spec};
use crate::attrs::{Attrs, FunctionRef};
use crate::dataset::{Dataset, DatasetOp, IterContext};
use crate::functions::{self, DatasetFn, MapFn};
use crate::iterators::ElementIterator;
use crate::spec::{Shape, Structure, TensorSpec};
use crate::{INFINITE_CARDINALITY, UNKNOWN_CARDINALITY};

impl Dataset {
    /// `group_by_reducer(key_func, Reducer(init_func, reduce_func,
    /// finalize_func))`: `init_func(key)` is a key's first state,
    /// `reduce_func(state..., element...)` the next, and once the input has
    /// ended `finalize_func(state...)` is one output element per key, in
    /// ascending key order.
    pub fn group_by_reducer(
        self,
        key_func: FunctionRef,
        init_func: FunctionRef,
        reduce_func: FunctionRef,
        finalize_func: FunctionRef,
    ) -> Dataset {
        Dataset::from_op(GroupByReducer {
            input: self,
            key_func,
            init_func,
            reduce_func,
            finalize_func,
        })
    }

    /// `group_by_window(key_func, reduce_func, window_size_func)`.
    pub fn group_by_window(
        self,
        key_func: FunctionRef,
        reduce_func: FunctionRef,
        window_size_func: FunctionRef,
    ) -> Dataset {
        Dataset::from_op(GroupByWindow {
            input: self,
            key_func,
            reduce_func,
            window_size_func,
        })
    }
}

#[derive(Debug)]
pub struct GroupByWindow {
    pub input: Dataset,
    pub key_func: FunctionRef,
    pub reduce_func: FunctionRef,
    pub window_size_func: FunctionRef,
}

fn key_spec() -> Structure {
    Structure::Tensor(TensorSpec::new(DType::Int64, Shape::scalar()))
}

impl GroupByWindow {
    /// What `reduce_func` is called with: the key, then the encoded group.
    fn reduce_structure(&self) -> Result<Option<Structure>> {
        Ok(self
            .input
            .element_spec()?
            .map(|s| Structure::Tuple(vec![key_spec(), encoded_spec(&s)])))
    }
}

impl DatasetOp for GroupByWindow {
    fn name(&self) -> &'static str {
        "group_by_window"
    }

    fn inputs(&self) -> Vec<Dataset> {
        vec![self.input.clone()]
    }

    fn attrs(&self) -> Attrs {
        Attrs::new()
            .with("key_func", self.key_func.clone())
            .with("reduce_func", self.reduce_func.clone())
            .with("window_size_func", self.window_size_func.clone())
    }

    fn element_spec(&self) -> Result<Option<Structure>> {
        let input = self.input.element_spec()?;
        allow_unregistered(resolve_map(&self.key_func, input.as_ref()))?;
        allow_unregistered(resolve_map(&self.window_size_func, Some(&key_spec())))?;
        let reduce = self.reduce_structure()?;
        Ok(
            allow_unregistered(resolve_dataset_fn(&self.reduce_func, reduce.as_ref()))?
                .and_then(|r| r.output),
        )
    }

    fn cardinality(&self) -> i64 {
        // As TensorFlow 2.21: infinite stays infinite; anything else is
        // unknown (even an empty input).
        match self.input.cardinality() {
            INFINITE_CARDINALITY => INFINITE_CARDINALITY,
            _ => UNKNOWN_CARDINALITY,
        }
    }

    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        let input = self.input.element_spec()?;
        let reduce = self.reduce_structure()?;
        Ok(Box::new(GroupByWindowIter {
            input: Some(self.input.op.make_iterator(ctx)?),
            key_func: resolve_map(&self.key_func, input.as_ref())?.f,
            window_size_func: resolve_map(&self.window_size_func, Some(&key_spec()))?.f,
            reduce_func: resolve_dataset_fn(&self.reduce_func, reduce.as_ref())?.f,
            names: [
                self.key_func.name.clone(),
                self.window_size_func.name.clone(),
                self.reduce_func.name.clone(),
            ],
            groups: BTreeMap::new(),
            window_sizes: BTreeMap::new(),
            current: None,
            ctx: IterContext {
                deterministic: ctx.deterministic,
                ..IterContext::new()
            },
        }))
    }
}

struct GroupByWindowIter {
    /// `None` once the input has ended.
    input: Option<Box<dyn ElementIterator>>,
    key_func: MapFn,
    window_size_func: MapFn,
    reduce_func: DatasetFn,
    /// The functions' names: key, window size, reduce.
    names: [String; 3],
    /// Pending elements by key, in key order (the order TensorFlow flushes
    /// partial groups in at the end). Each group holds fewer than its
    /// window size; the number of keys is unbounded, as in TensorFlow (the
    /// key function decides it).
    groups: BTreeMap<i64, Vec<Element>>,
    /// Each key's window size, asked once per key for the iterator's life.
    window_sizes: BTreeMap<i64, usize>,
    /// The dataset `reduce_func` returned for the group being emitted.
    current: Option<Box<dyn ElementIterator>>,
    ctx: IterContext,
}

/// `t` as the one int64 scalar a function must return, else `message`.
fn int64_scalar(out: &Element, message: &str) -> Result<i64> {
    match out.components.as_slice() {
        [t] if t.dtype() == DType::Int64 && t.num_elements() == 1 => Ok(t.to_vec::<i64>()?[0]),
        _ => Err(Error::InvalidArgument(message.into())),
    }
}

impl GroupByWindowIter {
    fn window_size(&mut self, key: i64) -> Result<usize> {
        if let Some(&size) = self.window_sizes.get(&key) {
            return Ok(size);
        }
        let f = &self.window_size_func;
        let out = functions::guarded(&self.names[1], || {
            f(Element::new(vec![Tensor::scalar(key)]))
        })?;
        let size = int64_scalar(&out, "`window_size_func` must return a scalar int64.")?;
        if size <= 0 {
            return Err(Error::InvalidArgument(format!(
                "Window size must be greater than zero, but got {size}."
            )));
        }
        // A group is flushed at this size, so it never holds more (sizes
        // past the address space cannot be reached either).
        let size = usize::try_from(size).unwrap_or(usize::MAX);
        self.window_sizes.insert(key, size);
        Ok(size)
    }

    /// Hands `key`'s group to `reduce_func` and starts on its dataset.
    fn flush(&mut self, key: i64) -> Result<()> {
        let rows = self.groups.remove(&key).unwrap_or_default();
        let mut components = vec![Tensor::scalar(key)];
        components.extend(encode_rows("group_by_window", &rows)?);
        let lineage = tfdata_core::Lineage::of_rows(rows.iter().map(|r| &r.lineage));
        let f = &self.reduce_func;
        let ds = functions::guarded(&self.names[2], || f(Element::new(components)))?;
        ds.validate()?;
        let inner = ds.op.make_iterator(&self.ctx)?;
        // Every output element depends on the whole group's splits.
        self.current = Some(super::map::tagged(inner, lineage));
        Ok(())
    }
}

impl ElementIterator for GroupByWindowIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        loop {
            if let Some(current) = &mut self.current {
                if let Some(e) = current.next_element()? {
                    return Ok(Some(e));
                }
                self.current = None;
            }
            // Read until a group fills, or the input ends.
            while let Some(input) = &mut self.input {
                let Some(e) = input.next_element()? else {
                    self.input = None;
                    break;
                };
                let f = &self.key_func;
                let out =
                    functions::guarded(&self.names[0], || f(Element::new(e.components.clone())))?;
                let key = int64_scalar(&out, "`key_func` must return a scalar int64.")?;
                let size = self.window_size(key)?;
                let group = self.groups.entry(key).or_default();
                group.push(e);
                if group.len() >= size {
                    self.flush(key)?;
                    break;
                }
            }
            if self.current.is_none() {
                if self.input.is_some() {
                    continue;
                }
                // The input has ended: partial groups, in key order.
                match self.groups.keys().next().copied() {
                    Some(key) => self.flush(key)?,
                    None => return Ok(None),
                }
            }
        }
    }
}

#[derive(Debug)]
pub struct GroupByReducer {
    pub input: Dataset,
    pub key_func: FunctionRef,
    pub init_func: FunctionRef,
    pub reduce_func: FunctionRef,
    pub finalize_func: FunctionRef,
}

impl DatasetOp for GroupByReducer {
    fn name(&self) -> &'static str {
        "group_by_reducer"
    }

    fn inputs(&self) -> Vec<Dataset> {
        vec![self.input.clone()]
    }

    fn attrs(&self) -> Attrs {
        Attrs::new()
            .with("key_func", self.key_func.clone())
            .with("init_func", self.init_func.clone())
            .with("reduce_func", self.reduce_func.clone())
            .with("finalize_func", self.finalize_func.clone())
    }

    fn element_spec(&self) -> Result<Option<Structure>> {
        let input = self.input.element_spec()?;
        allow_unregistered(resolve_map(&self.key_func, input.as_ref()))?;
        allow_unregistered(resolve_map(&self.init_func, Some(&key_spec())))?;
        // The state's structure is the functions' business: unknown here.
        allow_unregistered(resolve_map(&self.reduce_func, None))?;
        Ok(allow_unregistered(resolve_map(&self.finalize_func, None))?.and_then(|r| r.output))
    }

    fn cardinality(&self) -> i64 {
        UNKNOWN_CARDINALITY
    }

    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        let input = self.input.element_spec()?;
        Ok(Box::new(GroupByReducerIter {
            input: Some(self.input.op.make_iterator(ctx)?),
            funcs: [
                resolve_map(&self.key_func, input.as_ref())?.f,
                resolve_map(&self.init_func, Some(&key_spec()))?.f,
                resolve_map(&self.reduce_func, None)?.f,
                resolve_map(&self.finalize_func, None)?.f,
            ],
            names: [
                self.key_func.name.clone(),
                self.init_func.name.clone(),
                self.reduce_func.name.clone(),
                self.finalize_func.name.clone(),
            ],
            states: BTreeMap::new(),
        }))
    }
}

struct GroupByReducerIter {
    /// `None` once the input has ended.
    input: Option<Box<dyn ElementIterator>>,
    /// key, init, reduce, finalize.
    funcs: [MapFn; 4],
    names: [String; 4],
    /// One state per key seen, as TensorFlow keeps them (the key function
    /// decides how many); emptied in key order once the input ends.
    states: BTreeMap<i64, Vec<Tensor>>,
}

impl GroupByReducerIter {
    fn call(&self, which: usize, components: Vec<Tensor>) -> Result<Vec<Tensor>> {
        let f = &self.funcs[which];
        Ok(functions::guarded(&self.names[which], || f(Element::new(components)))?.components)
    }
}

impl ElementIterator for GroupByReducerIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        while let Some(input) = &mut self.input {
            let Some(e) = input.next_element()? else {
                self.input = None;
                break;
            };
            let out = Element::new(self.call(0, e.components.clone())?);
            let key = int64_scalar(&out, "`key_func` must return a scalar int64.")?;
            let state = match self.states.remove(&key) {
                Some(state) => state,
                None => self.call(1, vec![Tensor::scalar(key)])?,
            };
            let mut args = state;
            args.extend(e.components);
            let next = self.call(2, args)?;
            self.states.insert(key, next);
        }
        match self.states.pop_first() {
            Some((_, state)) => Ok(Some(Element::new(self.call(3, state)?))),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_fill_then_flush_in_key_order() {
        crate::register_function("gbw_test_key", |e: Element| {
            let x = e.components[0].to_scalar::<i64>()?;
            Ok(Element::new(vec![Tensor::scalar(x % 3)]))
        });
        crate::register_function("gbw_test_size", |_e: Element| {
            Ok(Element::new(vec![Tensor::scalar(2i64)]))
        });
        crate::register_dataset_function("gbw_test_reduce", None, |e: Element| {
            let group = Dataset::window_from_pairs(e.components[1..].to_vec())?;
            Ok(group.batch(10, false))
        });
        let ds = Dataset::range(7).group_by_window(
            FunctionRef::named("gbw_test_key"),
            FunctionRef::named("gbw_test_reduce"),
            FunctionRef::named("gbw_test_size"),
        );
        let out: Vec<Vec<i64>> = ds
            .iter()
            .unwrap()
            .map(|e| e.unwrap().components[0].to_vec::<i64>().unwrap())
            .collect();
        assert_eq!(out, vec![vec![0, 3], vec![1, 4], vec![2, 5], vec![6]]);
        assert_eq!(ds.cardinality(), UNKNOWN_CARDINALITY);
    }
}
