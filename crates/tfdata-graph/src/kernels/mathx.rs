//! More of tf.math, each op small and exact: `InvertPermutation`,
//! `Bucketize`, `ApproximateEqual`, `Xdivy`, `LinSpace` and `Cross`, with
//! TensorFlow 2.21's CPU dtypes, arithmetic (no fused multiply-adds: TF
//! rounds each product and sum of `LinSpace` and `Cross`) and errors.
//! (`math.rs` holds the elementwise core and is already long.)

use tfdata_core::{DType, Error, Result, Tensor};

use super::numeric::{
    Elem, Num, binary, buffer, dispatch, expect_dtype, finish, index_values, invalid, out_buf,
    out_elements, shape_str, values,
};
use super::{Compute, KernelDef, one_output, y_output, z_output};
use crate::attrs::NodeAttrs;

pub(super) const KERNELS: &[KernelDef] = &[
    KernelDef {
        op: "InvertPermutation",
        outputs: y_output,
        build: |a| checked(a, &[DType::Int32, DType::Int64], 1, invert_permutation),
    },
    KernelDef {
        op: "Bucketize",
        outputs: one_output,
        build: build_bucketize,
    },
    KernelDef {
        op: "ApproximateEqual",
        outputs: z_output,
        build: build_approximate_equal,
    },
    KernelDef {
        op: "Xdivy",
        outputs: z_output,
        build: |a| checked(a, &[DType::Float, DType::Double], 2, xdivy),
    },
    KernelDef {
        op: "LinSpace",
        outputs: one_output,
        build: |a| checked(a, &[DType::Float, DType::Double], 3, lin_space),
    },
    KernelDef {
        op: "Cross",
        outputs: product_output,
        build: |a| {
            use DType::*;
            let real = &[
                Float, Double, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64,
            ];
            checked(a, real, 2, cross)
        },
    },
];

fn product_output(_: &NodeAttrs) -> Result<Vec<(&'static str, usize)>> {
    Ok(vec![("product", 1)])
}

type Run = fn(&str, &[Tensor]) -> Result<Tensor>;

/// A kernel of `arity` inputs whose `T` must be one of `types`.
fn checked(attrs: &NodeAttrs, types: &'static [DType], arity: usize, run: Run) -> Result<Compute> {
    let op = attrs.op.to_string();
    if attrs.has("T") {
        let t = attrs.dtype("T")?;
        if !types.contains(&t) {
            return Err(attrs.error(super::numeric::unsupported(&op, t)));
        }
    }
    Ok(Box::new(move |inputs| {
        super::expect_inputs(&op, &inputs, arity)?;
        if !types.contains(&inputs[0].dtype()) {
            return Err(super::numeric::unsupported(&op, inputs[0].dtype()));
        }
        Ok(vec![run(&op, &inputs)?])
    }))
}

fn invert_permutation(op: &str, v: &[Tensor]) -> Result<Tensor> {
    let x = &v[0];
    if x.shape().len() != 1 {
        return Err(invalid(op, "invert_permutation expects a 1D vector."));
    }
    let p = index_values(op, "x", x)?;
    let n = p.len();
    let mut y = vec![-1i64; n];
    for (i, &d) in p.iter().enumerate() {
        if d < 0 || d as usize >= n {
            return Err(invalid(op, format!("{d} is not between 0 and {n}")));
        }
        if y[d as usize] != -1 {
            return Err(invalid(op, format!("{d} is duplicated in the input.")));
        }
        y[d as usize] = i as i64;
    }
    super::layout::int_tensor(op, x.dtype(), &y, vec![n as i64])
}

fn build_bucketize(attrs: &NodeAttrs) -> Result<Compute> {
    let op = attrs.op.to_string();
    let bounds: Vec<f32> = attrs.floats("boundaries")?.to_vec();
    if !bounds.is_sorted() {
        return Err(attrs.error(invalid(&op, "Expected sorted boundaries")));
    }
    Ok(Box::new(move |inputs| {
        super::expect_inputs(&op, &inputs, 1)?;
        let x = &inputs[0];
        // The first boundary the value is below (C++ compares an integer
        // with a float boundary as floats, a double as doubles).
        let bucket = |below: &dyn Fn(f32) -> bool| {
            bounds
                .iter()
                .position(|&b| below(b))
                .unwrap_or(bounds.len()) as i32
        };
        let b = buffer(&op, x)?;
        let out: Vec<i32> = match x.dtype() {
            DType::Float => values::<f32>(b).map(|v| bucket(&|t| v.ftz() < t)).collect(),
            DType::Double => values::<f64>(b)
                .map(|v| bucket(&|t| v.ftz() < f64::from(t)))
                .collect(),
            DType::Int32 => values::<i32>(b)
                .map(|v| bucket(&|t| (v as f32) < t))
                .collect(),
            DType::Int64 => values::<i64>(b)
                .map(|v| bucket(&|t| (v as f32) < t))
                .collect(),
            d => return Err(super::numeric::unsupported(&op, d)),
        };
        Ok(vec![Tensor::from_slice(&out, x.shape().to_vec())?])
    }))
}

fn build_approximate_equal(attrs: &NodeAttrs) -> Result<Compute> {
    let op = attrs.op.to_string();
    let tolerance = attrs.float_or("tolerance", 1e-5)?;
    super::numeric::float_or_double_t(attrs)?;
    Ok(Box::new(move |inputs| {
        super::expect_inputs(&op, &inputs, 2)?;
        let (x, y) = (&inputs[0], &inputs[1]);
        if x.shape() != y.shape() {
            return Err(invalid(
                &op,
                format!(
                    "x and y must be of the same shape. x shape: {}. y shape: {}",
                    shape_str(x.shape()),
                    shape_str(y.shape())
                ),
            ));
        }
        let out = match x.dtype() {
            DType::Float => binary(&op, x, y, |a: f32, b: f32| (a - b).ftz().abs() <= tolerance),
            DType::Double => binary(&op, x, y, |a: f64, b: f64| {
                (a - b).ftz().abs() <= f64::from(tolerance)
            }),
            d => Err(super::numeric::unsupported(&op, d)),
        }?;
        Ok(vec![out])
    }))
}

fn xdivy(op: &str, v: &[Tensor]) -> Result<Tensor> {
    let (x, y) = (&v[0], &v[1]);
    match x.dtype() {
        // A zero x is returned as it is (so -0.0 stays -0.0).
        DType::Float => binary(op, x, y, |a: f32, b: f32| if a == 0.0 { a } else { a / b }),
        _ => binary(op, x, y, |a: f64, b: f64| if a == 0.0 { a } else { a / b }),
    }
}

fn lin_space(op: &str, v: &[Tensor]) -> Result<Tensor> {
    for (t, what) in v.iter().zip(["start", "stop", "num"]) {
        if !t.shape().is_empty() {
            return Err(invalid(
                op,
                format!(
                    "{what} must be a scalar, not shape {}",
                    shape_str(t.shape())
                ),
            ));
        }
    }
    let num = super::numeric::scalar_index(op, "num", &v[2])?;
    if num <= 0 {
        return Err(invalid(op, format!("Requires num > 0: {num}")));
    }
    dispatch!(v[0].dtype(), op, [Float, Double], lin_space_of(op, v, num))
}

fn lin_space_of<T: Num>(op: &str, v: &[Tensor], num: i64) -> Result<Tensor> {
    expect_dtype(op, &v[1], 1, T::DTYPE)?;
    let start = values::<T>(buffer(op, &v[0])?).next().unwrap_or(T::ZERO);
    let stop = values::<T>(buffer(op, &v[1])?).next().unwrap_or(T::ZERO);
    let n = out_elements(op, T::DTYPE, &[num])?;
    let mut out = out_buf::<T>(n);
    if n == 1 {
        start.put(&mut out);
    } else {
        let (s, e) = (start.ftz(), stop.ftz());
        // (stop - start) / T(num - 1), then start + step * T(i), each
        // rounded in T; the last value is stop itself.
        let step = e.sub(s).ftz().div_count((n - 1) as u64).ftz();
        // The first value is start itself (so an infinite step does not
        // make it NaN).
        start.put(&mut out);
        for i in 1..n - 1 {
            s.add(step.mul(T::from_f64(i as f64)).ftz())
                .ftz()
                .put(&mut out);
        }
        stop.put(&mut out);
    }
    finish(T::DTYPE, vec![num], out)
}

fn cross(op: &str, v: &[Tensor]) -> Result<Tensor> {
    let (a, b) = (&v[0], &v[1]);
    if a.shape() != b.shape() {
        return Err(invalid(
            op,
            format!(
                "Both inputs must be of same shape: {} vs. {}",
                shape_str(a.shape()),
                shape_str(b.shape())
            ),
        ));
    }
    match a.shape().last() {
        Some(3) => {}
        Some(_) => {
            return Err(Error::FailedPrecondition(format!(
                "{op}: Cross-products are only defined for 3-element vectors."
            )));
        }
        None => return Err(invalid(op, "Input must be at least 1D")),
    }
    dispatch!(
        a.dtype(),
        op,
        [
            Float, Double, Int8, Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64
        ],
        cross_of(op, a, b)
    )
}

fn cross_of<T: Num>(op: &str, a: &Tensor, b: &Tensor) -> Result<Tensor> {
    expect_dtype(op, b, 1, T::DTYPE)?;
    let x: Vec<T> = values::<T>(buffer(op, a)?).map(Elem::ftz).collect();
    let y: Vec<T> = values::<T>(buffer(op, b)?).map(Elem::ftz).collect();
    let n = out_elements(op, T::DTYPE, a.shape())?;
    let mut out = out_buf::<T>(n);
    for (p, q) in x.chunks_exact(3).zip(y.chunks_exact(3)) {
        let term = |i: usize, j: usize| p[i].mul(q[j]).ftz().sub(p[j].mul(q[i]).ftz()).ftz();
        for (i, j) in [(1, 2), (2, 0), (0, 1)] {
            term(i, j).put(&mut out);
        }
    }
    finish(T::DTYPE, a.shape().to_vec(), out)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{list, run};
    use tfdata_core::Tensor;
    use tfdata_proto::tensorflow::attr_value::ListValue;

    #[test]
    fn small_ops() {
        let out = run(
            "InvertPermutation",
            &[],
            vec![Tensor::vector(&[2i32, 0, 1])],
        )
        .unwrap();
        assert_eq!(out[0].to_vec::<i32>().unwrap(), vec![1, 2, 0]);
        let bounds = list(ListValue {
            f: vec![0.0, 1.0, 5.0],
            ..Default::default()
        });
        let out = run(
            "Bucketize",
            &[("boundaries", bounds)],
            vec![Tensor::vector(&[-1.0f32, 0.0, 0.5, 10.0])],
        )
        .unwrap();
        assert_eq!(out[0].to_vec::<i32>().unwrap(), vec![0, 1, 1, 3]);
        let out = run(
            "LinSpace",
            &[],
            vec![
                Tensor::scalar(0.0f32),
                Tensor::scalar(1.0f32),
                Tensor::scalar(5i32),
            ],
        )
        .unwrap();
        assert_eq!(
            out[0].to_vec::<f32>().unwrap(),
            vec![0.0, 0.25, 0.5, 0.75, 1.0]
        );
        let a = Tensor::vector(&[1i32, 2, 3]);
        let b = Tensor::vector(&[4i32, 5, 6]);
        let out = run("Cross", &[], vec![a, b]).unwrap();
        assert_eq!(out[0].to_vec::<i32>().unwrap(), vec![-3, 6, -3]);
    }
}
