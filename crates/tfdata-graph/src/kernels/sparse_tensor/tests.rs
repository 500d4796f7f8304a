use tfdata_core::Tensor;

use super::super::testing::{boolean, run, ty};
use tfdata_core::DType;

fn i64s(v: &[i64], shape: Vec<i64>) -> Tensor {
    Tensor::from_slice(v, shape).unwrap()
}

#[test]
fn serialize_then_deserialize_round_trips() {
    let ind = i64s(&[0, 1, 2, 0], vec![2, 2]);
    let vals = Tensor::vector(&[5.0f32, 6.0]);
    let shape = Tensor::vector(&[3i64, 4]);
    let s = run(
        "SerializeSparse",
        &[("T", ty(DType::Float)), ("out_type", ty(DType::String))],
        vec![ind.clone(), vals.clone(), shape.clone()],
    )
    .unwrap();
    let out = run("DeserializeSparse", &[("dtype", ty(DType::Float))], s).unwrap();
    assert_eq!(out, vec![ind, vals, shape]);
}

#[test]
fn fill_empty_rows_keeps_row_order() {
    let out = run(
        "SparseFillEmptyRows",
        &[("T", ty(DType::Float))],
        vec![
            i64s(&[3, 1, 1, 0, 3, 0], vec![3, 2]),
            Tensor::vector(&[1.0f32, 2.0, 3.0]),
            Tensor::vector(&[5i64, 2]),
            Tensor::scalar(-1.0f32),
        ],
    )
    .unwrap();
    assert_eq!(
        out[0].to_vec::<i64>().unwrap(),
        [0, 0, 1, 0, 2, 0, 3, 1, 3, 0, 4, 0]
    );
    assert_eq!(
        out[1].to_vec::<f32>().unwrap(),
        [-1.0, 2.0, -1.0, 1.0, 3.0, -1.0]
    );
    assert_eq!(out[3].to_vec::<i64>().unwrap(), [3, 1, 4]);
}

#[test]
fn integer_matmul_wraps() {
    let out = run(
        "SparseTensorDenseMatMul",
        &[
            ("T", ty(DType::Int64)),
            ("Tindices", ty(DType::Int64)),
            ("adjoint_a", boolean(false)),
        ],
        vec![
            i64s(&[0, 0], vec![1, 2]),
            Tensor::vector(&[i64::MAX]),
            Tensor::vector(&[1i64, 1]),
            i64s(&[2], vec![1, 1]),
        ],
    )
    .unwrap();
    assert_eq!(out[0].to_vec::<i64>().unwrap(), [-2]);
}

#[test]
fn hostile_shapes_are_errors() {
    // A fill over a billion rows, a reshape of a negative shape, indices
    // without columns: refused, no panic and no huge allocation.
    let empty = i64s(&[], vec![0, 2]);
    let e = run(
        "SparseFillEmptyRows",
        &[("T", ty(DType::Float))],
        vec![
            empty.clone(),
            Tensor::vector::<f32>(&[]),
            Tensor::vector(&[1i64 << 40, 2]),
            Tensor::scalar(0.0f32),
        ],
    );
    assert!(e.is_err());
    let e = run(
        "SparseFillEmptyRows",
        &[("T", ty(DType::Float))],
        vec![
            i64s(&[], vec![1, 0]),
            Tensor::vector(&[1.0f32]),
            Tensor::vector(&[3i64]),
            Tensor::scalar(0.0f32),
        ],
    );
    assert!(e.is_err());
    let e = run(
        "SparseReshape",
        &[],
        vec![empty, Tensor::vector(&[-1i64, 2]), Tensor::vector(&[-1i64])],
    );
    assert!(e.is_err());
    let e = run(
        "SerializeManySparse",
        &[("T", ty(DType::Float)), ("out_type", ty(DType::String))],
        vec![
            i64s(&[], vec![0, 2]),
            Tensor::vector::<f32>(&[]),
            Tensor::vector(&[i64::MAX, 2]),
        ],
    );
    assert!(e.is_err());
}
