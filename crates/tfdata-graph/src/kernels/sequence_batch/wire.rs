//! The protobuf wire reading TensorFlow's fast `SequenceExample` parser
//! does, byte for byte: one-byte tags compared as bytes, lengths read as
//! 32-bit varints, nested lengths as limits (never past the enclosing
//! one), and a `Feature` read by its first
//! field only. Every read is bounded by the record.

use bytes::Bytes;
use tfdata_core::DType;

use crate::kernels::sequence_example::Values;

/// A position in a record and the current limit.
pub(super) struct Wire<'a> {
    buf: &'a [u8],
    pos: usize,
    limit: usize,
}

impl<'a> Wire<'a> {
    pub(super) fn new(buf: &'a [u8]) -> Wire<'a> {
        Wire {
            buf,
            pos: 0,
            limit: buf.len(),
        }
    }

    /// The last readable byte's end: the limit or the record's end.
    fn end(&self) -> usize {
        self.limit.min(self.buf.len())
    }

    /// At the limit (a pushed limit never passes the record's end: a
    /// length running past it ends there, and the next read fails).
    pub(super) fn at_end(&self) -> bool {
        self.pos >= self.limit
    }

    pub(super) fn expect_tag(&mut self, tag: u8) -> bool {
        if self.pos < self.end() && self.buf[self.pos] == tag {
            self.pos += 1;
            return true;
        }
        false
    }

    fn peek(&self) -> Option<u8> {
        (self.pos < self.end()).then(|| self.buf[self.pos])
    }

    pub(super) fn varint64(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for i in 0..10 {
            let b = self.peek()?;
            self.pos += 1;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    /// A varint kept to its low 32 bits, as protobuf's `ReadVarint32`.
    pub(super) fn varint32(&mut self) -> Option<u32> {
        self.varint64().map(|v| v as u32)
    }

    fn raw(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        if end > self.end() {
            return None;
        }
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Some(s)
    }

    /// A length-prefixed string.
    pub(super) fn string(&mut self) -> Option<&'a [u8]> {
        let n = self.varint32()? as usize;
        self.raw(n)
    }

    /// Limits reads to the next `len` bytes (within the current limit);
    /// the old limit, for [`Wire::pop_limit`].
    pub(super) fn push_limit(&mut self, len: u32) -> usize {
        let old = self.limit;
        self.limit = self.pos.saturating_add(len as usize).min(old);
        old
    }

    pub(super) fn pop_limit(&mut self, old: usize) {
        self.limit = old;
    }

    /// Skips one field of any wire type but groups; `None` if it is not
    /// a well-formed field.
    pub(super) fn skip_field(&mut self) -> Option<()> {
        let tag = self.varint32()?;
        if tag == 0 {
            return None;
        }
        match tag & 7 {
            0 => self.varint64().map(|_| ()),
            1 => self.raw(8).map(|_| ()),
            2 => self.string().map(|_| ()),
            5 => self.raw(4).map(|_| ()),
            _ => None,
        }
    }

    fn le32(&mut self) -> Option<u32> {
        self.raw(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}

/// The `Feature` field tag of a dtype's list.
fn list_tag(dtype: DType) -> u8 {
    match dtype {
        DType::String => 0x0a,
        DType::Float => 0x12,
        _ => 0x1a,
    }
}

/// Reads the `Feature` at `w` as a list of `dtype`: each value to `sink`
/// (or only counted). `None` when the feature is of another kind or
/// malformed, as TensorFlow's parser reports -1.
fn read_list(dtype: DType, w: &mut Wire<'_>, mut sink: Option<&mut Values>) -> Option<usize> {
    if !w.expect_tag(list_tag(dtype)) {
        return None;
    }
    let len = w.varint32()?;
    if len == 0 {
        return Some(0);
    }
    let list = w.push_limit(len);
    let mut n = 0usize;
    match dtype {
        DType::String => {
            while !w.at_end() {
                if !w.expect_tag(0x0a) {
                    return None;
                }
                let s = w.string()?;
                if let Some(Values::Bytes(v)) = sink.as_deref_mut() {
                    v.push(Bytes::copy_from_slice(s));
                }
                n += 1;
            }
        }
        DType::Float => match w.peek() {
            Some(0x0a) => {
                w.pos += 1;
                let packed_len = w.varint32()?;
                let packed = w.push_limit(packed_len);
                while !w.at_end() {
                    let bits = w.le32()?;
                    if let Some(Values::Float(v)) = sink.as_deref_mut() {
                        v.push(f32::from_bits(bits));
                    }
                    n += 1;
                }
                w.pop_limit(packed);
            }
            Some(0x0d) => {
                while !w.at_end() {
                    if !w.expect_tag(0x0d) {
                        return None;
                    }
                    let bits = w.le32()?;
                    if let Some(Values::Float(v)) = sink.as_deref_mut() {
                        v.push(f32::from_bits(bits));
                    }
                    n += 1;
                }
            }
            _ => return None,
        },
        _ => match w.peek() {
            Some(0x0a) => {
                w.pos += 1;
                let packed_len = w.varint32()?;
                let packed = w.push_limit(packed_len);
                while !w.at_end() {
                    let x = w.varint64()?;
                    if let Some(Values::Int(v)) = sink.as_deref_mut() {
                        v.push(x as i64);
                    }
                    n += 1;
                }
                w.pop_limit(packed);
            }
            Some(0x08) => {
                while !w.at_end() {
                    if !w.expect_tag(0x08) {
                        return None;
                    }
                    let x = w.varint64()?;
                    if let Some(Values::Int(v)) = sink.as_deref_mut() {
                        v.push(x as i64);
                    }
                    n += 1;
                }
            }
            _ => return None,
        },
    }
    w.pop_limit(list);
    Some(n)
}

/// The number of values of the `Feature` at `w`, `None` if it is not a
/// list of `dtype`.
pub(super) fn feature_len(dtype: DType, w: &mut Wire<'_>) -> Option<usize> {
    read_list(dtype, w, None)
}

/// Appends the `Feature` at `w`'s values to `values`; how many (0 when it
/// cannot be read: the callers' counts then disagree and they report it).
pub(super) fn read_feature(dtype: DType, w: &mut Wire<'_>, values: &mut Values) -> usize {
    let before = values.len();
    let _ = read_list(dtype, w, Some(values));
    values.len() - before
}

/// A 2-byte `Feature`: an empty list of `dtype`'s kind.
pub(super) fn skip_empty_feature(w: &mut Wire<'_>, dtype: DType) -> bool {
    w.expect_tag(list_tag(dtype)) && w.varint32() == Some(0)
}
