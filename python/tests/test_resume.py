"""Exact resume: a sampler restored from state_dict() (through pickle) yields exactly the batches
the uninterrupted one would have, at any point: mid-window, during the final drain, at an epoch's
end, before the first batch."""

import pickle

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.utils.data import DistributedSampler

import bcl

from conftest import Indexed, resealed, sequence_costs


class Shuffled:
    """An inner sampler with its own state: each epoch a new permutation from its RNG, and
    state_dict()/load_state_dict() that capture the RNG (as torchdata's stateful samplers do)."""

    def __init__(self, n, seed):
        self.n = n
        self.rng = np.random.default_rng(seed)

    def __len__(self):
        return self.n

    def __iter__(self):
        return iter(self.rng.permutation(self.n).tolist())

    def state_dict(self):
        return {"rng": self.rng.bit_generator.state}

    def load_state_dict(self, state):
        self.rng.bit_generator.state = state["rng"]


def round_trip(state):
    return pickle.loads(pickle.dumps(state))


@st.composite
def runs(draw):
    n = draw(st.integers(0, 500))
    options = dict(
        batch_size=draw(st.integers(1, 16)),
        lookahead=draw(st.integers(1, 5)),
        policy=draw(st.sampled_from(["sliding", "tumbling"])),
        drop_last=draw(st.booleans()),
        seed=draw(st.integers(0, 1000)),
        emission=draw(st.sampled_from(["costliest_first", "shuffled"])),
    )
    if draw(st.booleans()):
        options["cap"] = draw(st.sampled_from(["p90", 500.0]))
        options["cap_warmup"] = draw(st.integers(0, 50))
    return n, options, draw(st.integers(0, 2**32 - 1))


@given(runs(), st.data())
def test_a_restored_sampler_yields_exactly_the_rest_of_the_epoch(run, data):
    n, options, seed = run
    costs = sequence_costs(n, seed)
    order = np.random.default_rng(seed).permutation(n).tolist()
    expected = list(bcl.BalancedBatchSampler(order, costs, **options))
    stop = data.draw(st.integers(0, len(expected)), label="stop")

    first = bcl.BalancedBatchSampler(order, costs, **options)
    it = iter(first)
    head = [next(it) for _ in range(stop)]
    state = round_trip(first.state_dict())

    second = bcl.BalancedBatchSampler(list(order), costs.copy(), **options)
    second.load_state_dict(state)
    assert head + list(second) == expected
    # The interrupted sampler itself is not disturbed by saving.
    assert head + list(it) == expected


@given(runs(), st.data())
def test_resuming_twice_is_still_exact(run, data):
    n, options, seed = run
    costs = sequence_costs(n, seed)
    order = np.random.default_rng(seed).permutation(n).tolist()
    expected = list(bcl.BalancedBatchSampler(order, costs, **options))
    stops = sorted(data.draw(st.lists(st.integers(0, len(expected)), min_size=2, max_size=2)))
    out, state = [], None
    for stop in stops + [len(expected)]:
        sampler = bcl.BalancedBatchSampler(order, costs, **options)
        if state is not None:
            sampler.load_state_dict(round_trip(state))
        it = iter(sampler)
        while len(out) < stop:
            out.append(next(it))
        state = sampler.state_dict()
    assert out == expected


@given(st.integers(1, 400), st.integers(1, 8), st.integers(0, 3), st.data())
def test_resume_over_a_distributed_sampler_with_set_epoch(n, b, epoch, data):
    costs = sequence_costs(n, n)

    def sampler():
        inner = DistributedSampler(range(n), num_replicas=4, rank=1, shuffle=True, seed=5)
        return bcl.BalancedBatchSampler(inner, costs, b)
    reference = sampler()
    reference.set_epoch(epoch)
    expected = list(reference)
    stop = data.draw(st.integers(0, len(expected)))

    first = sampler()
    first.set_epoch(epoch)
    it = iter(first)
    head = [next(it) for _ in range(stop)]
    second = sampler()  # its DistributedSampler is at epoch 0: the state sets the epoch
    second.load_state_dict(round_trip(first.state_dict()))
    assert second.sampler.epoch == epoch
    assert head + list(second) == expected


def test_the_inner_samplers_state_is_saved_and_restored():
    n, b = 300, 8
    costs = sequence_costs(n)
    reference = bcl.BalancedBatchSampler(Shuffled(n, seed=1), costs, b)
    epochs = [list(reference) for _ in range(3)]
    assert epochs[0] != epochs[1]  # the inner sampler shuffles anew each epoch

    first = bcl.BalancedBatchSampler(Shuffled(n, seed=1), costs, b)
    assert list(first) == epochs[0]
    it = iter(first)
    head = [next(it) for _ in range(11)]
    state = round_trip(first.state_dict())

    second = bcl.BalancedBatchSampler(Shuffled(n, seed=99), costs, b)  # another RNG state
    second.load_state_dict(state)
    assert head + list(second) == epochs[1]
    assert list(second) == epochs[2]  # and the epoch after continues the inner sampler's stream


def test_a_state_saved_at_an_epochs_end_starts_the_next_epoch():
    n, b = 200, 8
    costs = sequence_costs(n)
    reference = bcl.BalancedBatchSampler(Shuffled(n, seed=4), costs, b)
    epochs = [list(reference) for _ in range(2)]

    first = bcl.BalancedBatchSampler(Shuffled(n, seed=4), costs, b)
    assert list(first) == epochs[0]
    state = round_trip(first.state_dict())
    assert state["running"] is False
    second = bcl.BalancedBatchSampler(Shuffled(n, seed=0), costs, b)
    second.load_state_dict(state)
    assert list(second) == epochs[1]


def test_a_state_saved_before_iterating_restores_the_whole_epoch():
    costs = sequence_costs(100)
    first = bcl.BalancedBatchSampler(Shuffled(100, seed=2), costs, 4)
    state = round_trip(first.state_dict())
    expected = list(first)
    second = bcl.BalancedBatchSampler(Shuffled(100, seed=3), costs, 4)
    second.load_state_dict(state)
    assert list(second) == expected


def test_a_loaded_state_reads_back_unchanged_until_iterated():
    costs = sequence_costs(100)
    first = bcl.BalancedBatchSampler(range(100), costs, 4)
    it = iter(first)
    for _ in range(7):
        next(it)
    state = first.state_dict()
    second = bcl.BalancedBatchSampler(range(100), costs, 4)
    second.load_state_dict(state)
    assert second.state_dict() == state
    assert second.stats["batches"] == 7


def test_callable_costs_resume_exactly():
    n = 257
    costs = sequence_costs(n, 8)
    expected = list(bcl.BalancedBatchSampler(range(n), costs, 5))
    first = bcl.BalancedBatchSampler(range(n), lambda i: costs[i], 5)
    it = iter(first)
    head = [next(it) for _ in range(20)]
    second = bcl.BalancedBatchSampler(range(n), lambda i: costs[i], 5)
    second.load_state_dict(round_trip(first.state_dict()))
    assert head + list(second) == expected


def test_memory_estimates_resume_exactly():
    n = 300
    costs, memory = sequence_costs(n, 1), sequence_costs(n, 2)
    options = dict(memory=memory, largest_first=True)
    expected = list(bcl.BalancedBatchSampler(range(n), costs, 6, **options))
    first = bcl.BalancedBatchSampler(range(n), costs, 6, **options)
    it = iter(first)
    head = [next(it) for _ in range(13)]
    second = bcl.BalancedBatchSampler(range(n), costs, 6, **options)
    second.load_state_dict(round_trip(first.state_dict()))
    assert head + list(second) == expected
    # A balancer without a memory estimate cannot take that state.
    third = bcl.BalancedBatchSampler(range(n), costs, 6, largest_first=True)
    with pytest.raises(bcl.Error, match="memory estimate"):
        third.load_state_dict(first.state_dict())


# -- bad states ----------------------------------------------------------------------------------


def saved_mid_epoch(**options):
    costs = sequence_costs(200)
    sampler = bcl.BalancedBatchSampler(range(200), costs, 4, **options)
    it = iter(sampler)
    for _ in range(9):
        next(it)
    return sampler.state_dict()


def fresh(**options):
    return bcl.BalancedBatchSampler(range(200), sequence_costs(200), 4, **options)


@pytest.mark.parametrize(
    "saved, loading, option",
    [
        (dict(), dict(batch_size=8), "batch_size"),
        (dict(), dict(lookahead=4), "lookahead"),
        (dict(seed=1), dict(seed=2), "seed"),
        (dict(policy="tumbling"), dict(), "policy"),
        (dict(drop_last=True), dict(), "drop_last"),
        (dict(mean_cost=2.0), dict(), "mean_cost"),
    ],
)
def test_loading_a_state_saved_with_other_options_names_the_option(saved, loading, option):
    state = saved_mid_epoch(**saved)
    loading.setdefault("batch_size", 4)
    sampler = bcl.BalancedBatchSampler(range(200), sequence_costs(200), **loading)
    with pytest.raises(bcl.Error, match=option):
        sampler.load_state_dict(state)


def test_corrupted_or_truncated_bytes_are_errors():
    state = saved_mid_epoch()
    flipped = bytearray(state["balancer"])
    flipped[len(flipped) // 2] ^= 0x10
    for data in (bytes(flipped), state["balancer"][:-5], b""):
        with pytest.raises(bcl.Error):
            fresh().load_state_dict(dict(state, balancer=data))


@given(st.data())
def test_any_damage_to_a_state_is_an_error_or_a_faithful_restore(data):
    state = saved_mid_epoch()
    raw = bytearray(state["balancer"])
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, len(raw) - 1))
        raw[at] = data.draw(st.integers(0, 255))
    try:
        fresh().load_state_dict(dict(state, balancer=bytes(raw)))
    except bcl.Error:
        return
    assert bytes(raw) == state["balancer"]  # only an undamaged state loads


def test_pending_indices_that_do_not_match_the_state_are_errors():
    state = saved_mid_epoch()
    with pytest.raises(bcl.Error, match="pending records given"):
        fresh().load_state_dict(resealed(state, pending=state["pending"][:-1]))
    with pytest.raises(bcl.Error, match=r"state's pending gave 'x' at position 0"):
        fresh().load_state_dict(resealed(state, pending=["x"] * len(state["pending"])))


def test_states_of_another_kind_are_errors():
    state = saved_mid_epoch()
    with pytest.raises(bcl.Error, match="not a state of this sampler"):
        fresh().load_state_dict({"format": "something else"})
    with pytest.raises(bcl.Error, match="not a state of this sampler"):
        fresh().load_state_dict([1, 2, 3])
    without_position = {k: v for k, v in state.items() if k != "position"}
    with pytest.raises(bcl.Error, match="has no 'position'"):
        fresh().load_state_dict(resealed(without_position))
    with pytest.raises(bcl.Error, match="position is 201, past the epoch's length 200"):
        fresh().load_state_dict(resealed(state, position=state["length"] + 1))


def test_an_inner_sampler_that_does_not_repeat_its_epoch_is_caught_on_resume():
    costs = sequence_costs(100)
    first = bcl.BalancedBatchSampler(torch.utils.data.RandomSampler(range(100)), costs, 4)
    it = iter(first)
    next(it)
    second = bcl.BalancedBatchSampler(torch.utils.data.RandomSampler(range(100)), costs, 4)
    with pytest.raises(bcl.Error, match="yields other indices for this epoch"):
        second.load_state_dict(first.state_dict())
    assert sorted(i for batch in second for i in batch) == list(range(100))  # a fresh epoch


# -- resume under a loader that reads ahead ------------------------------------------------------


@given(runs(), st.data())
def test_a_state_as_of_any_consumed_batch_resumes_exactly_there(run, data):
    # The sampler has handed out more batches than the training loop took (a DataLoader's
    # prefetch): state_dict(consumed=k) is the state after the loop's k-th batch.
    n, options, seed = run
    costs = sequence_costs(n, seed)
    order = np.random.default_rng(seed).permutation(n).tolist()
    expected = list(bcl.BalancedBatchSampler(order, costs, **options))
    handed_out = data.draw(st.integers(0, len(expected)), label="handed out")
    consumed = data.draw(st.integers(max(0, handed_out - 64), handed_out), label="consumed")

    first = bcl.BalancedBatchSampler(order, costs, **options)
    it = iter(first)
    for _ in range(handed_out):
        next(it)
    state = round_trip(first.state_dict(consumed=consumed))

    second = bcl.BalancedBatchSampler(list(order), costs.copy(), **options)
    second.load_state_dict(state)
    assert expected[:consumed] + list(second) == expected


def test_consumed_further_back_than_the_prefetch_limit_or_ahead_is_an_error():
    costs = sequence_costs(400)
    sampler = bcl.BalancedBatchSampler(range(400), costs, 4, prefetch_limit=8)
    it = iter(sampler)
    for _ in range(40):
        next(it)
    with pytest.raises(bcl.Error, match="consumed=20 is 20 batches behind .* last 8"):
        sampler.state_dict(consumed=20)
    with pytest.raises(bcl.Error, match="consumed=41, but this epoch has handed out 40"):
        sampler.state_dict(consumed=41)
    with pytest.raises(bcl.Error, match="consumed must be an integer"):
        sampler.state_dict(consumed=3.0)
    assert sampler.state_dict(consumed=32)["running"] is True


@pytest.mark.parametrize("workers, prefetch", [(0, None), (2, 1), (2, 2), (4, 2), (4, 4)])
def test_resume_under_a_prefetching_dataloader_equals_the_uninterrupted_epoch(workers, prefetch):
    n, b, stop = 600, 8, 23
    costs = sequence_costs(n, 4)

    def loader(sampler):
        extra = {} if prefetch is None else {"prefetch_factor": prefetch}
        return torch.utils.data.DataLoader(
            Indexed(n), batch_sampler=sampler, num_workers=workers, collate_fn=list, **extra
        )

    def inner():
        return DistributedSampler(range(n), num_replicas=2, rank=0, shuffle=True, seed=9)

    expected = list(bcl.BalancedBatchSampler(inner(), costs, b))
    first = bcl.BalancedBatchSampler(inner(), costs, b)
    head = []
    for batch in loader(first):
        head.append(batch)
        if len(head) == stop:
            break
    state = round_trip(first.state_dict(consumed=len(head)))
    second = bcl.BalancedBatchSampler(inner(), costs, b)
    second.load_state_dict(state)
    rest = list(loader(second))
    assert head + rest == expected


def test_what_the_balancer_learned_carries_into_the_next_epoch_and_through_a_state():
    # A p90 cap warms up over the first epoch; the second epoch starts with it in force. A state
    # saved between the epochs carries it, so the resumed second epoch is the uninterrupted one.
    n, b = 600, 8
    costs = sequence_costs(n, 6)
    options = dict(cap="p90", cap_warmup=400, lookahead=4)
    reference = bcl.BalancedBatchSampler(Shuffled(n, seed=3), costs, b, **options)
    list(reference)  # the first epoch
    second = list(reference)
    assert reference.stats["records_capped"] > 0  # capped from the epoch's first index on

    fresh = bcl.BalancedBatchSampler(Shuffled(n, seed=3), costs, b, **options)
    list(fresh)
    restarted = bcl.BalancedBatchSampler(Shuffled(n, seed=0), costs, b, **options)
    restarted.load_state_dict(round_trip(fresh.state_dict()))
    assert list(restarted) == second

    # A sampler whose balancer starts afresh (a state without what was learned) differs.
    forgetful = bcl.BalancedBatchSampler(Shuffled(n, seed=0), costs, b, **options)
    state = fresh.state_dict()
    forgetful.load_state_dict(resealed(state, learned=None))
    assert list(forgetful) != second
