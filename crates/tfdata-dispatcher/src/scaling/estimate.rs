//! TensorFlow's estimate of the workers needed, as pure functions
//! (`tensorflow/core/data/service/auto_scaler.cc`: `AutoScaler` per
//! iteration, `MultipleIterationsAutoScaler` over iterations). The
//! dispatcher's `load` feeds them from heartbeats; simulations (the
//! `tfdata-bench` model) call them with their own rates, so both compute
//! the same number.

/// The estimate moves at most this factor (and this many workers) above
/// the current workers in one update, and never past
/// [`MAX_OPTIMAL_WORKERS`]: TensorFlow's limits, so that target processing
/// times converge (a trainer fed by few workers reports a time that asks
/// for too many) before the estimate goes far.
pub const MAX_SCALE_FACTOR: i64 = 4;
pub const MAX_SCALE_STEP: i64 = 500;
pub const MAX_OPTIMAL_WORKERS: i64 = 100_000;

/// One iteration's estimate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IterationEstimate {
    /// The readers' summed consumption rate (elements/s), outliers replaced.
    pub consumption_per_second: f64,
    /// The mean production rate of one worker (elements/s), outliers replaced.
    pub worker_throughput_per_second: f64,
    /// `ceil(consumption / throughput)`, at least 1 (and at most
    /// [`MAX_OPTIMAL_WORKERS`]).
    pub workers: i64,
}

/// TensorFlow's `AutoScaler::GetOptimalNumberOfWorkers` for one iteration:
/// `consumption_rates` (per reader, 1 / target processing time) and
/// `worker_rates` (per worker, 1 / its last processing time), in
/// elements/s. `None` without both, or with no production at all.
pub fn iteration_estimate(
    consumption_rates: &[f64],
    worker_rates: &[f64],
) -> Option<IterationEstimate> {
    if consumption_rates.is_empty() || worker_rates.is_empty() {
        return None;
    }
    let consumption_per_second: f64 = without_outliers(consumption_rates).iter().sum();
    let kept = without_outliers(worker_rates);
    let worker_throughput_per_second = kept.iter().sum::<f64>() / kept.len() as f64;
    if !(worker_throughput_per_second > 0.0 && consumption_per_second.is_finite()) {
        return None;
    }
    let workers = (consumption_per_second / worker_throughput_per_second).ceil();
    Some(IterationEstimate {
        consumption_per_second,
        worker_throughput_per_second,
        workers: (workers.min(MAX_OPTIMAL_WORKERS as f64) as i64).max(1),
    })
}

/// TensorFlow's `UpdateOptimalNumberOfWorkersMetric`: the largest of the
/// iterations' estimates (already taken by the caller), capped to
/// min(4 × `current`, `current` + 500) when above it, and to 100,000.
/// `current` below 1 counts as 1 (TensorFlow updates nothing then).
pub fn bounded(estimate: i64, current: i64) -> i64 {
    let current = current.max(1);
    let ceiling = current
        .saturating_mul(MAX_SCALE_FACTOR)
        .min(current.saturating_add(MAX_SCALE_STEP));
    estimate.min(ceiling).min(MAX_OPTIMAL_WORKERS)
}

/// `rates` with every value further than one standard deviation (n - 1)
/// from the mean replaced by the median (the upper one of an even count),
/// as TensorFlow's `ReplaceOutliers` does: one worker stalled on a slow
/// disk, or one reader in a burst, should not swing the estimate.
pub fn without_outliers(rates: &[f64]) -> Vec<f64> {
    // One or two values are always within one deviation of their mean.
    if rates.len() < 3 {
        return rates.to_vec();
    }
    let n = rates.len() as f64;
    let mean = rates.iter().sum::<f64>() / n;
    let variance = rates.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let deviation = variance.sqrt();
    let mut sorted = rates.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    rates
        .iter()
        .map(|&r| {
            if (r - mean).abs() <= deviation {
                r
            } else {
                median
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outliers_are_replaced_by_the_median() {
        assert_eq!(without_outliers(&[1.0, 100.0]), vec![1.0, 100.0]);
        let kept = without_outliers(&[10.0, 11.0, 9.0, 10.0, 1000.0]);
        assert_eq!(kept, vec![10.0, 11.0, 9.0, 10.0, 10.0]);
        // An even count: the upper median, as TensorFlow's sorted[n / 2].
        assert_eq!(
            without_outliers(&[1.0, 2.0, 3.0, 100.0]),
            vec![1.0, 2.0, 3.0, 3.0]
        );
    }

    #[test]
    fn the_estimate_moves_in_bounded_steps() {
        assert_eq!(bounded(3, 1), 3);
        assert_eq!(bounded(50, 1), 4);
        assert_eq!(bounded(50, 0), 4);
        assert_eq!(bounded(5_000, 1_000), 1_500);
        assert_eq!(bounded(1_000_000, 90_000), 90_500);
        assert_eq!(bounded(1_000_000, 99_800), MAX_OPTIMAL_WORKERS);
    }

    #[test]
    fn one_iteration_is_consumption_over_mean_throughput_rounded_up() {
        // Three readers at 100/s, workers at 40/s and one stalled at 1/s:
        // the stalled one is replaced by the median (40).
        let e = iteration_estimate(&[100.0, 100.0, 100.0], &[40.0, 40.0, 40.0, 1.0]).unwrap();
        assert_eq!(e.consumption_per_second, 300.0);
        assert_eq!(e.worker_throughput_per_second, 40.0);
        assert_eq!(e.workers, 8);
        // A fast pipeline under a slow trainer: one.
        assert_eq!(iteration_estimate(&[1.0], &[1000.0]).unwrap().workers, 1);
        assert!(iteration_estimate(&[], &[1.0]).is_none());
        assert!(iteration_estimate(&[1.0], &[]).is_none());
    }
}
