//! [`ObjectReader`]: an object streamed in ranged chunks, one fetched ahead
//! of the reader so the network overlaps with decoding, every chunk pinned
//! to the ETag the object had when it was opened.

use std::io::{self, Read};
use std::sync::Arc;

use ::object_store::path::Path;
use ::object_store::{GetOptions, ObjectStore};
use bytes::Bytes;
use tfdata_core::{Error, Result};

use super::error::{RequestError, StoreError};
use super::runtime::{Pending, block_on};

/// Streams an object in ranged chunks, one chunk fetched ahead.
pub(super) struct ObjectReader {
    url: String,
    store: Arc<dyn ObjectStore>,
    key: Path,
    /// The version being read: every ranged read must match it.
    e_tag: Option<String>,
    size: u64,
    /// Offset of the next chunk to fetch.
    next_fetch_offset: u64,
    /// The unread rest of the current chunk.
    chunk: Bytes,
    /// The next chunk, on its way.
    prefetch: Option<ChunkFetch>,
    chunk_size: u64,
}

/// A ranged read in flight.
struct ChunkFetch {
    /// The bytes asked for.
    len: u64,
    request: Pending<::object_store::Result<Bytes>>,
}

impl ObjectReader {
    /// Opens the object `key` (at `url`, for errors) of `store`. A `HEAD`
    /// request gives the size (so ranged reads know where to stop), the ETag
    /// to pin reads to, and a NotFound at open like a local file.
    pub(super) fn open(
        url: &str,
        store: Arc<dyn ObjectStore>,
        key: Path,
        chunk_size: u64,
    ) -> Result<Self> {
        let head = {
            let (store, key) = (store.clone(), key.clone());
            block_on(
                async move {
                    store
                        .get_opts(&key, GetOptions::new().with_head(true))
                        .await
                        .map(|r| r.meta)
                },
                || format!("opening {url}"),
            )?
        };
        let meta = head.map_err(|e| RequestError::new("opening", url, e))?;
        Ok(Self {
            url: url.to_string(),
            store,
            key,
            e_tag: meta.e_tag,
            size: meta.size,
            next_fetch_offset: 0,
            chunk: Bytes::new(),
            prefetch: None,
            chunk_size,
        })
    }

    /// Starts fetching the chunk at `self.next_fetch_offset`, if any is left.
    fn start_fetch(&mut self) -> Result<Option<ChunkFetch>> {
        if self.next_fetch_offset >= self.size {
            return Ok(None);
        }
        let start = self.next_fetch_offset;
        let end = (start + self.chunk_size).min(self.size);
        self.next_fetch_offset = end;
        let (store, key) = (self.store.clone(), self.key.clone());
        let options = GetOptions::new()
            .with_range(Some(start..end))
            .with_if_match(self.e_tag.clone());
        let request =
            Pending::spawn(async move { store.get_opts(&key, options).await?.bytes().await })?;
        Ok(Some(ChunkFetch {
            len: end - start,
            request,
        }))
    }

    /// Makes the next chunk current; false at the end of the object.
    fn advance(&mut self) -> Result<bool, StoreError> {
        let fetch = match self.prefetch.take() {
            Some(fetch) => Some(fetch),
            None => self.start_fetch()?,
        };
        let Some(ChunkFetch { len, request }) = fetch else {
            return Ok(false);
        };
        let offset = self.next_fetch_offset - len;
        let bytes = request
            .wait(|| format!("reading {}", self.url))?
            .map_err(|e| {
                RequestError::new(&format!("reading (at offset {offset})"), &self.url, e)
            })?;
        if bytes.len() as u64 != len {
            return Err(Error::FailedPrecondition(format!(
                "reading {} at offset {offset}: asked for {len} bytes, got {}; \
                 the object changed while it was being read",
                self.url,
                bytes.len()
            ))
            .into());
        }
        // Fetch the following chunk while this one is consumed.
        self.prefetch = self.start_fetch()?;
        self.chunk = bytes;
        Ok(true)
    }
}

impl Read for ObjectReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        while self.chunk.is_empty() {
            if !self.advance().map_err(StoreError::into_io_error)? {
                return Ok(0);
            }
        }
        let n = buf.len().min(self.chunk.len());
        buf[..n].copy_from_slice(&self.chunk.split_to(n));
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use crate::io::fs::FileSystem;
    use crate::io::object_store::test_support::{memory_fs, write};
    use std::io::Read;

    #[test]
    fn reads_stream_in_chunks() {
        let (fs, _) = memory_fs();
        let data: Vec<u8> = (0..100u8).collect();
        write(&fs, "s3://bucket/d/x.bin", &data);
        assert_eq!(fs.file_size("s3://bucket/d/x.bin").unwrap(), 100);
        assert_eq!(&fs.read_all("s3://bucket/d/x.bin").unwrap()[..], &data[..]);
        let mut got = Vec::new();
        let mut r = fs.open("s3://bucket/d/x.bin").unwrap();
        // Odd-sized reads straddle the 7-byte chunks.
        let mut buf = [0u8; 3];
        loop {
            let n = r.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(got, data);
        // Empty objects read as empty.
        write(&fs, "s3://bucket/empty", b"");
        let mut s = String::new();
        fs.open("s3://bucket/empty")
            .unwrap()
            .read_to_string(&mut s)
            .unwrap();
        assert!(s.is_empty());
    }

    #[test]
    fn replaced_object_is_an_error_not_a_mix() {
        let (fs, _) = memory_fs();
        write(&fs, "s3://bucket/x", &[1u8; 30]);
        let mut r = fs.open("s3://bucket/x").unwrap();
        let mut buf = [0u8; 7];
        r.read_exact(&mut buf).unwrap();
        write(&fs, "s3://bucket/x", &[2u8; 30]);
        // The prefetched chunk may still be the old version; then it fails.
        let err = r.read_to_end(&mut Vec::new()).unwrap_err();
        assert!(err.to_string().contains("s3://bucket/x"), "{err}");
        assert!(err.to_string().contains("changed"), "{err}");
    }
}
