"""Reader checkpoints (issue 17): ``state = it.checkpoint()`` on one
iterator, ``it2.restore(state)`` on a fresh one (in this process or
another), and the epoch goes on with nothing skipped and nothing repeated.
Reads a checkpoint does not cover fail loudly."""

from __future__ import annotations

import collections
import itertools
import json

import pytest

import tfdata
from tfdata.experimental import service

from conftest import run_python


@pytest.fixture
def two_workers(dispatcher):
    workers = [
        service.WorkerServer(service.WorkerConfig(dispatcher_address=dispatcher._address))
        for _ in range(2)
    ]
    yield dispatcher
    for w in workers:
        w.stop()


def _take(it, n):
    return [int(next(it)) for _ in range(n)]


def test_a_fresh_iterator_restores_where_the_checkpoint_left_off(two_workers):
    ds = tfdata.Dataset.range(200).apply(service.distribute("parallel_epochs", two_workers.target))
    it = iter(ds)
    consumed = _take(it, 37)
    state = it.checkpoint()
    assert isinstance(state, bytes) and state
    _take(it, 5)  # read after the checkpoint: not covered, comes again
    it2 = iter(ds)
    it2.restore(state)
    consumed += [int(x) for x in it2]
    counts = collections.Counter(consumed)
    assert counts == {v: 2 for v in range(200)}  # once per worker


def read_with_restores(ds, steps):
    """The values of the batches a trainer consumed reading `ds` to its end:
    each run reads `steps[i]` batches, checkpoints, reads one more (lost with
    the trainer, so it comes again) and the next run restores there."""
    consumed, state = [], None
    for n in steps:
        it = iter(ds)
        if state is not None:
            it.restore(state)
        for _ in range(n):
            consumed.extend(int(v) for v in next(it))
        state = it.checkpoint()
        next(it)  # read after the checkpoint: not covered, comes again
    it = iter(ds)
    it.restore(state)
    for batch in it:
        consumed.extend(int(v) for v in batch)
    return consumed


def test_a_distributed_epoch_read_restores_every_split_once(two_workers):
    ds = tfdata.Dataset.range(400).shuffle(16, seed=5).batch(4).apply(
        service.distribute("distributed_epoch", two_workers.target)
    )
    assert collections.Counter(read_with_restores(ds, (9, 30, 17))) == {v: 1 for v in range(400)}


def test_a_distributed_epoch_read_of_text_files_restores_mid_file(two_workers, tmp_path):
    # Splits spread over many elements: a file's lines. The checkpoint lists
    # the lines consumed of the files in progress; the restored read skips them.
    files = []
    for f in range(8):
        path = tmp_path / f"part-{f}.txt"
        path.write_text("".join(f"{v}\n" for v in range(f * 50, f * 50 + 50)))
        files.append(str(path))
    ds = tfdata.TextLineDataset(files).shuffle(8, seed=3).batch(4).apply(
        service.distribute("distributed_epoch", two_workers.target)
    )
    consumed = read_with_restores(ds, (7, 21, 13, 30))
    assert collections.Counter(consumed) == {v: 1 for v in range(400)}


def test_a_checkpoint_restores_in_another_process(two_workers):
    trainer = """
        import json, sys
        import tfdata
        from tfdata.experimental import service
        ds = tfdata.Dataset.range(300).batch(4).apply(
            service.distribute("parallel_epochs", sys.argv[1]))
        it = iter(ds)
        state = bytes.fromhex(sys.argv[2]) if sys.argv[2] else None
        if state:
            it.restore(state)
        n = int(sys.argv[3])
        got = []
        for batch in it:
            got.extend(int(v) for v in batch)
            n -= 1
            if n == 0:
                break
        print(json.dumps({"got": got, "state": it.checkpoint().hex()}))
    """
    consumed, state = [], ""
    for steps in (11, 40, 1000):
        out = run_python(
            "import sys; sys.argv = ['trainer', %r, %r, %r]\n" % (two_workers.target, state, steps)
            + __import__("textwrap").dedent(trainer)
        )
        assert out.returncode == 0, out.stderr
        result = json.loads(out.stdout.strip().splitlines()[-1])
        consumed += result["got"]
        state = result["state"]
    assert collections.Counter(consumed) == {v: 2 for v in range(300)}


@pytest.mark.parametrize(
    "mode, copies", [("distributed_epoch", 1), ("parallel_epochs", 2)]
)
def test_consumers_of_a_shared_job_restore_together(two_workers, mode, copies):
    # Two trainers share a job (job_name): each checkpoints its own share,
    # both "crash" and both restore, in either order. Together they consume
    # the epoch: each value once per worker sequence that holds it. (Which
    # consumer gets which element is first come, first served: one may see
    # the end while the other still holds elements.)
    n = 4000
    pipeline = tfdata.Dataset.range(n).shuffle(16, seed=5).batch(4)
    readers = [
        pipeline.apply(service.distribute(mode, two_workers.target, job_name="pair-" + mode))
        for _ in range(2)
    ]
    consumed, states, ended = [], None, False
    for round_, steps in enumerate((5, 11, 7, 3)):
        its = [iter(r) for r in readers]
        if states is not None:
            for i in (0, 1) if round_ % 2 else (1, 0):
                its[i].restore(states[i])
        for it in its:
            for batch in itertools.islice(it, steps):
                consumed.extend(int(v) for v in batch)
        states = [it.checkpoint() for it in its]
        for it in its:
            next(it, None)  # read after the checkpoint: not covered, comes again
    its = [iter(r) for r in readers]
    for it, state in zip(its, states):
        it.restore(state)
    for it in its:
        for batch in it:
            consumed.extend(int(v) for v in batch)
    assert collections.Counter(consumed) == {v: copies for v in range(n)}


def test_coordinated_consumers_restore_together(two_workers):
    # Two consumers of a coordinated read step in lockstep, checkpoint at the
    # same step, read on, "crash" and restore together, in either order. Each
    # worker's sequence is consumed once, in whole rounds: value v once per
    # worker that had got past it, so counts never rise with v.
    pipeline = tfdata.Dataset.range(1 << 40).repeat()
    readers = [
        pipeline.apply(
            service.distribute(
                "parallel_epochs",
                two_workers.target,
                job_name="lockstep",
                consumer_index=c,
                num_consumers=2,
            )
        )
        for c in (0, 1)
    ]
    consumed, states = [], None
    for round_, steps in enumerate((5, 11, 7, 3, 9)):
        its = [iter(r) for r in readers]
        if states is not None:
            for i in (0, 1) if round_ % 2 else (1, 0):
                its[i].restore(states[i])
        for _ in range(steps):
            values = [int(next(it)) for it in its]
            assert [v % 2 for v in values] == [0, 1], values  # consumer c: k * 2 + c
            consumed.extend(values)
        states = [it.checkpoint() for it in its]
        for it in its:
            next(it)  # read after the checkpoint: not covered, comes again
    counts = collections.Counter(consumed)
    by_value = [counts.get(v, 0) for v in range(max(counts) + 1)]
    assert by_value[0] == 2 and all(a >= b for a, b in zip(by_value, by_value[1:])), by_value


def test_uncovered_reads_and_bad_checkpoints_raise(cluster):
    # A coordinated distributed_epoch read: a round's element names no splits.
    coordinated = tfdata.Dataset.range(10).repeat().apply(
        service.distribute(
            "distributed_epoch", cluster.target, job_name="rounds", consumer_index=0, num_consumers=1
        )
    )
    it = iter(coordinated)
    with pytest.raises(tfdata.errors.FailedPreconditionError, match="coordinated"):
        it.checkpoint()

    # A shared job's consumer's checkpoint restores only into a shared read.
    shared = tfdata.Dataset.range(10).apply(
        service.distribute("distributed_epoch", cluster.target, job_name="shared")
    )
    it = iter(shared)
    next(it)
    shared_state = it.checkpoint()
    own = tfdata.Dataset.range(10).apply(service.distribute("distributed_epoch", cluster.target))
    with pytest.raises(tfdata.errors.FailedPreconditionError, match="shared job"):
        iter(own).restore(shared_state)

    ds = tfdata.Dataset.range(10).apply(service.distribute("parallel_epochs", cluster.target))
    it = iter(ds)
    _take(it, 3)
    state = it.checkpoint()
    with pytest.raises(tfdata.errors.FailedPreconditionError, match="before"):
        it.restore(state)
    with pytest.raises(tfdata.errors.InvalidArgumentError, match="checkpoint"):
        iter(ds).restore(b"\x08\x01\x12")
    other = tfdata.Dataset.range(11).apply(service.distribute("parallel_epochs", cluster.target))
    with pytest.raises(tfdata.errors.InvalidArgumentError, match="another dataset"):
        iter(other).restore(state)
    it = iter(ds)
    it.restore(state)
    assert [int(x) for x in it] == list(range(3, 10))
