//! A graph's parts as the executor reads them: the function library by
//! name, node input references, and the graph's result node.

use std::collections::HashMap;

use prost::Message;
use tfdata_core::{Error, Result};
use tfdata_proto::tensorflow::{FunctionDef, GraphDef, NodeDef};

use crate::{MAX_FUNCTIONS, MAX_NODES};

/// The `FunctionDef`s of a graph's library, by name.
#[derive(Default)]
pub struct Library {
    functions: HashMap<String, FunctionDef>,
}

impl Library {
    /// The library of `graph`, checking its size and that names are unique.
    pub fn of(graph: &GraphDef) -> Result<Library> {
        let defs = graph
            .library
            .as_ref()
            .map(|l| l.function.as_slice())
            .unwrap_or(&[]);
        if defs.len() > MAX_FUNCTIONS {
            return Err(Error::InvalidArgument(format!(
                "dataset graph: {} functions in the library, more than the limit of {MAX_FUNCTIONS}",
                defs.len()
            )));
        }
        let mut functions = HashMap::with_capacity(defs.len());
        for f in defs {
            let name = f
                .signature
                .as_ref()
                .map(|s| s.name.clone())
                .unwrap_or_default();
            if name.is_empty() {
                return Err(Error::InvalidArgument(
                    "dataset graph: a library function has no name".into(),
                ));
            }
            if f.node_def.len() > MAX_NODES {
                return Err(Error::InvalidArgument(format!(
                    "function {name}: {} nodes, more than the limit of {MAX_NODES}",
                    f.node_def.len()
                )));
            }
            if functions.insert(name.clone(), f.clone()).is_some() {
                return Err(Error::InvalidArgument(format!(
                    "dataset graph: function {name} is defined twice"
                )));
            }
        }
        Ok(Library { functions })
    }

    pub fn get(&self, name: &str) -> Option<&FunctionDef> {
        self.functions.get(name)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.functions.contains_key(name)
    }

    /// Every function of the library, in no particular order.
    pub fn functions(&self) -> impl Iterator<Item = &FunctionDef> {
        self.functions.values()
    }
}

/// Decodes a graph received from the network, checking its size.
pub fn decode_graph(bytes: &[u8]) -> Result<GraphDef> {
    let graph = GraphDef::decode(bytes)
        .map_err(|e| Error::InvalidArgument(format!("dataset graph does not decode: {e}")))?;
    if graph.node.len() > MAX_NODES {
        return Err(Error::InvalidArgument(format!(
            "dataset graph: {} nodes, more than the limit of {MAX_NODES}",
            graph.node.len()
        )));
    }
    Ok(graph)
}

/// The node whose first input is the pipeline: the graph's `_Retval`.
pub fn retval(graph: &GraphDef) -> Result<&NodeDef> {
    let mut found = graph.node.iter().filter(|n| n.op == "_Retval");
    match (found.next(), found.next()) {
        (Some(n), None) => Ok(n),
        (None, _) => Err(Error::InvalidArgument(
            "dataset graph has no _Retval node".into(),
        )),
        (Some(_), Some(_)) => Err(Error::InvalidArgument(
            "dataset graph has more than one _Retval node".into(),
        )),
    }
}

/// One input of a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputRef<'a> {
    /// `^node`: run after `node`, use none of its outputs.
    Control(&'a str),
    /// A function argument by name (function bodies only).
    Arg(&'a str),
    /// Output `index` of `node`'s output arg `arg` (`node:arg:index` in
    /// function bodies), or its flat output `index` (`node:index` or
    /// `node` in graphs, `arg` = None).
    Output {
        node: &'a str,
        arg: Option<&'a str>,
        index: usize,
    },
}

impl<'a> InputRef<'a> {
    /// The node (or argument) this input depends on.
    pub fn source(&self) -> &'a str {
        match self {
            InputRef::Control(n) | InputRef::Arg(n) => n,
            InputRef::Output { node, .. } => node,
        }
    }
}

/// Parses a node input. In a function body (`in_function`) a bare name is
/// an argument and outputs are `node:arg:index`; in a graph they are
/// `node` or `node:index`.
pub fn parse_input(input: &str, in_function: bool) -> Result<InputRef<'_>> {
    if let Some(node) = input.strip_prefix('^') {
        return Ok(InputRef::Control(node));
    }
    let bad = || Error::InvalidArgument(format!("malformed node input {input:?}"));
    let index = |s: &str| -> Result<usize> {
        let i: usize = s.parse().map_err(|_| bad())?;
        if i >= crate::MAX_NODE_OUTPUTS {
            return Err(bad());
        }
        Ok(i)
    };
    let parts: Vec<&str> = input.split(':').collect();
    match (in_function, parts.as_slice()) {
        (_, [""]) => Err(bad()),
        (true, [name]) => Ok(InputRef::Arg(name)),
        (true, [node, arg, i]) => Ok(InputRef::Output {
            node,
            arg: Some(arg),
            index: index(i)?,
        }),
        (false, [node]) => Ok(InputRef::Output {
            node,
            arg: None,
            index: 0,
        }),
        (false, [node, i]) => Ok(InputRef::Output {
            node,
            arg: None,
            index: index(i)?,
        }),
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_parse_as_tensorflow_writes_them() {
        assert_eq!(parse_input("^a", true).unwrap(), InputRef::Control("a"));
        assert_eq!(
            parse_input("args_0", true).unwrap(),
            InputRef::Arg("args_0")
        );
        assert_eq!(
            parse_input("mul:z:0", true).unwrap(),
            InputRef::Output {
                node: "mul",
                arg: Some("z"),
                index: 0
            }
        );
        assert_eq!(
            parse_input("Const/_0", false).unwrap(),
            InputRef::Output {
                node: "Const/_0",
                arg: None,
                index: 0
            }
        );
        assert_eq!(
            parse_input("split:2", false).unwrap(),
            InputRef::Output {
                node: "split",
                arg: None,
                index: 2
            }
        );
        for bad in ["", "a:b", "a:b:c", "a:b:99999999999", "a:1:2:3"] {
            assert!(parse_input(bad, true).is_err(), "{bad}");
        }
        assert!(parse_input("a:x", false).is_err());
    }
}
