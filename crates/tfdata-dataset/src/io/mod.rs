//! File access and file formats for source datasets (`TFRecordDataset`,
//! `TextLineDataset`, `FixedLengthRecordDataset`, `list_files`), with TensorFlow 2.21's behaviour.
//!
//! * [`fs`]: the [`FileSystem`] trait every reader opens files through,
//!   and URL [`scheme`](fs::scheme)s;
//! * [`registry`]: the file system serving a URL ([`file_system`]) and the
//!   `tf.io.gfile`-style functions over it ([`open`], [`glob()`], ...);
//! * [`local`]: [`LocalFileSystem`], plain paths and `file://` URLs;
//! * [`object_store`]: [`ObjectStoreFileSystem`] for
//!   `s3://`, `gs://` and `az://` URLs, configured from the environment like
//!   the clouds' SDKs, streaming reads and whole-object uploads;
//! * [`pattern`]: `tf.io.gfile.glob` pattern matching, shared by both;
//! * [`tfrecord_reader`]: streaming [`TfRecordReader`] (both CRCs checked,
//!   corruption and truncation located by file and offset) and
//!   [`TfRecordWriter`];
//! * [`text`]: [`TextLineReader`], TensorFlow's line splitting;
//! * [`fixed_length`]: [`FixedLengthReader`], `FixedLengthRecordDataset`'s
//!   records between a header and a footer;
//! * [`CompressionType`]: TensorFlow's `compression_type` (`""`, `"GZIP"`,
//!   `"ZLIB"`), shared by all of them.
//!
//! Readers stream through a fixed buffer and never load a whole file, so
//! memory does not grow with file size. All of them are iterators of
//! `Result<Bytes>` that yield at most one error and then end: an error is
//! never turned into a silent end of data.
//!
//! What the three readers share (opening by path or URL or over any stream,
//! decompression through a buffer, offsets, errors, the fuse after an error)
//! is one `stream` module; each reader adds only its item's parsing.
//!
//! Dependencies point one way: readers ([`tfrecord_reader`], [`text`], [`fixed_length`]) →
//! `stream` → [`registry`] → {[`local`], [`object_store`]} → {[`fs`], [`pattern`]}.

pub mod compression;
pub mod fixed_length;
pub mod fs;
pub mod local;
pub mod object_store;
pub mod pattern;
pub mod registry;
mod stream;
pub mod text;
pub mod tfrecord_reader;

pub use self::object_store::ObjectStoreFileSystem;
pub use compression::{CompressionType, DEFAULT_BUFFER_SIZE};
pub use fixed_length::{FixedLengthReader, FixedLengthSizes};
pub use fs::FileSystem;
pub use local::LocalFileSystem;
pub use registry::{delete, exists, file_system, glob, list, open, read_all};
pub use text::TextLineReader;
pub use tfrecord_reader::{TfRecordReader, TfRecordWriter};
