use std::collections::BTreeSet;

use tfdata_core::Element;

use super::*;
use crate::random::with_seed;
use crate::splits::{IndexSplitProvider, RangeSplitProvider};

fn spec(lanes: u64, lane: u64, epoch: u64, seed: Option<u64>) -> LaneSpec {
    LaneSpec {
        lanes,
        lane,
        epoch,
        split_shuffle_seed: seed,
        fingerprint: fingerprint(b"pipeline"),
    }
}

fn drain(p: &dyn SplitProvider) -> Vec<i64> {
    let mut out = Vec::new();
    while let Some(t) = p.get_next().unwrap() {
        out.push(t.to_scalar::<i64>().unwrap());
    }
    out
}

/// The splits of lane `k`, as its provider yields them.
fn lane_splits(splits: u64, s: &LaneSpec) -> Vec<i64> {
    let p = LaneSplitProvider::new(Box::new(IndexSplitProvider::new(splits)), s).unwrap();
    let out = drain(&p);
    assert_eq!(p.cardinality(), out.len() as i64, "{s:?}");
    out
}

#[test]
fn lanes_partition_the_splits_exactly_once() {
    for splits in [0u64, 1, 5, 20, 101] {
        for lanes in [1u64, 2, 3, 7] {
            for seed in [None, Some(9)] {
                let mut seen = Vec::new();
                for lane in 0..lanes {
                    let got = lane_splits(splits, &spec(lanes, lane, 0, seed));
                    if seed.is_none() {
                        // The provider's order, dealt round robin.
                        let expected: Vec<i64> = (lane..splits)
                            .step_by(lanes as usize)
                            .map(|i| i as i64)
                            .collect();
                        assert_eq!(got, expected, "lane {lane} of {lanes}");
                    }
                    seen.extend(got);
                }
                seen.sort();
                assert_eq!(
                    seen,
                    (0..splits as i64).collect::<Vec<_>>(),
                    "{splits} splits, {lanes} lanes, seed {seed:?}"
                );
            }
        }
    }
}

/// The lanes of a permuted read, interleaved by global position, are the
/// permutation itself.
#[test]
fn lanes_deal_the_permuted_global_order() {
    let (splits, lanes) = (50u64, 3u64);
    let permutation = SplitPermutation::new(splits, 4, 2);
    let per_lane: Vec<Vec<i64>> = (0..lanes)
        .map(|k| lane_splits(splits, &spec(lanes, k, 2, Some(4))))
        .collect();
    for p in 0..splits {
        let (j, k) = ((p / lanes) as usize, (p % lanes) as usize);
        assert_eq!(per_lane[k][j], permutation.apply(p) as i64);
    }
}

#[test]
fn permutation_is_a_bijection_keyed_by_seed_and_epoch() {
    for len in [1u64, 2, 3, 17, 64, 65, 1000, 4099] {
        let image: BTreeSet<u64> = (0..len)
            .map(|p| SplitPermutation::new(len, 7, 0).apply(p))
            .collect();
        assert_eq!(image.len() as u64, len);
        assert!(image.iter().all(|&i| i < len));
    }
    let order = |seed, epoch| -> Vec<u64> {
        (0..100)
            .map(|p| SplitPermutation::new(100, seed, epoch).apply(p))
            .collect()
    };
    assert_eq!(order(1, 0), order(1, 0));
    assert_ne!(order(1, 0), order(2, 0), "the seed changes the order");
    assert_ne!(order(1, 0), order(1, 1), "the epoch changes the order");
    assert_ne!(
        order(1, 0),
        (0..100).collect::<Vec<_>>(),
        "not permuted at all"
    );
    // Huge split counts cost nothing up front and stay in range.
    let huge = SplitPermutation::new(i64::MAX as u64, 3, 0);
    for p in [0, 1, 12345, i64::MAX as u64 - 1] {
        assert!(huge.apply(p) < i64::MAX as u64);
    }
}

#[test]
fn reset_restarts_the_lane() {
    let p = LaneSplitProvider::new(
        Box::new(RangeSplitProvider::new(0, 20, 1)),
        &spec(3, 1, 0, Some(5)),
    )
    .unwrap();
    let first = drain(&p);
    assert_eq!(drain(&p), Vec::<i64>::new());
    p.reset().unwrap();
    assert_eq!(drain(&p), first);
}

#[test]
fn bad_lanes_and_unknown_split_counts_are_refused() {
    let provider = || Box::new(IndexSplitProvider::new(10)) as Box<dyn SplitProvider>;
    for bad in [
        spec(0, 0, 0, None),
        spec(3, 3, 0, None),
        spec(MAX_LANES + 1, 0, 0, None),
    ] {
        let err = LaneSplitProvider::new(provider(), &bad).err().unwrap();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    }
    let err = LaneSplitProvider::new(
        Box::new(IndexSplitProvider::unbounded()),
        &spec(2, 0, 0, Some(1)),
    )
    .err()
    .unwrap();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(err.to_string().contains("infinite"), "{err}");
    // Without a split shuffle, an endless provider is dealt as it comes.
    let p = LaneSplitProvider::new(
        Box::new(IndexSplitProvider::unbounded()),
        &spec(4, 3, 0, None),
    )
    .unwrap();
    assert_eq!(
        p.get_next().unwrap().unwrap().to_scalar::<i64>().unwrap(),
        3
    );
    assert_eq!(
        p.get_next().unwrap().unwrap().to_scalar::<i64>().unwrap(),
        7
    );
}

fn values(elements: Vec<Element>) -> Vec<Vec<i64>> {
    elements
        .iter()
        .map(|e| e.components[0].to_vec::<i64>().unwrap())
        .collect()
}

/// Lane `s.lane` of the pipeline `build` makes, built and iterated as a
/// worker does.
fn run_lane(build: impl Fn() -> Dataset, s: &LaneSpec) -> Vec<Vec<i64>> {
    with_seed(s.seed(), || {
        let ds = build();
        let ctx = lane_context(&ds, s).unwrap();
        values(ds.iter_with(&ctx).unwrap().collect::<Result<_>>().unwrap())
    })
}

#[test]
fn a_lane_is_the_same_every_time_it_is_built() {
    let build = || Dataset::range(100).shuffle(10, None, true).batch(3, false);
    for lane in 0..4 {
        let s = spec(4, lane, 0, None);
        let once = run_lane(build, &s);
        assert_eq!(once, run_lane(build, &s), "lane {lane}");
        assert!(!once.is_empty());
    }
    // Another epoch or lane, other seeds.
    assert_ne!(
        run_lane(build, &spec(4, 0, 0, None)),
        run_lane(build, &spec(4, 0, 1, None))
    );
}

#[test]
fn lanes_together_hold_the_dataset_once() {
    let build = || {
        Dataset::zip(vec![Dataset::range(60), Dataset::range(60)])
            .shuffle(7, None, true)
            .repeat(Some(2))
    };
    for lanes in [1u64, 2, 3, 7] {
        for seed in [None, Some(11)] {
            let mut all: Vec<i64> = (0..lanes)
                .flat_map(|k| run_lane(build, &spec(lanes, k, 0, seed)))
                .map(|v| v[0])
                .collect();
            all.sort();
            let mut expected: Vec<i64> = (0..60).chain(0..60).collect();
            expected.sort();
            assert_eq!(all, expected, "{lanes} lanes, seed {seed:?}");
        }
    }
}

/// Epoch `e` of one lane is what the `e`-th local iteration of the same
/// dataset gives: a reshuffling seeded shuffle counts its iterators from
/// the epoch.
#[test]
fn epoch_e_is_the_local_e_th_iteration() {
    let build = || Dataset::range(40).shuffle(40, Some(3), true);
    let s = |epoch| spec(1, 0, epoch, None);
    let epoch0 = run_lane(build, &s(0));
    let epoch1 = run_lane(build, &s(1));
    assert_ne!(epoch0, epoch1, "a reshuffling shuffle reshuffles per epoch");
    let local = build();
    let iterate = |ds: &Dataset| values(ds.iter().unwrap().collect::<Result<_>>().unwrap());
    assert_eq!(iterate(&local), epoch0);
    assert_eq!(iterate(&local), epoch1);
    // `random` with rerandomize_each_iteration counts from the epoch too.
    let build = || Dataset::random(5, 6, true).take(8);
    let local = build();
    let first = iterate(&local);
    let second = iterate(&local);
    assert_ne!(first, second);
    assert_eq!(run_lane(build, &s(1)), second);
}

#[test]
fn lane_context_refuses_a_lane_out_of_range() {
    let ds = Dataset::range(3).batch(2, false);
    assert!(lane_context(&ds, &spec(2, 5, 0, None)).is_err());
}
