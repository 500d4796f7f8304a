//! Behaviour of the ops, with expected outputs as TensorFlow 2.21 gives them.

use tfdata_core::{Element, Error, Result, Tensor};

use crate::attrs::FunctionRef;
use crate::{Dataset, register_dataset_function, register_function, register_predicate};

fn collect(ds: &Dataset) -> Result<Vec<Element>> {
    let mut it = ds.iter()?;
    let mut out = Vec::new();
    while let Some(e) = it.next_element()? {
        out.push(e);
    }
    Ok(out)
}

fn ints(ds: &Dataset) -> Vec<Vec<i64>> {
    collect(ds)
        .unwrap()
        .iter()
        .map(|e| {
            e.components
                .iter()
                .flat_map(|c| c.to_vec::<i64>().unwrap())
                .collect()
        })
        .collect()
}

fn scalars(ds: &Dataset) -> Vec<i64> {
    ints(ds).into_iter().map(|v| v[0]).collect()
}

fn square() {
    register_function("ops_test_square", |e: Element| {
        let v = e.components[0].to_scalar::<i64>()?;
        Ok(Element::single(Tensor::scalar(v * v)))
    });
}

#[test]
fn range_take_skip_batch() {
    assert_eq!(scalars(&Dataset::range(3)), vec![0, 1, 2]);
    assert_eq!(scalars(&Dataset::range_with_step(5, 0, -2)), vec![5, 3, 1]);
    assert_eq!(
        ints(&Dataset::range(7).take(5).batch(2, false)),
        vec![vec![0, 1], vec![2, 3], vec![4]]
    );
    assert_eq!(
        ints(&Dataset::range(5).batch(2, true)),
        vec![vec![0, 1], vec![2, 3]]
    );
    assert_eq!(scalars(&Dataset::range(5).skip(3)), vec![3, 4]);
    assert_eq!(scalars(&Dataset::range(5).skip(-1)), Vec::<i64>::new());
    let batch = &collect(&Dataset::range(4).batch(4, false)).unwrap()[0];
    assert_eq!(batch.components[0].shape(), &[4]);
}

/// `range` and `from_tensor_slices` stack their rows in bulk for `batch`
/// (`next_stacked`); `take` makes the same input row by row, so both
/// paths must give identical batches, partial ones and dropped remainders
/// included.
#[test]
fn batches_stacked_in_bulk_equal_batches_stacked_row_by_row() {
    let row_by_row = |ds: Dataset| ds.take(i64::MAX);
    for (start, stop, step) in [
        (0, 10, 1),
        (5, -6, -2),
        (i64::MAX - 4, i64::MAX, 1),
        (0, 0, 1),
    ] {
        for (size, drop) in [(1, false), (3, false), (3, true), (4, true), (64, false)] {
            let range = || Dataset::range_with_step(start, stop, step);
            let bulk = collect(&range().batch(size, drop)).unwrap();
            let rows = collect(&row_by_row(range()).batch(size, drop)).unwrap();
            assert_eq!(
                bulk, rows,
                "range({start}, {stop}, {step}).batch({size}, {drop})"
            );
        }
    }
    let matrix =
        Tensor::from_slice(&(0..14).map(|v| v as f32).collect::<Vec<_>>(), vec![7, 2]).unwrap();
    let names = Tensor::strings((0..7).map(|i| format!("r{i}").into()).collect(), vec![7]).unwrap();
    for (size, drop) in [(2, false), (2, true), (7, true), (9, false)] {
        let slices = || Dataset::from_tensor_slices(vec![matrix.clone(), names.clone()]);
        let bulk = collect(&slices().batch(size, drop)).unwrap();
        let rows = collect(&row_by_row(slices()).batch(size, drop)).unwrap();
        assert_eq!(bulk, rows, "from_tensor_slices(..).batch({size}, {drop})");
    }
    let first = &collect(&Dataset::range(10).batch(4, false)).unwrap()[2];
    assert_eq!(first.components[0].shape(), &[2]);
    assert_eq!(first.components[0].to_vec::<i64>().unwrap(), vec![8, 9]);
}

/// `skip(n)` on an iterator leaves it where `n` calls of `next_element`
/// would, whether the ops seek (range, slices, batch) or make and drop.
#[test]
fn skipping_an_iterator_equals_reading_past_the_elements() {
    square();
    let matrix =
        Tensor::from_slice(&(0..14).map(|v| v as f32).collect::<Vec<_>>(), vec![7, 2]).unwrap();
    let pipelines = [
        Dataset::range_with_step(3, 40, 3),
        Dataset::range(10).batch(3, false),
        Dataset::range(10).batch(3, true),
        Dataset::range(10).take(i64::MAX).batch(4, false),
        Dataset::range(20).map("ops_test_square").batch(3, false),
        Dataset::range(20).skip(5).batch(2, false).skip(1),
        Dataset::from_tensor_slices(vec![matrix]).batch(2, false),
        Dataset::range(12)
            .shuffle(4, Some(7), false)
            .batch(5, false),
    ];
    for ds in pipelines {
        let all = collect(&ds).unwrap();
        for n in [
            0,
            1,
            2,
            all.len() as u64 - 1,
            all.len() as u64,
            all.len() as u64 + 3,
        ] {
            let mut it = ds.iter().unwrap();
            let skipped = it.skip_elements(n).unwrap();
            assert_eq!(skipped, n.min(all.len() as u64), "{ds:?} skip({n})");
            let rest: Vec<Element> = std::iter::from_fn(|| it.next_element().unwrap()).collect();
            assert_eq!(rest, all[skipped as usize..], "{ds:?} skip({n})");
        }
    }
}

#[test]
fn map_sequential_and_parallel_keep_order() {
    square();
    assert_eq!(
        scalars(&Dataset::range(4).map("ops_test_square")),
        vec![0, 1, 4, 9]
    );
    let parallel =
        Dataset::range(200).map_with(FunctionRef::named("ops_test_square"), Some(4), true);
    assert_eq!(
        scalars(&parallel),
        (0..200).map(|v| v * v).collect::<Vec<_>>()
    );
    let autotune =
        Dataset::range(50).map_with(FunctionRef::named("ops_test_square"), Some(-1), false);
    let mut got = scalars(&autotune);
    got.sort();
    assert_eq!(got, (0..50).map(|v| v * v).collect::<Vec<_>>());
}

#[test]
fn parallel_map_reports_errors_in_order_and_goes_on() {
    register_function("ops_test_fail_at_7", |e: Element| {
        if e.components[0].to_scalar::<i64>()? == 7 {
            return Err(Error::InvalidArgument("seven".into()));
        }
        Ok(e)
    });
    let ds = Dataset::range(100).map_with(FunctionRef::named("ops_test_fail_at_7"), Some(3), true);
    let mut it = ds.iter().unwrap();
    for want in 0..7 {
        assert_eq!(
            it.next_element().unwrap().unwrap().components[0]
                .to_scalar::<i64>()
                .unwrap(),
            want
        );
    }
    let err = it.next_element().unwrap_err();
    assert!(matches!(err, Error::UserFunction { .. }), "{err}");
    // The error was element 7's, as in TensorFlow (and the sequential map):
    // the next call goes on with element 8 (`ignore_errors` relies on it).
    assert_eq!(
        it.next_element().unwrap().unwrap().components[0]
            .to_scalar::<i64>()
            .unwrap(),
        8
    );
}

#[test]
fn unknown_and_failing_functions_are_clear_errors() {
    // Validation passes where the function is not linked (a dispatcher);
    // running it fails, naming the function.
    Dataset::range(4).map("no_such_fn").validate().unwrap();
    let err = Dataset::range(4).map("no_such_fn").iter().err().unwrap();
    assert!(err.to_string().contains("`no_such_fn`"), "{err}");
    register_function("ops_test_panics_on_2", |e: Element| {
        if e.components[0].to_scalar::<i64>()? == 2 {
            panic!("two is not allowed");
        }
        Ok(e)
    });
    let err = collect(&Dataset::range(4).map("ops_test_panics_on_2")).unwrap_err();
    assert!(matches!(err, Error::UserFunction { .. }));
    assert!(err.to_string().contains("two is not allowed"), "{err}");
    let err = collect(&Dataset::range(4).map_with(
        FunctionRef::named("ops_test_panics_on_2"),
        Some(2),
        true,
    ))
    .unwrap_err();
    assert!(err.to_string().contains("two is not allowed"), "{err}");
}

#[test]
fn batching_mismatched_shapes_is_a_clear_error() {
    register_function("ops_test_ragged", |e: Element| {
        let v = e.components[0].to_scalar::<i64>()?;
        Ok(Element::single(Tensor::vector(&vec![v; v as usize])))
    });
    let err = collect(&Dataset::range(3).map("ops_test_ragged").batch(3, false)).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("different shapes"), "{msg}");
    assert!(msg.contains("element 1"), "{msg}");
}

#[test]
fn padded_batch_pads_to_the_longest_or_given_shape() {
    crate::register_function_with_spec(
        "ops_test_fill",
        |s| {
            s.map_components(&mut |t| {
                Ok(crate::TensorSpec::new(
                    t.dtype,
                    crate::Shape(Some(vec![None])),
                ))
            })
        },
        |e: Element| {
            let v = e.components[0].to_scalar::<i64>()?;
            Ok(Element::single(Tensor::vector(&vec![v; v as usize])))
        },
    );
    // tf.data.Dataset.range(1, 4).map(lambda x: tf.fill([x], x)).padded_batch(2)
    let ds = Dataset::range_with_step(1, 4, 1)
        .map("ops_test_fill")
        .padded_batch(2, None, None, false);
    let batches = collect(&ds).unwrap();
    assert_eq!(batches[0].components[0].shape(), &[2, 2]);
    assert_eq!(
        batches[0].components[0].to_vec::<i64>().unwrap(),
        vec![1, 0, 2, 2]
    );
    assert_eq!(batches[1].components[0].shape(), &[1, 3]);
    let fixed = Dataset::range_with_step(1, 4, 1)
        .map("ops_test_fill")
        .padded_batch(
            3,
            Some(vec![vec![5]]),
            Some(vec![Tensor::scalar(-1i64)]),
            false,
        );
    let b = &collect(&fixed).unwrap()[0];
    assert_eq!(b.components[0].shape(), &[3, 5]);
    assert_eq!(
        b.components[0].to_vec::<i64>().unwrap(),
        vec![1, -1, -1, -1, -1, 2, 2, -1, -1, -1, 3, 3, 3, -1, -1]
    );
    let spec = fixed.element_spec().unwrap().unwrap();
    assert_eq!(spec.to_string(), "TensorSpec(shape=(None, 5), dtype=int64)");
}

#[test]
fn unbatch_inverts_batch() {
    assert_eq!(
        scalars(&Dataset::range(7).batch(3, false).unbatch()),
        (0..7).collect::<Vec<_>>()
    );
}

#[test]
fn filter_shard_repeat_enumerate_zip_concatenate() {
    register_predicate("ops_test_even", |e| {
        Ok(e.components[0].to_scalar::<i64>()? % 2 == 0)
    });
    assert_eq!(
        scalars(&Dataset::range(10).filter("ops_test_even")),
        vec![0, 2, 4, 6, 8]
    );
    assert_eq!(scalars(&Dataset::range(10).shard(3, 1)), vec![1, 4, 7]);
    assert_eq!(
        scalars(&Dataset::range(3).repeat(Some(2))),
        vec![0, 1, 2, 0, 1, 2]
    );
    assert_eq!(
        scalars(&Dataset::range(3).repeat(None).take(7)),
        vec![0, 1, 2, 0, 1, 2, 0]
    );
    assert_eq!(scalars(&Dataset::range(0).repeat(None)), Vec::<i64>::new());
    assert_eq!(
        ints(&Dataset::range(3).enumerate(10)),
        vec![vec![10, 0], vec![11, 1], vec![12, 2]]
    );
    assert_eq!(
        ints(&Dataset::zip(vec![
            Dataset::range(3),
            Dataset::range_with_step(10, 20, 5)
        ])),
        vec![vec![0, 10], vec![1, 15]]
    );
    assert_eq!(
        scalars(&Dataset::range(2).concatenate(Dataset::range(3))),
        vec![0, 1, 0, 1, 2]
    );
    let err = Dataset::range(2)
        .concatenate(Dataset::from_tensors(vec![Tensor::scalar(1.0f32)]))
        .validate()
        .unwrap_err();
    assert!(err.to_string().contains("concatenate"), "{err}");
}

#[test]
fn seeded_shuffles_give_tensorflows_orders() {
    // TensorFlow 2.21: `tf.data.Dataset.range(30).shuffle(10, seed=7)`,
    // iterated twice (each iterator reshuffles), and
    // `range(12).shuffle(5, seed=3, reshuffle_each_iteration=False).repeat(2)`.
    let ds = Dataset::range(30).shuffle(10, Some(7), true);
    assert_eq!(
        scalars(&ds),
        [
            2, 4, 0, 3, 13, 8, 14, 15, 5, 18, 12, 6, 7, 20, 10, 24, 22, 25, 27, 23, 26, 29, 11, 28,
            17, 19, 9, 1, 21, 16
        ]
    );
    assert_eq!(
        scalars(&ds),
        [
            9, 0, 3, 12, 2, 11, 13, 14, 6, 7, 17, 20, 1, 19, 5, 22, 10, 21, 4, 25, 15, 29, 24, 16,
            26, 23, 28, 27, 8, 18
        ]
    );
    let fixed = Dataset::range(12)
        .shuffle(5, Some(3), false)
        .repeat(Some(2));
    assert_eq!(
        scalars(&fixed),
        [
            2, 4, 0, 3, 6, 1, 7, 9, 5, 11, 10, 8, 2, 4, 0, 3, 6, 1, 7, 9, 5, 11, 10, 8
        ]
    );
}

#[test]
fn shuffle_is_a_seeded_permutation_and_reshuffles() {
    let ds = Dataset::range(100).shuffle(100, Some(42), true);
    let first = scalars(&ds);
    let second = scalars(&ds);
    let mut sorted = first.clone();
    sorted.sort();
    assert_eq!(sorted, (0..100).collect::<Vec<_>>());
    assert_ne!(first, (0..100).collect::<Vec<_>>());
    assert_ne!(first, second, "reshuffle_each_iteration");
    let fixed = Dataset::range(100).shuffle(10, Some(42), false);
    assert_eq!(scalars(&fixed), scalars(&fixed));
    // The same seeded pipeline rebuilt elsewhere gives the same order.
    assert_eq!(
        scalars(&Dataset::range(100).shuffle(100, Some(42), true)),
        first
    );
}

#[test]
fn interleave_matches_tensorflow_order() {
    register_dataset_function("ops_test_repeat_x", None, |e: Element| {
        let v = e.components[0].to_scalar::<i64>()?;
        Ok(Dataset::from_tensors(vec![Tensor::scalar(v)]).repeat(Some(v)))
    });
    // tf.data.Dataset.range(1, 5).interleave(
    //     lambda x: tf.data.Dataset.from_tensors(x).repeat(x), cycle_length=2, block_length=1)
    // → [1, 2, 2, 3, 3, 4, 3, 4, 4, 4] (TensorFlow 2.21, also with num_parallel_calls=2)
    let ds = Dataset::range_with_step(1, 5, 1).interleave(
        FunctionRef::named("ops_test_repeat_x"),
        2,
        1,
        None,
    );
    assert_eq!(scalars(&ds), vec![1, 2, 2, 3, 3, 4, 3, 4, 4, 4]);
    let parallel = Dataset::range_with_step(1, 5, 1).interleave(
        FunctionRef::named("ops_test_repeat_x"),
        2,
        1,
        Some(2),
    );
    assert_eq!(scalars(&parallel), vec![1, 2, 2, 3, 3, 4, 3, 4, 4, 4]);
    // block_length=2 → [1, 2, 2, 3, 3, 3, 4, 4, 4, 4]
    let blocks = Dataset::range_with_step(1, 5, 1).interleave(
        FunctionRef::named("ops_test_repeat_x"),
        2,
        2,
        None,
    );
    assert_eq!(scalars(&blocks), vec![1, 2, 2, 3, 3, 3, 4, 4, 4, 4]);
    let flat = Dataset::range_with_step(1, 4, 1).flat_map(FunctionRef::named("ops_test_repeat_x"));
    assert_eq!(scalars(&flat), vec![1, 2, 2, 3, 3, 3]);
}

#[test]
fn cache_replays_the_first_full_pass() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    register_function("ops_test_counting", |e: Element| {
        CALLS.fetch_add(1, Ordering::SeqCst);
        Ok(e)
    });
    let ds = Dataset::range(5).map("ops_test_counting").cache("");
    assert_eq!(scalars(&ds), vec![0, 1, 2, 3, 4]);
    assert_eq!(scalars(&ds), vec![0, 1, 2, 3, 4]);
    assert_eq!(
        CALLS.load(Ordering::SeqCst),
        5,
        "the second pass read the cache"
    );

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("cache");
    let ds = Dataset::range(4).cache(file.to_str().unwrap());
    assert_eq!(scalars(&ds), vec![0, 1, 2, 3]);
    assert!(file.exists());
    // A different pipeline over the same cache file reads the file.
    assert_eq!(
        scalars(&Dataset::range(100).cache(file.to_str().unwrap())),
        vec![0, 1, 2, 3]
    );
}

#[test]
fn prefetch_and_from_tensors() {
    assert_eq!(
        scalars(&Dataset::range(50).prefetch(4)),
        (0..50).collect::<Vec<_>>()
    );
    let ds = Dataset::from_tensors(vec![Tensor::vector(&[1i64, 2])]);
    assert_eq!(ints(&ds), vec![vec![1, 2]]);
}

#[test]
fn element_specs_follow_the_ops() {
    let ds = Dataset::range(10).batch(4, true).enumerate(0);
    assert_eq!(
        ds.element_spec().unwrap().unwrap().to_string(),
        "(TensorSpec(shape=(), dtype=int64), TensorSpec(shape=(4,), dtype=int64))"
    );
    let unknown = Dataset::range(10).batch(4, false);
    assert_eq!(
        unknown.element_spec().unwrap().unwrap().to_string(),
        "TensorSpec(shape=(None,), dtype=int64)"
    );
    square();
    assert!(
        Dataset::range(3)
            .map("ops_test_square")
            .element_spec()
            .unwrap()
            .is_none()
    );
    let err = Dataset::range(3)
        .map("ops_test_square")
        .padded_batch(2, None, None, false)
        .validate()
        .unwrap_err();
    assert!(
        err.to_string().contains("register_function_with_spec"),
        "{err}"
    );
}

#[test]
fn hostile_sizes_are_errors_not_allocations() {
    use crate::json::from_json;
    // Padding to a trillion elements.
    let ds = Dataset::range(3).batch(1, false).padded_batch(
        2,
        Some(vec![vec![1 << 20, 1 << 20]]),
        None,
        false,
    );
    assert!(ds.validate().is_err() || collect(&ds).is_err());
    let huge =
        Dataset::from_tensor_slices(vec![Tensor::from_slice(&[1i64, 2], vec![2, 1]).unwrap()])
            .padded_batch(2, Some(vec![vec![1 << 40]]), None, false);
    let err = collect(&huge).unwrap_err().to_string();
    assert!(err.contains("limit"), "{err}");
    // A one-hot depth of a trillion, and a resize to a trillion pixels.
    let one_hot = from_json(
        r#"{"op": "map", "function": {"function": "one_hot", "args": {"depth": 1000000000000}},
            "input": {"op": "range", "stop": 2}}"#,
    )
    .unwrap();
    let err = collect(&one_hot.dataset).unwrap_err().to_string();
    assert!(err.contains("too large"), "{err}");
    let resize = from_json(
        r#"{"op": "map", "function": {"function": "resize", "args": {"size": [1000000, 1000000]}},
            "input": {"op": "range", "stop": 2}}"#,
    );
    assert!(resize.err().unwrap().to_string().contains("pixels"));
}

#[test]
fn fused_parallel_maps_keep_order_and_name_the_failing_function() {
    square();
    register_function("ops_test_plus_one", |e: Element| {
        let v = e.components[0].to_scalar::<i64>()?;
        Ok(Element::single(Tensor::scalar(v + 1)))
    });
    let sq = FunctionRef::named("ops_test_square");
    let inc = FunctionRef::named("ops_test_plus_one");
    // Fused: square then +1, in order.
    let fused = Dataset::range(300)
        .map_with(sq.clone(), Some(2), true)
        .map_with(inc.clone(), Some(-1), true);
    assert_eq!(
        scalars(&fused),
        (0..300).map(|v| v * v + 1).collect::<Vec<_>>()
    );
    // A sequential map in between stops fusion; the result is the same.
    let mixed = Dataset::range(50)
        .map_with(sq, Some(2), true)
        .map("ops_test_plus_one")
        .map_with(inc, Some(2), true);
    assert_eq!(
        scalars(&mixed),
        (0..50).map(|v| v * v + 2).collect::<Vec<_>>()
    );
    // An error inside the inner (fused) function names it.
    register_function("ops_test_fail_at_3", |e: Element| {
        if e.components[0].to_scalar::<i64>()? == 3 {
            return Err(Error::InvalidArgument("three".into()));
        }
        Ok(e)
    });
    let failing = Dataset::range(10)
        .map_with(FunctionRef::named("ops_test_fail_at_3"), Some(2), true)
        .map_with(FunctionRef::named("ops_test_plus_one"), Some(2), true);
    let err = collect(&failing).unwrap_err().to_string();
    assert!(err.contains("ops_test_fail_at_3"), "{err}");
}

/// A provider of `range` splits whose leases record when they are released.
struct LeasingSplits {
    inner: crate::splits::RangeSplitProvider,
    released: std::sync::Arc<std::sync::Mutex<Vec<i64>>>,
}

impl crate::splits::SplitProvider for LeasingSplits {
    fn get_next(&self) -> Result<Option<Tensor>> {
        self.inner.get_next()
    }
    fn get_next_leased(&self) -> Result<Option<(Tensor, tfdata_core::Lineage)>> {
        let Some(split) = self.inner.get_next()? else {
            return Ok(None);
        };
        let v = split.to_scalar::<i64>()?;
        let released = std::sync::Arc::clone(&self.released);
        let lease = tfdata_core::SplitLease::new(move || released.lock().unwrap().push(v));
        Ok(Some((split, tfdata_core::Lineage::of(lease))))
    }
    fn reset(&self) -> Result<()> {
        self.inner.reset()
    }
    fn cardinality(&self) -> i64 {
        self.inner.cardinality()
    }
}

#[test]
fn a_split_is_released_only_after_every_element_made_from_it_is_gone() {
    // User functions build fresh elements; the ops must carry the lineage.
    register_function("ops_test_fresh_copy", |e: Element| {
        Ok(Element::new(e.components.clone()))
    });
    register_dataset_function("ops_test_lineage_repeat", None, |e: Element| {
        let v = e.components[0].to_scalar::<i64>()?;
        Ok(Dataset::from_tensors(vec![Tensor::scalar(v)]).repeat(Some(v % 4)))
    });
    for parallel in [None, Some(2)] {
        let source = Dataset::range(30);
        let ds = source
            .clone()
            .map_with(FunctionRef::named("ops_test_fresh_copy"), parallel, true)
            .interleave(
                FunctionRef::named("ops_test_lineage_repeat"),
                3,
                2,
                parallel,
            )
            .shuffle(7, Some(1), true)
            .batch(4, false)
            .map_with(FunctionRef::named("ops_test_fresh_copy"), parallel, true)
            .unbatch()
            .prefetch(3);
        let released = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let provider = LeasingSplits {
            inner: crate::splits::RangeSplitProvider::new(0, 30, 1),
            released: std::sync::Arc::clone(&released),
        };
        let mut ctx = crate::IterContext::new();
        ctx.split_providers
            .insert(source.op_key(), std::sync::Arc::new(provider));
        let mut it = ds.iter_with(&ctx).unwrap();
        let mut held = Vec::new();
        while let Some(e) = it.next_element().unwrap() {
            let v = e.components[0].to_scalar::<i64>().unwrap();
            assert!(
                !released.lock().unwrap().contains(&v),
                "split {v} released while an element made from it is still being produced"
            );
            held.push(e);
        }
        drop(it);
        // Parallel stages' threads let go of what they hold as they wind
        // down, just after the iterator is dropped.
        let settled = |expected: usize| {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            loop {
                let mut got = released.lock().unwrap().clone();
                if got.len() >= expected || std::time::Instant::now() > deadline {
                    got.sort_unstable();
                    return got;
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        };
        let empty: Vec<i64> = (0..30).filter(|v| v % 4 == 0).collect();
        assert_eq!(
            settled(empty.len()),
            empty,
            "only splits without elements are released while we hold the rest"
        );
        drop(held);
        assert_eq!(
            settled(30),
            (0..30).collect::<Vec<_>>(),
            "every split released exactly once"
        );
    }
}

#[test]
fn parallel_resize_then_normalize_runs_fused_with_the_same_bits() {
    use crate::attrs::{Attr, Attrs};
    let images: Vec<u8> = (0..4 * 30 * 40 * 3)
        .map(|i| (i * 7919 % 251) as u8)
        .collect();
    let images = Tensor::from_slice(&images, vec![4, 30, 40, 3]).unwrap();
    let resize = FunctionRef::with_args(
        "resize",
        Attrs::new().with("size", Attr::List(vec![Attr::Int(17), Attr::Int(23)])),
    );
    let floats = |v: f64| Attr::List(vec![Attr::Float(v)]);
    let normalize = FunctionRef::with_args(
        "normalize",
        Attrs::new()
            .with("mean", floats(127.5))
            .with("std", floats(127.5)),
    );
    // The two are one function in a chain of parallel maps ...
    let fused = crate::fusion::fuse(vec![resize.clone(), normalize.clone()]);
    assert_eq!(fused.len(), 1);
    assert_eq!(fused[0].name, "resize_normalize");
    // ... but not with another method or across components.
    let nearest = FunctionRef::with_args(
        "resize",
        resize
            .args
            .clone()
            .with("method", Attr::Str("nearest".into())),
    );
    assert_eq!(
        crate::fusion::fuse(vec![nearest, normalize.clone()]).len(),
        2
    );
    let elsewhere = FunctionRef::with_args(
        "normalize",
        normalize
            .args
            .clone()
            .with("component", Attr::Str("other".into())),
    );
    assert_eq!(
        crate::fusion::fuse(vec![resize.clone(), elsewhere]).len(),
        2
    );
    // decode_jpeg absorbs a following resize and normalize.
    let decode = FunctionRef::with_args("decode_jpeg", Attrs::new().with("channels", Attr::Int(3)));
    let fused = crate::fusion::fuse(vec![decode.clone(), resize.clone(), normalize.clone()]);
    assert_eq!(fused.len(), 1);
    assert_eq!(fused[0].name, "decode_jpeg_resize");
    for key in ["channels", "size", "mean", "std"] {
        assert!(fused[0].args.get(key).is_some(), "{key}");
    }
    let fused = crate::fusion::fuse(vec![decode.clone(), resize.clone()]);
    assert_eq!(fused.len(), 1);
    assert!(fused[0].args.get("mean").is_none());
    // A cast back to bytes joins too; a cast to anything else does not, and
    // nothing joins after the cast.
    let cast = |dtype: &str| {
        FunctionRef::with_args("cast", Attrs::new().with("dtype", Attr::Str(dtype.into())))
    };
    let fused = crate::fusion::fuse(vec![decode.clone(), resize.clone(), cast("uint8")]);
    assert_eq!(fused.len(), 1);
    assert_eq!(fused[0].name, "decode_jpeg_resize");
    assert!(matches!(fused[0].args.get("dtype"), Some(Attr::Str(d)) if d == "uint8"));
    let fused = crate::fusion::fuse(vec![decode.clone(), resize.clone(), cast("int32")]);
    assert_eq!(fused.len(), 2);
    let fused = crate::fusion::fuse(vec![
        decode.clone(),
        resize.clone(),
        cast("uint8"),
        normalize.clone(),
    ]);
    assert_eq!(fused.len(), 2);
    assert_eq!(fused[1].name, "normalize");
    // And the pipeline's output is what the unfused maps give.
    let source = Dataset::from_tensor_slices(vec![images]);
    let parallel = source
        .clone()
        .map_with(resize.clone(), Some(2), true)
        .map_with(normalize.clone(), Some(2), true);
    let sequential = source
        .map_with(resize, None, true)
        .map_with(normalize, None, true);
    let (a, b) = (collect(&parallel).unwrap(), collect(&sequential).unwrap());
    assert_eq!(a.len(), 4);
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.components, y.components);
    }
}
