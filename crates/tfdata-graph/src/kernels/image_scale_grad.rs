//! `ScaleAndTranslateGrad`: the gradient of `ScaleAndTranslate` with
//! respect to the image.
//!
//! The forward op is a separable weighted gather (`image_scale`); its
//! gradient is the transposed gather. TensorFlow builds the transposed
//! spans from the forward ones (for each input pixel, the outputs that read
//! it and their weights, from the first such output), then runs the same
//! gather on the incoming gradient; the same construction and gather here
//! give TensorFlow's sums bit for bit.

use tfdata_core::{DType, Error, Result, Tensor};

use super::image_scale::{Kernel, Spans, gather, spans, two_floats};
use super::strings::shape_string;
use super::{Compute, KernelDef, check_size, expect_inputs};
use crate::attrs::NodeAttrs;

const OP: &str = "ScaleAndTranslateGrad";

pub(super) const KERNELS: &[KernelDef] = &[KernelDef {
    op: OP,
    outputs: |_| Ok(vec![("output", 1)]),
    build,
}];

fn invalid(message: impl std::fmt::Display) -> Error {
    Error::InvalidArgument(format!("{OP}: {message}"))
}

/// The transposed spans of a forward resize from `input` to `output`
/// samples: span `i` lists, from its first, the forward outputs that read
/// input `i`, each with the weight it read it with.
fn grad_spans(forward: &Spans, output: usize, input: usize) -> Spans {
    let mut components: Vec<Vec<(usize, f32)>> = vec![Vec::new(); input];
    for o in 0..output {
        for j in 0..forward.size {
            let i = forward.starts[o] + j;
            let w = forward.weights[o * forward.size + j];
            if w != 0.0 && i < input {
                components[i].push((o, w));
            }
        }
    }
    // Outputs are visited in order, so each list is already sorted.
    let size = components
        .iter()
        .filter_map(|c| Some(c.last()?.0 - c.first()?.0 + 1))
        .max()
        .unwrap_or(0);
    let mut starts = vec![0; input];
    let mut weights = vec![0f32; size * input];
    for (i, c) in components.iter().enumerate() {
        if let Some(&(first, _)) = c.first() {
            starts[i] = first;
            for &(o, w) in c {
                weights[i * size + o - first] += w;
            }
        }
    }
    Spans {
        size,
        starts,
        weights,
    }
}

fn build(attrs: &NodeAttrs) -> Result<Compute> {
    let aa = attrs.bool_or("antialias", true)?;
    let name = attrs.string_or("kernel_type", "lanczos3")?;
    let kernel = Kernel::parse(name)
        .ok_or_else(|| attrs.error(format!("Unrecognized kernel type: {name}")))?;
    if attrs.has("T") && attrs.dtype("T")? != DType::Float {
        return Err(Error::Unimplemented(format!(
            "{OP}: T={} is not supported by tfdata (float32)",
            attrs.dtype("T")?
        )));
    }
    Ok(Box::new(move |inputs| {
        expect_inputs(OP, &inputs, 4)?;
        let (grad_t, original) = (&inputs[0], &inputs[1]);
        let gs = grad_t.shape();
        if gs.len() != 4 {
            return Err(invalid(format!(
                "input_grad must be 4-dimensional{}",
                shape_string(gs)
            )));
        }
        if grad_t.dtype() != DType::Float {
            return Err(invalid(format!(
                "input_grad must be of type float{}",
                grad_t.dtype()
            )));
        }
        let os = original.shape();
        if os.len() != 4 {
            return Err(invalid(format!(
                "original_image must be 4-dimensional{}",
                shape_string(os)
            )));
        }
        let (b, oh, ow, c) = (
            gs[0] as usize,
            gs[1] as usize,
            gs[2] as usize,
            gs[3] as usize,
        );
        let (h, w) = (os[1] as usize, os[2] as usize);
        if h > i32::MAX as usize || w > i32::MAX as usize {
            return Err(invalid("original sizes must be between 0 and max int32"));
        }
        let total = (b as u64 * c as u64).saturating_mul(h as u64 * w.max(ow) as u64);
        check_size(OP, DType::Float, total)?;
        let [row_scale, col_scale] = two_floats(&inputs[2])?;
        if !(row_scale > 0.0 && col_scale > 0.0) {
            return Err(invalid("Scale must be greater than zero."));
        }
        let [row_t, col_t] = two_floats(&inputs[3])?;
        let shape = vec![b as i64, h as i64, w as i64, c as i64];
        if b * h * w * c == 0 {
            return Ok(vec![Tensor::from_slice::<f32>(&[], shape)?]);
        }
        let g: Vec<f32> = grad_t.to_vec()?;
        let cols = grad_spans(&spans(kernel, ow, w, col_scale, col_t, aa), ow, w);
        let rows = grad_spans(&spans(kernel, oh, h, row_scale, row_t, aa), oh, h);
        let out = gather(&rows, &cols, &g, [b, oh, ow, c], h, w);
        Ok(vec![Tensor::from_slice(&out, shape)?])
    }))
}
