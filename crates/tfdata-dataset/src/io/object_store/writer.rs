//! [`ObjectWriter`]: an object buffered and uploaded on `flush()`, with one
//! `PUT` or, past one part, a multipart upload whose parts go out as they
//! fill. Objects are immutable: nothing appears before the flush, and a
//! writer dropped unflushed uploads nothing.

use std::collections::VecDeque;
use std::io::{self, Write};
use std::sync::Arc;

use ::object_store::path::Path;
use ::object_store::{MultipartUpload, ObjectStore, PutMultipartOptions, PutOptions, PutPayload};
use bytes::{Bytes, BytesMut};
use tfdata_core::Error;

use super::error::{RequestError, StoreError};
use super::runtime::{Pending, block_on};

/// Parts uploaded concurrently by one writer: enough to keep the network
/// busy while the next part fills, bounded so memory stays at a few parts.
const MAX_PARTS_IN_FLIGHT: usize = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WriterState {
    Open,
    /// Uploaded by a flush; the object is immutable now.
    Uploaded,
    /// An upload failed; the object was not written.
    Failed,
}

/// A multipart upload in progress.
struct Upload {
    upload: Box<dyn MultipartUpload>,
    in_flight: VecDeque<Pending<::object_store::Result<()>>>,
}

/// Buffers an object and uploads it on `flush()`: one `PUT` if it fits in a
/// part, else a multipart upload whose parts go out as they fill.
pub(super) struct ObjectWriter {
    url: String,
    store: Arc<dyn ObjectStore>,
    key: Path,
    part_size: usize,
    buffer: BytesMut,
    upload: Option<Upload>,
    state: WriterState,
}

impl ObjectWriter {
    /// A writer of the object `key` (at `url`, for errors) of `store`.
    pub(super) fn new(url: &str, store: Arc<dyn ObjectStore>, key: Path, part_size: usize) -> Self {
        Self {
            url: url.to_string(),
            store,
            key,
            part_size,
            buffer: BytesMut::new(),
            upload: None,
            state: WriterState::Open,
        }
    }

    fn check_open(&self) -> Result<(), StoreError> {
        match self.state {
            WriterState::Open => Ok(()),
            WriterState::Uploaded => Err(Error::FailedPrecondition(format!(
                "writing {}: the object was already uploaded by flush(); \
                 objects are immutable, so write everything before flushing",
                self.url
            ))
            .into()),
            WriterState::Failed => Err(Error::FailedPrecondition(format!(
                "writing {}: an earlier upload error left nothing written",
                self.url
            ))
            .into()),
        }
    }

    /// Sends `part` as the next part, starting the multipart upload if
    /// needed and waiting for the oldest part when too many are in flight.
    fn send_part(&mut self, part: Bytes) -> Result<(), StoreError> {
        if self.upload.is_none() {
            let (store, key) = (self.store.clone(), self.key.clone());
            let upload = block_on(
                async move {
                    store
                        .put_multipart_opts(&key, PutMultipartOptions::default())
                        .await
                },
                || format!("writing {}", self.url),
            )?
            .map_err(|e| RequestError::new("starting the upload of", &self.url, e))?;
            self.upload = Some(Upload {
                upload,
                in_flight: VecDeque::new(),
            });
        }
        let url = self.url.clone();
        let upload = self.upload.as_mut().expect("started above");
        while upload.in_flight.len() >= MAX_PARTS_IN_FLIGHT {
            if let Some(oldest) = upload.in_flight.pop_front() {
                oldest
                    .wait(|| format!("writing {url}"))?
                    .map_err(|e| RequestError::new("uploading a part of", &url, e))?;
            }
        }
        let part = upload.upload.put_part(PutPayload::from(part));
        upload.in_flight.push_back(Pending::spawn(part)?);
        Ok(())
    }

    fn write_buffered(&mut self, data: &[u8]) -> Result<(), StoreError> {
        self.check_open()?;
        self.buffer.extend_from_slice(data);
        while self.buffer.len() >= self.part_size {
            let part = self.buffer.split_to(self.part_size).freeze();
            if let Err(e) = self.send_part(part) {
                self.abort();
                return Err(e);
            }
        }
        Ok(())
    }

    /// Uploads everything written: one `PUT`, or the last part and the
    /// multipart completion.
    fn upload(&mut self) -> Result<(), StoreError> {
        let data = std::mem::take(&mut self.buffer).freeze();
        if self.upload.is_none() {
            let (store, key) = (self.store.clone(), self.key.clone());
            let put = block_on(
                async move {
                    store
                        .put_opts(&key, PutPayload::from(data), PutOptions::default())
                        .await
                },
                || format!("writing {}", self.url),
            )?;
            return put
                .map(|_| ())
                .map_err(|e| RequestError::new("uploading", &self.url, e).into());
        }
        if !data.is_empty() {
            self.send_part(data)?;
        }
        // Wait for the parts while the upload stays in `self`, so an error
        // leaves it there for `abort`.
        if let Some(upload) = self.upload.as_mut() {
            while let Some(part) = upload.in_flight.pop_front() {
                part.wait(|| format!("writing {}", self.url))?
                    .map_err(|e| RequestError::new("uploading a part of", &self.url, e))?;
            }
        }
        let Some(Upload { mut upload, .. }) = self.upload.take() else {
            return Ok(());
        };
        let (upload, result) = block_on(
            async move {
                let result = upload.complete().await;
                (upload, result)
            },
            || format!("writing {}", self.url),
        )?;
        if let Err(e) = result {
            self.upload = Some(Upload {
                upload,
                in_flight: VecDeque::new(),
            });
            return Err(RequestError::new("completing the upload of", &self.url, e).into());
        }
        Ok(())
    }

    /// Abandons the object: aborts a multipart upload (so its parts are not
    /// billed forever) and drops the buffer. Best effort.
    fn abort(&mut self) {
        self.state = WriterState::Failed;
        self.buffer = BytesMut::new();
        if let Some(Upload {
            mut upload,
            in_flight,
        }) = self.upload.take()
        {
            drop(in_flight);
            let _ = block_on(async move { upload.abort().await }, String::new);
        }
    }
}

impl Write for ObjectWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.write_buffered(data)
            .map_err(StoreError::into_io_error)?;
        Ok(data.len())
    }

    /// Uploads the object (the first call; later ones do nothing). The
    /// object appears only now, complete.
    fn flush(&mut self) -> io::Result<()> {
        if self.state == WriterState::Uploaded {
            return Ok(());
        }
        self.check_open().map_err(StoreError::into_io_error)?;
        match self.upload() {
            Ok(()) => {
                self.state = WriterState::Uploaded;
                Ok(())
            }
            Err(e) => {
                self.abort();
                Err(e.into_io_error())
            }
        }
    }
}

impl Drop for ObjectWriter {
    /// Without a flush nothing is uploaded: an unfinished object (a writer
    /// dropped by an error or a panic) must not look like a complete one.
    fn drop(&mut self) {
        if self.state == WriterState::Open {
            self.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use ::object_store::GetOptions;
    use ::object_store::path::Path;

    use super::*;
    use crate::io::fs::FileSystem;
    use crate::io::object_store::runtime::block_on;
    use crate::io::object_store::test_support::{memory_fs, write};

    #[test]
    fn writes_upload_on_flush_only() {
        let (fs, store) = memory_fs();
        // Dropped without flush: nothing appears, even past one part.
        let mut w = fs.create("s3://bucket/dropped").unwrap();
        w.write_all(&[0u8; 25]).unwrap();
        drop(w);
        assert!(!fs.exists("s3://bucket/dropped").unwrap());

        // 25 bytes with 10-byte parts: a multipart upload of 3 parts.
        let data: Vec<u8> = (0..25u8).collect();
        let mut w = fs.create("s3://bucket/multi").unwrap();
        for piece in data.chunks(4) {
            w.write_all(piece).unwrap();
        }
        assert!(!fs.exists("s3://bucket/multi").unwrap());
        w.flush().unwrap();
        w.flush().unwrap();
        assert_eq!(&fs.read_all("s3://bucket/multi").unwrap()[..], &data[..]);
        let err = w.write_all(b"more").unwrap_err();
        assert!(err.to_string().contains("immutable"), "{err}");
        drop(w);

        // Exactly one part: still multipart, nothing left for the end.
        write(&fs, "s3://bucket/ten", &data[..10]);
        assert_eq!(&fs.read_all("s3://bucket/ten").unwrap()[..], &data[..10]);
        // Under one part: a single PUT.
        write(&fs, "s3://bucket/small", b"hi");
        let got = block_on(
            async move {
                store
                    .get_opts(&Path::from("small"), GetOptions::new())
                    .await?
                    .bytes()
                    .await
            },
            String::new,
        )
        .unwrap()
        .unwrap();
        assert_eq!(&got[..], b"hi");
    }
}
