"""Writes the ArrayRecord fixtures of `array_record_dataset`'s tests with
Google's own writer, and what Google's own reader returns for each.

Run once (the outputs are committed), from this folder, in a virtualenv
with the `array_record` package (its wheels bundle the C++ writer and reader):

    python3 -m venv ~/.cache/tfdata-arrayrecord
    ~/.cache/tfdata-arrayrecord/bin/pip install array_record
    ~/.cache/tfdata-arrayrecord/bin/python make_fixtures.py

`expected.json` maps each fixture to the writer options it was written with
and either the records `ArrayRecordReader.read_all()` returns or, for a
layout the Rust reader refuses, `"unsupported": true`. A record is its bytes
in hex, or for one longer than 256 bytes its length and CRC-32 (zlib's).

Every file is at least 128 KiB: ArrayRecord aligns its postscript to the
last 64 KiB block, and the rest is mostly zero padding (git stores them in
a few KB).
"""

import json
import os
import zlib

from array_record.python import array_record_module


def records(n, size=lambda i: i):
    """n records of varied sizes: an empty one, binary bytes, text."""
    out = []
    for i in range(n):
        if i == 0:
            out.append(b"")
        elif i % 4 == 1:
            out.append(bytes((i * 37 + j) % 256 for j in range(size(i))))
        else:
            out.append((b"record %d " % i) + b"x" * size(i))
    return out


FIXTURES = {
    # ArrayRecord's defaults: group_size 1, zstd level 3.
    "default": ("", records(12)),
    "group_size_10": ("group_size:10", records(25)),
    "snappy": ("snappy,group_size:4", records(10)),
    "uncompressed": ("uncompressed,group_size:3", records(10)),
    "brotli": ("brotli,group_size:5", records(10)),
    "zstd_19": ("zstd:19,group_size:7", records(15)),
    "empty": ("", []),
    # Every chunk starts on a 64 KiB block boundary (after its block header).
    "padded": ("pad_to_block_boundary:true,group_size:2", records(5)),
    # Chunks of ~70 KB uncompressed: block headers interrupt their data.
    "large": (
        "uncompressed,group_size:2",
        [b"a" * 70000, b"b" * 100, (b"0123456789" * 6553) + b"end"],
    ),
    # Transposed chunks (records as protocol buffers): refused by the Rust
    # reader, which decodes simple chunks only.
    "transposed": ("transpose:true", records(3)),
}


def describe(record):
    if len(record) <= 256:
        return record.hex()
    return {"len": len(record), "crc32": zlib.crc32(record)}


def main():
    expected = {}
    for name, (options, recs) in FIXTURES.items():
        path = name + ".array_record"
        writer = array_record_module.ArrayRecordWriter(path, options)
        for r in recs:
            writer.write(r)
        writer.close()
        reader = array_record_module.ArrayRecordReader(path)
        read = reader.read_all() if reader.num_records() else []
        writer_options = reader.writer_options_string()
        reader.close()
        assert read == recs, name
        expected[name] = {
            "options": options,
            "writer_options": writer_options,
            "size": os.path.getsize(path),
        }
        if "transpose:true" in options:
            expected[name]["unsupported"] = True
        else:
            expected[name]["records"] = [describe(r) for r in read]
    with open("expected.json", "w") as f:
        json.dump(expected, f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    main()
