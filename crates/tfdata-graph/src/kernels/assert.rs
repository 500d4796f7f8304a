//! `Assert` (`tf.debugging.assert_*`, and the checks `tf.image` and
//! `list_files` add): fails the element with TensorFlow's message when the
//! condition is false; no outputs (the checks are wired in by control
//! inputs, so the executor runs them before what they guard).

use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Error, Result, Tensor};

use super::{Compute, KernelDef};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[KernelDef {
    op: "Assert",
    outputs: |_| Ok(Vec::new()),
    build: assert,
}];

fn assert(attrs: &NodeAttrs) -> Result<Compute> {
    let summarize = attrs.int_or("summarize", 3)?.clamp(0, 1 << 16) as usize;
    Ok(Box::new(move |inputs| {
        let mut inputs = inputs.into_iter();
        let condition = inputs
            .next()
            .ok_or_else(|| Error::InvalidArgument("Assert: no condition".into()))?;
        if condition.dtype() != DType::Bool || !condition.shape().is_empty() {
            return Err(Error::InvalidArgument(format!(
                "Assert: In[0] is not a scalar bool: {:?} {}",
                condition.shape(),
                condition.dtype()
            )));
        }
        if condition.to_scalar::<bool>()? {
            return Ok(Vec::new());
        }
        let data: Vec<String> = inputs.map(|t| summary(&t, summarize)).collect();
        Err(Error::InvalidArgument(format!(
            "assertion failed: [{}]",
            data.join("] [")
        )))
    }))
}

/// A tensor's first `n` values, as TensorFlow's `SummarizeValue` prints
/// them (strings as they are).
fn summary(t: &Tensor, n: usize) -> String {
    let mut parts: Vec<String> = match t.data() {
        TensorData::Strings(s) => s
            .iter()
            .take(n)
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .collect(),
        TensorData::Buffer(_) => match t.dtype() {
            DType::Int64 => t.to_vec::<i64>().map(fmt(n)).unwrap_or_default(),
            DType::Int32 => t.to_vec::<i32>().map(fmt(n)).unwrap_or_default(),
            DType::Float => t.to_vec::<f32>().map(fmt(n)).unwrap_or_default(),
            DType::Double => t.to_vec::<f64>().map(fmt(n)).unwrap_or_default(),
            DType::Bool => t.to_vec::<bool>().map(fmt(n)).unwrap_or_default(),
            other => vec![format!("<{other} tensor of shape {:?}>", t.shape())],
        },
    };
    if t.num_elements() as usize > n {
        parts.push("...".into());
    }
    parts.join(" ")
}

fn fmt<T: std::fmt::Display>(n: usize) -> impl Fn(Vec<T>) -> Vec<String> {
    move |v| v.iter().take(n).map(|x| x.to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::super::testing::run;
    use tfdata_core::Tensor;

    #[test]
    fn a_false_condition_fails_with_the_data() {
        assert!(
            run(
                "Assert",
                &[],
                vec![Tensor::scalar(true), Tensor::scalar_string("x")]
            )
            .unwrap()
            .is_empty()
        );
        let err = run(
            "Assert",
            &[],
            vec![
                Tensor::scalar(false),
                Tensor::scalar_string("`image` must be 3-D"),
                Tensor::vector(&[1i64, 2, 3, 4]),
            ],
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("assertion failed: [`image` must be 3-D] [1 2 3 ...]"),
            "{err}"
        );
    }
}
