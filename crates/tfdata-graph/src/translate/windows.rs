//! Dataset nodes that gather elements or carry state across them:
//! `WindowDataset`, `ScanDataset`, `GroupByWindowDataset`,
//! `GroupByReducerDataset`. Their functions
//! receive windows as dataset arguments (see [`Arg::Window`]).

use std::sync::Arc;

use tfdata_core::Error;
use tfdata_core::Result;
use tfdata_dataset::spec::{Shape, Structure, TensorSpec};
use tfdata_proto::tensorflow::NodeDef;

use super::inline::{self, Arg, Bound};
use super::node::{captured, element_args, function, handle, tensors};
use crate::attrs::NodeAttrs;
use crate::function::{CompiledNode, Compiler};

/// The node compiled, if it is one of this module's.
pub(super) fn compile(
    node: &NodeDef,
    compiler: &mut Compiler<'_>,
    attrs: &NodeAttrs,
    spec: &Option<Structure>,
) -> Result<Option<CompiledNode>> {
    let spec = spec.clone();
    Ok(Some(match node.op.as_str() {
        "WindowDataset" => handle(
            |mut i| {
                let input = i.dataset()?;
                let size = i.int("size")?;
                let shift = i.int("shift")?;
                let stride = i.int("stride")?;
                let drop = i.bool("drop_remainder")?;
                let ds = input.window(size, shift, stride, drop);
                // Bad sizes come from the graph: refused here with
                // TensorFlow's message, as its kernel does on construction.
                ds.validate()?;
                Ok(ds)
            },
            node,
        ),
        "ScanDataset" | "ExperimentalScanDataset" => {
            let f = function(attrs, "f", compiler)?;
            let n = captured(attrs)?;
            let args = element_args(attrs, "f", n, compiler)?;
            let n_state = attrs.dtype_codes("Tstate")?.len();
            let preserve = attrs.bool_or("preserve_cardinality", false)?;
            let node_name = node.name.clone();
            handle(
                move |mut i| {
                    let input = i.dataset()?;
                    let state = tensors(i.take(Some(n_state))?, "initial_state")?;
                    let captured = i.take(Some(n))?;
                    // The function returns the new state, then the
                    // declared output: the state's specs only count it.
                    let output = spec.as_ref().map(|s| {
                        let mut specs: Vec<_> = state
                            .iter()
                            .map(|t| TensorSpec::new(t.dtype(), Shape::unknown_rank()))
                            .collect();
                        specs.extend(s.flatten().into_iter().cloned());
                        Structure::from_components(specs)
                    });
                    let f = inline::map(
                        Bound {
                            function: f.clone(),
                            captured,
                            node: node_name.clone(),
                            args: args.clone(),
                        },
                        output,
                    );
                    Ok(input.scan(state, f, preserve))
                },
                node,
            )
        }
        "GroupByWindowDataset" | "ExperimentalGroupByWindowDataset" => {
            let key = Fn::compile(attrs, "key_func", "Tkey_func_other_arguments", compiler)?;
            let reduce = Fn::compile(
                attrs,
                "reduce_func",
                "Treduce_func_other_arguments",
                compiler,
            )?;
            let size = Fn::compile(
                attrs,
                "window_size_func",
                "Twindow_size_func_other_arguments",
                compiler,
            )?;
            let node_name = node.name.clone();
            handle(
                move |mut i| {
                    let input = i.dataset()?;
                    let key_captured = i.take(Some(key.captured))?;
                    let reduce_captured = i.take(Some(reduce.captured))?;
                    let size_captured = i.take(Some(size.captured))?;
                    let int64 = Structure::Tensor(TensorSpec::new(
                        tfdata_core::DType::Int64,
                        Shape::scalar(),
                    ));
                    let key_fn =
                        inline::map(key.bind(key_captured, &node_name), Some(int64.clone()));
                    let size_fn = inline::map(size.bind(size_captured, &node_name), Some(int64));
                    // The reduce function takes the key and the group: the
                    // key a tensor, every other component the encoded group.
                    let mut reduce_bound = reduce.bind(reduce_captured, &node_name);
                    reduce_bound.args = Arc::from([Arg::Tensor, Arg::Group]);
                    let reduce_fn = inline::dataset_fn(reduce_bound, spec.clone());
                    Ok(input.group_by_window(key_fn, reduce_fn, size_fn))
                },
                node,
            )
        }
        "GroupByReducerDataset" | "ExperimentalGroupByReducerDataset" => {
            let fns = [
                ("key_func", "Tkey_func_other_arguments"),
                ("init_func", "Tinit_func_other_arguments"),
                ("reduce_func", "Treduce_func_other_arguments"),
                ("finalize_func", "Tfinalize_func_other_arguments"),
            ]
            .map(|(key, types)| Fn::compile(attrs, key, types, compiler));
            let [key, init, reduce, finalize] = fns;
            let (key, init, reduce, finalize) = (key?, init?, reduce?, finalize?);
            let node_name = node.name.clone();
            handle(
                move |mut i| {
                    let input = i.dataset()?;
                    let mut bound = |f: &Fn, spec| -> Result<_> {
                        let captured = i.take(Some(f.captured))?;
                        Ok(inline::map(f.bind(captured, &node_name), spec))
                    };
                    let int64 = Structure::Tensor(TensorSpec::new(
                        tfdata_core::DType::Int64,
                        Shape::scalar(),
                    ));
                    let key_fn = bound(&key, Some(int64))?;
                    let init_fn = bound(&init, None)?;
                    let reduce_fn = bound(&reduce, None)?;
                    let finalize_fn = bound(&finalize, spec.clone())?;
                    Ok(input.group_by_reducer(key_fn, init_fn, reduce_fn, finalize_fn))
                },
                node,
            )
        }
        _ => return Ok(None),
    }))
}

/// A node's function attribute compiled, with how many captured inputs it
/// takes (counted by the node's `T..._other_arguments` attribute).
struct Fn {
    function: Arc<crate::function::Function>,
    captured: usize,
    args: Arc<[Arg]>,
}

impl Fn {
    fn compile(
        attrs: &NodeAttrs,
        key: &str,
        types: &str,
        compiler: &mut Compiler<'_>,
    ) -> Result<Fn> {
        let function = function(attrs, key, compiler)?;
        let captured = attrs.dtype_codes(types)?.len();
        if function.num_args() < captured {
            return Err(Error::InvalidArgument(format!(
                "{key} {} takes {} arguments, fewer than its {captured} captured inputs",
                function.name,
                function.num_args()
            )));
        }
        let args = element_args(attrs, key, captured, compiler)?;
        Ok(Fn {
            function,
            captured,
            args,
        })
    }

    fn bind(&self, captured: Vec<crate::value::Value>, node: &str) -> Bound {
        Bound {
            function: self.function.clone(),
            captured,
            node: node.to_string(),
            args: self.args.clone(),
        }
    }
}
