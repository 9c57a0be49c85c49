"""The keyed order (bcl::keyed_order): the epoch's shuffle as a keyed bijection of the indices,
computed position by position. bcl._core.keyed_order is a permutation for every N and draws the
same order window by window; the sampler's ``order="keyed"`` gives every index of the epoch once
over all ranks, resumes exactly, is refused by a sampler of the other order, and balances the
bundled workloads as well as DistributedSampler's randperm (within 0.002 of it)."""

import collections
import os

import numpy as np
import pytest

import bcl
from bcl import _core

from conftest import sequence_costs

WORKLOADS = os.path.join(os.path.dirname(__file__), "..", "..", "bench", "workloads")


@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 7, 8, 9, 255, 256, 257, 1000, 4096, 4097])
def test_the_keyed_order_is_a_permutation_and_windows_are_its_slices(n):
    whole = _core.keyed_order(n, 7, 3, 0, n)
    assert whole.dtype == np.int64
    assert sorted(whole.tolist()) == list(range(n))
    for first in {0, n // 3, n}:
        count = (n - first) // 2
        window = _core.keyed_order(n, 7, 3, first, count)
        assert window.tolist() == whole[first:first + count].tolist()


def test_positions_outside_the_order_are_refused():
    with pytest.raises(bcl.Error, match=r"outside the order of 10 indices"):
        _core.keyed_order(10, 0, 0, 8, 3)


def every_rank(costs, ranks, b, epoch=0, **options):
    out = []
    for rank in range(ranks):
        s = bcl.DistributedBalancedBatchSampler(costs, b, ranks, rank, order="keyed", **options)
        s.set_epoch(epoch)
        out.append(list(s))
    return out


@pytest.mark.parametrize("n, ranks, b, drop_last", [(1000, 4, 8, False), (997, 3, 5, True),
                                                    (10, 4, 2, False), (0, 2, 3, False)])
def test_over_all_ranks_every_index_comes_out_once(n, ranks, b, drop_last):
    costs = sequence_costs(n, 5)
    batches = every_rank(costs, ranks, b, epoch=2, drop_last=drop_last)
    assert len({len(x) for x in batches}) == 1
    got = collections.Counter(i for x in batches for batch in x for i in batch)
    if drop_last:
        assert max(got.values(), default=1) == 1
        assert sum(got.values()) == ranks * len(batches[0]) * b
    else:
        padded = -(-n // ranks) * ranks
        assert sum(got.values()) == padded
        assert set(got) == set(range(n))
        assert sum(c - 1 for c in got.values()) == padded - n


def test_the_keyed_order_is_its_own_and_its_states_name_it():
    costs = sequence_costs(2000, 6)
    keyed = bcl.DistributedBalancedBatchSampler(costs, 8, 4, 1, order="keyed")
    plain = bcl.DistributedBalancedBatchSampler(costs, 8, 4, 1)
    assert list(keyed) != list(plain)
    assert list(keyed) == list(bcl.DistributedBalancedBatchSampler(costs, 8, 4, 1, order="keyed"))
    it = iter(keyed)
    for _ in range(5):
        next(it)
    state = keyed.state_dict()
    assert state["settings"]["order"] == "keyed"
    assert "order" not in plain.state_dict()["settings"]  # states from before the choice load
    rest = list(it)
    again = bcl.DistributedBalancedBatchSampler(costs, 8, 4, 1, order="keyed")
    again.load_state_dict(state)
    assert list(again) == rest
    with pytest.raises(bcl.Error, match="order"):
        plain.load_state_dict(state)


def test_token_mode_over_the_keyed_order_plans_every_index_once():
    lengths = np.random.default_rng(3).integers(1, 4000, 3000)
    seen = collections.Counter()
    counts = set()
    for rank in range(4):
        s = bcl.DistributedBalancedBatchSampler(
            None, None, 4, rank, order="keyed", max_tokens=8192, micro_batches=2,
            lengths=lengths, padding="empty",
        )  # fmt: skip
        batches = list(s)
        counts.add(len(batches))
        for batch in batches:
            assert lengths[batch].sum() <= 8192
            seen.update(batch)
    assert len(counts) == 1
    assert seen == collections.Counter(range(3000))


def test_a_bad_order_is_refused_naming_the_choices():
    with pytest.raises(bcl.Error, match=r"order is 'sorted', not one of 'randperm', 'keyed'"):
        bcl.DistributedBalancedBatchSampler(np.ones(10), 2, 2, 0, order="sorted")


def planned_efficiency(costs, order, epochs, ranks=8, b=16):
    total = 0.0
    for epoch in range(epochs):
        s = bcl.DistributedBalancedBatchSampler(costs, b, ranks, 0, order=order)
        s.set_epoch(epoch)
        for _ in s:  # a keyed epoch is planned window by window, as its batches are taken
            pass
        assert s.stats["windows_planned"] == s.stats["windows"]
        total += s.stats["planned_efficiency"]
    return total / epochs


@pytest.mark.parametrize("workload", sorted(f for f in os.listdir(WORKLOADS) if f.endswith(".txt")))
def test_plans_over_the_keyed_order_balance_as_well_as_over_randperm(workload):
    lengths = np.loadtxt(os.path.join(WORKLOADS, workload))
    costs = lengths + lengths**2 / 24576
    # Small tables vary more from epoch to epoch (proteins: a standard error of 0.0014 over 64
    # epochs): more epochs keep the comparison about the order, not the draw.
    epochs = 64 if len(costs) < 5000 else 8
    keyed = planned_efficiency(costs, "keyed", epochs)
    randperm = planned_efficiency(costs, "randperm", epochs)
    assert abs(keyed - randperm) < 0.002, (keyed, randperm)


def test_a_keyed_epoch_is_the_whole_epochs_plan_window_by_window():
    # The plans of the windows, asked for one at a time, are the plans of the whole epoch over
    # the same order (bcl::epoch_planner), and the summary grows with the windows planned.
    costs = sequence_costs(3000, seed=4)
    ranks, b, k = 4, 8, 3
    order = _core.keyed_order(len(costs), 5, 2, 0, len(costs))
    table = _core.cost_table(np.asarray(costs, dtype=np.float64), None)
    for rank in range(ranks):
        s = bcl.DistributedBalancedBatchSampler(
            costs, b, ranks, rank, lookahead=k, seed=5, order="keyed", check_digest=False
        )
        s.set_epoch(2)
        assert s.stats["windows_planned"] == 0
        whole = _core.global_epoch(table, order, ranks, k, b, rank, _core.batch_cost.packed, 0.0,
                                   True, False)  # fmt: skip
        taken = []
        for i, batch in enumerate(s):
            taken.append(batch)
            assert s.stats["windows_planned"] == i // k + 1
        assert taken == [whole.batch(i) for i in range(whole.batches)]
        assert s.stats["windows"] == whole.stats()["windows"]
        assert s.stats["planned_efficiency"] == pytest.approx(whole.stats()["planned_efficiency"])


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.uint32, np.int64, np.uint64, np.float32,
                                   np.float64, np.float16])  # fmt: skip
def test_a_table_of_any_integer_or_float_dtype_plans_as_its_values(dtype, tmp_path):
    lengths = np.random.default_rng(1).integers(1, 200, 999)
    reference = [list(every_rank(lengths.astype(np.float64), 3, 4, epoch=1))]
    table = lengths.astype(dtype)
    path = tmp_path / "table.npy"
    np.save(path, table)
    mapped = np.load(path, mmap_mode="r")
    for given in (table, mapped):
        assert [list(every_rank(given, 3, 4, epoch=1))] == reference


def test_a_memory_mapped_table_is_read_in_place():
    # The sampler keeps the array itself: a table edited after construction is what the next
    # window reads (and an invalid edit is refused naming the dataset index, not a position).
    costs = np.arange(1, 401, dtype=np.float32)
    s = bcl.DistributedBalancedBatchSampler(costs, 4, 2, 0, order="keyed", check_digest=False)
    it = iter(s)
    next(it)
    costs[:] = np.nan
    s.set_epoch(1)
    with pytest.raises(bcl.Error, match=r"the cost of dataset index \d+ is nan"):
        list(s)


@pytest.mark.parametrize("bad, match", [
    (np.array([1.0, -1.0]), r"costs\[1\] is -1"),
    (np.array([1.0, np.inf]), r"costs\[1\] is inf"),
    (np.array([3, -7], dtype=np.int32), r"costs\[1\] is -7"),
    (np.array([True, False]), r"dtype bool"),
    (np.array([1 + 2j]), r"dtype complex128"),
    (np.array([object()]), r"real numbers"),
    (np.ones((2, 2, 2)), r"one row per record"),
])  # fmt: skip
def test_a_bad_table_is_refused_naming_what(bad, match):
    with pytest.raises(bcl.Error, match=match):
        bcl.DistributedBalancedBatchSampler(bad, 1, 1, 0, order="keyed", check_digest=False)


def test_the_epochs_digest_is_the_inputs_equal_on_every_rank_other_for_another_table():
    costs = sequence_costs(500, seed=2)
    digests = set()
    for rank in range(4):
        s = bcl.DistributedBalancedBatchSampler(costs, 4, 4, rank, order="keyed",
                                                check_digest=False)  # fmt: skip
        digests.add(s.stats["digest"])
    assert len(digests) == 1
    other = list(costs)
    other[7] += 1.0
    s = bcl.DistributedBalancedBatchSampler(other, 4, 4, 0, order="keyed", check_digest=False)
    assert s.stats["digest"] not in digests
    s.set_epoch(1)
    assert s.stats["digest"] not in digests
