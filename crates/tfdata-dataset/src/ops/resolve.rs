//! Which function a [`FunctionRef`] names, for the ops that call functions
//! (`map`, `filter`, `flat_map`, `interleave`): a built-in first (element
//! functions from [`crate::builtins`], file readers from
//! [`super::files`]), else a function registered in this process
//! ([`crate::functions`]).
//!
//! A name that is neither is [`ResolveError::Unregistered`], which
//! validation in a process that need not link user functions (the
//! dispatcher, a client registering a pipeline) reads as "output unknown"
//! ([`allow_unregistered`]); running the pipeline fails with it.

use std::fmt;

use tfdata_core::{Error, Result};

use super::files::builtin_dataset_fn;
use crate::attrs::FunctionRef;
use crate::builtins;
use crate::functions::{self, PredicateFn, Registered, ResolvedDatasetFn, ResolvedMap};
use crate::spec::Structure;

/// The kinds of function a pipeline names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FunctionKind {
    /// `map`'s: an element to an element.
    Map,
    /// `filter`'s: an element to a bool.
    Predicate,
    /// `flat_map`'s and `interleave`'s: an element to a dataset.
    DatasetFn,
}

impl fmt::Display for FunctionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FunctionKind::Map => "map function",
            FunctionKind::Predicate => "predicate",
            FunctionKind::DatasetFn => "dataset function",
        })
    }
}

/// Why a named function cannot be had.
#[derive(Debug)]
pub enum ResolveError {
    /// Neither a built-in nor registered in this process.
    Unregistered { kind: FunctionKind, name: String },
    /// Known, but not usable as asked: a built-in's bad arguments, arguments
    /// to a user function, a name registered as another kind of function,
    /// or its factory's error.
    Invalid(Error),
}

impl fmt::Display for ResolveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResolveError::Unregistered { kind, name } => write!(
                f,
                "`{name}` ({kind}): not a built-in, and not registered in this process \
                 (register it with tfdata::register_function and friends in every process that runs the pipeline)"
            ),
            ResolveError::Invalid(err) => err.fmt(f),
        }
    }
}

impl std::error::Error for ResolveError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ResolveError::Unregistered { .. } => None,
            // Transparent: the inner error stands for this one.
            ResolveError::Invalid(err) => err.source(),
        }
    }
}

impl From<Error> for ResolveError {
    fn from(err: Error) -> Self {
        ResolveError::Invalid(err)
    }
}

/// An unregistered function is [`Error::NotFound`]: `tfdata_core::Error`
/// has no variant for it, so the kind and name travel in the message.
impl From<ResolveError> for Error {
    fn from(err: ResolveError) -> Self {
        match err {
            ResolveError::Unregistered { .. } => Error::NotFound {
                what: "dataset function",
                id: err.to_string(),
            },
            ResolveError::Invalid(err) => err,
        }
    }
}

/// For validation in a process that need not link user functions (the
/// dispatcher, a client registering a pipeline): an unregistered name means
/// "output unknown", not an error; a built-in's bad arguments still are.
pub fn allow_unregistered<T>(resolved: Result<T, ResolveError>) -> Result<Option<T>> {
    match resolved {
        Ok(v) => Ok(Some(v)),
        Err(ResolveError::Unregistered { .. }) => Ok(None),
        Err(ResolveError::Invalid(e)) => Err(e),
    }
}

fn no_args(f: &FunctionRef) -> Result<()> {
    if f.args.0.is_empty() {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "user function `{}` takes no arguments, got {:?}",
            f.name,
            f.args.0.keys().collect::<Vec<_>>()
        )))
    }
}

/// `f` names a function of another kind than `kind`.
fn wrong_kind(f: &FunctionRef, kind: FunctionKind) -> ResolveError {
    let expected = match kind {
        FunctionKind::Map => "a map function",
        FunctionKind::Predicate => "a predicate",
        FunctionKind::DatasetFn => "a function returning datasets",
    };
    Error::InvalidArgument(format!("`{}` is not {expected}", f.name)).into()
}

fn unregistered(f: &FunctionRef, kind: FunctionKind) -> ResolveError {
    ResolveError::Unregistered {
        kind,
        name: f.name.clone(),
    }
}

/// Resolves a map function for an input of structure `input`.
pub fn resolve_map(
    f: &FunctionRef,
    input: Option<&Structure>,
) -> Result<ResolvedMap, ResolveError> {
    if let Some(inline) = f.inline_body() {
        let factory = inline
            .map
            .as_ref()
            .ok_or_else(|| wrong_kind(f, FunctionKind::Map))?;
        return Ok(factory(input)?);
    }
    if let Some(builtin) = builtins::map(f, input) {
        return Ok(builtin?);
    }
    match functions::lookup(&f.name) {
        Some(Registered {
            map: Some(factory), ..
        }) => {
            no_args(f)?;
            Ok(factory(input)?)
        }
        Some(_) => Err(wrong_kind(f, FunctionKind::Map)),
        None => Err(unregistered(f, FunctionKind::Map)),
    }
}

/// Resolves a predicate for an input of structure `input`.
pub fn resolve_predicate(
    f: &FunctionRef,
    input: Option<&Structure>,
) -> Result<PredicateFn, ResolveError> {
    if let Some(inline) = f.inline_body() {
        let factory = inline
            .predicate
            .as_ref()
            .ok_or_else(|| wrong_kind(f, FunctionKind::Predicate))?;
        return Ok(factory(input)?);
    }
    if let Some(builtin) = builtins::predicate(f, input) {
        return Ok(builtin?);
    }
    match functions::lookup(&f.name) {
        Some(Registered {
            predicate: Some(factory),
            ..
        }) => {
            no_args(f)?;
            Ok(factory(input)?)
        }
        Some(_) => Err(wrong_kind(f, FunctionKind::Predicate)),
        None => Err(unregistered(f, FunctionKind::Predicate)),
    }
}

/// Resolves a dataset function for an input of structure `input`.
pub fn resolve_dataset_fn(
    f: &FunctionRef,
    input: Option<&Structure>,
) -> Result<ResolvedDatasetFn, ResolveError> {
    if let Some(inline) = f.inline_body() {
        let factory = inline
            .dataset
            .as_ref()
            .ok_or_else(|| wrong_kind(f, FunctionKind::DatasetFn))?;
        return Ok(factory(input)?);
    }
    if let Some(builtin) = builtin_dataset_fn(f, input) {
        return Ok(builtin?);
    }
    match functions::lookup(&f.name) {
        Some(Registered {
            dataset: Some(factory),
            ..
        }) => {
            no_args(f)?;
            Ok(factory(input)?)
        }
        Some(_) => Err(wrong_kind(f, FunctionKind::DatasetFn)),
        None => Err(unregistered(f, FunctionKind::DatasetFn)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unregistered_names_are_typed_not_tagged() {
        let f = FunctionRef::named("resolve_test_nowhere");
        let err = resolve_map(&f, None).err().unwrap();
        assert!(
            matches!(&err, ResolveError::Unregistered { kind: FunctionKind::Map, name }
                if name == "resolve_test_nowhere"),
            "{err}"
        );
        // Validation reads it as "output unknown" ...
        assert!(
            allow_unregistered(resolve_predicate(&f, None))
                .unwrap()
                .is_none()
        );
        // ... and elsewhere it is the NotFound it always was.
        let err = Error::from(resolve_dataset_fn(&f, None).err().unwrap());
        assert!(matches!(err, Error::NotFound { .. }), "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains("`resolve_test_nowhere` (dataset function): not a built-in"),
            "{msg}"
        );

        // A known name of another kind is an error even where unregistered
        // names are allowed.
        crate::functions::register_predicate("resolve_test_predicate", |_| Ok(true));
        let err = allow_unregistered(resolve_map(
            &FunctionRef::named("resolve_test_predicate"),
            None,
        ))
        .err()
        .unwrap();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        assert!(err.to_string().contains("is not a map function"), "{err}");
    }
}
