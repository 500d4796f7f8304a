//! A small pool of large byte buffers for batch tensors.
//!
//! A batch of images is tens of MiB: above glibc's mmap threshold, so a
//! fresh buffer per batch is mapped, faulted in page by page and unmapped
//! when dropped, every batch (measured: the batch copy went from 62 to 409
//! µs per example that way, and the page-table churn stalls other threads).
//! Buffers taken from here go back when the last `Bytes` pointing at them is
//! dropped, so a pipeline reuses the same few buffers. The pool holds at most
//! [`MAX_POOLED`] buffers and only ones of at least [`MIN_POOLED_BYTES`];
//! smaller ones are cheap for the allocator.

use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;

/// Buffers smaller than this are not worth pooling.
pub const MIN_POOLED_BYTES: usize = 1 << 20;
/// At most this many idle buffers are kept.
pub const MAX_POOLED: usize = 8;

#[derive(Default)]
struct Pool {
    idle: Mutex<Vec<Vec<u8>>>,
}

fn pool() -> &'static Arc<Pool> {
    static POOL: OnceLock<Arc<Pool>> = OnceLock::new();
    POOL.get_or_init(Default::default)
}

/// An empty buffer with room for `capacity` bytes, reused if one is idle.
pub fn take(capacity: usize) -> Vec<u8> {
    if capacity >= MIN_POOLED_BYTES {
        let mut idle = pool().idle.lock().unwrap_or_else(|p| p.into_inner());
        // The smallest idle buffer that is large enough.
        if let Some(i) = idle
            .iter()
            .enumerate()
            .filter(|(_, b)| b.capacity() >= capacity)
            .min_by_key(|(_, b)| b.capacity())
            .map(|(i, _)| i)
        {
            let mut buf = idle.swap_remove(i);
            buf.clear();
            return buf;
        }
    }
    Vec::with_capacity(capacity)
}

/// Owns a pooled buffer while `Bytes` point into it; gives it back on drop.
struct Pooled(Vec<u8>);

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        let buf = std::mem::take(&mut self.0);
        if buf.capacity() < MIN_POOLED_BYTES {
            return;
        }
        let mut idle = pool().idle.lock().unwrap_or_else(|p| p.into_inner());
        if idle.len() < MAX_POOLED {
            idle.push(buf);
        } else if let Some(smallest) = idle.iter_mut().min_by_key(|b| b.capacity())
            && smallest.capacity() < buf.capacity()
        {
            *smallest = buf;
        }
    }
}

/// Freezes a buffer from [`take`] into `Bytes` that return it to the pool.
pub fn freeze(buf: Vec<u8>) -> Bytes {
    if buf.capacity() >= MIN_POOLED_BYTES {
        Bytes::from_owner(Pooled(buf))
    } else {
        Bytes::from(buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_buffers_come_back() {
        let mut a = take(2 << 20);
        let ptr = a.as_ptr();
        a.extend_from_slice(&vec![7u8; 2 << 20]);
        let bytes = freeze(a);
        assert_eq!(bytes.len(), 2 << 20);
        assert!(bytes.iter().all(|&b| b == 7));
        let slice = bytes.slice(10..20);
        drop(bytes);
        // Still borrowed by `slice`: not back yet.
        drop(slice);
        let again = take(2 << 20);
        assert_eq!(again.as_ptr(), ptr, "the buffer was reused");
        assert!(again.is_empty());
    }
}
