"""A corpus of TensorFlow 2.21 `tf.data` pipelines for tfdata workers that run
TensorFlow dataset graphs (issue 13).

Each case is a function `make(ctx) -> tf.data.Dataset` plus the rule its
elements are compared by, against TensorFlow's own local iteration of the
same pipeline:

* ``exact``: same number of elements, same structure, and every component
  with the same dtype, shape and bytes, in order (bit for bit; integer,
  bool and string results, and float results TensorFlow computes with one
  rounding, e.g. casts and parsing).
* ``float``: as ``exact`` for non-float components; float components with
  the same dtype and shape and ``np.testing.assert_allclose(rtol, atol)``
  (transcendentals, reductions and resizes, whose last bits depend on the
  order of operations or on the math library).
* ``jpeg``: as ``float``, but a numeric component may differ by at most
  ``jpeg_max`` and on average by at most ``jpeg_mean`` (in the output's
  units: one uint8 level of the decoded image is ``jpeg_scale``). JPEG
  decoders that implement the standard correctly still differ in their
  IDCT and chroma upsampling by a few levels; a wrong decode (swapped
  channels, misplaced blocks) is off by tens on average.
* ``multiset``: random ops (shuffles, non-deterministic parallelism, random
  flips): the sorted multiset of elements (each compared as ``exact``)
  must be equal, since tfdata's random streams are not TensorFlow's. A
  case may give ``canon``, a function applied to each element first to
  remove what is legitimately random (e.g. whether an image was flipped).

``finite=False`` cases are infinite; the first ``take`` elements are
compared. ``compressions`` lists the `distribute(compression=...)` values
the interop test reads the case with. ``fixture=True`` cases need no data
files and are small: `crates/tfdata-graph/tests/fixtures/generate.py`
captures their graphs for the Rust tests.

Test data (TFRecords of Examples, text, CSV, fixed-length records, JPEG and
PNG images) is written by `write_data(root)` into a pytest temporary
directory; nothing large is committed.
"""

import dataclasses
import gzip
import os
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import tensorflow as tf

AUTOTUNE = tf.data.AUTOTUNE


# ---------------------------------------------------------------------------
# Test data
# ---------------------------------------------------------------------------

@dataclasses.dataclass
class Data:
    """Paths of the generated test files (absolute)."""
    root: Path
    examples: list        # TFRecord files of tf.train.Example, uncompressed
    examples_gzip: list   # the same Examples, GZIP-compressed TFRecord files
    records_glob: str     # a glob of plain-string TFRecord files
    text: list            # text files
    csv: str              # a CSV file (no header)
    fixed: str            # a fixed-length record file: 4-byte header, 10 x 8-byte records, 2-byte footer
    jpegs: list           # small RGB JPEG images
    pngs: list            # small PNG images (RGB and grayscale)


@dataclasses.dataclass
class Ctx:
    """What a case's `make` gets: the data, and a fresh scratch directory of
    its own (each construction gets another one, so a file cache written by
    the local run is not read by the distributed run)."""
    data: Optional[Data]
    scratch: Path

    def __post_init__(self):
        Path(self.scratch).mkdir(parents=True, exist_ok=True)


def _example(i):
    f = tf.train.Feature
    tokens = list(range(i % 4))  # 0..3 values: a VarLen feature
    return tf.train.Example(features=tf.train.Features(feature={
        "id": f(int64_list=tf.train.Int64List(value=[i])),
        "label": f(float_list=tf.train.FloatList(value=[i * 0.5, -i * 0.25])),
        "name": f(bytes_list=tf.train.BytesList(value=[f"item-{i}".encode()])),
        "tokens": f(int64_list=tf.train.Int64List(value=[i * 10 + t for t in tokens])),
        "scores": f(float_list=tf.train.FloatList(value=[t + 0.125 for t in tokens])),
    })).SerializeToString()


def _image(h, w, seed):
    """A smooth RGB pattern with a little noise: real JPEG content, small.

    No channel jumps from 255 to 0: at such a hard colour edge JPEG decoders
    that upsample chroma differently (libjpeg-turbo's fancy upsampling in
    TensorFlow, zune-jpeg's in tfdata) differ by up to ~100 levels over a
    pixel or two, which is docs/compatibility.md's stated JPEG difference
    rather than something each image should probe."""
    rng = np.random.RandomState(seed)
    y, x = np.mgrid[0:h, 0:w]
    img = np.stack([
        128 + 100 * np.sin(x / 5.0 + seed),
        128 + 100 * np.cos(y / 4.0 - seed),
        128 + 90 * np.sin((x * 7 + y * 3) / 40.0 + seed),
    ], axis=-1) + rng.randint(-10, 11, size=(h, w, 3))
    return np.clip(img, 0, 255).astype(np.uint8)


def write_data(root):
    """Writes every test file under `root` (a few tens of KB) and returns their paths."""
    root = Path(root)
    for sub in ("examples", "gzip", "records", "text", "images"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    examples, examples_gzip = [], []
    for f in range(2):
        plain = root / "examples" / f"ex-{f}.tfrecord"
        gz = root / "gzip" / f"ex-{f}.tfrecord.gz"
        with tf.io.TFRecordWriter(str(plain)) as w1, \
                tf.io.TFRecordWriter(str(gz), options=tf.io.TFRecordOptions(compression_type="GZIP")) as w2:
            for i in range(f * 6, f * 6 + 6):
                w1.write(_example(i))
                w2.write(_example(i))
        examples.append(str(plain))
        examples_gzip.append(str(gz))
    for f in range(3):
        with tf.io.TFRecordWriter(str(root / "records" / f"r-{f}.tfrecord")) as w:
            for j in range(4):
                w.write(f"rec-{f}-{j}".encode())
    text = []
    lines = ["Hello World", "The Quick brown FOX", "", "tf.data service, 2.21", "  spaces  around  ",
             "über straße", "a,b;c d", "3.5 -2 17 0.25"]
    for f in range(2):
        p = root / "text" / f"lines-{f}.txt"
        p.write_text("\n".join(lines[f * 4:f * 4 + 4]) + "\n", encoding="utf-8")
        text.append(str(p))
    csv = root / "text" / "table.csv"
    csv.write_text("".join(f"{i},{i * 1.25 - 3},name{i}\n" for i in range(9)) + "9,,\n")
    fixed = root / "records" / "fixed.bin"
    body = np.arange(20, dtype="<i4").tobytes()  # 10 records of 2 int32s
    fixed.write_bytes(b"HEAD" + body + b"FT")
    jpegs, pngs = [], []
    for i in range(4):
        p = root / "images" / f"img-{i}.jpg"
        p.write_bytes(tf.io.encode_jpeg(_image(24, 32, i), quality=90).numpy())
        jpegs.append(str(p))
    for i in range(3):
        p = root / "images" / f"img-{i}.png"
        img = _image(16, 20, 10 + i)
        if i == 2:
            img = img[..., :1]  # grayscale
        p.write_bytes(tf.io.encode_png(img).numpy())
        pngs.append(str(p))
    return Data(root=root, examples=examples, examples_gzip=examples_gzip,
                records_glob=str(root / "records" / "r-*.tfrecord"), text=text, csv=str(csv),
                fixed=str(fixed), jpegs=jpegs, pngs=pngs)


# ---------------------------------------------------------------------------
# Cases
# ---------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Case:
    name: str
    make: Callable[[Ctx], tf.data.Dataset]
    compare: str                 # "exact" | "float" | "jpeg" | "multiset"
    why: str                     # what it covers, and why this comparison
    rtol: float = 0.0
    atol: float = 0.0
    jpeg_max: float = 0.0
    jpeg_mean: float = 0.0
    finite: bool = True
    take: int = 0                # infinite cases: compare this many elements
    files: bool = False          # needs ctx.data
    compressions: tuple = ("AUTO",)
    canon: Optional[Callable] = None
    fixture: bool = False


CASES = []

# The JPEG tolerance, in uint8 levels: TensorFlow decodes with libjpeg-turbo's
# fast integer IDCT and fancy chroma upsampling, tfdata with zune-jpeg's
# accurate IDCT and its own upsampling. On these small noisy 24x32 images
# that measures max 11 and mean 1.36-1.53 levels (docs/compatibility.md).
JPEG_MAX_LEVELS = 24
JPEG_MEAN_LEVELS = 2.0


def case(compare="exact", **kw):
    def register(fn):
        if compare == "jpeg":
            scale = kw.pop("jpeg_scale", 1.0)
            kw.setdefault("jpeg_max", JPEG_MAX_LEVELS * scale)
            kw.setdefault("jpeg_mean", JPEG_MEAN_LEVELS * scale)
        CASES.append(Case(name=fn.__name__, make=fn, compare=compare,
                          why=" ".join((fn.__doc__ or "").split()), **kw))
        return fn
    return register


def _features(varlen=True):
    f = {
        "id": tf.io.FixedLenFeature([], tf.int64),
        "label": tf.io.FixedLenFeature([2], tf.float32),
        "name": tf.io.FixedLenFeature([], tf.string),
        "missing": tf.io.FixedLenFeature([1], tf.int64, default_value=[-7]),
    }
    if varlen:
        f["tokens"] = tf.io.VarLenFeature(tf.int64)
        f["scores"] = tf.io.VarLenFeature(tf.float32)
    return f


def _densify(parsed):
    return {k: tf.sparse.to_dense(v) if isinstance(v, tf.SparseTensor) else v for k, v in parsed.items()}


# --- sources ---------------------------------------------------------------

@case(fixture=True, compressions=("AUTO", None))
def range_basic(ctx):
    """RangeDataset: range(10). Integers: exact."""
    return tf.data.Dataset.range(10)


@case(fixture=True)
def range_args_int32(ctx):
    """RangeDataset with start/stop/step and output_type=int32, negative step. Exact."""
    return tf.data.Dataset.range(3, 40, 7, output_type=tf.int32).concatenate(
        tf.data.Dataset.range(10, -5, -4, output_type=tf.int32))


@case(fixture=True)
def from_tensors_tuple(ctx):
    """TensorDataset of a (vector, string, matrix) tuple, repeated 3 times. Exact."""
    return tf.data.Dataset.from_tensors(
        (tf.constant([1, 2, 3]), tf.constant("abc"), tf.constant([[1.5, -2.0], [0.0, 3.25]]))).repeat(3)


@case(fixture=True, compressions=("AUTO", None))
def from_tensor_slices_tuple(ctx):
    """TensorSliceDataset of a tuple: int64, float32 rows, strings, bools. Exact."""
    return tf.data.Dataset.from_tensor_slices((
        tf.constant([1, 2, 3], tf.int64),
        tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]),
        tf.constant(["a", "", "ccc"]),
        tf.constant([True, False, True])))


@case(fixture=True)
def from_tensor_slices_dict(ctx):
    """TensorSliceDataset of a dict (flattened in sorted key order), nested tuple inside. Exact."""
    return tf.data.Dataset.from_tensor_slices({
        "id": tf.constant([10, 20, 30, 40], tf.int32),
        "name": tf.constant(["w", "x", "y", "z"]),
        "pair": (tf.constant([0.5, 1.5, 2.5, 3.5], tf.float64), tf.constant([[1, 2], [3, 4], [5, 6], [7, 8]], tf.uint8)),
    })


@case(files=True, compressions=("AUTO", None))
def tfrecord_parse_single_example(ctx):
    """TFRecordDataset (uncompressed) + map(parse_single_example) with FixedLen
    (with a default) and VarLen features densified. Parsing is exact."""
    return tf.data.TFRecordDataset(ctx.data.examples).map(
        lambda s: _densify(tf.io.parse_single_example(s, _features())))


@case(files=True)
def tfrecord_gzip(ctx):
    """TFRecordDataset with compression_type="GZIP", raw records. Exact."""
    return tf.data.TFRecordDataset(ctx.data.examples_gzip, compression_type="GZIP")


@case(files=True)
def tfrecord_parallel_reads_parse_example(ctx):
    """TFRecordDataset(num_parallel_reads=2) (an interleave inside), batch(4),
    batched parse_example with FixedLen and VarLen (densified, padded per batch). Exact."""
    return tf.data.TFRecordDataset(ctx.data.examples, num_parallel_reads=2).batch(4).map(
        lambda s: _densify(tf.io.parse_example(s, _features())))


@case(files=True)
def textline_strings(ctx):
    """TextLineDataset over two files; strings.lower/upper/length/regex_replace/
    substr/join in the map (UTF-8 input). Exact."""
    def f(line):
        return {
            "lower": tf.strings.lower(line),
            "upper": tf.strings.upper(line),
            "len": tf.strings.length(line),
            "chars": tf.strings.length(line, unit="UTF8_CHAR"),
            "squeezed": tf.strings.regex_replace(line, r"\s+", " "),
            "sub": tf.strings.substr(line, 0, 4),
            "joined": tf.strings.join([line, tf.strings.as_string(tf.strings.length(line))], separator="#"),
        }
    return tf.data.TextLineDataset(ctx.data.text).map(f)


@case(files=True)
def textline_decode_csv(ctx):
    """TextLineDataset + decode_csv with int32/float32/string defaults (the last
    line uses the defaults). Decimal parsing is correctly rounded: exact."""
    return tf.data.TextLineDataset(ctx.data.csv).map(
        lambda l: tf.io.decode_csv(l, record_defaults=[[0], [0.5], ["none"]]))


@case(files=True)
def fixed_length_records_decode_raw(ctx):
    """FixedLengthRecordDataset with header/footer bytes, decode_raw to int32. Exact."""
    return tf.data.FixedLengthRecordDataset(ctx.data.fixed, record_bytes=8, header_bytes=4, footer_bytes=2).map(
        lambda r: tf.io.decode_raw(r, tf.int32))


@case(files=True)
def list_files_interleave(ctx):
    """list_files(shuffle=False) (MatchingFiles in the graph) + interleave of
    TFRecordDataset, cycle_length=2, block_length=3. Exact order."""
    return tf.data.Dataset.list_files(ctx.data.records_glob, shuffle=False).interleave(
        tf.data.TFRecordDataset, cycle_length=2, block_length=3)


@case("multiset", files=True)
def list_files_shuffled_flat_map(ctx):
    """list_files with its default seeded shuffle + flat_map(TFRecordDataset).
    The file order is random: multiset."""
    return tf.data.Dataset.list_files(ctx.data.records_glob, seed=11).flat_map(tf.data.TFRecordDataset)


# --- transformations -------------------------------------------------------

@case(fixture=True)
def map_parallel_autotune(ctx):
    """map(num_parallel_calls=AUTOTUNE): ParallelMapDatasetV2, deterministic by default. Exact order."""
    return tf.data.Dataset.range(40).map(lambda x: (x * x, x % 7), num_parallel_calls=AUTOTUNE)


@case("multiset", fixture=True)
def map_parallel_nondeterministic(ctx):
    """map(num_parallel_calls=4, deterministic=False): order may vary: multiset."""
    return tf.data.Dataset.range(40).map(lambda x: x * 3 - 1, num_parallel_calls=4, deterministic=False)


@case(fixture=True)
def map_and_batch_fused(ctx):
    """tf.data.experimental.map_and_batch (MapAndBatchDataset), last partial batch kept. Exact."""
    return tf.data.Dataset.range(23).apply(tf.data.experimental.map_and_batch(
        lambda x: (x * 2, tf.cast(x, tf.float32) / 4.0), batch_size=5, drop_remainder=False))


@case(fixture=True)
def filter_modulo(ctx):
    """FilterDataset with a predicate combining comparisons. Exact."""
    return tf.data.Dataset.range(50).filter(lambda x: tf.logical_or(x % 3 == 0, x > 45))


@case(fixture=True)
def flat_map_repeat(ctx):
    """FlatMapDataset: each x becomes from_tensors(x).repeat(x). Exact."""
    return tf.data.Dataset.range(6).flat_map(lambda x: tf.data.Dataset.from_tensors(x).repeat(x))


@case(fixture=True)
def interleave_plain(ctx):
    """InterleaveDataset, cycle_length=2, block_length=3, ranges of different lengths. Exact."""
    return tf.data.Dataset.range(1, 6).interleave(
        lambda x: tf.data.Dataset.range(x * 10, x * 10 + x), cycle_length=2, block_length=3)


@case(fixture=True)
def interleave_parallel(ctx):
    """interleave(num_parallel_calls=AUTOTUNE, deterministic=True): ParallelInterleaveDatasetV4. Exact order."""
    return tf.data.Dataset.range(1, 6).interleave(
        lambda x: tf.data.Dataset.range(x * 10, x * 10 + x), cycle_length=3, block_length=2,
        num_parallel_calls=AUTOTUNE, deterministic=True)


@case("multiset", fixture=True)
def interleave_parallel_nondeterministic(ctx):
    """Parallel interleave with deterministic=False: order may vary: multiset."""
    return tf.data.Dataset.range(1, 6).interleave(
        lambda x: tf.data.Dataset.range(x * 10, x * 10 + x), cycle_length=3,
        num_parallel_calls=2, deterministic=False)


@case(fixture=True)
def batch_keep_remainder(ctx):
    """BatchDatasetV2 drop_remainder=False (last batch of 2). Exact."""
    return tf.data.Dataset.range(10).batch(4)


@case(fixture=True)
def batch_drop_remainder(ctx):
    """BatchDatasetV2 drop_remainder=True of tuples (static batch dimension). Exact."""
    return tf.data.Dataset.range(10).map(lambda x: (x, tf.strings.as_string(x))).batch(4, drop_remainder=True)


@case(fixture=True)
def batch_parallel(ctx):
    """batch(num_parallel_calls=2, deterministic=True): ParallelBatchDataset. Exact."""
    return tf.data.Dataset.range(17).batch(4, num_parallel_calls=2, deterministic=True)


@case(fixture=True)
def padded_batch_ragged(ctx):
    """PaddedBatchDatasetV2 of variable-length vectors, padding -1, plus a scalar. Exact."""
    return tf.data.Dataset.range(1, 8).map(lambda x: (tf.range(x), x)).padded_batch(
        3, padded_shapes=([None], []), padding_values=(tf.constant(-1, tf.int64), tf.constant(0, tf.int64)))


@case(fixture=True)
def unbatch_rows(ctx):
    """UnbatchDataset of batched matrices (including the short last batch). Exact."""
    return tf.data.Dataset.from_tensor_slices(tf.reshape(tf.range(30), [10, 3])).batch(4).unbatch()


@case("multiset", fixture=True)
def shuffle_seeded_reshuffle(ctx):
    """ShuffleDatasetV3 seeded, reshuffle_each_iteration, repeated twice: each value twice, random order: multiset."""
    return tf.data.Dataset.range(30).shuffle(12, seed=3, reshuffle_each_iteration=True).repeat(2)


@case("multiset", fixture=True)
def shuffle_and_repeat_fused(ctx):
    """tf.data.experimental.shuffle_and_repeat(count=3, seed): multiset (each value 3 times)."""
    return tf.data.Dataset.range(15).apply(tf.data.experimental.shuffle_and_repeat(8, count=3, seed=5))


@case(fixture=True)
def repeat_skip_take(ctx):
    """RepeatDataset(3), SkipDataset(2), TakeDataset(9). Exact."""
    return tf.data.Dataset.range(5).repeat(3).skip(2).take(9)


@case(fixture=True, finite=False, take=25)
def repeat_infinite(ctx):
    """repeat() forever of a mapped range: infinite; the first 25 elements, exact."""
    return tf.data.Dataset.range(4).map(lambda x: x + 100).repeat()


@case(fixture=True)
def shard_index(ctx):
    """ShardDataset(4, 1). Exact."""
    return tf.data.Dataset.range(30).shard(4, 1)


@case(fixture=True)
def prefetch_autotune(ctx):
    """PrefetchDataset with AUTOTUNE after a map. Exact."""
    return tf.data.Dataset.range(20).map(lambda x: x * 5).prefetch(AUTOTUNE)


@case(fixture=True)
def cache_memory(ctx):
    """cache() in memory (CacheDatasetV2 with a MemoryCache), repeated twice: the second pass from the cache. Exact."""
    return tf.data.Dataset.range(8).map(lambda x: x * x).cache().repeat(2)


@case()
def cache_file(ctx):
    """cache(filename) under the case's scratch directory, repeated twice. Exact."""
    return tf.data.Dataset.range(8).map(lambda x: (x, -x)).cache(str(ctx.scratch / "cache")).repeat(2)


@case(fixture=True)
def zip_nested(ctx):
    """ZipDataset of three datasets, one of them a nested tuple. Exact."""
    a = tf.data.Dataset.range(10)
    b = tf.data.Dataset.range(10, 0, -1).map(lambda x: tf.cast(x, tf.float32))
    c = tf.data.Dataset.from_tensor_slices(tf.constant(list("abcdefg")))
    return tf.data.Dataset.zip((a, (b, c)))


@case(fixture=True)
def concatenate_ranges(ctx):
    """ConcatenateDataset. Exact."""
    return tf.data.Dataset.range(5).concatenate(tf.data.Dataset.range(10, 13))


@case(fixture=True)
def enumerate_strings(ctx):
    """enumerate(start=5) (a zip with an infinite range). Exact."""
    return tf.data.Dataset.from_tensor_slices(["a", "b", "c"]).enumerate(start=5)


@case(fixture=True)
def with_options_threading(ctx):
    """with_options: private_threadpool_size, max_intra_op_parallelism, deterministic,
    autotune off, a parallel map under it (OptionsDataset). Exact order."""
    options = tf.data.Options()
    options.threading.private_threadpool_size = 2
    options.threading.max_intra_op_parallelism = 1
    options.deterministic = True
    options.autotune.enabled = False
    return tf.data.Dataset.range(20).map(lambda x: x + 1, num_parallel_calls=3).with_options(options)


@case(files=True)
def assert_cardinality_textline(ctx):
    """assert_cardinality(8) (AssertCardinalityDataset) over TextLineDataset. Exact."""
    return tf.data.TextLineDataset(ctx.data.text).apply(tf.data.experimental.assert_cardinality(8))


# --- inside map functions --------------------------------------------------

@case(fixture=True)
def map_int_arithmetic(ctx):
    """Integer arithmetic and comparisons: + - * // % neg, abs, min/max, ==, <, logical ops. Exact."""
    def f(x):
        return (x * 3 + 1, x // 4, x % 5, -x, tf.abs(x - 10), tf.minimum(x, 7), tf.maximum(x, 12),
                tf.equal(x, 3), x < 9, tf.logical_and(x > 2, tf.logical_not(x > 15)),
                tf.math.floordiv(x - 10, 3), tf.math.floormod(x - 10, 3))
    return tf.data.Dataset.range(20).map(f)


@case("float", rtol=1e-6, atol=1e-7, fixture=True)
def map_float_math(ctx):
    """Float math: division, sqrt, exp, log1p, pow, tanh, floor/round on float32 and float64.
    Transcendentals may differ in the last ulps between math libraries: rtol 1e-6."""
    def f(x):
        y = tf.cast(x, tf.float32) * 0.37 - 2.0
        z = tf.cast(x, tf.float64) / 7.0
        return (y / 3.0, tf.sqrt(tf.abs(y)), tf.exp(-tf.abs(y)), tf.math.log1p(tf.abs(y)), tf.pow(y, 2.0),
                tf.tanh(y), tf.floor(y), tf.round(y), z * z - 1.0, tf.sigmoid(z))
    return tf.data.Dataset.range(16).map(f)


@case(fixture=True)
def map_cast_where(ctx):
    """tf.cast between int64/int32/uint8/float32/float64/bool (truncation, wrap) and tf.where. Exact."""
    def f(x):
        v = tf.cast(x, tf.float32) * 1.75 - 20.0
        return (tf.cast(v, tf.int32), tf.cast(x * 37, tf.uint8), tf.cast(x % 2, tf.bool),
                tf.cast(v, tf.float64), tf.where(x > 5, x, -x), tf.where(v > 0.0, v, tf.zeros_like(v)))
    return tf.data.Dataset.range(24).map(f)


@case(fixture=True)
def map_cond_while(ctx):
    """tf.cond (If/StatelessIf) and tf.while_loop (While; Collatz steps). Exact."""
    def f(x):
        c = tf.cond(x > 5, lambda: x * 2, lambda: x - 100)
        steps = tf.while_loop(lambda i, n: n > 1,
                              lambda i, n: (i + 1, tf.where(n % 2 == 0, n // 2, 3 * n + 1)),
                              [tf.constant(0, tf.int64), x + 1])[0]
        return c, steps
    return tf.data.Dataset.range(12).map(f)


@tf.function
def _inner(v):
    return v * v + 1


@case(fixture=True)
def map_nested_function(ctx):
    """A nested tf.function called twice inside the map (a call to a library function). Exact."""
    return tf.data.Dataset.range(10).map(lambda x: _inner(x) + _inner(x + 1))


@case(fixture=True)
def map_shapes(ctx):
    """reshape, expand_dims, transpose, stack, unstack, concat, squeeze. Exact."""
    def f(x):
        m = tf.reshape(tf.range(x, x + 6), [2, 3])
        rows = tf.unstack(m)
        return (tf.transpose(m), tf.expand_dims(m, 0), tf.stack([rows[1], rows[0]]),
                tf.concat([m, m * 2], axis=1), tf.squeeze(tf.expand_dims(rows[0], -1)), tf.reshape(m, [-1]))
    return tf.data.Dataset.range(5).map(f)


@case(fixture=True)
def map_slicing_gather(ctx):
    """Slicing x[1:], x[..., ::-1], x[:, 1], gather, tile, fill, range, zeros_like, ones_like. Exact."""
    def f(x):
        m = tf.reshape(tf.range(12, dtype=tf.int64) + x, [3, 4])
        return (m[1:], m[..., ::-1], m[:, 1], tf.gather(m, [2, 0], axis=0), tf.gather(m[0], [3, 3, 1]),
                tf.tile(m[:1], [2, 2]), tf.fill([2, 3], x), tf.range(x, 3 * x + 1, 2),
                tf.zeros_like(m), tf.ones_like(m[0], dtype=tf.float32))
    return tf.data.Dataset.range(1, 5).map(f)


@case("float", rtol=1e-6, atol=1e-6, fixture=True)
def map_reductions(ctx):
    """reduce_sum/mean/max/min/prod/all/any over axes, argmax/argmin, on ints and floats.
    Float sums depend on the order of additions: rtol 1e-6; integers exact."""
    def f(x):
        m = tf.reshape(tf.range(x, x + 12), [3, 4])
        fm = tf.cast(m, tf.float32) * 0.3
        return (tf.reduce_sum(m), tf.reduce_sum(m, axis=0), tf.reduce_mean(fm, axis=1), tf.reduce_max(m, axis=1),
                tf.reduce_min(fm), tf.reduce_prod(m[:, :2], axis=1), tf.reduce_all(m > x + 1, axis=0),
                tf.reduce_any(m > x + 10), tf.argmax(fm, axis=1), tf.argmin(m, axis=0),
                tf.reduce_mean(m), tf.reduce_sum(fm, keepdims=True))
    return tf.data.Dataset.range(6).map(f)


@case(fixture=True)
def map_one_hot_cumsum(ctx):
    """tf.one_hot (float and int, off/on values) and tf.math.cumsum (plain, exclusive, reverse). Exact."""
    def f(x):
        v = tf.range(x + 1)
        return (tf.one_hot(x % 4, 4), tf.one_hot(v % 3, 3, on_value=5, off_value=-1, dtype=tf.int32),
                tf.math.cumsum(v), tf.math.cumsum(v, exclusive=True), tf.math.cumsum(v, reverse=True))
    return tf.data.Dataset.range(5).map(f)


@case(fixture=True)
def strings_split_to_number(ctx):
    """strings.split of a scalar (dense result) and of a vector (ragged, .to_tensor()),
    strings.to_number to float32 and int64. Decimal parsing is exact."""
    def f(s):
        parts = tf.strings.split(s, " ")
        ragged = tf.strings.split(tf.stack([s, "1 2"]), " ").to_tensor(default_value="0")
        ints = tf.strings.to_number(tf.strings.split(tf.constant("4 -5 60"), " "), tf.int64)
        return parts, tf.strings.to_number(parts, tf.float32), tf.strings.to_number(ragged, tf.float64), ints
    return tf.data.Dataset.from_tensor_slices(["3.5 -2 17", "0.25", "1e3 4 5 6"]).map(f)


@case(fixture=True)
def strings_hash_decode_raw(ctx):
    """strings.to_hash_bucket_fast (FarmHash fingerprint), decode_raw to uint8/int16/float32
    (little-endian), strings.length. Exact."""
    def f(s):
        return (tf.strings.to_hash_bucket_fast(s, 97), tf.io.decode_raw(s, tf.uint8),
                tf.io.decode_raw(s, tf.int16), tf.io.decode_raw(s, tf.float32), tf.strings.length(s))
    return tf.data.Dataset.from_tensor_slices(["abcdefgh", "\x00\x01\x02\x03\x04\x05\x06\x07", "ZZZZzzzz"]).map(f)


@case(fixture=True)
def strings_case_regex(ctx):
    """strings lower/upper/regex_replace (global and first-only)/join/substr (pos 2 <= every length) on constants. Exact."""
    def f(s):
        return (tf.strings.lower(s), tf.strings.upper(s), tf.strings.regex_replace(s, "[aeiou]", "_"),
                tf.strings.regex_replace(s, "o", "0", replace_global=False),
                tf.strings.join([s, "!", s], separator="|"), tf.strings.substr(s, 2, 3))
    return tf.data.Dataset.from_tensor_slices(["Hello World", "tfDATA", "foo boo", "xy"]).map(f)


@case(fixture=True)
def parse_example_from_constants(ctx):
    """parse_single_example on serialized Examples held as constants (no files):
    FixedLen with default, VarLen densified. Exact."""
    serialized = tf.constant([_example(i) for i in range(5)])
    return tf.data.Dataset.from_tensor_slices(serialized).map(
        lambda s: _densify(tf.io.parse_single_example(s, _features())))


# --- lookup tables ---------------------------------------------------------

_WORDS = ["the quick brown fox", "jumps over the lazy dog", "a cat", "", "fox fox unknown words"]


@case(fixture=True)
def lookup_static_hash_table(ctx):
    """tf.lookup.StaticHashTable (KeyValueTensorInitializer, string -> int64) in map over split
    tokens, its size, padded_batch. The table is a HashTableV2 and LookupTableImportV2 in the
    outer graph, captured by the map. Exact."""
    table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
        ["the", "quick", "brown", "fox", "dog"], tf.constant([0, 1, 2, 3, 4], tf.int64)), default_value=-1)
    return tf.data.Dataset.from_tensor_slices(_WORDS).map(
        lambda s: (table.lookup(tf.strings.split(s)), table.size())).padded_batch(2)


@case(fixture=True)
def lookup_vocabulary_oov_buckets(ctx):
    """tf.lookup.StaticVocabularyTable with 3 OOV buckets (Fingerprint64 of unknown tokens) in a
    parallel map, and an int64-keyed one in a filter. Exact."""
    vocab = tf.lookup.StaticVocabularyTable(tf.lookup.KeyValueTensorInitializer(
        ["the", "quick", "brown", "fox"], tf.constant([0, 1, 2, 3], tf.int64)), num_oov_buckets=3)
    ints = tf.lookup.StaticVocabularyTable(tf.lookup.KeyValueTensorInitializer(
        tf.constant([2, 4, 6], tf.int64), tf.constant([0, 1, 2], tf.int64)), num_oov_buckets=2)
    return (tf.data.Dataset.from_tensor_slices(_WORDS)
            .map(lambda s: vocab.lookup(tf.strings.split(s)), num_parallel_calls=2, deterministic=True)
            .unbatch().filter(lambda i: ints.lookup(i) < 3))


@case(files=True)
def lookup_vocabulary_file(ctx):
    """tf.lookup.StaticVocabularyTable from a vocabulary file (TextFileInitializer: whole line ->
    line number, InitializeTableFromTextFileV2 in the graph, the file read by the worker) with 5
    OOV buckets, over TextLineDataset tokens. Exact."""
    path = Path(ctx.scratch) / "vocab.txt"
    path.write_text("".join(f"{w}\n" for w in ["Hello", "World", "The", "brown", "FOX", "service,", "2.21"]), encoding="utf-8")
    vocab = tf.lookup.StaticVocabularyTable(tf.lookup.TextFileInitializer(
        str(path), tf.string, tf.lookup.TextFileIndex.WHOLE_LINE, tf.int64,
        tf.lookup.TextFileIndex.LINE_NUMBER), num_oov_buckets=5)
    return tf.data.TextLineDataset(ctx.data.text).map(lambda s: vocab.lookup(tf.strings.split(s)))


@case(fixture=True)
def sparse_elements_batched(ctx):
    """VarLenFeature parsed into a SparseTensor element (SerializeSparse to a variant), batched
    (BatchDatasetV2 of serialized sparse tensors), read back (DeserializeSparse) and densified in
    the last map; tf.sparse.reorder/reshape on the way. Exact."""
    serialized = tf.constant([_example(i) for i in range(5)])
    feature = {"tokens": tf.io.VarLenFeature(tf.int64)}

    def last(sp):
        return tf.sparse.to_dense(tf.sparse.reshape(tf.sparse.reorder(sp), [-1])), sp.dense_shape
    return (tf.data.Dataset.from_tensor_slices(serialized)
            .map(lambda s: tf.io.parse_single_example(s, feature)["tokens"]).batch(2).map(last))


@case(compressions=("AUTO", None))
def sparse_elements_served(ctx):
    """A recommendation pipeline as users write it: VarLenFeature ids and scores parsed per
    example, batched, and served as SparseTensors (a DT_VARIANT component each, which the
    worker sends as TensorFlow's variant of indices, values and shape); compressed and not.
    Exact."""
    serialized = tf.constant([_example(i) for i in range(7)])
    return (tf.data.Dataset.from_tensor_slices(serialized)
            .map(lambda s: tf.io.parse_single_example(s, _features()))
            .batch(3))


@case()
def sparse_elements_served_parse_example(ctx):
    """Batch first, then tf.io.parse_example (ParseExampleV2 over a batch): the sparse
    features served unbatched with .unbatch() and rebatched with padded ids alongside. Exact."""
    serialized = tf.constant([_example(i) for i in range(9)])
    features = {"tokens": tf.io.VarLenFeature(tf.int64), "id": tf.io.FixedLenFeature([], tf.int64)}
    return (tf.data.Dataset.from_tensor_slices(serialized).batch(4)
            .map(lambda s: tf.io.parse_example(s, features))
            .map(lambda f: (f["id"], f["tokens"])))


@case(compressions=("AUTO", None))
def ragged_elements_served(ctx):
    """Token ids as RaggedTensors (tf.strings.split of sentences, hashed to buckets), batched
    with ragged_batch and served as RaggedTensors (a DT_VARIANT component each, which the
    worker sends as TensorFlow's RaggedTensorVariant, not mistaken for a SparseTensor);
    compressed and not, a dense label alongside. Exact."""
    lines = tf.constant(["the quick brown fox", "", "jumps over", "the lazy dog again", "d\u00e9j\u00e0 vu"])
    return (tf.data.Dataset.from_tensor_slices(lines)
            .map(lambda s: (tf.strings.to_hash_bucket_fast(tf.strings.split(s), 100), tf.strings.length(s)))
            .ragged_batch(2))


@case()
def ragged_elements_served_unbatched(ctx):
    """Ragged rank 2 string rows (a batch of split sentences, split again) cut back into
    rows with unbatch (scalar variants TensorFlow declares with a known shape), then take:
    each row served as a RaggedTensor beside a SparseTensor of the same words. Exact."""
    lines = tf.constant(["a bc", "d", "", "e f g h"])
    return (tf.data.Dataset.from_tensor_slices(lines).batch(2)
            .map(lambda s: (tf.strings.split(tf.strings.split(s), "c"), tf.strings.split(s).to_sparse()))
            .unbatch().take(3))


# --- images ----------------------------------------------------------------

def _read(path):
    return tf.io.read_file(path)


@case("jpeg", files=True)
def decode_jpeg_rgb(ctx):
    """read_file + decode_jpeg(channels=3) of 24x32 JPEGs: uint8, jpeg tolerance."""
    return tf.data.Dataset.from_tensor_slices(ctx.data.jpegs).map(lambda p: tf.io.decode_jpeg(_read(p), channels=3))


@case(files=True)
def decode_png_any_channels(ctx):
    """decode_png(channels=0) of RGB and grayscale PNGs: lossless, exact."""
    return tf.data.Dataset.from_tensor_slices(ctx.data.pngs).map(lambda p: tf.io.decode_png(_read(p)))


@case(files=True)
def decode_image_png(ctx):
    """decode_image(channels=3, expand_animations=False) of PNGs (grayscale expanded to RGB). Exact."""
    return tf.data.Dataset.from_tensor_slices(ctx.data.pngs).map(
        lambda p: tf.io.decode_image(_read(p), channels=3, expand_animations=False))


@case("jpeg", files=True)
def decode_and_crop_jpeg(ctx):
    """tf.image.decode_and_crop_jpeg with a crop window. jpeg tolerance."""
    return tf.data.Dataset.from_tensor_slices(ctx.data.jpegs).map(
        lambda p: tf.image.decode_and_crop_jpeg(_read(p), [2, 3, 16, 20], channels=3))


@case("float", rtol=1e-5, atol=2e-3, files=True)
def resize_methods(ctx):
    """tf.image.resize bilinear, nearest, bicubic (up and down) of a decoded PNG (exact input):
    float32; interpolation arithmetic may differ in order: atol 2e-3 on the 0..255 scale."""
    def f(p):
        img = tf.io.decode_png(_read(p), channels=3)
        return (tf.image.resize(img, [30, 41]), tf.image.resize(img, [7, 9], method="nearest"),
                tf.image.resize(img, [25, 13], method="bicubic"), tf.image.resize(img, [8, 10]))
    return tf.data.Dataset.from_tensor_slices(ctx.data.pngs).map(f)


@case("float", rtol=1e-5, atol=1e-4, files=True)
def image_flip_crop_contrast(ctx):
    """flip_left_right (exact in itself), crop_and_resize with two boxes, adjust_contrast(1.7)
    on a float image: float32, atol 1e-4."""
    def f(p):
        img = tf.image.convert_image_dtype(tf.io.decode_png(_read(p), channels=3), tf.float32)
        boxes = tf.constant([[0.0, 0.0, 0.5, 0.5], [0.2, 0.1, 0.9, 1.0]])
        crops = tf.image.crop_and_resize(tf.expand_dims(img, 0), boxes, tf.zeros([2], tf.int32), [6, 5])
        return tf.image.flip_left_right(img), crops, tf.image.adjust_contrast(img, 1.7)
    return tf.data.Dataset.from_tensor_slices(ctx.data.pngs).map(f)


def _canon_flip(element):
    """An image and its left-right flip are the same element for random_flip."""
    ((dtype, shape, img),) = element
    flipped = np.ascontiguousarray(img[:, ::-1, :])
    return (dtype, shape, min(img.tobytes(), flipped.tobytes()))


@case("multiset", files=True, canon=_canon_flip)
def random_flip_seeded(ctx):
    """random_flip_left_right with a seed over 12 PNG decodes: whether each is flipped is random,
    so elements are compared as a multiset of {image, flipped image} classes."""
    return tf.data.Dataset.from_tensor_slices(ctx.data.pngs * 4).map(
        lambda p: tf.image.random_flip_left_right(tf.io.decode_png(_read(p), channels=3), seed=9))


MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


@case("jpeg", files=True, jpeg_scale=1 / (255 * 0.224), compressions=("AUTO", None))
def image_pipeline_benchmark(ctx):
    """The benchmark's pipeline: file names -> read_file -> decode_jpeg(3) -> resize 224 bilinear ->
    /255, normalise by mean/std -> batch(2), parallel map. jpeg tolerance in normalised units."""
    def f(p):
        img = tf.image.resize(tf.io.decode_jpeg(_read(p), channels=3), [224, 224])
        return (img / 255.0 - MEAN) / STD
    return tf.data.Dataset.from_tensor_slices(ctx.data.jpegs).map(f, num_parallel_calls=AUTOTUNE).batch(2)


def by_name(name):
    for c in CASES:
        if c.name == name:
            return c
    raise KeyError(name)


# ---------------------------------------------------------------------------
# Elements and comparisons
# ---------------------------------------------------------------------------

def elements(ds, limit=0):
    """The dataset's elements as lists of (dtype name, shape, value) leaves in
    `tf.nest.flatten` order; value is a numpy array, or for strings a list of bytes."""
    if limit:
        ds = ds.take(limit)
    out = []
    for el in ds:
        leaves = []
        # SparseTensors as their indices, values and dense shape.
        for t in tf.nest.flatten(el, expand_composites=True):
            a = t.numpy()
            if t.dtype == tf.string:
                leaves.append(("string", tuple(t.shape), np.array(a, dtype=object).ravel().tolist()))
            else:
                leaves.append((t.dtype.name, tuple(t.shape), np.asarray(a)))
        out.append(leaves)
    return out


def _leaf_bytes(leaf):
    dtype, shape, value = leaf
    if dtype == "string":
        return (dtype, shape, tuple(value))
    return (dtype, shape, np.ascontiguousarray(value).tobytes())


def _show(el):
    return [(d, s, v if d == "string" else v.tolist()) for d, s, v in el]


def _check_leaf(i, j, want, got, c):
    wd, ws, wv = want
    gd, gs, gv = got
    where = f"element {i} component {j}"
    assert (gd, gs) == (wd, ws), f"{where}: dtype/shape {gd}{list(gs)}, TensorFlow's {wd}{list(ws)}"
    if wd == "string":
        assert gv == wv, f"{where}: {gv!r}, TensorFlow's {wv!r}"
        return
    floating = np.issubdtype(wv.dtype, np.floating)
    if c.compare == "float" and floating:
        np.testing.assert_allclose(gv, wv, rtol=c.rtol, atol=c.atol, err_msg=where)
    elif c.compare == "jpeg" and wv.dtype != np.bool_:
        diff = np.abs(gv.astype(np.float64) - wv.astype(np.float64))
        worst = float(diff.max()) if diff.size else 0.0
        mean = float(diff.mean()) if diff.size else 0.0
        assert worst <= c.jpeg_max and mean <= c.jpeg_mean, (
            f"{where}: max |diff| {worst:.4g} (limit {c.jpeg_max:.4g}), mean {mean:.4g} (limit {c.jpeg_mean:.4g})")
    else:
        assert gv.tobytes() == wv.tobytes(), f"{where}: {gv.tolist()}, TensorFlow's {wv.tolist()}"


def _short(x, n=200):
    r = repr(x)
    return r if len(r) <= n else r[:n] + "..."


def compare(c, want, got):
    """Asserts `got` (read through the service) matches `want` (TensorFlow's local iteration) under `c`'s rule."""
    if c.compare == "multiset":
        canon = c.canon or (lambda el: tuple(_leaf_bytes(l) for l in el))
        w = sorted(canon(el) for el in want)
        g = sorted(canon(el) for el in got)
        assert len(g) == len(w), f"{len(g)} elements, TensorFlow has {len(w)}"
        for i, (a, b) in enumerate(zip(w, g)):
            assert a == b, f"multisets differ at sorted position {i}: {_short(b)} vs TensorFlow's {_short(a)}"
        return
    assert len(got) == len(want), (
        f"{len(got)} elements, TensorFlow has {len(want)}; first elements: {[_show(e) for e in got[:3]]} "
        f"vs TensorFlow's {[_show(e) for e in want[:3]]}")
    for i, (w, g) in enumerate(zip(want, got)):
        assert len(g) == len(w), f"element {i}: {len(g)} components, TensorFlow's {len(w)}"
        for j, (wl, gl) in enumerate(zip(w, g)):
            _check_leaf(i, j, wl, gl, c)


def graph_ops(ds):
    """The dataset ops (names ending in Dataset, plus a few more) of the graph TensorFlow serializes for `ds`."""
    from tensorflow.core.framework import graph_pb2
    g = graph_pb2.GraphDef.FromString(ds._as_serialized_graph().numpy())
    ops = {n.op for n in g.node}
    for f in g.library.function:
        ops.update(n.op for n in f.node_def)
    return sorted(ops)
