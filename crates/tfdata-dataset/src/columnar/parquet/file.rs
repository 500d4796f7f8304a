//! One Parquet file as the reader sees it: its footer (read with two
//! ranged reads), the row groups and pages its statistics and page index
//! say a filter may match, and a row group's projected column chunks (or
//! only their pages holding kept rows) fetched with one ranged read per run
//! before decoding, so nothing else of the file is read. Apart from the op
//! and its iterator (`super`, `super::read`), which decide what to read.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::statistics::StatisticsConverter;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReader,
    ParquetRecordBatchReaderBuilder, RowSelection, RowSelector,
};
use parquet::file::metadata::PageIndexPolicy;
use parquet::file::reader::{ChunkReader, Length};
use tfdata_core::{Error, Result};

use super::Prepared;
use crate::columnar::predicate::{ColumnStats, Predicate, column_literals};
use crate::io::FileSystem;

/// The footer read first: enough for most files' metadata in one request.
const FOOTER_PREFETCH: u64 = 64 << 10;

/// One Parquet file's footer, and where its bytes are read from.
pub(super) struct ParquetFile {
    path: String,
    fs: Arc<dyn FileSystem>,
    size: u64,
    pub(super) meta: ArrowReaderMetadata,
    /// Row groups' bytes read outside the planned ranges ([`FsChunks`]).
    unplanned: Arc<std::sync::atomic::AtomicU64>,
}

impl ParquetFile {
    /// The file's footer (and with `page_index`, its column and offset
    /// indexes when it has them: what filters prune pages with).
    pub(super) fn open(path: &str, page_index: bool) -> Result<ParquetFile> {
        let fs = crate::io::file_system(path)?;
        let size = fs.file_size(path)?;
        let tail = size.saturating_sub(FOOTER_PREFETCH);
        let chunks = FsChunks {
            path: path.to_string(),
            fs: Arc::clone(&fs),
            size,
            held: vec![(tail, fs.read_range(path, tail, size - tail)?)],
            unplanned: Arc::default(),
        };
        let policy = if page_index {
            PageIndexPolicy::Optional
        } else {
            PageIndexPolicy::Skip
        };
        let options = ArrowReaderOptions::new().with_page_index_policy(policy);
        let meta = ArrowReaderMetadata::load(&chunks, options)
            .map_err(|e| parquet_error(path, "reading the footer", e))?;
        Ok(ParquetFile {
            path: path.to_string(),
            fs,
            size,
            meta,
            unplanned: Arc::default(),
        })
    }

    /// The row groups of which some row may match `filter`.
    pub(super) fn matching_row_groups(
        &self,
        prepared: &Prepared,
        filter: Option<&Predicate>,
    ) -> Result<Vec<usize>> {
        self.check_schema(prepared)?;
        let groups = self.meta.metadata().row_groups();
        let Some(filter) = filter else {
            return Ok((0..groups.len()).collect());
        };
        let mut columns = Vec::new();
        filter.columns(&mut columns);
        let mut stats: HashMap<String, Vec<ColumnStats>> = HashMap::new();
        for c in &columns {
            if let Some(s) = self.column_stats(c) {
                stats.insert(c.clone(), s);
            }
        }
        Ok((0..groups.len())
            .filter(|&g| filter.may_match(&|c: &str| stats.get(c).and_then(|s| s.get(g)).cloned()))
            .collect())
    }

    /// Per row group, what its statistics say of `column` (`None` when
    /// the file records none usable).
    fn column_stats(&self, column: &str) -> Option<Vec<ColumnStats>> {
        let meta = self.meta.metadata();
        let conv = StatisticsConverter::try_new(
            column,
            self.meta.schema(),
            meta.file_metadata().schema_descr(),
        )
        .ok()?;
        let groups = meta.row_groups();
        let mins = column_literals(&conv.row_group_mins(groups.iter()).ok()?).ok()?;
        let maxes = column_literals(&conv.row_group_maxes(groups.iter()).ok()?).ok()?;
        let nulls = conv.row_group_null_counts(groups.iter()).ok()?;
        Some(
            (0..groups.len())
                .map(|g| ColumnStats {
                    min: mins.get(g).cloned().flatten(),
                    max: maxes.get(g).cloned().flatten(),
                    null_count: (!arrow_array::Array::is_null(&nulls, g)).then(|| nulls.value(g)),
                    rows: groups[g].num_rows().max(0) as u64,
                })
                .collect(),
        )
    }

    /// The columns read must be the first file's.
    pub(super) fn check_schema(&self, prepared: &Prepared) -> Result<()> {
        let schema = self.meta.schema();
        for c in &prepared.fetched {
            let want = prepared.schema.field_with_name(c).map(|f| f.data_type());
            let have = schema.field_with_name(c).map(|f| f.data_type());
            match (want, have) {
                (Ok(w), Ok(h)) if w == h => {}
                (Ok(w), Ok(h)) => {
                    return Err(Error::InvalidArgument(format!(
                        "parquet_dataset: {}: column {c} is {h}, but {w} in {} (the first \
                         file): every file must have the same schema",
                        self.path, prepared.files[0]
                    )));
                }
                _ => {
                    return Err(Error::InvalidArgument(format!(
                        "parquet_dataset: {}: column {c} is missing (it is in {}, the first \
                         file)",
                        self.path, prepared.files[0]
                    )));
                }
            }
        }
        Ok(())
    }

    /// Row group `g`'s rows whose pages' statistics say they may match
    /// `filter` (the page index: per page min, max and null count), as a
    /// selection; `None` when every page may match or the file has no
    /// usable page index for the filter's columns (then every row is read
    /// and filtered). Pages of different columns end at different rows:
    /// the row group is cut at every page boundary of the filter's columns,
    /// and each piece is judged by the pages holding it.
    pub(super) fn page_selection(&self, filter: &Predicate, g: usize) -> Option<RowSelection> {
        /// One column's pages: the first row of each, and its statistics.
        struct Pages {
            starts: Vec<usize>,
            stats: Vec<ColumnStats>,
        }
        let meta = self.meta.metadata();
        let (Some(column_index), Some(offset_index)) = (meta.column_index(), meta.offset_index())
        else {
            return None;
        };
        let num_rows = usize::try_from(meta.row_groups().get(g)?.num_rows()).ok()?;
        let mut columns = Vec::new();
        filter.columns(&mut columns);
        let mut pages: HashMap<String, Pages> = HashMap::new();
        for c in &columns {
            let conv = StatisticsConverter::try_new(
                c,
                self.meta.schema(),
                meta.file_metadata().schema_descr(),
            )
            .ok()?;
            let column = conv.parquet_column_index()?;
            let locations = offset_index.get(g)?.get(column)?.page_locations();
            column_index.get(g)?.get(column)?;
            let starts: Vec<usize> = locations
                .iter()
                .map(|l| usize::try_from(l.first_row_index).ok())
                .collect::<Option<_>>()?;
            // What a writer must produce; anything else is not trusted.
            let ordered = starts.first() == Some(&0)
                && starts.windows(2).all(|w| w[0] < w[1])
                && starts.last().is_some_and(|&l| l < num_rows);
            if !ordered {
                return None;
            }
            let groups = [g];
            let mins = conv
                .data_page_mins(column_index, offset_index, &groups)
                .ok()?;
            let maxes = conv
                .data_page_maxes(column_index, offset_index, &groups)
                .ok()?;
            let nulls = conv
                .data_page_null_counts(column_index, offset_index, &groups)
                .ok()?;
            let (mins, maxes) = (column_literals(&mins).ok()?, column_literals(&maxes).ok()?);
            if mins.len() != starts.len()
                || maxes.len() != starts.len()
                || nulls.len() != starts.len()
            {
                return None;
            }
            let stats = (0..starts.len())
                .map(|p| ColumnStats {
                    min: mins[p].clone(),
                    max: maxes[p].clone(),
                    null_count: (!arrow_array::Array::is_null(&nulls, p)).then(|| nulls.value(p)),
                    rows: (starts.get(p + 1).copied().unwrap_or(num_rows) - starts[p]) as u64,
                })
                .collect();
            pages.insert(c.clone(), Pages { starts, stats });
        }
        let mut bounds: Vec<usize> = pages.values().flat_map(|p| p.starts.clone()).collect();
        bounds.push(num_rows);
        bounds.sort_unstable();
        bounds.dedup();
        let mut selectors: Vec<RowSelector> = Vec::new();
        for w in bounds.windows(2) {
            let (from, n) = (w[0], w[1] - w[0]);
            let keep = filter.may_match(&|c: &str| {
                let p = pages.get(c)?;
                let i = p.starts.partition_point(|&s| s <= from).checked_sub(1)?;
                p.stats.get(i).cloned()
            });
            match selectors.last_mut() {
                Some(last) if last.skip != keep => last.row_count += n,
                _ if keep => selectors.push(RowSelector::select(n)),
                _ => selectors.push(RowSelector::skip(n)),
            }
        }
        selectors
            .iter()
            .any(|s| s.skip)
            .then(|| RowSelection::from(selectors))
    }

    /// A reader of row group `g`'s fetched columns, `rows` at a time, of
    /// the rows `selection` keeps (all without one): the column chunks, or
    /// with a selection and an offset index only their pages holding kept
    /// rows (and the dictionary page), are fetched first, one ranged read
    /// per run of adjacent pages; returns the reader and the bytes fetched.
    pub(super) fn read_row_group(
        &self,
        prepared: &Prepared,
        g: usize,
        rows: usize,
        selection: Option<RowSelection>,
    ) -> Result<(ParquetRecordBatchReader, u64)> {
        let meta = self.meta.metadata();
        let group = meta.row_groups().get(g).ok_or_else(|| {
            Error::InvalidArgument(format!(
                "parquet_dataset: {} has no row group {g} (it has {})",
                self.path,
                meta.num_row_groups()
            ))
        })?;
        let schema = self.meta.schema();
        let roots: Vec<usize> = prepared
            .fetched
            .iter()
            .filter_map(|c| schema.index_of(c).ok())
            .collect();
        let descr = meta.file_metadata().schema_descr();
        let kept = selection.as_ref().map(kept_row_ranges);
        let mut held = Vec::new();
        let mut fetched = 0u64;
        for (i, column) in group.columns().iter().enumerate() {
            if !roots.contains(&descr.get_column_root_idx(i)) {
                continue;
            }
            let (start, len) = column.byte_range();
            if start.saturating_add(len) > self.size {
                return Err(Error::DataLoss {
                    location: self.path.clone(),
                    reason: format!(
                        "row group {g}'s column {} lies past the end of the file ({} bytes)",
                        column.column_path(),
                        self.size
                    ),
                });
            }
            let pages = meta
                .offset_index()
                .and_then(|o| o.get(g)?.get(i))
                .map(|o| o.page_locations().as_slice());
            let ranges = match (&kept, pages) {
                (Some(kept), Some(pages)) => {
                    let num_rows = u64::try_from(group.num_rows()).unwrap_or(0);
                    page_ranges(start, len, pages, kept, num_rows)
                }
                _ => vec![(start, len)],
            };
            for (at, n) in ranges {
                fetched += n;
                held.push((at, self.fs.read_range(&self.path, at, n)?));
            }
        }
        let chunks = FsChunks {
            path: self.path.clone(),
            fs: Arc::clone(&self.fs),
            size: self.size,
            held,
            unplanned: Arc::clone(&self.unplanned),
        };
        let mut builder =
            ParquetRecordBatchReaderBuilder::new_with_metadata(chunks, self.meta.clone())
                .with_projection(ProjectionMask::roots(descr, roots))
                .with_row_groups(vec![g])
                .with_batch_size(rows);
        if let Some(selection) = selection {
            builder = builder.with_row_selection(selection);
        }
        let reader = builder
            .build()
            .map_err(|e| parquet_error(&self.path, &format!("reading row group {g}"), e))?;
        Ok((reader, fetched))
    }
}

/// The row ranges `[from, to)` a selection keeps.
fn kept_row_ranges(selection: &RowSelection) -> Vec<(u64, u64)> {
    let mut at = 0u64;
    let mut kept = Vec::new();
    for s in selection.iter() {
        let n = s.row_count as u64;
        if !s.skip {
            kept.push((at, at + n));
        }
        at += n;
    }
    kept
}

/// The byte ranges of a column chunk (at `start`, `len` bytes) to fetch
/// for the rows `kept`: the dictionary page (what precedes the first data
/// page) and the data pages holding a kept row, adjacent ones joined.
/// Pages outside the chunk (a damaged offset index) fall back to the
/// whole chunk.
fn page_ranges(
    start: u64,
    len: u64,
    pages: &[parquet::file::page_index::offset_index::PageLocation],
    kept: &[(u64, u64)],
    num_rows: u64,
) -> Vec<(u64, u64)> {
    let whole = vec![(start, len)];
    let end = start.saturating_add(len);
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    let mut push = |at: u64, n: u64| match ranges.last_mut() {
        Some((s, l)) if *s + *l == at => *l += n,
        _ => ranges.push((at, n)),
    };
    let Some(first) = pages.first() else {
        return whole;
    };
    let Ok(first_offset) = u64::try_from(first.offset) else {
        return whole;
    };
    if first_offset < start || first_offset > end {
        return whole;
    }
    if first_offset > start {
        push(start, first_offset - start);
    }
    for (p, page) in pages.iter().enumerate() {
        let (Ok(offset), Ok(size), Ok(from)) = (
            u64::try_from(page.offset),
            u64::try_from(page.compressed_page_size),
            u64::try_from(page.first_row_index),
        ) else {
            return whole;
        };
        if offset < start || offset.saturating_add(size) > end {
            return whole;
        }
        let to = pages
            .get(p + 1)
            .and_then(|n| u64::try_from(n.first_row_index).ok())
            .unwrap_or(num_rows);
        if kept.iter().any(|&(a, b)| a < to && from < b) {
            push(offset, size);
        }
    }
    ranges
}

fn parquet_error(path: &str, what: &str, e: impl std::fmt::Display) -> Error {
    Error::DataLoss {
        location: path.to_string(),
        reason: format!("{what}: {e} (is it a Parquet file, whole and undamaged?)"),
    }
}

/// A file's bytes for the Parquet reader: the ranges fetched ahead, and
/// ranged reads through the io layer for anything else.
struct FsChunks {
    path: String,
    fs: Arc<dyn FileSystem>,
    size: u64,
    /// Ranges already read (the footer's, or a row group's column chunks).
    held: Vec<(u64, Bytes)>,
    /// Bytes read because the reader asked for a range not held: each a
    /// request of its own, so a plan that fetches ahead keeps this at 0.
    unplanned: Arc<std::sync::atomic::AtomicU64>,
}

impl FsChunks {
    fn held(&self, start: u64, len: u64) -> Option<Bytes> {
        self.held.iter().find_map(|(at, b)| {
            let end = at + b.len() as u64;
            (start >= *at && start.saturating_add(len) <= end)
                .then(|| b.slice((start - at) as usize..(start - at + len) as usize))
        })
    }
}

impl Length for FsChunks {
    fn len(&self) -> u64 {
        self.size
    }
}

impl ChunkReader for FsChunks {
    type T = std::io::Cursor<Bytes>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        // Page headers: the rest of the held range they start in.
        if let Some((at, b)) = self
            .held
            .iter()
            .find(|(at, b)| start >= *at && start < at + b.len() as u64)
        {
            return Ok(std::io::Cursor::new(b.slice((start - at) as usize..)));
        }
        let len = (self.size.saturating_sub(start)).min(FOOTER_PREFETCH);
        self.unplanned
            .fetch_add(len, std::sync::atomic::Ordering::Relaxed);
        self.fs
            .read_range(&self.path, start, len)
            .map(std::io::Cursor::new)
            .map_err(|e| parquet::errors::ParquetError::External(Box::new(e)))
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        if let Some(b) = self.held(start, length as u64) {
            return Ok(b);
        }
        self.unplanned
            .fetch_add(length as u64, std::sync::atomic::Ordering::Relaxed);
        let read = self
            .fs
            .read_range(&self.path, start, length as u64)
            .map_err(|e| parquet::errors::ParquetError::External(Box::new(e)))?;
        if read.len() != length {
            return Err(parquet::errors::ParquetError::EOF(format!(
                "{}: wanted {length} bytes at {start}, the file has {}",
                self.path, self.size
            )));
        }
        Ok(read)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch};
    use parquet::arrow::ArrowWriter;
    use parquet::file::properties::WriterProperties;

    use super::*;
    use crate::attrs::Attr;
    use crate::columnar::convert::Declared;
    use crate::columnar::parquet::ParquetSource;
    use crate::columnar::parquet::tests::{ids, source};

    #[test]
    fn filters_prune_pages_by_the_page_index_and_fetch_only_theirs() {
        use parquet::file::properties::EnabledStatistics;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pages.parquet");
        // One row group of 2,000 rows, pages of 100 rows with statistics.
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(2000))
            .set_data_page_row_count_limit(100)
            .set_write_batch_size(100)
            .set_statistics_enabled(EnabledStatistics::Page)
            .set_dictionary_enabled(false)
            .build();
        let n = 2000i64;
        let batch = RecordBatch::try_from_iter(vec![
            (
                "id",
                Arc::new(Int64Array::from_iter_values(0..n)) as ArrayRef,
            ),
            (
                "score",
                Arc::new(Float64Array::from_iter_values((0..n).map(|i| i as f64))),
            ),
        ])
        .unwrap();
        let mut w = ArrowWriter::try_new(
            std::fs::File::create(&path).unwrap(),
            batch.schema(),
            Some(props),
        )
        .unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        let name = path.to_str().unwrap().to_string();
        let filter = Predicate::parse(
            "t",
            &Attr::List(vec![
                Attr::Str("id".into()),
                Attr::Str(">=".into()),
                Attr::Int(1950),
            ]),
        )
        .unwrap();
        let op = ParquetSource::new(
            vec![name.clone()],
            None,
            None,
            Some(filter.clone()),
            Declared::default(),
        );
        let prepared = op.prepare().unwrap();
        let file = ParquetFile::open(&name, true).unwrap();
        let selection = file.page_selection(&filter, 0).expect("pages pruned");
        assert_eq!(kept_row_ranges(&selection), vec![(1900, 2000)]);
        let (_, all) = file.read_row_group(&prepared, 0, 1024, None).unwrap();
        let (reader, some) = file
            .read_row_group(&prepared, 0, 1024, Some(selection))
            .unwrap();
        assert!(some * 10 < all, "fetched {some} of {all} bytes");
        let rows: usize = reader.map(|b| b.unwrap().num_rows()).sum();
        assert_eq!(rows, 100, "the kept page's rows");
        let unplanned = file.unplanned.load(std::sync::atomic::Ordering::Relaxed);
        assert_eq!(unplanned, 0, "the reader asked for pages not fetched");
        // Exactly the matching rows come out.
        let ds = source(
            vec![name.clone()],
            Some(7),
            Some(Attr::List(vec![
                Attr::Str("id".into()),
                Attr::Str(">=".into()),
                Attr::Int(1950),
            ])),
        );
        assert_eq!(ids(&ds), (1950..2000).collect::<Vec<_>>());
        // Without a page index, or with a filter no page rules out, no
        // selection: every row read and filtered.
        let plain = ParquetFile::open(&name, false).unwrap();
        assert!(plain.page_selection(&filter, 0).is_none());
        let everything = Predicate::parse(
            "t",
            &Attr::List(vec![
                Attr::Str("id".into()),
                Attr::Str(">=".into()),
                Attr::Int(0),
            ]),
        )
        .unwrap();
        assert!(file.page_selection(&everything, 0).is_none());
    }
}
