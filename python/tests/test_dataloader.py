"""BalancedBatchSampler inside torch: a DataLoader's batch_sampler, with and without worker
processes, and over DistributedSampler shards of simulated ranks."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.utils.data import DataLoader, Dataset, DistributedSampler, RandomSampler

import bcl

from conftest import sequence_costs


class Sequences(Dataset):
    """Variable-length token sequences; item i is (i, its tokens)."""

    def __init__(self, lengths):
        self.lengths = lengths

    def __len__(self):
        return len(self.lengths)

    def __getitem__(self, i):
        return i, torch.full((int(self.lengths[i]),), i % 251, dtype=torch.int64)


def collate(items):
    return [i for i, _ in items], [t for _, t in items]


@pytest.mark.parametrize("workers", [0, 2])
def test_a_dataloader_delivers_the_samplers_batches(workers):
    n, b = 203, 8
    lengths = np.random.default_rng(0).integers(1, 64, size=n)
    costs = lengths.astype(float) ** 2
    inner = RandomSampler(range(n), generator=torch.Generator().manual_seed(3))
    sampler = bcl.BalancedBatchSampler(inner, costs, b, lookahead=4)
    inner.generator.manual_seed(3)
    expected = list(sampler)
    inner.generator.manual_seed(3)
    loader = DataLoader(
        Sequences(lengths), batch_sampler=sampler, num_workers=workers, collate_fn=collate
    )
    assert len(loader) == math.ceil(n / b)
    got = []
    for indices, tokens in loader:
        assert [len(t) for t in tokens] == [lengths[i] for i in indices]
        got.append(indices)
    assert got == expected
    assert sorted(i for batch in got for i in batch) == list(range(n))


class Counted:
    """An inner sampler that counts how often an epoch was begun (its __iter__ called)."""

    def __init__(self, n):
        self.n, self.epochs = n, 0

    def __len__(self):
        return self.n

    def __iter__(self):
        self.epochs += 1
        return iter(np.random.default_rng(self.epochs).permutation(self.n).tolist())


def test_an_iterator_dropped_unused_consumes_nothing():
    # A DataLoader with workers calls iter() on its batch sampler twice and uses the second.
    n, b = 90, 4
    costs = sequence_costs(n)
    expected = list(bcl.BalancedBatchSampler(Counted(n), costs, b))  # the inner's first epoch
    inner = Counted(n)
    sampler = bcl.BalancedBatchSampler(inner, costs, b)
    unused = iter(sampler)
    used = iter(sampler)
    assert inner.epochs == 0
    assert list(used) == expected
    assert inner.epochs == 1
    del unused


def test_an_iterator_dropped_unused_leaves_a_loaded_state_for_the_next():
    n, b = 90, 4
    costs = sequence_costs(n)
    first = bcl.BalancedBatchSampler(range(n), costs, b)
    it = iter(first)
    head = [next(it) for _ in range(5)]
    second = bcl.BalancedBatchSampler(range(n), costs, b)
    second.load_state_dict(first.state_dict())
    iter(second)  # dropped unused
    state = second.state_dict()
    assert head + list(iter(second)) == list(bcl.BalancedBatchSampler(range(n), costs, b))
    assert state == first.state_dict()


@given(
    n=st.integers(1, 600),
    b=st.integers(1, 16),
    k=st.integers(1, 8),
    policy=st.sampled_from(["sliding", "tumbling"]),
    shard_drop_last=st.booleans(),
    drop_last=st.booleans(),
    epoch=st.integers(0, 5),
)
def test_ranks_over_distributed_sampler_shards_emit_equal_batch_counts(
    n, b, k, policy, shard_drop_last, drop_last, epoch
):
    ranks = 4
    costs = sequence_costs(n, n)
    counts, seen = [], []
    for rank in range(ranks):
        shard = DistributedSampler(
            range(n), num_replicas=ranks, rank=rank, shuffle=True, seed=1,
            drop_last=shard_drop_last,
        )
        sampler = bcl.BalancedBatchSampler(
            shard, costs, b, lookahead=k, policy=policy, drop_last=drop_last
        )
        sampler.set_epoch(epoch)
        batches = list(sampler)
        assert len(batches) == len(sampler)
        counts.append(len(batches))
        out = [i for batch in batches for i in batch]
        shard_indices = list(shard)
        if drop_last:
            assert len(out) == len(shard_indices) // b * b
        else:
            assert sorted(out) == sorted(shard_indices)
        seen += out
    assert len(set(counts)) == 1, counts
    if not shard_drop_last and not drop_last:
        assert set(seen) == set(range(n))  # the shards together cover the dataset


def test_set_epoch_reaches_the_inner_sampler_and_changes_its_order():
    n = 100
    shard = DistributedSampler(range(n), num_replicas=2, rank=0, shuffle=True, seed=0)
    sampler = bcl.BalancedBatchSampler(shard, sequence_costs(n), 4)
    sampler.set_epoch(0)
    first = list(sampler)
    sampler.set_epoch(1)
    assert shard.epoch == 1
    second = list(sampler)
    assert sorted(map(tuple, first)) != sorted(map(tuple, second))
    sampler.set_epoch(0)
    assert list(sampler) == first


def test_a_dataloader_resumes_mid_epoch_like_a_stateful_dataloader():
    # What torchdata's StatefulDataLoader does with a batch sampler that has state_dict(): save
    # it with the loader's state, and on resume load it and call iter() on it again.
    n, b = 300, 6
    lengths = np.random.default_rng(1).integers(1, 40, size=n)
    costs = lengths.astype(float)

    def loader():
        shard = DistributedSampler(range(n), num_replicas=2, rank=1, shuffle=True, seed=9)
        sampler = bcl.BalancedBatchSampler(shard, costs, b, lookahead=3)
        sampler.set_epoch(2)
        return DataLoader(Sequences(lengths), batch_sampler=sampler, collate_fn=collate)
    expected = [indices for indices, _ in loader()]
    first = loader()
    head = []
    for indices, _ in first:
        head.append(indices)
        if len(head) == 10:
            state = first.batch_sampler.state_dict()
            break
    second = loader()
    second.batch_sampler.load_state_dict(state)
    assert head + [indices for indices, _ in second] == expected


def test_the_sampler_is_a_torch_sampler_and_its_statistics_say_what_they_count():
    sampler = bcl.BalancedBatchSampler(range(130), sequence_costs(130), 4)
    assert isinstance(sampler, torch.utils.data.Sampler)
    batches = list(sampler)
    stats = sampler.stats
    assert stats["batches"] == len(batches) == 33
    assert stats["batch_cost"]["count"] == 32  # the short last batch (2 indices) is not counted
    assert "full batch" in stats["batch_cost"]["of"] and "short" in stats["batch_cost"]["of"]
    assert stats["delay_batches"]["count"] == 130 and "record" in stats["delay_batches"]["of"]
