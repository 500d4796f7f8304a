//! `ClientHeartbeat` as the load generator calls it: the request encoded by
//! prost, the response *scanned* instead of decoded.
//!
//! A reader's heartbeat answer lists every task of its iteration, one
//! `TaskInfo` per worker: with 1,000 workers and 10,000 readers beating once
//! a second that is 10 million `TaskInfo`s a second. Decoding them into
//! strings and vectors would make the generator, not the dispatcher, the
//! bottleneck. The scan walks the top-level fields only: it counts the
//! `task_info` entries (so a wrong task list is still caught) and reads
//! `iteration_finished`, skipping each entry by its length.

use bytes::Buf;
use prost::Message;
use prost::encoding::{WireType, decode_key, decode_varint};
use tfdata_proto::data::ClientHeartbeatRequest;
use tonic::Status;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

/// What the generator keeps of a `ClientHeartbeatResponse`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HeartbeatSummary {
    /// Entries of `task_info` (field 1).
    pub tasks: u64,
    /// `iteration_finished` (field 2).
    pub iteration_finished: bool,
    /// Bytes of the response message.
    pub bytes: u64,
}

/// Counts the top-level fields of an encoded `ClientHeartbeatResponse`.
/// Every field is skipped by its declared length, so the loop is bounded by
/// the message's bytes; a truncated or malformed message is an error.
pub fn scan(buf: &mut impl Buf) -> Result<HeartbeatSummary, String> {
    let mut summary = HeartbeatSummary {
        bytes: buf.remaining() as u64,
        ..Default::default()
    };
    while buf.has_remaining() {
        let (tag, wire_type) = decode_key(buf).map_err(|e| e.to_string())?;
        match wire_type {
            WireType::Varint => {
                let value = decode_varint(buf).map_err(|e| e.to_string())?;
                if tag == 2 {
                    summary.iteration_finished = value != 0;
                }
            }
            WireType::LengthDelimited => {
                let len = decode_varint(buf).map_err(|e| e.to_string())?;
                if len > buf.remaining() as u64 {
                    return Err("a field runs past the message".into());
                }
                buf.advance(len as usize);
                if tag == 1 {
                    summary.tasks += 1;
                }
            }
            WireType::SixtyFourBit | WireType::ThirtyTwoBit => {
                let len = if wire_type == WireType::SixtyFourBit {
                    8
                } else {
                    4
                };
                if len > buf.remaining() {
                    return Err("a field runs past the message".into());
                }
                buf.advance(len);
            }
            _ => return Err("group wire types are not used".into()),
        }
    }
    Ok(summary)
}

/// The tonic codec: prost for the request, [`scan`] for the response.
#[derive(Debug, Clone, Copy, Default)]
pub struct HeartbeatCodec;

pub struct RequestEncoder;
pub struct SummaryDecoder;

impl Codec for HeartbeatCodec {
    type Encode = ClientHeartbeatRequest;
    type Decode = HeartbeatSummary;
    type Encoder = RequestEncoder;
    type Decoder = SummaryDecoder;

    fn encoder(&mut self) -> RequestEncoder {
        RequestEncoder
    }

    fn decoder(&mut self) -> SummaryDecoder {
        SummaryDecoder
    }
}

impl Encoder for RequestEncoder {
    type Item = ClientHeartbeatRequest;
    type Error = Status;

    fn encode(&mut self, item: Self::Item, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.reserve(item.encoded_len());
        item.encode(dst)
            .map_err(|e| Status::internal(format!("encoding ClientHeartbeatRequest: {e}")))
    }
}

impl Decoder for SummaryDecoder {
    type Item = HeartbeatSummary;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<HeartbeatSummary>, Status> {
        scan(src)
            .map(Some)
            .map_err(|e| Status::internal(format!("malformed ClientHeartbeatResponse: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tfdata_proto::data::{ClientHeartbeatResponse, DataTransferServerInfo, TaskInfo};

    #[test]
    fn the_scan_counts_what_prost_encoded() {
        let response = ClientHeartbeatResponse {
            task_info: (0..3)
                .map(|i| TaskInfo {
                    worker_address: format!("127.0.0.{i}:1"),
                    transfer_servers: vec![DataTransferServerInfo {
                        protocol: "grpc".into(),
                        address: format!("127.0.0.{i}:1"),
                        ..Default::default()
                    }],
                    task_id: 1000 + i,
                    iteration_id: 2000,
                    ..Default::default()
                })
                .collect(),
            block_round: Some(7),
            iteration_finished: true,
            deployment_mode: 1,
            tfdata_iteration_clients: 0,
            tfdata_restores_awaited: 0,
            tfdata_awaited_receipts: Vec::new(),
        };
        let bytes = response.encode_to_vec();
        let summary = scan(&mut bytes.as_slice()).unwrap();
        assert_eq!(
            summary,
            HeartbeatSummary {
                tasks: 3,
                iteration_finished: true,
                bytes: bytes.len() as u64
            }
        );
        let empty = scan(
            &mut ClientHeartbeatResponse::default()
                .encode_to_vec()
                .as_slice(),
        );
        assert_eq!(empty.unwrap(), HeartbeatSummary::default());
    }

    #[test]
    fn a_truncated_response_is_an_error() {
        let response = ClientHeartbeatResponse {
            task_info: vec![TaskInfo {
                worker_address: "w:1".into(),
                ..Default::default()
            }],
            ..Default::default()
        };
        let bytes = response.encode_to_vec();
        for cut in 1..bytes.len() {
            assert!(
                scan(&mut &bytes[..cut]).is_err(),
                "cut at {cut} of {}",
                bytes.len()
            );
        }
    }
}
