"""Bad options, bad costs and bad input are bcl.Error (a ValueError) with a message that names
what was wrong, never a crash or a wrong batch."""

import math

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
        (dict(seed=-3), "seed must be an integer in [0, 2^63) (got -3)"),
        (dict(seed=2**63), "seed must be an integer in [0, 2^63) (got 9223372036854775808)"),
        (dict(seed=1.0), "seed must be an integer (got 1.0)"),
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
        (dict(mean_cost="high"), "mean_cost must be 'epoch', 'running' or a cost > 0"),
        (dict(mean_cost=0.0), "got 0: name the mode"),
        (dict(memory_budget=-1.0), "memory_budget must be finite and >= 0"),
        (dict(memory_budget=10.0), "no memory estimate was given"),
        (dict(policy="sliding", buffer_windows=2, max_age=0), "max_age"),
    ],
)
def test_bad_options_name_the_option(options, words):
    with pytest.raises(bcl.Error) as e:
        make(**options)
    assert words in str(e.value)


@pytest.mark.parametrize(
    "bad, text", [(-1.0, "-1"), (math.nan, "nan"), (math.inf, "inf"), (1e121, "1e+121")]
)
@pytest.mark.parametrize("mean_cost", ["epoch", 1.0, "running"])
def test_a_bad_cost_in_a_table_is_refused_when_the_sampler_is_built(bad, text, mean_cost):
    # The whole table is checked up front, so every rank raises the same error before its first
    # step, whichever indices its share of the epoch holds.
    costs = np.ones(40)
    costs[17] = bad
    with pytest.raises(bcl.Error) as e:
        bcl.BalancedBatchSampler(range(40), costs, 4, mean_cost=mean_cost)
    assert str(e.value).startswith(f"costs[17] is {text}; it must be >= 0 and at most")


@pytest.mark.parametrize("mean_cost", ["epoch", 1.0])
def test_a_bad_cost_from_a_callable_names_the_dataset_index_before_the_epochs_first_batch(
    mean_cost,
):
    sampler = bcl.BalancedBatchSampler(
        range(10), lambda i: -2.0 if i == 3 else 1.0, 2, mean_cost=mean_cost
    )
    with pytest.raises(bcl.Error, match=r"the cost of dataset index 3 is -2"):
        next(iter(sampler))
    assert sampler.state_dict()["running"] is False  # nothing of the epoch was taken


def test_a_bad_memory_estimate_is_refused_when_the_sampler_is_built():
    memory = np.ones(10)
    memory[4] = math.nan
    with pytest.raises(bcl.Error, match=r"memory\[4\] is nan"):
        bcl.BalancedBatchSampler(range(10), np.ones(10), 2, memory=memory)


def test_a_record_over_the_memory_budget_alone_is_an_error():
    memory = np.ones(10)
    memory[6] = 50.0
    with pytest.raises(bcl.Error, match="alone needs memory 50"):
        list(bcl.BalancedBatchSampler(range(10), np.ones(10), 2, memory=memory, memory_budget=8.0))


def test_an_index_without_a_cost_is_an_error():
    with pytest.raises(bcl.Error, match=r"dataset index 10 has no cost \(costs has 10 entries\)"):
        list(bcl.BalancedBatchSampler([0, 1, 10], np.ones(10), 2))


def test_costs_that_are_not_numbers_or_not_one_dimensional_are_errors():
    with pytest.raises(bcl.Error, match=r"costs\[0\] is 'a', not a real number"):
        bcl.BalancedBatchSampler(range(3), ["a", "b", "c"], 2)
    with pytest.raises(bcl.Error, match="one row per record"):
        bcl.BalancedBatchSampler(range(3), np.ones((3, 2, 2)), 2)
    with pytest.raises(bcl.Error, match="with stage costs .* cap must be None"):
        bcl.BalancedBatchSampler(range(3), np.ones((3, 2)), 2, cap=5.0)
    with pytest.raises(bcl.Error, match="costs is required"):
        bcl.BalancedBatchSampler(range(3), None, 2)
    with pytest.raises(bcl.Error, match="memory has 2 entries but costs has 3"):
        bcl.BalancedBatchSampler(range(3), np.ones(3), 2, memory=np.ones(2))


def test_a_callable_that_gives_no_number_or_a_mapping_without_the_index_is_an_error():
    with pytest.raises(bcl.Error, match="costs of dataset index 0 is None; a cost must be a real"):
        list(bcl.BalancedBatchSampler(range(3), lambda i: None, 2))
    with pytest.raises(bcl.Error, match="costs has no entry for dataset index 2"):
        list(bcl.BalancedBatchSampler(range(3), {0: 1.0, 1: 1.0}, 2))


def test_an_error_in_the_inner_sampler_propagates_unchanged():
    def inner():
        yield 0
        raise KeyError("disk gone")

    with pytest.raises(KeyError, match="disk gone"):
        list(bcl.BalancedBatchSampler(inner(), np.ones(3), 2))


@given(st.integers(1, 50), st.integers(0, 49), st.sampled_from(["sliding", "tumbling"]))
def test_every_index_before_a_refused_one_was_emitted_or_is_still_buffered(n, bad, policy):
    # An index whose memory alone exceeds the budget is refused when it is pushed, after earlier
    # batches: the balancer is unchanged by the failed push.
    bad = bad % n
    memory = np.ones(n)
    memory[bad] = 50.0
    sampler = bcl.BalancedBatchSampler(
        range(n), sequence_costs(n), 2, lookahead=2, policy=policy, mean_cost=1000.0,
        memory=memory, memory_budget=8.0,
    )
    emitted = []
    with pytest.raises(bcl.Error, match=f"dataset index {bad}"):
        for batch in sampler:
            emitted += batch
    # What it holds plus what it emitted is exactly the indices before the refused one.
    pending = sampler.state_dict()["pending"]
    assert sorted(emitted + pending) == list(range(bad))
