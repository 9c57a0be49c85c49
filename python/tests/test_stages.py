"""bcl.plan_batches with stage costs (a table of shape (N, D)): the micro-steps of the plan of the
summed costs or of one stage's alone, every rank B records a micro-step (the last as many on every
rank), every index once, each micro-step's ranks chosen by stage so that the sum over stages of the
slowest rank is never above the summed plan's; a table of one column plans as a 1-d one; bad tables
are errors naming the record and the stage."""

import collections

import numpy as np
import pytest

import bcl


def vision_language(n, seed):
    """30% text only, 55% one image, 15% several: the encoder's and the language model's costs."""
    rng = np.random.default_rng(seed)
    kind = rng.random(n)
    patches = np.where(kind < 0.3, 0.0, np.where(kind < 0.85, rng.lognormal(np.log(1000), 0.8, n),
                                                 rng.lognormal(np.log(4000), 0.9, n)))  # fmt: skip
    tokens = rng.lognormal(6.0, 0.9, n) + patches / 4
    return np.stack([0.09 * (patches + patches**2 / 8192), tokens + tokens**2 / 24576], axis=1)


def stage_objective(costs, plan):
    """The sum over micro-steps and stages of the slowest rank's load."""
    steps = len(plan[0])
    return sum(
        max(costs[plan[r][j]].sum(axis=0)[s] if plan[r][j] else 0.0 for r in range(len(plan)))
        for j in range(steps) for s in range(costs.shape[1])
    )  # fmt: skip


@pytest.mark.parametrize("ranks, batch, n", [(8, 16, 512), (4, 3, 100), (1, 5, 17), (64, 4, 1024)])
@pytest.mark.parametrize("seed", [1, 2])
def test_the_contract_holds_and_the_stages_never_lose_to_the_summed_plan(ranks, batch, n, seed):
    n -= n % ranks
    costs = vision_language(n, seed)
    plan = bcl.plan_batches(costs, ranks, batch)
    summed = bcl.plan_batches(costs.sum(axis=1), ranks, batch)
    assert len(plan) == ranks
    assert [len(r) for r in plan] == [len(r) for r in summed]
    # The micro-steps of the plan of the summed costs (-1) or of the stage the summary names.
    stage = plan.summary["steps_from_stage"]
    aligned = summed if stage < 0 else bcl.plan_batches(costs[:, stage], ranks, batch)
    for j in range(len(plan[0])):
        assert len({len(r[j]) for r in plan}) == 1  # as many on every rank
        assert {i for r in plan for i in r[j]} == {i for r in aligned for i in r[j]}
    counts = collections.Counter(i for r in plan for b in r for i in b)
    assert sorted(counts) == list(range(n)) and set(counts.values()) == {1}
    assert all(len(b) == batch for r in plan for b in r[:-1])
    got, flat = stage_objective(costs, plan), stage_objective(costs, summed)
    assert got <= flat * (1 + 1e-9)
    assert plan.summary["objective"] == pytest.approx(got, rel=1e-6)
    assert plan.summary["summed_objective"] == pytest.approx(flat, rel=1e-6)
    assert plan.summary["lower_bound"] <= got * (1 + 1e-9)
    assert plan == bcl.plan_batches(costs, ranks, batch)  # the same plan every time


def test_on_a_vision_language_mix_the_stages_gain_over_the_summed_plan():
    total = got = flat = 0.0
    for seed in range(20):
        costs = vision_language(128, seed)
        plan = bcl.plan_batches(costs, 8, 16)
        total += plan.summary["total"]
        got += plan.summary["objective"]
        flat += plan.summary["summed_objective"]
    assert total / 8 / got >= total / 8 / flat + 0.03


def test_a_table_of_one_column_plans_as_a_1d_table_and_tensors_and_lists_are_read():
    torch = pytest.importorskip("torch")
    costs = vision_language(64, 3)
    summed = costs.sum(axis=1)
    assert bcl.plan_batches(summed[:, None], 4, 4) == bcl.plan_batches(summed, 4, 4)
    # One meeting a micro-step: the summed cost is what counts.
    assert bcl.plan_batches(costs, 4, 4, sync="step") == bcl.plan_batches(summed, 4, 4)
    plan = bcl.plan_batches(costs, 4, 4)
    assert bcl.plan_batches(torch.from_numpy(costs), 4, 4) == plan
    assert bcl.plan_batches(costs.tolist(), 4, 4) == plan


@pytest.mark.parametrize(
    "costs, options, match",
    [
        ([[1.0, 2.0], [3.0]] * 4, {}, r"costs\[1\] has 1 stages, but costs\[0\] has 2"),
        (np.ones((8, 0)), {}, r"0 stages a record"),
        (np.ones((8, 17)), {}, r"17 stages a record; a record has 1 to 16"),
        (np.ones((2, 4, 2)), {}, r"one row per record"),
        (np.array([[1.0, np.nan]] * 8), {}, r"record 0's cost of stage 1 is nan"),
        (np.array([[1.0, 2.0]] * 7 + [[-1.0, 2.0]]), {}, r"record 7's cost of stage 0 is -1"),
        (np.array([[1 + 1j, 2]] * 8), {}, r"real numbers"),
        (np.ones((8, 2)), {"cap": "p99"}, r"cap='p99' is for one cost a record"),
        (np.ones((8, 2)), {"batching": "padded"}, r"batching='padded' is for one cost a record"),
        (np.ones((9, 2)), {}, r"multiple"),
        (np.ones((8, 2)), {"sync": "layer"}, r"sync must be 'stage' or 'step'"),
    ],
)
def test_bad_stage_tables_are_errors_naming_the_record_and_the_stage(costs, options, match):
    with pytest.raises(bcl.Error, match=match):
        bcl.plan_batches(costs, 2, 2, **options)
