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

/// Appends updates to this start's journal file.
#[derive(Clone)]
pub struct JournalWriter {
    path: PathBuf,
    file: Arc<Mutex<File>>,
}

/// Reads every journal file under `work_dir` and opens the next one for writing.
pub fn open(work_dir: &Path) -> Result<(Vec<Update>, JournalWriter)> {
    let dir = work_dir.join(JOURNAL_DIR);
    std::fs::create_dir_all(&dir)
        .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    let mut numbers = Vec::new();
    for entry in
        std::fs::read_dir(&dir).map_err(|e| Error::io(format!("listing {}", dir.display()), e))?
    {
        let entry = entry.map_err(|e| Error::io(format!("listing {}", dir.display()), e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let number = name
            .rsplit_once('_')
            .and_then(|(_, n)| n.parse::<u64>().ok())
            .ok_or_else(|| Error::DataLoss {
                location: dir.join(&name).display().to_string(),
                reason: "unexpected file in the journal directory (names must be <name>_<number>)"
                    .into(),
            })?;
        numbers.push(number);
    }
    numbers.sort_unstable();
    let newest = numbers.last().copied();

    let mut updates = Vec::new();
    // TensorFlow reads journal_0, journal_1, ... until one is missing.
    let mut n = 0u64;
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
            if Some(n) == newest {
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
    let path = dir.join(format!("journal_{next}"));
    let file = OpenOptions::new()
        .create_new(true)
        .append(true)
        .open(&path)
        .map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
    sync_dir(&dir)?;
    Ok((
        updates,
        JournalWriter {
            path,
            file: Arc::new(Mutex::new(file)),
        },
    ))
}

impl JournalWriter {
    /// Appends one update and waits until it is on disk. Blocking: call it off
    /// the async threads.
    pub fn write(&self, update: &Update) -> Result<()> {
        let mut record = Vec::new();
        tfrecord::write_record(&mut record, &update.encode_to_vec())
            .map_err(|e| Error::io("encoding a journal record", e))?;
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        file.write_all(&record)
            .and_then(|()| file.sync_data())
            .map_err(|e| Error::io(format!("writing {}", self.path.display()), e))
    }

    pub fn path(&self) -> &Path {
        &self.path
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
        let (replayed, w) = open(dir.path()).unwrap();
        assert!(replayed.is_empty());
        w.write(&dataset("a")).unwrap();
        w.write(&dataset("b")).unwrap();
        drop(w);
        let (replayed, w) = open(dir.path()).unwrap();
        assert_eq!(replayed, vec![dataset("a"), dataset("b")]);
        assert!(w.path().ends_with("journal_1"));
        w.write(&dataset("c")).unwrap();
        let (replayed, w) = open(dir.path()).unwrap();
        assert_eq!(replayed.len(), 3);
        assert!(w.path().ends_with("journal_2"));
    }

    #[test]
    fn a_torn_tail_in_the_newest_file_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let (_, w) = open(dir.path()).unwrap();
        w.write(&dataset("a")).unwrap();
        w.write(&dataset("b")).unwrap();
        let path = w.path().to_path_buf();
        drop(w);
        let len = std::fs::metadata(&path).unwrap().len();
        OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(len - 3)
            .unwrap();
        let (replayed, _) = open(dir.path()).unwrap();
        assert_eq!(replayed, vec![dataset("a")]);
    }

    #[test]
    fn corruption_refuses_to_start_naming_file_and_offset() {
        let dir = tempfile::tempdir().unwrap();
        let (_, w) = open(dir.path()).unwrap();
        w.write(&dataset("first")).unwrap();
        w.write(&dataset("second")).unwrap();
        let path = w.path().to_path_buf();
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
