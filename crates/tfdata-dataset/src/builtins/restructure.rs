//! Built-ins that change the element's structure rather than one
//! component: `parse_example` (a serialized `tf.train.Example` to the
//! dictionary of its features) and `select` (components kept, reordered).

use std::collections::BTreeMap;
use std::sync::Arc;

use tfdata_core::{DType, Element, Error, Result};

use super::dtype_arg;
use crate::attrs::{Attr, Attrs};
use crate::example::{FeatureSpec, parse_single_example};
use crate::functions::ResolvedMap;
use crate::spec::{Shape, Structure, TensorSpec};

/// `parse_example`: one serialized `tf.train.Example` component to the
/// dictionary of its features.
pub(super) fn parse_example(args: &Attrs, input: Option<&Structure>) -> Result<ResolvedMap> {
    const NAME: &str = "parse_example";
    args.check_known(NAME, &["features", "component"])?;
    let mut features = BTreeMap::new();
    for (key, spec) in args.map(NAME, "features")? {
        let Attr::Map(fields) = spec else {
            return Err(Error::InvalidArgument(format!(
                "{NAME}: feature {key:?} must be {{\"dtype\": ..., \"shape\": [..]}}"
            )));
        };
        let fields = Attrs(fields.clone());
        let what = format!("{NAME}: feature {key:?}");
        fields.check_known(&what, &["dtype", "shape", "default", "var_len"])?;
        let dtype = dtype_arg(&what, &fields, "dtype").or_else(|e| {
            if fields.str(&what, "dtype").ok() == Some("string") {
                Ok(DType::String)
            } else {
                Err(e)
            }
        })?;
        let feature = if fields.bool_or(&what, "var_len", false)? {
            FeatureSpec::var_len(dtype)
        } else {
            let shape = match fields.get("shape") {
                None => vec![],
                Some(_) => fields.ints(&what, "shape")?,
            };
            let mut f = FeatureSpec::fixed(dtype, shape);
            if fields.get("default").is_some() {
                f = f.with_default(fields.tensor(&what, "default")?.clone());
            }
            f
        };
        feature
            .validate()
            .map_err(|e| Error::InvalidArgument(format!("{what}: {e}")))?;
        features.insert(key.clone(), feature);
    }
    if features.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "{NAME}: features must not be empty"
        )));
    }
    let selector = args.str_or(NAME, "component", "")?.to_string();
    let index = match input {
        Some(s) => {
            let i = s.component_index(&selector)?;
            let t = s.flatten()[i];
            if t.dtype != DType::String {
                return Err(Error::InvalidArgument(format!(
                    "{NAME}: expects serialized Examples (strings), got {}",
                    t.dtype
                )));
            }
            i
        }
        None => selector.parse().unwrap_or(0),
    };
    let output = Structure::Dict(
        features
            .iter()
            .map(|(k, f)| {
                let shape = match f {
                    FeatureSpec::Fixed { shape, .. } => Shape::known(shape),
                    FeatureSpec::VarLen { .. } => Shape(Some(vec![None])),
                };
                (
                    k.clone(),
                    Structure::Tensor(TensorSpec::new(f.dtype(), shape)),
                )
            })
            .collect(),
    );
    let f = move |e: Element| -> Result<Element> {
        let t = e.components.get(index).ok_or_else(|| {
            Error::InvalidArgument(format!("{NAME}: the element has no component {index}"))
        })?;
        let serialized = t.string_values()?.first().cloned().ok_or_else(|| {
            Error::InvalidArgument(format!(
                "{NAME}: expects one serialized Example per element"
            ))
        })?;
        let parsed = parse_single_example(&serialized, &features)?;
        Ok(Element::new(parsed.into_values().collect()))
    };
    Ok(ResolvedMap {
        f: Arc::new(f),
        output: Some(output),
    })
}

/// `select`: keeps the listed components, in the listed order.
pub(super) fn select(args: &Attrs, input: Option<&Structure>) -> Result<ResolvedMap> {
    const NAME: &str = "select";
    args.check_known(NAME, &["components"])?;
    let names = args.strings(NAME, "components")?;
    if names.is_empty() {
        return Err(Error::InvalidArgument(format!(
            "{NAME}: components must not be empty"
        )));
    }
    let structure = input.ok_or_else(|| {
        Error::InvalidArgument(format!(
            "{NAME}: needs to know the element structure of its input"
        ))
    })?;
    let indices = names
        .iter()
        .map(|n| structure.component_index(n))
        .collect::<Result<Vec<_>>>()?;
    let flat = structure.flatten();
    let output = Structure::from_components(indices.iter().map(|&i| flat[i].clone()).collect());
    let f = move |e: Element| -> Result<Element> {
        indices
            .iter()
            .map(|&i| {
                e.components.get(i).cloned().ok_or_else(|| {
                    Error::InvalidArgument(format!("{NAME}: the element has no component {i}"))
                })
            })
            .collect::<Result<_>>()
            .map(Element::new)
    };
    Ok(ResolvedMap {
        f: Arc::new(f),
        output: Some(output),
    })
}
