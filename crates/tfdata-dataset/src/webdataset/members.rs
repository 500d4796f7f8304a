//! A shard's tar members, read streaming: headers parsed with the `tar`
//! crate's [`tar::Header`] (numeric fields, ustar prefixes, checksums) and
//! [`tar::PaxExtensions`], the 512-byte framing done here so that every
//! byte offset is known, nothing is read into memory unasked, and damage is
//! reported where it is. (The crate's own `Archive::entries` reads GNU long
//! names and PAX headers of any size into memory, borrows the archive for
//! the iteration's lifetime and cannot tell a missing end-of-archive block
//! from a clean end.)
//!
//! What is read is what Python's `tarfile` (webdataset's reader) reads:
//!
//! * members' names come from a PAX `path`, a GNU long name (`L`) or the
//!   header (with its ustar prefix), the first of these a member has taking
//!   precedence as in `tarfile`; a PAX `size` overrides the header's;
//! * regular files are types `0`, `\0` and `7` (an old-style `\0` whose
//!   name ends in `/` is a directory); links, devices, directories and
//!   FIFOs have no data whatever their size field says, and members of
//!   unknown types have `size` bytes of data (both as `tarfile`);
//! * global PAX headers (`g`) and GNU long link names (`K`) are skipped.
//!
//! Where `tarfile` silently stops (a header with a bad checksum, a file
//! that ends inside a header or without tar's end-of-archive block), this
//! reader returns [`Error::DataLoss`] naming the shard and the offset: a
//! truncated or damaged shard must not look like a shorter one. GNU sparse
//! members (never in a shard webdataset writes) are refused. The reader
//! is fused: after an error or the end it returns `Ok(None)`.

use std::io::{self, Read};

use bytes::Bytes;
use tfdata_core::{Error, Result};

use crate::io::CompressionType;
use crate::io::compression::{is_corruption, location, read_full};

/// The tar block size.
pub const BLOCK: u64 = 512;
/// Largest GNU long name or PAX header read (their bytes are held).
pub const MAX_EXTENSION_BYTES: u64 = 1 << 20;

/// One member's header, its data not read yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Its path in the archive, as stored (not necessarily UTF-8).
    pub name: Vec<u8>,
    /// The offset of its first header block (extension headers included).
    pub offset: u64,
    /// Bytes of data (none for links, directories, devices).
    pub size: u64,
    /// A regular file (`tarfile`'s `isreg()`).
    pub regular: bool,
}

/// The members of one tar stream.
pub struct TarMembers<R> {
    url: String,
    compression: CompressionType,
    input: R,
    /// Offset of the next unread byte (of the uncompressed stream).
    pos: u64,
    /// Data bytes of the last member not read yet, then its padding.
    unread_data: u64,
    unread_padding: u64,
    /// Name of the last member (for errors about its data).
    current: Vec<u8>,
    done: bool,
}

impl<R: Read> TarMembers<R> {
    /// Members of `input`, the (uncompressed) bytes of the shard `url`;
    /// `compression` is what they were uncompressed from (for errors).
    pub fn new(url: impl Into<String>, input: R, compression: CompressionType) -> Self {
        TarMembers {
            url: url.into(),
            compression,
            input,
            pos: 0,
            unread_data: 0,
            unread_padding: 0,
            current: Vec::new(),
            done: false,
        }
    }

    /// The shard's name, as errors give it.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The next member (the last one's unread data is skipped first), or
    /// `None` at the end-of-archive block.
    pub fn next_member(&mut self) -> Result<Option<Member>> {
        if self.done {
            return Ok(None);
        }
        let result = self.read_member();
        if !matches!(result, Ok(Some(_))) {
            self.done = true;
        }
        result
    }

    /// The data of the member [`Self::next_member`] just returned, all of
    /// it (the caller checked its size is acceptable).
    pub fn read_data(&mut self) -> Result<Bytes> {
        if self.done {
            return Err(Error::Internal(format!(
                "webdataset: {}: reading data after the end",
                self.url
            )));
        }
        let start = self.pos;
        let size = self.unread_data;
        // Grown as the bytes arrive: a size that lies costs no memory.
        let mut data = Vec::with_capacity(usize::try_from(size.min(8 << 20)).unwrap_or(0));
        let read = (&mut self.input).take(size).read_to_end(&mut data);
        let got = data.len() as u64;
        self.pos += got;
        self.unread_data -= got;
        if let Err(e) = read {
            self.done = true;
            return Err(self.read_error(start + got, e));
        }
        if got < size {
            self.done = true;
            return Err(self.data_loss(
                start + got,
                format!(
                    "the shard ends inside the data of member {} ({got} of its {size} bytes)",
                    show(&self.current)
                ),
            ));
        }
        Ok(data.into())
    }

    fn read_member(&mut self) -> Result<Option<Member>> {
        let rest = self.unread_data.saturating_add(self.unread_padding);
        self.skip(rest)?;
        let offset = self.pos;
        let mut name: Option<Vec<u8>> = None;
        let mut pax_size: Option<u64> = None;
        let mut extended = false;
        loop {
            let header_at = self.pos;
            let Some(header) = self.read_header()? else {
                return if extended {
                    Err(self.data_loss(
                        offset,
                        "extension headers (long name or PAX) without a member after them".into(),
                    ))
                } else {
                    Ok(None)
                };
            };
            let kind = header.as_bytes()[156];
            match kind {
                // GNU long name, PAX local headers: read (bounded), then the member.
                b'L' | b'x' | b'X' => {
                    let size = self.size_of(&header, header_at)?;
                    if size > MAX_EXTENSION_BYTES {
                        return Err(self.data_loss(
                            header_at,
                            format!(
                                "an extension header of {size} bytes (at most \
                                 {MAX_EXTENSION_BYTES})"
                            ),
                        ));
                    }
                    self.unread_data = size;
                    self.unread_padding = padding(size);
                    self.current = b"(extension header)".to_vec();
                    let data = self.read_data()?;
                    self.skip(self.unread_padding)?;
                    if kind == b'L' {
                        let end = data.iter().position(|&b| b == 0).unwrap_or(data.len());
                        name.get_or_insert_with(|| data[..end].to_vec());
                    } else {
                        for ext in tar::PaxExtensions::new(&data) {
                            let ext = ext.map_err(|e| {
                                self.data_loss(header_at, format!("a malformed PAX header: {e}"))
                            })?;
                            match ext.key_bytes() {
                                b"path" => {
                                    name.get_or_insert_with(|| ext.value_bytes().to_vec());
                                }
                                b"size" => {
                                    let size = std::str::from_utf8(ext.value_bytes())
                                        .ok()
                                        .and_then(|s| s.parse::<u64>().ok())
                                        .ok_or_else(|| {
                                            self.data_loss(
                                                header_at,
                                                format!(
                                                    "a PAX size {:?} is not a number",
                                                    show(ext.value_bytes())
                                                ),
                                            )
                                        })?;
                                    pax_size.get_or_insert(size);
                                }
                                _ => {}
                            }
                        }
                    }
                    extended = true;
                    continue;
                }
                // Global PAX headers, GNU long link names: skipped.
                b'g' | b'K' => {
                    let size = self.size_of(&header, header_at)?;
                    self.unread_data = size;
                    self.unread_padding = padding(size);
                    self.current = b"(extension header)".to_vec();
                    self.skip(size.saturating_add(self.unread_padding))?;
                    extended = true;
                    continue;
                }
                b'S' => {
                    return Err(self.data_loss(
                        header_at,
                        "a GNU sparse member: not supported in shards".into(),
                    ));
                }
                _ => {}
            }
            let name = name.unwrap_or_else(|| header.path_bytes().into_owned());
            let size = match pax_size {
                Some(size) => size,
                None => self.size_of(&header, header_at)?,
            };
            let directory = kind == 0 && name.last() == Some(&b'/');
            let regular = matches!(kind, b'0' | 0 | b'7') && !directory;
            let has_data = !matches!(kind, b'1'..=b'6') && !directory;
            let size = if has_data { size } else { 0 };
            self.unread_data = size;
            self.unread_padding = padding(size);
            self.current = name.clone();
            return Ok(Some(Member {
                name,
                offset,
                size,
                regular,
            }));
        }
    }

    fn size_of(&self, header: &tar::Header, at: u64) -> Result<u64> {
        header
            .entry_size()
            .map_err(|e| self.data_loss(at, format!("a header's size is unreadable: {e}")))
    }

    /// The next header block; `None` at the end-of-archive (all-zero)
    /// block. A missing end block is an error: the shard was cut.
    fn read_header(&mut self) -> Result<Option<tar::Header>> {
        let at = self.pos;
        let mut header = tar::Header::new_old();
        let block = header.as_mut_bytes();
        let got = self.read_full(block)?;
        if got == 0 && at == 0 {
            return Err(self.data_loss(at, "the shard is empty (not a tar file)".into()));
        }
        if got == 0 {
            return Err(self.data_loss(
                at,
                "the shard ends without tar's end-of-archive block (truncated at a member \
                 boundary?)"
                    .into(),
            ));
        }
        if got < block.len() {
            return Err(self.data_loss(
                at,
                format!("the shard ends inside a member header ({got} of 512 bytes)"),
            ));
        }
        if block.iter().all(|&b| b == 0) {
            return Ok(None);
        }
        // `tarfile` accepts the unsigned and the signed sum (old tars).
        let (mut unsigned, mut signed) = (8 * 32u32, 8 * 32i32);
        for (i, &b) in block.iter().enumerate() {
            if !(148..156).contains(&i) {
                unsigned += u32::from(b);
                signed += i32::from(b as i8);
            }
        }
        match header.cksum() {
            Ok(sum) if sum == unsigned || i64::from(sum) == i64::from(signed) => Ok(Some(header)),
            Ok(sum) => Err(self.data_loss(
                at,
                format!(
                    "not a tar header: checksum {sum} stored, {unsigned} computed (garbage or \
                     a damaged shard)"
                ),
            )),
            Err(e) => Err(self.data_loss(
                at,
                format!("not a tar header: its checksum field is unreadable ({e})"),
            )),
        }
    }

    /// Reads until `buf` is full or the input ends; how many bytes came. A
    /// read error names the offset of the block being read.
    fn read_full(&mut self, buf: &mut [u8]) -> Result<usize> {
        let got = read_full(&mut self.input, buf).map_err(|e| self.read_error(self.pos, e))?;
        self.pos += got as u64;
        Ok(got)
    }

    /// Skips `n` bytes (a member's unread data and padding).
    fn skip(&mut self, n: u64) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        let start = self.pos;
        let skipped = io::copy(&mut (&mut self.input).take(n), &mut io::sink());
        let skipped = match skipped {
            Ok(s) => s,
            Err(e) => return Err(self.read_error(start, e)),
        };
        self.pos += skipped;
        if skipped < n {
            return Err(self.data_loss(
                self.pos,
                format!(
                    "the shard ends inside member {} ({} bytes missing)",
                    show(&self.current),
                    n - skipped
                ),
            ));
        }
        let data = skipped.min(self.unread_data);
        self.unread_data -= data;
        self.unread_padding = self.unread_padding.saturating_sub(skipped - data);
        Ok(())
    }

    /// Where `offset` is, for errors: the shard, the offset, and whether it
    /// is an offset of the uncompressed stream.
    pub fn location(&self, offset: u64) -> String {
        format!(
            "webdataset shard {}",
            location(&self.url, self.compression, offset)
        )
    }

    fn data_loss(&self, offset: u64, reason: String) -> Error {
        Error::DataLoss {
            location: self.location(offset),
            reason,
        }
    }

    fn read_error(&self, offset: u64, e: io::Error) -> Error {
        if is_corruption(self.compression, &e) {
            self.data_loss(
                offset,
                format!(
                    "the {} stream is corrupt or truncated: {e}",
                    self.compression
                ),
            )
        } else {
            Error::io(
                format!(
                    "reading webdataset shard {}",
                    location(&self.url, self.compression, offset)
                ),
                e,
            )
        }
    }
}

/// Bytes after `size` bytes of data up to the next block.
fn padding(size: u64) -> u64 {
    (BLOCK - size % BLOCK) % BLOCK
}

/// A name for messages.
pub(crate) fn show(name: &[u8]) -> String {
    format!("{:?}", String::from_utf8_lossy(name))
}

/// Magic numbers of compressions `tarfile`'s `r|*` reads; gzip is read
/// here too, the others are refused by name.
const MAGICS: &[(&[u8], &str)] = &[
    (b"BZh", "bzip2"),
    (b"\xfd7zXZ\x00", "xz"),
    (b"\x28\xb5\x2f\xfd", "zstd"),
];

/// The shard's tar bytes: `input` as is, or uncompressed if it is gzip (a
/// `.tar.gz`, as webdataset reads it), buffered. Other compressions are
/// an error naming the shard.
pub fn tar_stream(
    url: &str,
    mut input: Box<dyn Read + Send>,
) -> Result<(Box<dyn io::BufRead + Send>, CompressionType)> {
    let mut head = [0u8; 6];
    let got = read_full(&mut input, &mut head)
        .map_err(|e| Error::io(format!("reading webdataset shard {url}"), e))?;
    let head = &head[..got];
    if let Some((_, name)) = MAGICS.iter().find(|(magic, _)| head.starts_with(magic)) {
        return Err(Error::InvalidArgument(format!(
            "webdataset shard {url} is {name}-compressed: only uncompressed and gzip shards \
             are read"
        )));
    }
    let compression = if head.starts_with(b"\x1f\x8b") {
        CompressionType::Gzip
    } else {
        CompressionType::None
    };
    let input: Box<dyn Read + Send> = Box::new(io::Cursor::new(head.to_vec()).chain(input));
    Ok((
        crate::io::compression::decompressing_reader(
            input,
            compression,
            crate::io::DEFAULT_BUFFER_SIZE,
        ),
        compression,
    ))
}
