//! User functions registered by name in this process, and the types of the
//! functions pipelines name.
//!
//! A pipeline refers to functions by name, so it can be serialised; a worker
//! resolves the names when it builds a task's iterator
//! ([`crate::ops::resolve`]: built-ins first, then this registry). A name
//! the worker's process does not know fails that task with an error naming
//! it. Errors and panics inside user functions become
//! [`Error::UserFunction`] ([`guarded`]), so the worker survives them.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, OnceLock, RwLock};

use tfdata_core::{Element, Error, Result};

use crate::Dataset;
use crate::attrs::{FunctionRef, InlineBody};
use crate::spec::Structure;

/// A map function: one element in, one element out.
pub type MapFn = Arc<dyn Fn(Element) -> Result<Element> + Send + Sync>;
/// A filter predicate.
pub type PredicateFn = Arc<dyn Fn(&Element) -> Result<bool> + Send + Sync>;
/// A function from an element to a dataset (`flat_map`, `interleave`).
pub type DatasetFn = Arc<dyn Fn(Element) -> Result<Dataset> + Send + Sync>;

/// Builds a map function for an input of the given structure (`None`:
/// unknown). Functions from other languages use this to learn how the
/// components they receive nest, and what they return.
pub type MapFactory = Arc<dyn Fn(Option<&Structure>) -> Result<ResolvedMap> + Send + Sync>;
/// Builds a predicate for an input of the given structure.
pub type PredicateFactory = Arc<dyn Fn(Option<&Structure>) -> Result<PredicateFn> + Send + Sync>;
/// Builds a dataset function for an input of the given structure.
pub type DatasetFnFactory =
    Arc<dyn Fn(Option<&Structure>) -> Result<ResolvedDatasetFn> + Send + Sync>;

/// What one name is registered as. A name can be a map function, a
/// predicate and a dataset function at once (a Python function is all
/// three: the pipeline's use of it says which is meant).
#[derive(Clone, Default)]
pub(crate) struct Registered {
    pub(crate) map: Option<MapFactory>,
    pub(crate) predicate: Option<PredicateFactory>,
    pub(crate) dataset: Option<DatasetFnFactory>,
}

fn registry() -> &'static RwLock<HashMap<String, Registered>> {
    static REGISTRY: OnceLock<RwLock<HashMap<String, Registered>>> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

fn register(name: &str, set: impl FnOnce(&mut Registered)) {
    let mut registry = registry()
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    set(registry.entry(name.to_string()).or_default());
}

/// What `name` is registered as in this process, if anything.
pub(crate) fn lookup(name: &str) -> Option<Registered> {
    registry()
        .read()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .get(name)
        .cloned()
}

/// Registers (or replaces) the map function `name` in this process. Its
/// output structure is unknown to the pipeline until the data flows; use
/// [`register_function_with_spec`] when later ops need it.
pub fn register_function<F>(name: &str, f: F)
where
    F: Fn(Element) -> Result<Element> + Send + Sync + 'static,
{
    let f: MapFn = Arc::new(f);
    register_map_factory(name, move |_input| {
        Ok(ResolvedMap {
            f: f.clone(),
            output: None,
        })
    });
}

/// Registers a map function with a function computing its output structure.
pub fn register_function_with_spec<F, S>(name: &str, spec: S, f: F)
where
    F: Fn(Element) -> Result<Element> + Send + Sync + 'static,
    S: Fn(&Structure) -> Result<Structure> + Send + Sync + 'static,
{
    let f: MapFn = Arc::new(f);
    register_map_factory(name, move |input| {
        Ok(ResolvedMap {
            f: f.clone(),
            output: input.map(&spec).transpose()?,
        })
    });
}

/// Registers a map function made anew for each input structure it is
/// applied to (see [`MapFactory`]).
pub fn register_map_factory<F>(name: &str, factory: F)
where
    F: Fn(Option<&Structure>) -> Result<ResolvedMap> + Send + Sync + 'static,
{
    register(name, |r| r.map = Some(Arc::new(factory)));
}

/// Registers a `filter` predicate.
pub fn register_predicate<F>(name: &str, f: F)
where
    F: Fn(&Element) -> Result<bool> + Send + Sync + 'static,
{
    let f: PredicateFn = Arc::new(f);
    register_predicate_factory(name, move |_input| Ok(f.clone()));
}

/// Registers a predicate made anew for each input structure.
pub fn register_predicate_factory<F>(name: &str, factory: F)
where
    F: Fn(Option<&Structure>) -> Result<PredicateFn> + Send + Sync + 'static,
{
    register(name, |r| r.predicate = Some(Arc::new(factory)));
}

/// Registers a function returning a dataset per element (`flat_map`,
/// `interleave`), with the structure of the datasets it returns if known.
pub fn register_dataset_function<F>(name: &str, spec: Option<Structure>, f: F)
where
    F: Fn(Element) -> Result<Dataset> + Send + Sync + 'static,
{
    let f: DatasetFn = Arc::new(f);
    register_dataset_fn_factory(name, move |_input| {
        Ok(ResolvedDatasetFn {
            f: f.clone(),
            output: spec.clone(),
        })
    });
}

/// Registers a dataset function made anew for each input structure.
pub fn register_dataset_fn_factory<F>(name: &str, factory: F)
where
    F: Fn(Option<&Structure>) -> Result<ResolvedDatasetFn> + Send + Sync + 'static,
{
    register(name, |r| r.dataset = Some(Arc::new(factory)));
}

/// A function body carried by its [`FunctionRef`] instead of the registry:
/// any of the three kinds of function a pipeline calls, each built per
/// input structure (see [`FunctionRef::inline`]).
#[derive(Clone, Default)]
pub struct Inline {
    pub map: Option<MapFactory>,
    pub predicate: Option<PredicateFactory>,
    pub dataset: Option<DatasetFnFactory>,
}

impl FunctionRef {
    /// A function named `name` whose body comes with it.
    pub fn inline(name: &str, body: Inline) -> Self {
        FunctionRef {
            inline: Some(InlineBody(Arc::new(body))),
            ..FunctionRef::named(name)
        }
    }

    /// The inline body, if this reference carries one.
    pub fn inline_body(&self) -> Option<&Inline> {
        self.inline
            .as_ref()
            .and_then(|b| b.0.downcast_ref::<Inline>())
    }
}

/// A map function ready to call, and its output structure if known.
#[derive(Clone)]
pub struct ResolvedMap {
    pub f: MapFn,
    pub output: Option<Structure>,
}

/// A dataset function ready to call, and the structure of its datasets if known.
#[derive(Clone)]
pub struct ResolvedDatasetFn {
    pub f: DatasetFn,
    pub output: Option<Structure>,
}

/// Runs user code, turning an error or a panic into [`Error::UserFunction`].
pub fn guarded<T>(name: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(out)) => Ok(out),
        Ok(Err(e @ Error::UserFunction { .. })) => Err(e),
        Ok(Err(e)) => Err(Error::user_function(name, e.to_string(), e.code())),
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic payload".into());
            Err(Error::user_function(
                name,
                format!("panicked: {message}"),
                tfdata_core::Code::InvalidArgument,
            ))
        }
    }
}
