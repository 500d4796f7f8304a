//! What arrow-ipc 59 would panic on, refused before it sees it. Its
//! decoders trust parts of a message that a damaged or hostile file
//! controls:
//!
//! * schema conversion (`fb_to_schema`) panics on a type it does not know,
//!   an integer or float width it has no type for, a list without exactly
//!   one child, a decimal precision out of range, bad union type ids;
//! * record batch decoding slices the body at each buffer's offset and
//!   length without a bounds check, builds each validity bitmap asserting
//!   it covers the array's length, pops one variadic buffer count per
//!   view column and asserts none is left, and unwraps the next buffer
//!   when it skips a column left out of a projection;
//! * a compressed buffer's declared length is allocated before anything
//!   checks it;
//! * an LZ4 buffer is decompressed to whatever its frames hold (`read_to_end`)
//!   before its length is compared with the declared one, up to LZ4's ratio
//!   of about 255 times the buffer ([`lz4_bound`] bounds it by the blocks'
//!   headers first; zstd decompresses into the declared length and stops).
//!
//! [`schema`] checks a schema flatbuffer for the first; [`body`] walks a
//! record batch's field nodes and buffers in the decoder's own order for
//! the others. What these accept, arrow-ipc decodes or refuses with an
//! error (its array validation checks offsets, UTF-8 and dictionary keys).

use arrow_ipc as ipc;
use arrow_schema::DataType;

use super::MAX_MESSAGE_BYTES;

/// Field nesting at most (the flatbuffer verifier also stops at 64 tables
/// deep, so real schemas never come near it).
const MAX_DEPTH: usize = 64;

/// Checks that `fb` converts to an Arrow schema without panicking.
pub(super) fn schema(fb: ipc::Schema<'_>) -> Result<(), String> {
    if fb.endianness() != ipc::Endianness::Little {
        return Err("the data is big-endian; only little-endian Arrow data is read".into());
    }
    let fields = fb.fields().ok_or("the schema lists no fields")?;
    for f in fields.iter() {
        field(f, 0)?;
    }
    Ok(())
}

fn field(f: ipc::Field<'_>, depth: usize) -> Result<(), String> {
    let name = f.name().unwrap_or("");
    let bad = |why: String| Err(format!("field {name:?}: {why}"));
    if depth > MAX_DEPTH {
        return bad(format!("nested more than {MAX_DEPTH} levels deep"));
    }
    if let Some(d) = f.dictionary() {
        match d.indexType() {
            Some(i) if matches!(i.bitWidth(), 8 | 16 | 32 | 64) => {}
            Some(i) => return bad(format!("dictionary keys of {} bits", i.bitWidth())),
            None => return bad("a dictionary without a key type".into()),
        }
    }
    let children = f.children();
    let count = children.map_or(0, |c| c.len());
    let missing = |what: &str| format!("a {what} type without its parameters");
    let t = f.type_type();
    match t {
        ipc::Type::Null
        | ipc::Type::Bool
        | ipc::Type::Binary
        | ipc::Type::BinaryView
        | ipc::Type::LargeBinary
        | ipc::Type::Utf8
        | ipc::Type::Utf8View
        | ipc::Type::LargeUtf8
        | ipc::Type::Struct_ => {}
        ipc::Type::Int => {
            let i = f.type_as_int().ok_or_else(|| missing("integer"))?;
            if !matches!(i.bitWidth(), 8 | 16 | 32 | 64) {
                return bad(format!("integers of {} bits", i.bitWidth()));
            }
        }
        ipc::Type::FixedSizeBinary => {
            let b = f
                .type_as_fixed_size_binary()
                .ok_or_else(|| missing("fixed-size binary"))?;
            if b.byteWidth() < 0 {
                return bad(format!("binary values of {} bytes", b.byteWidth()));
            }
        }
        ipc::Type::FloatingPoint => {
            let p = f
                .type_as_floating_point()
                .ok_or_else(|| missing("float"))?
                .precision();
            if !matches!(
                p,
                ipc::Precision::HALF | ipc::Precision::SINGLE | ipc::Precision::DOUBLE
            ) {
                return bad(format!("a float precision {p:?}"));
            }
        }
        ipc::Type::Date => {
            let u = f.type_as_date().ok_or_else(|| missing("date"))?.unit();
            if !matches!(u, ipc::DateUnit::DAY | ipc::DateUnit::MILLISECOND) {
                return bad(format!("a date unit {u:?}"));
            }
        }
        ipc::Type::Time => {
            let time = f.type_as_time().ok_or_else(|| missing("time"))?;
            let ok = matches!(
                (time.bitWidth(), time.unit()),
                (32, ipc::TimeUnit::SECOND | ipc::TimeUnit::MILLISECOND)
                    | (64, ipc::TimeUnit::MICROSECOND | ipc::TimeUnit::NANOSECOND)
            );
            if !ok {
                return bad(format!(
                    "a time of {} bits in {:?}",
                    time.bitWidth(),
                    time.unit()
                ));
            }
        }
        ipc::Type::Timestamp => {
            time_unit(
                f.type_as_timestamp()
                    .ok_or_else(|| missing("timestamp"))?
                    .unit(),
            )
            .or_else(&bad)?;
        }
        ipc::Type::Duration => {
            time_unit(
                f.type_as_duration()
                    .ok_or_else(|| missing("duration"))?
                    .unit(),
            )
            .or_else(&bad)?;
        }
        ipc::Type::Interval => {
            let u = f
                .type_as_interval()
                .ok_or_else(|| missing("interval"))?
                .unit();
            if !matches!(
                u,
                ipc::IntervalUnit::YEAR_MONTH
                    | ipc::IntervalUnit::DAY_TIME
                    | ipc::IntervalUnit::MONTH_DAY_NANO
            ) {
                return bad(format!("an interval unit {u:?}"));
            }
        }
        ipc::Type::List | ipc::Type::LargeList | ipc::Type::ListView | ipc::Type::LargeListView => {
            one_child(count).or_else(&bad)?;
        }
        ipc::Type::FixedSizeList => {
            one_child(count).or_else(&bad)?;
            let l = f
                .type_as_fixed_size_list()
                .ok_or_else(|| missing("fixed-size list"))?;
            if l.listSize() < 0 {
                return bad(format!("lists of {} items", l.listSize()));
            }
        }
        ipc::Type::Map => {
            one_child(count).or_else(&bad)?;
            f.type_as_map().ok_or_else(|| missing("map"))?;
        }
        ipc::Type::RunEndEncoded => {
            if count != 2 {
                return bad(format!(
                    "a run-end encoded type with {count} children, not 2"
                ));
            }
        }
        ipc::Type::Decimal => {
            let d = f.type_as_decimal().ok_or_else(|| missing("decimal"))?;
            if u8::try_from(d.precision()).is_err()
                || i8::try_from(d.scale()).is_err()
                || !matches!(d.bitWidth(), 32 | 64 | 128 | 256)
            {
                return bad(format!(
                    "a decimal of precision {}, scale {}, {} bits",
                    d.precision(),
                    d.scale(),
                    d.bitWidth()
                ));
            }
        }
        ipc::Type::Union => {
            let u = f.type_as_union().ok_or_else(|| missing("union"))?;
            if !matches!(u.mode(), ipc::UnionMode::Dense | ipc::UnionMode::Sparse) {
                return bad(format!("a union mode {:?}", u.mode()));
            }
            match u.typeIds() {
                // Type ids are the children's positions, which must fit an i8.
                None if count > 128 => return bad(format!("a union of {count} types")),
                None => {}
                Some(ids) => {
                    let mut seen = [false; 128];
                    // arrow-ipc reads each id as an i8 (`as`, truncating).
                    for id in ids.iter().map(|i| i as i8) {
                        let Ok(i) = usize::try_from(id) else {
                            return bad(format!("a union type id {id}"));
                        };
                        if std::mem::replace(&mut seen[i], true) {
                            return bad(format!("the union type id {id} twice"));
                        }
                    }
                    if ids.len() != count {
                        return bad(format!("{} union type ids for {count} types", ids.len()));
                    }
                }
            }
        }
        t => return bad(format!("an unknown type {t:?}")),
    }
    if let Some(children) = children {
        for c in children.iter() {
            field(c, depth + 1)?;
        }
    }
    Ok(())
}

fn one_child(count: usize) -> Result<(), String> {
    if count == 1 {
        Ok(())
    } else {
        Err(format!("a list type with {count} child fields, not 1"))
    }
}

fn time_unit(u: ipc::TimeUnit) -> Result<(), String> {
    if matches!(
        u,
        ipc::TimeUnit::SECOND
            | ipc::TimeUnit::MILLISECOND
            | ipc::TimeUnit::MICROSECOND
            | ipc::TimeUnit::NANOSECOND
    ) {
        Ok(())
    } else {
        Err(format!("a time unit {u:?}"))
    }
}

/// What an LZ4 buffer's blocks may hold beyond its declared length: each
/// frame's last block is partly filled (at most [`MAX_LZ4_FRAMES`] frames
/// of 4 MiB blocks).
const LZ4_SLACK: u64 = MAX_LZ4_FRAMES as u64 * (4 << 20);
/// LZ4 frames in one buffer at most: Arrow's writers (C++, Rust, Java) write
/// one.
const MAX_LZ4_FRAMES: usize = 16;

/// The most the LZ4 frames in `data` decompress to, from their headers
/// alone: a compressed block holds at most the frame's block size, a stored
/// one its own length. Every frame's layout is checked as the decoder reads
/// it (magic, descriptor, block sizes within the data, end mark), so the
/// bound covers everything the decoder would produce. Each step consumes at
/// least 4 bytes, so the walk ends.
pub(super) fn lz4_bound(data: &[u8]) -> Result<u64, String> {
    const MAGIC: u32 = 0x184D_2204;
    let word = |at: usize| -> Result<u32, String> {
        data.get(at..at + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .ok_or_else(|| format!("an LZ4 frame cut at byte {at}"))
    };
    let mut at = 0;
    let mut total: u64 = 0;
    let mut frames = 0;
    while at < data.len() {
        let magic = word(at)?;
        if magic & 0xFFFF_FFF0 == 0x184D_2A50 {
            // A skippable frame: its length, then bytes the decoder skips.
            let len = word(at + 4)? as usize;
            at = at
                .checked_add(8 + len)
                .filter(|&end| end <= data.len())
                .ok_or("a skippable LZ4 frame longer than its buffer")?;
            continue;
        }
        if magic != MAGIC {
            return Err(format!("no LZ4 frame at byte {at} (magic {magic:#x})"));
        }
        frames += 1;
        if frames > MAX_LZ4_FRAMES {
            return Err(format!("more than {MAX_LZ4_FRAMES} LZ4 frames"));
        }
        let (flg, bd) = match data.get(at + 4..at + 6) {
            Some(d) => (d[0], d[1]),
            None => return Err(format!("an LZ4 frame descriptor cut at byte {at}")),
        };
        let block_max: u64 = match (bd >> 4) & 7 {
            4 => 64 << 10,
            5 => 256 << 10,
            6 => 1 << 20,
            7 => 4 << 20,
            n => return Err(format!("an LZ4 block size code {n}")),
        };
        let content_size = flg & 0x08 != 0;
        let dictionary = flg & 0x01 != 0;
        let block_checksums = flg & 0x10 != 0;
        let content_checksum = flg & 0x04 != 0;
        // Magic, FLG, BD, the optional content size and dictionary id, and
        // the header checksum.
        at += 6 + if content_size { 8 } else { 0 } + if dictionary { 4 } else { 0 } + 1;
        loop {
            let header = word(at)?;
            at += 4;
            if header == 0 {
                break;
            }
            let size = u64::from(header & 0x7FFF_FFFF);
            if size > block_max {
                return Err(format!(
                    "an LZ4 block of {size} bytes in a frame of {block_max}-byte blocks"
                ));
            }
            let stored = header & 0x8000_0000 != 0;
            total = total.saturating_add(if stored { size } else { block_max });
            at = at
                .checked_add(size as usize + if block_checksums { 4 } else { 0 })
                .filter(|&end| end <= data.len())
                .ok_or("an LZ4 block longer than its buffer")?;
        }
        if content_checksum {
            at += 4;
        }
    }
    Ok(total)
}

/// One buffer of a message body: where it is, and its length once
/// decompressed.
#[derive(Clone, Copy)]
struct Span {
    len: u64,
}

/// Checks a record batch (or a dictionary batch's data) whose columns are
/// `types`, against its `body`: what the decoder reads lies in the body, and
/// the walk over `types` the decoder makes never runs out of buffers, meets
/// a validity bitmap shorter than its array, or leaves variadic counts over.
/// `v5`: the metadata version is V5 or later (unions have no validity
/// bitmap then).
pub(super) fn body(
    batch: ipc::RecordBatch<'_>,
    body: &[u8],
    types: &[&DataType],
    v5: bool,
) -> Result<(), String> {
    if batch.length() < 0 {
        return Err(format!("a batch of {} rows", batch.length()));
    }
    let nodes = batch.nodes().ok_or("a record batch without field nodes")?;
    let buffers = batch.buffers().ok_or("a record batch without buffers")?;
    let compressed = batch.compression().is_some();
    let lz4 = batch
        .compression()
        .is_some_and(|c| c.codec() == ipc::CompressionType::LZ4_FRAME);
    let mut spans = Vec::with_capacity(buffers.len());
    let mut decompressed: u64 = 0;
    for (i, b) in buffers.iter().enumerate() {
        let (Ok(offset), Ok(len)) = (u64::try_from(b.offset()), u64::try_from(b.length())) else {
            return Err(format!(
                "buffer {i} has offset {} and length {}",
                b.offset(),
                b.length()
            ));
        };
        let end = offset.saturating_add(len);
        if end > body.len() as u64 {
            return Err(format!(
                "buffer {i} ({len} bytes at {offset}) ends past the message body ({} bytes)",
                body.len()
            ));
        }
        let mut span = Span { len };
        if compressed && len > 0 {
            // The first 8 bytes: the length once decompressed (-1: stored
            // uncompressed after them).
            let at = offset as usize;
            let prefix = body
                .get(at..at + 8)
                .filter(|_| len >= 8)
                .and_then(|p| <[u8; 8]>::try_from(p).ok())
                .ok_or_else(|| {
                    format!("compressed buffer {i} is shorter than its length prefix")
                })?;
            let declared = i64::from_le_bytes(prefix);
            span.len = match declared {
                -1 => len - 8,
                n => u64::try_from(n)
                    .map_err(|_| format!("compressed buffer {i} declares {n} bytes"))?,
            };
            if lz4 && declared != -1 {
                let frames = &body[at + 8..at + len as usize];
                let most = lz4_bound(frames).map_err(|e| format!("compressed buffer {i}: {e}"))?;
                if most > span.len.saturating_add(LZ4_SLACK) {
                    return Err(format!(
                        "compressed buffer {i} declares {} bytes but its LZ4 blocks may hold {most}",
                        span.len
                    ));
                }
            }
            decompressed = decompressed.saturating_add(span.len);
            if decompressed > MAX_MESSAGE_BYTES {
                return Err(format!(
                    "its buffers decompress to more than {MAX_MESSAGE_BYTES} bytes (the limit)"
                ));
            }
        }
        spans.push(span);
    }
    let mut walk = Walk {
        nodes: nodes.iter().map(|n| (n.length(), n.null_count())).collect(),
        next_node: 0,
        spans,
        next_span: 0,
        variadic: batch
            .variadicBufferCounts()
            .map(|v| v.iter().collect())
            .unwrap_or_default(),
        next_variadic: 0,
        v5,
    };
    for t in types {
        walk.column(t, 0)?;
    }
    if walk.next_variadic != walk.variadic.len() {
        return Err(format!(
            "{} variadic buffer counts for {} view columns",
            walk.variadic.len(),
            walk.next_variadic
        ));
    }
    Ok(())
}

/// The decoder's walk over field nodes and buffers
/// (`RecordBatchDecoder::create_array` / `skip_field`).
struct Walk {
    nodes: Vec<(i64, i64)>,
    next_node: usize,
    spans: Vec<Span>,
    next_span: usize,
    variadic: Vec<i64>,
    next_variadic: usize,
    v5: bool,
}

impl Walk {
    /// The next field node: its length and null count.
    fn node(&mut self) -> Result<(u64, u64), String> {
        let &(len, nulls) = self
            .nodes
            .get(self.next_node)
            .ok_or("fewer field nodes than the schema has arrays")?;
        self.next_node += 1;
        match (u64::try_from(len), u64::try_from(nulls)) {
            (Ok(len), Ok(nulls)) if nulls <= len => Ok((len, nulls)),
            _ => Err(format!("an array of length {len} with {nulls} nulls")),
        }
    }

    fn buffer(&mut self) -> Result<Span, String> {
        let span = *self
            .spans
            .get(self.next_span)
            .ok_or("fewer buffers than the schema's arrays need")?;
        self.next_span += 1;
        Ok(span)
    }

    /// A buffer of values `width` bytes each: arrow-data's validation views
    /// offsets, views and dictionary keys as typed slices of the whole
    /// buffer, asserting its length is a multiple of `width`.
    fn values(&mut self, width: usize) -> Result<Span, String> {
        let span = self.buffer()?;
        if width > 1 && span.len % width as u64 != 0 {
            return Err(format!(
                "a buffer of {} bytes for values of {width} bytes",
                span.len
            ));
        }
        Ok(span)
    }

    /// The validity bitmap of an array of `len` values with `nulls` nulls:
    /// read (and so asserted long enough) only when there are nulls.
    fn validity(&mut self, len: u64, nulls: u64) -> Result<(), String> {
        let span = self.buffer()?;
        if nulls > 0 && span.len.saturating_mul(8) < len {
            return Err(format!(
                "a validity bitmap of {} bytes for {len} values",
                span.len
            ));
        }
        Ok(())
    }

    fn column(&mut self, t: &DataType, depth: usize) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err(format!("types nested more than {MAX_DEPTH} levels deep"));
        }
        use DataType as D;
        match t {
            D::Null => {
                self.node()?;
            }
            D::Utf8 | D::Binary | D::LargeUtf8 | D::LargeBinary => {
                let (len, nulls) = self.node()?;
                self.validity(len, nulls)?;
                let large = matches!(t, D::LargeUtf8 | D::LargeBinary);
                self.values(if large { 8 } else { 4 })?;
                self.buffer()?;
            }
            D::Utf8View | D::BinaryView => {
                let data_buffers = *self
                    .variadic
                    .get(self.next_variadic)
                    .ok_or("a view column without its variadic buffer count")?;
                self.next_variadic += 1;
                let data_buffers = u64::try_from(data_buffers)
                    .map_err(|_| format!("a view column with {data_buffers} data buffers"))?;
                let (len, nulls) = self.node()?;
                self.validity(len, nulls)?;
                self.values(16)?;
                for _ in 0..data_buffers.min(self.spans.len() as u64 + 1) {
                    self.buffer()?;
                }
            }
            D::List(child) | D::LargeList(child) | D::Map(child, _) => {
                let (len, nulls) = self.node()?;
                self.validity(len, nulls)?;
                self.values(if matches!(t, D::LargeList(_)) { 8 } else { 4 })?;
                self.column(child.data_type(), depth + 1)?;
            }
            D::ListView(child) | D::LargeListView(child) => {
                let (len, nulls) = self.node()?;
                self.validity(len, nulls)?;
                let width = if matches!(t, D::LargeListView(_)) {
                    8
                } else {
                    4
                };
                self.values(width)?;
                self.values(width)?;
                self.column(child.data_type(), depth + 1)?;
            }
            D::FixedSizeList(child, _) => {
                let (len, nulls) = self.node()?;
                self.validity(len, nulls)?;
                self.column(child.data_type(), depth + 1)?;
            }
            D::Struct(fields) => {
                let (len, nulls) = self.node()?;
                self.validity(len, nulls)?;
                for f in fields {
                    self.column(f.data_type(), depth + 1)?;
                }
            }
            D::RunEndEncoded(run_ends, values) => {
                self.node()?;
                self.column(run_ends.data_type(), depth + 1)?;
                self.column(values.data_type(), depth + 1)?;
            }
            // The keys; the values come in dictionary batches.
            D::Dictionary(keys, _) => {
                let (len, nulls) = self.node()?;
                self.validity(len, nulls)?;
                self.values(keys.primitive_width().unwrap_or(1))?;
            }
            D::Union(fields, mode) => {
                let (len, _) = self.node()?;
                if !self.v5 {
                    self.buffer()?;
                }
                // Sliced to the array's length without a check.
                if self.buffer()?.len < len {
                    return Err(format!("union type ids shorter than its {len} values"));
                }
                if *mode == arrow_schema::UnionMode::Dense
                    && self.values(4)?.len < len.saturating_mul(4)
                {
                    return Err(format!("union offsets shorter than its {len} values"));
                }
                for (_, f) in fields.iter() {
                    self.column(f.data_type(), depth + 1)?;
                }
            }
            // Fixed-width values (and booleans): a bitmap and the values.
            _ => {
                let (len, nulls) = self.node()?;
                self.validity(len, nulls)?;
                self.values(t.primitive_width().unwrap_or(1))?;
            }
        }
        Ok(())
    }
}
