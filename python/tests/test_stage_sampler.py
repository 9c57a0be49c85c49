"""bcl.DistributedBalancedBatchSampler over a table of stage costs (shape (N, D), a vision encoder's
and a language model's cost a record): every rank exactly B indices a batch, as many batches on
every rank, every index of the epoch once, the same plan on every rank and every run, for either
order; each window's steps are those of the plan of the summed costs or of one stage's alone, their
ranks chosen by stage, so the sum over stages of the slowest rank is never above the summed plan's;
a table of one column plans as a 1-d one; states save and resume, at another number of ranks too
(keyed order), and a state of one cost a record does not load into a sampler of stage costs; bad
tables are errors naming the record and the stage, before any batch."""

import collections

import numpy as np
import pytest

import bcl

from test_stages import vision_language


def sampler(costs, ranks, rank, b=8, k=4, **options):
    return bcl.DistributedBalancedBatchSampler(
        costs, b, ranks, rank, lookahead=k, check_digest=False, **options
    )


def every_rank(costs, ranks, **options):
    return [list(sampler(costs, ranks, r, **options)) for r in range(ranks)]


def stage_objective(costs, ranks_batches):
    """Per step, the sum over stages of the slowest rank's load, summed over the epoch's steps."""
    steps = len(ranks_batches[0])
    return sum(
        max(costs[batches[j]].sum(axis=0)[s] for batches in ranks_batches)
        for j in range(steps) for s in range(costs.shape[1])
    )  # fmt: skip


@pytest.mark.parametrize("order", ["randperm", "keyed"])
@pytest.mark.parametrize("ranks, n, drop_last", [(4, 1000, False), (8, 4096, False),
                                                 (3, 500, True), (1, 77, False)])  # fmt: skip
def test_every_index_once_in_exact_batches_and_the_same_plan_every_time(
    order, ranks, n, drop_last
):
    costs = vision_language(n, ranks + n)
    plans = every_rank(costs, ranks, order=order, drop_last=drop_last)
    assert len({len(p) for p in plans}) == 1  # as many batches on every rank
    assert all(len(b) == 8 for p in plans for b in p[:-1])
    assert len({len(p[-1]) for p in plans}) == 1
    counts = collections.Counter(i for p in plans for b in p for i in b)
    if drop_last:
        assert set(counts.values()) == {1} and len(counts) == ranks * (n // ranks // 8 * 8)
    else:
        assert set(counts) == set(range(n))  # every index; padding repeats the first ones
        assert sum(counts.values()) - n < ranks
    assert plans == every_rank(costs, ranks, order=order, drop_last=drop_last)


@pytest.mark.parametrize("order", ["randperm", "keyed"])
def test_the_stages_never_lose_to_the_summed_plan_and_gain_on_a_vision_language_mix(order):
    costs = vision_language(8 * 4 * 8 * 6, 5)  # six full windows of R=8, K=4, B=8
    stages = every_rank(costs, 8, order=order)
    summed = every_rank(costs.sum(axis=1), 8, order=order)
    for j in range(len(stages[0])):  # every step B indices on every rank
        assert all(len(p[j]) == 8 for p in stages)
    got, flat = stage_objective(costs, stages), stage_objective(costs, summed)
    assert got <= flat * (1 + 1e-9)
    assert got < 0.97 * flat  # a stage-blind plan leaves at least 3% on this mix
    s = sampler(costs, 8, 0, order=order)
    list(s)
    total = costs.sum()
    assert s.stats["planned_efficiency"] == pytest.approx(total / (8 * got), rel=1e-6)


@pytest.mark.parametrize("order", ["randperm", "keyed"])
def test_a_table_of_one_column_plans_as_a_1d_table(order):
    costs = vision_language(300, 3)[:, 1]
    assert every_rank(costs[:, None], 4, order=order) == every_rank(costs, 4, order=order)
    assert sampler(costs[:, None], 4, 0, order=order).state_dict() == sampler(
        costs, 4, 0, order=order).state_dict()  # fmt: skip


@pytest.mark.parametrize("order", ["randperm", "keyed"])
def test_a_state_resumes_where_it_was_saved(order):
    costs = vision_language(1000, 7)
    whole = every_rank(costs, 4, order=order)
    for steps in (0, 3, 17, len(whole[0])):
        old = [sampler(costs, 4, r, order=order) for r in range(4)]
        iterators = [iter(s) for s in old]
        for _ in range(steps):
            for it in iterators:
                next(it, None)
        for r in range(4):
            new = sampler(costs, 4, r, order=order)
            new.load_state_dict(old[r].state_dict())
            assert list(new) == whole[r][steps:]


@pytest.mark.parametrize("ranks, new_ranks", [(4, 3), (4, 8), (3, 1), (2, 5)])
def test_a_keyed_state_resumes_at_another_number_of_ranks_with_every_index_once(ranks, new_ranks):
    n = 701
    costs = vision_language(n, ranks * 10 + new_ranks)
    for steps in (0, 5, 11):
        old = [sampler(costs, ranks, r, order="keyed") for r in range(ranks)]
        iterators = [iter(s) for s in old]
        taken = []
        for _ in range(steps):
            for it in iterators:
                taken += next(it, [])
        state = old[0].state_dict()
        rests = []
        for r in range(new_ranks):
            new = sampler(costs, new_ranks, r, order="keyed")
            new.load_state_dict(state)
            rests.append(list(new))
        assert len({len(p) for p in rests}) == 1
        assert all(len(b) == 8 for p in rests for b in p[:-1])
        counts = collections.Counter(taken + [i for p in rests for b in p for i in b])
        assert set(counts) == set(range(n))
        assert sum(counts.values()) - n <= ranks + new_ranks  # the sizes' padding alone


@pytest.mark.parametrize("order", ["randperm", "keyed"])
def test_a_state_of_other_costs_is_refused_changing_nothing(order):
    costs = vision_language(400, 2)
    one = sampler(costs.sum(axis=1), 4, 0, order=order)
    two = sampler(costs, 4, 0, order=order)
    before = two.state_dict()
    with pytest.raises(bcl.Error):
        two.load_state_dict(one.state_dict())
    assert two.state_dict() == before
    other = costs.copy()
    other[5, 0] += 1.0
    with pytest.raises(bcl.Error):
        sampler(other, 4, 0, order=order).load_state_dict(
            dict(two.state_dict(), position=1) if order == "keyed" else _after_one(two))


def _after_one(s):
    it = iter(s)
    next(it)
    return s.state_dict()


GOOD = vision_language(40, 1)


def _with(i, s, value):
    bad = GOOD.copy()
    bad[i, s] = value
    return bad


@pytest.mark.parametrize("order", ["randperm", "keyed"])
@pytest.mark.parametrize("costs, options, match", [
    (_with(7, 1, np.nan), {}, "record 7's cost of stage 1 is nan"),
    (_with(3, 0, -1.0), {}, "record 3's cost of stage 0 is -1"),
    (_with(9, 1, np.inf), {}, "record 9's cost of stage 1 is inf"),
    (np.zeros((40, 0)), {}, "0 stages"),
    (np.ones((40, bcl._core.max_plan_stages + 1)), {}, "1 to 16"),
    ([[1.0, 2.0], [3.0]], {}, "has 1 stages, but costs\\[0\\] has 2"),
    (GOOD, {"cap": 0.99}, "cap=0.99 is for one cost a record"),
    (GOOD, {"batching": "padded"}, "is for one cost a record"),
])  # fmt: skip
def test_bad_stage_tables_are_errors_naming_the_record_and_the_stage(order, costs, options, match):
    with pytest.raises(bcl.Error, match=match):
        sampler(costs, 4, 0, order=order, **options)


def test_the_rank_local_sampler_reads_a_table_of_one_column_as_one_cost():
    costs = vision_language(64, 4)
    one = bcl.BalancedBatchSampler(range(64), costs[:, :1], 8)
    assert list(one) == list(bcl.BalancedBatchSampler(range(64), costs[:, 0], 8))
