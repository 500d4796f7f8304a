//! The cross-trainer cache (spec §3.11): trainers sharing a job read one
//! sliding window of the task's elements, each with its own cursor. A trainer
//! reading past the newest cached element extends the window by one element
//! (one extender at a time); the oldest elements are evicted once the window
//! exceeds its byte budget, and a trainer whose cursor fell out of the window
//! jumps to the oldest cached element (so slow trainers may miss data).

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use prost::Message;
use tfdata_core::{Error, Result};
use tfdata_proto::data::get_element_response::Element as Payload;

use super::Next;
use crate::producer::Producer;

/// One cached element and its encoded size.
struct Cached {
    payload: Payload,
    bytes: usize,
}

struct Window {
    items: VecDeque<Cached>,
    /// Global index of `items[0]`.
    first: u64,
    bytes: usize,
    cursors: HashMap<String, u64>,
}

pub struct CrossTrainerCache {
    budget_bytes: usize,
    window: Mutex<Window>,
    /// Held by the one trainer extending the window.
    extender: tokio::sync::Mutex<()>,
}

fn payload_size(p: &Payload) -> usize {
    match p {
        Payload::Compressed(c) => c.encoded_len(),
        Payload::Uncompressed(u) => u.encoded_len(),
    }
}

impl CrossTrainerCache {
    pub fn new(budget_bytes: u64) -> Self {
        CrossTrainerCache {
            budget_bytes: usize::try_from(budget_bytes).unwrap_or(usize::MAX),
            window: Mutex::new(Window {
                items: VecDeque::new(),
                first: 0,
                bytes: 0,
                cursors: HashMap::new(),
            }),
            extender: tokio::sync::Mutex::new(()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Window> {
        self.window.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The cached element at the trainer's cursor, advancing it.
    fn take_cached(&self, trainer: &str) -> Option<(Payload, u64)> {
        let mut w = self.lock();
        let first = w.first;
        let len = w.items.len() as u64;
        let cursor = w.cursors.entry(trainer.to_string()).or_insert(first);
        if *cursor < first {
            *cursor = first; // fell out of the window
        }
        if *cursor < first + len {
            let index = *cursor;
            *cursor += 1;
            let payload = w.items[(index - first) as usize].payload.clone();
            Some((payload, index))
        } else {
            None
        }
    }

    pub async fn get(&self, producer: &Producer, trainer_id: &str) -> Result<Next> {
        if trainer_id.is_empty() {
            return Err(Error::InvalidArgument(
                "reading a cross-trainer-cache task needs a trainer_id".into(),
            ));
        }
        loop {
            if let Some((payload, index)) = self.take_cached(trainer_id) {
                return Ok(Next::Element {
                    payload,
                    index: index as i64,
                });
            }
            let _extending = self.extender.lock().await;
            // Another trainer may have extended the window while we waited.
            if let Some((payload, index)) = self.take_cached(trainer_id) {
                return Ok(Next::Element {
                    payload,
                    index: index as i64,
                });
            }
            let Some(payload) = producer.pull(None).await? else {
                continue;
            };
            let size = payload_size(&payload);
            if size > self.budget_bytes {
                return Err(Error::InvalidArgument(format!(
                    "an element of {size} bytes does not fit the cross-trainer cache of {} bytes \
                     (cross_trainer_cache_size_bytes)",
                    self.budget_bytes
                )));
            }
            let mut w = self.lock();
            w.items.push_back(Cached {
                payload,
                bytes: size,
            });
            w.bytes += size;
            while w.bytes > self.budget_bytes {
                if let Some(evicted) = w.items.pop_front() {
                    w.bytes -= evicted.bytes;
                    w.first += 1;
                }
            }
        }
    }
}
