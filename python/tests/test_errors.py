"""Bad options, bad costs and bad input are bcl.Error (a ValueError) with a message that names
what was wrong, never a crash or a wrong batch."""

import math
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import bcl

from conftest import sequence_costs

COSTS = np.ones(100)


def make(**options):
    options.setdefault("batch_size", 4)
    return bcl.BalancedBatchSampler(range(100), COSTS, **options)


def test_error_is_a_value_error():
    assert issubclass(bcl.Error, ValueError)


@pytest.mark.parametrize(
    "options, words",
    [
        (dict(batch_size=0), "batch_size must be at least 1 (got 0)"),
        (dict(batch_size=-1), "batch_size must be a non-negative integer (got -1)"),
        (dict(batch_size=2.5), "batch_size must be an integer"),
        (dict(batch_size=True), "batch_size must be an integer"),
        (dict(lookahead=0), "lookahead must be at least 1 (got 0)"),
        (dict(seed=-3), "seed must be a non-negative integer"),
        (dict(seed=2**64), "seed must be a non-negative integer"),
        (dict(policy="fastest"), "policy has no such value ('fastest')"),
        (dict(emission="random"), "emission has no such value"),
        (dict(batching="tight"), "batching has no such value"),
        (dict(drop_last="yes"), "drop_last must be True or False"),
        (dict(cap="p"), "cap must be None, a number"),
        (dict(cap="99%"), "cap must be None, a number"),
        (dict(cap=-1.0), "cap.value must be finite and > 0"),
        (dict(cap=math.inf), "cap.value must be finite and > 0"),
        (dict(cap="p100"), "cap.quantile must be in (0, 1)"),
        (dict(cap="p99", cap_prior=-1.0), "cap.prior must be finite and >= 0"),
        (dict(cap="p99", cap_action="drop"), "cap.action has no such value"),
        (dict(cap="p99", cap_action="truncate"), "a dataset index cannot be shrunk"),
        (dict(mean_cost=-1.0), "mean_cost must be >= 0"),
        (dict(mean_cost="high"), "mean_cost must be a number or 'running'"),
        (dict(memory_budget=-1.0), "memory_budget must be finite and >= 0"),
        (dict(memory_budget=10.0), "no memory estimate was given"),
        (dict(policy="sliding", buffer_windows=2, max_age=0), "max_age"),
    ],
)
def test_bad_options_name_the_option(options, words):
    with pytest.raises(bcl.Error) as e:
        make(**options)
    assert words in str(e.value)


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf, 1e121])
@pytest.mark.parametrize("mean_cost", [0.0, 1.0])
def test_a_bad_cost_names_the_record_position_the_value_and_the_dataset_index(bad, mean_cost):
    costs = np.ones(40)
    costs[17] = bad
    order = list(range(40))[::-1]  # index 17 is the 23rd record pushed (position 22)
    with pytest.raises(bcl.Error) as e:
        list(bcl.BalancedBatchSampler(order, costs, 4, mean_cost=mean_cost))
    message = str(e.value)
    # With each epoch's own mean cost (mean_cost=0) the epoch's costs are read when it starts,
    # so the error comes before its first batch; a fixed mean_cost finds it at the push.
    assert re.search(r"record 22 (of the epoch )?has cost estimate", message)
    assert "(dataset index 17" in message


@pytest.mark.parametrize("mean_cost", [0.0, 1.0])
def test_a_bad_cost_from_a_callable_is_the_same_error(mean_cost):
    with pytest.raises(bcl.Error, match=r"record 3 .*cost estimate -2.*dataset index 3"):
        list(
            bcl.BalancedBatchSampler(
                range(10), lambda i: -2.0 if i == 3 else 1.0, 2, mean_cost=mean_cost
            )
        )


def test_a_bad_memory_estimate_is_an_error():
    memory = np.ones(10)
    memory[4] = math.nan
    with pytest.raises(bcl.Error, match="memory estimate"):
        list(bcl.BalancedBatchSampler(range(10), np.ones(10), 2, memory=memory))


def test_a_record_over_the_memory_budget_alone_is_an_error():
    memory = np.ones(10)
    memory[6] = 50.0
    with pytest.raises(bcl.Error, match="alone needs memory 50"):
        list(bcl.BalancedBatchSampler(range(10), np.ones(10), 2, memory=memory, memory_budget=8.0))


@pytest.mark.parametrize("index", [10, -1])
def test_an_index_without_a_cost_is_an_error(index):
    with pytest.raises(bcl.Error, match=f"dataset index {index}, which has no cost"):
        list(bcl.BalancedBatchSampler([0, 1, index], np.ones(10), 2))


def test_costs_that_are_not_numbers_or_not_one_dimensional_are_errors():
    with pytest.raises(bcl.Error, match="costs must be"):
        bcl.BalancedBatchSampler(range(3), ["a", "b", "c"], 2)
    with pytest.raises(bcl.Error, match="one-dimensional"):
        bcl.BalancedBatchSampler(range(3), np.ones((3, 2)), 2)
    with pytest.raises(bcl.Error, match="costs is required"):
        bcl.BalancedBatchSampler(range(3), None, 2)
    with pytest.raises(bcl.Error, match="memory has 2 entries but costs has 3"):
        bcl.BalancedBatchSampler(range(3), np.ones(3), 2, memory=np.ones(2))


def test_a_callable_that_gives_no_number_or_no_entry_is_an_error():
    with pytest.raises(bcl.Error, match="costs of dataset index 0 is not a number"):
        list(bcl.BalancedBatchSampler(range(3), lambda i: None, 2))
    with pytest.raises(bcl.Error, match="costs has no entry for dataset index 2"):
        list(bcl.BalancedBatchSampler(range(3), {0: 1.0, 1: 1.0}, 2))


def test_an_inner_sampler_that_yields_no_integers_is_an_error():
    with pytest.raises(bcl.Error, match="integer dataset indices"):
        list(bcl.BalancedBatchSampler(iter(["a", "b"]), np.ones(3), 2))


def test_an_error_in_the_inner_sampler_propagates_unchanged():
    def inner():
        yield 0
        raise KeyError("disk gone")

    with pytest.raises(KeyError, match="disk gone"):
        list(bcl.BalancedBatchSampler(inner(), np.ones(3), 2))


@given(st.integers(1, 50), st.integers(0, 49), st.sampled_from(["sliding", "tumbling"]))
def test_every_index_before_a_bad_cost_was_emitted_or_is_still_buffered(n, bad, policy):
    bad = bad % n
    costs = sequence_costs(n)
    costs[bad] = -1.0
    # A fixed mean_cost: the bad cost is found when it is pushed, after earlier batches.
    sampler = bcl.BalancedBatchSampler(
        range(n), costs, 2, lookahead=2, policy=policy, mean_cost=1000.0
    )
    emitted = []
    with pytest.raises(bcl.Error, match=f"dataset index {bad}"):
        for batch in sampler:
            emitted += batch
    # The balancer is unchanged by the failed push: what it holds plus what it emitted is
    # exactly the indices before the bad one.
    pending = sampler.state_dict()["pending"]
    assert sorted(emitted + pending) == list(range(bad))


@given(st.integers(1, 50), st.integers(0, 49), st.sampled_from(["sliding", "tumbling"]))
def test_with_each_epochs_own_mean_a_bad_cost_stops_the_epoch_before_its_first_batch(
    n, bad, policy
):
    bad = bad % n
    costs = sequence_costs(n)
    costs[bad] = -1.0
    sampler = bcl.BalancedBatchSampler(range(n), costs, 2, lookahead=2, policy=policy)
    emitted = []
    with pytest.raises(bcl.Error, match=f"dataset index {bad}; found when the epoch started"):
        for batch in sampler:
            emitted += batch
    assert emitted == []
    # Nothing of the epoch was taken: the state is that of a sampler between epochs.
    assert sampler.state_dict()["running"] is False
