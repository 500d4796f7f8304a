//! The ordered merge of a consumer's lanes and its reorder window.
//!
//! Element j of lane k has global position q = j*K + k; the merge always
//! gives the next element of the lane, among those not finished, whose next
//! q is smallest. Elements that arrive ahead of the merge point wait in the
//! window; each lane's stream may run ahead by its share of the window
//! ([`Merge::lane_credit`]), so the window's bound holds however the
//! workers' speeds differ, and a lane with nothing buffered always has
//! credit (the merge never deadlocks on it).

use std::collections::{BTreeMap, VecDeque};

use tfdata_core::{Error, Result};

/// One lane's state in the merge.
#[derive(Debug)]
struct LaneBuffer<E> {
    /// The lane index of the next element the merge gives out.
    next_out: i64,
    /// The lane index of the first element not received (a reopened
    /// stream starts here).
    received_to: i64,
    /// Received, not given out: elements `next_out..received_to`, with
    /// their payload bytes.
    queue: VecDeque<(E, u64)>,
    /// The lane's end of sequence arrived (after its last element).
    ended: bool,
}

/// What the merge has next.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Next<E> {
    /// The element at `index` of `lane`, with its payload bytes.
    Element {
        lane: u32,
        index: i64,
        element: E,
        bytes: u64,
    },
    /// The next element is `lane`'s, which has not arrived.
    Wait { lane: u32 },
    /// Every lane ended and was given out.
    Done,
}

#[derive(Debug)]
pub(crate) struct Merge<E> {
    lanes: BTreeMap<u32, LaneBuffer<E>>,
    buffered_elements: usize,
    buffered_bytes: u64,
    window_elements: usize,
    window_bytes: u64,
}

impl<E> Merge<E> {
    /// A merge of `starts` (lane, first index wanted, already ended) within
    /// a window of `window_elements` and `window_bytes`.
    pub(crate) fn new(
        starts: impl IntoIterator<Item = (u32, i64, bool)>,
        window_elements: usize,
        window_bytes: u64,
    ) -> Self {
        let lanes = starts
            .into_iter()
            .map(|(lane, start, ended)| {
                (
                    lane,
                    LaneBuffer {
                        next_out: start,
                        received_to: start,
                        queue: VecDeque::new(),
                        ended,
                    },
                )
            })
            .collect();
        Merge {
            lanes,
            buffered_elements: 0,
            buffered_bytes: 0,
            window_elements: window_elements.max(1),
            window_bytes: window_bytes.max(1),
        }
    }

    /// Each lane's stream credit: its share of the window (at least one
    /// element and byte).
    pub(crate) fn lane_credit(&self) -> (u64, u64) {
        let lanes = self.lanes.len().max(1);
        (
            (self.window_elements / lanes).max(1) as u64,
            (self.window_bytes / lanes as u64).max(1),
        )
    }

    /// The first index of `lane` not received: where its stream (re)opens.
    pub(crate) fn resume_index(&self, lane: u32) -> i64 {
        self.lanes.get(&lane).map_or(0, |l| l.received_to)
    }

    /// Elements and bytes in the window now.
    pub(crate) fn buffered(&self) -> (usize, u64) {
        (self.buffered_elements, self.buffered_bytes)
    }

    pub(crate) fn window_elements(&self) -> usize {
        self.window_elements
    }

    /// Elements of `lane` from index `first` arrived. Those received
    /// already (a reopened stream may start behind) are dropped; returns
    /// how many were kept. A gap (elements skipped) is a worker's bug and
    /// refused.
    pub(crate) fn accept(
        &mut self,
        lane: u32,
        first: i64,
        elements: impl IntoIterator<Item = (E, u64)>,
    ) -> Result<usize> {
        let Some(l) = self.lanes.get_mut(&lane) else {
            return Err(Error::Internal(format!(
                "elements of lane {lane}, not read here"
            )));
        };
        if first > l.received_to {
            return Err(Error::Internal(format!(
                "lane {lane}'s stream sent elements from index {first}, but index {} was not \
                 received",
                l.received_to
            )));
        }
        let mut kept = 0;
        for (i, (element, bytes)) in elements.into_iter().enumerate() {
            if first + i as i64 != l.received_to {
                continue;
            }
            l.queue.push_back((element, bytes));
            l.received_to += 1;
            self.buffered_elements += 1;
            self.buffered_bytes += bytes;
            kept += 1;
        }
        Ok(kept)
    }

    /// `lane`'s end of sequence arrived after its last element.
    pub(crate) fn end(&mut self, lane: u32) {
        if let Some(l) = self.lanes.get_mut(&lane) {
            l.ended = true;
        }
    }

    /// The lane the merge takes from next, if any: the smallest next q
    /// among lanes not finished (ended and given out).
    fn head(&self) -> Option<u32> {
        self.lanes
            .iter()
            .filter(|(_, l)| !(l.ended && l.queue.is_empty()))
            .min_by_key(|(lane, l)| (l.next_out, **lane))
            .map(|(lane, _)| *lane)
    }

    /// The next element in q order, or what holds it up.
    pub(crate) fn next(&mut self) -> Next<E> {
        let Some(lane) = self.head() else {
            return Next::Done;
        };
        let l = self.lanes.get_mut(&lane).expect("head is a lane");
        match l.queue.pop_front() {
            Some((element, bytes)) => {
                let index = l.next_out;
                l.next_out += 1;
                self.buffered_elements -= 1;
                self.buffered_bytes -= bytes;
                Next::Element {
                    lane,
                    index,
                    element,
                    bytes,
                }
            }
            None => Next::Wait { lane },
        }
    }

    /// Every lane ended and was given out.
    pub(crate) fn done(&self) -> bool {
        self.head().is_none()
    }

    /// The lane the merge waits on, if its next element has not arrived.
    pub(crate) fn waiting_on(&self) -> Option<u32> {
        self.head().filter(|lane| self.lanes[lane].queue.is_empty())
    }

    /// Elements and bytes of `lane` in the window (a reopened stream's
    /// credit is its share less these).
    pub(crate) fn lane_buffered(&self, lane: u32) -> (u64, u64) {
        self.lanes.get(&lane).map_or((0, 0), |l| {
            (l.queue.len() as u64, l.queue.iter().map(|(_, b)| *b).sum())
        })
    }

    /// Whether the next element is ready (without taking it).
    pub(crate) fn ready(&self) -> bool {
        match self.head() {
            Some(lane) => !self.lanes[&lane].queue.is_empty(),
            None => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(m: &mut Merge<&'static str>) -> Vec<&'static str> {
        let mut out = Vec::new();
        while let Next::Element { element, .. } = m.next() {
            out.push(element);
        }
        out
    }

    #[test]
    fn elements_come_out_in_global_position_order_whatever_the_arrival_order() {
        // K = 3, consumer 0 of 1: q = j*3 + k.
        let mut m = Merge::new([(0, 0, false), (1, 0, false), (2, 0, false)], 100, 1000);
        m.accept(2, 0, [("q2", 1), ("q5", 1)]).unwrap();
        assert_eq!(m.next(), Next::Wait { lane: 0 });
        m.accept(1, 0, [("q1", 1), ("q4", 1), ("q7", 1)]).unwrap();
        assert_eq!(m.next(), Next::Wait { lane: 0 });
        m.accept(0, 0, [("q0", 1)]).unwrap();
        assert_eq!(drain(&mut m), ["q0", "q1", "q2"]);
        assert_eq!(m.next(), Next::Wait { lane: 0 });
        m.accept(0, 1, [("q3", 1)]).unwrap();
        m.end(0);
        // Lane 0 ended: its slots stay empty; lanes 1 and 2 go on.
        assert_eq!(drain(&mut m), ["q3", "q4", "q5", "q7"]);
        assert_eq!(m.next(), Next::Wait { lane: 2 });
        m.end(2);
        assert_eq!(m.next(), Next::Wait { lane: 1 });
        m.end(1);
        assert_eq!(m.next(), Next::Done);
    }

    #[test]
    fn a_consumers_lanes_merge_by_their_own_global_positions() {
        // K = 4, consumer 1 of 2 reads lanes 1 and 3: q = 1, 3, 5, 7, ...
        let mut m = Merge::new([(1, 0, false), (3, 0, false)], 10, 10);
        m.accept(3, 0, [("q3", 0), ("q7", 0)]).unwrap();
        m.accept(1, 0, [("q1", 0), ("q5", 0)]).unwrap();
        assert_eq!(drain(&mut m), ["q1", "q3", "q5", "q7"]);
    }

    #[test]
    fn a_reopened_stream_repeats_nothing_and_a_gap_is_refused() {
        let mut m = Merge::new([(0, 5, false)], 10, 10);
        assert_eq!(m.resume_index(0), 5);
        assert_eq!(m.accept(0, 5, [("a", 1), ("b", 1)]).unwrap(), 2);
        assert_eq!(m.resume_index(0), 7);
        // A stream reopened behind: 5 and 6 again, then 7.
        assert_eq!(m.accept(0, 5, [("a", 1), ("b", 1), ("c", 1)]).unwrap(), 1);
        assert_eq!(drain(&mut m), ["a", "b", "c"]);
        assert!(m.accept(0, 9, [("e", 1)]).is_err());
    }

    #[test]
    fn the_window_is_shared_out_and_counted() {
        let mut m: Merge<u8> = Merge::new((0..4).map(|k| (k, 0, false)), 4096, 256 << 20);
        assert_eq!(m.lane_credit(), (1024, 64 << 20));
        m.accept(1, 0, [(1, 100), (2, 50)]).unwrap();
        m.accept(2, 0, [(3, 10)]).unwrap();
        assert_eq!(m.buffered(), (3, 160));
        assert!(!m.ready());
        m.accept(0, 0, [(0, 5)]).unwrap();
        assert!(m.ready());
        assert!(matches!(
            m.next(),
            Next::Element {
                lane: 0,
                bytes: 5,
                ..
            }
        ));
        assert!(matches!(
            m.next(),
            Next::Element {
                lane: 1,
                bytes: 100,
                ..
            }
        ));
        assert_eq!(m.buffered(), (2, 60));
        // More lanes than window elements: each still gets one.
        let tiny: Merge<u8> = Merge::new((0..8).map(|k| (k, 0, false)), 4, 2);
        assert_eq!(tiny.lane_credit(), (1, 1));
    }

    #[test]
    fn lanes_that_ended_before_a_restore_are_finished() {
        let mut m: Merge<u8> = Merge::new([(0, 3, true), (1, 2, false)], 10, 10);
        assert_eq!(m.next(), Next::Wait { lane: 1 });
        m.end(1);
        assert_eq!(m.next(), Next::Done);
    }
}
