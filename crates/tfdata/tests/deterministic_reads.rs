//! Deterministic distributed_epoch reads (issue 35), over real gRPC with an
//! in-process dispatcher and workers: the global sequence (lane k's j-th
//! element at position j*K + k) is the same on any number of workers and
//! consumers, consumers' checkpoints merge and restore on another consumer
//! count with workers stopped and added, and what cannot be merged or
//! restored is refused with words that say what to do.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed unwrap is a failed test

use std::collections::BTreeMap;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use tfdata::{
    Dataset, Deterministic, DispatchServer, DistributedDataset, ElementIterator, ProcessingMode,
    WorkerConfig, WorkerServer, distribute, merge_checkpoints,
};

mod common;
use common::{cluster, wait_for_workers};

const LANES: u32 = 12;

fn setting(consumer_index: u32, num_consumers: u32) -> Deterministic {
    Deterministic {
        lanes: LANES,
        consumer_index,
        num_consumers,
        ..Default::default()
    }
}

/// Consumer `c` of `n` of a deterministic read of `dataset`.
fn consumer(dispatcher: &DispatchServer, dataset: &Dataset, c: u32, n: u32) -> DistributedDataset {
    windowed(
        dispatcher,
        dataset,
        c,
        n,
        Deterministic::default().reorder_window_elements,
    )
}

/// [`consumer`] with a reorder window of `window` elements (a small one
/// keeps lanes' streams open while the reader is behind).
fn windowed(
    dispatcher: &DispatchServer,
    dataset: &Dataset,
    c: u32,
    n: u32,
    window: usize,
) -> DistributedDataset {
    distribute(ProcessingMode::DistributedEpoch, &dispatcher.target())
        .task_refresh_interval(Duration::from_millis(50))
        .max_outstanding_requests(1)
        .deterministic(Deterministic {
            reorder_window_elements: window,
            ..setting(c, n)
        })
        .apply(dataset)
        .unwrap()
}

/// Elements as text: what the sequences compare.
fn texts(it: &mut ElementIterator, n: usize) -> Vec<String> {
    it.take(n).map(|e| e.unwrap().to_string()).collect()
}

fn all(it: &mut ElementIterator) -> Vec<String> {
    texts(it, usize::MAX)
}

/// The global sequence from position `from` on, out of the outputs of
/// consumers 0..n (position p is consumer p % n's next). Every lane of the
/// pipelines here has as many elements as the others, so no slot is empty.
fn rebuild(outputs: Vec<Vec<String>>, from: usize) -> Vec<String> {
    let n = outputs.len();
    let mut outputs: Vec<std::vec::IntoIter<String>> =
        outputs.into_iter().map(Vec::into_iter).collect();
    let mut global = Vec::new();
    for p in from.. {
        match outputs[p % n].next() {
            Some(e) => global.push(e),
            None => break,
        }
    }
    for (c, rest) in outputs.iter().enumerate() {
        assert_eq!(rest.len(), 0, "consumer {c} of {n} has elements left over");
    }
    global
}

/// The whole epoch read by `n` consumers, one after the other.
fn read_by(dispatcher: &DispatchServer, dataset: &Dataset, n: u32) -> Vec<String> {
    let outputs = (0..n)
        .map(|c| all(&mut consumer(dispatcher, dataset, c, n).iter().unwrap()))
        .collect();
    rebuild(outputs, 0)
}

fn square_pipeline() -> Dataset {
    tfdata::register_function("deterministic_reads_test_square", |e: tfdata::Element| {
        let v = e.components[0].to_scalar::<i64>()?;
        Ok(tfdata::Element::new(vec![tfdata::Tensor::scalar(v * v)]))
    });
    Dataset::range(2000)
        .map("deterministic_reads_test_square")
        .shuffle(50, Some(7), true)
        .batch(4, false)
}

/// `files` files of `lines` numbered lines, and the pipeline reading them
/// (one split per file, two files interleaved per lane).
fn text_pipeline(dir: &std::path::Path, files: usize, lines: usize) -> Dataset {
    for f in 0..files {
        let text: String = (0..lines).map(|l| format!("{}\n", f * lines + l)).collect();
        std::fs::write(dir.join(format!("part-{f:03}.txt")), text).unwrap();
    }
    let pattern = dir.join("part-*.txt");
    Dataset::list_files(&[pattern.to_str().unwrap()], false, None)
        .interleave(tfdata::FunctionRef::named("text_line_dataset"), 2, 1, None)
        .batch(3, false)
}

/// Every number in a sequence of batches, sorted.
fn numbers(sequence: &[String]) -> Vec<i64> {
    let mut v: Vec<i64> = sequence
        .iter()
        .flat_map(|s| {
            s.split(|c: char| !c.is_ascii_digit())
                .filter(|t| !t.is_empty())
                .map(|t| t.parse::<i64>().unwrap())
                .collect::<Vec<_>>()
        })
        .collect();
    v.sort_unstable();
    v
}

/// One pipeline with a seeded shuffle, one over text files: 1, 2 and 4
/// workers, 1, 2 and 3 consumers, the same sequence element for element.
#[test]
fn the_global_sequence_is_the_same_on_any_workers_and_consumers() {
    let dir = tempfile::tempdir().unwrap();
    let pipelines = [
        ("range.map.shuffle.batch", square_pipeline()),
        (
            "list_files.interleave.batch",
            text_pipeline(dir.path(), 24, 30),
        ),
    ];
    let mut reference: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for workers in [1, 2, 4] {
        let (dispatcher, _workers) = cluster(workers);
        for (name, pipeline) in &pipelines {
            for n in [1, 2, 3] {
                let global = read_by(&dispatcher, pipeline, n);
                match reference.get(name) {
                    None => {
                        reference.insert(name, global);
                    }
                    Some(first) => assert!(
                        *first == global,
                        "{name}: {workers} workers, {n} consumers read another sequence than 1 \
                         worker and 1 consumer (first differing position {:?})",
                        first.iter().zip(&global).position(|(a, b)| a != b)
                    ),
                }
            }
        }
    }
    // The sequences are the epochs (each value once), not a trivial order.
    let squares: Vec<i64> = {
        let mut v: Vec<i64> = (0..2000i64).map(|v| v * v).collect();
        v.sort_unstable();
        v
    };
    assert_eq!(numbers(&reference["range.map.shuffle.batch"]), squares);
    assert_eq!(
        numbers(&reference["list_files.interleave.batch"]),
        (0..720).collect::<Vec<i64>>()
    );
    let sorted = {
        let mut s = reference["range.map.shuffle.batch"].clone();
        s.sort();
        s
    };
    assert_ne!(sorted, reference["range.map.shuffle.batch"]);
}

/// A worker at its lane-stream limit refuses more lanes; the reader opens
/// them on the other worker instead of failing the read.
#[test]
fn lanes_a_full_worker_refuses_go_to_another() {
    let pipeline = square_pipeline();
    let reference = {
        let (dispatcher, _workers) = cluster(1);
        read_by(&dispatcher, &pipeline, 1)
    };
    let (dispatcher, mut workers) = cluster(0);
    let mut small = WorkerConfig::new(dispatcher.address());
    small.heartbeat_interval = Duration::from_millis(100);
    small.max_lane_streams = 2;
    workers.push(WorkerServer::new(small).unwrap());
    wait_for_workers(&dispatcher, 1);
    add_worker(&dispatcher, &mut workers);
    assert_eq!(read_by(&dispatcher, &pipeline, 1), reference);
}

/// A worker of `dispatcher`, registered.
fn add_worker(dispatcher: &DispatchServer, workers: &mut Vec<WorkerServer>) {
    let mut config = WorkerConfig::new(dispatcher.address());
    config.heartbeat_interval = Duration::from_millis(100);
    workers.push(WorkerServer::new(config).unwrap());
    wait_for_workers(dispatcher, workers.len());
}

/// Four consumers checkpoint at the same random step; their checkpoints
/// merge; the merged one restores on two and on three consumers, with a
/// worker stopped and another added between the checkpoint and the
/// restore, and again while the restored consumers read. What was read
/// before the checkpoint and after the restore, in global order, is the
/// uninterrupted read.
#[test]
fn merged_checkpoints_resume_on_other_consumer_counts_through_worker_changes() {
    // RUST_LOG=tfdata_client=debug shows the lanes moving.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let (dispatcher, first) = cluster(2);
    let mut workers = first;
    let dataset = square_pipeline();
    let uninterrupted = read_by(&dispatcher, &dataset, 1);
    let mut rng = rand::rngs::StdRng::seed_from_u64(35);
    let step = rng.random_range(5..30);
    let mut before = Vec::new();
    let mut checkpoints = Vec::new();
    for c in 0..4 {
        let mut it = consumer(&dispatcher, &dataset, c, 4).iter().unwrap();
        before.push(texts(&mut it, step));
        checkpoints.push(it.checkpoint().unwrap());
        // Read on past the checkpoint, as a trainer does before it dies.
        let _ = texts(&mut it, 7);
    }
    let before = rebuild(before, 0);
    assert_eq!(before, uninterrupted[..4 * step]);
    let slices: Vec<&[u8]> = checkpoints.iter().map(Vec::as_slice).collect();
    let merged = merge_checkpoints(&slices).unwrap();

    for m in [2, 3] {
        // Between: a worker goes, another comes.
        workers.remove(0).stop();
        add_worker(&dispatcher, &mut workers);
        let mut outputs = Vec::new();
        for c in 0..m {
            // One element of credit per lane: the lanes' streams stay open
            // (on the workers that go) while the reader is behind.
            let mut it = windowed(&dispatcher, &dataset, c, m, 1).iter().unwrap();
            it.restore(&merged).unwrap();
            let mut got = texts(&mut it, 5);
            if c == 0 {
                // During: another goes and another comes.
                workers.remove(0).stop();
                add_worker(&dispatcher, &mut workers);
            }
            got.extend(all(&mut it));
            outputs.push(got);
        }
        let after = rebuild(outputs, 4 * step);
        let mut resumed = before.clone();
        resumed.extend(after);
        assert!(
            resumed == uninterrupted,
            "restored on {m} consumers: {} elements, first differing position {:?} (checkpoint \
             at global position {})",
            resumed.len(),
            resumed.iter().zip(&uninterrupted).position(|(a, b)| a != b),
            4 * step
        );
    }
}

/// Consumer `c` of `n`'s checkpoint after `steps` elements.
fn checkpoint_after(
    dispatcher: &DispatchServer,
    dataset: &Dataset,
    c: u32,
    n: u32,
    steps: usize,
) -> Vec<u8> {
    let mut it = consumer(dispatcher, dataset, c, n).iter().unwrap();
    assert_eq!(texts(&mut it, steps).len(), steps);
    it.checkpoint().unwrap()
}

#[test]
fn merging_and_restoring_refuse_what_would_resume_wrongly() {
    let (dispatcher, _workers) = cluster(2);
    let dataset = square_pipeline();
    let a = checkpoint_after(&dispatcher, &dataset, 0, 2, 5);
    let b = checkpoint_after(&dispatcher, &dataset, 1, 2, 6);
    let err = merge_checkpoints(&[&a, &b]).unwrap_err();
    assert_eq!(err.code(), tonic::Code::FailedPrecondition, "{err}");
    assert!(
        err.to_string().contains("consumer 0 of 2: 5 steps")
            && err.to_string().contains("consumer 1 of 2: 6 steps"),
        "{err}"
    );
    // A missing consumer.
    let thirds: Vec<Vec<u8>> = (0..2)
        .map(|c| checkpoint_after(&dispatcher, &dataset, c, 3, 4))
        .collect();
    let err = merge_checkpoints(&[&thirds[0], &thirds[1]]).unwrap_err();
    assert!(err.to_string().contains("missing"), "{err}");
    // Mixed reads: another pipeline's consumer, an ordinary read's checkpoint.
    let other = checkpoint_after(&dispatcher, &Dataset::range(100).batch(2, false), 1, 2, 5);
    let err = merge_checkpoints(&[&a, &other]).unwrap_err();
    assert!(err.to_string().contains("different reads"), "{err}");
    let ordinary = {
        let ds = distribute(ProcessingMode::DistributedEpoch, &dispatcher.target())
            .apply(&dataset)
            .unwrap();
        let mut it = ds.iter().unwrap();
        let _ = texts(&mut it, 2);
        it.checkpoint().unwrap()
    };
    let err = merge_checkpoints(&[&a, &ordinary]).unwrap_err();
    assert!(
        err.to_string().contains("not of a deterministic read"),
        "{err}"
    );
    // A consumer's own checkpoint restores only into the same consumer.
    let mut it = consumer(&dispatcher, &dataset, 0, 3).iter().unwrap();
    let err = it.restore(&a).unwrap_err();
    assert_eq!(err.code(), tonic::Code::InvalidArgument, "{err}");
    assert!(err.to_string().contains("merge the checkpoints"), "{err}");
    let mut same = consumer(&dispatcher, &dataset, 0, 2).iter().unwrap();
    same.restore(&a).unwrap();
    assert_eq!(texts(&mut same, 1).len(), 1);
    // An ordinary read does not take a deterministic checkpoint, nor the
    // reverse.
    let ds = distribute(ProcessingMode::DistributedEpoch, &dispatcher.target())
        .apply(&dataset)
        .unwrap();
    let err = ds.iter().unwrap().restore(&a).unwrap_err();
    assert!(err.to_string().contains("deterministic"), "{err}");
    let err = consumer(&dispatcher, &dataset, 0, 1)
        .iter()
        .unwrap()
        .restore(&ordinary)
        .unwrap_err();
    assert!(
        err.to_string().contains("not of a deterministic read"),
        "{err}"
    );
}

/// Setup refuses settings that cannot work, saying which.
#[test]
fn a_deterministic_read_is_checked_when_it_is_set_up() {
    let (dispatcher, _workers) = cluster(1);
    let dataset = Dataset::range(10);
    let refused = |read: tfdata::Distribute| match read.apply(&dataset) {
        Ok(_) => panic!("the read was set up"),
        Err(e) => e.to_string(),
    };
    let base = || distribute(ProcessingMode::DistributedEpoch, &dispatcher.target());
    let parallel = distribute(ProcessingMode::ParallelEpochs, &dispatcher.target())
        .deterministic(Deterministic::default());
    assert!(refused(parallel).contains("distributed_epoch"));
    let five = Deterministic {
        lanes: 5,
        num_consumers: 2,
        ..Default::default()
    };
    assert!(refused(base().deterministic(five)).contains("divide lanes"));
    let too_many = Deterministic {
        lanes: 5000,
        ..Default::default()
    };
    assert!(refused(base().deterministic(too_many)).contains("1..=4096"));
    let coordinated = base()
        .job_name("j")
        .consumers(0, 2)
        .deterministic(Deterministic::default());
    assert!(refused(coordinated).contains("consumers()"));
}

/// Each `iter()` is the next epoch: a shuffle that reshuffles each
/// iteration gives another order, the same on any number of workers.
#[test]
fn each_iteration_is_the_next_epoch() {
    let dataset = square_pipeline();
    let mut epochs = Vec::new();
    for workers in [1, 3] {
        let (dispatcher, _workers) = cluster(workers);
        let ds = consumer(&dispatcher, &dataset, 0, 1);
        let first = all(&mut ds.iter().unwrap());
        let second = all(&mut ds.iter().unwrap());
        assert_ne!(first, second, "epoch 1 repeats epoch 0's order");
        assert_eq!(numbers(&first), numbers(&second));
        epochs.push((first, second));
    }
    assert!(
        epochs[0] == epochs[1],
        "epochs differ between 1 and 3 workers"
    );
}

/// A split shuffle seed deals the splits to lanes in a seeded order: another
/// sequence than without it, the same for one and for two consumers.
#[test]
fn a_split_shuffle_seed_gives_one_other_sequence_for_any_consumers() {
    let (dispatcher, _workers) = cluster(2);
    let dataset = Dataset::range(240).batch(2, false);
    let read = |seed: Option<u64>, n: u32| {
        let outputs = (0..n)
            .map(|c| {
                let ds = distribute(ProcessingMode::DistributedEpoch, &dispatcher.target())
                    .deterministic(Deterministic {
                        split_shuffle_seed: seed,
                        ..setting(c, n)
                    })
                    .apply(&dataset)
                    .unwrap();
                all(&mut ds.iter().unwrap())
            })
            .collect();
        rebuild(outputs, 0)
    };
    let plain = read(None, 1);
    let seeded = read(Some(11), 1);
    assert_ne!(plain, seeded);
    assert_eq!(numbers(&plain), numbers(&seeded));
    assert!(
        read(Some(11), 2) == seeded,
        "two consumers read another order"
    );
}
