//! `LMDBReader`, the V1 reader of LMDB databases: TensorFlow 2.21 removed
//! LMDB support, and its kernel refuses to be built (a function holding the
//! op fails when instantiated, before any element, whatever the files). A
//! worker does the same, with TensorFlow's status and message.
//!
//! The dataset ops (`LMDBDataset`, `ExperimentalLMDBDataset`) refuse the
//! same way in `crate::translate::lmdb`.

use tfdata_core::{Error, Result};

use super::ResourceKernelDef;

/// TensorFlow 2.21's message for every LMDB op.
pub(crate) const LMDB_REMOVED: &str = "LMDB support is removed from TensorFlow. This API will \
     be deleted in the next TensorFlow release. If you need LMDB support, please file a \
     GitHub issue.";

/// TensorFlow's refusal of an LMDB op (its status code is Unimplemented).
pub(crate) fn lmdb_removed() -> Error {
    Error::Unimplemented(LMDB_REMOVED.into())
}

pub(super) const KERNELS: &[ResourceKernelDef] = &[ResourceKernelDef {
    op: "LMDBReader",
    outputs: |_| Ok(vec![("reader_handle", 1)]),
    build: |_| -> Result<crate::kernels::NodeFn> { Err(lmdb_removed()) },
}];
