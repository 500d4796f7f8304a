//! The journal's records: every `Update`, and the compaction's state, is
//! one TFRecord (length, masked CRCs, data), the framing TensorFlow's
//! journal uses, on both backends.

use bytes::Bytes;
use prost::Message;
use tfdata_core::tfrecord;
use tfdata_core::{Error, Result};
use tfdata_proto::data::Update;
use tfdata_proto::tfdata::snapshot::DispatcherSnapshot;

pub(super) fn decode_snapshot(location: &str, records: &[Bytes]) -> Result<DispatcherSnapshot> {
    let [record] = records else {
        return Err(Error::DataLoss {
            location: location.to_string(),
            reason: format!("expected one record, found {}", records.len()),
        });
    };
    DispatcherSnapshot::decode(record.clone()).map_err(|e| Error::DataLoss {
        location: location.to_string(),
        reason: format!("not a dispatcher snapshot: {e}"),
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
