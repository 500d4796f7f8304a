"""tfdata.torch with deterministic reads (issue 35): a StatefulDataLoader's
state taken at one world size, merged (``tfdata.torch.merge_state_dicts``)
and restored at another; the rest of the epoch is read exactly once, in the
global order. Ranks are gloo processes, as in test_torch.py, against real
tf.data service servers."""

from __future__ import annotations

import collections
import json
import pickle
from concurrent.futures import ThreadPoolExecutor

import pytest

torch = pytest.importorskip("torch", reason="tfdata.torch tests need PyTorch")
sdl = pytest.importorskip("torchdata.stateful_dataloader", reason="needs torchdata's StatefulDataLoader")

import tfdata  # noqa: E402
from tfdata.experimental import service  # noqa: E402
from tfdata.torch import DistributedIterableDataset, merge_state_dicts  # noqa: E402

from conftest import run_python, wait_for  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")

LANES = 12  # world sizes 1, 2, 3, 4, 6 (x 1 DataLoader worker) divide it
N = 480


@pytest.fixture
def two_workers(dispatcher):
    workers = [service.WorkerServer(service.WorkerConfig(dispatcher_address=dispatcher._address))
               for _ in range(2)]
    wait_for(lambda: dispatcher._num_workers() == 2, what="2 workers registered")
    yield dispatcher
    for w in workers:
        w.stop()


def register(dispatcher):
    return service.register_dataset(dispatcher.target, tfdata.Dataset.range(N).shuffle(8, seed=4))


def global_sequence(dispatcher, dataset_id):
    reader = service.from_dataset_id("distributed_epoch", dispatcher.target, dataset_id,
                                     deterministic=True, num_lanes=LANES)
    return [int(x) for x in reader]


def dataset(dispatcher, dataset_id, **kwargs):
    return DistributedIterableDataset(dataset_id, dispatcher.target, job_name="det", deterministic=True,
                                      num_lanes=LANES, **kwargs)


def assert_read_once_in_order(sequence, before, after):
    position = {v: i for i, v in enumerate(sequence)}
    for share in before + after:
        places = [position[v] for v in share]
        assert places == sorted(places), "each reader reads in the global order"
    consumed = [v for share in before + after for v in share]
    assert collections.Counter(consumed) == {v: 1 for v in sequence}


@pytest.mark.parametrize("new_world_size", [2, 3])
def test_states_of_four_ranks_merge_and_restore_on_another_world_size(two_workers, new_world_size):
    # Ranks in one process (explicit rank and world size), each with a
    # StatefulDataLoader without workers: the trainer's own process reads.
    dataset_id = register(two_workers)
    sequence = global_sequence(two_workers, dataset_id)
    before, states = [], []
    for rank in range(4):
        loader = sdl.StatefulDataLoader(dataset(two_workers, dataset_id, rank=rank, world_size=4),
                                        batch_size=None, num_workers=0)
        it = iter(loader)
        before.append([int(next(it)) for _ in range(23)])
        states.append(loader.state_dict())
        next(it)  # read after the state: lost with the trainer
        del it, loader
    assert before[1] == sequence[1::4][:23]  # rank r reads positions r, r + 4, ...
    merged = merge_state_dicts(states)
    merged = pickle.loads(pickle.dumps(merged))  # saved with the model
    after = []
    for rank in range(new_world_size):
        ds = dataset(two_workers, dataset_id, rank=rank, world_size=new_world_size)
        ds.load_state_dict(merged)
        after.append([int(x) for x in sdl.StatefulDataLoader(ds, batch_size=None, num_workers=0)])
    assert_read_once_in_order(sequence, before, after)


def test_an_unmerged_state_of_another_world_size_is_refused(two_workers):
    dataset_id = register(two_workers)
    ds = dataset(two_workers, dataset_id, rank=1, world_size=4)
    it = iter(ds)
    next(it)
    state = ds.state_dict()
    assert state["deterministic"]["world_size"] == 4 and state["deterministic"]["consumer_index"] == 1
    other = dataset(two_workers, dataset_id, rank=1, world_size=2)
    with pytest.raises(ValueError, match="merge_state_dicts"):
        other.load_state_dict(state)
    # The same rank of the same world size continues its own state.
    same = dataset(two_workers, dataset_id, rank=1, world_size=4)
    same.load_state_dict(state)
    rest = [int(x) for x in same]
    assert len(rest) == N // 4 - 1
    # An ordinary read's state is not a deterministic one's, and lanes matter.
    ordinary = DistributedIterableDataset(dataset_id, two_workers.target, job_name="det")
    with pytest.raises(ValueError, match="deterministic"):
        ordinary.load_state_dict(state)
    with pytest.raises(ValueError, match="num_lanes"):
        DistributedIterableDataset(dataset_id, two_workers.target, job_name="det", deterministic=True,
                                   num_lanes=24, rank=1, world_size=4).load_state_dict(state)


def test_merge_state_dicts_refuses_what_does_not_merge(two_workers):
    dataset_id = register(two_workers)
    with pytest.raises(TypeError, match="list or tuple"):
        merge_state_dicts({"format": 1})
    with pytest.raises(ValueError, match="empty"):
        merge_state_dicts([])
    ordinary = DistributedIterableDataset(dataset_id, two_workers.target, job_name="plain")
    it = iter(ordinary)
    next(it)
    with pytest.raises(ValueError, match="deterministic"):
        merge_state_dicts([ordinary.state_dict()])
    pair = [dataset(two_workers, dataset_id, rank=r, world_size=2) for r in range(2)]
    its = [iter(d) for d in pair]
    for it in its:
        next(it)
    next(its[0])  # rank 0 one step ahead: not one step's states
    with pytest.raises(tfdata.errors.FailedPreconditionError):
        merge_state_dicts([d.state_dict() for d in pair])
    with pytest.raises(tfdata.errors.InvalidArgumentError):
        merge_state_dicts([pair[0].state_dict()])  # rank 1 missing


def test_configuration_errors(two_workers):
    target = two_workers.target
    with pytest.raises(ValueError, match="distributed_epoch"):
        DistributedIterableDataset("1", target, "parallel_epochs", "j", deterministic=True)
    with pytest.raises(ValueError, match="exclude"):
        DistributedIterableDataset("1", target, "parallel_epochs", "j", deterministic=True,
                                   coordinated_reads=True)
    with pytest.raises(ValueError, match="requires `deterministic=True`"):
        DistributedIterableDataset("1", target, job_name="j", num_lanes=4)
    with pytest.raises(ValueError, match="divide"):
        DistributedIterableDataset("1", target, job_name="j", deterministic=True, num_lanes=8,
                                   rank=0, world_size=3)
    ds = DistributedIterableDataset(register(two_workers), target, job_name="j", deterministic=True,
                                    num_lanes=8)
    loader = torch.utils.data.DataLoader(ds, batch_size=None, num_workers=3, multiprocessing_context="fork")
    with pytest.raises(ValueError, match="divide"):
        list(loader)


RANK_SCRIPT = """
import json, pickle
import torch.distributed as dist
from torchdata.stateful_dataloader import StatefulDataLoader
from tfdata.torch import DistributedIterableDataset, merge_state_dicts

config = json.loads({config!r})
dist.init_process_group("gloo", init_method=config["init"], rank=config["rank"],
                        world_size=config["world_size"])
ds = DistributedIterableDataset(config["dataset_id"], config["target"], job_name="gloo-det",
                                deterministic=True, num_lanes=config["lanes"])
if config["merged"]:
    ds.load_state_dict(pickle.loads(bytes.fromhex(config["merged"])))
loader = StatefulDataLoader(ds, batch_size=None, num_workers=0)
it = iter(loader)
read, merged = [], None
if config["steps"] is None:
    read = [int(x) for x in it]
else:
    read = [int(next(it)) for _ in range(config["steps"])]
    states = [None] * config["world_size"] if config["rank"] == 0 else None
    dist.gather_object(loader.state_dict(), states, dst=0)
    if config["rank"] == 0:
        merged = pickle.dumps(merge_state_dicts(states)).hex()
    next(it)  # read after the state: lost with the trainers
print(json.dumps({{"rank_world": list(ds.rank_and_world_size()), "read": read, "merged": merged}}))
dist.destroy_process_group()
"""


def run_ranks(tmp_path, name, world_size, target, dataset_id, steps=None, merged=None):
    def run(rank):
        config = dict(init=f"file://{tmp_path}/{name}", rank=rank, world_size=world_size, target=target,
                      dataset_id=dataset_id, lanes=LANES, steps=steps, merged=merged)
        return run_python(RANK_SCRIPT.format(config=json.dumps(config)), timeout=240)

    with ThreadPoolExecutor(world_size) as pool:
        procs = list(pool.map(run, range(world_size)))
    for p in procs:
        assert p.returncode == 0, p.stderr
    return [json.loads(p.stdout.strip().splitlines()[-1]) for p in procs]


@pytest.mark.parametrize("new_world_size", [2, 3])
def test_gloo_ranks_change_world_size_mid_epoch(two_workers, tmp_path, new_world_size):
    # Four trainer processes (a gloo group) read 31 steps each, gather their
    # loaders' states on rank 0, which merges them; the run restarts with
    # 2 or 3 processes that load the merged state and read the rest.
    dataset_id = register(two_workers)
    sequence = global_sequence(two_workers, dataset_id)
    first = run_ranks(tmp_path, "four", 4, two_workers.target, dataset_id, steps=31)
    assert [r["rank_world"] for r in first] == [[r, 4] for r in range(4)]  # torch.distributed's
    merged = first[0]["merged"]
    assert merged and all(r["merged"] is None for r in first[1:])
    second = run_ranks(tmp_path, f"again-{new_world_size}", new_world_size, two_workers.target,
                       dataset_id, merged=merged)
    before, after = [r["read"] for r in first], [r["read"] for r in second]
    assert before[2] == sequence[2::4][:31]
    assert_read_once_in_order(sequence, before, after)
    # Each new rank reads its share of what remained, in the global order:
    # rank r of m the remaining positions r, r + m, ... of its lanes.
    assert all(after), after


def test_set_epoch_reads_that_epoch_of_the_global_order(two_workers):
    # Each pass is a reader of its own; its epoch is set_epoch's, so that a
    # shuffle reshuffled each iteration gives epoch e what the e-th read of
    # one dataset gives (and not epoch 0's order every time).
    dataset_id = service.register_dataset(two_workers.target, tfdata.Dataset.range(96).shuffle(96, seed=2))
    reader = service.from_dataset_id("distributed_epoch", two_workers.target, dataset_id,
                                     deterministic=True, num_lanes=LANES)
    epochs = [[int(x) for x in reader] for _ in range(3)]
    assert epochs[0] != epochs[1] != epochs[2]
    ds = dataset(two_workers, dataset_id)
    for epoch in (2, 0, 1):
        ds.set_epoch(epoch)
        assert [int(x) for x in ds] == epochs[epoch], epoch
    # Without set_epoch, the passes of one process are epochs 0, 1, ...
    fresh = DistributedIterableDataset(dataset_id, two_workers.target, job_name="det-passes",
                                       deterministic=True, num_lanes=LANES)
    assert [[int(x) for x in fresh] for _ in range(2)] == epochs[:2]


def test_ranks_with_dataloader_workers_merge_at_any_step(two_workers):
    # Two ranks with two DataLoader workers each (4 readers): at an odd step
    # a rank's workers are one element apart (the loader takes from them in
    # turn). The states still merge, and restore on 3 ranks without workers.
    dataset_id = register(two_workers)
    sequence = global_sequence(two_workers, dataset_id)
    before, states = [], []
    for rank in range(2):
        loader = sdl.StatefulDataLoader(dataset(two_workers, dataset_id, rank=rank, world_size=2),
                                        batch_size=None, num_workers=2, multiprocessing_context="fork")
        it = iter(loader)
        taken = [int(next(it)) for _ in range(13)]
        states.append(loader.state_dict())
        del it, loader
        # Worker w of rank r is reader 2r + w of 4: the loader alternates.
        before.extend([taken[0::2], taken[1::2]])
    merged = merge_state_dicts(states)
    after = []
    for rank in range(3):
        ds = dataset(two_workers, dataset_id, rank=rank, world_size=3)
        ds.load_state_dict(merged)
        after.append([int(x) for x in sdl.StatefulDataLoader(ds, batch_size=None, num_workers=0)])
    assert_read_once_in_order(sequence, before, after)
    # States of different steps are still refused.
    loader = sdl.StatefulDataLoader(dataset(two_workers, dataset_id, rank=1, world_size=2),
                                    batch_size=None, num_workers=2, multiprocessing_context="fork")
    it = iter(loader)
    for _ in range(14):
        next(it)
    with pytest.raises(tfdata.errors.FailedPreconditionError, match="different steps"):
        merge_state_dicts([states[0], loader.state_dict()])
