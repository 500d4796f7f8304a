//! Values that belong to the process that made them. A child of `fork()`
//! inherits its parent's memory but none of its threads, so a runtime or a
//! connection pool made by the parent is dead weight in the child: the
//! child makes its own, and leaks the parent's (dropping it would join
//! threads that are not there).

/// `value`, made by the process `pid`.
pub(super) struct PerProcess<T> {
    pid: u32,
    value: T,
}

impl<T> PerProcess<T> {
    /// `value`, owned by the calling process.
    pub(super) fn new(value: T) -> Self {
        Self {
            pid: std::process::id(),
            value,
        }
    }

    /// The value, if the calling process made it.
    pub(super) fn get(&self) -> Option<&T> {
        (self.pid == std::process::id()).then_some(&self.value)
    }
}
