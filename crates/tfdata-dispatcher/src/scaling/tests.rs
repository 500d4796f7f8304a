use super::*;

const PERIOD: Duration = Duration::from_secs(5);

fn at(periods: u32) -> Duration {
    PERIOD * periods
}

fn starving(live: i64, estimate: Option<i64>, starvation: f64, wait: f64) -> Observation {
    Observation {
        live_workers: live,
        estimate,
        readers: 1,
        starvation,
        wait_seconds_per_element: wait,
        consumption_per_second: 100.0,
    }
}

/// A closed loop: `demand` elements/s wanted by the readers, each worker
/// makes `per_worker` elements/s, and at most `useful` workers add
/// anything (a bottleneck elsewhere past that). What the dispatcher would
/// observe with `live` workers.
fn workload(live: i64, demand: f64, per_worker: f64, useful: i64) -> Observation {
    let capacity = live.min(useful) as f64 * per_worker;
    let consumed = demand.min(capacity).max(1e-9);
    let starvation = (1.0 - consumed / demand).max(0.0);
    // TensorFlow's estimate, bounded like `load::bounded`.
    let estimate = ((demand / per_worker).ceil() as i64)
        .min((live.max(1) * 4).min(live.max(1) + 500))
        .max(1);
    Observation {
        live_workers: live,
        estimate: Some(estimate),
        readers: 1,
        starvation,
        wait_seconds_per_element: starvation / consumed,
        consumption_per_second: demand,
    }
}

/// Runs the controller for `periods` on `workload`, workers following the
/// target at once. Returns the targets, step by step.
fn run(
    c: &mut ScalingController,
    start: u32,
    periods: u32,
    live: &mut i64,
    observe: impl Fn(i64) -> Observation,
) -> Vec<i64> {
    (start..start + periods)
        .map(|p| {
            let d = c.step(at(p), observe(*live));
            *live = d.target_workers;
            d.target_workers
        })
        .collect()
}

#[test]
fn starved_readers_step_up_to_the_estimate_and_the_step_is_kept_when_the_wait_falls() {
    let mut c = ScalingController::new(PERIOD);
    let d = c.step(at(0), starving(1, Some(3), 0.5, 0.02));
    assert_eq!((d.target_workers, d.phase), (3, Phase::ProbingUp));
    assert!(d.changed && d.reason.contains("1 -> 3"), "{}", d.reason);
    // Workers starting: nothing judged yet.
    let d = c.step(at(1), starving(2, Some(3), 0.4, 0.015));
    assert_eq!((d.target_workers, d.phase), (3, Phase::ProbingUp));
    assert!(d.reason.contains("waiting"), "{}", d.reason);
    // Reached: one settle period first.
    let d = c.step(at(2), starving(3, Some(3), 0.0, 0.0));
    assert!(
        d.judged.is_empty() && d.reason.contains("settling"),
        "{}",
        d.reason
    );
    let d = c.step(at(3), starving(3, Some(3), 0.0, 0.0));
    assert_eq!(d.judged, vec![(Direction::Up, Outcome::Kept)]);
    assert_eq!(
        (d.target_workers, d.phase, d.decisions, d.reverts),
        (3, Phase::Steady, 1, 0)
    );
}

#[test]
fn without_an_estimate_a_starved_reader_gets_one_more_worker() {
    let mut c = ScalingController::new(PERIOD);
    let d = c.step(at(0), starving(2, None, 0.3, 0.01));
    assert_eq!(d.target_workers, 3);
    // An estimate below the live count does not hold a starved reader back.
    let mut c = ScalingController::new(PERIOD);
    assert_eq!(
        c.step(at(0), starving(2, Some(1), 0.3, 0.01))
            .target_workers,
        3
    );
}

#[test]
fn a_kept_step_is_followed_by_another_while_readers_still_starve() {
    let mut c = ScalingController::new(PERIOD);
    c.step(at(0), starving(1, None, 0.6, 0.03));
    c.step(at(1), starving(2, None, 0.6, 0.03));
    let d = c.step(at(2), starving(2, None, 0.3, 0.01));
    assert_eq!(d.judged, vec![(Direction::Up, Outcome::Kept)]);
    assert_eq!((d.target_workers, d.phase), (3, Phase::ProbingUp));
}

#[test]
fn a_step_that_does_not_cut_the_wait_by_seven_percent_is_reverted_and_the_plateau_holds() {
    let mut c = ScalingController::new(PERIOD);
    c.step(at(0), starving(2, None, 0.3, 0.010));
    c.step(at(1), starving(3, None, 0.3, 0.010));
    // 6% less wait: within noise.
    let d = c.step(at(2), starving(3, None, 0.29, 0.0094));
    assert_eq!(d.judged, vec![(Direction::Up, Outcome::Reverted)]);
    assert_eq!(
        (d.target_workers, d.phase, d.reverts, d.decisions),
        (2, Phase::Reverted, 1, 2)
    );
    assert!(d.reason.contains("not past 2"), "{}", d.reason);
    // Still starving at the same demand: held at the plateau, period after period.
    for p in 3..20 {
        let d = c.step(at(p), starving(2, Some(6), 0.3, 0.010));
        assert_eq!(
            (d.target_workers, d.phase),
            (2, Phase::Steady),
            "{}",
            d.reason
        );
        assert!(d.reason.contains("plateau"), "{}", d.reason);
    }
}

#[test]
fn the_plateau_is_re_checked_when_demand_or_wait_moves_by_half() {
    let mut c = ScalingController::new(PERIOD);
    c.step(at(0), starving(2, None, 0.3, 0.010));
    c.step(at(1), starving(3, None, 0.3, 0.010));
    c.step(at(2), starving(3, None, 0.3, 0.010));
    // 1.4x the demand: still the same workload.
    let mut obs = starving(2, None, 0.3, 0.010);
    obs.consumption_per_second = 140.0;
    assert_eq!(c.step(at(3), obs).target_workers, 2);
    obs.consumption_per_second = 150.0;
    let d = c.step(at(4), obs);
    assert_eq!(
        (d.target_workers, d.phase),
        (3, Phase::ProbingUp),
        "{}",
        d.reason
    );
    assert!(d.reason.contains("re-checking"), "{}", d.reason);
    // The wait moving 1.5x re-checks too.
    let mut c = ScalingController::new(PERIOD);
    c.step(at(0), starving(2, None, 0.3, 0.010));
    c.step(at(1), starving(3, None, 0.3, 0.010));
    c.step(at(2), starving(3, None, 0.3, 0.010));
    assert_eq!(
        c.step(at(3), starving(2, None, 0.4, 0.015)).target_workers,
        3
    );
}

#[test]
fn fed_readers_let_the_count_fall_to_the_estimate_and_starvation_reverts_it() {
    let mut c = ScalingController::new(PERIOD);
    let fed = |live| starving(live, Some(2), 0.0, 0.0);
    let d = c.step(at(0), fed(5));
    assert_eq!((d.target_workers, d.phase), (2, Phase::ProbingDown));
    c.step(at(1), fed(2));
    let d = c.step(at(2), starving(2, Some(2), 0.2, 0.004));
    assert_eq!(d.judged, vec![(Direction::Down, Outcome::Reverted)]);
    assert_eq!(
        (d.target_workers, d.phase, d.reverts),
        (5, Phase::Reverted, 1)
    );
    // Fed again at 5: the floor holds at the same demand.
    for p in 3..10 {
        let d = c.step(at(p), fed(5));
        assert_eq!(d.target_workers, 5, "{}", d.reason);
    }
    // Half the demand: the floor is re-checked.
    let mut obs = fed(5);
    obs.consumption_per_second = 50.0;
    assert_eq!(c.step(at(10), obs).target_workers, 2);
}

#[test]
fn a_kept_step_down_stays() {
    let mut c = ScalingController::new(PERIOD);
    c.step(at(0), starving(4, Some(1), 0.0, 0.0));
    c.step(at(1), starving(1, Some(1), 0.0, 0.0));
    let d = c.step(at(2), starving(1, Some(1), 0.004, 0.0001));
    assert_eq!(d.judged, vec![(Direction::Down, Outcome::Kept)]);
    assert_eq!((d.target_workers, d.phase), (1, Phase::Steady));
}

#[test]
fn between_the_thresholds_the_count_holds() {
    let mut c = ScalingController::new(PERIOD);
    for p in 0..10 {
        // 3% starved: not starving, not fed enough to scale down.
        let d = c.step(at(p), starving(4, Some(2), 0.03, 0.001));
        assert_eq!(
            (d.target_workers, d.phase, d.changed),
            (4, Phase::Steady, false)
        );
    }
}

#[test]
fn no_readers_for_a_period_is_idle_at_the_minimum() {
    let mut c = ScalingController::new(PERIOD);
    c.set_bounds(Bounds::from_request(2, 8).unwrap());
    c.step(at(0), starving(4, Some(6), 0.5, 0.02));
    let gone = Observation {
        live_workers: 4,
        ..Default::default()
    };
    // Readers gone for less than a period: nothing yet.
    let d = c.step(at(1), gone);
    assert_eq!((d.target_workers, d.phase), (6, Phase::ProbingUp));
    let d = c.step(at(2), gone);
    assert_eq!((d.target_workers, d.phase), (2, Phase::Idle));
    assert_eq!(
        d.judged,
        vec![
            (Direction::Up, Outcome::Abandoned),
            (Direction::Down, Outcome::Idle)
        ]
    );
    // Readers return: steady from the minimum, then up as they starve.
    let d = c.step(at(3), starving(2, Some(2), 0.02, 0.001));
    assert_eq!((d.target_workers, d.phase), (2, Phase::Steady));
}

#[test]
fn bounds_clamp_the_target_at_once() {
    let mut c = ScalingController::new(PERIOD);
    c.step(at(0), starving(2, Some(8), 0.5, 0.02));
    assert_eq!(c.last().unwrap().target_workers, 8);
    c.set_bounds(Bounds::from_request(1, 4).unwrap());
    assert_eq!(c.last().unwrap().target_workers, 4);
    assert!(c.last().unwrap().reason.contains("clamped"));
    let d = c.step(at(1), starving(4, Some(16), 0.5, 0.02));
    assert!(d.target_workers <= 4, "{d:?}");
    assert!(Bounds::from_request(5, 2).is_err());
    assert!(Bounds::from_request(-1, 2).is_err());
    assert_eq!(Bounds::from_request(0, 0).unwrap(), Bounds::default());
}

#[test]
fn a_change_that_never_takes_effect_is_judged_after_the_wait_limit() {
    let mut c = ScalingController::new(PERIOD);
    c.step(at(0), starving(1, Some(4), 0.5, 0.02));
    for p in 1..MAX_WAIT_PERIODS {
        let d = c.step(at(p), starving(2, Some(4), 0.4, 0.015));
        assert!(d.judged.is_empty(), "{}", d.reason);
    }
    let d = c.step(at(MAX_WAIT_PERIODS), starving(2, Some(4), 0.4, 0.015));
    assert_eq!(d.judged, vec![(Direction::Up, Outcome::Kept)]);
    assert!(d.reason.contains("not reached"), "{}", d.reason);
}

#[test]
fn at_steady_demand_the_loop_settles_and_does_not_oscillate() {
    for (demand, per_worker, best) in [(35.0, 10.0, 4), (100.0, 10.0, 10), (5.0, 10.0, 1)] {
        let mut c = ScalingController::new(PERIOD);
        let mut live = 1;
        let targets = run(&mut c, 0, 60, &mut live, |n| {
            workload(n, demand, per_worker, i64::MAX)
        });
        let settled = &targets[10..];
        assert!(
            settled.iter().all(|&t| t == best),
            "{demand}/s: {targets:?}"
        );
        let changes = targets.windows(2).filter(|w| w[0] != w[1]).count();
        assert!(changes <= 3, "{demand}/s: {targets:?}");
    }
}

#[test]
fn past_a_bottleneck_the_loop_finds_the_plateau_and_stays() {
    // The estimate asks for 10, but only 3 workers help (a slow source).
    let mut c = ScalingController::new(PERIOD);
    let mut live = 1;
    let targets = run(&mut c, 0, 40, &mut live, |n| workload(n, 100.0, 10.0, 3));
    let last = *targets.last().unwrap();
    assert!((3..=4).contains(&last), "{targets:?}");
    let tail = &targets[20..];
    assert!(tail.iter().all(|&t| t == last), "{targets:?}");
}

#[test]
fn demand_steps_are_followed_up_and_down() {
    let mut c = ScalingController::new(PERIOD);
    let mut live = 1;
    let mut p = 0;
    for (demand, best) in [(20.0, 2), (40.0, 4), (80.0, 8), (20.0, 2)] {
        let targets = run(&mut c, p, 12, &mut live, |n| {
            workload(n, demand, 10.0, i64::MAX)
        });
        p += 12;
        let last = *targets.last().unwrap();
        assert!((best..=best + 1).contains(&last), "{demand}/s: {targets:?}");
    }
}

#[test]
fn noisy_measurements_at_steady_demand_settle_within_one_of_the_best_and_stay() {
    // Each period a worker's rate is off by up to ±5% (a deterministic
    // sequence), as measured rates are.
    for (demand, best) in [(38.0, 4), (35.0, 4), (75.0, 8)] {
        let mut c = ScalingController::new(PERIOD);
        let mut live = 1;
        let mut seed: u64 = 0x2545_F491_4F6C_DD1D;
        let mut targets = Vec::new();
        for p in 0..100 {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let noise = 0.95 + 0.1 * ((seed >> 11) as f64 / (1u64 << 53) as f64);
            let d = c.step(at(p), workload(live, demand, 10.0 * noise, i64::MAX));
            live = d.target_workers;
            targets.push(live);
        }
        let settled = &targets[20..];
        assert!(
            settled.iter().all(|&t| (best..=best + 1).contains(&t)),
            "{demand}/s: {targets:?}"
        );
        let changes = settled.windows(2).filter(|w| w[0] != w[1]).count();
        assert!(changes <= 2, "{demand}/s: {changes} changes: {targets:?}");
    }
}

#[test]
fn fed_readers_shed_workers_only_past_the_dead_band() {
    let fed = |live, e| starving(live, Some(e), 0.0, 0.0);
    // 100 live: an estimate of 91-99 is noise (a few percent of
    // throughput); 89 sheds.
    for e in [99, 95, 91, 90] {
        let mut c = ScalingController::new(PERIOD);
        let d = c.step(at(0), fed(100, e));
        assert_eq!(d.target_workers, 100, "estimate {e}: {}", d.reason);
        assert!(d.reason.contains("within 10%"), "{}", d.reason);
    }
    let mut c = ScalingController::new(PERIOD);
    assert_eq!(c.step(at(0), fed(100, 89)).target_workers, 89);
    // Below 10 workers, any whole worker counts.
    let mut c = ScalingController::new(PERIOD);
    assert_eq!(c.step(at(0), fed(8, 7)).target_workers, 7);
    // 1,000 live: within 100 holds.
    let mut c = ScalingController::new(PERIOD);
    assert_eq!(c.step(at(0), fed(1000, 901)).target_workers, 1000);
    assert_eq!(c.step(at(1), fed(1000, 899)).target_workers, 899);
}

/// What a reader fed from buffers reports: no wait yet, whatever the demand.
fn buffered(live: i64, estimate: i64, demand: f64) -> Observation {
    Observation {
        live_workers: live,
        estimate: Some(estimate),
        readers: 1,
        starvation: 0.0,
        wait_seconds_per_element: 0.0,
        consumption_per_second: demand,
    }
}

#[test]
fn a_demand_step_leads_the_starvation_to_the_estimate_and_is_kept() {
    let mut c = ScalingController::new(PERIOD);
    // Fed at 1 worker and 40 elements/s: that count is confirmed.
    for p in 0..3 {
        let d = c.step(at(p), buffered(1, 1, 40.0));
        assert_eq!(d.target_workers, 1, "{}", d.reason);
    }
    // Demand doubles; buffers still feed the reader (no wait), but the
    // estimate says 2: the controller does not wait for starvation.
    let d = c.step(at(3), buffered(1, 2, 80.0));
    assert_eq!((d.target_workers, d.phase), (2, Phase::ProbingUp));
    assert!(d.reason.contains("demand rose 2.0x"), "{}", d.reason);
    let d = c.step(at(4), buffered(2, 2, 80.0));
    assert!(d.judged.is_empty(), "{}", d.reason);
    // Settled, readers fed: kept (their wait, 0 before, cannot fall 7%).
    let d = c.step(at(5), buffered(2, 2, 80.0));
    assert_eq!(
        d.judged,
        vec![(Direction::Up, Outcome::Kept)],
        "{}",
        d.reason
    );
    assert_eq!((d.target_workers, d.phase), (2, Phase::Steady));
    // At steady demand nothing moves again.
    for p in 6..20 {
        let d = c.step(at(p), buffered(2, 2, 80.0));
        assert!(!d.changed, "{}", d.reason);
    }
    // Twice again: 4.
    let d = c.step(at(20), buffered(2, 4, 160.0));
    assert_eq!(d.target_workers, 4, "{}", d.reason);
}

#[test]
fn an_estimate_above_the_count_without_a_demand_step_adds_nobody_while_readers_are_fed() {
    let mut c = ScalingController::new(PERIOD);
    for p in 0..3 {
        c.step(at(p), buffered(2, 2, 80.0));
    }
    // A bad report: the estimate jumps, the demand does not (+25%).
    for p in 3..15 {
        let d = c.step(at(p), buffered(2, 8, 100.0));
        assert_eq!(d.target_workers, 2, "{}", d.reason);
        assert!(!d.changed, "{}", d.reason);
    }
}
