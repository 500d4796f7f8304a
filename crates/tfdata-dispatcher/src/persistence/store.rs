//! Where registered `DatasetDef`s live: in memory, or — whenever `work_dir`
//! is set, fault tolerant or not — as `<work_dir>/datasets/<id>`, a TFRecord
//! file (or, for an object-store work_dir, object) holding one serialized
//! `DatasetDef` (spec §6.3), which workers may read directly through
//! `TaskDef.path`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use prost::Message;
use tfdata_core::{DatasetId, Error, Result, tfrecord};
use tfdata_proto::data::DatasetDef;

use crate::persistence::work_dir::{ObjectDir, WorkDir, put_object};

#[derive(Clone)]
pub enum DatasetStore {
    Memory(Arc<Mutex<HashMap<DatasetId, DatasetDef>>>),
    /// `<work_dir>/datasets` on the local disk.
    Files(PathBuf),
    /// `<work_dir>/datasets` in an object store.
    Objects(ObjectDir),
}

impl DatasetStore {
    pub fn memory() -> Self {
        DatasetStore::Memory(Default::default())
    }

    /// A file store under `<work_dir>/datasets`, created if missing.
    pub fn files(work_dir: &std::path::Path) -> Result<Self> {
        let dir = work_dir.join("datasets");
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        Ok(DatasetStore::Files(dir))
    }

    /// The store under `<work_dir>/datasets`, local or in an object store
    /// (where nothing needs creating: prefixes exist once objects do).
    pub fn in_work_dir(work_dir: &WorkDir) -> Result<Self> {
        match work_dir {
            WorkDir::Local(dir) => Self::files(dir),
            WorkDir::ObjectStore(dir) => Ok(DatasetStore::Objects(dir.subdir("datasets"))),
        }
    }

    /// The file or object URL a worker can read the dataset from, for
    /// stores in a work_dir.
    pub fn path(&self, id: &DatasetId) -> Option<String> {
        match self {
            DatasetStore::Memory(_) => None,
            DatasetStore::Files(dir) => Some(dir.join(&id.0).display().to_string()),
            DatasetStore::Objects(dir) => Some(dir.join(&id.0)),
        }
    }

    /// Stores a dataset durably. Locally it is written to a temporary file,
    /// synced, then renamed; in an object store it is one `PUT`, which is
    /// atomic. Either way a crash never leaves a half-written definition.
    pub fn put(&self, id: &DatasetId, def: &DatasetDef) -> Result<()> {
        let encode = || -> Result<Vec<u8>> {
            let mut buf = Vec::new();
            tfrecord::write_record(&mut buf, &def.encode_to_vec())
                .map_err(|e| Error::io("encoding dataset", e))?;
            Ok(buf)
        };
        match self {
            DatasetStore::Memory(map) => {
                lock(map).insert(id.clone(), def.clone());
                Ok(())
            }
            DatasetStore::Files(dir) => {
                check_file_name(id)?;
                let path = dir.join(&id.0);
                let tmp = dir.join(format!(".{}.tmp", id.0));
                let buf = encode()?;
                let write = || -> std::io::Result<()> {
                    use std::io::Write;
                    let mut f = std::fs::File::create(&tmp)?;
                    f.write_all(&buf)?;
                    f.sync_all()?;
                    std::fs::rename(&tmp, &path)
                };
                write().map_err(|e| Error::io(format!("writing {}", path.display()), e))
            }
            DatasetStore::Objects(dir) => {
                check_file_name(id)?;
                put_object(dir.fs(), &dir.join(&id.0), &encode()?)
            }
        }
    }

    pub fn get(&self, id: &DatasetId) -> Result<DatasetDef> {
        match self {
            DatasetStore::Memory(map) => lock(map)
                .get(id)
                .cloned()
                .ok_or_else(|| Error::not_found("dataset", id)),
            DatasetStore::Files(dir) => {
                check_file_name(id)?;
                read_dataset_file(&dir.join(&id.0))
            }
            DatasetStore::Objects(dir) => {
                check_file_name(id)?;
                let url = dir.join(&id.0);
                let bytes = dir.fs().read_all(&url).map_err(|e| match e {
                    Error::NotFound { what: "file", id } => Error::NotFound {
                        what: "dataset file",
                        id,
                    },
                    e => e,
                })?;
                decode_dataset_file(&url, &bytes)
            }
        }
    }
}

/// Reads a local `<work_dir>/datasets/<id>` file.
pub fn read_dataset_file(path: &std::path::Path) -> Result<DatasetDef> {
    if !path.exists() {
        return Err(Error::NotFound {
            what: "dataset file",
            id: path.display().to_string(),
        });
    }
    let bytes =
        std::fs::read(path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    decode_dataset_file(&path.display().to_string(), &bytes)
}

/// Decodes a dataset file's contents: exactly one complete TFRecord holding
/// a `DatasetDef`. `location` names the file or object in errors.
pub fn decode_dataset_file(location: &str, bytes: &[u8]) -> Result<DatasetDef> {
    let records = match tfrecord::read_records(location, bytes)? {
        (records, tfrecord::Tail::Clean) => records,
        (_, tfrecord::Tail::Torn { offset }) => {
            return Err(Error::DataLoss {
                location: format!("{location} at offset {offset}"),
                reason: "record truncated".into(),
            });
        }
    };
    let [record] = records.as_slice() else {
        return Err(Error::DataLoss {
            location: location.to_string(),
            reason: format!("expected one record, found {}", records.len()),
        });
    };
    DatasetDef::decode(record.clone()).map_err(|e| Error::DataLoss {
        location: location.to_string(),
        reason: format!("not a DatasetDef: {e}"),
    })
}

/// Dataset ids become file names; refuse ones that would escape the directory.
fn check_file_name(id: &DatasetId) -> Result<()> {
    let ok = !id.0.is_empty()
        && id.0 != "."
        && id.0 != ".."
        && !id.0.contains(['/', '\\', '\0'])
        && !id.0.starts_with('.');
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidArgument(format!(
            "dataset id {:?} cannot be stored in a work_dir (no '/', '\\', NUL or leading '.')",
            id.0
        )))
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def() -> DatasetDef {
        DatasetDef {
            graph: bytes::Bytes::from_static(b"\x0a\x03abc"),
            tfdata_pipeline: None,
        }
    }

    #[test]
    fn file_store_round_trip_and_bad_ids() {
        let dir = tempfile::tempdir().unwrap();
        let store = DatasetStore::files(dir.path()).unwrap();
        let id = DatasetId("1000".into());
        store.put(&id, &def()).unwrap();
        assert_eq!(store.get(&id).unwrap(), def());
        assert!(dir.path().join("datasets/1000").exists());
        assert!(matches!(
            store.get(&DatasetId("1001".into())),
            Err(Error::NotFound { .. })
        ));
        assert!(store.put(&DatasetId("../x".into()), &def()).is_err());

        std::fs::write(dir.path().join("datasets/1002"), b"garbage!garbage!").unwrap();
        let err = store.get(&DatasetId("1002".into())).unwrap_err();
        assert!(matches!(err, Error::DataLoss { .. }), "{err}");
    }
}
