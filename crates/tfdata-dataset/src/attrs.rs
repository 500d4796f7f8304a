//! Op attributes: the named arguments of an op (`batch_size`, `seed`, a
//! function, a tensor, ...), with typed getters whose errors name the op and
//! the attribute. They convert to and from the wire's `AttrValue` and the
//! JSON text form.

use std::any::Any;
use std::collections::BTreeMap;
use std::sync::Arc;

use tfdata_core::element::{tensor_from_proto, tensor_to_proto};
use tfdata_core::{Error, Result, Tensor};
use tfdata_proto::tfdata::pipeline::{self as wire, attr_value::Value};

/// One attribute value.
#[derive(Debug, Clone, PartialEq)]
pub enum Attr {
    Int(i64),
    Float(f64),
    Str(String),
    Bool(bool),
    List(Vec<Attr>),
    Map(BTreeMap<String, Attr>),
    Tensor(Tensor),
    Function(FunctionRef),
}

/// A function by name, with arguments for built-ins.
///
/// `inline` carries the function itself when it is not in this process's
/// registry but came with the pipeline: a TensorFlow graph's `FunctionDef`,
/// translated by `tfdata-graph` (a [`crate::functions::Inline`], made with
/// `FunctionRef::inline`). It is resolved before built-ins and the
/// registry, and it does not travel: the wire and JSON forms carry the
/// name only, and [`crate::pipeline::from_pipeline_def_with`] attaches
/// bodies again by name.
#[derive(Debug, Clone)]
pub struct FunctionRef {
    pub name: String,
    pub args: Attrs,
    pub inline: Option<InlineBody>,
    /// The user declared the function deterministic (the same output for
    /// the same input, no hidden state): autocache may cache after it.
    /// Travels with the name (`FunctionRef.deterministic` on the wire).
    pub deterministic: bool,
}

/// An inline function body, type-erased because attributes sit below the
/// function types in the crate (the body is a `functions::Inline`).
#[derive(Clone)]
pub struct InlineBody(pub Arc<dyn Any + Send + Sync>);

impl std::fmt::Debug for InlineBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("InlineBody")
    }
}

/// Equal when the name and arguments are (what serialises) and both carry
/// the same inline body or none.
impl PartialEq for FunctionRef {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
            && self.args == other.args
            && self.deterministic == other.deterministic
            && match (&self.inline, &other.inline) {
                (None, None) => true,
                (Some(a), Some(b)) => Arc::ptr_eq(&a.0, &b.0),
                _ => false,
            }
    }
}

impl FunctionRef {
    pub fn named(name: &str) -> Self {
        FunctionRef::with_args(name, Attrs::new())
    }

    /// A function with arguments for a built-in.
    pub fn with_args(name: &str, args: Attrs) -> Self {
        FunctionRef {
            name: name.to_string(),
            args,
            inline: None,
            deterministic: false,
        }
    }

    /// This function, declared deterministic by its user.
    pub fn declared_deterministic(self) -> Self {
        FunctionRef {
            deterministic: true,
            ..self
        }
    }
}

/// Attaches inline bodies to the functions named in `attrs` (at any depth)
/// that `scope` knows.
pub fn attach_inline(attrs: &mut Attrs, scope: &dyn Fn(&str) -> Option<InlineBody>) {
    fn attach(attr: &mut Attr, scope: &dyn Fn(&str) -> Option<InlineBody>) {
        match attr {
            Attr::Function(f) => {
                if f.inline.is_none() {
                    f.inline = scope(&f.name);
                }
                attach_inline(&mut f.args, scope);
            }
            Attr::List(items) => items.iter_mut().for_each(|a| attach(a, scope)),
            Attr::Map(m) => m.values_mut().for_each(|a| attach(a, scope)),
            _ => {}
        }
    }
    attrs.0.values_mut().for_each(|a| attach(a, scope));
}

/// The attributes of one op.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Attrs(pub BTreeMap<String, Attr>);

impl Attrs {
    pub fn new() -> Self {
        Attrs(BTreeMap::new())
    }

    /// Adds an attribute (builder style).
    pub fn with(mut self, key: &str, value: impl Into<Attr>) -> Self {
        self.0.insert(key.to_string(), value.into());
        self
    }

    pub fn get(&self, key: &str) -> Option<&Attr> {
        self.0.get(key)
    }

    fn missing(op: &str, key: &str) -> Error {
        Error::InvalidArgument(format!("{op}: missing attribute `{key}`"))
    }

    fn wrong(op: &str, key: &str, want: &str, got: &Attr) -> Error {
        Error::InvalidArgument(format!(
            "{op}: attribute `{key}` must be {want}, got {got:?}"
        ))
    }

    pub fn int(&self, op: &str, key: &str) -> Result<i64> {
        match self.get(key) {
            Some(Attr::Int(v)) => Ok(*v),
            Some(other) => Err(Self::wrong(op, key, "an integer", other)),
            None => Err(Self::missing(op, key)),
        }
    }

    pub fn int_or(&self, op: &str, key: &str, default: i64) -> Result<i64> {
        if self.get(key).is_none() {
            Ok(default)
        } else {
            self.int(op, key)
        }
    }

    pub fn float(&self, op: &str, key: &str) -> Result<f64> {
        match self.get(key) {
            Some(Attr::Float(v)) => Ok(*v),
            Some(Attr::Int(v)) => Ok(*v as f64),
            Some(other) => Err(Self::wrong(op, key, "a number", other)),
            None => Err(Self::missing(op, key)),
        }
    }

    pub fn float_or(&self, op: &str, key: &str, default: f64) -> Result<f64> {
        if self.get(key).is_none() {
            Ok(default)
        } else {
            self.float(op, key)
        }
    }

    pub fn bool_or(&self, op: &str, key: &str, default: bool) -> Result<bool> {
        match self.get(key) {
            Some(Attr::Bool(v)) => Ok(*v),
            Some(other) => Err(Self::wrong(op, key, "a boolean", other)),
            None => Ok(default),
        }
    }

    pub fn str(&self, op: &str, key: &str) -> Result<&str> {
        match self.get(key) {
            Some(Attr::Str(v)) => Ok(v),
            Some(other) => Err(Self::wrong(op, key, "a string", other)),
            None => Err(Self::missing(op, key)),
        }
    }

    pub fn str_or<'a>(&'a self, op: &str, key: &str, default: &'a str) -> Result<&'a str> {
        if self.get(key).is_none() {
            Ok(default)
        } else {
            self.str(op, key)
        }
    }

    pub fn opt_int(&self, op: &str, key: &str) -> Result<Option<i64>> {
        match self.get(key) {
            None => Ok(None),
            Some(_) => self.int(op, key).map(Some),
        }
    }

    pub fn ints(&self, op: &str, key: &str) -> Result<Vec<i64>> {
        match self.get(key) {
            Some(Attr::List(items)) => items
                .iter()
                .map(|a| match a {
                    Attr::Int(v) => Ok(*v),
                    other => Err(Self::wrong(op, key, "a list of integers", other)),
                })
                .collect(),
            Some(other) => Err(Self::wrong(op, key, "a list of integers", other)),
            None => Err(Self::missing(op, key)),
        }
    }

    pub fn floats(&self, op: &str, key: &str) -> Result<Vec<f64>> {
        match self.get(key) {
            Some(Attr::List(items)) => items
                .iter()
                .map(|a| match a {
                    Attr::Float(v) => Ok(*v),
                    Attr::Int(v) => Ok(*v as f64),
                    other => Err(Self::wrong(op, key, "a list of numbers", other)),
                })
                .collect(),
            Some(other) => Err(Self::wrong(op, key, "a list of numbers", other)),
            None => Err(Self::missing(op, key)),
        }
    }

    pub fn strings(&self, op: &str, key: &str) -> Result<Vec<String>> {
        match self.get(key) {
            Some(Attr::List(items)) => items
                .iter()
                .map(|a| match a {
                    Attr::Str(v) => Ok(v.clone()),
                    other => Err(Self::wrong(op, key, "a list of strings", other)),
                })
                .collect(),
            Some(Attr::Str(v)) => Ok(vec![v.clone()]),
            Some(other) => Err(Self::wrong(op, key, "a list of strings", other)),
            None => Err(Self::missing(op, key)),
        }
    }

    pub fn tensor(&self, op: &str, key: &str) -> Result<&Tensor> {
        match self.get(key) {
            Some(Attr::Tensor(t)) => Ok(t),
            Some(other) => Err(Self::wrong(op, key, "a tensor", other)),
            None => Err(Self::missing(op, key)),
        }
    }

    pub fn tensors(&self, op: &str, key: &str) -> Result<Vec<Tensor>> {
        match self.get(key) {
            Some(Attr::List(items)) => items
                .iter()
                .map(|a| match a {
                    Attr::Tensor(t) => Ok(t.clone()),
                    other => Err(Self::wrong(op, key, "a list of tensors", other)),
                })
                .collect(),
            Some(other) => Err(Self::wrong(op, key, "a list of tensors", other)),
            None => Err(Self::missing(op, key)),
        }
    }

    pub fn function(&self, op: &str, key: &str) -> Result<&FunctionRef> {
        match self.get(key) {
            Some(Attr::Function(f)) => Ok(f),
            Some(Attr::Str(name)) => Err(Error::InvalidArgument(format!(
                "{op}: attribute `{key}` must be a function; write {{\"function\": {name:?}}}"
            ))),
            Some(other) => Err(Self::wrong(op, key, "a function", other)),
            None => Err(Self::missing(op, key)),
        }
    }

    pub fn map(&self, op: &str, key: &str) -> Result<&BTreeMap<String, Attr>> {
        match self.get(key) {
            Some(Attr::Map(m)) => Ok(m),
            Some(other) => Err(Self::wrong(op, key, "a map", other)),
            None => Err(Self::missing(op, key)),
        }
    }

    /// Rejects attributes the op does not know (typos must not be ignored).
    pub fn check_known(&self, op: &str, known: &[&str]) -> Result<()> {
        for key in self.0.keys() {
            if !known.contains(&key.as_str()) {
                return Err(Error::InvalidArgument(format!(
                    "{op}: unknown attribute `{key}` (known: {})",
                    known.join(", ")
                )));
            }
        }
        Ok(())
    }
}

impl From<i64> for Attr {
    fn from(v: i64) -> Self {
        Attr::Int(v)
    }
}
impl From<f64> for Attr {
    fn from(v: f64) -> Self {
        Attr::Float(v)
    }
}
impl From<bool> for Attr {
    fn from(v: bool) -> Self {
        Attr::Bool(v)
    }
}
impl From<&str> for Attr {
    fn from(v: &str) -> Self {
        Attr::Str(v.to_string())
    }
}
impl From<String> for Attr {
    fn from(v: String) -> Self {
        Attr::Str(v)
    }
}
impl From<Tensor> for Attr {
    fn from(v: Tensor) -> Self {
        Attr::Tensor(v)
    }
}
impl From<FunctionRef> for Attr {
    fn from(v: FunctionRef) -> Self {
        Attr::Function(v)
    }
}
impl From<Vec<i64>> for Attr {
    fn from(v: Vec<i64>) -> Self {
        Attr::List(v.into_iter().map(Attr::Int).collect())
    }
}
impl From<Vec<f64>> for Attr {
    fn from(v: Vec<f64>) -> Self {
        Attr::List(v.into_iter().map(Attr::Float).collect())
    }
}
impl From<Vec<String>> for Attr {
    fn from(v: Vec<String>) -> Self {
        Attr::List(v.into_iter().map(Attr::Str).collect())
    }
}
impl From<Vec<Tensor>> for Attr {
    fn from(v: Vec<Tensor>) -> Self {
        Attr::List(v.into_iter().map(Attr::Tensor).collect())
    }
}

/// Bound on attribute nesting accepted from the wire or JSON.
pub(crate) const MAX_ATTR_DEPTH: usize = 32;

pub fn attr_to_wire(a: &Attr) -> wire::AttrValue {
    let value = match a {
        Attr::Int(v) => Value::I(*v),
        Attr::Float(v) => Value::F(*v),
        Attr::Str(v) => Value::S(v.clone()),
        Attr::Bool(v) => Value::B(*v),
        Attr::List(items) => Value::List(wire::AttrList {
            values: items.iter().map(attr_to_wire).collect(),
        }),
        Attr::Map(m) => Value::Map(wire::AttrMap {
            values: m
                .iter()
                .map(|(k, v)| (k.clone(), attr_to_wire(v)))
                .collect(),
        }),
        Attr::Tensor(t) => Value::Tensor(tensor_to_proto(t)),
        Attr::Function(f) => Value::Function(wire::FunctionRef {
            name: f.name.clone(),
            args: attrs_to_wire(&f.args),
            deterministic: f.deterministic,
        }),
    };
    wire::AttrValue { value: Some(value) }
}

pub fn attrs_to_wire(a: &Attrs) -> std::collections::BTreeMap<String, wire::AttrValue> {
    a.0.iter()
        .map(|(k, v)| (k.clone(), attr_to_wire(v)))
        .collect()
}

pub fn attr_from_wire(a: &wire::AttrValue, depth: usize) -> Result<Attr> {
    if depth > MAX_ATTR_DEPTH {
        return Err(Error::InvalidArgument(format!(
            "attribute nested deeper than {MAX_ATTR_DEPTH}"
        )));
    }
    Ok(match &a.value {
        None => return Err(Error::InvalidArgument("empty attribute value".into())),
        Some(Value::I(v)) => Attr::Int(*v),
        Some(Value::F(v)) => Attr::Float(*v),
        Some(Value::S(v)) => Attr::Str(v.clone()),
        Some(Value::B(v)) => Attr::Bool(*v),
        Some(Value::List(l)) => Attr::List(
            l.values
                .iter()
                .map(|v| attr_from_wire(v, depth + 1))
                .collect::<Result<_>>()?,
        ),
        Some(Value::Map(m)) => Attr::Map(
            m.values
                .iter()
                .map(|(k, v)| Ok((k.clone(), attr_from_wire(v, depth + 1)?)))
                .collect::<Result<_>>()?,
        ),
        Some(Value::Tensor(t)) => Attr::Tensor(tensor_from_proto(t)?),
        Some(Value::Function(f)) => Attr::Function(FunctionRef {
            deterministic: f.deterministic,
            ..FunctionRef::with_args(&f.name, attrs_from_wire(&f.args, depth + 1)?)
        }),
    })
}

pub fn attrs_from_wire(
    a: &std::collections::BTreeMap<String, wire::AttrValue>,
    depth: usize,
) -> Result<Attrs> {
    Ok(Attrs(
        a.iter()
            .map(|(k, v)| Ok((k.clone(), attr_from_wire(v, depth)?)))
            .collect::<Result<_>>()?,
    ))
}
