//! `scan`: a running state threaded through a function, which returns the
//! new state and the output element (running sums, counters, any state a
//! pipeline carries from element to element).
//!
//! The function is a map function (see [`crate::functions`]) over the
//! state's components followed by the element's, returning the new state's
//! components followed by the output's: `scan` needs no function kind of
//! its own, and functions from TensorFlow graphs, built-ins and registered
//! Rust functions all fit.

use tfdata_core::{Element, Error, Result, Tensor};

use super::map::{is_function_ended, out_of_range_of};
use super::resolve::{allow_unregistered, resolve_map};
use crate::UNKNOWN_CARDINALITY;
use crate::attrs::{Attrs, FunctionRef};
use crate::dataset::{Dataset, DatasetOp, IterContext};
use crate::functions::{self, MapFn};
use crate::iterators::ElementIterator;
use crate::spec::{Structure, TensorSpec};

impl Dataset {
    /// `scan(initial_state, f)`: `f(state..., element...)` returns
    /// `(new_state..., output...)`; the outputs are the elements. The state
    /// keeps its dtypes. `preserve_cardinality` (TensorFlow 2's `scan`
    /// sets it) reports the input's cardinality, else unknown.
    pub fn scan(
        self,
        initial_state: Vec<Tensor>,
        function: FunctionRef,
        preserve_cardinality: bool,
    ) -> Dataset {
        Dataset::from_op(Scan {
            input: self,
            initial_state,
            function,
            preserve_cardinality,
        })
    }
}

#[derive(Debug)]
pub struct Scan {
    pub input: Dataset,
    pub initial_state: Vec<Tensor>,
    pub function: FunctionRef,
    pub preserve_cardinality: bool,
}

impl Scan {
    /// The structure the function is called with: the state's components
    /// (their exact specs as first given), then the element's.
    fn call_structure(&self) -> Result<Option<Structure>> {
        let Some(input) = self.input.element_spec()? else {
            return Ok(None);
        };
        let state =
            Structure::from_components(self.initial_state.iter().map(TensorSpec::of).collect());
        Ok(Some(Structure::Tuple(vec![state, input])))
    }

    /// The output's structure: the function's without the state's
    /// components.
    fn output_of(&self, result: &Structure) -> Result<Structure> {
        let flat = result.flatten();
        let n = self.initial_state.len();
        if flat.len() < n {
            return Err(Error::InvalidArgument(format!(
                "scan: the function returns {} components, fewer than the state's {n}",
                flat.len()
            )));
        }
        Ok(Structure::from_components(
            flat[n..].iter().map(|s| (*s).clone()).collect(),
        ))
    }
}

impl DatasetOp for Scan {
    fn name(&self) -> &'static str {
        "scan"
    }

    fn inputs(&self) -> Vec<Dataset> {
        vec![self.input.clone()]
    }

    fn attrs(&self) -> Attrs {
        Attrs::new()
            .with("initial_state", self.initial_state.clone())
            .with("function", self.function.clone())
            .with("preserve_cardinality", self.preserve_cardinality)
    }

    fn element_spec(&self) -> Result<Option<Structure>> {
        let call = self.call_structure()?;
        let resolved = allow_unregistered(resolve_map(&self.function, call.as_ref()))?;
        match resolved.and_then(|r| r.output) {
            Some(result) => Ok(Some(self.output_of(&result)?)),
            None => Ok(None),
        }
    }

    fn cardinality(&self) -> i64 {
        if self.preserve_cardinality {
            self.input.cardinality()
        } else {
            UNKNOWN_CARDINALITY
        }
    }

    fn make_iterator(&self, ctx: &IterContext) -> Result<Box<dyn ElementIterator>> {
        let call = self.call_structure()?;
        let resolved = resolve_map(&self.function, call.as_ref())?;
        let output = resolved
            .output
            .as_ref()
            .map(|r| self.output_of(r))
            .transpose()?
            .map(|s| s.flatten().into_iter().cloned().collect());
        Ok(Box::new(ScanIter {
            input: self.input.op.make_iterator(ctx)?,
            name: self.function.name.clone(),
            f: resolved.f,
            state: self.initial_state.clone(),
            output,
            ends_on_out_of_range: !self.preserve_cardinality,
            ended: false,
        }))
    }
}

struct ScanIter {
    input: Box<dyn ElementIterator>,
    name: String,
    f: MapFn,
    /// The current state: as many tensors, of the same dtypes, as the
    /// initial state (checked after each call).
    state: Vec<Tensor>,
    /// The output components' specs, when the function declares them.
    output: Option<Vec<TensorSpec>>,
    /// A scan that does not preserve cardinality ends when its function
    /// raises `OutOfRange`, as TensorFlow's does (and stays ended); one that
    /// does fails with TensorFlow's InvalidArgument, as `map` does.
    ends_on_out_of_range: bool,
    ended: bool,
}

impl ScanIter {
    /// Splits the function's result into the new state and the output,
    /// with TensorFlow's checks and messages.
    fn split(&self, mut result: Vec<Tensor>) -> Result<(Vec<Tensor>, Vec<Tensor>)> {
        let n = self.state.len();
        if result.len() < n {
            return Err(Error::InvalidArgument(format!(
                "scan: {} returned {} values, fewer than the state's {n}",
                self.name,
                result.len()
            )));
        }
        let output = result.split_off(n);
        for (i, (new, old)) in result.iter().zip(&self.state).enumerate() {
            if new.dtype() != old.dtype() {
                return Err(Error::InvalidArgument(format!(
                    "Got wrong type for scan_func return value {i} (expected {}, got {}).",
                    old.dtype(),
                    new.dtype()
                )));
            }
        }
        if let Some(specs) = &self.output {
            if specs.len() != output.len() {
                return Err(Error::InvalidArgument(format!(
                    "scan: {} returned {} outputs, its declared output has {}",
                    self.name,
                    output.len(),
                    specs.len()
                )));
            }
            for (k, (t, spec)) in output.iter().zip(specs).enumerate() {
                if t.dtype() != spec.dtype {
                    return Err(Error::InvalidArgument(format!(
                        "Got wrong type for scan_func return value {} (expected {}, got {}).",
                        n + k,
                        spec.dtype,
                        t.dtype()
                    )));
                }
                if !spec.shape.is_compatible_with(t.shape()) {
                    return Err(Error::InvalidArgument(format!(
                        "Got wrong shape for scan_func return value {} (expected {}, got {:?}).",
                        n + k,
                        spec.shape,
                        t.shape()
                    )));
                }
            }
        }
        Ok((result, output))
    }
}

impl ElementIterator for ScanIter {
    fn next_element(&mut self) -> Result<Option<Element>> {
        if self.ended {
            return Ok(None);
        }
        let Some(mut e) = self.input.next_element()? else {
            return Ok(None);
        };
        let lineage = e.take_lineage();
        let mut args = Vec::with_capacity(self.state.len() + e.components.len());
        args.extend(self.state.iter().cloned());
        args.append(&mut e.components);
        let (f, name, ends) = (&self.f, &self.name, self.ends_on_out_of_range);
        let result = match functions::guarded(name, || match f(Element::new(args)) {
            Err(err) if err.is_out_of_range() => Err(out_of_range_of(name, err, ends)),
            out => out,
        }) {
            Err(e) if is_function_ended(&e) => {
                self.ended = true;
                return Ok(None);
            }
            other => other?,
        };
        let (state, output) = self.split(result.components)?;
        self.state = state;
        // Each output depends on every element so far; the lineage names the
        // input element it was made from, as `map`'s does.
        Ok(Some(Element::new(output).with_lineage(lineage)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_sum() {
        crate::register_function("scan_test_running_sum", |e: Element| {
            let sum = e.components[0].to_scalar::<i64>()? + e.components[1].to_scalar::<i64>()?;
            Ok(Element::new(vec![
                Tensor::scalar(sum),
                Tensor::scalar(sum * 10),
            ]))
        });
        let ds = Dataset::range(5).scan(
            vec![Tensor::scalar(0i64)],
            FunctionRef::named("scan_test_running_sum"),
            true,
        );
        let out: Vec<i64> = ds
            .iter()
            .unwrap()
            .map(|e| e.unwrap().components[0].to_scalar::<i64>().unwrap())
            .collect();
        assert_eq!(out, vec![0, 10, 30, 60, 100]);
        assert_eq!(ds.cardinality(), 5);

        crate::register_function("scan_test_bad_state", |_e: Element| {
            Ok(Element::new(vec![
                Tensor::scalar(1i32),
                Tensor::scalar(1i32),
            ]))
        });
        let err = Dataset::range(2)
            .scan(
                vec![Tensor::scalar(0i64)],
                FunctionRef::named("scan_test_bad_state"),
                false,
            )
            .iter()
            .unwrap()
            .next_element()
            .unwrap_err();
        assert!(
            err.to_string().contains(
                "Got wrong type for scan_func return value 0 (expected int64, got int32)."
            ),
            "{err}"
        );
    }
}
