"""bcl.plan_micro_batches with a table of stage costs (shape (N, D)): every rank as many
micro-batches, none above max_tokens, every index once, groups kept to one rank and step; the sum
over micro-steps and stages of the dearest micro-batch never above that of the plan of the summed
costs; a table of one column, and sync="step", plan as one cost a record; the sampler's token
mode refuses stage costs by name; bad tables are errors naming the record and the stage."""

import collections

import numpy as np
import pytest

import bcl

from test_stages import vision_language


def tokens_of(costs):
    """Each record's tokens, from the language model's cost T + T^2/24576."""
    lm = costs[:, 1]
    return np.round((-1 + np.sqrt(1 + 4 * lm / 24576)) * 24576 / 2).astype(np.int64)


def stage_objective(costs, plan):
    steps = len(plan[0])
    return sum(
        max(costs[plan[r][j]].sum(axis=0)[s] if plan[r][j] else 0.0 for r in range(len(plan)))
        for j in range(steps) for s in range(costs.shape[1])
    )  # fmt: skip


@pytest.mark.parametrize("ranks, n, lookahead", [(8, 512, 1), (4, 200, 2), (2, 64, 1),
                                                 (16, 1024, 1)])  # fmt: skip
@pytest.mark.parametrize("seed", [1, 2])
def test_the_contract_holds_and_the_stages_never_lose_to_the_summed_plan(
    ranks, n, lookahead, seed
):
    costs = vision_language(n, seed)
    tokens = tokens_of(costs)
    t = 16384
    plan = bcl.plan_micro_batches(tokens, ranks, t, costs=costs, lookahead=lookahead,
                                  oversized="alone")  # fmt: skip
    summed = bcl.plan_micro_batches(tokens, ranks, t, costs=costs.sum(axis=1),
                                    lookahead=lookahead, oversized="alone")  # fmt: skip
    assert len({len(r) for r in plan}) == 1  # as many micro-batches on every rank
    assert all(len(b) > 0 for r in plan for b in r)
    for r in plan:
        for b in r:
            assert tokens[b].sum() <= t or len(b) == 1
    counts = collections.Counter(i for r in plan for b in r for i in b)
    assert sorted(counts) == list(range(n)) and set(counts.values()) == {1}
    got = stage_objective(costs, plan)
    assert plan.summary["objective"] == pytest.approx(got, rel=1e-6)
    assert got <= stage_objective(costs, summed) * (1 + 1e-6)
    assert plan.summary["lower_bound"] <= got * (1 + 1e-9)
    assert plan.summary["stages"] == 2
    assert plan == bcl.plan_micro_batches(tokens, ranks, t, costs=costs, lookahead=lookahead,
                                          oversized="alone")  # fmt: skip


def test_on_a_vision_language_mix_the_stages_gain_over_the_summed_plan():
    total = got = flat = 0.0
    for seed in range(8):
        costs = vision_language(8 * 48, seed)
        tokens = tokens_of(costs)
        plan = bcl.plan_micro_batches(tokens, 8, 16384, costs=costs, oversized="alone")
        summed = bcl.plan_micro_batches(tokens, 8, 16384, costs=costs.sum(axis=1),
                                        oversized="alone")  # fmt: skip
        total += costs.sum()
        got += stage_objective(costs, plan)
        flat += stage_objective(costs, summed)
    assert total / (8 * got) >= total / (8 * flat) + 0.02


def test_groups_stay_on_one_rank_and_step():
    costs = vision_language(240, 4)
    tokens = tokens_of(costs)
    groups = np.arange(240) // 4
    plan = bcl.plan_micro_batches(tokens, 4, 16384, costs=costs, groups=groups, lookahead=2,
                                  oversized="alone")  # fmt: skip
    where = collections.defaultdict(set)
    for r, batches in enumerate(plan):
        for step, micro in enumerate(plan.steps(r)):
            for b in micro:
                for i in b:
                    where[groups[i]].add((r, step))
    assert all(len(places) == 1 for places in where.values())


def test_one_column_and_sync_step_plan_as_one_cost_a_record():
    costs = vision_language(128, 6)
    tokens = tokens_of(costs)
    one = bcl.plan_micro_batches(tokens, 4, 16384, costs=costs[:, 1:], oversized="alone")
    assert one == bcl.plan_micro_batches(tokens, 4, 16384, costs=costs[:, 1], oversized="alone")
    step = bcl.plan_micro_batches(tokens, 4, 16384, costs=costs, sync="step", oversized="alone")
    assert step == bcl.plan_micro_batches(tokens, 4, 16384, costs=costs.sum(axis=1),
                                          oversized="alone")  # fmt: skip


def test_the_samplers_token_mode_refuses_stage_costs_by_name():
    costs = vision_language(64, 2)
    with pytest.raises(bcl.Error, match="stage costs, which the token mode does not take"):
        bcl.DistributedBalancedBatchSampler(costs=costs, lengths=tokens_of(costs),
                                            num_replicas=2, rank=0, max_tokens=16384,
                                            micro_batches=1)  # fmt: skip


GOOD = vision_language(16, 1)


@pytest.mark.parametrize("costs, options, match", [
    (np.where(np.arange(32).reshape(16, 2) == 7, np.nan, GOOD), {},
     "record 3's cost of stage 1 is nan"),
    (np.where(np.arange(32).reshape(16, 2) == 4, -1.0, GOOD), {}, "record 2's cost of stage 0"),
    (GOOD[:10], {}, "costs has 10 rows but lengths has 16"),
    (np.ones((16, bcl._core.max_plan_stages + 1)), {}, "a record has 1 to 16"),
    (GOOD, {"sync": "layer"}, "sync must be 'stage' or 'step'"),
])  # fmt: skip
def test_bad_stage_tables_are_errors_naming_the_record_and_the_stage(costs, options, match):
    with pytest.raises(bcl.Error, match=match):
        bcl.plan_micro_batches(np.full(16, 100), 2, 1000, costs=costs, **options)
