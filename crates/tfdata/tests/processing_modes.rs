//! Processing modes other than parallel_epochs, on in-process clusters.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use tfdata::{
    Dataset, DispatchServer, DispatcherConfig, DistributedDataset, ProcessingMode, WorkerConfig,
    WorkerServer, distribute,
};

mod common;
use common::{cluster, cluster_with, scalars as read};

fn counts(values: &[i64]) -> BTreeMap<i64, usize> {
    let mut m = BTreeMap::new();
    for v in values {
        *m.entry(*v).or_default() += 1;
    }
    m
}

fn exactly(values: &[i64], range: std::ops::Range<i64>, times: usize) {
    let c = counts(values);
    assert_eq!(c.len(), range.clone().count(), "distinct values: {c:?}");
    for v in range {
        assert_eq!(c.get(&v), Some(&times), "value {v} in {c:?}");
    }
}

#[test]
fn distributed_epoch_delivers_each_element_once_for_any_worker_count() {
    for workers in 1..=3 {
        let (dispatcher, _w) = cluster(workers);
        let ds = distribute(ProcessingMode::DistributedEpoch, &dispatcher.target())
            .apply(&Dataset::range(200))
            .unwrap();
        exactly(&read(&ds), 0..200, 1);
        // A second epoch is a new iteration with fresh splits.
        exactly(&read(&ds), 0..200, 1);
    }
}

#[test]
fn distributed_epoch_with_a_repeat_after_the_source() {
    let (dispatcher, _w) = cluster(2);
    let ds = distribute("distributed_epoch", &dispatcher.target())
        .apply(&Dataset::range(50).repeat(Some(3)))
        .unwrap();
    exactly(&read(&ds), 0..50, 3);
}

#[test]
fn distributed_epoch_over_tfrecord_files() {
    use tfdata_dataset::io::{CompressionType, TfRecordWriter};
    let dir = tempfile::tempdir().unwrap();
    for shard in 0..5 {
        let path = dir.path().join(format!("part-{shard}.tfrecord"));
        let mut w = TfRecordWriter::create(path.to_str().unwrap(), CompressionType::None).unwrap();
        for i in 0..20 {
            w.write(format!("{}", shard * 20 + i).as_bytes()).unwrap();
        }
        w.finish().unwrap();
    }
    let (dispatcher, _w) = cluster(3);
    let pattern = dir.path().join("part-*.tfrecord");
    let files = Dataset::list_files(&[pattern.to_str().unwrap()], true, Some(3));
    let ds = distribute(ProcessingMode::DistributedEpoch, &dispatcher.target())
        .apply(&files.flat_map(tfdata::FunctionRef::named("tfrecord_dataset")))
        .unwrap();
    let values: Vec<i64> = ds
        .iter()
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let s = e.components[0].string_values().unwrap()[0].clone();
            std::str::from_utf8(&s).unwrap().parse().unwrap()
        })
        .collect();
    exactly(&values, 0..100, 1);
}

/// `from_tensors` is one split, as TensorFlow's `TensorDataset`: repeated,
/// it gives its element once per repetition in distributed_epoch (what
/// TensorFlow 2.21 gives), however many workers read it. (Every tfdata
/// source splits; a TensorFlow graph's unsplittable sources are refused by
/// name: `interop/test_tf_against_tfdata.py`.)
#[test]
fn from_tensors_repeated_is_read_once_per_repetition() {
    let (dispatcher, _w) = cluster(2);
    let ds = distribute(ProcessingMode::DistributedEpoch, &dispatcher.target())
        .apply(&Dataset::from_tensors(vec![tfdata::Tensor::scalar(7i64)]).repeat(Some(5)))
        .unwrap();
    let values: Vec<i64> = ds
        .iter()
        .unwrap()
        .map(|e| e.unwrap().components[0].to_scalar::<i64>().unwrap())
        .collect();
    assert_eq!(values, vec![7; 5]);
}

/// Random worker counts, consumer counts and consumer speeds: consumers
/// sharing a distributed_epoch job together see every element exactly once.
#[test]
fn distributed_epoch_exactly_once_randomized() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x7fda7a);
    for case in 0..6 {
        let workers = rng.random_range(1..=3);
        let consumers = rng.random_range(1..=3);
        let n = rng.random_range(50..300);
        let (dispatcher, _w) = cluster(workers);
        let job = format!("random-{case}");
        let handles: Vec<_> = (0..consumers)
            .map(|c| {
                let ds = distribute(ProcessingMode::DistributedEpoch, &dispatcher.target())
                    .job_name(&job)
                    .max_outstanding_requests(1 + c)
                    .apply(&Dataset::range(n))
                    .unwrap();
                let delay = Duration::from_micros(rng.random_range(0..300));
                std::thread::spawn(move || {
                    ds.iter()
                        .unwrap()
                        .map(|e| {
                            std::thread::sleep(delay);
                            e.unwrap().components[0].to_scalar::<i64>().unwrap()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let values: Vec<i64> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        exactly(&values, 0..n, 1);
        eprintln!("case {case}: {workers} workers, {consumers} consumers, {n} elements: ok");
    }
}

fn static_cluster(entries: &[&str], workers: usize) -> (DispatchServer, Vec<WorkerServer>) {
    cluster_with(
        DispatcherConfig {
            worker_addresses: entries.iter().map(|e| e.to_string()).collect(),
            ..Default::default()
        },
        workers,
    )
}

#[test]
fn static_data_and_file_sharding_split_the_data_between_listed_workers() {
    let (dispatcher, _w) = static_cluster(&["localhost:%port%", "localhost:%port%"], 2);
    let ds = distribute(ProcessingMode::Data, &dispatcher.target())
        .apply(&Dataset::range(20))
        .unwrap();
    exactly(&read(&ds), 0..20, 1);

    let dir = tempfile::tempdir().unwrap();
    let mut names = Vec::new();
    for f in 0..4 {
        let path = dir.path().join(format!("f{f}.txt"));
        std::fs::write(&path, format!("{}\n{}\n", f * 2, f * 2 + 1)).unwrap();
        names.push(path.display().to_string());
    }
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let ds = distribute(ProcessingMode::File, &dispatcher.target())
        .apply(&Dataset::text_lines(&refs, ""))
        .unwrap();
    let values: Vec<i64> = ds
        .iter()
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            std::str::from_utf8(&e.components[0].string_values().unwrap()[0])
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    exactly(&values, 0..8, 1);
}

#[test]
fn static_sharding_refuses_unlisted_workers_and_needs_a_list() {
    let (dispatcher, _w) = static_cluster(&["localhost:%port%"], 1);
    let extra = WorkerServer::new(WorkerConfig::new(dispatcher.address())).unwrap();
    let err = extra.join().unwrap_err();
    assert!(err.to_string().contains("worker_addresses"), "{err}");

    let (plain, _w) = cluster(1);
    let ds = distribute(ProcessingMode::Data, &plain.target())
        .apply(&Dataset::range(3))
        .unwrap();
    let err = ds.iter().err().unwrap();
    assert!(err.to_string().contains("worker_addresses"), "{err}");
}

/// Two consumers of a coordinated read: step k of both comes from the same
/// worker's round, so consumer 1's element is consumer 0's plus one.
fn coordinated_pair(target: &str, job: &str, steps: usize) -> (Vec<i64>, Vec<i64>) {
    let readers: Vec<_> = (0..2)
        .map(|c| {
            let ds = distribute(ProcessingMode::ParallelEpochs, target)
                .job_name(job)
                .consumers(c, 2)
                .task_refresh_interval(Duration::from_millis(50))
                .apply(&Dataset::range(1_000_000).repeat(None))
                .unwrap();
            std::thread::spawn(move || {
                ds.iter()
                    .unwrap()
                    .take(steps)
                    .map(|e| e.unwrap().components[0].to_scalar::<i64>().unwrap())
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut out = readers.into_iter().map(|h| h.join().unwrap());
    (out.next().unwrap(), out.next().unwrap())
}

#[test]
fn coordinated_reads_keep_consumers_in_step() {
    let (dispatcher, _w) = cluster(2);
    let (a, b) = coordinated_pair(&dispatcher.target(), "coordinated", 40);
    assert_eq!(a.len(), 40);
    for (k, (x, y)) in a.iter().zip(&b).enumerate() {
        assert_eq!(
            *y,
            x + 1,
            "step {k}: consumer 0 got {x}, consumer 1 got {y}"
        );
        assert_eq!(x % 2, 0, "consumer 0 gets the first element of each round");
    }
}

#[test]
fn a_worker_joins_a_coordinated_read_at_an_agreed_round() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let (dispatcher, mut workers) = cluster(1);
    let stop = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|c| {
            let ds = distribute(ProcessingMode::ParallelEpochs, &dispatcher.target())
                .job_name("joining")
                .consumers(c, 2)
                .task_refresh_interval(Duration::from_millis(50))
                .apply(&Dataset::range(1_000_000).repeat(None))
                .unwrap();
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut out = Vec::new();
                for e in ds.iter().unwrap() {
                    out.push(e.unwrap().components[0].to_scalar::<i64>().unwrap());
                    if stop.load(Ordering::SeqCst) && out.len() >= 2000 {
                        break;
                    }
                    std::thread::sleep(Duration::from_micros(200));
                }
                out
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(200));
    workers.push(WorkerServer::new(WorkerConfig::new(dispatcher.address())).unwrap());
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let state = dispatcher.state();
        let it = state.iterations().next().unwrap();
        if it.tasks.len() == 2 && it.pending_tasks.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the new worker never joined: {it:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::SeqCst);
    let mut results = readers.into_iter().map(|h| h.join().unwrap());
    let (a, b) = (results.next().unwrap(), results.next().unwrap());
    let n = a.len().min(b.len());
    assert!(n >= 2000);
    for (k, (x, y)) in a[..n].iter().zip(&b[..n]).enumerate() {
        assert_eq!(*y, x + 1, "step {k}: consumers out of step ({x}, {y})");
    }
}

#[test]
fn contradictory_coordinated_read_options_are_rejected() {
    let (dispatcher, _w) = cluster(1);
    let t = dispatcher.target();
    let err = distribute(ProcessingMode::ParallelEpochs, &t)
        .consumers(0, 2)
        .apply(&Dataset::range(3).repeat(None))
        .err()
        .unwrap();
    assert!(err.to_string().contains("job_name"), "{err}");
    let err = distribute(ProcessingMode::ParallelEpochs, &t)
        .job_name("j")
        .consumers(2, 2)
        .apply(&Dataset::range(3).repeat(None))
        .err()
        .unwrap();
    assert!(err.to_string().contains("consumer_index"), "{err}");
    let err = distribute(ProcessingMode::ParallelEpochs, &t)
        .job_name("j")
        .consumers(0, 2)
        .target_workers(tfdata::TargetWorkers::Local)
        .apply(&Dataset::range(3).repeat(None))
        .err()
        .unwrap();
    assert!(err.to_string().contains("LOCAL"), "{err}");
    // A finite dataset: the dispatcher refuses the job, with TensorFlow's
    // advice (every consumer: `every_consumer_of_a_finite_coordinated_read_...`).
    let ds = distribute(ProcessingMode::ParallelEpochs, &t)
        .job_name("finite")
        .consumers(0, 1)
        .apply(&Dataset::range(3))
        .unwrap();
    let err = ds.iter().err().unwrap();
    assert!(err.to_string().contains("infinite"), "{err}");
}

#[test]
fn target_workers_local_reads_only_in_process_workers() {
    let (dispatcher, _w) = cluster(1);
    let ds = distribute(ProcessingMode::ParallelEpochs, &dispatcher.target())
        .target_workers(tfdata::TargetWorkers::Local)
        .apply(&Dataset::range(5))
        .unwrap();
    exactly(&read(&ds), 0..5, 1);
}

#[test]
fn cross_trainer_cache_shares_one_window_between_trainers() {
    let (dispatcher, _w) = cluster(1);
    let make = |trainer: &str| {
        distribute(ProcessingMode::ParallelEpochs, &dispatcher.target())
            .job_name("shared-cache")
            .cross_trainer_cache(trainer)
            .apply(&Dataset::range(1_000_000).repeat(None))
            .unwrap()
    };
    let take = |ds: &DistributedDataset, n: usize| -> Vec<i64> {
        ds.iter()
            .unwrap()
            .take(n)
            .map(|e| e.unwrap().components[0].to_scalar::<i64>().unwrap())
            .collect()
    };
    let (a, b) = (make("trainer-a"), make("trainer-b"));
    // Both trainers see the same elements: b reads what a made the worker cache.
    let first = take(&a, 30);
    assert_eq!(first, (0..30).collect::<Vec<_>>());
    assert_eq!(take(&b, 30), first);

    // Cross-trainer caching needs a job name and an infinite dataset.
    let err = distribute(ProcessingMode::ParallelEpochs, &dispatcher.target())
        .cross_trainer_cache("t")
        .apply(&Dataset::range(3).repeat(None))
        .err()
        .unwrap();
    assert!(err.to_string().contains("job_name"), "{err}");
    let finite = distribute(ProcessingMode::ParallelEpochs, &dispatcher.target())
        .job_name("finite-cache")
        .cross_trainer_cache("t")
        .apply(&Dataset::range(3))
        .unwrap();
    assert!(
        finite
            .iter()
            .err()
            .unwrap()
            .to_string()
            .contains("infinite")
    );
}

/// Two consumers of a coordinated read of `dataset` (job `job`), each on
/// its own thread, reading until an error: the error and how long after
/// its start it came. A consumer that reads 30 s without one fails the test.
fn two_consumers_until_an_error(
    dispatcher: &DispatchServer,
    job: &str,
    dataset: &Dataset,
) -> Vec<(tfdata::Error, Duration)> {
    let consumers: Vec<_> = (0..2)
        .map(|index| {
            let (target, job, dataset) = (dispatcher.target(), job.to_string(), dataset.clone());
            std::thread::spawn(move || -> (tfdata::Error, Duration) {
                let started = Instant::now();
                let ds = distribute(ProcessingMode::ParallelEpochs, &target)
                    .job_name(&job)
                    .consumers(index, 2)
                    .task_refresh_interval(Duration::from_millis(100))
                    .apply(&dataset);
                let mut it = match ds.and_then(|ds| ds.iter()) {
                    Ok(it) => it,
                    Err(e) => return (e, started.elapsed()),
                };
                let deadline = started + Duration::from_secs(30);
                while Instant::now() < deadline {
                    match it.next_timeout(Duration::from_millis(200)) {
                        std::task::Poll::Ready(Some(Err(e))) => return (e, started.elapsed()),
                        std::task::Poll::Ready(None) => panic!("consumer {index}: end of data"),
                        std::task::Poll::Ready(Some(Ok(_))) | std::task::Poll::Pending => {}
                    }
                }
                panic!("consumer {index} waited 30 s without an error");
            })
        })
        .collect();
    let outcomes: Vec<_> = consumers.into_iter().map(|c| c.join().unwrap()).collect();
    for (index, (err, took)) in outcomes.iter().enumerate() {
        eprintln!("consumer {index}: {took:?}: {err}");
    }
    outcomes
}

/// Issue 34, item 8: two consumers of a coordinated read over a finite
/// dataset. Every consumer gets TensorFlow's refusal when its read starts
/// (the job is made), promptly; none waits for data that never comes.
#[test]
fn every_consumer_of_a_finite_coordinated_read_is_refused_promptly() {
    let (dispatcher, _w) = cluster(2);
    let outcomes = two_consumers_until_an_error(&dispatcher, "finite-pair", &Dataset::range(10));
    for (index, (err, took)) in outcomes.into_iter().enumerate() {
        assert_eq!(
            err.code(),
            tonic::Code::FailedPrecondition,
            "consumer {index}: {err}"
        );
        assert!(
            err.to_string().contains(
                "Round robin reads require that the input dataset has infinite cardinality, \
                 but the dataset has cardinality 10. Consider adding a `.repeat()` \
                 transformation to the dataset."
            ),
            "consumer {index}: {err}"
        );
        assert!(
            took < Duration::from_secs(5),
            "consumer {index} took {took:?}"
        );
    }
}

/// An unknown cardinality (here `ignore_errors`) cannot be refused up
/// front; TensorFlow allows the read and fails it when the data ends. Every
/// consumer gets that error, promptly, in TensorFlow's words.
#[test]
fn every_consumer_of_a_coordinated_read_that_ends_gets_an_error() {
    let (dispatcher, _w) = cluster(2);
    let dataset = Dataset::range(10).ignore_errors();
    assert_eq!(dataset.cardinality(), tfdata_dataset::UNKNOWN_CARDINALITY);
    let outcomes = two_consumers_until_an_error(&dispatcher, "ends", &dataset);
    for (index, (err, took)) in outcomes.into_iter().enumerate() {
        assert_eq!(
            err.code(),
            tonic::Code::FailedPrecondition,
            "consumer {index}: {err}"
        );
        assert!(
            err.to_string()
                .contains("Encountered end of sequence on a round-robin read"),
            "consumer {index}: {err}"
        );
        assert!(
            took < Duration::from_secs(5),
            "consumer {index} took {took:?}"
        );
    }
}
