//! `FunctionDef` bodies (and a graph's own nodes) as runnable [`Function`]s.
//!
//! [`Compiler`] turns a body into a flat plan once: nodes reachable from
//! the results (and control results), in topological order, each input
//! resolved to a slot, each node built into a step (a kernel, a constant, a
//! call, `If`/`Case`/`While`, or a node the caller's [`NodeCompiler`]
//! builds: dataset ops). [`Function::call`] then runs the plan once per
//! element: no name lookups, no graph walks, inputs moved out of their slot
//! at their last use instead of cloned.
//!
//! Hostile bodies are refused while compiling, in bounded time: duplicate
//! node names, inputs naming nothing, cycles, a function reaching itself
//! through calls, branches or loops, nesting deeper than
//! [`crate::MAX_CALL_DEPTH`]. Each function is compiled once per compiler
//! however many nodes call it, so doubled call edges cost nothing more.

mod compile;
mod exec;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use tfdata_core::{Result, Tensor};
use tfdata_proto::tensorflow::NodeDef;

pub use compile::Compiler;

use crate::kernels::Compute;

pub use crate::kernels::NodeFn;

/// What a [`NodeCompiler`] makes of a node.
pub struct CompiledNode {
    /// Output args with their tensor counts, as [`crate::kernels::KernelDef::outputs`].
    pub outputs: Vec<(String, usize)>,
    pub run: NodeFn,
}

/// Builds the nodes that neither the executor nor the kernel set knows:
/// the translator's dataset ops. `None` means "not mine".
pub trait NodeCompiler {
    fn compile_node(
        &self,
        node: &NodeDef,
        compiler: &mut Compiler<'_>,
    ) -> Option<Result<CompiledNode>>;
    /// Whether [`compile_node`](Self::compile_node) handles `op` (for
    /// [`crate::unsupported_ops`], which decides without compiling).
    fn handles(&self, op: &str) -> bool;
}

/// The ops the executor runs itself, beside the kernel set.
pub const EXECUTOR_OPS: &[&str] = &[
    "Const",
    "Identity",
    "IdentityN",
    "NoOp",
    "PartitionedCall",
    "StatefulPartitionedCall",
    "If",
    "StatelessIf",
    "Case",
    "StatelessCase",
    "While",
    "StatelessWhile",
];

/// A compiled function body.
pub struct Function {
    pub name: String,
    num_args: usize,
    steps: Vec<Step>,
    /// The slots of the results, in signature order.
    outputs: Vec<usize>,
    num_slots: usize,
    /// Nodes one call runs, counting the bodies it calls (see
    /// [`crate::MAX_CALL_COST`]).
    cost: u64,
}

impl std::fmt::Debug for Function {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Function")
            .field("name", &self.name)
            .field("num_args", &self.num_args)
            .field("steps", &self.steps.len())
            .finish()
    }
}

impl Function {
    pub fn num_args(&self) -> usize {
        self.num_args
    }

    pub fn num_outputs(&self) -> usize {
        self.outputs.len()
    }

    pub fn cost(&self) -> u64 {
        self.cost
    }
}

impl Run {
    /// Nodes this step runs (see [`crate::MAX_CALL_COST`]).
    fn cost(&self) -> u64 {
        1 + match self {
            Run::Call(f) => f.cost,
            Run::If {
                then_branch,
                else_branch,
            } => then_branch.cost.max(else_branch.cost),
            Run::Case(branches) => branches.iter().map(|b| b.cost).max().unwrap_or(0),
            Run::While { cond, body } => cond.cost.saturating_add(body.cost),
            Run::Const(_) | Run::Resource | Run::Forward | Run::Kernel(_) | Run::Node(_) => 0,
        }
    }
}

struct Step {
    node: String,
    op: String,
    /// Input slots; `true` when this is the slot's last use (moved, not cloned).
    inputs: Vec<(usize, bool)>,
    first_output: usize,
    num_outputs: usize,
    run: Run,
}

enum Run {
    Const(Tensor),
    /// A resource constant: passed along, never read.
    Resource,
    /// Identity, IdentityN: inputs become outputs.
    Forward,
    Kernel(Compute),
    Node(NodeFn),
    Call(Arc<Function>),
    If {
        then_branch: Arc<Function>,
        else_branch: Arc<Function>,
    },
    Case(Vec<Arc<Function>>),
    While {
        cond: Arc<Function>,
        body: Arc<Function>,
    },
}
