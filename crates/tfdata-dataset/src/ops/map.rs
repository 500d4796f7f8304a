//! `map`, `filter`, `flat_map` and `interleave`.

use std::any::Any;
use std::collections::VecDeque;
use std::sync::Arc;

use tfdata_core::{Code, Element, Error, Result};

use super::parallel::{ParallelMap, Prefetcher, threads_for};
use super::resolve::{allow_unregistered, resolve_dataset_fn, resolve_map, resolve_predicate};
use crate::attrs::{Attrs, FunctionRef};
use crate::dataset::{Dataset, DatasetOp, IterContext};
use crate::functions::{self, DatasetFn, MapFn, PredicateFn};
use crate::iterators::ElementIterator;
use crate::spec::Structure;

/// Transformations that call functions.
impl Dataset {
    /// `map(f)` with a function registered (or built in) under `function`.
    pub fn map(self, function: &str) -> Dataset {
        self.map_with(FunctionRef::named(function), None, true)
    }

    /// `map(f, num_parallel_calls, deterministic)`; `f` may be a built-in
    /// with arguments. `num_parallel_calls = None` runs sequentially; `Some(-1)`
    /// is AUTOTUNE (all cores).
    pub fn map_with(
        self,
        function: FunctionRef,
        num_parallel_calls: Option<i64>,
        deterministic: bool,
    ) -> Dataset {
        Dataset::from_op(Map {
            input: self,
            function,
            num_parallel_calls,
            deterministic,
            preserve_cardinality: true,
        })
    }

    /// A map as TensorFlow 1's `map` made it (`preserve_cardinality`
    /// false): its cardinality is unknown, whatever its input's. Other
    /// datasets are returned as they are.
    pub fn without_cardinality(self) -> Dataset {
        let op: &dyn Any = &*self.op;
        match op.downcast_ref::<Map>() {
            Some(m) => Dataset::from_op(Map {
                input: m.input.clone(),
                function: m.function.clone(),
                num_parallel_calls: m.num_parallel_calls,
                deterministic: m.deterministic,
                preserve_cardinality: false,
            }),
            None => self,
        }
    }

    /// `filter(predicate)` with a registered predicate.
    pub fn filter(self, predicate: &str) -> Dataset {
        self.filter_with(FunctionRef::named(predicate))
    }

    pub fn filter_with(self, predicate: FunctionRef) -> Dataset {
        Dataset::from_op(Filter {
            input: self,
            predicate,
        })
    }

    /// `flat_map(f)`: `f` maps each element to a dataset, whose elements are
    /// concatenated.
    pub fn flat_map(self, function: FunctionRef) -> Dataset {
        Dataset::from_op(FlatMap {
            input: self,
            function,
        })
    }

    /// `interleave(f, cycle_length, block_length, num_parallel_calls)`.
    pub fn interleave(
        self,
        function: FunctionRef,
        cycle_length: i64,
        block_length: i64,
        num_parallel_calls: Option<i64>,
    ) -> Dataset {
        Dataset::from_op(Interleave {
            input: self,
            function,
            cycle_length,
            block_length,
            num_parallel_calls,
        })
    }
}

#[derive(Debug)]
pub struct Map {
    pub input: Dataset,
    pub function: FunctionRef,
    /// `None`: sequential; `Some(-1)`: AUTOTUNE; `Some(n)`: n threads.
    pub num_parallel_calls: Option<i64>,
    pub deterministic: bool,
    /// False for TensorFlow 1's maps: the cardinality is then unknown, and
    /// an `OutOfRange` error of the function ends the dataset (TensorFlow's
    /// way for such a function to stop early) instead of failing it.
    pub preserve_cardinality: bool,
}

/// The error a map step returns when its function raised `OutOfRange` in a
/// map that does not preserve cardinality: [`EndOnOutOfRange`] turns it into
/// the end of the dataset. A user-function error (which
/// [`functions::guarded`] passes as it is) with a message no function gives,
/// so an input's own errors are not mistaken for it.
const FUNCTION_ENDED: &str = "tfdata: the map function raised OutOfRange";

pub(super) fn is_function_ended(e: &Error) -> bool {
    matches!(e, Error::UserFunction { message, .. } if message == FUNCTION_ENDED)
}

/// A map function's `OutOfRange` error as TensorFlow's map reports it: the
/// end of a map that does not preserve cardinality, else an invalid argument
/// with TensorFlow's words and the function's own message (without the
/// context our executor added).
pub(super) fn out_of_range_of(function: &str, err: Error, ends: bool) -> Error {
    if ends {
        return Error::user_function(function, FUNCTION_ENDED, Code::InvalidArgument);
    }
    let mut root = &err;
    while let Error::Context { source, .. } = root {
        root = source;
    }
    let message = match root {
        Error::Remote { message, .. } => message.clone(),
        other => other.to_string(),
    };
    Error::user_function(
        function,
        format!("Function invocation produced OutOfRangeError: {message}"),
        Code::InvalidArgument,
    )
}

/// A TensorFlow 1 map's iterator: the function's `OutOfRange` ends it (and it
/// stays ended), as TensorFlow's map reports end of sequence then.
struct EndOnOutOfRange {
    inner: Box<dyn ElementIterator>,
    ended: bool,
}

impl ElementIterator for EndOnOutOfRange {
    fn next_element(&mut self) -> Result<Option<Element>> {
        if self.ended {
            return Ok(None);
        }
        match self.inner.next_element() {
            Err(e) if is_function_ended(&e) => {
                self.ended = true;
                Ok(None)
            }
            other => other,
        }
    }
}

impl DatasetOp for Map {
    fn name(&self) -> &'static str {
        "map"
    }

    fn inputs(&self) -> Vec<Dataset> {
        vec![self.input.clone()]
    }

    fn attrs(&self) -> Attrs {
        let mut a = Attrs::new().with("function", self.function.clone());
        if let Some(n) = self.num_parallel_calls {
            a = a
                .with("num_parallel_calls", n)
                .with("deterministic", self.deterministic);
        }
        if !self.preserve_cardinality {
            a = a.with("preserve_cardinality", false);
        }
        a
    }

    fn element_spec(&self) -> Result<Option<Structure>> {
        if self.num_parallel_calls.is_some_and(|n| n == 0 || n < -1) {
            return Err(Error::InvalidArgument(
                "map: num_parallel_calls must be positive or -1 (AUTOTUNE)".into(),
            ));
        }
        let input = self.input.element_spec()?;
        Ok(allow_unregistered(resolve_map(&self.function, input.as_ref()))?.and_then(|r| r.output))
    }

    fn cardinality(&self) -> i64 {
        if self.preserve_cardinality {
            self.input.cardinality()
        } else {
            crate::UNKNOWN_CARDINALITY
        }
    }

    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        // Map fusion: consecutive parallel maps with the same determinism run
        // as one parallel stage, composing their functions, so an element is
        // handed between threads once instead of once per map.
        let mut chain: Vec<&Map> = vec![self];
        if self.num_parallel_calls.is_some() {
            while let Some(inner) = parallel_map(chain[chain.len() - 1].input.op()) {
                if inner.deterministic != self.deterministic
                    || inner.preserve_cardinality != self.preserve_cardinality
                {
                    break;
                }
                chain.push(inner);
            }
        }
        let source = &chain[chain.len() - 1].input;
        // Each function resolved against its input's structure (the first
        // map's input, then each output), with built-ins that have a joint
        // kernel fused (`fusion::fuse`).
        let functions =
            crate::fusion::fuse(chain.iter().rev().map(|m| m.function.clone()).collect());
        let mut steps = Vec::with_capacity(functions.len());
        let mut spec = source.element_spec()?;
        for function in functions {
            let resolved = resolve_map(&function, spec.as_ref())?;
            spec = resolved.output.clone();
            steps.push(FusedStep {
                name: function.name,
                f: resolved.f,
            });
        }
        let input = source.op.make_iterator(ctx)?;
        let ends_on_out_of_range = !self.preserve_cardinality;
        let work: Arc<dyn Fn(Element) -> Result<Element> + Send + Sync> = Arc::new(move |mut e| {
            // User functions build new elements: the output depends on the
            // input's splits (see `tfdata_core::lineage`).
            let lineage = e.take_lineage();
            for FusedStep { name, f } in &steps {
                e = functions::guarded(name, || match f(e) {
                    Err(err) if err.is_out_of_range() => {
                        Err(out_of_range_of(name, err, ends_on_out_of_range))
                    }
                    out => out,
                })?;
            }
            Ok(e.with_lineage(lineage))
        });
        let threads = chain
            .iter()
            .filter_map(|m| m.num_parallel_calls)
            .map(threads_for)
            .max()
            .unwrap_or(1);
        let mapped: Box<dyn ElementIterator> = match self.num_parallel_calls.map(|_| threads) {
            Some(n) if n > 1 => Box::new(ParallelMap::new(
                input,
                work,
                n,
                self.deterministic || ctx.deterministic,
                "map",
            )?),
            _ => Box::new(MapIter { input, work }),
        };
        Ok(if ends_on_out_of_range {
            Box::new(EndOnOutOfRange {
                inner: mapped,
                ended: false,
            })
        } else {
            mapped
        })
    }
}

/// `op` as a parallel `map`, if it is one: what a parallel `map` on top of
/// it fuses with.
fn parallel_map(op: &dyn DatasetOp) -> Option<&Map> {
    let op: &dyn Any = op;
    op.downcast_ref::<Map>()
        .filter(|map| map.num_parallel_calls.is_some())
}

/// One map function of a fused chain, and its name for errors.
struct FusedStep {
    name: String,
    f: MapFn,
}

struct MapIter {
    input: Box<dyn ElementIterator>,
    work: MapFn,
}

impl ElementIterator for MapIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        match self.input.next_element()? {
            Some(e) => (self.work)(e).map(Some),
            None => Ok(None),
        }
    }
}

#[derive(Debug)]
pub struct Filter {
    pub input: Dataset,
    pub predicate: FunctionRef,
}

impl DatasetOp for Filter {
    fn name(&self) -> &'static str {
        "filter"
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

    /// Unknown whatever the input, as TensorFlow 2.21 reports it (even
    /// for an empty or an infinite input).
    fn cardinality(&self) -> i64 {
        crate::UNKNOWN_CARDINALITY
    }

    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        let spec = self.input.element_spec()?;
        let predicate = resolve_predicate(&self.predicate, spec.as_ref())?;
        Ok(Box::new(FilterIter {
            input: self.input.op.make_iterator(ctx)?,
            name: self.predicate.name.clone(),
            predicate,
        }))
    }
}

struct FilterIter {
    input: Box<dyn ElementIterator>,
    name: String,
    predicate: PredicateFn,
}

impl ElementIterator for FilterIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        while let Some(e) = self.input.next_element()? {
            let keep = functions::guarded(&self.name, || (self.predicate)(&e))?;
            if keep {
                return Ok(Some(e));
            }
        }
        Ok(None)
    }
}

/// The element spec of `flat_map` / `interleave`: what `function` returns
/// for `input`'s elements (unknown when it is not registered here).
fn dataset_fn_output(input: &Dataset, function: &FunctionRef) -> Result<Option<Structure>> {
    let input = input.element_spec()?;
    Ok(allow_unregistered(resolve_dataset_fn(function, input.as_ref()))?.and_then(|r| r.output))
}

/// `flat_map` / `interleave` cardinality: empty stays empty, else unknown.
fn dataset_fn_cardinality(input: &Dataset) -> i64 {
    match input.cardinality() {
        0 => 0,
        _ => crate::UNKNOWN_CARDINALITY,
    }
}

/// Opens the dataset `f` returns for one input element.
/// Every element of the inner dataset depends on the input element's splits.
fn open(
    name: &str,
    f: &DatasetFn,
    mut e: Element,
    ctx: &IterContext,
) -> Result<Box<dyn ElementIterator>> {
    let lineage = e.take_lineage();
    let ds = functions::guarded(name, || f(e))?;
    ds.validate()?;
    let inner = ds.op.make_iterator(ctx)?;
    Ok(tagged(inner, lineage))
}

/// `inner`'s elements tagged with `lineage`, the splits of what they were
/// made from (see [`Tagged`]).
pub(crate) fn tagged(
    inner: Box<dyn ElementIterator>,
    lineage: tfdata_core::Lineage,
) -> Box<dyn ElementIterator> {
    if lineage.is_empty() {
        return inner;
    }
    Box::new(Tagged {
        inner,
        lineage,
        next: 0,
        ahead: None,
    })
}

/// Tags an inner dataset's elements with the input element's lineage, each
/// at its own position under the input's (`Lineage::child`); holds it until
/// the inner dataset is done. Elements readers already received (the split
/// is produced again) are made and dropped: the inner dataset is
/// deterministic, not seekable.
struct Tagged {
    inner: Box<dyn ElementIterator>,
    lineage: tfdata_core::Lineage,
    /// The next inner element's index.
    next: i64,
    /// The inner dataset's next element, read ahead so the input's splits
    /// are let go of before its last element leaves: that element then holds
    /// all that is left of them and tells readers so
    /// (`Lineage::whole_splits`). An error waits its turn.
    ahead: Option<Result<Option<Element>>>,
}

impl ElementIterator for Tagged {
    fn next_element(&mut self) -> Result<Option<Element>> {
        // Bounded by the inner dataset: each round consumes one of its elements.
        loop {
            let e = match self.ahead.take() {
                Some(ahead) => ahead?,
                None => self.inner.next_element()?,
            };
            let Some(e) = e else {
                return Ok(None);
            };
            let index = self.next;
            self.next = self.next.saturating_add(1);
            let lineage = self.lineage.child(index);
            let ahead = self.inner.next_element();
            if matches!(ahead, Ok(None)) {
                self.lineage = tfdata_core::Lineage::default();
            }
            self.ahead = Some(ahead);
            if let Some(lineage) = lineage {
                return Ok(Some(e.with_lineage(lineage)));
            }
        }
    }
}

#[derive(Debug)]
pub struct FlatMap {
    pub input: Dataset,
    pub function: FunctionRef,
}

impl DatasetOp for FlatMap {
    fn name(&self) -> &'static str {
        "flat_map"
    }

    fn inputs(&self) -> Vec<Dataset> {
        vec![self.input.clone()]
    }

    fn attrs(&self) -> Attrs {
        Attrs::new().with("function", self.function.clone())
    }

    fn element_spec(&self) -> Result<Option<Structure>> {
        dataset_fn_output(&self.input, &self.function)
    }

    fn cardinality(&self) -> i64 {
        dataset_fn_cardinality(&self.input)
    }

    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        let spec = self.input.element_spec()?;
        Ok(Box::new(FlatMapIter {
            input: self.input.op.make_iterator(ctx)?,
            name: self.function.name.clone(),
            f: resolve_dataset_fn(&self.function, spec.as_ref())?.f,
            current: None,
            ctx: IterContext {
                deterministic: ctx.deterministic,
                ..IterContext::new()
            },
        }))
    }
}

struct FlatMapIter {
    input: Box<dyn ElementIterator>,
    name: String,
    f: DatasetFn,
    current: Option<Box<dyn ElementIterator>>,
    /// Inner datasets are whole datasets of their own: no dynamic splits.
    ctx: IterContext,
}

impl ElementIterator for FlatMapIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        loop {
            if let Some(current) = &mut self.current {
                if let Some(e) = current.next_element()? {
                    return Ok(Some(e));
                }
                self.current = None;
            }
            match self.input.next_element()? {
                Some(e) => self.current = Some(open(&self.name, &self.f, e, &self.ctx)?),
                None => return Ok(None),
            }
        }
    }
}

#[derive(Debug)]
pub struct Interleave {
    pub input: Dataset,
    pub function: FunctionRef,
    pub cycle_length: i64,
    pub block_length: i64,
    pub num_parallel_calls: Option<i64>,
}

impl DatasetOp for Interleave {
    fn name(&self) -> &'static str {
        "interleave"
    }

    fn inputs(&self) -> Vec<Dataset> {
        vec![self.input.clone()]
    }

    fn attrs(&self) -> Attrs {
        let mut a = Attrs::new()
            .with("function", self.function.clone())
            .with("cycle_length", self.cycle_length)
            .with("block_length", self.block_length);
        if let Some(n) = self.num_parallel_calls {
            a = a.with("num_parallel_calls", n);
        }
        a
    }

    fn element_spec(&self) -> Result<Option<Structure>> {
        if self.cycle_length == 0 || self.cycle_length < -1 {
            return Err(Error::InvalidArgument(format!(
                "interleave: cycle_length must be positive or -1 (AUTOTUNE), got {}",
                self.cycle_length
            )));
        }
        if self.block_length <= 0 {
            return Err(Error::InvalidArgument(format!(
                "interleave: block_length must be positive, got {}",
                self.block_length
            )));
        }
        dataset_fn_output(&self.input, &self.function)
    }

    fn cardinality(&self) -> i64 {
        dataset_fn_cardinality(&self.input)
    }

    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        let spec = self.input.element_spec()?;
        let cycle_length = if self.cycle_length < 0 {
            super::parallel::autotune_threads()
        } else {
            self.cycle_length as usize
        };
        Ok(Box::new(InterleaveIter {
            input: Some(self.input.op.make_iterator(ctx)?),
            name: self.function.name.clone(),
            f: resolve_dataset_fn(&self.function, spec.as_ref())?.f,
            cycle: VecDeque::new(),
            cycle_length,
            block_length: self.block_length as usize,
            taken_in_block: 0,
            parallel: self.num_parallel_calls.is_some(),
            ctx: IterContext {
                deterministic: ctx.deterministic,
                ..IterContext::new()
            },
        }))
    }
}

/// TensorFlow's interleave order: up to `cycle_length` open inner iterators;
/// `block_length` elements from each in turn; an exhausted one is replaced by
/// the next input element's dataset in the same slot, and the cycle moves on. With
/// `num_parallel_calls`, each open inner iterator runs ahead on its own
/// thread; the order is the same.
struct InterleaveIter {
    input: Option<Box<dyn ElementIterator>>,
    name: String,
    f: DatasetFn,
    cycle: VecDeque<Box<dyn ElementIterator>>,
    cycle_length: usize,
    block_length: usize,
    taken_in_block: usize,
    parallel: bool,
    ctx: IterContext,
}

impl InterleaveIter {
    fn open_next(&mut self) -> Result<Option<Box<dyn ElementIterator>>> {
        let Some(input) = &mut self.input else {
            return Ok(None);
        };
        match input.next_element()? {
            Some(e) => {
                let inner = open(&self.name, &self.f, e, &self.ctx)?;
                if self.parallel {
                    Ok(Some(Box::new(Prefetcher::new(inner, 2, "interleave")?)))
                } else {
                    Ok(Some(inner))
                }
            }
            None => {
                self.input = None;
                Ok(None)
            }
        }
    }
}

impl ElementIterator for InterleaveIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        while self.cycle.len() < self.cycle_length {
            match self.open_next()? {
                Some(it) => self.cycle.push_back(it),
                None => break,
            }
        }
        loop {
            let Some(current) = self.cycle.front_mut() else {
                return Ok(None);
            };
            match current.next_element()? {
                Some(e) => {
                    self.taken_in_block += 1;
                    if self.taken_in_block >= self.block_length {
                        self.taken_in_block = 0;
                        self.cycle.rotate_left(1);
                    }
                    return Ok(Some(e));
                }
                None => {
                    // TensorFlow puts the next input's iterator in the exhausted
                    // one's slot and moves on to the following slot: with the
                    // current slot at the front, that is pop front, push back.
                    self.taken_in_block = 0;
                    self.cycle.pop_front();
                    if let Some(next) = self.open_next()? {
                        self.cycle.push_back(next);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_maps_are_recognised_for_fusion() {
        let f = || FunctionRef::named("f");
        let parallel = Dataset::range(3).map_with(f(), Some(2), true);
        assert!(parallel_map(parallel.op()).is_some_and(|m| m.function.name == "f"));
        let sequential = Dataset::range(3).map_with(f(), None, true);
        assert!(parallel_map(sequential.op()).is_none());
        assert!(parallel_map(Dataset::range(3).op()).is_none());
        assert!(parallel_map(Dataset::range(3).interleave(f(), 2, 1, Some(2)).op()).is_none());
    }
}
