//! (to be written)

use super::KernelDef;

pub(super) const KERNELS: &[KernelDef] = &[];
