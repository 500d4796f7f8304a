//! The dispatcher journal (spec §6.3): in fault-tolerant mode every state
//! change is one `Update`, appended to `<work_dir>/tf_data_dispatcher_journal/
//! journal_<n>` as a TFRecord and synced to disk before it is applied and
//! before the RPC that caused it is answered. Each start replays all files in
//! order and then writes a new file, `journal_<largest n + 1>`.
//!
//! Replay is strict: a record that fails its CRC or does not parse refuses
//! the start with an error naming the file and offset. The one exception is a
//! torn final record in the newest file (a crash mid-write), which was never
//! acknowledged to anyone: it is dropped with a warning.
//!
//! Compaction keeps replay short: [`JournalWriter::compact`] writes the whole
//! state as `snapshot_<m>` (atomically: a temporary file, synced, renamed),
//! continues in `journal_<m>`, and deletes older files. A start loads the
//! newest snapshot and replays only the journal files from its number on.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use prost::Message;
use tfdata_core::tfrecord::{self, Tail};
use tfdata_core::{Error, Result};
use tfdata_proto::data::Update;

/// The directory name TensorFlow uses (marked load-bearing in its sources).
pub const JOURNAL_DIR: &str = "tf_data_dispatcher_journal";

/// Appends updates to the current journal file.
#[derive(Clone)]
pub struct JournalWriter {
    dir: PathBuf,
    current: Arc<Mutex<Current>>,
}

struct Current {
    number: u64,
    path: PathBuf,
    file: File,
    /// Records written to this file (compaction trigger).
    records: u64,
}

/// What a start finds in the journal directory.
pub struct Recovered {
    /// The newest compaction snapshot, if any.
    pub snapshot: Option<tfdata_proto::tfdata::snapshot::DispatcherSnapshot>,
    /// The updates after it, in order.
    pub updates: Vec<Update>,
    pub writer: JournalWriter,
}

fn list(dir: &Path) -> Result<(Vec<u64>, Vec<u64>)> {
    let mut journals = Vec::new();
    let mut snapshots = Vec::new();
    for entry in
        std::fs::read_dir(dir).map_err(|e| Error::io(format!("listing {}", dir.display()), e))?
    {
        let entry = entry.map_err(|e| Error::io(format!("listing {}", dir.display()), e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some((kind, number)) = name
            .rsplit_once('_')
            .and_then(|(k, n)| Some((k, n.parse::<u64>().ok()?)))
        else {
            return Err(Error::DataLoss {
                location: dir.join(&name).display().to_string(),
                reason: "unexpected file in the journal directory (names must be <name>_<number>)"
                    .into(),
            });
        };
        match kind {
            "journal" => journals.push(number),
            "snapshot" => snapshots.push(number),
            _ => {} // e.g. an interrupted compaction's temporary file
        }
    }
    journals.sort_unstable();
    snapshots.sort_unstable();
    Ok((journals, snapshots))
}

/// Reads the journal directory under `work_dir` (the newest snapshot and the
/// journal files after it) and opens the next journal file for writing.
pub fn open(work_dir: &Path) -> Result<Recovered> {
    let dir = work_dir.join(JOURNAL_DIR);
    std::fs::create_dir_all(&dir)
        .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    let (journals, snapshots) = list(&dir)?;
    let newest = journals.last().copied().max(snapshots.last().copied());
    let snapshot_number = snapshots.last().copied();
    let snapshot = match snapshot_number {
        None => None,
        Some(n) => {
            let path = dir.join(format!("snapshot_{n}"));
            let records = tfrecord::read_file(&path)?;
            let [record] = records.as_slice() else {
                return Err(Error::DataLoss {
                    location: path.display().to_string(),
                    reason: format!("expected one record, found {}", records.len()),
                });
            };
            Some(
                tfdata_proto::tfdata::snapshot::DispatcherSnapshot::decode(record.clone())
                    .map_err(|e| Error::DataLoss {
                        location: path.display().to_string(),
                        reason: format!("not a dispatcher snapshot: {e}"),
                    })?,
            )
        }
    };
    let mut updates = Vec::new();
    // TensorFlow reads journal_0, journal_1, ... until one is missing; after
    // a compaction, from the snapshot's number.
    let mut n = snapshot_number.unwrap_or(0);
    let newest_journal = journals.last().copied();
    loop {
        let path = dir.join(format!("journal_{n}"));
        if !path.exists() {
            break;
        }
        let bytes = std::fs::read(&path)
            .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
        let name = path.display().to_string();
        let (records, tail) = tfrecord::read_records(&name, &bytes)?;
        if let Tail::Torn { offset } = tail {
            if Some(n) == newest_journal {
                tracing::warn!(file = %name, offset, "dropping a torn final journal record (crash mid-write)");
            } else {
                return Err(Error::DataLoss {
                    location: format!("{name} at offset {offset}"),
                    reason: "journal record truncated in a file that is not the newest".into(),
                });
            }
        }
        for (i, record) in records.into_iter().enumerate() {
            let update = Update::decode(record).map_err(|e| Error::DataLoss {
                location: format!("{name}, record {i}"),
                reason: format!("not a journal Update: {e}"),
            })?;
            updates.push(update);
        }
        n += 1;
    }
    let next = newest.map_or(0, |n| n + 1);
    let writer = JournalWriter::create(&dir, next)?;
    Ok(Recovered {
        snapshot,
        updates,
        writer,
    })
}

impl JournalWriter {
    fn create(dir: &Path, number: u64) -> Result<Self> {
        let current = Self::open_file(dir, number)?;
        Ok(JournalWriter {
            dir: dir.to_path_buf(),
            current: Arc::new(Mutex::new(current)),
        })
    }

    fn open_file(dir: &Path, number: u64) -> Result<Current> {
        let path = dir.join(format!("journal_{number}"));
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)
            .map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
        sync_dir(dir)?;
        Ok(Current {
            number,
            path,
            file,
            records: 0,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Current> {
        self.current.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends one update and waits until it is on disk. Blocking: call it off
    /// the async threads. Returns the number of records in the current file.
    pub fn write(&self, update: &Update) -> Result<u64> {
        let mut record = Vec::new();
        tfrecord::write_record(&mut record, &update.encode_to_vec())
            .map_err(|e| Error::io("encoding a journal record", e))?;
        let mut current = self.lock();
        let path = current.path.clone();
        current
            .file
            .write_all(&record)
            .and_then(|()| current.file.sync_data())
            .map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
        current.records += 1;
        Ok(current.records)
    }

    /// Replaces everything written so far by `snapshot` (the state after it):
    /// writes `snapshot_<m>` atomically, continues in `journal_<m>`, deletes
    /// older files. Blocking; the caller must not write meanwhile.
    pub fn compact(
        &self,
        snapshot: &tfdata_proto::tfdata::snapshot::DispatcherSnapshot,
    ) -> Result<()> {
        let mut current = self.lock();
        let m = current.number + 1;
        let path = self.dir.join(format!("snapshot_{m}"));
        let tmp = self.dir.join(format!("compacting_{m}"));
        let mut record = Vec::new();
        tfrecord::write_record(&mut record, &snapshot.encode_to_vec())
            .map_err(|e| Error::io("encoding a snapshot", e))?;
        let write = || -> std::io::Result<()> {
            let mut f = File::create(&tmp)?;
            f.write_all(&record)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)
        };
        write().map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
        sync_dir(&self.dir)?;
        *current = Self::open_file(&self.dir, m)?;
        // Everything before the snapshot is now redundant.
        let (journals, snapshots) = list(&self.dir)?;
        for n in journals.into_iter().filter(|&n| n < m) {
            let _ = std::fs::remove_file(self.dir.join(format!("journal_{n}")));
        }
        for n in snapshots.into_iter().filter(|&n| n < m) {
            let _ = std::fs::remove_file(self.dir.join(format!("snapshot_{n}")));
        }
        tracing::info!(snapshot = %path.display(), "journal compacted");
        Ok(())
    }

    pub fn path(&self) -> PathBuf {
        self.lock().path.clone()
    }

    /// Records in the current file.
    pub fn records(&self) -> u64 {
        self.lock().records
    }
}

/// Makes a new file's directory entry durable.
fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(format!("syncing {}", dir.display()), e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tfdata_proto::data::{RegisterDatasetUpdate, update::UpdateType};

    fn dataset(id: &str) -> Update {
        Update {
            update_type: Some(UpdateType::RegisterDataset(RegisterDatasetUpdate {
                dataset_id: id.into(),
                ..Default::default()
            })),
        }
    }

    #[test]
    fn each_start_replays_everything_and_opens_a_new_file() {
        let dir = tempfile::tempdir().unwrap();
        let r = open(dir.path()).unwrap();
        assert!(r.updates.is_empty() && r.snapshot.is_none());
        r.writer.write(&dataset("a")).unwrap();
        r.writer.write(&dataset("b")).unwrap();
        drop(r);
        let r = open(dir.path()).unwrap();
        assert_eq!(r.updates, vec![dataset("a"), dataset("b")]);
        assert!(r.writer.path().ends_with("journal_1"));
        r.writer.write(&dataset("c")).unwrap();
        let r = open(dir.path()).unwrap();
        assert_eq!(r.updates.len(), 3);
        assert!(r.writer.path().ends_with("journal_2"));

        // Compaction: a snapshot replaces the history; later writes follow it.
        let snapshot = tfdata_proto::tfdata::snapshot::DispatcherSnapshot {
            format_version: 1,
            next_dataset_id: 1234,
            ..Default::default()
        };
        r.writer.compact(&snapshot).unwrap();
        r.writer.write(&dataset("d")).unwrap();
        drop(r);
        let r = open(dir.path()).unwrap();
        assert_eq!(r.snapshot.unwrap().next_dataset_id, 1234);
        assert_eq!(r.updates, vec![dataset("d")]);
        let files = std::fs::read_dir(dir.path().join(JOURNAL_DIR))
            .unwrap()
            .count();
        assert_eq!(files, 3, "snapshot_3, journal_3 and the new journal_4");
    }

    #[test]
    fn a_torn_tail_in_the_newest_file_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let w = open(dir.path()).unwrap().writer;
        w.write(&dataset("a")).unwrap();
        w.write(&dataset("b")).unwrap();
        let path = w.path();
        drop(w);
        let len = std::fs::metadata(&path).unwrap().len();
        OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(len - 3)
            .unwrap();
        assert_eq!(open(dir.path()).unwrap().updates, vec![dataset("a")]);
    }

    #[test]
    fn corruption_refuses_to_start_naming_file_and_offset() {
        let dir = tempfile::tempdir().unwrap();
        let w = open(dir.path()).unwrap().writer;
        w.write(&dataset("first")).unwrap();
        w.write(&dataset("second")).unwrap();
        let path = w.path();
        drop(w);
        let mut bytes = std::fs::read(&path).unwrap();
        let second = bytes.len() - 10; // inside the second record's data
        bytes[second] ^= 0x40;
        std::fs::write(&path, &bytes).unwrap();
        let err = open(dir.path()).err().unwrap().to_string();
        assert!(err.contains("journal_0") && err.contains("offset"), "{err}");

        std::fs::write(dir.path().join(JOURNAL_DIR).join("notes.txt"), b"x").unwrap();
        assert!(open(dir.path()).is_err());
    }
}
