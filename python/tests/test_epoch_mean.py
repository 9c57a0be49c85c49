"""Each epoch's own mean cost: with mean_cost="epoch" (the default) every epoch's balancer aims
its sliding rounds at the mean cost of that epoch's indices on this rank, as the cap clips them,
instead of a running mean that starts afresh every epoch. A fixed mean_cost is used as given;
mean_cost="running" keeps the balancer's running mean."""

import pickle

import numpy as np
import pytest
from torch.utils.data import DistributedSampler

import bcl
from bcl import _core

from conftest import resealed, sequence_costs


def heavy_costs(n, seed):
    """Pareto-like costs: the running mean of a few hundred of them is far from their mean."""
    rng = np.random.default_rng(seed)
    return 100.0 / rng.uniform(0.0, 1.0, size=n) ** (1.0 / 1.5)


def epoch_indices(sampler):
    return [i for batch in sampler for i in batch]


@pytest.mark.parametrize("seed", range(5))
def test_each_epochs_level_is_the_mean_cost_of_that_epochs_indices_on_this_rank(seed):
    costs = heavy_costs(3000, seed)
    inner = DistributedSampler(range(3000), num_replicas=4, rank=seed % 4, seed=seed)
    sampler = bcl.BalancedBatchSampler(inner, costs, 8)
    assert sampler.mean_cost == 0.0
    levels = []
    for epoch in range(3):
        sampler.set_epoch(epoch)
        drawn = list(inner)
        assert sorted(epoch_indices(sampler)) == sorted(drawn)
        assert sampler.mean_cost == pytest.approx(np.mean(costs[drawn]), rel=1e-12)
        levels.append(sampler.mean_cost)
    # Each epoch draws other indices, so each has its own level.
    assert len(set(levels)) == 3


@pytest.mark.parametrize(
    "cap, clip",
    [(500.0, lambda c: 500.0), ("p90", lambda c: np.sort(c)[int(np.ceil(0.9 * len(c))) - 1])],
)
def test_the_level_is_the_mean_of_the_costs_as_the_cap_clips_them(cap, clip):
    costs = heavy_costs(1000, 7)
    sampler = bcl.BalancedBatchSampler(range(1000), costs, 8, cap=cap)
    epoch_indices(sampler)
    expected = np.mean(np.minimum(costs, clip(costs)))
    assert sampler.mean_cost == pytest.approx(expected, rel=1e-12)
    assert sampler.mean_cost < np.mean(costs)


@pytest.mark.parametrize("policy", ["sliding", "tumbling"])
def test_the_batches_are_those_of_a_balancer_given_that_level(policy):
    costs = heavy_costs(4000, 3)
    order = np.random.default_rng(3).permutation(4000).tolist()
    own = bcl.BalancedBatchSampler(order, costs, 8, policy=policy)
    batches = list(own)
    fixed = bcl.BalancedBatchSampler(order, costs, 8, policy=policy, mean_cost=own.mean_cost)
    assert list(fixed) == batches
    assert fixed.mean_cost == own.mean_cost


def running_mean_batches(costs, order, batch_size, epochs=1):
    """The batches of a C++ balancer at its running mean (options::mean_cost 0) over `order`,
    one list per epoch, the balancer carried from epoch to epoch (bcl::balancer::next_epoch)."""
    opt = _core.options()
    opt.batch_size = batch_size
    indices = np.asarray(order, dtype=np.int64)
    core = _core.epoch(_core.cost_table(costs, None), opt, indices)
    out = []
    for epoch in range(epochs):
        if epoch > 0:
            core.next_epoch(0.0, indices)
        batches = []
        while (batch := core.next_batch()) is not None:
            batches.append(batch)
        out.append(batches)
    return out if epochs > 1 else out[0]


def test_the_level_changes_what_sliding_rounds_choose():
    # The balancer that aims at its running mean chooses other rounds on a heavy tail, so the
    # test above can fail.
    costs = heavy_costs(4000, 3)
    order = np.random.default_rng(3).permutation(4000)
    own = list(bcl.BalancedBatchSampler(order.tolist(), costs, 8))
    running = running_mean_batches(costs, order, 8)
    assert sorted(map(sorted, running)) != sorted(map(sorted, own))


def test_running_gives_the_batches_of_a_balancer_at_its_running_mean():
    costs = heavy_costs(4000, 3)
    order = np.random.default_rng(3).permutation(4000).tolist()
    sampler = bcl.BalancedBatchSampler(order, costs, 8, mean_cost="running")
    expected = running_mean_batches(costs, order, 8, epochs=2)
    for epoch in range(2):  # the running mean carries on from epoch to epoch
        assert list(sampler) == expected[epoch]
        assert sampler.mean_cost == 0.0
    assert expected[0] != expected[1]


@pytest.mark.parametrize("seed", range(3))
def test_running_keeps_the_contract_over_epochs_and_ranks(seed):
    costs = heavy_costs(1000, seed)
    for rank in range(3):
        inner = DistributedSampler(range(1000), num_replicas=3, rank=rank, seed=seed)
        sampler = bcl.BalancedBatchSampler(inner, costs, 8, mean_cost="running")
        for epoch in range(2):
            sampler.set_epoch(epoch)
            batches = list(sampler)
            assert len(batches) == len(sampler)
            assert all(len(b) == 8 for b in batches[:-1])
            assert sorted(i for b in batches for i in b) == sorted(inner)


def test_a_state_saved_mid_epoch_with_running_resumes_exactly():
    costs = heavy_costs(2000, 13)
    order = np.random.default_rng(13).permutation(2000).tolist()
    first = bcl.BalancedBatchSampler(order, costs, 8, mean_cost="running")
    expected = list(bcl.BalancedBatchSampler(order, costs, 8, mean_cost="running"))
    it = iter(first)
    head = [next(it) for _ in range(30)]
    state = pickle.loads(pickle.dumps(first.state_dict()))
    assert state["mean_cost_mode"] == "running" and state["epoch_mean_cost"] is None
    second = bcl.BalancedBatchSampler(order, costs, 8, mean_cost="running")
    second.load_state_dict(state)
    assert head + list(second) == expected


@pytest.mark.parametrize("given", [0, 0.0, -1.0, float("nan"), "epochs", "fixed", ""])
def test_mean_cost_is_a_mode_by_name_or_a_cost_above_zero(given):
    # 0 is no level: the mode is named ("epoch" or "running"), never spelled 0.
    with pytest.raises(bcl.Error, match="mean_cost"):
        bcl.BalancedBatchSampler(range(10), np.ones(10), 4, mean_cost=given)


def test_a_fixed_mean_cost_is_used_for_every_epoch():
    costs = sequence_costs(500)
    sampler = bcl.BalancedBatchSampler(range(500), costs, 4, mean_cost=123.5)
    for _ in range(2):
        epoch_indices(sampler)
        assert sampler.mean_cost == 123.5


def test_a_state_saved_mid_epoch_keeps_the_epochs_level():
    costs = heavy_costs(2000, 11)
    order = np.random.default_rng(11).permutation(2000).tolist()
    first = bcl.BalancedBatchSampler(order, costs, 8)
    expected = list(bcl.BalancedBatchSampler(order, costs, 8))
    it = iter(first)
    head = [next(it) for _ in range(30)]
    state = pickle.loads(pickle.dumps(first.state_dict()))
    assert state["epoch_mean_cost"] == first.mean_cost
    second = bcl.BalancedBatchSampler(order, costs, 8)
    second.load_state_dict(state)
    assert second.mean_cost == first.mean_cost
    assert head + list(second) == expected


@pytest.mark.parametrize(
    "saved, loading",
    [("epoch", 5.0), (5.0, "epoch"), ("epoch", "running"), ("running", "epoch"), (5.0, "running"),
     ("running", 5.0)],
)
def test_a_state_needs_a_sampler_with_the_same_mean_cost(saved, loading):
    costs = sequence_costs(600)
    first = bcl.BalancedBatchSampler(range(600), costs, 4, mean_cost=saved)
    it = iter(first)
    next(it)
    second = bcl.BalancedBatchSampler(range(600), costs, 4, mean_cost=loading)
    with pytest.raises(bcl.Error, match="mean_cost"):
        second.load_state_dict(first.state_dict())


@pytest.mark.parametrize("earlier", ["bcl.BalancedBatchSampler/1", "bcl.BalancedBatchSampler/2"])
def test_a_state_of_an_earlier_format_is_refused_and_changes_nothing(earlier):
    # Earlier formats cannot be checked against their epoch: restart the epoch instead.
    costs = heavy_costs(1200, 17)
    first = bcl.BalancedBatchSampler(range(1200), costs, 8)
    it = iter(first)
    next(it)
    state = dict(first.state_dict(), format=earlier)
    second = bcl.BalancedBatchSampler(range(1200), costs, 8)
    with pytest.raises(bcl.Error, match="written by an earlier bcl .* start the epoch again"):
        second.load_state_dict(state)
    assert list(second) == list(bcl.BalancedBatchSampler(range(1200), costs, 8))


@pytest.mark.parametrize(
    "change", [dict(mean_cost_mode="sometimes"), dict(mean_cost_mode="running"),
               dict(mean_cost_mode="fixed"), dict(mean_cost_mode=["epoch"])]
)
def test_an_inconsistent_mean_cost_mode_is_an_error_that_changes_nothing(change):
    costs = heavy_costs(800, 19)
    first = bcl.BalancedBatchSampler(range(800), costs, 8)
    expected = list(bcl.BalancedBatchSampler(range(800), costs, 8))
    it = iter(first)
    next(it)
    state = resealed(first.state_dict(), **change)  # epoch_mean_cost is set: mode "epoch" only
    second = bcl.BalancedBatchSampler(range(800), costs, 8)
    with pytest.raises(bcl.Error, match="mean_cost_mode|wrong type"):
        second.load_state_dict(state)
    assert list(second) == expected  # a fresh epoch, as if nothing had been loaded
