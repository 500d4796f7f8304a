//! The JSON text form of pipelines (documented in `docs/pipelines.md`), so a
//! pipeline of built-in ops can be written by hand and registered with
//! `tfdata register` for stock workers to serve.
//!
//! ```json
//! {"op": "batch", "batch_size": 2,
//!  "input": {"op": "range", "stop": 10}}
//! ```
//!
//! An op is an object with `"op"`, its input as `"input"` (or several as
//! `"inputs"`), and its attributes. Attribute values are JSON numbers,
//! strings, booleans, lists and objects, plus two tagged objects: a function
//! `{"function": "name", "args": {...}}` and a tensor
//! `{"dtype": "int64", "shape": [2], "values": [1, 2]}`.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde_json::{Map, Number, Value};
use tfdata_core::tensor::TensorData;
use tfdata_core::{DType, Error, Result, Tensor};

use crate::attrs::{Attr, Attrs, FunctionRef, MAX_ATTR_DEPTH};
use crate::dataset::Dataset;
use crate::pipeline::MAX_DEPTH;

/// A pipeline read from its JSON text form, and whether it asks for
/// compressed elements (`"compress"`, default true like `compression="AUTO"`).
pub struct JsonPipeline {
    pub dataset: Dataset,
    pub compress: bool,
}

/// Parses a pipeline: either an op object, or `{"pipeline": <op>, "compress": bool}`.
pub fn from_json(text: &str) -> Result<JsonPipeline> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| Error::InvalidArgument(format!("pipeline JSON is malformed: {e}")))?;
    let Value::Object(top) = value else {
        return Err(Error::InvalidArgument(
            "a pipeline must be a JSON object".into(),
        ));
    };
    let (op, compress) = if top.contains_key("op") {
        (Value::Object(top), true)
    } else {
        for key in top.keys() {
            if !["pipeline", "compress", "format_version"].contains(&key.as_str()) {
                return Err(Error::InvalidArgument(format!(
                    "unknown top-level key {key:?} (expected \"pipeline\", \"compress\", \"format_version\")"
                )));
            }
        }
        if let Some(v) = top.get("format_version")
            && v.as_u64() != Some(u64::from(crate::pipeline::PIPELINE_FORMAT_VERSION))
        {
            return Err(Error::InvalidArgument(format!(
                "pipeline format_version {v} is not supported (this build reads {})",
                crate::pipeline::PIPELINE_FORMAT_VERSION
            )));
        }
        let compress = match top.get("compress") {
            None => true,
            Some(Value::Bool(b)) => *b,
            Some(other) => {
                return Err(Error::InvalidArgument(format!(
                    "\"compress\" must be a boolean, got {other}"
                )));
            }
        };
        let op = top
            .get("pipeline")
            .cloned()
            .ok_or_else(|| Error::InvalidArgument("missing \"pipeline\"".into()))?;
        (op, compress)
    };
    let dataset = op_from_json(&op, "pipeline", 0)?;
    dataset.validate()?;
    Ok(JsonPipeline { dataset, compress })
}

fn op_from_json(v: &Value, path: &str, depth: usize) -> Result<Dataset> {
    if depth > MAX_DEPTH {
        return Err(Error::InvalidArgument(format!(
            "pipeline is deeper than {MAX_DEPTH} ops"
        )));
    }
    let Value::Object(obj) = v else {
        return Err(Error::InvalidArgument(format!(
            "{path}: an op must be an object with \"op\""
        )));
    };
    let name = obj
        .get("op")
        .and_then(Value::as_str)
        .ok_or_else(|| Error::InvalidArgument(format!("{path}: missing \"op\" (the op's name)")))?;
    let here = format!("{path}.{name}");
    let mut inputs = Vec::new();
    if let Some(input) = obj.get("input") {
        inputs.push(op_from_json(input, &format!("{here}.input"), depth + 1)?);
    }
    if let Some(list) = obj.get("inputs") {
        let Value::Array(items) = list else {
            return Err(Error::InvalidArgument(format!(
                "{here}: \"inputs\" must be a list of ops"
            )));
        };
        for (i, item) in items.iter().enumerate() {
            inputs.push(op_from_json(
                item,
                &format!("{here}.inputs[{i}]"),
                depth + 1,
            )?);
        }
    }
    let mut attrs = Attrs::new();
    for (key, value) in obj {
        if matches!(key.as_str(), "op" | "input" | "inputs") {
            continue;
        }
        let attr = attr_from_json(value, 0)
            .map_err(|e| Error::InvalidArgument(format!("{here}.{key}: {e}")))?;
        attrs.0.insert(key.clone(), attr);
    }
    crate::ops::build(name, inputs, &attrs).map_err(|e| match e {
        Error::InvalidArgument(m) => Error::InvalidArgument(format!("{here}: {m}")),
        other => other,
    })
}

/// A function in its JSON form, `{"function": "name", "args": {...}}` (how
/// bindings in other languages hand built-ins and their arguments over).
pub fn function_from_json(text: &str) -> Result<FunctionRef> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| Error::InvalidArgument(format!("function JSON is malformed: {e}")))?;
    match attr_from_json(&value, 0)? {
        Attr::Function(f) => Ok(f),
        _ => Err(Error::InvalidArgument(format!(
            "expected {{\"function\": name, \"args\": {{...}}}}, got {text}"
        ))),
    }
}

fn attr_from_json(v: &Value, depth: usize) -> Result<Attr> {
    if depth > MAX_ATTR_DEPTH {
        return Err(Error::InvalidArgument(format!(
            "value nested deeper than {MAX_ATTR_DEPTH}"
        )));
    }
    Ok(match v {
        Value::Null => return Err(Error::InvalidArgument("null is not a valid value".into())),
        Value::Bool(b) => Attr::Bool(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Attr::Int(i),
            None => Attr::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Value::String(s) => Attr::Str(s.clone()),
        Value::Array(items) => Attr::List(
            items
                .iter()
                .map(|i| attr_from_json(i, depth + 1))
                .collect::<Result<_>>()?,
        ),
        Value::Object(obj) if obj.contains_key("function") => {
            for key in obj.keys() {
                if !matches!(key.as_str(), "function" | "args" | "deterministic") {
                    return Err(Error::InvalidArgument(format!(
                        "a function is {{\"function\": name, \"args\": {{...}}, \"deterministic\": bool}}; \
                         unexpected key {key:?}"
                    )));
                }
            }
            // The user's declaration that the function is deterministic
            // (`FunctionRef.deterministic`, issue 36): autocache's only
            // evidence for a user function.
            let deterministic = match obj.get("deterministic") {
                None => false,
                Some(Value::Bool(b)) => *b,
                Some(other) => {
                    return Err(Error::InvalidArgument(format!(
                        "a function's \"deterministic\" must be true or false, got {other}"
                    )));
                }
            };
            let name = obj["function"]
                .as_str()
                .ok_or_else(|| Error::InvalidArgument("\"function\" must be a name".into()))?;
            let mut args = Attrs::new();
            if let Some(a) = obj.get("args") {
                let Value::Object(a) = a else {
                    return Err(Error::InvalidArgument("\"args\" must be an object".into()));
                };
                for (k, v) in a {
                    args.0.insert(k.clone(), attr_from_json(v, depth + 1)?);
                }
            }
            let f = FunctionRef::with_args(name, args);
            Attr::Function(if deterministic {
                f.declared_deterministic()
            } else {
                f
            })
        }
        Value::Object(obj) if obj.contains_key("dtype") && obj.contains_key("values") => {
            Attr::Tensor(tensor_from_json(obj)?)
        }
        Value::Object(obj) => Attr::Map(
            obj.iter()
                .map(|(k, v)| Ok((k.clone(), attr_from_json(v, depth + 1)?)))
                .collect::<Result<BTreeMap<_, _>>>()?,
        ),
    })
}

fn dtype_from_name(name: &str) -> Result<DType> {
    let all = [
        DType::Float,
        DType::Double,
        DType::Int32,
        DType::UInt8,
        DType::Int16,
        DType::Int8,
        DType::String,
        DType::Int64,
        DType::Bool,
        DType::UInt16,
        DType::UInt32,
        DType::UInt64,
        DType::Half,
        DType::BFloat16,
    ];
    let name = match name {
        "float" => "float32",
        "double" => "float64",
        "half" => "float16",
        other => other,
    };
    all.into_iter().find(|d| d.name() == name).ok_or_else(|| {
        Error::InvalidArgument(format!(
            "unknown or unsupported dtype {name:?} in a JSON tensor"
        ))
    })
}

fn tensor_from_json(obj: &Map<String, Value>) -> Result<Tensor> {
    for key in obj.keys() {
        if !["dtype", "shape", "values"].contains(&key.as_str()) {
            return Err(Error::InvalidArgument(format!(
                "a tensor has dtype, shape and values; unexpected key {key:?}"
            )));
        }
    }
    let dtype = dtype_from_name(obj["dtype"].as_str().unwrap_or_default())?;
    let (values, default_shape): (Vec<&Value>, Vec<i64>) = match &obj["values"] {
        Value::Array(items) => (items.iter().collect(), vec![items.len() as i64]),
        scalar => (vec![scalar], vec![]),
    };
    let shape = match obj.get("shape") {
        None => default_shape,
        Some(Value::Array(dims)) => dims
            .iter()
            .map(|d| d.as_i64().filter(|&d| d >= 0))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| Error::InvalidArgument("tensor shape must be a list of sizes".into()))?,
        Some(_) => {
            return Err(Error::InvalidArgument(
                "tensor shape must be a list of sizes".into(),
            ));
        }
    };
    let bad =
        |v: &Value| Error::InvalidArgument(format!("value {v} does not fit a {dtype} tensor"));
    let data = match dtype {
        DType::String => TensorData::Strings(
            values
                .iter()
                .map(|v| {
                    v.as_str()
                        .map(|s| Bytes::from(s.to_string()))
                        .ok_or_else(|| bad(v))
                })
                .collect::<Result<_>>()?,
        ),
        _ => {
            let mut buf = Vec::new();
            for v in &values {
                match dtype {
                    DType::Float => buf.extend_from_slice(
                        &(v.as_f64().ok_or_else(|| bad(v))? as f32).to_le_bytes(),
                    ),
                    DType::Double => {
                        buf.extend_from_slice(&v.as_f64().ok_or_else(|| bad(v))?.to_le_bytes())
                    }
                    DType::Bool => buf.push(u8::from(v.as_bool().ok_or_else(|| bad(v))?)),
                    DType::UInt64 => {
                        buf.extend_from_slice(&v.as_u64().ok_or_else(|| bad(v))?.to_le_bytes())
                    }
                    _ => {
                        let i = v.as_i64().ok_or_else(|| bad(v))?;
                        let size = dtype.size().unwrap_or(8);
                        let fits = match dtype {
                            DType::Int8 => i8::try_from(i).is_ok(),
                            DType::UInt8 => u8::try_from(i).is_ok(),
                            DType::Int16 => i16::try_from(i).is_ok(),
                            DType::UInt16 => u16::try_from(i).is_ok(),
                            DType::Int32 => i32::try_from(i).is_ok(),
                            DType::UInt32 => u32::try_from(i).is_ok(),
                            DType::Int64 => true,
                            _ => false,
                        };
                        if !fits {
                            return Err(bad(v));
                        }
                        buf.extend_from_slice(&i.to_le_bytes()[..size]);
                    }
                }
            }
            TensorData::Buffer(buf.into())
        }
    };
    Tensor::new(dtype, shape, data)
}

/// The JSON text form of a dataset (inverse of [`from_json`]).
pub fn to_json(dataset: &Dataset, compress: bool) -> Result<String> {
    dataset.validate()?;
    let v = serde_json::json!({
        "format_version": crate::pipeline::PIPELINE_FORMAT_VERSION,
        "compress": compress,
        "pipeline": op_to_json(dataset)?,
    });
    serde_json::to_string_pretty(&v).map_err(|e| Error::Internal(format!("writing JSON: {e}")))
}

fn op_to_json(ds: &Dataset) -> Result<Value> {
    let mut obj = Map::new();
    obj.insert("op".into(), Value::String(ds.op().name().into()));
    let inputs = ds.op().inputs();
    match inputs.as_slice() {
        [] => {}
        [one] if !matches!(ds.op().name(), "zip" | "concatenate") => {
            obj.insert("input".into(), op_to_json(one)?);
        }
        many => {
            obj.insert(
                "inputs".into(),
                Value::Array(many.iter().map(op_to_json).collect::<Result<_>>()?),
            );
        }
    }
    for (k, v) in ds.op().attrs().0 {
        obj.insert(k, attr_to_json(&v)?);
    }
    Ok(Value::Object(obj))
}

fn attr_to_json(a: &Attr) -> Result<Value> {
    Ok(match a {
        Attr::Int(v) => Value::Number((*v).into()),
        Attr::Float(v) => Number::from_f64(*v)
            .map(Value::Number)
            .ok_or_else(|| Error::InvalidArgument(format!("{v} cannot be written as JSON")))?,
        Attr::Str(v) => Value::String(v.clone()),
        Attr::Bool(v) => Value::Bool(*v),
        Attr::List(items) => Value::Array(items.iter().map(attr_to_json).collect::<Result<_>>()?),
        Attr::Map(m) => Value::Object(
            m.iter()
                .map(|(k, v)| Ok((k.clone(), attr_to_json(v)?)))
                .collect::<Result<_>>()?,
        ),
        Attr::Function(f) => {
            let mut obj = Map::new();
            obj.insert("function".into(), Value::String(f.name.clone()));
            if !f.args.0.is_empty() {
                obj.insert(
                    "args".into(),
                    Value::Object(
                        f.args
                            .0
                            .iter()
                            .map(|(k, v)| Ok((k.clone(), attr_to_json(v)?)))
                            .collect::<Result<_>>()?,
                    ),
                );
            }
            // Written only when declared, so older pipelines' JSON is unchanged.
            if f.deterministic {
                obj.insert("deterministic".into(), Value::Bool(true));
            }
            Value::Object(obj)
        }
        Attr::Tensor(t) => tensor_to_json(t)?,
    })
}

fn tensor_to_json(t: &Tensor) -> Result<Value> {
    macro_rules! nums {
        ($ty:ty) => {
            t.to_vec::<$ty>()?
                .into_iter()
                .map(|v| serde_json::json!(v))
                .collect::<Vec<_>>()
        };
    }
    let values: Vec<Value> = match t.dtype() {
        DType::String => t
            .string_values()?
            .iter()
            .map(|b| {
                std::str::from_utf8(b)
                    .map(|s| Value::String(s.to_string()))
                    .map_err(|_| {
                        Error::InvalidArgument(
                            "binary strings cannot be written as JSON text".into(),
                        )
                    })
            })
            .collect::<Result<_>>()?,
        DType::Int64 => nums!(i64),
        DType::Int32 => nums!(i32),
        DType::Int16 => nums!(i16),
        DType::Int8 => nums!(i8),
        DType::UInt8 => nums!(u8),
        DType::UInt16 => nums!(u16),
        DType::UInt32 => nums!(u32),
        DType::UInt64 => nums!(u64),
        DType::Float => nums!(f32),
        DType::Double => nums!(f64),
        DType::Bool => nums!(bool),
        other => {
            return Err(Error::Unimplemented(format!(
                "{other} tensors have no JSON form"
            )));
        }
    };
    Ok(serde_json::json!({"dtype": t.dtype().name(), "shape": t.shape(), "values": values}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_example_and_round_trips() {
        let p =
            from_json(r#"{"op": "batch", "batch_size": 2, "input": {"op": "range", "stop": 10}}"#)
                .unwrap();
        assert!(p.compress);
        assert_eq!(p.dataset, Dataset::range(10).batch(2, false));
        let ds = Dataset::zip(vec![
            Dataset::from_tensor_slices(vec![
                Tensor::strings(vec!["a".into(), "b".into()], vec![2]).unwrap(),
            ]),
            Dataset::range(5).shuffle(3, Some(1), false),
        ])
        .padded_batch(2, None, None, true)
        .take(1);
        let text = to_json(&ds, false).unwrap();
        let back = from_json(&text).unwrap();
        assert!(!back.compress);
        assert_eq!(back.dataset, ds);
    }

    #[test]
    fn a_declared_deterministic_function_keeps_its_declaration() {
        let f = function_from_json(r#"{"function": "parse", "deterministic": true}"#).unwrap();
        assert!(f.deterministic);
        let plain = function_from_json(r#"{"function": "parse"}"#).unwrap();
        assert!(!plain.deterministic);
        let ds = Dataset::range(4).map_with(f.clone(), None, true);
        let text = to_json(&ds, true).unwrap();
        assert!(text.contains("\"deterministic\": true"), "{text}");
        assert_eq!(from_json(&text).unwrap().dataset, ds);
        // Undeclared functions write no key: older pipelines' JSON is unchanged.
        let text = to_json(&Dataset::range(4).map_with(plain, None, true), true).unwrap();
        assert!(!text.contains("deterministic"), "{text}");
        let wire = crate::pipeline::to_pipeline_def(&ds, true).unwrap();
        assert_eq!(crate::pipeline::from_pipeline_def(&wire).unwrap(), ds);

        let err = function_from_json(r#"{"function": "parse", "deterministic": "yes"}"#)
            .err()
            .unwrap();
        assert!(err.to_string().contains("true or false"), "{err}");
    }

    #[test]
    fn fixed_length_records_and_assert_cardinality_round_trip() {
        let p = from_json(
            r#"{"op": "assert_cardinality", "expected_cardinality": 4, "input": {
                "op": "fixed_length_record_dataset", "filenames": ["a.bin", "b.bin"],
                "header_bytes": 2, "record_bytes": 3, "compression_type": "GZIP"}}"#,
        )
        .unwrap();
        let ds = Dataset::fixed_length_records(&["a.bin", "b.bin"], 2, 3, 0, "GZIP")
            .assert_cardinality(4);
        assert_eq!(p.dataset, ds);
        assert_eq!(p.dataset.cardinality(), 4);
        let back = from_json(&to_json(&ds, true).unwrap()).unwrap();
        assert_eq!(back.dataset, ds);
        let wire = crate::pipeline::to_pipeline_def(&ds, false).unwrap();
        assert_eq!(crate::pipeline::from_pipeline_def(&wire).unwrap(), ds);

        let err = from_json(r#"{"op": "fixed_length_record_dataset", "filenames": ["a"]}"#)
            .err()
            .unwrap();
        assert!(err.to_string().contains("record_bytes"), "{err}");
        let err = from_json(
            r#"{"op": "fixed_length_record_dataset", "filenames": ["a"], "record_bytes": 0}"#,
        )
        .err()
        .unwrap();
        assert!(err.to_string().contains("must be > 0"), "{err}");
    }

    #[test]
    fn errors_say_where() {
        let err = from_json(r#"{"op": "batch", "input": {"op": "range", "stop": 10}}"#)
            .err()
            .unwrap();
        assert!(
            err.to_string().contains("pipeline.batch") && err.to_string().contains("batch_size"),
            "{err}"
        );
        let err = from_json(r#"{"op": "take", "count": 1, "input": {"op": "ragne", "stop": 3}}"#)
            .err()
            .unwrap();
        assert!(err.to_string().contains("ragne"), "{err}");
        let err = from_json(r#"{"op": "range", "stop": "ten"}"#)
            .err()
            .unwrap();
        assert!(err.to_string().contains("stop"), "{err}");
        let err = from_json("{not json").err().unwrap();
        assert!(err.to_string().contains("malformed"), "{err}");
        let err =
            from_json(r#"{"op": "map", "function": "f", "input": {"op": "range", "stop": 3}}"#)
                .err()
                .unwrap();
        assert!(err.to_string().contains("\"function\""), "{err}");
    }
}
