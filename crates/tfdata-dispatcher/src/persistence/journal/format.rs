//! The journal's records and names: every `Update`, and a compaction's
//! state, is one TFRecord (length, masked CRCs, data), the framing
//! TensorFlow's journal uses, on both backends; a compaction is the file or
//! object `snapshot_<m>`.

use bytes::Bytes;
use prost::Message;
use tfdata_core::tfrecord;
use tfdata_core::{Error, Result};
use tfdata_proto::data::Update;
use tfdata_proto::tfdata::compaction::CompactedState;

/// The name a compaction's file or object starts with: `snapshot_<m>`.
/// "Snapshot" means `distributed_save` everywhere else; the journal keeps
/// the name its files have always had, so every existing work_dir still
/// restores (a new name would need both read forever).
pub(super) const COMPACTION_PREFIX: &str = "snapshot";

/// The name of compaction `m`'s file or object.
pub(super) fn compaction_name(m: u64) -> String {
    format!("{COMPACTION_PREFIX}_{m}")
}

pub(super) fn decode_compacted_state(location: &str, records: &[Bytes]) -> Result<CompactedState> {
    let [record] = records else {
        return Err(Error::DataLoss {
            location: location.to_string(),
            reason: format!("expected one record, found {}", records.len()),
        });
    };
    CompactedState::decode(record.clone()).map_err(|e| Error::DataLoss {
        location: location.to_string(),
        reason: format!("not a compacted dispatcher state: {e}"),
    })
}

pub(super) fn decode_updates(name: &str, records: Vec<Bytes>, out: &mut Vec<Update>) -> Result<()> {
    for (i, record) in records.into_iter().enumerate() {
        let update = Update::decode(record).map_err(|e| Error::DataLoss {
            location: format!("{name}, record {i}"),
            reason: format!("not a journal Update: {e}"),
        })?;
        out.push(update);
    }
    Ok(())
}

pub(super) fn encode_record(data: &[u8], what: &str) -> Result<Vec<u8>> {
    let mut record = Vec::new();
    tfrecord::write_record(&mut record, data)
        .map_err(|e| Error::io(format!("encoding {what}"), e))?;
    Ok(record)
}
