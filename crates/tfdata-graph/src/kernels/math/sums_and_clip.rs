//! The sums that do not broadcast as NumPy does, and the clip: `AddN`
//! (any number of inputs of one shape), `BiasAdd` (a vector added along
//! the channel dimension, NHWC or NCHW) and `ClipByValue` (bounds that are
//! scalars or of the input's shape, nothing between). Apart from the
//! elementwise families because each has its own shape rule; the dtype
//! dispatch and the output buffer are `numeric`'s, as for every math op.

use tfdata_core::{Result, Tensor};

use super::super::numeric::{
    Num, at, attr_dtype, buffer, check_attr_dtype, dispatch, expect_dtype, finish, invalid,
    out_buf, out_elements, shape_str, take, values,
};
use super::super::{Compute, expect_inputs};
use super::{ADD_N, two};
use crate::attrs::NodeAttrs;

/// `ClipByValue`: bounds scalar or of the input's shape, nothing between.
pub(super) fn clip<T: Num>(op: &str, v: &[Tensor]) -> Result<Tensor> {
    let [t, lo, hi] = v else {
        return Err(invalid(op, format!("expected 3 inputs, got {}", v.len())));
    };
    for (i, b) in [(1, lo), (2, hi)] {
        expect_dtype(op, b, i, T::DTYPE)?;
    }
    expect_dtype(op, t, 0, T::DTYPE)?;
    let fits = |b: &Tensor| b.shape().is_empty() || b.shape() == t.shape();
    if !fits(lo) || !fits(hi) {
        return Err(invalid(
            op,
            format!(
                "clip_value_min and clip_value_max must be either of the same shape as input, \
                 or a scalar. input shape: {}clip_value_min shape: {}clip_value_max shape: {}",
                shape_str(t.shape()),
                shape_str(lo.shape()),
                shape_str(hi.shape())
            ),
        ));
    }
    let n = out_elements(op, T::DTYPE, t.shape())?;
    let (tb, lb, hb) = (buffer(op, t)?, buffer(op, lo)?, buffer(op, hi)?);
    let (ls, hs) = (
        usize::from(!lo.shape().is_empty()),
        usize::from(!hi.shape().is_empty()),
    );
    let mut out = out_buf::<T>(n);
    for (i, x) in values::<T>(tb).enumerate() {
        let (l, h) = (at::<T>(lb, i * ls).ftz(), at::<T>(hb, i * hs).ftz());
        // max(min(t, hi), lo) as TF: lo wins when lo > hi; comparisons with
        // NaN are false, so a NaN input or bound passes through.
        let x = x.ftz();
        let m = if h < x { h } else { x };
        let r = if m < l { l } else { m };
        r.put(&mut out);
    }
    finish(T::DTYPE, t.shape().to_vec(), out)
}

pub(super) fn add_n<T: Num>(op: &str, v: &[Tensor]) -> Result<Tensor> {
    let Some((first, rest)) = v.split_first() else {
        return Err(invalid(op, "expected at least 1 input"));
    };
    expect_dtype(op, first, 0, T::DTYPE)?;
    for (i, t) in rest.iter().enumerate() {
        expect_dtype(op, t, i + 1, T::DTYPE)?;
        if t.shape() != first.shape() {
            return Err(invalid(
                op,
                format!(
                    "Inputs to operation {op} of type AddN must have the same size and shape.  \
                     Input 0: {} != input {}: {}",
                    shape_str(first.shape()),
                    i + 1,
                    shape_str(t.shape())
                ),
            ));
        }
    }
    if rest.is_empty() {
        return Ok(first.clone());
    }
    out_elements(op, T::DTYPE, first.shape())?;
    // Left to right, as TF's AddN adds (it matters for floats).
    let mut out = buffer(op, first)?.to_vec();
    for t in rest {
        for (o, c) in out
            .chunks_exact_mut(T::SIZE)
            .zip(buffer(op, t)?.chunks_exact(T::SIZE))
        {
            T::get(o).add(T::get(c)).set(o);
        }
    }
    finish(T::DTYPE, first.shape().to_vec(), out)
}

pub(super) fn bias_add<T: Num>(op: &str, nchw: bool, v: &[Tensor]) -> Result<Tensor> {
    let (x, bias) = two(op, v)?;
    expect_dtype(op, x, 0, T::DTYPE)?;
    expect_dtype(op, bias, 1, T::DTYPE)?;
    let shape = x.shape();
    if shape.len() < 2 {
        return Err(invalid(
            op,
            format!("Input tensor must be at least 2D: {}", shape_str(shape)),
        ));
    }
    if bias.shape().len() != 1 {
        return Err(invalid(
            op,
            format!("Biases must be 1D: {}", shape_str(bias.shape())),
        ));
    }
    let channel_dim = if nchw { 1 } else { shape.len() - 1 };
    let channels = shape.get(channel_dim).copied().unwrap_or(0);
    if bias.shape().first() != Some(&channels) {
        return Err(invalid(
            op,
            format!(
                "Must provide as many biases as the last dimension of the input tensor: {} vs. {}",
                shape_str(bias.shape()),
                shape_str(shape)
            ),
        ));
    }
    let n = out_elements(op, T::DTYPE, shape)?;
    let inner: usize = shape
        .get(channel_dim + 1..)
        .unwrap_or(&[])
        .iter()
        .map(|&d| d as usize)
        .product();
    let (xb, bb) = (buffer(op, x)?, buffer(op, bias)?);
    let channels = channels as usize;
    let mut out = out_buf::<T>(n);
    for (i, a) in values::<T>(xb).enumerate() {
        let c = (i / inner.max(1)) % channels.max(1);
        a.ftz().add(at::<T>(bb, c).ftz()).ftz().put(&mut out);
    }
    finish(T::DTYPE, shape.to_vec(), out)
}

pub(super) fn build_bias_add(attrs: &NodeAttrs) -> Result<Compute> {
    let nchw = match attrs.string_or("data_format", "NHWC")? {
        "NHWC" => false,
        "NCHW" => true,
        other => return Err(attrs.error(format!("unknown data_format {other:?}"))),
    };
    let want = attr_dtype(attrs, "T")?;
    let op = attrs.op.to_string();
    Ok(Box::new(move |inputs| {
        let [x, b] = take::<2>(&op, inputs)?;
        check_attr_dtype(&op, want, &x, 0)?;
        let v = [x, b];
        let dtype = v[0].dtype();
        Ok(vec![dispatch!(
            dtype,
            &op,
            [
                Float, Double, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64
            ],
            bias_add(&op, nchw, &v)
        )?])
    }))
}

pub(super) fn build_add_n(attrs: &NodeAttrs) -> Result<Compute> {
    let n = attrs.count("N")?;
    let want = attr_dtype(attrs, "T")?;
    let op = attrs.op.to_string();
    Ok(Box::new(move |mut inputs| {
        expect_inputs(&op, &inputs, n)?;
        if let Some(first) = inputs.first() {
            check_attr_dtype(&op, want, first, 0)?;
        }
        Ok(vec![(ADD_N.run)(&op, &mut inputs)?])
    }))
}

pub(super) fn sum_output(_: &NodeAttrs) -> Result<Vec<(&'static str, usize)>> {
    Ok(vec![("sum", 1)])
}

#[cfg(test)]
mod tests {
    use tfdata_core::Tensor;

    use super::super::tests::{err, one, t};
    use crate::kernels::testing::{run, string};

    #[test]
    fn clip_add_n_bias_add() {
        let z = one(
            "ClipByValue",
            vec![
                t(&[1.0f32, 5.0, 10.0, f32::NAN], &[4]),
                Tensor::scalar(3.0f32),
                Tensor::scalar(7.0f32),
            ],
        )
        .to_vec::<f32>()
        .unwrap();
        assert_eq!(&z[..3], &[3.0, 5.0, 7.0]);
        assert!(z[3].is_nan());
        let z = one(
            "ClipByValue",
            vec![
                t(&[1.0f32, 5.0, 10.0], &[3]),
                Tensor::scalar(8.0f32),
                Tensor::scalar(2.0f32),
            ],
        );
        assert_eq!(z.to_vec::<f32>().unwrap(), vec![8.0, 8.0, 8.0]);
        let z = one(
            "ClipByValue",
            vec![
                t(&[1.0f32, 5.0, 10.0], &[3]),
                t(&[0.0f32, 6.0, 0.0], &[3]),
                Tensor::scalar(7.0f32),
            ],
        );
        assert_eq!(z.to_vec::<f32>().unwrap(), vec![1.0, 6.0, 7.0]);
        let z = one(
            "ClipByValue",
            vec![
                t(&[1.0f32, 5.0, 10.0], &[3]),
                Tensor::scalar(f32::NAN),
                Tensor::scalar(7.0f32),
            ],
        );
        assert_eq!(z.to_vec::<f32>().unwrap(), vec![1.0, 5.0, 7.0]);
        let e = err(
            "ClipByValue",
            vec![
                t(&[1.0f32, 5.0, 10.0], &[3]),
                t(&[0.0f32, 6.0], &[2]),
                Tensor::scalar(7.0f32),
            ],
        );
        assert!(
            e.contains("input shape: [3]clip_value_min shape: [2]clip_value_max shape: []"),
            "{e}"
        );
        assert!(
            run(
                "ClipByValue",
                &[],
                vec![
                    Tensor::scalar(1u32),
                    Tensor::scalar(1u32),
                    Tensor::scalar(1u32)
                ]
            )
            .is_err()
        );

        let n3 = [("N", crate::kernels::testing::int(3))];
        let z = run(
            "AddN",
            &n3,
            vec![
                t(&[1i32, 2], &[2]),
                t(&[3i32, 4], &[2]),
                t(&[5i32, 6], &[2]),
            ],
        )
        .unwrap();
        assert_eq!(z[0].to_vec::<i32>().unwrap(), vec![9, 12]);
        let n2 = [("N", crate::kernels::testing::int(2))];
        let e = run("AddN", &n2, vec![t(&[1i32, 2], &[2]), t(&[3i32], &[1])])
            .unwrap_err()
            .to_string();
        assert!(e.contains("Input 0: [2] != input 1: [1]"), "{e}");
        assert!(run("AddN", &n3, vec![t(&[1i32, 2], &[2])]).is_err());

        let z = one(
            "BiasAdd",
            vec![t(&[1i32, 2, 3, 4], &[2, 2]), t(&[10i32, 20], &[2])],
        );
        assert_eq!(z.to_vec::<i32>().unwrap(), vec![11, 22, 13, 24]);
        let nchw = [("data_format", string("NCHW"))];
        let z = run(
            "BiasAdd",
            &nchw,
            vec![t(&[1i32, 2, 3, 4], &[1, 2, 2]), t(&[10i32, 20], &[2])],
        )
        .unwrap();
        assert_eq!(z[0].to_vec::<i32>().unwrap(), vec![11, 12, 23, 24]);
        let e = err(
            "BiasAdd",
            vec![t(&[1i32, 2, 3, 4], &[2, 2]), t(&[10i32, 20, 30], &[3])],
        );
        assert!(e.contains("Must provide as many biases as the last dimension of the input tensor: [3] vs. [2,2]"), "{e}");
        assert!(
            err("BiasAdd", vec![t(&[1i32, 2], &[2]), t(&[10i32, 20], &[2])])
                .contains("at least 2D: [2]")
        );
        assert!(
            err(
                "BiasAdd",
                vec![t(&[1i32, 2], &[1, 2]), t(&[10i32, 20], &[1, 2])]
            )
            .contains("Biases must be 1D")
        );
    }
}
