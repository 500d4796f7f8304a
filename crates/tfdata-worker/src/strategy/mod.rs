//! How a task serves its elements, each strategy borrowing the task's
//! [`Producer`](crate::producer::Producer):
//!
//! * [`fcfs`]: first come, first served: every `GetElement` call and element
//!   stream takes the next elements in arrival order (the default);
//! * [`round_robin`]: coordinated reads, consumer `c` of `n` gets the `c`-th
//!   element of each round;
//! * [`cross_trainer`]: the sliding-window cache trainers sharing a job read.
//!
//! This module holds what they all answer with; it uses none of them.

use tfdata_proto::data::get_element_response::Element as Payload;

/// What `GetElement` gets from a task.
pub enum Next {
    Element {
        payload: Payload,
        index: i64,
    },
    /// No element buffered and the caller allowed skipping.
    Skip,
    /// Sticky: every later call gets it too.
    EndOfSequence {
        first: bool,
    },
}

pub mod cross_trainer;
pub mod fcfs;
pub mod round_robin;
