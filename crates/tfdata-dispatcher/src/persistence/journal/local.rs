//! The journal in a local directory (TensorFlow's layout): `journal_<n>`
//! files appended to, one `write` and one `fdatasync` per group, and
//! `snapshot_<m>` compactions written to a temporary file, synced and
//! renamed. See the parent module for the layout and its rules.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use tfdata_core::tfrecord::{self, Tail};
use tfdata_core::{Error, Result};

use super::format::{COMPACTION_PREFIX, compaction_name, decode_compacted_state, decode_updates};
use super::{History, JOURNAL_DIR};

/// The open local file.
pub(super) struct LocalJournal {
    dir: PathBuf,
    number: u64,
    path: PathBuf,
    file: File,
    /// Records written to this file (compaction trigger).
    records: u64,
}

fn list(dir: &Path) -> Result<(Vec<u64>, Vec<u64>)> {
    let mut journals = Vec::new();
    let mut compactions = Vec::new();
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
            k if k == COMPACTION_PREFIX => compactions.push(number),
            _ => {} // e.g. an interrupted compaction's temporary file
        }
    }
    journals.sort_unstable();
    compactions.sort_unstable();
    Ok((journals, compactions))
}

/// Reads the local journal directory under `work_dir` (the newest compaction
/// and the journal files after it) and opens the next journal file.
pub(super) fn open(work_dir: &Path) -> Result<(History, LocalJournal)> {
    let dir = work_dir.join(JOURNAL_DIR);
    std::fs::create_dir_all(&dir)
        .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    let (journals, compactions) = list(&dir)?;
    let newest = journals.last().copied().max(compactions.last().copied());
    let compaction_number = compactions.last().copied();
    let compaction = match compaction_number {
        None => None,
        Some(n) => {
            let path = dir.join(compaction_name(n));
            let records = tfrecord::read_file(&path)?;
            let location = path.display().to_string();
            let state = decode_compacted_state(&location, &records)?;
            Some((location, state))
        }
    };
    let mut updates = Vec::new();
    let newest_journal = journals.last().copied();
    for n in journals_to_replay(&dir, &journals, compaction_number)? {
        let path = dir.join(format!("journal_{n}"));
        let bytes = std::fs::read(&path)
            .map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
        let name = path.display().to_string();
        let (records, tail) = tfrecord::read_records(&name, &bytes)?;
        if let Tail::Torn { offset } = tail {
            if Some(n) == newest_journal {
                tracing::warn!(file = %name, offset, "dropping a torn final journal record (crash mid-write)");
                // Cut it off for good: the next start writes a newer file,
                // after which this one is no longer the newest and a torn
                // tail in it would refuse every later start.
                truncate(&path, offset)?;
            } else {
                return Err(Error::DataLoss {
                    location: format!("{name} at offset {offset}"),
                    reason: "journal record truncated in a file that is not the newest".into(),
                });
            }
        }
        decode_updates(&name, records, &mut updates)?;
    }
    let next = newest.map_or(0, |n| n + 1);
    let journal = LocalJournal::create(&dir, next)?;
    Ok((
        History {
            compaction,
            updates,
        },
        journal,
    ))
}

/// The numbers of the journal files holding the history after the newest
/// compaction (`journals` sorted), in replay order: `journal_<m>` on from
/// `snapshot_<m>`, or from `journal_0` without a compaction. Files before
/// the compaction are history it replaces (leftovers of an interrupted
/// compaction).
///
/// Every number is used once, by a start (`journal_<newest + 1>`) or a
/// compaction (`snapshot_<m>` then `journal_<m>`), so the files are
/// consecutive with one exception: a crash after a compaction renamed
/// `snapshot_<m>` into place and before it created `journal_<m>` leaves no
/// `journal_<m>`, and the next start writes `journal_<m + 1>`. Replay goes on
/// past that one gap (stopping at it would drop every update written after
/// it, and the split cursors with them: splits handed out twice). Any other
/// gap is acknowledged history that is gone: the start is refused.
fn journals_to_replay(dir: &Path, journals: &[u64], compaction: Option<u64>) -> Result<Vec<u64>> {
    let first = compaction.unwrap_or(0);
    let live: Vec<u64> = journals.iter().copied().filter(|&n| n >= first).collect();
    let mut expected = first;
    for (i, &n) in live.iter().enumerate() {
        if i == 0 && compaction.is_some() && n > first {
            expected = first + 1;
        }
        if n != expected {
            return Err(Error::DataLoss {
                location: dir
                    .join(format!("journal_{expected}"))
                    .display()
                    .to_string(),
                reason: format!("missing while journal_{n} exists: acknowledged updates were lost"),
            });
        }
        if n == first + 1 && i == 0 && compaction.is_some() {
            tracing::info!(dir = %dir.display(), "journal_{first} was never created (a crash during compaction): replaying from journal_{n}");
        }
        expected = n + 1;
    }
    Ok(live)
}

/// Shortens `path` to `len` bytes, durably.
fn truncate(path: &Path, len: u64) -> Result<()> {
    let cut = || -> std::io::Result<()> {
        let file = OpenOptions::new().write(true).open(path)?;
        file.set_len(len)?;
        file.sync_all()
    };
    cut().map_err(|e| Error::io(format!("truncating the torn tail of {}", path.display()), e))
}

impl LocalJournal {
    fn create(dir: &Path, number: u64) -> Result<Self> {
        let path = dir.join(format!("journal_{number}"));
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)
            .map_err(|e| Error::io(format!("creating {}", path.display()), e))?;
        sync_dir(dir)?;
        Ok(LocalJournal {
            dir: dir.to_path_buf(),
            number,
            path,
            file,
            records: 0,
        })
    }

    /// One `write` and one `fdatasync` for the whole group.
    pub(super) fn write(&mut self, records: &[u8], count: u64) -> Result<u64> {
        self.file
            .write_all(records)
            .and_then(|()| self.file.sync_data())
            .map_err(|e| Error::io(format!("writing {}", self.path.display()), e))?;
        self.records += count;
        Ok(self.records)
    }

    /// A crash between the rename and the creation of `journal_<m>` leaves
    /// `snapshot_<m>` without its journal file; replay allows for it
    /// (`journals_to_replay`).
    pub(super) fn compact(&mut self, record: &[u8]) -> Result<()> {
        let m = self.number + 1;
        let path = self.dir.join(compaction_name(m));
        let tmp = self.dir.join(format!("compacting_{m}"));
        let write = || -> std::io::Result<()> {
            let mut f = File::create(&tmp)?;
            f.write_all(record)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)
        };
        write().map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
        sync_dir(&self.dir)?;
        *self = Self::create(&self.dir, m)?;
        // Everything before the compaction is now redundant.
        let (journals, compactions) = list(&self.dir)?;
        for n in journals.into_iter().filter(|&n| n < m) {
            let _ = std::fs::remove_file(self.dir.join(format!("journal_{n}")));
        }
        for n in compactions.into_iter().filter(|&n| n < m) {
            let _ = std::fs::remove_file(self.dir.join(compaction_name(n)));
        }
        tracing::info!(compaction = %path.display(), "journal compacted");
        Ok(())
    }

    /// Records written to the current file (the compaction trigger).
    pub(super) fn records(&self) -> u64 {
        self.records
    }

    /// The current file.
    pub(super) fn path(&self) -> String {
        self.path.display().to_string()
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
    use super::super::open;
    use super::*;
    use tfdata_proto::data::Update;
    use tfdata_proto::data::{RegisterDatasetUpdate, update::UpdateType};
    use tfdata_proto::tfdata::compaction::CompactedState;

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
        let r = open(&dir.path().into()).unwrap();
        assert!(r.updates.is_empty() && r.compaction.is_none());
        r.writer.write(&dataset("a")).unwrap();
        r.writer.write(&dataset("b")).unwrap();
        drop(r);
        let r = open(&dir.path().into()).unwrap();
        assert_eq!(r.updates, vec![dataset("a"), dataset("b")]);
        assert!(r.writer.path().ends_with("journal_1"));
        r.writer.write(&dataset("c")).unwrap();
        let r = open(&dir.path().into()).unwrap();
        assert_eq!(r.updates.len(), 3);
        assert!(r.writer.path().ends_with("journal_2"));

        // Compaction: the compacted state replaces the history; later
        // writes follow it.
        let compacted = tfdata_proto::tfdata::compaction::CompactedState {
            format_version: 1,
            next_dataset_id: 1234,
            ..Default::default()
        };
        r.writer.compact(&compacted).unwrap();
        r.writer.write(&dataset("d")).unwrap();
        drop(r);
        let r = open(&dir.path().into()).unwrap();
        assert_eq!(r.compaction.unwrap().1.next_dataset_id, 1234);
        assert_eq!(r.updates, vec![dataset("d")]);
        let files = std::fs::read_dir(dir.path().join(JOURNAL_DIR))
            .unwrap()
            .count();
        assert_eq!(files, 3, "snapshot_3, journal_3 and the new journal_4");
    }

    fn compacted(next_dataset_id: i64) -> CompactedState {
        CompactedState {
            format_version: 1,
            next_dataset_id,
            ..Default::default()
        }
    }

    /// A crash after a compaction renamed `snapshot_<m>` into place and
    /// before it created `journal_<m>`: the next start writes
    /// `journal_<m + 1>`, and later starts replay it (they stopped at the
    /// missing `journal_<m>` and lost what it held). A gap anywhere else is
    /// lost history and refuses the start.
    #[test]
    fn a_crash_between_a_compaction_and_its_journal_file_loses_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let journal_dir = dir.path().join(JOURNAL_DIR);
        let r = open(&dir.path().into()).unwrap();
        r.writer.write(&dataset("a")).unwrap();
        drop(r);
        let r = open(&dir.path().into()).unwrap();
        assert!(r.writer.path().ends_with("journal_1"));
        // Something in journal_2's place fails its creation right after
        // the compaction's rename: where a crash would stop.
        std::fs::create_dir(journal_dir.join("journal_2")).unwrap();
        assert!(r.writer.compact(&compacted(7)).is_err());
        drop(r);
        std::fs::remove_dir(journal_dir.join("journal_2")).unwrap();
        assert!(journal_dir.join("snapshot_2").exists());

        let r = open(&dir.path().into()).unwrap();
        assert_eq!(r.compaction.as_ref().unwrap().1.next_dataset_id, 7);
        assert!(r.updates.is_empty());
        assert!(r.writer.path().ends_with("journal_3"));
        r.writer.write(&dataset("b")).unwrap();
        drop(r);
        for _ in 0..2 {
            let r = open(&dir.path().into()).unwrap();
            assert_eq!(r.compaction.as_ref().unwrap().1.next_dataset_id, 7);
            assert_eq!(r.updates, vec![dataset("b")]);
        }

        // journal_3 gone while journal_4 and journal_5 exist: refused.
        std::fs::remove_file(journal_dir.join("journal_3")).unwrap();
        let err = open(&dir.path().into()).err().unwrap().to_string();
        assert!(
            err.contains("journal_3") && err.contains("acknowledged updates were lost"),
            "{err}"
        );
    }

    #[test]
    fn a_torn_tail_in_the_newest_file_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let w = open(&dir.path().into()).unwrap().writer;
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
        assert_eq!(
            open(&dir.path().into()).unwrap().updates,
            vec![dataset("a")]
        );
        // The torn bytes are gone for good: once a newer file exists the
        // torn one is no longer the newest, and later starts still replay
        // (found by the dispatcher_journal fuzz target: `000000010026`).
        assert_eq!(
            open(&dir.path().into()).unwrap().updates,
            vec![dataset("a")]
        );
    }

    #[test]
    fn a_journal_of_one_torn_byte_starts_again_and_again() {
        let dir = tempfile::tempdir().unwrap();
        let journal_dir = dir.path().join(JOURNAL_DIR);
        std::fs::create_dir_all(&journal_dir).unwrap();
        std::fs::write(journal_dir.join("journal_0"), [0x26]).unwrap();
        for _ in 0..3 {
            assert!(open(&dir.path().into()).unwrap().updates.is_empty());
        }
    }

    #[test]
    fn corruption_refuses_to_start_naming_file_and_offset() {
        let dir = tempfile::tempdir().unwrap();
        let w = open(&dir.path().into()).unwrap().writer;
        w.write(&dataset("first")).unwrap();
        w.write(&dataset("second")).unwrap();
        let path = w.path();
        drop(w);
        let mut bytes = std::fs::read(&path).unwrap();
        let second = bytes.len() - 10; // inside the second record's data
        bytes[second] ^= 0x40;
        std::fs::write(&path, &bytes).unwrap();
        let err = open(&dir.path().into()).err().unwrap().to_string();
        assert!(err.contains("journal_0") && err.contains("offset"), "{err}");

        std::fs::write(dir.path().join(JOURNAL_DIR).join("notes.txt"), b"x").unwrap();
        assert!(open(&dir.path().into()).is_err());
    }
}
