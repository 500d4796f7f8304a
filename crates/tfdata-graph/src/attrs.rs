//! A graph node's attributes (`T`, `N`, `Tout`, `value`, `f`, ...) with
//! typed getters whose errors name the node and its op, so a hostile or
//! malformed graph gets a message saying which node is wrong.

use std::collections::HashMap;

use tfdata_core::{DType, Error, Result, Tensor};
use tfdata_proto::tensorflow::{AttrValue, NameAttrList, NodeDef, TensorShapeProto, attr_value};

/// The attributes of one node, borrowed from its `NodeDef`.
#[derive(Clone, Copy)]
pub struct NodeAttrs<'a> {
    pub node: &'a str,
    pub op: &'a str,
    pub attrs: &'a HashMap<String, AttrValue>,
}

impl<'a> NodeAttrs<'a> {
    pub fn of(node: &'a NodeDef) -> Self {
        NodeAttrs {
            node: &node.name,
            op: &node.op,
            attrs: &node.attr,
        }
    }

    /// An `InvalidArgument` error naming the node and its op.
    pub fn error(&self, message: impl std::fmt::Display) -> Error {
        Error::InvalidArgument(format!("{} node {:?}: {message}", self.op, self.node))
    }

    fn value(&self, key: &str) -> Option<&'a attr_value::Value> {
        self.attrs.get(key).and_then(|a| a.value.as_ref())
    }

    fn missing(&self, key: &str, want: &str) -> Error {
        self.error(format!("attribute `{key}` is missing or is not {want}"))
    }

    pub fn has(&self, key: &str) -> bool {
        self.value(key).is_some()
    }

    pub fn int(&self, key: &str) -> Result<i64> {
        match self.value(key) {
            Some(attr_value::Value::I(i)) => Ok(*i),
            _ => Err(self.missing(key, "an int")),
        }
    }

    pub fn int_or(&self, key: &str, default: i64) -> Result<i64> {
        if self.has(key) {
            self.int(key)
        } else {
            Ok(default)
        }
    }

    pub fn float(&self, key: &str) -> Result<f32> {
        match self.value(key) {
            Some(attr_value::Value::F(f)) => Ok(*f),
            _ => Err(self.missing(key, "a float")),
        }
    }

    pub fn float_or(&self, key: &str, default: f32) -> Result<f32> {
        if self.has(key) {
            self.float(key)
        } else {
            Ok(default)
        }
    }

    pub fn bool(&self, key: &str) -> Result<bool> {
        match self.value(key) {
            Some(attr_value::Value::B(b)) => Ok(*b),
            _ => Err(self.missing(key, "a bool")),
        }
    }

    pub fn bool_or(&self, key: &str, default: bool) -> Result<bool> {
        if self.has(key) {
            self.bool(key)
        } else {
            Ok(default)
        }
    }

    /// A string attribute's bytes.
    pub fn bytes(&self, key: &str) -> Result<&'a [u8]> {
        match self.value(key) {
            Some(attr_value::Value::S(s)) => Ok(s),
            _ => Err(self.missing(key, "a string")),
        }
    }

    /// A string attribute, which must be UTF-8.
    pub fn string(&self, key: &str) -> Result<&'a str> {
        std::str::from_utf8(self.bytes(key)?)
            .map_err(|_| self.error(format!("attribute `{key}` is not UTF-8")))
    }

    pub fn string_or(&self, key: &str, default: &'a str) -> Result<&'a str> {
        if self.has(key) {
            self.string(key)
        } else {
            Ok(default)
        }
    }

    /// A dtype attribute.
    pub fn dtype(&self, key: &str) -> Result<DType> {
        match self.value(key) {
            Some(attr_value::Value::Type(code)) => {
                DType::from_code(*code).map_err(|e| self.error(format!("attribute `{key}`: {e}")))
            }
            _ => Err(self.missing(key, "a type")),
        }
    }

    /// A dtype attribute's raw code (variants and resources included, which
    /// [`DType`] cannot hold).
    pub fn dtype_code(&self, key: &str) -> Result<i32> {
        match self.value(key) {
            Some(attr_value::Value::Type(code)) => Ok(*code),
            _ => Err(self.missing(key, "a type")),
        }
    }

    pub fn tensor(&self, key: &str) -> Result<Tensor> {
        match self.value(key) {
            Some(attr_value::Value::Tensor(t)) => tfdata_core::element::tensor_from_proto(t)
                .map_err(|e| self.error(format!("attribute `{key}`: {e}"))),
            _ => Err(self.missing(key, "a tensor")),
        }
    }

    pub fn shape(&self, key: &str) -> Result<&'a TensorShapeProto> {
        match self.value(key) {
            Some(attr_value::Value::Shape(s)) => Ok(s),
            _ => Err(self.missing(key, "a shape")),
        }
    }

    pub fn func(&self, key: &str) -> Result<&'a NameAttrList> {
        match self.value(key) {
            Some(attr_value::Value::Func(f)) => Ok(f),
            _ => Err(self.missing(key, "a function")),
        }
    }

    fn list(&self, key: &str) -> Option<&'a attr_value::ListValue> {
        match self.value(key) {
            Some(attr_value::Value::List(l)) => Some(l),
            _ => None,
        }
    }

    pub fn ints(&self, key: &str) -> Result<&'a [i64]> {
        self.list(key)
            .map(|l| l.i.as_slice())
            .ok_or_else(|| self.missing(key, "a list of ints"))
    }

    pub fn floats(&self, key: &str) -> Result<&'a [f32]> {
        self.list(key)
            .map(|l| l.f.as_slice())
            .ok_or_else(|| self.missing(key, "a list of floats"))
    }

    pub fn strings(&self, key: &str) -> Result<Vec<&'a [u8]>> {
        self.list(key)
            .map(|l| l.s.iter().map(|s| s.as_ref()).collect())
            .ok_or_else(|| self.missing(key, "a list of strings"))
    }

    /// A list of dtypes as raw codes (an absent list is empty: TensorFlow
    /// omits empty lists).
    pub fn dtype_codes(&self, key: &str) -> Result<Vec<i32>> {
        match self.value(key) {
            None => Ok(Vec::new()),
            Some(attr_value::Value::List(l)) => Ok(l.r#type.clone()),
            Some(_) => Err(self.missing(key, "a list of types")),
        }
    }

    /// A list of dtypes.
    pub fn dtypes(&self, key: &str) -> Result<Vec<DType>> {
        self.dtype_codes(key)?
            .into_iter()
            .map(|c| DType::from_code(c).map_err(|e| self.error(format!("attribute `{key}`: {e}"))))
            .collect()
    }

    pub fn shapes(&self, key: &str) -> Result<&'a [TensorShapeProto]> {
        match self.value(key) {
            None => Ok(&[]),
            Some(attr_value::Value::List(l)) => Ok(&l.shape),
            Some(_) => Err(self.missing(key, "a list of shapes")),
        }
    }

    pub fn tensors(&self, key: &str) -> Result<Vec<Tensor>> {
        match self.value(key) {
            None => Ok(Vec::new()),
            Some(attr_value::Value::List(l)) => l
                .tensor
                .iter()
                .map(|t| {
                    tfdata_core::element::tensor_from_proto(t)
                        .map_err(|e| self.error(format!("attribute `{key}`: {e}")))
                })
                .collect(),
            Some(_) => Err(self.missing(key, "a list of tensors")),
        }
    }

    /// A count attribute (`N`, `num`, ...), bounded so that a hostile graph
    /// cannot ask for billions of outputs.
    pub fn count(&self, key: &str) -> Result<usize> {
        let n = self.int(key)?;
        if !(0..=crate::MAX_NODE_OUTPUTS as i64).contains(&n) {
            return Err(self.error(format!(
                "attribute `{key}` = {n} is outside 0..={}",
                crate::MAX_NODE_OUTPUTS
            )));
        }
        Ok(n as usize)
    }
}
