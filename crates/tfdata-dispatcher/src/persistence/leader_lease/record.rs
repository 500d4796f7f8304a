//! The lease record: what the lease object (or file) holds, as a small JSON
//! document, and its strict decoding.
//!
//! JSON rather than a protobuf: operators read it (`aws s3 cp … -`,
//! `cat`) to see who leads, and it is written a few times per lease
//! duration, so its size does not matter. Decoding is strict: every field
//! must be there with its type, and anything else is a [`Error::DataLoss`]
//! naming the location, never a default — a record the lease cannot
//! understand must not be taken over (see the module docs of
//! [`super`]).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tfdata_core::{Error, Result};

/// The version of this record layout, checked when decoding.
pub const RECORD_FORMAT: u64 = 1;

/// Largest lease record read, in bytes. A real record is about 300 bytes;
/// anything larger is not one, and is refused before it is parsed.
pub const MAX_RECORD_BYTES: usize = 16 * 1024;

/// Longest holder id or address accepted in a record, in bytes.
const MAX_FIELD_BYTES: usize = 1024;

/// One state of the lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRecord {
    /// Which process holds it: unique per process (see
    /// [`super::LeaderLease::new`]).
    pub holder: String,
    /// The address clients and standbys can reach the holder at (its gRPC
    /// `host:port`), for following the leader.
    pub address: String,
    /// The fence: strictly increasing across holders. A takeover writes
    /// the previous generation + 1; renewals keep it.
    pub generation: u64,
    /// How many times the holder has renewed this generation. Standbys
    /// watch `(generation, renewals)` change; a value that stays the same
    /// for the lease duration on their own clock is an expired lease.
    pub renewals: u64,
    /// The lease duration the holder runs with, in milliseconds
    /// (informational: every contender applies its own configured duration).
    pub duration_ms: u64,
    /// The holder's wall clock at the renewal, in milliseconds since the
    /// Unix epoch. For people reading the record only: expiry never
    /// compares wall clocks.
    pub renewed_at_unix_ms: u64,
}

impl LeaseRecord {
    /// A record for `holder` at `generation` / `renewals`, stamped with the
    /// local wall clock.
    pub fn new(
        holder: &str,
        address: &str,
        generation: u64,
        renewals: u64,
        duration: Duration,
    ) -> Self {
        let now_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        Self {
            holder: holder.to_string(),
            address: address.to_string(),
            generation,
            renewals,
            duration_ms: u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
            renewed_at_unix_ms: now_ms,
        }
    }

    /// The JSON bytes stored.
    pub fn encode(&self) -> Vec<u8> {
        let value = json!({
            "format": RECORD_FORMAT,
            "holder": self.holder,
            "address": self.address,
            "generation": self.generation,
            "renewals": self.renewals,
            "duration_ms": self.duration_ms,
            "renewed_at_unix_ms": self.renewed_at_unix_ms,
        });
        // Serialising a `Value` of strings and integers cannot fail.
        serde_json::to_vec_pretty(&value).unwrap_or_default()
    }

    /// Decodes the bytes read from `location` (a URL or path, for the
    /// error).
    pub fn decode(location: &str, bytes: &[u8]) -> Result<Self> {
        let bad = |reason: String| Error::DataLoss {
            location: location.to_string(),
            reason: format!(
                "not a valid dispatcher leader lease record: {reason}; no dispatcher will \
                 take it over. If no dispatcher is running on this work_dir, delete it \
                 (generations then start again from 1)"
            ),
        };
        if bytes.len() > MAX_RECORD_BYTES {
            return Err(bad(format!(
                "{} bytes, more than the {MAX_RECORD_BYTES} a record can have",
                bytes.len()
            )));
        }
        let value: Value =
            serde_json::from_slice(bytes).map_err(|e| bad(format!("not JSON ({e})")))?;
        let Value::Object(fields) = value else {
            return Err(bad("not a JSON object".to_string()));
        };
        let number = |name: &str| -> Result<u64> {
            fields
                .get(name)
                .and_then(Value::as_u64)
                .ok_or_else(|| bad(format!("field {name:?} missing or not an unsigned integer")))
        };
        let text = |name: &str| -> Result<String> {
            let s = fields
                .get(name)
                .and_then(Value::as_str)
                .ok_or_else(|| bad(format!("field {name:?} missing or not a string")))?;
            if s.len() > MAX_FIELD_BYTES {
                return Err(bad(format!(
                    "field {name:?} is {} bytes, more than {MAX_FIELD_BYTES}",
                    s.len()
                )));
            }
            Ok(s.to_string())
        };
        let format = number("format")?;
        if format != RECORD_FORMAT {
            return Err(bad(format!(
                "format {format}, this dispatcher reads format {RECORD_FORMAT}"
            )));
        }
        let record = Self {
            holder: text("holder")?,
            address: text("address")?,
            generation: number("generation")?,
            renewals: number("renewals")?,
            duration_ms: number("duration_ms")?,
            renewed_at_unix_ms: number("renewed_at_unix_ms")?,
        };
        if record.holder.is_empty() {
            return Err(bad("empty holder".to_string()));
        }
        if record.generation == 0 {
            return Err(bad("generation 0 (generations start at 1)".to_string()));
        }
        Ok(record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip() {
        let record = LeaseRecord::new("h#1", "10.0.0.1:5050", 7, 3, Duration::from_secs(4));
        assert_eq!(record.duration_ms, 4000);
        let decoded = LeaseRecord::decode("x", &record.encode()).unwrap();
        assert_eq!(decoded, record);
    }

    #[test]
    fn anything_else_is_data_loss_naming_the_location() {
        let good = LeaseRecord::new("h", "a", 1, 0, Duration::from_secs(1)).encode();
        let text = String::from_utf8(good).unwrap();
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (b"".to_vec(), "not JSON"),
            (b"\xff\xfe".to_vec(), "not JSON"),
            (b"[1,2]".to_vec(), "not a JSON object"),
            (
                text.replace("\"generation\": 1", "\"generation\": -1")
                    .into_bytes(),
                "\"generation\"",
            ),
            (
                text.replace("\"generation\": 1", "\"generation\": 0")
                    .into_bytes(),
                "generation 0",
            ),
            (
                text.replace("\"format\": 1", "\"format\": 2").into_bytes(),
                "format 2",
            ),
            (
                text.replace("\"holder\": \"h\"", "\"holder\": 5")
                    .into_bytes(),
                "\"holder\"",
            ),
            (
                text.replace("\"holder\": \"h\"", "\"holder\": \"\"")
                    .into_bytes(),
                "empty holder",
            ),
            (vec![b' '; MAX_RECORD_BYTES + 1], "more than"),
            (
                format!("{{\"holder\": \"{}\"}}", "x".repeat(2000)).into_bytes(),
                "\"format\"",
            ),
        ];
        for (bytes, needle) in cases {
            let err = LeaseRecord::decode("s3://b/w/leader_lease", &bytes).unwrap_err();
            assert!(matches!(err, Error::DataLoss { .. }), "{err}");
            let msg = err.to_string();
            assert!(msg.contains("s3://b/w/leader_lease"), "{msg}");
            assert!(msg.contains(needle), "{needle}: {msg}");
        }
    }
}
