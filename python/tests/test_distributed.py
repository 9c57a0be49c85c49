"""bcl.DistributedBalancedBatchSampler: every rank plans the same global plan of the epoch that
DistributedSampler draws and keeps its share. Over all ranks: every index of the epoch exactly
once, the same number of batches on every rank, exact batch sizes, the same plan (digest) on
every rank, exact resume; and steps far better balanced than DistributedSampler + BatchSampler.
bcl.plan_batches plans a global batch the same way."""

import collections
import math
import os
import pickle
import tempfile

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from hypothesis import given
from hypothesis import strategies as st
from torch.utils.data import BatchSampler, DistributedSampler

import bcl

from conftest import Indexed, check_resume, resealed, sequence_costs


def all_ranks(costs, ranks, batch_size, epoch=0, **options):
    """Each rank's batches for `epoch`, as the ranks of one job would draw them."""
    out = []
    for rank in range(ranks):
        s = bcl.DistributedBalancedBatchSampler(
            costs, batch_size, num_replicas=ranks, rank=rank, **options
        )
        s.set_epoch(epoch)
        out.append(list(s))
    return out


def torch_epoch(n, ranks, epoch, shuffle=True, seed=0, drop_last=False):
    """The multiset of indices DistributedSampler deals over all ranks for the epoch."""
    out = collections.Counter()
    for rank in range(ranks):
        s = DistributedSampler(range(n), ranks, rank, shuffle=shuffle, seed=seed,
                               drop_last=drop_last)  # fmt: skip
        s.set_epoch(epoch)
        out.update(list(s))
    return out


@st.composite
def jobs(draw):
    ranks = draw(st.integers(1, 6))
    n = draw(st.integers(0, 400))
    options = dict(
        lookahead=draw(st.integers(1, 4)),
        shuffle=draw(st.booleans()),
        seed=draw(st.integers(0, 50)),
        drop_last=draw(st.booleans()),
        batching=draw(st.sampled_from(["packed", "padded"])),
    )
    return n, ranks, draw(st.integers(1, 9)), options, draw(st.integers(0, 3))


@given(jobs(), st.sampled_from(["lognormal", "equal", "zeros", "giant"]))
def test_over_all_ranks_every_index_of_the_epoch_comes_out_exactly_once(job, kind):
    n, ranks, b, options, epoch = job
    costs = {
        "lognormal": sequence_costs(n, n),
        "equal": np.full(n, 3.0),
        "zeros": np.zeros(n),
        "giant": np.where(np.arange(n) == n // 2, 1e100, 1.0),
    }[kind]
    batches = all_ranks(costs, ranks, b, epoch, **options)
    counts = {len(x) for x in batches}
    assert len(counts) == 1  # every rank steps equally often
    expected = len(bcl.DistributedBalancedBatchSampler(costs, b, ranks, 0, **options))
    assert counts == {expected}
    for rank_batches in batches:
        assert all(len(x) == b for x in rank_batches[:-1])
        if options["drop_last"] and rank_batches:
            assert len(rank_batches[-1]) == b
    # The last batch has as many indices on every rank.
    assert len({len(x[-1]) for x in batches if x}) <= 1
    got = collections.Counter(i for x in batches for batch in x for i in batch)
    want = torch_epoch(n, ranks, epoch, options["shuffle"], options["seed"], options["drop_last"])
    if options["drop_last"]:
        assert not got - want and sum(got.values()) == ranks * expected * b
    else:
        assert got == want


def test_every_rank_computes_the_same_plan():
    costs = sequence_costs(3000, 1)
    digests = {
        bcl.DistributedBalancedBatchSampler(costs, 16, 8, rank).stats["digest"] for rank in range(8)
    }
    assert len(digests) == 1
    other = bcl.DistributedBalancedBatchSampler(costs * 1.5 + (np.arange(3000) % 7), 16, 8, 0)
    assert other.stats["digest"] not in digests  # other costs, another plan


def step_efficiency(batches, costs):
    """Sum over steps of the mean rank's batch cost over the slowest rank's."""
    mean = slowest = 0.0
    for step in zip(*batches):
        loads = [costs[list(batch)].sum() for batch in step]
        mean += np.mean(loads)
        slowest += max(loads)
    return mean / slowest


def test_steps_are_far_better_balanced_than_distributed_sampler_and_batch_sampler():
    n, ranks, b = 8192, 8, 16
    lengths = np.random.default_rng(2).lognormal(5.5, 0.8, size=n)
    costs = lengths + lengths**2 / 4096  # the dearest record: 1.7 mean batches
    planned = all_ranks(costs, ranks, b)
    plain = []
    for rank in range(ranks):
        inner = DistributedSampler(range(n), ranks, rank, shuffle=True, seed=0)
        plain.append(list(BatchSampler(inner, b, drop_last=False)))
    assert step_efficiency(planned, costs) > 0.999  # measured 0.99994
    assert step_efficiency(plain, costs) < 0.7  # measured 0.668


@given(jobs(), st.data())
def test_a_restored_sampler_hands_out_exactly_the_rest_of_the_epoch(job, data):
    n, ranks, b, options, epoch = job
    costs = sequence_costs(n, 3)
    rank = data.draw(st.integers(0, ranks - 1))

    def fresh():
        return bcl.DistributedBalancedBatchSampler(costs, b, ranks, rank, **options)

    def sampler():
        s = fresh()
        s.set_epoch(epoch)
        return s

    check_resume(sampler, fresh, data)


def saved(**changes):
    costs = sequence_costs(500, 4)
    s = bcl.DistributedBalancedBatchSampler(costs, 8, 4, 1)
    it = iter(s)
    for _ in range(5):
        next(it)
    return s.state_dict()


@pytest.mark.parametrize(
    "sampler, edit, words",
    [
        (dict(), dict(position=99), "position is 99, past the 16 batches"),
        (dict(), dict(epoch=1), "digest does not match"),
        (dict(), dict(digest="0123456789abcdef"), "digest does not match"),
        (dict(costs=sequence_costs(500, 5)), dict(), "digest does not match"),
        (dict(batch_size=16), dict(), "batch_size=8"),
        (dict(num_replicas=8), dict(), "num_replicas=4"),
        (dict(seed=3), dict(), "seed=0"),
        (dict(costs=sequence_costs(400, 4)), dict(), "dataset_size=500"),
        (dict(), dict(settings={"seed": 0}), "has no 'settings.batch_size'"),
        (dict(), dict(position=True), "position must be an integer"),
    ],
)
def test_a_state_that_does_not_match_is_refused_and_changes_nothing(sampler, edit, words):
    options = dict(costs=sequence_costs(500, 4), batch_size=8, num_replicas=4, rank=1)
    options.update(sampler)
    target = bcl.DistributedBalancedBatchSampler(**options)
    before = list(target)
    with pytest.raises(bcl.Error, match=words):
        target.load_state_dict(resealed(saved(), **edit))
    assert list(target) == before
    with pytest.raises(bcl.Error, match="checksum does not match"):
        target.load_state_dict(dict(saved(), position=6))


@pytest.mark.parametrize(
    "options, words",
    [
        (dict(num_replicas=4, rank=4), "rank 4 of num_replicas 4"),
        (dict(num_replicas=0, rank=0), "rank 0 of num_replicas 0"),
        (dict(num_replicas=4, rank=0, batch_size=0), "batch_size and lookahead"),
        (dict(num_replicas=4, rank=None), "rank is needed"),
        (dict(num_replicas=2, rank=0, costs=lambda i: 1.0), "the whole table"),
        (dict(num_replicas=2, rank=0, cap=-1.0), "cap.value must be finite and > 0"),
    ],
)
def test_bad_arguments_are_errors_naming_them(options, words):
    arguments = dict(costs=np.ones(10), batch_size=2)
    arguments.update(options)
    with pytest.raises(bcl.Error, match=words):
        bcl.DistributedBalancedBatchSampler(**arguments)


def test_a_bad_cost_is_refused_on_every_rank_before_the_first_step():
    costs = np.ones(100)
    costs[42] = np.nan
    for rank in range(4):
        with pytest.raises(bcl.Error, match=r"costs\[42\] is nan"):
            bcl.DistributedBalancedBatchSampler(costs, 4, 4, rank)


def _digest_check(rank, world, store, differ, tokens, results):
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    costs = sequence_costs(400, 9)
    if differ and rank == 1:
        costs = costs[::-1].copy()  # this rank's table is another's
    if tokens:  # the token mode, the costs read as lengths
        lengths = costs.astype(np.int64)
        sampler = bcl.DistributedBalancedBatchSampler(lengths=lengths, max_tokens=2**20,
                                                      micro_batches=2)  # fmt: skip
    else:
        sampler = bcl.DistributedBalancedBatchSampler(costs, 4)
    try:
        results[rank] = ("ok", len(list(sampler)))
    except bcl.Error as e:
        results[rank] = ("error", str(e))
    dist.destroy_process_group()


@pytest.mark.parametrize("tokens", [False, True])
@pytest.mark.parametrize("differ", [False, True])
def test_ranks_that_plan_differently_all_raise_at_the_epochs_start(differ, tokens):
    # One all-reduce of the epoch's digest: with a process group up, every rank learns that one
    # rank's costs (or lengths) differ, before the first batch.
    with tempfile.TemporaryDirectory() as tmp:
        results = mp.Manager().dict()
        store = os.path.join(tmp, "store")
        mp.spawn(_digest_check, args=(2, store, differ, tokens, results), nprocs=2, join=True)
        outcomes = dict(results)
    if not differ:
        assert outcomes[0] == outcomes[1] and outcomes[0][0] == "ok"
        assert tokens or outcomes[0] == ("ok", 50)
    else:
        assert all(kind == "error" and "differs from another rank" in text
                   for kind, text in outcomes.values())  # fmt: skip


def test_plan_batches_gives_every_rank_as_many_micro_batches_of_b_aligned_by_cost():
    n, ranks, b = 1024, 8, 16
    lengths = np.random.default_rng(5).lognormal(6.0, 0.9, size=n)
    costs = lengths + lengths**2 / 4096
    plan = bcl.plan_batches(costs, ranks, b)
    assert len(plan) == ranks and {len(p) for p in plan} == {n // (ranks * b)}
    assert all(len(batch) == b for p in plan for batch in p)
    assert sorted(i for p in plan for batch in p for i in batch) == list(range(n))
    assert step_efficiency(plan, costs) > 0.995
    uneven = bcl.plan_batches(np.ones(40), 4, 3)  # 10 per rank: 3 + 3 + 3 + 1
    assert [len(batch) for batch in uneven[0]] == [3, 3, 3, 1]
    assert all([len(x) for x in p] == [3, 3, 3, 1] for p in uneven)
    with pytest.raises(bcl.Error, match="do not split equally over 3 ranks"):
        bcl.plan_batches(np.ones(10), 3, 2)


def test_the_sampler_is_a_torch_sampler_with_a_length():
    s = bcl.DistributedBalancedBatchSampler(np.ones(103), 4, 4, 0)
    assert isinstance(s, torch.utils.data.Sampler)
    assert len(s) == math.ceil(math.ceil(103 / 4) / 4) == len(list(s))


_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True),
    st.text(max_size=17), st.binary(max_size=8), st.lists(st.integers(-5, 50), max_size=5),
    st.dictionaries(st.sampled_from(["seed", "rank", "batch_size"]), st.integers(0, 9)),
)  # fmt: skip


@given(st.integers(0, 16), st.dictionaries(
    st.sampled_from(["format", "epoch", "position", "digest", "settings", "checksum"]),
    _VALUES, min_size=1, max_size=3), st.booleans())  # fmt: skip
def test_any_edit_of_a_state_is_refused_or_resumes_an_exact_epoch(stop, edits, reseal):
    import forked
    import tampering

    costs = sequence_costs(500, 4)

    def make():
        return bcl.DistributedBalancedBatchSampler(costs, 8, 4, 1)

    first = make()
    it = iter(first)
    for _ in range(stop):
        next(it)
    state = dict(first.state_dict(), **edits)
    if reseal:
        state = resealed(state)

    def trial():
        target, refused = tampering.load(make, state)
        return (refused or tampering.rest_of_its_epoch(make, target))[0]

    outcome = forked.run(trial, timeout=60.0)
    assert outcome[0] == "ok" and outcome[1] in ("refused", "exact"), (edits, outcome)


@pytest.mark.parametrize("workers, prefetch", [(0, None), (2, 1), (2, 2), (4, 2), (4, 4)])
def test_resume_under_a_prefetching_dataloader_equals_the_uninterrupted_epoch(workers, prefetch):
    # A DataLoader with workers has read batches ahead of the loop; state_dict(consumed=k) is
    # the state after the loop's k-th batch, so the resumed loader hands out the read-ahead again.
    n, b, stop = 700, 8, 17
    costs = sequence_costs(n, 4)

    def sampler():
        return bcl.DistributedBalancedBatchSampler(costs, b, num_replicas=2, rank=1, seed=5)

    def loader(s):
        extra = {} if prefetch is None else {"prefetch_factor": prefetch}
        return torch.utils.data.DataLoader(
            Indexed(n), batch_sampler=s, num_workers=workers, collate_fn=list, **extra
        )

    expected = list(sampler())
    first = sampler()
    head = []
    for batch in loader(first):
        head.append(batch)
        if len(head) == stop:
            break
    state = pickle.loads(pickle.dumps(first.state_dict(consumed=len(head))))
    second = sampler()
    second.load_state_dict(state)
    assert head + list(loader(second)) == expected
