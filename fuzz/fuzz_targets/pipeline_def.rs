//! The versioned pipeline wire form: a `PipelineDef` (inside the
//! `DatasetDef` of `GetOrRegisterDataset` and `ProcessTask`) rebuilt and
//! validated by `tfdata_dataset::pipeline::from_pipeline_def`, statically
//! sharded by `autoshard::auto_shard` as a worker does, and round-tripped;
//! and the `StructuredValue` element spec clients decode
//! (`spec_coder::from_structured_value`).
//!
//! Input: a mode byte (0: PipelineDef, 1: DatasetDef, 2: StructuredValue;
//! bits 2-4: sharding policy, bits 5-7: worker count), a worker index byte,
//! then the message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use prost::Message;
use tfdata_dataset::autoshard::{StaticPolicy, auto_shard};
use tfdata_dataset::pipeline::{from_pipeline_def, to_pipeline_def};
use tfdata_dataset::spec_coder::{from_structured_value, to_structured_value};
use tfdata_fuzz::Input;
use tfdata_proto::data::DatasetDef;
use tfdata_proto::tensorflow::StructuredValue;
use tfdata_proto::tfdata::pipeline::PipelineDef;

fn pipeline(def: &PipelineDef, policy: u8, num_workers: i64, index: i64) {
    let Ok(ds) = from_pipeline_def(def) else {
        return;
    };
    let wire = to_pipeline_def(&ds, def.compress).expect("a decoded pipeline serialises");
    let bytes = wire.encode_to_vec();
    let back = PipelineDef::decode(bytes.as_slice()).expect("our own PipelineDef parses");
    assert_eq!(
        from_pipeline_def(&back).expect("our own PipelineDef decodes"),
        ds,
        "wire round trip"
    );
    tfdata_fuzz::iterate_bounded(&ds);
    let policy = match policy % 5 {
        0 => return,
        1 => StaticPolicy::File,
        2 => StaticPolicy::Data,
        3 => StaticPolicy::FileOrData,
        _ => StaticPolicy::Hint,
    };
    let root = wire.root.as_ref().expect("a root op");
    if let Ok(sharded) = auto_shard(root, policy, num_workers, index) {
        let sharded = PipelineDef {
            root: Some(sharded),
            ..wire.clone()
        };
        if let Ok(ds) = from_pipeline_def(&sharded) {
            tfdata_fuzz::iterate_bounded(&ds);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let mode = input.u8();
    let index = i64::from(input.u8()) - 1;
    let num_workers = i64::from(mode >> 5);
    let policy = (mode >> 2) & 7;
    let bytes = input.rest();
    match mode & 3 {
        0 | 3 => {
            if let Ok(def) = PipelineDef::decode(bytes) {
                pipeline(&def, policy, num_workers, index);
            }
        }
        1 => {
            if let Ok(DatasetDef {
                tfdata_pipeline: Some(def),
                ..
            }) = DatasetDef::decode(bytes)
            {
                pipeline(&def, policy, num_workers, index);
            }
        }
        _ => {
            if let Ok(value) = StructuredValue::decode(bytes)
                && let Ok(structure) = from_structured_value(&value)
            {
                let back = from_structured_value(&to_structured_value(&structure))
                    .expect("our own StructuredValue decodes");
                assert_eq!(back, structure, "StructuredValue round trip");
            }
        }
    }
});
