use tfdata_core::{DType, Tensor};

use super::super::testing::run;
use tfdata_proto::tensorflow::{AttrValue, attr_value};

fn dtypes(d: &[DType]) -> AttrValue {
    AttrValue {
        value: Some(attr_value::Value::List(attr_value::ListValue {
            r#type: d.iter().map(|d| d.code()).collect(),
            ..Default::default()
        })),
    }
}

fn names(v: &[&str]) -> Tensor {
    Tensor::strings(
        v.iter()
            .map(|s| bytes::Bytes::from(s.to_string()))
            .collect(),
        vec![v.len() as i64],
    )
    .unwrap()
}

fn save(prefix: &str, keys: &[&str], tensors: Vec<Tensor>) -> tfdata_core::Result<()> {
    let types: Vec<DType> = tensors.iter().map(Tensor::dtype).collect();
    let mut inputs = vec![
        Tensor::scalar_string(prefix.to_string()),
        names(keys),
        names(&vec![""; keys.len()]),
    ];
    inputs.extend(tensors);
    run("SaveV2", &[("dtypes", dtypes(&types))], inputs).map(|_| ())
}

fn restore(prefix: &str, keys: &[&str], types: &[DType]) -> tfdata_core::Result<Vec<Tensor>> {
    run(
        "RestoreV2",
        &[("dtypes", dtypes(types))],
        vec![
            Tensor::scalar_string(prefix.to_string()),
            names(keys),
            names(&vec![""; keys.len()]),
        ],
    )
}

#[test]
fn saves_and_restores_and_merges() {
    let dir = tempfile::tempdir().unwrap();
    let a = format!("{}/a/ckpt", dir.path().display());
    assert!(
        save(
            &format!("{}/x/y/ckpt", dir.path().display()),
            &["s"],
            vec![Tensor::scalar(1i32)]
        )
        .is_err()
    );
    let strings = Tensor::strings(
        vec!["".into(), "héllo".into(), vec![7u8; 300].into()],
        vec![3],
    )
    .unwrap();
    let floats = Tensor::from_slice(&[1.5f32, f32::NAN, -0.0, f32::INFINITY], vec![2, 2]).unwrap();
    save(&a, &["s", "f"], vec![strings.clone(), floats.clone()]).unwrap();
    let got = restore(&a, &["f", "s"], &[DType::Float, DType::String]).unwrap();
    assert_eq!(got[0].to_vec::<f32>().unwrap()[0], 1.5);
    assert_eq!(got[1], strings);
    let err = restore(&a, &["f"], &[DType::Int32]).unwrap_err();
    assert!(
        err.to_string()
            .contains("expected dtype int32 does not equal original dtype float"),
        "{err}"
    );
    assert!(restore(&a, &["zz"], &[DType::Int32]).is_err());

    let b = format!("{}/b/ckpt", dir.path().display());
    save(&b, &["i"], vec![Tensor::scalar(7i64)]).unwrap();
    let m = format!("{}/m/merged", dir.path().display());
    run(
        "MergeV2Checkpoints",
        &[],
        vec![names(&[&a, &b]), Tensor::scalar_string(m.clone())],
    )
    .unwrap();
    let got = restore(&m, &["i", "s"], &[DType::Int64, DType::String]).unwrap();
    assert_eq!(got[0], Tensor::scalar(7i64));
    assert_eq!(got[1], strings);
    assert!(!std::path::Path::new(&format!("{a}.index")).exists());
}

#[test]
fn refuses_damaged_data() {
    let dir = tempfile::tempdir().unwrap();
    let p = format!("{}/ckpt", dir.path().display());
    save(&p, &["x"], vec![Tensor::vector(&[1i32, 2, 3])]).unwrap();
    let data = format!("{p}.data-00000-of-00001");
    let mut bytes = std::fs::read(&data).unwrap();
    bytes[0] ^= 1;
    std::fs::write(&data, bytes).unwrap();
    let err = restore(&p, &["x"], &[DType::Int32]).unwrap_err();
    assert!(err.to_string().contains("Checksum does not match"), "{err}");
    std::fs::write(
        format!("{p}.index"),
        b"not a table at all, not even close to one....",
    )
    .unwrap();
    assert!(restore(&p, &["x"], &[DType::Int32]).is_err());
}

/// The checkpoint TensorFlow 2.21 wrote (interop/differential/families/
/// persist.py): we read every tensor, and saving them again gives the same
/// bytes, index and data.
#[test]
fn reads_and_rewrites_tensorflows_checkpoint_byte_for_byte() {
    let tf = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/persist/ckpt/all");
    let index = super::Index::read(tf).unwrap();
    let mut keys = Vec::new();
    let mut types = Vec::new();
    for (k, v) in &index.entries {
        let e: super::Entry = super::format::parse(k, v).unwrap();
        keys.push(String::from_utf8(k.clone()).unwrap());
        types.push(DType::from_code(e.dtype).unwrap());
    }
    assert!(keys.len() > 5, "{keys:?}");
    let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
    let tensors = restore(tf, &refs, &types).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ours = format!("{}/all", dir.path().display());
    save(&ours, &refs, tensors).unwrap();
    for suffix in [".index", ".data-00000-of-00001"] {
        assert_eq!(
            std::fs::read(format!("{ours}{suffix}")).unwrap(),
            std::fs::read(format!("{tf}{suffix}")).unwrap(),
            "{suffix}"
        );
    }
}

/// The V1 checkpoint TensorFlow's `Save` wrote (persist.py).
#[test]
fn reads_tensorflows_v1_checkpoint() {
    let tf = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/persist/v1/all");
    let attrs = [("dt", super::super::testing::ty(DType::Int32))];
    let restore = |name: &str, spec: Option<&str>| {
        let mut inputs = vec![
            Tensor::scalar_string(tf.to_string()),
            Tensor::scalar_string(name.to_string()),
        ];
        match spec {
            None => run("Restore", &attrs, inputs),
            Some(s) => {
                inputs.push(Tensor::scalar_string(s.to_string()));
                run("RestoreSlice", &attrs, inputs)
            }
        }
    };
    let want = Tensor::from_slice(&[1i32, 2, 3, i32::MIN], vec![2, 2]).unwrap();
    assert_eq!(restore("i32", None).unwrap()[0], want);
    assert_eq!(restore("i32", Some("")).unwrap()[0], want);
    let err = restore("i32", Some("2 2 0,1:-")).unwrap_err();
    assert!(err.to_string().contains("whole tensors only"), "{err}");
    assert!(restore("f32", None).is_err());
    let mut bytes = std::fs::read(tf).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let damaged = dir.path().join("damaged");
    let at = bytes.len() / 2;
    bytes[at] ^= 0x40;
    std::fs::write(&damaged, bytes).unwrap();
    let err = run(
        "Restore",
        &attrs,
        vec![
            Tensor::scalar_string(damaged.to_str().unwrap().to_string()),
            Tensor::scalar_string("i32"),
        ],
    )
    .unwrap_err();
    assert!(err.to_string().contains("checksum"), "{err}");
}

/// Saving the V1 checkpoint's tensors again gives TensorFlow's bytes.
#[test]
fn rewrites_tensorflows_v1_checkpoint_byte_for_byte() {
    let tf = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/persist/v1/all");
    let names = [
        "bool",
        "c128",
        "c64",
        "empty",
        "empty_str",
        "f16",
        "f32",
        "f64",
        "i16",
        "i32",
        "i64",
        "i8",
        "layer/kernel/.ATTRIBUTES/VARIABLE_VALUE",
        "str",
        "str_scalar",
        "u16",
        "u8",
    ];
    let types = [
        DType::Bool,
        DType::Complex128,
        DType::Complex64,
        DType::Float,
        DType::String,
        DType::Half,
        DType::Float,
        DType::Double,
        DType::Int16,
        DType::Int32,
        DType::Int64,
        DType::Int8,
        DType::Float,
        DType::String,
        DType::String,
        DType::UInt16,
        DType::UInt8,
    ];
    let mut tensors = Vec::new();
    for (n, t) in names.iter().zip(types) {
        let attrs = [("dt", super::super::testing::ty(t))];
        let inputs = vec![
            Tensor::scalar_string(tf.to_string()),
            Tensor::scalar_string(n.to_string()),
        ];
        tensors.push(run("Restore", &attrs, inputs).unwrap().remove(0));
    }
    let dir = tempfile::tempdir().unwrap();
    let ours = format!("{}/all", dir.path().display());
    let mut inputs = vec![Tensor::scalar_string(ours.clone()), names_tensor(&names)];
    inputs.extend(tensors.iter().rev().cloned());
    let mut inputs_reordered = vec![
        inputs[0].clone(),
        names_tensor(&names.iter().rev().copied().collect::<Vec<_>>()),
    ];
    inputs_reordered.extend(inputs.drain(2..));
    let dtypes_attr = dtypes(&types.iter().rev().copied().collect::<Vec<_>>());
    run("Save", &[("T", dtypes_attr)], inputs_reordered).unwrap();
    assert_eq!(std::fs::read(&ours).unwrap(), std::fs::read(tf).unwrap());
}

fn names_tensor(v: &[&str]) -> Tensor {
    names(v)
}
