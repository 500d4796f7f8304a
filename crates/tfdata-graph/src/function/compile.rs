//! Building a [`Function`]'s plan from a `FunctionDef` or a graph.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use tfdata_core::{Error, Result};
use tfdata_proto::tensorflow::{FunctionDef, GraphDef, NodeDef, attr_value};

use super::{EXECUTOR_OPS, Function, NodeCompiler, Run, Step};
use crate::attrs::NodeAttrs;
use crate::graph::{InputRef, Library, parse_input, retval};
use crate::{MAX_CALL_COST, MAX_CALL_DEPTH, MAX_DATASET_NODES, kernels};

/// Compiles functions of one library, each once (see the module docs).
pub struct Compiler<'a> {
    library: &'a Library,
    nodes: &'a dyn NodeCompiler,
    memo: HashMap<String, Arc<Function>>,
    /// Functions being compiled, outermost first: a name already here is a
    /// function reaching itself.
    stack: Vec<String>,
}

/// A body to compile: a function's or a graph's.
struct Body<'b> {
    name: &'b str,
    nodes: Vec<&'b NodeDef>,
    args: Vec<&'b str>,
    /// Result references, in order.
    rets: Vec<&'b str>,
    /// Nodes that must run though no result needs them.
    control_rets: Vec<&'b str>,
    in_function: bool,
}

impl<'a> Compiler<'a> {
    pub fn new(library: &'a Library, nodes: &'a dyn NodeCompiler) -> Self {
        Compiler {
            library,
            nodes,
            memo: HashMap::new(),
            stack: Vec::new(),
        }
    }

    pub fn library(&self) -> &'a Library {
        self.library
    }

    /// The library function `name`, compiled (once).
    pub fn function(&mut self, name: &str) -> Result<Arc<Function>> {
        if let Some(f) = self.memo.get(name) {
            return Ok(f.clone());
        }
        if self.stack.iter().any(|s| s == name) {
            return Err(Error::InvalidArgument(format!(
                "function {name} calls itself (through {})",
                self.stack.join(" -> ")
            )));
        }
        if self.stack.len() >= MAX_CALL_DEPTH {
            return Err(Error::InvalidArgument(format!(
                "functions nest deeper than {MAX_CALL_DEPTH} calls (at {name})"
            )));
        }
        let library = self.library;
        let def = library
            .get(name)
            .ok_or_else(|| Error::InvalidArgument(format!("no function {name} in the library")))?;
        let body = function_body(name, def)?;
        self.stack.push(name.to_string());
        let compiled = self.body(&body);
        self.stack.pop();
        let f = Arc::new(compiled?);
        self.memo.insert(name.to_string(), f.clone());
        Ok(f)
    }

    /// A dataset graph as a function of no arguments whose one result is
    /// the `_Retval` node's input.
    pub fn graph(&mut self, graph: &GraphDef) -> Result<Function> {
        let ret = retval(graph)?;
        let result = ret.input.first().ok_or_else(|| {
            Error::InvalidArgument("dataset graph: the _Retval node has no input".into())
        })?;
        self.graph_result(graph, result)
    }

    /// A dataset graph as a function of no arguments whose one result is
    /// the node output `result` names.
    pub fn graph_result(&mut self, graph: &GraphDef, result: &str) -> Result<Function> {
        self.body(&Body {
            name: "the dataset graph",
            nodes: graph.node.iter().filter(|n| n.op != "_Retval").collect(),
            args: Vec::new(),
            rets: vec![result],
            control_rets: Vec::new(),
            in_function: false,
        })
    }

    fn body(&mut self, body: &Body<'_>) -> Result<Function> {
        let fname = body.name;
        let mut index: HashMap<&str, usize> = HashMap::with_capacity(body.nodes.len());
        for (i, n) in body.nodes.iter().enumerate() {
            if index.insert(n.name.as_str(), i).is_some() {
                return Err(Error::InvalidArgument(format!(
                    "{fname}: two nodes are named {:?}",
                    n.name
                )));
            }
        }
        let args: HashMap<&str, usize> =
            body.args.iter().enumerate().map(|(i, a)| (*a, i)).collect();
        let source_of = |r: &InputRef<'_>, user: &str| -> Result<Option<usize>> {
            match r {
                InputRef::Arg(a) if args.contains_key(a) => Ok(None),
                InputRef::Arg(a) => Err(Error::InvalidArgument(format!(
                    "{fname}: {user} names {a:?}, which is neither an argument nor a node output"
                ))),
                InputRef::Control(n) | InputRef::Output { node: n, .. } => {
                    index.get(n).copied().map(Some).ok_or_else(|| {
                        Error::InvalidArgument(format!("{fname}: {user} names no node {n:?}"))
                    })
                }
            }
        };

        // Reachable from the results: the only nodes that run.
        let mut parsed: Vec<Option<Vec<InputRef<'_>>>> = vec![None; body.nodes.len()];
        let mut reachable = vec![false; body.nodes.len()];
        let mut todo: Vec<usize> = Vec::new();
        for r in &body.rets {
            if let Some(i) = source_of(&parse_input(r, body.in_function)?, "a result")? {
                todo.push(i);
            }
        }
        for c in &body.control_rets {
            let i = index.get(c).copied().ok_or_else(|| {
                Error::InvalidArgument(format!("{fname}: control result names no node {c:?}"))
            })?;
            todo.push(i);
        }
        while let Some(i) = todo.pop() {
            if reachable[i] {
                continue;
            }
            reachable[i] = true;
            let node = body.nodes[i];
            let inputs = node
                .input
                .iter()
                .map(|s| parse_input(s, body.in_function))
                .collect::<Result<Vec<_>>>()
                .map_err(|e| {
                    Error::InvalidArgument(format!("{fname}: node {:?}: {e}", node.name))
                })?;
            for r in &inputs {
                if let Some(j) = source_of(r, &format!("node {:?}", node.name))? {
                    todo.push(j);
                }
            }
            parsed[i] = Some(inputs);
        }

        // Topological order (Kahn), which also finds cycles.
        let mut users: Vec<Vec<usize>> = vec![Vec::new(); body.nodes.len()];
        let mut pending = vec![0usize; body.nodes.len()];
        for (i, inputs) in parsed.iter().enumerate() {
            for r in inputs.iter().flatten() {
                if let Some(j) = source_of(r, "")? {
                    users[j].push(i);
                    pending[i] += 1;
                }
            }
        }
        let mut ready: VecDeque<usize> = (0..body.nodes.len())
            .filter(|&i| reachable[i] && pending[i] == 0)
            .collect();
        let mut order = Vec::new();
        while let Some(i) = ready.pop_front() {
            order.push(i);
            for &u in &users[i] {
                pending[u] -= 1;
                if pending[u] == 0 {
                    ready.push_back(u);
                }
            }
        }
        let live = reachable.iter().filter(|r| **r).count();
        if order.len() != live {
            let stuck = (0..body.nodes.len())
                .find(|&i| reachable[i] && pending[i] > 0)
                .map(|i| body.nodes[i].name.as_str())
                .unwrap_or("?");
            return Err(Error::InvalidArgument(format!(
                "{fname}: its nodes form a cycle (through {stuck:?})"
            )));
        }

        // Steps, and where each node's outputs live.
        let handed_over = order
            .iter()
            .filter(|&&i| {
                let op = body.nodes[i].op.as_str();
                !EXECUTOR_OPS.contains(&op) && !kernels::runs(op) && self.nodes.handles(op)
            })
            .count();
        if handed_over > MAX_DATASET_NODES {
            return Err(Error::InvalidArgument(format!(
                "{fname}: more than {MAX_DATASET_NODES} dataset nodes"
            )));
        }
        let mut next_slot = body.args.len();
        let mut layout: HashMap<usize, (usize, Vec<(String, usize)>)> = HashMap::new();
        let mut steps = Vec::with_capacity(order.len());
        for &i in &order {
            let node = body.nodes[i];
            let (outputs, run) = self.node(node).map_err(|e| in_node(e, fname, node))?;
            let num_outputs: usize = outputs.iter().map(|(_, n)| n).sum();
            layout.insert(i, (next_slot, outputs));
            steps.push(Step {
                node: node.name.clone(),
                op: node.op.clone(),
                inputs: Vec::new(),
                first_output: next_slot,
                num_outputs,
                run,
            });
            next_slot += num_outputs;
        }
        let slot_of = |r: &InputRef<'_>, user: &str| -> Result<Option<usize>> {
            match r {
                InputRef::Control(_) => Ok(None),
                InputRef::Arg(a) => Ok(args.get(a).copied()),
                InputRef::Output {
                    node,
                    arg,
                    index: k,
                } => {
                    let i = index[node];
                    let (first, outputs) = &layout[&i];
                    let (offset, count) = match arg {
                        // Graph inputs count outputs flat.
                        None => (0, outputs.iter().map(|(_, n)| n).sum()),
                        Some(arg) => {
                            let mut offset = 0;
                            let mut found = None;
                            for (name, n) in outputs {
                                if name == arg {
                                    found = Some((offset, *n));
                                    break;
                                }
                                offset += n;
                            }
                            found.ok_or_else(|| {
                                Error::InvalidArgument(format!(
                                    "{fname}: {user} reads output {arg:?} of node {node:?}, which has none"
                                ))
                            })?
                        }
                    };
                    if *k >= count {
                        return Err(Error::InvalidArgument(format!(
                            "{fname}: {user} reads output {k} of node {node:?}, which has {count}"
                        )));
                    }
                    Ok(Some(first + offset + k))
                }
            }
        };
        for (step, &i) in steps.iter_mut().zip(&order) {
            let user = format!("node {:?}", step.node);
            for r in parsed[i].iter().flatten() {
                if let Some(s) = slot_of(r, &user)? {
                    step.inputs.push((s, false));
                }
            }
        }
        let mut outputs = Vec::with_capacity(body.rets.len());
        for r in &body.rets {
            let s = slot_of(&parse_input(r, body.in_function)?, "a result")?.ok_or_else(|| {
                Error::InvalidArgument(format!("{fname}: a result is a control input"))
            })?;
            outputs.push(s);
        }

        // An input is moved out of its slot at its last use; results are
        // read after every step, so their slots never move.
        let mut last_use: HashMap<usize, (usize, usize)> = HashMap::new();
        for (si, step) in steps.iter().enumerate() {
            for (ii, (s, _)) in step.inputs.iter().enumerate() {
                last_use.insert(*s, (si, ii));
            }
        }
        for s in &outputs {
            last_use.remove(s);
        }
        for (s, (si, ii)) in last_use {
            steps[si].inputs[ii] = (s, true);
        }

        let cost = steps
            .iter()
            .fold(0u64, |c, s| c.saturating_add(s.run.cost()));
        if cost > MAX_CALL_COST {
            return Err(Error::InvalidArgument(format!(
                "{fname}: one call would run more than {MAX_CALL_COST} nodes (counting the \
                 functions it calls, each as often as it is called)"
            )));
        }
        Ok(Function {
            name: fname.to_string(),
            cost,
            num_args: body.args.len(),
            steps,
            outputs,
            num_slots: next_slot,
        })
    }

    /// One node's output args and its step.
    fn node(&mut self, node: &NodeDef) -> Result<(Vec<(String, usize)>, Run)> {
        let attrs = NodeAttrs::of(node);
        let data_inputs = node.input.iter().filter(|i| !i.starts_with('^')).count();
        let out = |n: usize| vec![("output".to_string(), n)];
        // A variant constant of tensors is a folded serialized
        // SparseTensor (or of RaggedTensors), carried in its string form.
        if node.op == "Const"
            && matches!(attrs.dtype_code("dtype"), Ok(21))
            && let Some(t) = variant_tensors(node)
        {
            return Ok((out(1), Run::Const(t)));
        }
        Ok(match node.op.as_str() {
            // Resource and other variant constants are handles TensorFlow
            // serialised (a seed generator's, for instance).
            "Const" if matches!(attrs.dtype_code("dtype"), Ok(20 | 21)) => (out(1), Run::Resource),
            "Const" => (out(1), Run::Const(attrs.tensor("value")?)),
            "Identity" => (out(1), Run::Forward),
            "IdentityN" => (out(data_inputs), Run::Forward),
            "NoOp" => (Vec::new(), Run::Forward),
            "PartitionedCall" | "StatefulPartitionedCall" => {
                let f = self.function(&attrs.func("f")?.name)?;
                (out(f.num_outputs()), Run::Call(f))
            }
            "If" | "StatelessIf" => {
                let then_branch = self.function(&attrs.func("then_branch")?.name)?;
                let else_branch = self.function(&attrs.func("else_branch")?.name)?;
                if then_branch.num_outputs() != else_branch.num_outputs() {
                    return Err(attrs.error("its branches return different numbers of values"));
                }
                (
                    out(then_branch.num_outputs()),
                    Run::If {
                        then_branch,
                        else_branch,
                    },
                )
            }
            "Case" | "StatelessCase" => {
                let names: Vec<String> =
                    match attrs.attrs.get("branches").and_then(|a| a.value.as_ref()) {
                        Some(attr_value::Value::List(l)) => {
                            l.func.iter().map(|f| f.name.clone()).collect()
                        }
                        _ => return Err(attrs.error("attribute `branches` is missing")),
                    };
                let branches = names
                    .iter()
                    .map(|n| self.function(n))
                    .collect::<Result<Vec<_>>>()?;
                let n = branches
                    .first()
                    .map(|b| b.num_outputs())
                    .ok_or_else(|| attrs.error("no branches"))?;
                if branches.iter().any(|b| b.num_outputs() != n) {
                    return Err(attrs.error("its branches return different numbers of values"));
                }
                (out(n), Run::Case(branches))
            }
            "While" | "StatelessWhile" => {
                let cond = self.function(&attrs.func("cond")?.name)?;
                let body = self.function(&attrs.func("body")?.name)?;
                if body.num_outputs() != data_inputs || cond.num_outputs() != 1 {
                    return Err(attrs.error(
                        "its body must return as many values as the loop carries, and its condition one",
                    ));
                }
                (out(data_inputs), Run::While { cond, body })
            }
            op if self.library.contains(op) => {
                let def = self.library.get(op).and_then(|d| d.signature.as_ref());
                let names: Vec<(String, usize)> = def
                    .map(|s| s.output_arg.iter().map(|a| (a.name.clone(), 1)).collect())
                    .unwrap_or_default();
                let f = self.function(op)?;
                (names, Run::Call(f))
            }
            op => {
                if let Some(k) = kernels::lookup(op) {
                    let outputs = (k.outputs)(&attrs)?
                        .into_iter()
                        .map(|(n, c)| (n.to_string(), c))
                        .collect();
                    (outputs, Run::Kernel((k.build)(&attrs)?))
                } else if let Some(k) = kernels::resource_lookup(op) {
                    let outputs = (k.outputs)(&attrs)?
                        .into_iter()
                        .map(|(n, c)| (n.to_string(), c))
                        .collect();
                    (outputs, Run::Node((k.build)(&attrs)?))
                } else {
                    let nodes = self.nodes;
                    match nodes.compile_node(node, self) {
                        Some(compiled) => {
                            let compiled = compiled?;
                            (compiled.outputs, Run::Node(compiled.run))
                        }
                        None => {
                            return Err(Error::Unimplemented(format!(
                                "op {op} is not supported by tfdata workers"
                            )));
                        }
                    }
                }
            }
        })
    }
}

fn function_body<'d>(name: &'d str, def: &'d FunctionDef) -> Result<Body<'d>> {
    let sig = def
        .signature
        .as_ref()
        .ok_or_else(|| Error::InvalidArgument(format!("function {name} has no signature")))?;
    for a in sig.input_arg.iter().chain(&sig.output_arg) {
        if !a.number_attr.is_empty() || !a.type_list_attr.is_empty() {
            return Err(Error::Unimplemented(format!(
                "function {name}: list argument {:?} (tfdata runs functions of single tensors)",
                a.name
            )));
        }
    }
    let rets = sig
        .output_arg
        .iter()
        .map(|a| {
            def.ret.get(&a.name).map(String::as_str).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "function {name}: result {:?} is not defined",
                    a.name
                ))
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Body {
        name,
        nodes: def.node_def.iter().collect(),
        args: sig.input_arg.iter().map(|a| a.name.as_str()).collect(),
        rets,
        control_rets: def.control_ret.values().map(String::as_str).collect(),
        in_function: true,
    })
}

/// A `DT_VARIANT` constant's value, if it holds tensors (a folded
/// serialized SparseTensor) or RaggedTensors (`from_tensor_slices(ragged)`).
fn variant_tensors(node: &NodeDef) -> Option<tfdata_core::Tensor> {
    match node.attr.get("value").and_then(|a| a.value.as_ref()) {
        Some(attr_value::Value::Tensor(t)) => kernels::sparse_tensor::variant_constant(t)
            .or_else(|| kernels::ragged_variant::variant_constant(t)),
        _ => None,
    }
}

fn in_node(e: Error, fname: &str, node: &NodeDef) -> Error {
    Error::Context {
        context: Some(format!("{fname}: node {:?} ({})", node.name, node.op)),
        source: Arc::new(e),
    }
}
