"""A checkpoint that resumes on another number of ranks (fixed batches over the keyed order; token
mode's are in test_token_resize.py): a
state saved at R ranks at a step boundary loads into a sampler built at R' ranks, and the epoch
goes on with every index exactly once over the whole epoch (the new size's padding aside), as
many batches on every new rank, any saving rank's state serving every new rank; chains of
resizes within one epoch; DataLoader workers' ``consumed=``; the state stays small; states of
another table, seed or option, and states the new size cannot take, are refused, changing
nothing."""

import collections
import pickle

import numpy as np
import pytest

import bcl

from conftest import sequence_costs


def sampler(costs, ranks, rank, b=4, k=3, **options):
    options.setdefault("order", "keyed")
    return bcl.DistributedBalancedBatchSampler(
        costs, b, ranks, rank, lookahead=k, check_digest=False, **options
    )


def run(samplers, steps):
    """`steps` steps of every rank (fewer where the epoch ends): the indices taken."""
    taken = []
    iterators = [iter(s) for s in samplers]
    for _ in range(steps):
        for it in iterators:
            batch = next(it, None)
            if batch is not None:
                taken += batch
    return taken, iterators


def check_once(n, taken, padding):
    counts = collections.Counter(taken)
    assert set(counts) == set(range(n)), "every index of the epoch comes out"
    repeated = sum(c - 1 for c in counts.values())
    assert repeated <= padding, (repeated, padding)


SIZES = [(4, 1), (4, 3), (4, 5), (4, 8), (4, 2), (4, 7), (6, 3), (1, 4), (3, 3)]


@pytest.mark.parametrize("ranks, new_ranks", SIZES)
@pytest.mark.parametrize("seed", [1, 2])
def test_an_epoch_goes_on_at_another_size_with_every_index_once(ranks, new_ranks, seed):
    n = 301
    costs = sequence_costs(n, seed)
    whole = sampler(costs, ranks, 0)
    for steps in range(len(whole) + 1):  # every step boundary of the epoch, its end too
        old = [sampler(costs, ranks, r, seed=seed) for r in range(ranks)]
        taken, _ = run(old, steps)
        state = old[steps % ranks].state_dict()  # any saving rank's state serves every new rank
        new = [sampler(costs, new_ranks, r, seed=seed) for r in range(new_ranks)]
        for s in new:
            s.load_state_dict(state)
        lengths = {len(s) for s in new}
        rests = [list(s) for s in new]
        assert len(lengths) == 1 and len({len(r) for r in rests}) == 1  # equal counts
        if new_ranks != ranks:  # the rest is an epoch of its own: len() counts it
            assert {len(r) for r in rests} == lengths
        batch_sizes = [len(b) for r in rests for b in r[:-1]]
        assert all(size == 4 for size in batch_sizes)
        # Padding: the old size's records never taken plus the new size's own repeats.
        check_once(n, taken + [i for r in rests for b in r for i in b], padding=ranks + new_ranks)


@pytest.mark.parametrize("sizes", [(4, 3, 5), (2, 7, 2), (8, 1, 3), (5, 5, 2)])
def test_chains_of_resizes_within_one_epoch(sizes):
    n = 1500
    costs = sequence_costs(n, 9)
    taken, current = [], [sampler(costs, sizes[0], r) for r in range(sizes[0])]
    for new_ranks in sizes[1:] + (None,):
        got, iterators = run(current, 7)
        taken += got
        if new_ranks is None:
            for it in iterators:
                taken += [i for b in it for i in b]  # the rest of the pass
            break
        state = current[-1].state_dict()
        assert len(pickle.dumps(state)) < 4096  # a bitmap of about a window, never a list
        current = [sampler(costs, new_ranks, r) for r in range(new_ranks)]
        for s in current:
            s.load_state_dict(state)
    check_once(n, taken, padding=sum(sizes))


def test_a_resumed_rest_resumes_again_at_its_own_size_exactly():
    costs = sequence_costs(800, 3)
    old = [sampler(costs, 4, r) for r in range(4)]
    run(old, 5)
    new = [sampler(costs, 3, r) for r in range(3)]
    for s in new:
        s.load_state_dict(old[0].state_dict())
    it = iter(new[2])
    [next(it) for _ in range(4)]
    state = new[2].state_dict()
    assert "rest" in state
    again = sampler(costs, 3, 2)
    again.load_state_dict(state)
    assert list(again) == list(it)


def test_workers_consumed_count_is_the_step_boundary():
    # A DataLoader with workers reads ahead: state_dict(consumed=k) is the state after k steps.
    n = 600
    costs = sequence_costs(n, 4)
    old = [sampler(costs, 2, r) for r in range(2)]
    taken, iterators = run(old, 6)
    for it in iterators:  # read ahead, not trained
        next(it)
        next(it)
    state = old[0].state_dict(consumed=6)
    new = [sampler(costs, 5, r) for r in range(5)]
    for s in new:
        s.load_state_dict(state)
    check_once(n, taken + [i for s in new for b in s for i in b], padding=2 + 5)


def test_a_state_of_another_table_seed_or_option_is_refused_changing_nothing():
    costs = sequence_costs(500, 5)
    old = sampler(costs, 4, 1)
    it = iter(old)
    next(it)
    state = old.state_dict()
    other = list(costs)
    other[3] += 1.0
    cases = [
        (sampler(other, 2, 0), r"digest does not match"),
        (sampler(costs, 2, 0, seed=7), r"seed=0, but this sampler has seed=7"),
        (sampler(costs, 2, 0, b=5), r"batch_size=4, but this sampler has batch_size=5"),
        (sampler(costs, 2, 0, order="randperm"), r"order"),
    ]
    for s, match in cases:
        before = s.state_dict()
        with pytest.raises(bcl.Error, match=match):
            s.load_state_dict(state)
        assert s.state_dict() == before


def test_a_damaged_rest_is_refused_naming_it():
    costs = sequence_costs(700, 6)
    old = [sampler(costs, 4, r) for r in range(4)]
    run(old, 4)
    new = [sampler(costs, 3, r) for r in range(3)]
    for s in new:
        s.load_state_dict(old[0].state_dict())
    it = iter(new[0])
    next(it)
    state = new[0].state_dict()
    from bcl._state import checksum

    fields = ("format", "epoch", "position", "digest", "settings", "rest")
    for edit, match in [
        (lambda r: r.update(start=10**6), r"past the epoch's 700"),
        (lambda r: r.update(taken=r["taken"] + b"\x00"), r"a bitmap of"),
        (lambda r: r.update(span="3"), r"rest.span must be an integer"),
        (lambda r: r.pop("taken"), r"has no 'rest.taken'"),
    ]:
        bad = dict(state, rest=dict(state["rest"]))
        edit(bad["rest"])
        bad["checksum"] = checksum(bad, fields)
        target = sampler(costs, 3, 0)
        before = target.state_dict()
        with pytest.raises(bcl.Error, match=match):
            target.load_state_dict(bad)
        assert target.state_dict() == before


def test_randperm_still_refuses_another_size():
    costs = sequence_costs(300, 7)
    old = sampler(costs, 4, 0, order="randperm")
    next(iter(old))
    with pytest.raises(bcl.Error, match=r"num_replicas=4, but this sampler has num_replicas=2"):
        sampler(costs, 2, 0, order="randperm").load_state_dict(old.state_dict())
    lengths = np.full(300, 100)
    tok = bcl.DistributedBalancedBatchSampler(None, None, 4, 0, max_tokens=1000, micro_batches=1,
                                              lengths=lengths, check_digest=False)
    next(iter(tok))
    other = bcl.DistributedBalancedBatchSampler(None, None, 2, 0, max_tokens=1000,
                                                micro_batches=1, lengths=lengths,
                                                check_digest=False)
    with pytest.raises(bcl.Error, match=r"num_replicas=4, but this sampler has num_replicas=2"):
        other.load_state_dict(tok.state_dict())
