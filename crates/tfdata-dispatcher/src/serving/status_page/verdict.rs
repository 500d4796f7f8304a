//! Where the bottleneck is, in one plain word, from what readers and
//! workers report (docs/operations.md, "How the verdict is decided", states the rules):
//!
//! 1. No reader has reported its pace: **not enough data**.
//! 2. The readers' mean starvation (the fraction of time the trainer waited
//!    in `next()`) is under [`STARVED_RATIO`]: the input keeps up and the
//!    trainer sets the pace: **trainer-bound**.
//! 3. The readers are starved, and no busy tfdata worker reports its
//!    buffers (TensorFlow workers do not): **not enough data**.
//! 4. The readers are starved while the workers' pipelines spend at least
//!    [`BUFFERS_FULL_RATIO`] of their time blocked on full buffers, or
//!    their element streams wait at least [`CREDIT_WAIT_PER_SECOND`] for
//!    readers' credit: elements are made but do not reach the trainer fast
//!    enough: **transfer-bound**.
//! 5. Otherwise the readers are starved while the pipelines run flat out:
//!    **add workers** (the demand estimate says how many).
//!
//! The rules read only [`Evidence`], so they are tested apart from the
//! dispatcher; [`Evidence::gather`] takes it from an overview.

use crate::overview::{Demand, ReaderOverview, WorkerOverview};

/// Readers waiting this fraction of their time in `next()` (or more), on
/// average, are starved. A trainer fed through a prefetch buffer waits
/// close to none of its time; a tenth is input the trainer notices.
pub const STARVED_RATIO: f64 = 0.10;
/// Workers' pipelines blocked on a full buffer this fraction of their time
/// (or more), on average, make elements faster than they leave.
pub const BUFFERS_FULL_RATIO: f64 = 0.5;
/// Element streams waiting this long per second (or more) for readers'
/// credit, on average per worker: the way back to the reader is slow.
pub const CREDIT_WAIT_PER_SECOND: f64 = 0.5;

/// The kinds of verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bottleneck {
    AddWorkers,
    TransferBound,
    TrainerBound,
    NotEnoughData,
}

impl Bottleneck {
    /// The words the page shows.
    pub fn label(self) -> &'static str {
        match self {
            Bottleneck::AddWorkers => "add workers",
            Bottleneck::TransferBound => "transfer-bound",
            Bottleneck::TrainerBound => "trainer-bound",
            Bottleneck::NotEnoughData => "not enough data",
        }
    }

    /// The key in `/api/status` (and the page's CSS class).
    pub fn key(self) -> &'static str {
        match self {
            Bottleneck::AddWorkers => "add_workers",
            Bottleneck::TransferBound => "transfer_bound",
            Bottleneck::TrainerBound => "trainer_bound",
            Bottleneck::NotEnoughData => "not_enough_data",
        }
    }
}

/// The numbers a verdict is made from.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Evidence {
    /// Readers whose starvation is known (tfdata readers, after about a
    /// second of reading).
    pub readers_reporting: usize,
    /// Mean and largest starvation over them.
    pub starvation_mean: f64,
    pub starvation_max: f64,
    /// Live tfdata workers with tasks whose rates are known.
    pub workers_reporting: usize,
    /// Mean over them of the fraction of pipeline time blocked on a full
    /// buffer.
    pub buffer_full_mean: f64,
    /// Mean over them of the seconds per second their streams waited for
    /// credit.
    pub credit_wait_mean: f64,
    pub live_workers: usize,
    /// The demand estimate and whether it is measured.
    pub optimal_workers: i64,
    pub demand_measured: bool,
}

impl Evidence {
    /// The evidence in an overview's workers, readers and demand.
    pub fn gather(workers: &[WorkerOverview], readers: &[ReaderOverview], demand: &Demand) -> Self {
        let starvation: Vec<f64> = readers
            .iter()
            .filter_map(|r| r.rates.map(|r| r.starvation_ratio))
            .filter(|s| s.is_finite())
            .collect();
        // Idle workers (no task) have nothing to be blocked on: they would
        // pull the mean toward "add workers" without making anything.
        let busy: Vec<_> = workers
            .iter()
            .filter(|w| !w.lost && w.tfdata && w.tasks > 0)
            .filter_map(|w| w.rates)
            .collect();
        Evidence {
            readers_reporting: starvation.len(),
            starvation_mean: mean(starvation.iter().copied()),
            starvation_max: starvation.iter().copied().fold(0.0, f64::max),
            workers_reporting: busy.len(),
            buffer_full_mean: mean(busy.iter().map(|r| r.buffer_full_ratio)),
            credit_wait_mean: mean(busy.iter().map(|r| r.credit_wait_per_second)),
            live_workers: workers.iter().filter(|w| !w.lost).count(),
            optimal_workers: demand.optimal_workers,
            demand_measured: demand.measured,
        }
    }

    fn starved(&self) -> bool {
        self.starvation_mean >= STARVED_RATIO
    }

    fn buffers_full(&self) -> bool {
        self.buffer_full_mean >= BUFFERS_FULL_RATIO
    }

    fn waiting_on_credit(&self) -> bool {
        self.credit_wait_mean >= CREDIT_WAIT_PER_SECOND
    }
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values
        .filter(|v| v.is_finite())
        .fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 { 0.0 } else { sum / n as f64 }
}

/// A verdict: its kind, a sentence, and the comparisons behind it.
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    pub bottleneck: Bottleneck,
    pub headline: String,
    /// Each number the verdict rests on, against its threshold.
    pub reasons: Vec<String>,
    pub evidence: Evidence,
}

/// Applies the rules in the module docs to `evidence`.
pub fn judge(evidence: &Evidence) -> Verdict {
    let e = evidence;
    let mut reasons = Vec::new();
    if e.readers_reporting == 0 {
        return verdict(
            Bottleneck::NotEnoughData,
            "No reader has reported its pace yet. tfdata readers report their \
             starvation about a second after they start reading; TensorFlow \
             readers do not report it."
                .into(),
            reasons,
            e,
        );
    }
    reasons.push(starvation_reason(e));
    if e.workers_reporting > 0 {
        reasons.push(buffer_reason(e));
        reasons.push(credit_reason(e));
    }
    reasons.push(demand_reason(e));
    let (bottleneck, headline) = if !e.starved() {
        (
            Bottleneck::TrainerBound,
            "Trainer-bound: the readers rarely wait for data. The input keeps up and \
             the trainer sets the pace; more workers would not speed it up."
                .to_string(),
        )
    } else if e.workers_reporting == 0 {
        (
            Bottleneck::NotEnoughData,
            "The readers wait for data, but no busy tfdata worker reports its buffers \
             (TensorFlow workers do not), so whether workers or the transfer hold them \
             back is unknown."
                .to_string(),
        )
    } else if e.buffers_full() || e.waiting_on_credit() {
        (
            Bottleneck::TransferBound,
            "Transfer-bound: the readers wait for elements the workers have already \
             made. Look at the network between workers and trainers and at the \
             trainers' hosts; more workers would not help."
                .to_string(),
        )
    } else {
        let how_many = if e.demand_measured && e.optimal_workers > e.live_workers as i64 {
            format!(
                " The demand estimate is {} workers ({} live).",
                e.optimal_workers, e.live_workers
            )
        } else {
            String::new()
        };
        (
            Bottleneck::AddWorkers,
            format!(
                "Add workers: the readers wait for data while the workers' pipelines \
                 run flat out.{how_many}"
            ),
        )
    };
    verdict(bottleneck, headline, reasons, e)
}

fn verdict(
    bottleneck: Bottleneck,
    headline: String,
    reasons: Vec<String>,
    evidence: &Evidence,
) -> Verdict {
    Verdict {
        bottleneck,
        headline,
        reasons,
        evidence: evidence.clone(),
    }
}

fn percent(ratio: f64) -> String {
    format!("{:.1}%", ratio * 100.0)
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn starvation_reason(e: &Evidence) -> String {
    format!(
        "Readers waited {} of their time in next() (mean of {}; the most starved {}): \
         {} the {} that counts as starved.",
        percent(e.starvation_mean),
        plural(e.readers_reporting, "reader", "readers"),
        percent(e.starvation_max),
        if e.starved() { "at or over" } else { "under" },
        percent(STARVED_RATIO),
    )
}

fn buffer_reason(e: &Evidence) -> String {
    format!(
        "Workers' pipelines were blocked on a full buffer {} of their time (mean of {}): \
         {} the {} that counts as full.",
        percent(e.buffer_full_mean),
        plural(e.workers_reporting, "busy worker", "busy workers"),
        if e.buffers_full() {
            "at or over"
        } else {
            "under"
        },
        percent(BUFFERS_FULL_RATIO),
    )
}

fn credit_reason(e: &Evidence) -> String {
    format!(
        "Element streams waited {:.2} s per second for readers' credit (mean per worker): \
         {} the {CREDIT_WAIT_PER_SECOND} s/s that counts as waiting.",
        e.credit_wait_mean,
        if e.waiting_on_credit() {
            "at or over"
        } else {
            "under"
        },
    )
}

fn demand_reason(e: &Evidence) -> String {
    if e.demand_measured {
        format!(
            "Demand estimate: {} for {} live (from readers' consumption and workers' \
             production rates).",
            plural(e.optimal_workers.max(0) as usize, "worker", "workers"),
            e.live_workers,
        )
    } else {
        format!(
            "Demand estimate: not measured yet (no worker reports a processing time for \
             an iteration readers read); holding at {} live.",
            e.live_workers
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::overview::{ReaderRates, WorkerRates};
    use tfdata_core::{IterationClientId, IterationId};

    fn starved_readers(starvation: f64) -> Evidence {
        Evidence {
            readers_reporting: 2,
            starvation_mean: starvation,
            starvation_max: starvation,
            workers_reporting: 3,
            live_workers: 3,
            optimal_workers: 3,
            demand_measured: true,
            ..Default::default()
        }
    }

    #[test]
    fn no_reader_reporting_is_not_enough_data() {
        let v = judge(&Evidence {
            workers_reporting: 4,
            buffer_full_mean: 0.9,
            ..Default::default()
        });
        assert_eq!(v.bottleneck, Bottleneck::NotEnoughData);
        assert!(v.headline.contains("No reader"), "{}", v.headline);
        assert!(v.reasons.is_empty());
    }

    #[test]
    fn readers_that_rarely_wait_are_trainer_bound() {
        let mut e = starved_readers(0.02);
        e.buffer_full_mean = 0.95;
        let v = judge(&e);
        assert_eq!(v.bottleneck, Bottleneck::TrainerBound);
        assert!(v.reasons[0].contains("2.0%") && v.reasons[0].contains("under"));
        assert!(v.reasons[1].contains("95.0%"), "{:?}", v.reasons);
        // Just under the threshold is still trainer-bound.
        e.starvation_mean = STARVED_RATIO - 1e-9;
        assert_eq!(judge(&e).bottleneck, Bottleneck::TrainerBound);
    }

    #[test]
    fn starved_readers_and_busy_pipelines_ask_for_workers() {
        let mut e = starved_readers(0.8);
        e.buffer_full_mean = 0.05;
        e.credit_wait_mean = 0.01;
        e.optimal_workers = 9;
        let v = judge(&e);
        assert_eq!(v.bottleneck, Bottleneck::AddWorkers);
        assert!(
            v.headline.contains("9 workers (3 live)"),
            "the demand estimate is in the headline: {}",
            v.headline
        );
        assert_eq!(v.reasons.len(), 4, "{:?}", v.reasons);
        assert!(v.reasons[0].contains("80.0%") && v.reasons[0].contains("at or over"));
        assert!(
            v.reasons[3].contains("9 workers for 3 live"),
            "{:?}",
            v.reasons
        );
        // Exactly at the threshold counts as starved.
        e.starvation_mean = STARVED_RATIO;
        assert_eq!(judge(&e).bottleneck, Bottleneck::AddWorkers);
    }

    #[test]
    fn starved_readers_and_full_buffers_are_transfer_bound() {
        let mut e = starved_readers(0.6);
        e.buffer_full_mean = BUFFERS_FULL_RATIO;
        assert_eq!(judge(&e).bottleneck, Bottleneck::TransferBound);
        e.buffer_full_mean = 0.1;
        e.credit_wait_mean = 2.5;
        let v = judge(&e);
        assert_eq!(v.bottleneck, Bottleneck::TransferBound);
        assert!(
            v.reasons[2].contains("2.50 s per second"),
            "{:?}",
            v.reasons
        );
    }

    #[test]
    fn starved_readers_without_worker_figures_are_not_enough_data() {
        let mut e = starved_readers(0.7);
        e.workers_reporting = 0;
        let v = judge(&e);
        assert_eq!(v.bottleneck, Bottleneck::NotEnoughData);
        assert!(v.headline.contains("TensorFlow workers"), "{}", v.headline);
        // The starvation and the demand are still shown.
        assert_eq!(v.reasons.len(), 2, "{:?}", v.reasons);
    }

    #[test]
    fn an_unmeasured_demand_says_so() {
        let mut e = starved_readers(0.5);
        e.demand_measured = false;
        let v = judge(&e);
        assert_eq!(v.bottleneck, Bottleneck::AddWorkers);
        assert!(!v.headline.contains("demand estimate"), "{}", v.headline);
        assert!(v.reasons[3].contains("not measured"), "{:?}", v.reasons);
    }

    fn worker(lost: bool, tfdata: bool, tasks: usize, full: f64) -> WorkerOverview {
        WorkerOverview {
            address: "w:1".into(),
            tags: vec![],
            lost,
            tfdata,
            tasks,
            last_heartbeat_age_micros: Some(0),
            rates: Some(WorkerRates {
                elements_per_second: 10.0,
                bytes_per_second: 80.0,
                buffer_full_ratio: full,
                credit_wait_per_second: full / 2.0,
            }),
            totals: None,
            processing_time_nsec: None,
            heartbeat_warning: None,
        }
    }

    fn reader(client: i64, starvation: Option<f64>) -> ReaderOverview {
        ReaderOverview {
            client: IterationClientId(client),
            iteration: IterationId(1),
            target_processing_time_nsec: 0.0,
            rates: starvation.map(|s| ReaderRates {
                starvation_ratio: s,
                elements_per_second: 5.0,
                bytes_per_second: 40.0,
            }),
            totals: None,
        }
    }

    #[test]
    fn evidence_counts_busy_live_tfdata_workers_and_rated_readers() {
        let workers = [
            worker(false, true, 1, 0.2),
            worker(false, true, 2, 0.4),
            worker(true, true, 1, 1.0),   // lost
            worker(false, false, 1, 1.0), // TensorFlow's (no rates in practice)
            worker(false, true, 0, 1.0),  // idle
        ];
        let readers = [
            reader(1, Some(0.5)),
            reader(2, Some(0.1)),
            reader(3, None),
            reader(4, Some(f64::NAN)),
        ];
        let demand = Demand {
            optimal_workers: 7,
            measured: true,
            iterations: vec![],
        };
        let e = Evidence::gather(&workers, &readers, &demand);
        assert_eq!(e.readers_reporting, 2);
        assert!((e.starvation_mean - 0.3).abs() < 1e-12, "{e:?}");
        assert_eq!(e.starvation_max, 0.5);
        assert_eq!(e.workers_reporting, 2);
        assert!((e.buffer_full_mean - 0.3).abs() < 1e-12, "{e:?}");
        assert!((e.credit_wait_mean - 0.15).abs() < 1e-12, "{e:?}");
        assert_eq!(e.live_workers, 4);
        assert_eq!((e.optimal_workers, e.demand_measured), (7, true));
    }

    #[test]
    fn no_figures_gather_to_zeroes() {
        let e = Evidence::gather(&[], &[], &Demand::default());
        assert_eq!(e, Evidence::default());
    }
}
