//! The process-wide [`ObjectStoreFileSystem`]: what
//! [`file_system`](crate::io::file_system) hands out for object-store URLs.

use std::sync::{Arc, OnceLock, PoisonError, RwLock};

use super::file_system::ObjectStoreFileSystem;
use super::per_process::PerProcess;

/// The process-wide instance, per process: its clients' connection pools
/// live on the I/O runtime of the process that made them, so a child of
/// `fork()` builds its own from the environment.
type GlobalSlot = RwLock<Option<PerProcess<Arc<ObjectStoreFileSystem>>>>;

fn global_slot() -> &'static GlobalSlot {
    static GLOBAL: OnceLock<GlobalSlot> = OnceLock::new();
    GLOBAL.get_or_init(|| RwLock::new(None))
}

/// The object-store file system [`file_system`](crate::io::file_system)
/// returns for object-store URLs: [`ObjectStoreFileSystem::from_env`]
/// unless [`set_global`] installed another.
pub fn global() -> Arc<ObjectStoreFileSystem> {
    if let Some(fs) = global_slot()
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        .and_then(PerProcess::get)
    {
        return fs.clone();
    }
    let mut slot = global_slot()
        .write()
        .unwrap_or_else(PoisonError::into_inner);
    match slot.as_ref().and_then(PerProcess::get) {
        Some(fs) => fs.clone(),
        None => {
            let fs = Arc::new(ObjectStoreFileSystem::from_env());
            *slot = Some(PerProcess::new(fs.clone()));
            fs
        }
    }
}

/// Makes `fs` serve object-store URLs for the whole process, from the next
/// [`file_system`](crate::io::file_system) call on (files already open keep
/// their client). For programs that configure storage in code rather than
/// the environment, and for tests pointing at a local server.
pub fn set_global(fs: ObjectStoreFileSystem) {
    *global_slot()
        .write()
        .unwrap_or_else(PoisonError::into_inner) = Some(PerProcess::new(Arc::new(fs)));
}
