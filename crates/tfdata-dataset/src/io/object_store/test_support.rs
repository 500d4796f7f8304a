//! An object-store file system over an in-memory store, for the tests of
//! this module.

use std::io::Write;
use std::sync::Arc;

use ::object_store::memory::InMemory;

use super::ObjectStoreFileSystem;
use crate::io::fs::FileSystem;

pub(crate) fn memory_fs() -> (ObjectStoreFileSystem, Arc<InMemory>) {
    let store = Arc::new(InMemory::new());
    let fs = ObjectStoreFileSystem::without_env()
        .with_store("s3://bucket", store.clone())
        .unwrap()
        .with_read_chunk_size(7)
        .with_part_size(10);
    (fs, store)
}

pub(crate) fn write(fs: &ObjectStoreFileSystem, url: &str, data: &[u8]) {
    let mut w = fs.create(url).unwrap();
    w.write_all(data).unwrap();
    w.flush().unwrap();
}

/// [`write`] through the trait object a resolver hands out.
pub(crate) fn write_dyn(fs: &dyn FileSystem, url: &str, data: &[u8]) {
    let mut w = fs.create(url).unwrap();
    w.write_all(data).unwrap();
    w.flush().unwrap();
}
