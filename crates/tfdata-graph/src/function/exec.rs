//! Running a compiled [`Function`].

use std::sync::Arc;

use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Error, Result, Tensor};

use super::{Function, Run, Step};
use crate::MAX_WHILE_ITERATIONS;
use crate::value::Value;

impl Function {
    /// Runs the function on `args` (in signature order).
    pub fn call(&self, args: Vec<Value>) -> Result<Vec<Value>> {
        if args.len() != self.num_args {
            return Err(Error::InvalidArgument(format!(
                "{} takes {} arguments, got {}",
                self.name,
                self.num_args,
                args.len()
            )));
        }
        let mut slots: Vec<Option<Value>> = Vec::with_capacity(self.num_slots);
        slots.extend(args.into_iter().map(Some));
        slots.resize(self.num_slots, None);
        for step in &self.steps {
            let mut inputs = Vec::with_capacity(step.inputs.len());
            for &(s, last) in &step.inputs {
                let v = if last {
                    slots[s].take()
                } else {
                    slots[s].clone()
                };
                inputs.push(v.ok_or_else(|| {
                    Error::Internal(format!(
                        "{}: node {:?} read an empty slot",
                        self.name, step.node
                    ))
                })?);
            }
            let outputs = run(step, inputs).map_err(|e| self.in_step(e, step))?;
            if outputs.len() != step.num_outputs {
                return Err(Error::Internal(format!(
                    "{}: node {:?} ({}) made {} outputs, not the {} it declares",
                    self.name,
                    step.node,
                    step.op,
                    outputs.len(),
                    step.num_outputs
                )));
            }
            for (k, v) in outputs.into_iter().enumerate() {
                slots[step.first_output + k] = Some(v);
            }
        }
        let mut results = Vec::with_capacity(self.outputs.len());
        for (i, &s) in self.outputs.iter().enumerate() {
            let v = if self.outputs[i + 1..].contains(&s) {
                slots[s].clone()
            } else {
                slots[s].take()
            };
            results.push(v.ok_or_else(|| {
                Error::Internal(format!("{}: a result slot is empty", self.name))
            })?);
        }
        Ok(results)
    }

    fn in_step(&self, e: Error, step: &Step) -> Error {
        // Calls already say where inside them it failed.
        Error::Context {
            context: Some(format!("{}: node {:?} ({})", self.name, step.node, step.op)),
            source: Arc::new(e),
        }
    }
}

fn run(step: &Step, mut inputs: Vec<Value>) -> Result<Vec<Value>> {
    match &step.run {
        Run::Const(t) => Ok(vec![Value::Tensor(t.clone())]),
        Run::Resource => Ok(vec![Value::Resource]),
        Run::Forward => Ok(inputs),
        Run::Kernel(k) => {
            let tensors = inputs
                .into_iter()
                .map(|v| v.into_tensor(&step.op))
                .collect::<Result<Vec<_>>>()?;
            Ok(k(tensors)?.into_iter().map(Value::Tensor).collect())
        }
        Run::Node(f) => f(inputs),
        Run::Call(f) => f.call(inputs),
        Run::If {
            then_branch,
            else_branch,
        } => {
            if inputs.is_empty() {
                return Err(Error::InvalidArgument("If without a condition".into()));
            }
            let cond = inputs.remove(0);
            if truthy(cond.tensor("If condition")?)? {
                then_branch.call(inputs)
            } else {
                else_branch.call(inputs)
            }
        }
        Run::Case(branches) => {
            if inputs.is_empty() {
                return Err(Error::InvalidArgument("Case without a branch index".into()));
            }
            let index = inputs
                .remove(0)
                .into_tensor("Case branch index")?
                .to_scalar::<i32>()?;
            // Out of range runs the last branch (TensorFlow's default branch).
            let branch = usize::try_from(index)
                .ok()
                .and_then(|i| branches.get(i))
                .or(branches.last())
                .ok_or_else(|| Error::InvalidArgument("Case without branches".into()))?;
            branch.call(inputs)
        }
        Run::While { cond, body } => {
            let mut values = inputs;
            let mut iterations: u64 = 0;
            loop {
                let c = cond.call(values.clone())?;
                let go = match c.first() {
                    Some(v) => truthy(v.tensor("While condition")?)?,
                    None => false,
                };
                if !go {
                    return Ok(values);
                }
                iterations += 1;
                if iterations > MAX_WHILE_ITERATIONS {
                    return Err(Error::InvalidArgument(format!(
                        "While loop ran more than {MAX_WHILE_ITERATIONS} iterations for one element"
                    )));
                }
                values = body.call(values)?;
            }
        }
    }
}

/// TensorFlow's truth value of an `If`/`While` condition: a scalar bool as
/// it is, a numeric scalar when non-zero, a string scalar when non-empty, a
/// non-scalar when it has elements.
pub(crate) fn truthy(t: &Tensor) -> Result<bool> {
    if !t.shape().is_empty() {
        return Ok(t.num_elements() > 0);
    }
    match t.data() {
        TensorData::Strings(s) => Ok(s.first().is_some_and(|s| !s.is_empty())),
        TensorData::Buffer(b) => Ok(match t.dtype() {
            DType::Bool => b.first().is_some_and(|&v| v != 0),
            DType::Float => t.to_scalar::<f32>()? != 0.0,
            DType::Double => t.to_scalar::<f64>()? != 0.0,
            _ => b.iter().any(|&v| v != 0),
        }),
    }
}
