"""Deterministic reads (issue 35) from Python: ``distribute(...,
deterministic=True)`` gives one global order per epoch whatever the number of
workers and consumers; the checkpoints of all consumers at one step merge
(``tfdata.experimental.merge_checkpoints``) into one that restores on any
number of consumers dividing ``num_lanes``. Real servers on real sockets:
in-process workers, and worker processes killed with SIGKILL."""

from __future__ import annotations

import collections
import signal

import pytest

import tfdata
from tfdata.experimental import merge_checkpoints, service

from conftest import TfdataPythonProcess, wait_for

LANES = 12  # divisible by 1, 2, 3, 4 and 6 consumers
N = 360


def pipeline():
    # A seeded shuffle inside each lane: the order is the pipeline's, not
    # range's. (Built-in ops only: worker processes run it too.)
    return tfdata.Dataset.range(N).shuffle(8, seed=11)


def add_workers(dispatcher, workers, count):
    for _ in range(count):
        workers.append(service.WorkerServer(service.WorkerConfig(dispatcher_address=dispatcher._address)))
    wait_for(lambda: dispatcher._num_workers() >= len(workers), what=f"{len(workers)} workers registered")


@pytest.fixture
def workers(dispatcher):
    started = []
    yield started
    for w in started:
        w.stop()


def readers(dispatcher, num_consumers, *, job_name=None, lanes=LANES, seed=5, dataset_id=None):
    """One deterministic read per consumer, from the registered pipeline."""
    if dataset_id is None:
        dataset_id = service.register_dataset(dispatcher.target, pipeline())
    return [
        service.from_dataset_id(
            "distributed_epoch", dispatcher.target, dataset_id, job_name=job_name,
            consumer_index=c if num_consumers > 1 else None,
            num_consumers=num_consumers if num_consumers > 1 else None,
            deterministic=True, num_lanes=lanes, split_shuffle_seed=seed)
        for c in range(num_consumers)
    ]


def ints(iterable):
    return [int(x) for x in iterable]


def assert_shares_of(global_sequence, shares):
    """`shares` (what each consumer read) are ordered subsequences of
    `global_sequence` that together hold each of its elements once."""
    position = {v: i for i, v in enumerate(global_sequence)}
    assert len(position) == len(global_sequence), "the pipeline's values are distinct"
    for share in shares:
        places = [position[v] for v in share]
        assert places == sorted(places), "a consumer reads its share in the global order"
    everything = [v for share in shares for v in share]
    assert collections.Counter(everything) == collections.Counter(global_sequence)


def interleave(shares):
    """Consumer c of n reads global positions c, c + n, ...: with lanes of
    equal length, its j-th element is at position j * n + c."""
    n = len(shares)
    out = [None] * sum(map(len, shares))
    for c, share in enumerate(shares):
        out[c::n] = share
    return out


def test_the_global_sequence_does_not_depend_on_workers_or_consumers(dispatcher, workers):
    add_workers(dispatcher, workers, 1)
    dataset_id = service.register_dataset(dispatcher.target, pipeline())
    (one,) = readers(dispatcher, 1, dataset_id=dataset_id)
    global_sequence = ints(one)
    assert sorted(global_sequence) == list(range(N))
    assert global_sequence != sorted(global_sequence)  # the shuffles are in it

    add_workers(dispatcher, workers, 1)  # now 2 workers serve the lanes
    for num_consumers in (1, 2, 3):
        shares = [ints(r) for r in readers(dispatcher, num_consumers, dataset_id=dataset_id)]
        assert_shares_of(global_sequence, shares)
        if len({len(s) for s in shares}) == 1:
            assert interleave(shares) == global_sequence, num_consumers
    # Element for element the same again, with 2 workers and 1 consumer.
    (again,) = readers(dispatcher, 1, dataset_id=dataset_id)
    assert ints(again) == global_sequence


def test_lanes_and_the_split_seed_define_the_order(dispatcher, workers):
    add_workers(dispatcher, workers, 2)
    dataset_id = service.register_dataset(dispatcher.target, pipeline())

    def read(lanes, seed):
        (r,) = readers(dispatcher, 1, lanes=lanes, seed=seed, dataset_id=dataset_id)
        return ints(r)

    base = read(LANES, 5)
    assert read(LANES, 5) == base
    assert sorted(read(LANES, 6)) == sorted(base) and read(LANES, 6) != base
    assert sorted(read(4, 5)) == sorted(base)


def test_each_iteration_is_the_next_epoch(dispatcher, workers):
    # Epoch e of a read is what the e-th local iteration would give: a
    # shuffle reshuffled each iteration differs between epochs, and epoch e
    # is the same whichever consumers and workers read it.
    add_workers(dispatcher, workers, 2)
    reshuffled = tfdata.Dataset.range(120).shuffle(120, seed=3)
    dataset_id = service.register_dataset(dispatcher.target, reshuffled)
    (one,) = readers(dispatcher, 1, dataset_id=dataset_id)
    epochs = [ints(one), ints(one)]
    assert sorted(epochs[0]) == sorted(epochs[1]) == list(range(120))
    assert epochs[0] != epochs[1]
    pair = readers(dispatcher, 2, dataset_id=dataset_id)
    for epoch in epochs:
        assert_shares_of(epoch, [ints(r) for r in pair])


def read_steps(iterators, steps):
    return [[int(next(it)) for _ in range(steps)] for it in iterators]


@pytest.mark.parametrize("restore_on", [2, 3])
def test_four_consumers_checkpoint_merge_and_restore_on_fewer(dispatcher, workers, restore_on):
    add_workers(dispatcher, workers, 2)
    dataset_id = service.register_dataset(dispatcher.target, pipeline())
    (one,) = readers(dispatcher, 1, dataset_id=dataset_id)
    global_sequence = ints(one)

    four = [iter(r) for r in readers(dispatcher, 4, dataset_id=dataset_id, job_name="four")]
    before = read_steps(four, 17)
    states = [it.checkpoint() for it in four]
    read_steps(four, 3)  # read after the checkpoints: lost with the trainers
    for it in four:
        it.close()
    merged = merge_checkpoints(list(reversed(states)))  # any order
    assert isinstance(merged, bytes) and merged

    restored = [iter(r) for r in readers(dispatcher, restore_on, dataset_id=dataset_id, job_name="after")]
    for it in restored:
        it.restore(merged)
    after = [ints(it) for it in restored]
    # Before and after, every element once; each consumer in global order.
    assert_shares_of(global_sequence, before + after)
    # What was read before the checkpoint is the first 17 of each share.
    for c, share in enumerate(before):
        assert share == global_sequence[c::4][:17]
    # In global order, the concatenation is one uninterrupted read.
    position = {v: i for i, v in enumerate(global_sequence)}
    consumed = sorted((v for share in before + after for v in share), key=position.get)
    assert consumed == global_sequence


def test_restore_survives_killed_and_added_worker_processes(dispatcher):
    # Workers in processes of their own: one is SIGKILLed mid-read and
    # another added before the restore; the sequence does not change.
    procs = [TfdataPythonProcess("worker", "--dispatcher-address", dispatcher._address) for _ in range(2)]
    try:
        wait_for(lambda: dispatcher._num_workers() == 2, what="2 worker processes registered")
        dataset_id = service.register_dataset(dispatcher.target, pipeline())
        (one,) = readers(dispatcher, 1, dataset_id=dataset_id)
        global_sequence = ints(one)
        pair = [iter(r) for r in readers(dispatcher, 2, dataset_id=dataset_id)]
        before = read_steps(pair, 40)
        procs[0].stop(signal.SIGKILL)
        before = [b + s for b, s in zip(before, read_steps(pair, 20))]
        states = [it.checkpoint() for it in pair]
        for it in pair:
            it.close()
        procs.append(TfdataPythonProcess("worker", "--dispatcher-address", dispatcher._address))
        merged = merge_checkpoints(states)
        three = [iter(r) for r in readers(dispatcher, 3, dataset_id=dataset_id)]
        for it in three:
            it.restore(merged)
        assert_shares_of(global_sequence, before + [ints(it) for it in three])
    finally:
        for p in procs:
            p.stop(signal.SIGKILL)


def test_merge_refuses_what_is_not_one_step_of_one_read(dispatcher, workers):
    add_workers(dispatcher, workers, 1)
    dataset_id = service.register_dataset(dispatcher.target, pipeline())
    pair = [iter(r) for r in readers(dispatcher, 2, dataset_id=dataset_id)]
    read_steps(pair, 5)
    next(pair[0])  # consumer 0 is one step ahead
    states = [it.checkpoint() for it in pair]
    with pytest.raises(tfdata.errors.FailedPreconditionError, match="6") as raised:
        merge_checkpoints(states)
    assert "5" in str(raised.value)
    with pytest.raises(tfdata.errors.InvalidArgumentError):
        merge_checkpoints(states[:1])  # consumer 1's lanes are missing
    with pytest.raises(tfdata.errors.InvalidArgumentError):
        merge_checkpoints([states[0], states[0]])  # consumer 0 twice
    with pytest.raises(tfdata.errors.InvalidArgumentError):
        merge_checkpoints([b"\x08\x01\x12", states[1]])
    # One consumer's own checkpoint restores only into the same consumer.
    (three,) = readers(dispatcher, 3, dataset_id=dataset_id)[:1]
    with pytest.raises(tfdata.errors.InvalidArgumentError, match="merge"):
        iter(three).restore(states[0])
    ordinary = tfdata.Dataset.range(10).apply(service.distribute("distributed_epoch", dispatcher.target))
    it = iter(ordinary)
    next(it)
    with pytest.raises(tfdata.errors.InvalidArgumentError):
        merge_checkpoints([it.checkpoint()])


def test_merge_checkpoints_argument_types():
    with pytest.raises(TypeError, match="list or tuple"):
        merge_checkpoints(b"one checkpoint")
    with pytest.raises(TypeError, match="list or tuple"):
        merge_checkpoints(x for x in [b""])
    with pytest.raises(TypeError, match=r"checkpoints\[1\]"):
        merge_checkpoints([b"a", "b"])
    with pytest.raises(ValueError, match="empty"):
        merge_checkpoints([])


TARGET = "grpc://localhost:1"  # never reached: the arguments are refused first


@pytest.mark.parametrize(
    "kwargs, error, match",
    [
        (dict(processing_mode="parallel_epochs", deterministic=True), ValueError, "distributed_epoch"),
        (dict(processing_mode=service.ShardingPolicy.FILE, deterministic=True), ValueError, "distributed_epoch"),
        (dict(num_lanes=4), ValueError, "requires `deterministic=True`"),
        (dict(split_shuffle_seed=1), ValueError, "requires `deterministic=True`"),
        (dict(reorder_window_elements=8), ValueError, "requires `deterministic=True`"),
        (dict(deterministic="yes"), TypeError, "`deterministic` must be a bool"),
        (dict(deterministic=True, num_lanes="4"), TypeError, "`num_lanes` must be an integer"),
        (dict(deterministic=True, num_lanes=4.0), TypeError, "`num_lanes` must be an integer"),
        (dict(deterministic=True, num_lanes=0), ValueError, "between 1 and 4096"),
        (dict(deterministic=True, num_lanes=4097), ValueError, "between 1 and 4096"),
        (dict(deterministic=True, split_shuffle_seed=-1), ValueError, "2\\*\\*64"),
        (dict(deterministic=True, split_shuffle_seed=1 << 64), ValueError, "2\\*\\*64"),
        (dict(deterministic=True, split_shuffle_seed="7"), TypeError, "`split_shuffle_seed` must be an integer"),
        (dict(deterministic=True, num_lanes=8, consumer_index=0, num_consumers=3), ValueError,
         "multiple of `num_consumers`"),
        (dict(deterministic=True, consumer_index=2, num_consumers=2), ValueError, "consumer_index"),
        (dict(deterministic=True, consumer_index=0, num_consumers=0), ValueError, "num_consumers"),
        (dict(deterministic=True, consumer_index=0), ValueError, "both"),
        (dict(deterministic=True, cross_trainer_cache=service.CrossTrainerCache("t")), ValueError,
         "cross_trainer_cache"),
        (dict(deterministic=True, reorder_window_bytes=0), ValueError, "positive"),
    ],
)
def test_arguments_are_checked_as_tensorflow_does(kwargs, error, match):
    kwargs = {"processing_mode": "distributed_epoch", **kwargs}
    mode = kwargs.pop("processing_mode")
    with pytest.raises(error, match=match):
        tfdata.Dataset.range(3).apply(service.distribute(mode, TARGET, **kwargs))
    with pytest.raises(error, match=match):
        service.from_dataset_id(mode, TARGET, "1", **kwargs)


def test_the_processing_mode_is_checked_when_distribute_is_called():
    # As TensorFlow checks the processing mode: before the dataset is given.
    with pytest.raises(ValueError, match="distributed_epoch"):
        service.distribute("parallel_epochs", TARGET, deterministic=True)
    with pytest.raises(ValueError, match="multiple"):
        service.distribute("distributed_epoch", TARGET, consumer_index=0, num_consumers=5,
                           deterministic=True)


def test_consumers_need_no_job_name_and_default_to_24_lanes(dispatcher, workers):
    # Coordinated reads need a job_name with num_consumers; deterministic
    # consumers read lanes, which any job's workers serve.
    add_workers(dispatcher, workers, 1)
    dataset_id = service.register_dataset(dispatcher.target, tfdata.Dataset.range(48))
    single = service.from_dataset_id("distributed_epoch", dispatcher.target, dataset_id, deterministic=True)
    global_sequence = ints(single)
    shares = [
        ints(service.from_dataset_id("distributed_epoch", dispatcher.target, dataset_id, consumer_index=c,
                                     num_consumers=8, deterministic=True))
        for c in range(8)
    ]
    assert_shares_of(global_sequence, shares)
    with pytest.raises(ValueError, match="multiple of `num_consumers`"):
        service.from_dataset_id("distributed_epoch", dispatcher.target, dataset_id, consumer_index=0,
                                num_consumers=5, deterministic=True)
