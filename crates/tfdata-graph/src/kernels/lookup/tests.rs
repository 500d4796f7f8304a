use std::sync::Arc;

use bytes::Bytes;
use tfdata_core::{DType, Tensor};
use tfdata_proto::tensorflow::AttrValue;

use super::super::testing::{node, ty};
use crate::attrs::NodeAttrs;
use crate::value::Value;

fn build(op: &str, attrs: &[(&str, AttrValue)]) -> crate::kernels::NodeFn {
    let n = node(op, attrs);
    let k = super::super::resource_lookup(op).unwrap();
    (k.build)(&NodeAttrs::of(&n)).unwrap()
}

fn strings(v: &[&str]) -> Tensor {
    Tensor::strings(
        v.iter().map(|s| Bytes::from(s.to_string())).collect(),
        vec![v.len() as i64],
    )
    .unwrap()
}

fn new_table(k: DType, v: DType) -> Value {
    let make = build(
        "HashTableV2",
        &[("key_dtype", ty(k)), ("value_dtype", ty(v))],
    );
    make(Vec::new()).unwrap().pop().unwrap()
}

#[test]
fn import_then_find_with_defaults() {
    let table = new_table(DType::String, DType::Int64);
    let import = build(
        "LookupTableImportV2",
        &[("Tin", ty(DType::String)), ("Tout", ty(DType::Int64))],
    );
    let find = build(
        "LookupTableFindV2",
        &[("Tin", ty(DType::String)), ("Tout", ty(DType::Int64))],
    );
    let size = build("LookupTableSizeV2", &[]);
    let keys = Value::Tensor(strings(&["a", "b"]));
    // Not initialised yet: no lookups, size 0.
    let e = find(vec![
        table.clone(),
        keys.clone(),
        Tensor::scalar(-1i64).into(),
    ])
    .unwrap_err();
    assert!(e.to_string().contains("Table not initialized."), "{e}");
    let n = size(vec![table.clone()]).unwrap().pop().unwrap();
    assert_eq!(n.tensor("size").unwrap().to_scalar::<i64>().unwrap(), 0);
    import(vec![table.clone(), keys, Tensor::vector(&[1i64, 2]).into()]).unwrap();
    let got = find(vec![
        table.clone(),
        strings(&["b", "x", "a"]).into(),
        Tensor::scalar(-1i64).into(),
    ])
    .unwrap();
    let got = got[0].tensor("values").unwrap().to_vec::<i64>().unwrap();
    assert_eq!(got, [2, -1, 1]);
    let per_key = find(vec![
        table.clone(),
        strings(&["b", "x"]).into(),
        Tensor::vector(&[7i64, 8]).into(),
    ])
    .unwrap();
    // TensorFlow takes a default per key, and uses the first for every key.
    assert_eq!(
        per_key[0].tensor("v").unwrap().to_vec::<i64>().unwrap(),
        [2, 7]
    );
    // A key of another dtype is TensorFlow's signature error.
    let e = find(vec![
        table.clone(),
        Tensor::vector(&[1i32]).into(),
        Tensor::scalar(-1i64).into(),
    ])
    .unwrap_err();
    assert!(
        e.to_string().contains(
            "Signature mismatch, have: resource, int32, int64->int64 expected: resource, string, int64->int64"
        ),
        "{e}"
    );
    let n = size(vec![table]).unwrap().pop().unwrap();
    assert_eq!(n.tensor("size").unwrap().to_scalar::<i64>().unwrap(), 2);
}

#[test]
fn duplicate_keys_are_tensorflows_error() {
    let table = new_table(DType::Int64, DType::String);
    let init = build(
        "InitializeTableV2",
        &[("Tkey", ty(DType::Int64)), ("Tval", ty(DType::String))],
    );
    let e = init(vec![
        table,
        Tensor::vector(&[3i64, 3]).into(),
        strings(&["p", "q"]).into(),
    ])
    .unwrap_err();
    assert!(
        e.to_string().contains(
            "HashTable has different value for same key. Key 3 has p and trying to add value q"
        ),
        "{e}"
    );
}

#[test]
fn unregistered_dtype_pairs_are_refused() {
    let n = node(
        "HashTableV2",
        &[
            ("key_dtype", ty(DType::Int32)),
            ("value_dtype", ty(DType::Int64)),
        ],
    );
    let k = super::super::resource_lookup("HashTableV2").unwrap();
    assert!((k.build)(&NodeAttrs::of(&n)).is_err());
    // Values are not tensors.
    let table = new_table(DType::String, DType::String);
    assert!(matches!(table, Value::Table(ref t) if Arc::strong_count(t) == 1));
}
