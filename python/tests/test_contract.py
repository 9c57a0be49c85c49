"""The README's contract, through Python: sizes, counts, every index once, determinism."""

import inspect
import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.utils.data import BatchSampler, DistributedSampler

import bcl
from bcl import _core

from conftest import sequence_costs

policies = st.sampled_from(["sliding", "tumbling"])


@st.composite
def setups(draw, max_n=600):
    """An inner sampler (a shuffled range), costs and options."""
    n = draw(st.integers(0, max_n))
    seed = draw(st.integers(0, 2**32 - 1))
    order = np.random.default_rng(seed).permutation(n).tolist()
    costs = draw(
        st.lists(st.floats(0.0, 1e6, allow_nan=False), min_size=n, max_size=n)
        | st.just(sequence_costs(n, seed).tolist())
    )
    options = dict(
        batch_size=draw(st.integers(1, 24)),
        lookahead=draw(st.integers(1, 6)),
        policy=draw(policies),
        drop_last=draw(st.booleans()),
        seed=draw(st.integers(0, 2**63 - 1)),
        emission=draw(st.sampled_from(["costliest_first", "shuffled"])),
        batching=draw(st.sampled_from(["packed", "padded"])),
        mean_cost=draw(st.sampled_from(["epoch", "running", 1.0, 1e4])),
    )
    return order, costs, options


@given(setups())
def test_every_batch_has_exactly_batch_size_indices_but_the_short_last(setup):
    order, costs, options = setup
    batches = list(bcl.BalancedBatchSampler(order, costs, **options))
    b, n = options["batch_size"], len(order)
    assert all(isinstance(i, int) for batch in batches for i in batch)
    assert all(len(batch) == b for batch in batches[:-1])
    if batches:
        last = len(batches[-1])
        if options["drop_last"] or n % b == 0:
            assert last == b
        else:
            assert last == n % b


@given(setups())
def test_the_batch_count_is_ceil_or_floor_of_n_over_b_and_len_says_it(setup):
    order, costs, options = setup
    sampler = bcl.BalancedBatchSampler(order, costs, **options)
    b, n = options["batch_size"], len(order)
    expected = n // b if options["drop_last"] else math.ceil(n / b)
    assert len(sampler) == expected
    assert sum(1 for _ in sampler) == expected


@given(setups())
def test_every_index_comes_out_exactly_once(setup):
    order, costs, options = setup
    out = [i for batch in bcl.BalancedBatchSampler(order, costs, **options) for i in batch]
    assert len(out) == len(set(out))
    kept = len(order) - (len(order) % options["batch_size"] if options["drop_last"] else 0)
    assert len(out) == kept
    assert set(out) <= set(order)


@given(setups(), st.sampled_from([1, 2, 3]))
def test_tumbling_with_drop_last_drops_the_last_indices_of_the_epoch(setup, b):
    order, costs, options = setup
    options.update(policy="tumbling", drop_last=True, batch_size=b)
    out = [i for batch in bcl.BalancedBatchSampler(order, costs, **options) for i in batch]
    assert sorted(out) == sorted(order[: len(order) - len(order) % b])


@given(setups())
def test_same_input_options_and_seed_give_the_same_batches(setup):
    order, costs, options = setup
    one = bcl.BalancedBatchSampler(order, costs, **options)
    other = bcl.BalancedBatchSampler(list(order), np.array(costs), **options)
    for _ in range(2):  # epoch after epoch (each carrying what the one before learned)
        assert list(other) == list(one)


def test_balancing_shrinks_the_time_ranks_wait_for_the_slowest_far_below_plain_batches():
    # What a data-parallel step costs: the costliest batch among the ranks. Four ranks over
    # DistributedSampler shards; the waste is how far the sum over steps of the slowest rank's
    # batch exceeds that of the mean rank's.
    n, b, ranks = 8192, 16, 4
    costs = sequence_costs(n, seed=3)

    def waste(batch_sampler):
        per_rank = []
        for rank in range(ranks):
            shard = DistributedSampler(range(n), num_replicas=ranks, rank=rank, seed=3)
            per_rank.append([costs[batch].sum() for batch in batch_sampler(shard)])
        steps = np.array(per_rank)  # ranks x steps: equal batch counts, or this fails
        return steps.max(axis=0).sum() / steps.mean(axis=0).sum() - 1.0

    plain = waste(lambda shard: BatchSampler(shard, b, drop_last=False))
    balanced = waste(lambda shard: bcl.BalancedBatchSampler(shard, costs, b))
    assert plain > 0.2
    assert balanced < plain / 3


def test_the_stats_count_what_was_emitted():
    n, b = 1000, 16
    costs = sequence_costs(n)
    sampler = bcl.BalancedBatchSampler(range(n), costs, b, lookahead=4)
    assert sampler.stats["batches"] == 0
    batches = list(sampler)
    s = sampler.stats
    assert (s["records_in"], s["records_out"], s["batches"]) == (n, n, len(batches))
    full = [costs[batch].sum() for batch in batches if len(batch) == b]
    assert s["batch_cost"]["count"] == len(full)
    assert s["batch_cost"]["mean"] == pytest.approx(np.mean(full))
    assert s["batch_cost"]["max"] == pytest.approx(max(full))
    assert s["max_delay_batches"] <= _core.max_delay_bound(sampler._options)


def test_python_defaults_are_the_libraries_defaults():
    defaults = _core.options()
    sig = inspect.signature(bcl.BalancedBatchSampler).parameters
    for name in ("lookahead", "drop_last", "seed", "buffer_windows", "max_age",
                 "memory_budget", "largest_first"):
        assert sig[name].default == getattr(defaults, name), name
    # mean_cost is named: "epoch" (the sampler holds its epoch), which leaves the options' level
    # not given (0), as the library's default does.
    assert sig["mean_cost"].default == "epoch" and defaults.mean_cost == 0.0
    assert bcl.BalancedBatchSampler(range(10), np.ones(10), 3)._options.mean_cost == 0.0
    for name in ("policy", "emission", "batching"):
        assert sig[name].default == getattr(defaults, name).name, name
    assert sig["cap_action"].default == defaults.cap.action.name
    assert sig["cap_warmup"].default == defaults.cap.warmup
    assert sig["cap_prior"].default == defaults.cap.prior
    assert sig["cap"].default is None and defaults.cap.kind == _core.cap_kind.none


def test_options_reach_the_balancer_by_their_cpp_names():
    sampler = bcl.BalancedBatchSampler(
        range(10), np.ones(10), 3, lookahead=2, policy="tumbling", drop_last=True, seed=7,
        emission="shuffled", batching="padded", buffer_windows=3, max_age=4, mean_cost=1.5,
        largest_first=True, cap="p99.5", cap_warmup=10, cap_prior=2.5,
    )
    o = sampler._options
    assert (o.batch_size, o.lookahead, o.drop_last, o.seed) == (3, 2, True, 7)
    assert (o.policy.name, o.emission.name, o.batching.name) == ("tumbling", "shuffled", "padded")
    assert (o.buffer_windows, o.max_age, o.mean_cost, o.largest_first) == (3, 4, 1.5, True)
    assert o.cap.kind == _core.cap_kind.quantile
    assert o.cap.quantile == pytest.approx(0.995)
    assert (o.cap.warmup, o.cap.prior, o.cap.action.name) == (10, 2.5, "clip")
    fixed = bcl.BalancedBatchSampler(range(10), np.ones(10), 3, cap=4.0)._options.cap
    assert (fixed.kind, fixed.value) == (_core.cap_kind.fixed, 4.0)


def test_shuffled_emission_depends_on_the_seed_and_nothing_else():
    costs = sequence_costs(512)
    run = lambda seed: list(  # noqa: E731
        bcl.BalancedBatchSampler(range(512), costs, 8, emission="shuffled", seed=seed)
    )
    assert run(1) == run(1)
    assert run(1) != run(2)


def test_costliest_first_emits_each_rounds_full_batches_by_descending_cost():
    n, b, k = 640, 8, 4
    costs = sequence_costs(n, seed=5)
    batches = list(bcl.BalancedBatchSampler(range(n), costs, b, lookahead=k, policy="tumbling"))
    for r in range(0, len(batches), k):
        round_costs = [costs[batch].sum() for batch in batches[r : r + k]]
        assert round_costs == sorted(round_costs, reverse=True)


@given(st.integers(0, 300), st.integers(1, 12))
def test_callable_mapping_tensor_and_array_costs_give_the_same_batches(n, b):
    costs = sequence_costs(n, seed=n)
    expected = list(bcl.BalancedBatchSampler(range(n), costs, b))
    forms = [
        lambda i: float(costs[i]),
        dict(enumerate(costs.tolist())),
        torch.tensor(costs),
        costs.tolist(),
    ]
    for form in forms:
        assert list(bcl.BalancedBatchSampler(range(n), form, b)) == expected


def test_a_callable_is_asked_once_per_index_across_epochs():
    calls = []

    def cost(i):
        calls.append(i)
        return float(i % 7)
    sampler = bcl.BalancedBatchSampler(range(50), cost, 4)
    first, second = list(sampler), list(sampler)
    assert first == second
    assert sorted(calls) == list(range(50))


@given(st.integers(1, 400), st.integers(1, 10), policies, st.integers(0, 2**32))
def test_every_batch_fits_the_memory_budget(n, b, policy, seed):
    rng = np.random.default_rng(seed)
    memory = rng.uniform(0.0, 10.0, size=n)
    budget = 10.0 * b  # every record fits alone; a round can always be split
    sampler = bcl.BalancedBatchSampler(
        rng.permutation(n), sequence_costs(n, seed), b, policy=policy, memory=memory,
        memory_budget=budget,
    )
    batches = list(sampler)
    assert sorted(i for batch in batches for i in batch) == list(range(n))
    assert max(memory[batch].sum() for batch in batches) <= budget * (1 + 1e-12)
    assert sampler.stats["peak_batch_memory"] == pytest.approx(
        max(memory[batch].sum() for batch in batches)
    )


def test_a_fixed_cap_counts_every_index_above_it_and_keeps_every_index():
    n = 2000
    costs = sequence_costs(n, seed=11)
    cap = float(np.quantile(costs, 0.9))
    sampler = bcl.BalancedBatchSampler(range(n), costs, 16, cap=cap)
    out = sorted(i for batch in sampler for i in batch)
    assert out == list(range(n))
    assert sampler.stats["records_capped"] == int((costs > cap).sum())
