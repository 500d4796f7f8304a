"""Writes the webdataset fixtures of crates/tfdata-dataset/src/webdataset/tests.rs
with the real webdataset package (1.0.2) and braceexpand (0.1.7), and what
webdataset itself reads from them:

* shard-000000.tar, shard-000001.tar: webdataset.TarWriter shards (PAX
  format, tarfile's default, as TarWriter opens it): fields jpg, cls, txt;
  keys with dots in a directory, a non-ASCII key and a key over 100
  characters (both written with PAX headers);
* mixed.tar.gz: a gzip TarWriter shard whose samples have differing fields
  (a `seg.png`, one without `cls`);
* odd.tar.gz: written with tarfile: a README and a `.hidden` file (no key),
  a directory, a symlink, webdataset metadata (`__meta__/...`), a sample
  split by them, an old-style GNU long name;
* expected.json: per shard, the samples webdataset's tarfile_samples reads
  (fields as hex);
* braceexpand.json, names.json, ints.json: braceexpand's expansions,
  base_plus_ext / metadata-skipping decisions and Python int() of bytes,
  for tables the Rust tests compare against.

Run from anywhere with the project's Python (~/.cache/tfdata-py/bin/python):
the outputs are deterministic (fixed mtimes, no randomness).
"""

import io
import json
import os
import re
import tarfile

import braceexpand
import webdataset
from webdataset import tariterators
from webdataset.writer import TarWriter

HERE = os.path.dirname(os.path.abspath(__file__))
MTIME = 1700000000


def path(name):
    return os.path.join(HERE, name)


def jpg(i):
    # Not a real JPEG: bytes are bytes to a shard.
    return bytes([0xFF, 0xD8, 0xFF, i, 0, 255, 10, 13]) + b"\x00" * i


def write_shards():
    with TarWriter(path("shard-000000.tar"), encoder=False, mtime=MTIME) as w:
        for i in range(2):
            w.write(
                {
                    "__key__": f"dir.v1/s{i:03d}",
                    "jpg": jpg(i),
                    "cls": str(i + 3).encode(),
                    "txt": f"caption {i}".encode(),
                }
            )
    with TarWriter(path("shard-000001.tar"), encoder=False, mtime=MTIME) as w:
        w.write({"__key__": "dir.v1/s002", "jpg": jpg(2), "cls": b" 12\n", "txt": b"caption 2"})
        w.write({"__key__": "d\u00e9j\u00e0/\u00e9t\u00e9", "jpg": jpg(3), "cls": b"-1", "txt": "\u00e9".encode()})
        w.write({"__key__": "long/" + "k" * 120, "jpg": jpg(4), "cls": b"1_000", "txt": b""})
    with TarWriter(path("mixed.tar.gz"), encoder=False, mtime=MTIME, compress=True) as w:
        w.write({"__key__": "m0", "jpg": jpg(5), "cls": b"0"})
        w.write({"__key__": "m1", "jpg": jpg(6), "cls": b"1", "seg.png": b"PNG!"})
        w.write({"__key__": "m2", "jpg": jpg(7)})
        w.write({"__key__": "m3", "jpg": jpg(8), "cls": b"3"})

    def add(tar, name, data=b"", kind=tarfile.REGTYPE, **kw):
        info = tarfile.TarInfo(name)
        info.type = kind
        info.size = len(data) if kind == tarfile.REGTYPE else 0
        info.mtime = MTIME
        for k, v in kw.items():
            setattr(info, k, v)
        tar.addfile(info, io.BytesIO(data) if kind == tarfile.REGTYPE else None)

    with open(path("odd.tar.gz"), "wb") as f:
        import gzip

        raw = io.BytesIO()
        with tarfile.open(fileobj=raw, mode="w", format=tarfile.GNU_FORMAT) as tar:
            add(tar, "README", b"not a sample")
            add(tar, "d", kind=tarfile.DIRTYPE)
            add(tar, "d/a.jpg", b"A")
            add(tar, "d/.hidden", b"hidden")  # key "d/", field "hidden"
            add(tar, "__meta__/info.json", b"{}")
            add(tar, "d/a.cls", b"1")
            add(tar, "d/link.jpg", kind=tarfile.SYMTYPE, linkname="a.jpg")
            add(tar, "d/b.jpg", b"B")
            add(tar, "NOTES", b"no key either")
            add(tar, "d/b.cls", b"2")
            add(tar, "g/" + "x" * 150 + ".jpg", b"C")  # a GNU long name
            add(tar, "g/" + "x" * 150 + ".cls", b"3")
        f.write(gzip.compress(raw.getvalue(), mtime=0))


def read_back():
    out = {}
    for name in ["shard-000000.tar", "shard-000001.tar", "mixed.tar.gz", "odd.tar.gz"]:
        samples = []
        for s in tariterators.tarfile_samples([{"url": path(name)}]):
            samples.append(
                {
                    "__key__": s["__key__"],
                    "fields": {
                        k: v.hex() for k, v in sorted(s.items()) if not k.startswith("__")
                    },
                }
            )
        out[name] = samples
    return out


PATTERNS = [
    "shard-{000000..000003}.tar",
    "item{1..3}",
    "{07..10}",
    "{4..1}",
    "{2..-1}",
    "{-05..-3}",
    "{-3..-05}",
    "{0..10..5}",
    "{10..0..-5}",
    "{1..3..0}",
    "{0..-0}",
    "{-0..2}",
    "{00..2..2}",
    "{a..g..2}",
    "{c..a}",
    "{B..A}",
    "{Y..b}",
    "{z..A..10}",
    "{a..a}",
    "index.html{,.backup}",
    "python{2.{5..7},3.{2,3}}",
    "{a,b}/{0..1}.tar",
    "{a}",
    "{}",
    "{,}",
    "x{{a,b}}",
    "{1\\{2,3}",
    "a\\,b\\\\c",
    "a}b{c",
    "}{{a,b}",
    "{a,{b,{c,d}}}e",
    "{{1..2},x}",
    "{1..2}{a,b}{}",
    "{1..2\n}",
    "a\\",
    "{a\\}b,c}",
    "s3://bucket/shard-{00..02}.tar",
    "{1{2,3}",
    "}{a,b}",
    "{a,b",
    "",
]


def expansions():
    out = []
    for p in PATTERNS:
        try:
            out.append({"pattern": p, "expanded": list(braceexpand.braceexpand(p))})
        except braceexpand.UnbalancedBracesError:
            out.append({"pattern": p, "error": True})
    return out


NAMES = [
    "a.jpg", "a.b/c.d.jpg", "dir/sample.seg.json", "dir/.hidden", "x/y/.z", "a.jpg.",
    "a.", "README", ".hidden", "a.b/c", "a/b.c/.d", "a.b/", "a\nb.c/d.e", "ab.c/d\n.e",
    "a/b/c", "a..b", "..a", "a/.b.c", "a.b.c/d.e/f", "/abs.jpg", "/.x", "x.JPG",
    "__meta__", "__", "___", "__x__/y.json", "__a/b__", "__x__\n", "_x_", "a/__x__",
    "__x_", "__x__y/z", "x__", "__key__.json", "k.__key__", "d\u00e9j\u00e0/\u00e9t\u00e9.JPG",
]


def names():
    skip_meta = r"__[^/]*__($|/)"
    out = []
    for n in NAMES:
        meta = bool(
            ("/" not in n and n.startswith("__") and n.endswith("__")) or re.match(skip_meta, n)
        )
        base, ext = tariterators.base_plus_ext(n)
        out.append({"name": n, "meta": meta, "split": None if base is None else [base, ext]})
    return out


INTS = ["7", " 42\n", "-3", "+5", "007", "1_000", "9223372036854775807",
        "-9223372036854775808", "9223372036854775808", "", "  ", "1__0", "_1", "1_",
        "1.0", "0x10", "- 1", "\t-0\x0b", "1 2", "+", "-"]


def ints():
    out = []
    for t in INTS:
        try:
            v = int(t.encode())
            v = v if -(2**63) <= v < 2**63 else None
        except ValueError:
            v = None
        out.append({"text": t, "value": v})
    return out


def main():
    write_shards()
    with open(path("expected.json"), "w") as f:
        json.dump(read_back(), f, indent=1, ensure_ascii=True, sort_keys=True)
        f.write("\n")
    tables = {"braceexpand.json": expansions(), "names.json": names(), "ints.json": ints()}
    for name, table in tables.items():
        with open(path(name), "w") as f:
            json.dump(table, f, indent=1, ensure_ascii=True)
            f.write("\n")
    print("webdataset", webdataset.__version__, "braceexpand", braceexpand.__version__)


if __name__ == "__main__":
    main()
