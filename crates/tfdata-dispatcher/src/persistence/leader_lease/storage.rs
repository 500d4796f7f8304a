//! Where the lease record lives, and the one primitive the lease needs from
//! it: a compare-and-swap of the whole record.
//!
//! * [`LeaseStorage::ObjectStore`]: one object, written with `object_store`'s
//!   conditional `PUT`s — [`PutMode::Create`] (S3 `If-None-Match: *`) when
//!   there is none, [`PutMode::Update`] (S3 `If-Match: <etag>`) to replace
//!   the version that was read. The store decides the race atomically.
//! * [`LeaseStorage::Local`]: one file, replaced by write-to-temporary and
//!   `rename`, with the read-compare-replace done under an exclusive OS
//!   file lock (`flock`) on a sibling lock file, so two processes on one
//!   host, or on a shared file system whose locks work, cannot both win.
//!   Readers need no lock: `rename` swaps whole files.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path as FsPath, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, ObjectStore, PutMode, PutOptions, PutPayload, UpdateVersion};
use tfdata_core::{Error, Result};

use super::record::MAX_RECORD_BYTES;

/// The lease record's name in the work_dir. Not under
/// `tf_data_dispatcher_journal/`: the journal's recovery refuses names it
/// does not know there.
pub const LEASE_NAME: &str = "leader_lease";

/// The local lock file's name, next to the record.
const LOCK_NAME: &str = "leader_lease.lock";

/// The prefix of the temporary file a local record is written to (and
/// synced) before the lock is taken; the process id and a counter follow.
const TEMP_NAME: &str = "leader_lease.tmp";

/// How long a local writer waits for the lock file before giving up with
/// [`Error::Unavailable`]: holders keep it for a read and a rename, so a lock
/// held this long belongs to a stopped process (a SIGSTOPped one keeps its
/// `flock`), and waiting longer would stall the caller's renewals.
const LOCK_WAIT: Duration = Duration::from_secs(1);

/// Pause between attempts to take the local lock.
const LOCK_RETRY: Duration = Duration::from_millis(5);

/// The version of the record that was read, which a replacement must match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Version {
    /// The object's ETag and version id, as the store reported them.
    Object(UpdateVersion),
    /// The file's whole content (records are unique: they carry the
    /// holder, generation and renewal count).
    Local(Bytes),
}

/// A record as read, with its version.
#[derive(Debug, Clone)]
pub struct Stored {
    pub bytes: Bytes,
    pub version: Version,
}

/// What a compare-and-swap did.
#[derive(Debug)]
pub enum Swap {
    /// Written; the new version, to be matched by the next replacement.
    Written(Version),
    /// The record was not the expected one (another contender wrote first,
    /// or it appeared or disappeared): nothing was written.
    Conflict,
}

/// Where the lease record is kept.
#[derive(Clone)]
pub enum LeaseStorage {
    /// One object; `url` names it in messages.
    ObjectStore {
        store: Arc<dyn ObjectStore>,
        key: ObjectPath,
        url: String,
    },
    /// A directory on a local (or shared) file system.
    Local { dir: PathBuf },
}

impl std::fmt::Debug for LeaseStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LeaseStorage({})", self.location())
    }
}

impl LeaseStorage {
    /// The record's URL or path, for messages.
    pub fn location(&self) -> String {
        match self {
            Self::ObjectStore { url, .. } => url.clone(),
            Self::Local { dir } => dir.join(LEASE_NAME).display().to_string(),
        }
    }

    /// The current record, or `None` if there is none.
    pub async fn read(&self) -> Result<Option<Stored>> {
        match self {
            Self::ObjectStore { store, key, url } => {
                let got = match store.get_opts(key, GetOptions::new()).await {
                    Ok(got) => got,
                    Err(object_store::Error::NotFound { .. }) => return Ok(None),
                    Err(e) => return Err(unavailable("reading", url, &e)),
                };
                check_size(url, got.meta.size)?;
                let version = Version::Object(UpdateVersion {
                    e_tag: got.meta.e_tag.clone(),
                    version: got.meta.version.clone(),
                });
                let bytes = got
                    .bytes()
                    .await
                    .map_err(|e| unavailable("reading", url, &e))?;
                Ok(Some(Stored { bytes, version }))
            }
            Self::Local { dir } => read_local(&dir.join(LEASE_NAME)),
        }
    }

    /// Writes `bytes` if the record is still `expected` (`None`: if there
    /// is no record).
    pub async fn swap(&self, expected: Option<&Version>, bytes: Bytes) -> Result<Swap> {
        match self {
            Self::ObjectStore { store, key, url } => {
                let mode = match expected {
                    None => PutMode::Create,
                    Some(Version::Object(v)) => {
                        if v.e_tag.is_none() && v.version.is_none() {
                            return Err(Error::Unimplemented(format!(
                                "{url}: the object store reported neither an ETag nor a \
                                 version for the lease, so it cannot be replaced conditionally"
                            )));
                        }
                        PutMode::Update(v.clone())
                    }
                    Some(Version::Local(_)) => {
                        return Err(Error::Internal(format!(
                            "{url}: a local file's version given for an object"
                        )));
                    }
                };
                let put = store
                    .put_opts(key, PutPayload::from(bytes), PutOptions::from(mode))
                    .await;
                match put {
                    Ok(done) => Ok(Swap::Written(Version::Object(UpdateVersion {
                        e_tag: done.e_tag,
                        version: done.version,
                    }))),
                    // Create: it exists. Update: it changed, or (If-Match on
                    // a missing object) it was deleted.
                    Err(
                        object_store::Error::AlreadyExists { .. }
                        | object_store::Error::Precondition { .. }
                        | object_store::Error::NotFound { .. },
                    ) => Ok(Swap::Conflict),
                    Err(e @ object_store::Error::NotImplemented { .. }) => {
                        Err(Error::Unimplemented(format!(
                            "{url}: the object store client cannot write conditionally \
                             ({e}); for S3, conditional puts must not be disabled \
                             (aws_conditional_put=etag, the default)"
                        )))
                    }
                    Err(e) => Err(unavailable("writing", url, &e)),
                }
            }
            Self::Local { dir } => {
                let expected = match expected {
                    None => None,
                    Some(Version::Local(bytes)) => Some(bytes),
                    Some(Version::Object(_)) => {
                        return Err(Error::Internal(format!(
                            "{}: an object's version given for a local file",
                            dir.display()
                        )));
                    }
                };
                // The record is written and synced before the lock is
                // taken: a dispatcher stopped (SIGSTOP) or stalled while it
                // holds the lock keeps every other one from taking over, so
                // the lock covers only the read, the comparison and the
                // atomic rename.
                let temp = write_temp(dir, &bytes)?;
                let result = match lock_local(dir).await {
                    Ok(lock) => {
                        let result = swap_local(dir, expected, &temp, &bytes);
                        drop(lock); // closing the file releases the flock
                        result
                    }
                    Err(e) => Err(e),
                };
                match &result {
                    // The rename is durable once the directory is.
                    Ok(Swap::Written(_)) => sync_dir(dir)?,
                    _ => {
                        let _ = std::fs::remove_file(&temp);
                    }
                }
                result
            }
        }
    }
}

fn unavailable(action: &str, url: &str, err: &object_store::Error) -> Error {
    Error::Unavailable(format!("{action} the leader lease {url}: {err}"))
}

fn check_size(location: &str, size: u64) -> Result<()> {
    if size > MAX_RECORD_BYTES as u64 {
        return Err(Error::DataLoss {
            location: location.to_string(),
            reason: format!(
                "{size} bytes, more than the {MAX_RECORD_BYTES} a leader lease record can \
                 have; no dispatcher will take it over"
            ),
        });
    }
    Ok(())
}

fn read_local(path: &FsPath) -> Result<Option<Stored>> {
    let shown = path.display().to_string();
    let size = match std::fs::metadata(path) {
        Ok(meta) => meta.len(),
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io(format!("inspecting {shown}"), e)),
    };
    check_size(&shown, size)?;
    match std::fs::read(path) {
        Ok(bytes) => {
            // Replaced between the two calls: check what was read.
            check_size(&shown, bytes.len() as u64)?;
            let bytes = Bytes::from(bytes);
            Ok(Some(Stored {
                version: Version::Local(bytes.clone()),
                bytes,
            }))
        }
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(format!("reading {shown}"), e)),
    }
}

/// Takes the exclusive lock on `dir`'s lock file, waiting at most
/// [`LOCK_WAIT`].
async fn lock_local(dir: &FsPath) -> Result<File> {
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    let path = dir.join(LOCK_NAME);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| Error::io(format!("opening {}", path.display()), e))?;
    let attempts = LOCK_WAIT.as_millis() / LOCK_RETRY.as_millis().max(1);
    for _ in 0..=attempts {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(std::fs::TryLockError::WouldBlock) => tokio::time::sleep(LOCK_RETRY).await,
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(Error::io(format!("locking {}", path.display()), e));
            }
        }
    }
    Err(Error::Unavailable(format!(
        "{} has been locked by another process for more than {LOCK_WAIT:?}; \
         a dispatcher holding it may be stopped",
        path.display()
    )))
}

/// `bytes` in a new temporary file of this process in `dir`, synced.
fn write_temp(dir: &FsPath, bytes: &Bytes) -> Result<std::path::PathBuf> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    std::fs::create_dir_all(dir)
        .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let temp = dir.join(format!("{TEMP_NAME}.{}.{n}", std::process::id()));
    let io = |what: &str| {
        let what = format!("{what} {}", temp.display());
        move |e| Error::io(what, e)
    };
    let mut file = File::create(&temp).map_err(io("creating"))?;
    file.write_all(bytes).map_err(io("writing"))?;
    file.sync_all().map_err(io("syncing"))?;
    Ok(temp)
}

fn sync_dir(dir: &FsPath) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(format!("syncing {}", dir.display()), e))
}

/// The read-compare-replace, with the lock held: `temp` (holding `bytes`)
/// renamed over the lease when the lease is still `expected`.
fn swap_local(
    dir: &FsPath,
    expected: Option<&Bytes>,
    temp: &FsPath,
    bytes: &Bytes,
) -> Result<Swap> {
    let path = dir.join(LEASE_NAME);
    let current = read_local(&path)?;
    let matches = match (expected, &current) {
        (None, None) => true,
        (Some(want), Some(have)) => *want == have.bytes,
        _ => false,
    };
    if !matches {
        return Ok(Swap::Conflict);
    }
    std::fs::rename(temp, &path)
        .map_err(|e| Error::io(format!("renaming to {}", path.display()), e))?;
    Ok(Swap::Written(Version::Local(bytes.clone())))
}
