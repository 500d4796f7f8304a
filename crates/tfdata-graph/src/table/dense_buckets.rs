//! A dense hash table's bucket array as TensorFlow's
//! `MutableDenseHashTable` lays it out, so that `LookupTableExportV2`
//! gives its buckets bit for bit: open addressing over a power-of-two
//! array, a key's home bucket its hash's low bits (an integer key's hash
//! is its two's-complement bits, a string's TensorFlow's `Hash64`, i.e.
//! MurmurHash64A seeded with 0xDECAFCAFFE), triangular probing (the
//! n-th probe n buckets past the previous), the empty key in unused
//! buckets, the deleted key (over the old value) in removed ones, and the
//! array doubled, entries re-inserted in bucket order, before an insert
//! that could pass the load factor. Only used buckets are stored; the
//! array is written out when exported.

use std::collections::HashMap;

use tfdata_core::{Error, Result};

use super::{Key, Scalar};

/// TensorFlow's `Hash64`: MurmurHash64A with its seed.
fn hash64(data: &[u8]) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h: u64 = 0xDE_CAFC_AFFE ^ (data.len() as u64).wrapping_mul(M);
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let mut k = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        for (i, &b) in rest.iter().enumerate() {
            h ^= u64::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

fn hash(key: &Key) -> u64 {
    match key {
        Key::Int(v) => *v as u64,
        Key::Str(s) => hash64(s),
    }
}

/// Buckets an array may have before tfdata refuses to grow it (each
/// exported bucket is a row of the export).
const MAX_BUCKETS: u64 = 1 << 26;

#[derive(Debug)]
pub(super) struct DenseBuckets {
    num_buckets: u64,
    max_load_factor: f32,
    entries: u64,
    /// The used buckets (a key, or the deleted key over a removed entry's
    /// value); absent ones hold the empty key and the value type's zero.
    used: HashMap<u64, (Key, Vec<Scalar>)>,
    empty: Key,
    deleted: Key,
}

/// What a probe for a key found.
enum Probe {
    Found(u64),
    /// The first empty or deleted bucket on the key's path (an insert's
    /// place), the key not met before it.
    Free(u64),
}

impl DenseBuckets {
    pub(super) fn new(
        num_buckets: u64,
        max_load_factor: f32,
        empty: Key,
        deleted: Key,
    ) -> Result<Self> {
        check_buckets(num_buckets)?;
        Ok(DenseBuckets {
            num_buckets,
            max_load_factor,
            entries: 0,
            used: HashMap::new(),
            empty,
            deleted,
        })
    }

    pub(super) fn len(&self) -> usize {
        self.entries as usize
    }

    /// Walks `key`'s probe path as TensorFlow's insert does: stops at the
    /// key, or at the first empty or deleted bucket.
    fn probe_insert(&self, key: &Key) -> Result<Probe> {
        let mask = self.num_buckets - 1;
        let mut bucket = hash(key) & mask;
        let mut probes = 0u64;
        loop {
            match self.used.get(&bucket) {
                Some((k, _)) if k == key => return Ok(Probe::Found(bucket)),
                Some((k, _)) if *k == self.deleted => return Ok(Probe::Free(bucket)),
                None => return Ok(Probe::Free(bucket)),
                Some(_) => {}
            }
            probes += 1;
            bucket = (bucket + probes) & mask;
            if probes >= self.num_buckets {
                return Err(Error::Internal(
                    "Internal error in MutableDenseHashTable insert".into(),
                ));
            }
        }
    }

    /// The bucket holding `key`, as TensorFlow's find and remove probe:
    /// past deleted buckets, stopping at an empty one.
    fn probe_find(&self, key: &Key, what: &str) -> Result<Option<u64>> {
        let mask = self.num_buckets - 1;
        let mut bucket = hash(key) & mask;
        let mut probes = 0u64;
        loop {
            match self.used.get(&bucket) {
                Some((k, _)) if k == key => return Ok(Some(bucket)),
                None => return Ok(None),
                Some(_) => {}
            }
            probes += 1;
            bucket = (bucket + probes) & mask;
            if probes >= self.num_buckets {
                return Err(Error::Internal(format!(
                    "Internal error in MutableDenseHashTable {what}"
                )));
            }
        }
    }

    fn put(&mut self, key: Key, row: Vec<Scalar>) -> Result<()> {
        match self.probe_insert(&key)? {
            Probe::Found(b) => {
                if let Some(slot) = self.used.get_mut(&b) {
                    slot.1 = row;
                }
            }
            Probe::Free(b) => {
                self.entries += 1;
                self.used.insert(b, (key, row));
            }
        }
        Ok(())
    }

    /// Before inserting `batch` keys: doubles the array until they would
    /// fit under the load factor (TensorFlow counts every key as new).
    pub(super) fn reserve(&mut self, batch: u64) -> Result<()> {
        let pending = self.entries + batch;
        let load = f64::from(self.max_load_factor);
        if (pending as f64) <= self.num_buckets as f64 * load {
            return Ok(());
        }
        let mut n = self.num_buckets;
        loop {
            n = n
                .checked_shl(1)
                .filter(|&n| n <= MAX_BUCKETS)
                .ok_or_else(|| {
                    Error::InvalidArgument(format!(
                        "MutableDenseHashTable: more than {MAX_BUCKETS} buckets"
                    ))
                })?;
            if (pending as f64) <= n as f64 * load {
                break;
            }
        }
        let mut old: Vec<(u64, (Key, Vec<Scalar>))> = self.used.drain().collect();
        old.sort_unstable_by_key(|(b, _)| *b);
        self.num_buckets = n;
        self.entries = 0;
        for (_, (k, row)) in old {
            if k != self.deleted && k != self.empty {
                self.put(k, row)?;
            }
        }
        Ok(())
    }

    /// Sets `key`'s row (the caller has refused the empty and deleted
    /// keys and reserved room).
    pub(super) fn insert(&mut self, key: Key, row: Vec<Scalar>) -> Result<()> {
        self.put(key, row)
    }

    pub(super) fn remove(&mut self, key: &Key) -> Result<()> {
        if let Some(b) = self.probe_find(key, "remove")? {
            self.entries -= 1;
            if let Some(slot) = self.used.get_mut(&b) {
                slot.0 = self.deleted.clone();
            }
        }
        Ok(())
    }

    pub(super) fn find(&self, key: &Key) -> Result<Option<&[Scalar]>> {
        Ok(self
            .probe_find(key, "lookup")?
            .and_then(|b| self.used.get(&b))
            .map(|(_, row)| row.as_slice()))
    }

    /// The whole array: each bucket's key and row (`zero` where unused).
    pub(super) fn export(&self, zero: &[Scalar]) -> (Vec<Key>, Vec<Scalar>) {
        let mut keys = Vec::with_capacity(self.num_buckets as usize);
        let mut values = Vec::with_capacity(self.num_buckets as usize * zero.len());
        for b in 0..self.num_buckets {
            match self.used.get(&b) {
                Some((k, row)) => {
                    keys.push(k.clone());
                    values.extend_from_slice(row);
                }
                None => {
                    keys.push(self.empty.clone());
                    values.extend_from_slice(zero);
                }
            }
        }
        (keys, values)
    }

    pub(super) fn num_buckets(&self) -> u64 {
        self.num_buckets
    }
}

fn check_buckets(n: u64) -> Result<()> {
    if n > MAX_BUCKETS {
        return Err(Error::InvalidArgument(format!(
            "MutableDenseHashTable: more than {MAX_BUCKETS} buckets"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    #[test]
    fn hash64_is_tensorflows() {
        // Home buckets of TensorFlow 2.21's dense string table (observed).
        let home = |s: &str| hash64(s.as_bytes()) & 7;
        assert_eq!(
            [home("a"), home("bb"), home("ccc"), home("e")],
            [4, 0, 6, 7]
        );
    }

    #[test]
    fn collisions_probe_triangularly() {
        let mut t = DenseBuckets::new(8, 0.8, Key::Int(-1), Key::Int(-2)).unwrap();
        t.reserve(3).unwrap();
        for k in [1, 2, 9] {
            t.insert(Key::Int(k), vec![Scalar::F32(k as f32)]).unwrap();
        }
        t.remove(&Key::Int(2)).unwrap();
        let (keys, _) = t.export(&[Scalar::F32(0.0)]);
        let ints: Vec<i64> = keys
            .iter()
            .map(|k| match k {
                Key::Int(v) => *v,
                Key::Str(_) => 0,
            })
            .collect();
        assert_eq!(ints, [-1, 1, -2, -1, 9, -1, -1, -1]);
        assert_eq!(t.len(), 2);
        let _ = Key::Str(Bytes::new());
    }
}
