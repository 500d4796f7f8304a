"""tfdata.torch: DistributedIterableDataset in real DataLoader worker processes
against real tf.data service servers (the conftest fixtures)."""

from __future__ import annotations

import collections
import itertools
import json
import pickle
import sys
import time
import warnings

import numpy as np
import pytest

torch = pytest.importorskip(
    "torch",
    reason="tfdata.torch tests need PyTorch (`pip install torch`: ~3.2 GB of wheels with its CUDA "
    "dependencies, ~5.6 GB installed)",
)
from torch.utils.data import DataLoader, get_worker_info  # noqa: E402

import tfdata  # noqa: E402
from tfdata.experimental import service  # noqa: E402
from tfdata.torch import DistributedIterableDataset, consumer_assignment, to_torch  # noqa: E402

from conftest import run_python  # noqa: E402

# The forked DataLoader workers use torch and tfdata only, never JAX, which
# the suite's JAX tests may have started in this process (it warns on fork).
pytestmark = pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")

# Fork is Linux's default; other platforms' DataLoaders spawn workers.
FORK = "fork" if sys.platform.startswith("linux") else None


def loader(ds, num_workers=2, **kwargs):
    return DataLoader(ds, batch_size=None, num_workers=num_workers,
                      multiprocessing_context=FORK if num_workers else None, **kwargs)


class Tagged(DistributedIterableDataset):
    """Yields (DataLoader worker id, element), to see who read what."""

    def __iter__(self):
        info = get_worker_info()
        worker_id = -1 if info is None else info.id
        for element in super().__iter__():
            yield worker_id, element


def by_worker(pairs):
    out = collections.defaultdict(list)
    for worker_id, element in pairs:
        out[int(worker_id)].append(int(element))
    return dict(out)


def make_range_30():
    return tfdata.Dataset.range(30)


# ---- Index arithmetic ----


def test_consumer_assignment_is_a_bijection_onto_all_consumers():
    for world_size in (1, 2, 3):
        for num_workers in (1, 2, 4):
            seen = []
            for rank in range(world_size):
                for worker_id in range(num_workers):
                    index, total = consumer_assignment(rank, world_size, worker_id, num_workers)
                    assert index == rank * num_workers + worker_id
                    assert total == world_size * num_workers
                    seen.append(index)
            assert sorted(seen) == list(range(world_size * num_workers))
    assert consumer_assignment(1, 2, 2, 3) == (5, 6)


@pytest.mark.parametrize("args", [(2, 2, 0, 1), (0, 1, 1, 1), (-1, 2, 0, 1), (0, 0, 0, 1), (0, 1, 0, 0)])
def test_consumer_assignment_rejects_out_of_range(args):
    with pytest.raises(ValueError):
        consumer_assignment(*args)


class FakeWorkerInfo:
    def __init__(self, id, num_workers, seed=1234):
        self.id, self.num_workers, self.seed = id, num_workers, seed + id


def test_reader_options_map_rank_and_worker(monkeypatch):
    ds = DistributedIterableDataset("1000", "grpc://localhost:1", "parallel_epochs", "job",
                                    coordinated_reads=True, rank=1, world_size=2)
    monkeypatch.setattr(torch.utils.data, "get_worker_info", lambda: FakeWorkerInfo(2, 3))
    options = ds.reader_options()
    assert (options["consumer_index"], options["num_consumers"]) == (5, 6)
    assert options["num_readers"] == 6
    assert options["job_name"] == "job/epoch-0"  # several ranks: no per-loader seed in the name
    assert ds.reader_options()["job_name"] == "job/epoch-1"  # the next pass of this process
    ds.set_epoch(7)
    assert ds.reader_options()["job_name"] == "job/epoch-7"


def test_reader_options_single_rank_name_follows_the_loaders_seed(monkeypatch):
    ds = DistributedIterableDataset("1000", "grpc://localhost:1", job_name="job")
    monkeypatch.setattr(torch.utils.data, "get_worker_info", lambda: FakeWorkerInfo(1, 2, seed=99))
    options = ds.reader_options()
    assert options["job_name"] == "job/loader-99/epoch-0"  # seed - id: the same in every worker
    assert options["consumer_index"] is None and options["num_consumers"] is None
    monkeypatch.setattr(torch.utils.data, "get_worker_info", lambda: None)
    ds.set_epoch(3)
    assert ds.reader_options()["job_name"] == "job/epoch-3"


def test_rank_defaults_to_torch_distributed(monkeypatch):
    import tfdata.torch as tt

    ds = DistributedIterableDataset("1000", "grpc://localhost:1", "parallel_epochs", "job",
                                    coordinated_reads=True)
    assert ds.rank_and_world_size() == (0, 1)
    monkeypatch.setattr(tt, "_distributed_rank_and_world_size", lambda: (3, 4))
    assert ds.rank_and_world_size() == (3, 4)
    # Pickling (spawned DataLoader workers) fixes the main process's values.
    state = pickle.loads(pickle.dumps(ds))
    monkeypatch.setattr(tt, "_distributed_rank_and_world_size", lambda: None)
    assert state.rank_and_world_size() == (3, 4)
    assert ds.rank_and_world_size() == (0, 1)
    explicit = DistributedIterableDataset("1000", "grpc://localhost:1", job_name="j", rank=1, world_size=2)
    monkeypatch.setattr(tt, "_distributed_rank_and_world_size", lambda: (3, 4))
    assert explicit.rank_and_world_size() == (1, 2)


def test_configuration_errors():
    target = "grpc://localhost:1"
    with pytest.raises(ValueError, match="job_name"):
        DistributedIterableDataset("1", target, "distributed_epoch")
    with pytest.raises(ValueError, match="parallel_epochs"):
        DistributedIterableDataset("1", target, "distributed_epoch", "j", coordinated_reads=True)
    with pytest.raises(ValueError, match="job_name"):
        DistributedIterableDataset("1", target, "parallel_epochs", coordinated_reads=True)
    with pytest.raises(ValueError, match="processing mode"):
        DistributedIterableDataset("1", target, "sometimes", "j")
    with pytest.raises(ValueError, match="rank"):
        DistributedIterableDataset("1", target, job_name="j", rank=2, world_size=2)
    with pytest.raises(TypeError, match="dataset"):
        DistributedIterableDataset(1.5, target, job_name="j")


# ---- Conversion ----


def test_to_torch_converts_zero_copy_and_keeps_structure():
    Point = collections.namedtuple("Point", "x y")
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    element = {"a": (array, np.int64(7)), "b": [np.array([True, False])], "s": b"bytes",
               "strings": np.array([b"x", b"yy"], dtype=object), "p": Point(np.int32(1), np.uint8(2))}
    out = to_torch(element)
    assert isinstance(out["a"], tuple) and isinstance(out["b"], list) and isinstance(out["p"], Point)
    assert out["a"][0].dtype == torch.float32 and out["a"][0].shape == (2, 3)
    out["a"][0][0, 0] = 100.0
    assert array[0, 0] == 100.0  # shares the numpy buffer
    assert out["a"][1].dtype == torch.int64 and out["a"][1].shape == () and out["a"][1].item() == 7
    assert out["b"][0].dtype == torch.bool and out["b"][0].tolist() == [True, False]
    assert out["s"] == b"bytes"
    assert isinstance(out["strings"], np.ndarray) and out["strings"].tolist() == [b"x", b"yy"]
    assert out["p"].x.dtype == torch.int32 and out["p"].y.dtype == torch.uint8


def test_to_torch_copies_read_only_arrays_without_warning():
    array = np.arange(3, dtype=np.int16)
    array.setflags(write=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tensor = to_torch(array)
    assert tensor.dtype == torch.int16 and tensor.tolist() == [0, 1, 2]
    assert to_torch(np.arange(5)[::-1]).tolist() == [4, 3, 2, 1, 0]  # negative stride


def test_elements_arrive_as_tensors_in_dataloader_workers(cluster):
    n = 8
    source = tfdata.Dataset.from_tensor_slices({
        "image": np.arange(n * 6, dtype=np.float32).reshape(n, 2, 3),
        "label": np.arange(n, dtype=np.int64),
        "mask": np.arange(n) % 2 == 0,
        "name": np.array([f"item{i}".encode() for i in range(n)]),
    }).map(lambda e: (e, e["label"] * 2))
    dataset_id = service.register_dataset(cluster.target, source)
    ds = DistributedIterableDataset(dataset_id, cluster.target, job_name="tensors")
    elements = list(loader(ds))
    assert len(elements) == n
    seen = set()
    for features, doubled in elements:
        assert isinstance(features, dict) and set(features) == {"image", "label", "mask", "name"}
        assert isinstance(features["image"], torch.Tensor)
        assert features["image"].dtype == torch.float32 and features["image"].shape == (2, 3)
        assert features["label"].dtype == torch.int64 and features["label"].shape == ()
        assert features["mask"].dtype == torch.bool
        assert isinstance(doubled, torch.Tensor) and doubled.item() == 2 * features["label"].item()
        i = features["label"].item()
        assert features["name"] == f"item{i}".encode()
        assert features["image"].flatten().tolist() == list(range(i * 6, i * 6 + 6))
        assert bool(features["mask"]) == (i % 2 == 0)
        seen.add(i)
    assert seen == set(range(n))


def test_to_tensors_false_yields_numpy(cluster):
    dataset_id = service.register_dataset(cluster.target, tfdata.Dataset.range(4).batch(2))
    ds = DistributedIterableDataset(dataset_id, cluster.target, job_name="numpy", to_tensors=False)
    batches = list(ds)
    assert all(isinstance(b, np.ndarray) for b in batches)
    assert sorted(np.concatenate(batches).tolist()) == [0, 1, 2, 3]


# ---- Sharing among DataLoader workers ----


@tfdata.register_function("torch_test_slow_identity")
def _slow_identity(x):
    time.sleep(0.005)
    return x


def test_distributed_epoch_reads_each_element_once_across_workers(cluster):
    # Produced slower than the DataLoader reads (5 ms an element, on the
    # in-process worker): a fast job's splits are leased in bulk and produced
    # at once, and the first reader to connect could hold all of it before
    # the second asks.
    n = 200
    slow = tfdata.Dataset.range(n).map("torch_test_slow_identity")
    dataset_id = service.register_dataset(cluster.target, slow)
    ds = Tagged(dataset_id, cluster.target, "distributed_epoch", job_name="shared")
    read = by_worker(loader(ds))
    assert sorted(x for xs in read.values() for x in xs) == list(range(n))
    # Both worker processes read (the DataLoader waits for each in turn, so
    # neither can drain the job alone); between them, every element once.
    assert set(read) == {0, 1} and all(read.values())


def test_distributed_epoch_epochs_with_set_epoch(cluster):
    n = 50
    dataset_id = service.register_dataset(cluster.target, tfdata.Dataset.range(n))
    ds = DistributedIterableDataset(dataset_id, cluster.target, job_name="epochs")
    dl = loader(ds)
    for epoch in range(3):
        ds.set_epoch(epoch)
        assert sorted(int(x) for x in dl) == list(range(n)), f"epoch {epoch}"


@pytest.mark.parametrize("persistent_workers", [False, True])
def test_distributed_epoch_epochs_without_set_epoch(cluster, persistent_workers):
    n = 40
    dataset_id = service.register_dataset(cluster.target, tfdata.Dataset.range(n))
    ds = DistributedIterableDataset(dataset_id, cluster.target, job_name="auto-epochs")
    dl = loader(ds, persistent_workers=persistent_workers)
    for epoch in range(2):
        assert sorted(int(x) for x in dl) == list(range(n)), f"epoch {epoch}"


def test_reusing_a_finished_job_name_reads_nothing_and_warns(cluster):
    # What set_epoch is for: a named job's pass is read once.
    dataset_id = service.register_dataset(cluster.target, tfdata.Dataset.range(5))
    first = DistributedIterableDataset(dataset_id, cluster.target, job_name="once")
    assert sorted(int(x) for x in first) == list(range(5))
    again = DistributedIterableDataset(dataset_id, cluster.target, job_name="once")
    with pytest.warns(RuntimeWarning, match="set_epoch"):
        assert list(again) == []
    again.set_epoch(1)
    assert sorted(int(x) for x in again) == list(range(5))


def test_factory_registers_one_dataset_for_all_workers(cluster):
    # Each worker builds and registers the pipeline; the shared dataset_id
    # makes them one dataset, hence one job, hence each element once.
    ds = DistributedIterableDataset(make_range_30, cluster.target, job_name="factory")
    assert sorted(int(x) for x in loader(ds)) == list(range(30))
    ds.set_epoch(1)
    assert sorted(int(x) for x in loader(ds)) == list(range(30))


def test_dataset_is_registered_at_construction(cluster):
    ds = DistributedIterableDataset(tfdata.Dataset.range(0, 60, 2), cluster.target, job_name="direct")
    clone = pickle.loads(pickle.dumps(ds))  # only configuration: picklable
    assert sorted(int(x) for x in loader(clone)) == list(range(0, 60, 2))


def test_spawned_workers_get_a_pickled_copy(cluster):
    dataset_id = service.register_dataset(cluster.target, tfdata.Dataset.range(20))
    ds = DistributedIterableDataset(dataset_id, cluster.target, job_name="spawned")
    dl = DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context="spawn")
    assert sorted(int(x) for x in dl) == list(range(20))


def test_parallel_epochs_shared_job_reads_each_element_once(cluster):
    n = 100
    dataset_id = service.register_dataset(cluster.target, tfdata.Dataset.range(n))
    ds = Tagged(dataset_id, cluster.target, "parallel_epochs", job_name="pe-shared")
    read = by_worker(loader(ds))
    # One tf.data service worker: one full pass, shared by the two readers.
    assert sorted(x for xs in read.values() for x in xs) == list(range(n))


def test_parallel_epochs_without_job_name_needs_a_single_reader(cluster):
    dataset_id = service.register_dataset(cluster.target, tfdata.Dataset.range(10))
    ds = DistributedIterableDataset(dataset_id, cluster.target, "parallel_epochs")
    assert sorted(int(x) for x in loader(ds, num_workers=0)) == list(range(10))
    with pytest.raises(ValueError, match="job_name"):
        list(loader(ds, num_workers=2))


# ---- Checkpoints (torchdata's StatefulDataLoader) ----


def stateful_loader(ds, num_workers):
    sdl = pytest.importorskip("torchdata.stateful_dataloader", reason="needs torchdata")
    return sdl.StatefulDataLoader(ds, batch_size=None, num_workers=num_workers,
                                  multiprocessing_context=FORK if num_workers else None)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_a_stateful_dataloader_resumes_the_epoch_exactly(cluster, num_workers):
    # The trainer takes 37 elements, saves the loader's state, takes a few
    # more (lost with the "crash"), and a fresh loader restored from the state
    # reads the rest of the epoch. With two DataLoader workers the job is
    # shared by two readers, each restoring its own share. Every element once.
    n = 300
    dataset_id = service.register_dataset(cluster.target, tfdata.Dataset.range(n))
    job = f"stateful-{num_workers}"
    dl = stateful_loader(DistributedIterableDataset(dataset_id, cluster.target, job_name=job), num_workers)
    it = iter(dl)
    before = [int(next(it)) for _ in range(37)]
    state = dl.state_dict()
    for _ in range(5):
        next(it)
    del it, dl
    restored = stateful_loader(DistributedIterableDataset(dataset_id, cluster.target, job_name=job), num_workers)
    restored.load_state_dict(state)
    after = [int(x) for x in restored]
    assert collections.Counter(before + after) == {v: 1 for v in range(n)}


def test_state_dict_between_passes_and_bad_states(cluster):
    dataset_id = service.register_dataset(cluster.target, tfdata.Dataset.range(10))
    ds = DistributedIterableDataset(dataset_id, cluster.target, job_name="states")
    ds.set_epoch(4)
    assert ds.state_dict() == {"format": 1, "epoch": 4, "epoch_set": True, "passes": 0}
    assert sorted(int(x) for x in ds) == list(range(10))
    # After the pass, until the next starts: its reader's final checkpoint.
    # Restored, nothing is left of that epoch; the pass after reads epoch 5.
    state = ds.state_dict()
    assert state["passes"] == 0 and state["job_name"] == "states/epoch-4" and state["reader"]
    other = DistributedIterableDataset(dataset_id, cluster.target, job_name="states")
    other.load_state_dict(state)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert list(other) == []
    assert other.reader_options()["job_name"] == "states/epoch-5"
    with pytest.raises(ValueError, match="not a DistributedIterableDataset state"):
        other.load_state_dict({"epoch": 1})
    with pytest.raises(ValueError, match="bytes"):
        other.load_state_dict({**state, "reader": "not bytes", "job_name": "states/epoch-5"})
    # A read a reader checkpoint does not cover fails at state_dict(): its
    # elements hold parts of splits at unknown places (batches of batches,
    # cut up again).
    spread = DistributedIterableDataset(
        service.register_dataset(
            cluster.target, tfdata.Dataset.range(12).batch(2).batch(2).unbatch().unbatch()),
        cluster.target, job_name="spread")
    it = iter(spread)
    next(it)
    with pytest.raises(tfdata.errors.FailedPreconditionError, match="part of a split"):
        spread.state_dict()


def test_coordinated_reads_give_workers_distinct_rounds(cluster):
    n = 1000
    dataset_id = service.register_dataset(cluster.target, tfdata.Dataset.range(n).repeat())
    ds = Tagged(dataset_id, cluster.target, "parallel_epochs", job_name="coordinated",
                coordinated_reads=True)
    read = by_worker(itertools.islice(loader(ds), 40))
    # Consumer c of 2 reads rounds c, c + 2, ...: of the one tf.data service
    # worker's stream 0, 1, 2, ..., worker 0 gets the even and worker 1 the odd.
    assert read == {0: list(range(0, 40, 2)), 1: list(range(1, 40, 2))}


RANK_SCRIPT = """
import itertools, json
import torch, torch.distributed as dist
from torch.utils.data import DataLoader, get_worker_info
from tfdata.torch import DistributedIterableDataset

config = json.loads({config!r})
dist.init_process_group("gloo", init_method=config["init"], rank=config["rank"], world_size=2)

class Tagged(DistributedIterableDataset):
    def __iter__(self):
        for x in super().__iter__():
            yield get_worker_info().id, x

ds = Tagged(config["dataset_id"], config["target"], config["mode"], "ranks",
            coordinated_reads=config["coordinated"])
ds.set_epoch(0)
dl = DataLoader(ds, batch_size=None, num_workers=2, multiprocessing_context="fork")
it = iter(dl) if config["count"] is None else itertools.islice(iter(dl), config["count"])
pairs = [(int(w), int(x)) for w, x in it]
print(json.dumps({{"rank_world": list(ds.rank_and_world_size()), "pairs": pairs}}))
dist.destroy_process_group()
"""


def run_ranks(tmp_path, target, dataset_id, mode, coordinated, count):
    """Two trainer processes (a gloo group of 2), each with 2 DataLoader workers."""
    from concurrent.futures import ThreadPoolExecutor

    def run(rank):
        config = dict(init=f"file://{tmp_path}/pg", rank=rank, target=target, dataset_id=dataset_id,
                      mode=mode, coordinated=coordinated, count=count)
        return run_python(RANK_SCRIPT.format(config=json.dumps(config)), timeout=180)

    with ThreadPoolExecutor(2) as pool:
        procs = list(pool.map(run, range(2)))
    for p in procs:
        assert p.returncode == 0, p.stderr
    return [json.loads(p.stdout.strip().splitlines()[-1]) for p in procs]


def test_two_ranks_share_a_distributed_epoch(cluster, tmp_path):
    n = 300
    dataset_id = service.register_dataset(cluster.target, tfdata.Dataset.range(n))
    results = run_ranks(tmp_path, cluster.target, dataset_id, "distributed_epoch", False, None)
    assert [r["rank_world"] for r in results] == [[0, 2], [1, 2]]  # from torch.distributed
    everything = sorted(x for r in results for _, x in r["pairs"])
    assert everything == list(range(n))  # 2 ranks x 2 workers, each element once


def test_two_ranks_coordinated_reads(cluster, tmp_path):
    dataset_id = service.register_dataset(cluster.target, tfdata.Dataset.range(10_000).repeat())
    results = run_ranks(tmp_path, cluster.target, dataset_id, "parallel_epochs", True, 20)
    # Consumer rank * 2 + worker of 4 reads rounds consumer, consumer + 4, ...
    for rank, result in enumerate(results):
        read = by_worker(result["pairs"])
        for worker_id in (0, 1):
            consumer = rank * 2 + worker_id
            assert read[worker_id] == list(range(consumer, consumer + 4 * 10, 4))
