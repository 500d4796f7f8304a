//! Element specs: the structure, dtypes and (partially known) shapes of a
//! dataset's elements, as `tf.data`'s `element_spec` describes them.
//!
//! Elements travel as a flat list of component tensors; a [`Structure`] says
//! how they nest. Dictionaries flatten in sorted key order and tuples in
//! order, as TensorFlow's `nest.flatten` does, so a component index means the
//! same thing on both sides of the wire.

use std::collections::BTreeMap;
use std::fmt;

use tfdata_core::{DType, Element, Error, Result, Tensor};

/// A shape whose rank or dimensions may be unknown (`None`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Shape(pub Option<Vec<Option<i64>>>);

impl Shape {
    pub fn known(dims: &[i64]) -> Shape {
        Shape(Some(dims.iter().map(|&d| Some(d)).collect()))
    }

    pub fn scalar() -> Shape {
        Shape(Some(vec![]))
    }

    pub fn unknown_rank() -> Shape {
        Shape(None)
    }

    pub fn rank(&self) -> Option<usize> {
        self.0.as_ref().map(Vec::len)
    }

    /// This shape with a leading dimension (batching).
    pub fn prepend(&self, dim: Option<i64>) -> Shape {
        Shape(self.0.as_ref().map(|dims| {
            let mut out = Vec::with_capacity(dims.len() + 1);
            out.push(dim);
            out.extend_from_slice(dims);
            out
        }))
    }

    /// This shape without its leading dimension (unbatching); unknown if rank 0.
    pub fn drop_first(&self) -> Result<Shape> {
        match &self.0 {
            None => Ok(Shape(None)),
            Some(dims) if dims.is_empty() => Err(Error::InvalidArgument(
                "cannot unbatch a scalar component (it has no leading dimension)".into(),
            )),
            Some(dims) => Ok(Shape(Some(dims[1..].to_vec()))),
        }
    }

    /// The most specific shape compatible with both (dimensions that differ
    /// become unknown), as TensorFlow's `most_specific_compatible_shape`.
    pub fn merge(&self, other: &Shape) -> Shape {
        match (&self.0, &other.0) {
            (Some(a), Some(b)) if a.len() == b.len() => Shape(Some(
                a.iter()
                    .zip(b)
                    .map(|(x, y)| if x == y { *x } else { None })
                    .collect(),
            )),
            _ => Shape(None),
        }
    }

    pub fn is_compatible_with(&self, dims: &[i64]) -> bool {
        match &self.0 {
            None => true,
            Some(d) => {
                d.len() == dims.len() && d.iter().zip(dims).all(|(a, b)| a.is_none_or(|a| a == *b))
            }
        }
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.0 {
            None => f.write_str("<unknown>"),
            Some(dims) => {
                f.write_str("(")?;
                for (i, d) in dims.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    match d {
                        Some(d) => write!(f, "{d}")?,
                        None => f.write_str("None")?,
                    }
                }
                if dims.len() == 1 {
                    f.write_str(",")?;
                }
                f.write_str(")")
            }
        }
    }
}

/// One component's spec (TensorFlow's `TensorSpec`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TensorSpec {
    pub dtype: DType,
    pub shape: Shape,
}

impl TensorSpec {
    pub fn new(dtype: DType, shape: Shape) -> Self {
        TensorSpec { dtype, shape }
    }

    /// The exact spec of a tensor.
    pub fn of(t: &Tensor) -> Self {
        TensorSpec {
            dtype: t.dtype(),
            shape: Shape::known(t.shape()),
        }
    }
}

impl fmt::Display for TensorSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TensorSpec(shape={}, dtype={})", self.shape, self.dtype)
    }
}

/// How components nest: a single tensor, a tuple, or a dictionary.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Structure {
    Tensor(TensorSpec),
    Tuple(Vec<Structure>),
    Dict(BTreeMap<String, Structure>),
}

impl Structure {
    /// A tuple of tensors, or the tensor itself when there is one.
    pub fn from_components(specs: Vec<TensorSpec>) -> Structure {
        if specs.len() == 1 {
            Structure::Tensor(specs.into_iter().next().expect("one spec"))
        } else {
            Structure::Tuple(specs.into_iter().map(Structure::Tensor).collect())
        }
    }

    /// The component specs in wire order.
    pub fn flatten(&self) -> Vec<&TensorSpec> {
        let mut out = Vec::new();
        self.flatten_into(&mut out);
        out
    }

    fn flatten_into<'a>(&'a self, out: &mut Vec<&'a TensorSpec>) {
        match self {
            Structure::Tensor(t) => out.push(t),
            Structure::Tuple(items) => items.iter().for_each(|s| s.flatten_into(out)),
            Structure::Dict(items) => items.values().for_each(|s| s.flatten_into(out)),
        }
    }

    pub fn num_components(&self) -> usize {
        self.flatten().len()
    }

    /// Rebuilds the structure with each component spec replaced by `f`'s result.
    pub fn map_components(
        &self,
        f: &mut impl FnMut(&TensorSpec) -> Result<TensorSpec>,
    ) -> Result<Structure> {
        Ok(match self {
            Structure::Tensor(t) => Structure::Tensor(f(t)?),
            Structure::Tuple(items) => Structure::Tuple(
                items
                    .iter()
                    .map(|s| s.map_components(f))
                    .collect::<Result<_>>()?,
            ),
            Structure::Dict(items) => Structure::Dict(
                items
                    .iter()
                    .map(|(k, s)| Ok((k.clone(), s.map_components(f)?)))
                    .collect::<Result<_>>()?,
            ),
        })
    }

    /// The component index of a top-level selector: a dictionary key, or a
    /// tuple position written as a number. A single-tensor element is index 0.
    pub fn component_index(&self, selector: &str) -> Result<usize> {
        match self {
            Structure::Tensor(_) if selector.is_empty() || selector == "0" => Ok(0),
            Structure::Dict(items) => {
                let mut index = 0;
                for (key, s) in items {
                    if key == selector {
                        return match s {
                            Structure::Tensor(_) => Ok(index),
                            _ => Err(Error::InvalidArgument(format!(
                                "component {selector:?} is not a single tensor"
                            ))),
                        };
                    }
                    index += s.num_components();
                }
                Err(Error::InvalidArgument(format!(
                    "no component {selector:?}; the element has keys {:?}",
                    items.keys().collect::<Vec<_>>()
                )))
            }
            Structure::Tuple(items) => {
                let position: usize = selector.parse().map_err(|_| {
                    Error::InvalidArgument(format!(
                        "component selector {selector:?} must be a tuple position for tuple elements"
                    ))
                })?;
                let Some(Structure::Tensor(_)) = items.get(position) else {
                    return Err(Error::InvalidArgument(format!(
                        "tuple element has no single-tensor component at position {position}"
                    )));
                };
                Ok(items[..position]
                    .iter()
                    .map(Structure::num_components)
                    .sum())
            }
            Structure::Tensor(_) => Err(Error::InvalidArgument(format!(
                "component selector {selector:?} given for an element that is a single tensor"
            ))),
        }
    }

    /// Checks that an element matches this structure (count, dtypes, shapes).
    pub fn check(&self, element: &Element) -> Result<()> {
        let specs = self.flatten();
        if specs.len() != element.components.len() {
            return Err(Error::InvalidArgument(format!(
                "element has {} components but its spec has {}",
                element.components.len(),
                specs.len()
            )));
        }
        for (i, (spec, t)) in specs.iter().zip(&element.components).enumerate() {
            if spec.dtype != t.dtype() || !spec.shape.is_compatible_with(t.shape()) {
                return Err(Error::InvalidArgument(format!(
                    "component {i} is {} {:?} but the spec says {spec}",
                    t.dtype(),
                    t.shape()
                )));
            }
        }
        Ok(())
    }

    /// The most specific structure compatible with both, or an error if
    /// nesting or dtypes differ (for `concatenate`, `interleave`, ...).
    pub fn merge(&self, other: &Structure) -> Result<Structure> {
        Ok(match (self, other) {
            (Structure::Tensor(a), Structure::Tensor(b)) if a.dtype == b.dtype => {
                Structure::Tensor(TensorSpec::new(a.dtype, a.shape.merge(&b.shape)))
            }
            (Structure::Tuple(a), Structure::Tuple(b)) if a.len() == b.len() => Structure::Tuple(
                a.iter()
                    .zip(b)
                    .map(|(x, y)| x.merge(y))
                    .collect::<Result<_>>()?,
            ),
            (Structure::Dict(a), Structure::Dict(b)) if a.keys().eq(b.keys()) => Structure::Dict(
                a.iter()
                    .zip(b.values())
                    .map(|((k, x), y)| Ok((k.clone(), x.merge(y)?)))
                    .collect::<Result<_>>()?,
            ),
            _ => {
                return Err(Error::InvalidArgument(format!(
                    "incompatible element structures: {self} vs {other}"
                )));
            }
        })
    }
}

impl fmt::Display for Structure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Structure::Tensor(t) => write!(f, "{t}"),
            // Python's notation, as TensorFlow prints element specs.
            Structure::Tuple(items) => {
                f.write_str("(")?;
                for (i, s) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{s}")?;
                }
                if items.len() == 1 {
                    f.write_str(",")?;
                }
                f.write_str(")")
            }
            Structure::Dict(items) => {
                f.write_str("{")?;
                for (i, (k, s)) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "'{k}': {s}")?;
                }
                f.write_str("}")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(dtype: DType, dims: &[i64]) -> Structure {
        Structure::Tensor(TensorSpec::new(dtype, Shape::known(dims)))
    }

    #[test]
    fn dicts_flatten_in_key_order_and_selectors_find_components() {
        let s = Structure::Dict(BTreeMap::from([
            ("label".to_string(), t(DType::Int64, &[])),
            ("image".to_string(), t(DType::UInt8, &[4, 4, 3])),
        ]));
        let flat = s.flatten();
        assert_eq!(flat[0].dtype, DType::UInt8);
        assert_eq!(s.component_index("label").unwrap(), 1);
        assert!(
            s.component_index("nope")
                .unwrap_err()
                .to_string()
                .contains("image")
        );
        let tuple = Structure::Tuple(vec![t(DType::Int64, &[]), t(DType::Float, &[2])]);
        assert_eq!(tuple.component_index("1").unwrap(), 1);
    }

    #[test]
    fn merging_forgets_differing_dimensions() {
        let a = t(DType::Float, &[2, 3]);
        let b = t(DType::Float, &[5, 3]);
        assert_eq!(
            a.merge(&b).unwrap().to_string(),
            "TensorSpec(shape=(None, 3), dtype=float32)"
        );
        assert!(a.merge(&t(DType::Int64, &[2, 3])).is_err());
        assert_eq!(Shape::known(&[7]).to_string(), "(7,)");
    }
}
