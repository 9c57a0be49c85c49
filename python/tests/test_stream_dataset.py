"""bcl.BalancedIterableDataset: bcl.balance as a stage of an IterableDataset pipeline, under a
DataLoader with and without workers, resumed in the protocol of torchdata's StatefulDataLoader
(each worker saves its own copy's state after each batch it hands out and loads it back), and
under DDP, where a promised length makes every rank emit the same count or stop with an error."""

import copy
import pickle

import pytest
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info

import bcl

from streams import ids, records

B = 4


class Shards(IterableDataset):
    """The records of this rank's shard, split among DataLoader workers by position (each worker
    reads every num_workers-th record), as a pipeline shards itself with get_worker_info()."""

    def __init__(self, items):
        self.items = items

    def __iter__(self):
        info = get_worker_info()
        start, step = (0, 1) if info is None else (info.id, info.num_workers)
        return iter(self.items[start::step])


class ResumableShards(Shards):
    """The same with its own state (the position of its latest pass), as Hugging Face's streaming
    datasets and torchdata's stateful datasets have: the stage saves and restores it."""

    def __init__(self, items):
        super().__init__(items)
        self.position = 0

    def __iter__(self):
        start = self.position
        for record in list(super().__iter__())[start:]:
            self.position += 1
            yield record

    def state_dict(self):
        return {"position": self.position}

    def load_state_dict(self, state):
        self.position = state["position"]


def stage(upstream, **options):
    return bcl.BalancedIterableDataset(upstream, "cost", B, lookahead=2, **options)


def with_state(batch):
    """A collate_fn that snapshots its worker's copy of the stage after the batch it hands out,
    as a StatefulDataLoader worker does."""
    info = get_worker_info()
    worker = None if info is None else info.id
    dataset = info.dataset if info is not None else None
    return batch, worker, None if dataset is None else dataset.state_dict()


def test_a_dataloader_without_workers_yields_the_streams_batches():
    items = records(101)
    loader = DataLoader(stage(Shards(items)), batch_size=None)
    assert ids(loader) == ids(bcl.balance(items, "cost", B, lookahead=2))


def test_each_iteration_is_a_pass_of_its_own_started_at_its_first_batch():
    items = records(50)
    balanced = stage(Shards(items))
    unused = iter(balanced)  # noqa: F841 - made and dropped, as a DataLoader may
    pairs = list(zip(iter(balanced), iter(balanced)))  # two passes, interleaved
    expected = ids(bcl.balance(items, "cost", B, lookahead=2))
    assert ids(a for a, _ in pairs) == ids(b for _, b in pairs) == expected


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_with_workers_each_worker_is_a_stream_of_its_own(workers):
    items = records(103)
    loader = DataLoader(stage(Shards(items)), batch_size=None, num_workers=workers,
                        collate_fn=with_state)  # fmt: skip
    per_worker = {}
    for batch, worker, _ in loader:
        per_worker.setdefault(worker, []).append(batch)
    assert sorted(per_worker) == list(range(workers))
    for w, batches in per_worker.items():
        share = items[w::workers]
        assert ids(batches) == ids(bcl.balance(share, "cost", B, lookahead=2))
        assert len(batches) == -(-len(share) // B)  # the contract, per worker's stream
    assert sorted(r.id for bs in per_worker.values() for b in bs for r in b) == list(range(103))


def test_len_is_one_streams_batch_count_when_the_length_is_promised():
    assert len(stage(Shards(records(10)), length=10)) == 3
    assert len(stage(Shards(records(10)), length=10, drop_last=True)) == 2
    with pytest.raises(TypeError, match="only when given length="):
        len(stage(Shards(records(10))))


@pytest.mark.parametrize("upstream", [Shards, ResumableShards])
def test_a_state_saved_without_workers_resumes_the_pass_exactly(upstream):
    items = records(203)
    expected = ids(bcl.balance(items, "cost", B, lookahead=2))
    for stop in (0, 1, 7, 30, len(expected) - 1, len(expected)):
        first = stage(upstream(items))
        head = [b for _, b in zip(range(stop), DataLoader(first, batch_size=None))]
        state = pickle.loads(pickle.dumps(first.state_dict()))  # what the loader's state holds
        assert (state["upstream"] is None) == (upstream is Shards)
        second = stage(upstream(items))
        second.load_state_dict(state)  # checked here: a wrong state fails now, not mid-epoch
        assert ids(head + list(DataLoader(second, batch_size=None))) == expected


@pytest.mark.parametrize("upstream", [Shards, ResumableShards])
def test_each_worker_resumes_from_the_state_it_saved(upstream):
    # A StatefulDataLoader keeps, per worker, the state its copy of the dataset had after the
    # last batch the training loop took from that worker, and on resume hands each worker its
    # own. The loop takes 9 batches of the 2 workers' streams, then a new loader resumes.
    items = records(157)
    workers, taken = 2, 9
    loader = DataLoader(stage(upstream(items)), batch_size=None, num_workers=workers,
                        collate_fn=with_state)  # fmt: skip
    uninterrupted = {w: [] for w in range(workers)}
    head = {w: [] for w in range(workers)}
    states = {w: stage(upstream(items)).state_dict() for w in range(workers)}  # none taken yet
    for k, (batch, worker, state) in enumerate(loader):
        uninterrupted[worker].append(batch)
        if k < taken:
            head[worker].append(batch)
            states[worker] = state
    # Workers' initial states say "main process": a worker that took nothing starts afresh.
    fresh = {w: state for w, state in states.items() if state["upstream_consumed"] == 0}

    def resume(worker_id):
        if worker_id not in fresh:
            get_worker_info().dataset.load_state_dict(states[worker_id])

    resumed = DataLoader(stage(upstream(items)), batch_size=None, num_workers=workers,
                         collate_fn=with_state, worker_init_fn=resume)  # fmt: skip
    rest = {w: [] for w in range(workers)}
    for batch, worker, _ in resumed:
        rest[worker].append(batch)
    for w in range(workers):
        assert ids(head[w] + rest[w]) == ids(uninterrupted[w]), w


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_the_main_process_refuses_a_state_while_dataloader_workers_run_the_passes(context):
    # The workers' streams are theirs: the main process's copy of the stage took nothing, and a
    # state of it (upstream_consumed=0), loaded, would replay every record the loop took.
    items = records(157)
    balanced = stage(Shards(items))
    before = balanced.state_dict()  # no worker has begun: the state of a pass not started
    assert before["upstream_consumed"] == 0
    loader = DataLoader(balanced, batch_size=None, num_workers=2, multiprocessing_context=context)
    it = iter(loader)
    head = [next(it) for _ in range(5)]
    refusal = "state_dict\\(\\) in the main process cannot describe the passes DataLoader workers"
    with pytest.raises(bcl.Error, match=refusal) as e:
        balanced.state_dict()
    assert "num_workers=0" in str(e.value) and "StatefulDataLoader" in str(e.value)
    rest = list(it)
    assert sorted(r.id for b in head + rest for r in b) == list(range(157))
    with pytest.raises(bcl.Error, match=refusal):  # after the loop too
        balanced.state_dict()
    assert pickle.loads(pickle.dumps(balanced)).state_dict() == before  # a copy is its own
    # A pass in this process describes itself again.
    mine = [b for _, b in zip(range(3), DataLoader(balanced, batch_size=None))]
    assert balanced.state_dict()["upstream_consumed"] >= sum(len(b) for b in mine)


def test_a_state_loaded_in_the_main_process_is_refused_in_a_worker():
    items = records(80)
    first = stage(Shards(items))
    list(zip(range(3), first))
    resumed = stage(Shards(items))
    resumed.load_state_dict(first.state_dict())
    loader = DataLoader(resumed, batch_size=None, num_workers=2)
    with pytest.raises(bcl.Error, match="saved in the main process, but this stream runs in "
                                        "DataLoader worker"):  # fmt: skip
        list(loader)


def test_a_copy_continues_where_the_stage_stood():
    items = records(90)
    balanced = stage(Shards(items))
    it = iter(balanced)
    head = [next(it) for _ in range(4)]
    for copied in (pickle.loads(pickle.dumps(balanced)), copy.deepcopy(balanced)):
        assert ids(head + list(copied)) == ids(bcl.balance(items, "cost", B, lookahead=2))


def test_under_ddp_ranks_with_equal_shards_emit_equal_counts_and_a_broken_promise_stops():
    # Two ranks, each its own stage over its own shard (as with split_dataset_by_node). Equal
    # shards: equal batch counts, as with plain batching. A shard one record longer than the
    # promised length stops that rank with a bcl.Error before its count could differ.
    items = records(401)
    shards = [items[0:200], items[200:400]]
    counts = [len(list(DataLoader(stage(Shards(s), length=200), batch_size=None)))
              for s in shards]  # fmt: skip
    assert counts == [50, 50]
    long_rank = iter(DataLoader(stage(Shards(items[200:401]), length=200), batch_size=None))
    emitted = 0
    with pytest.raises(bcl.Error, match="yields more than length=200"):
        for _ in long_rank:
            emitted += 1
    assert emitted < 50
    dropped = stage(Shards(items[200:401]), length=201, drop_last=True)
    assert len(list(DataLoader(dropped, batch_size=None))) == len(dropped) == 50


def test_stats_and_calibration_reach_the_pass_started_last():
    items = records(120)
    balanced = bcl.BalancedIterableDataset(
        Shards(items), bcl.affine_quadratic("cost", 0, 1, 0), B, calibrate=True
    )
    for k, batch in enumerate(DataLoader(balanced, batch_size=None)):
        balanced.observe(k, 1e-3 * sum(r.cost for r in batch))
    assert balanced.stats["batches"] == 30
    assert balanced.stats["calibration"]["times_observed"] == 30


def test_every_option_is_checked_when_the_stage_is_built():
    with pytest.raises(bcl.Error, match="mean_cost='epoch'"):
        stage(Shards([]), mean_cost="epoch")
    with pytest.raises(bcl.Error, match="batch_size must be at least 1"):
        bcl.BalancedIterableDataset(Shards([]), "cost", 0)
    assert isinstance(stage(Shards([])), torch.utils.data.IterableDataset)
