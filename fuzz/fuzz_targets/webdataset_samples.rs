//! WebDataset shards (`tfdata_dataset::webdataset`): the parts tfdata
//! writes itself. A brace pattern through `urls::braceexpand_limited`, and
//! a shard's bytes through `members::tar_stream` (gzip detection), the tar
//! framing of `members::TarMembers`, the grouping of `samples::ShardSamples`
//! (keys, fields, limits, bad samples) and `samples::SampleSchema::element`
//! (fields checked, integer fields parsed), as the op reads them.
//!
//! Input: a mode byte (bit 0: read only the fields named next; bit 1:
//! limits of a few hundred bytes; bit 2: the schema is the fields named,
//! not the first sample's), the brace pattern (u16-length-prefixed), the
//! field names (u16-length-prefixed, comma-separated), then the shard.
#![no_main]

use std::collections::BTreeSet;

use libfuzzer_sys::fuzz_target;
use tfdata_core::DType;
use tfdata_dataset::webdataset::samples::{FieldSet, Limits, SampleSchema, ShardSamples};
use tfdata_dataset::webdataset::{members, urls};
use tfdata_fuzz::Input;

const MAX_URLS: usize = 4096;
const MAX_URL_BYTES: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let mode = input.u8();
    let pattern = String::from_utf8_lossy(input.part()).into_owned();
    let names: BTreeSet<String> = String::from_utf8_lossy(input.part())
        .split(',')
        .filter(|f| !f.is_empty())
        .map(str::to_string)
        .collect();
    let shard = input.rest();

    // The pattern: bounded, and a pattern with nothing special is itself.
    if let Ok(expanded) = urls::braceexpand_limited(&pattern, MAX_URLS, MAX_URL_BYTES) {
        assert!(expanded.len() <= MAX_URLS);
        assert!(expanded.iter().map(String::len).sum::<usize>() <= MAX_URL_BYTES);
        if !pattern.contains(['{', '}', '\\']) {
            assert_eq!(expanded, [pattern.clone()]);
        }
    }

    let limits = if mode & 2 != 0 {
        Limits {
            member_bytes: 300,
            sample_bytes: 700,
            fields: 4,
        }
    } else {
        Limits::default()
    };
    let keep = (mode & 1 != 0).then(|| names.clone());
    let shard_bytes = Box::new(std::io::Cursor::new(shard.to_vec()));
    let Ok((stream, compression)) = members::tar_stream("fuzz.tar", shard_bytes) else {
        return;
    };
    let mut samples = ShardSamples::new("fuzz.tar", stream, compression, keep.clone(), limits);
    let mut schema = (mode & 4 != 0).then(|| SampleSchema {
        fields: FieldSet::Requested(names.clone()),
    });
    // Every sample but a last fatal error stands on a header block of its
    // own; a gzip stream holds at most ~1032 times its size.
    let bound = (shard.len() + 1) * 1100 / 512 + 2;
    let mut ended = false;
    for _ in 0..bound {
        let Some(sample) = samples.next_sample() else {
            ended = true;
            break;
        };
        let Ok(sample) = sample else {
            continue;
        };
        let held: u64 = sample.fields.values().map(|v| v.len() as u64).sum();
        assert!(held <= limits.sample_bytes);
        assert!(sample.fields.len() + sample.others.len() <= limits.fields);
        if let Some(keep) = &keep {
            assert!(sample.fields.keys().all(|f| keep.contains(f)));
        }
        let schema = schema.get_or_insert_with(|| SampleSchema {
            fields: FieldSet::Exact(sample.fields.keys().cloned().collect()),
        });
        let structure = schema.structure();
        if let Ok(element) = schema.element("fuzz.tar", compression, sample) {
            let specs = structure.flatten();
            assert_eq!(element.components.len(), specs.len());
            for (t, s) in element.components.iter().zip(specs) {
                assert_eq!(t.dtype(), s.dtype);
                assert!(matches!(t.dtype(), DType::String | DType::Int64));
                assert!(t.shape().is_empty());
            }
        }
    }
    assert!(ended, "ShardSamples did not end");
    assert!(samples.next_sample().is_none(), "a sample after the end");
});
