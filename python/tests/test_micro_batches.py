"""bcl.plan_micro_batches, as a specification: a held batch (or K of them) of records of known
lengths planned into micro-batches of at most T tokens for R ranks.

The contract: every rank gets as many micro-batches, step s the same count on every rank (a
multiple of m, at least m; K steps pooled differ by at most m, the first ones holding more); none
is empty; every
micro-batch holds at most T tokens, but a record above T with oversized="alone", alone in its
micro-batch; every record exactly once; a group's records on one rank and in one step (and in one
micro-batch with group_together); the same plan for the same input. Against brute force on tiny
instances: a plan is found whenever one exists, its micro-step count is never below the fewest
possible, and the summary's lower bound is never above the best objective any plan reaches.
"""

import math

import numpy as np
import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st

import bcl

T = 4096


def default_cost(lengths):
    lengths = np.asarray(lengths, dtype=np.float64)
    return lengths + lengths**2 / 24576


def check_contract(plan, lengths, ranks, max_tokens, multiple_of=1, lookahead=1, groups=None,
                   together=False, alone=False):  # fmt: skip
    """Every promise of plan_micro_batches, from the plan alone (and its summary's shape)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    summary = plan.summary
    per_step = summary["step_micro_batches"]
    assert len(plan) == ranks
    assert summary["steps"] == lookahead == len(per_step)
    assert {len(p) for p in plan} == {summary["micro_steps"]} == {sum(per_step)}  # every rank
    assert summary["micro_batches"] == max(per_step)
    assert all(c % multiple_of == 0 and c >= multiple_of for c in per_step)
    assert per_step == sorted(per_step, reverse=True) and per_step[0] - per_step[-1] <= multiple_of
    if groups is not None and not together:
        assert len(set(per_step)) == 1  # a group kept to a rank and step: one count every step
    step_of = [s for s, count in enumerate(per_step) for _ in range(count)]
    for r in range(ranks):
        assert [len(step) for step in plan.steps(r)] == per_step
        assert [b for step in plan.steps(r) for b in step] == plan[r]
    for rank in plan:
        for batch in rank:
            assert batch and batch == sorted(batch)  # none empty, in input order
            tokens = int(lengths[batch].sum())
            assert tokens <= max_tokens or (alone and len(batch) == 1), (batch, tokens)
    flat = sorted(i for rank in plan for batch in rank for i in batch)
    assert flat == list(range(len(lengths)))  # every record exactly once
    if groups is not None:
        where = {}
        for r, rank in enumerate(plan):
            for j, batch in enumerate(rank):
                for i in batch:
                    place = (r, j) if together else (r, step_of[j])
                    assert where.setdefault(groups[i], place) == place, (groups[i], place)
    oversized = int((lengths > max_tokens).sum())
    assert summary["oversized"] == oversized and summary["records"] == len(lengths)


def objective(plan, costs):
    """The sum over micro-steps of the dearest micro-batch of any rank."""
    return sum(max(costs[batch].sum() for batch in step) for step in zip(*plan))


@st.composite
def held_batches(draw, max_records=200):
    """(lengths, R, T, m, K): records of a held batch, some long, at most T tokens each, a
    multiple of R*K*m of them, so that a plan exists (each record alone in a micro-batch)."""
    ranks = draw(st.integers(1, 8))
    multiple_of = draw(st.integers(1, 3))
    lookahead = draw(st.integers(1, 3))
    max_tokens = draw(st.sampled_from([64, 1000, T]))
    least = ranks * multiple_of * lookahead
    n = least * draw(st.integers(1, max(1, max_records // least)))
    kind = draw(st.sampled_from(["uniform", "lognormal", "at the budget", "tiny", "zeros"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    lengths = {
        "uniform": lambda: rng.integers(1, max_tokens + 1, n),
        "lognormal": lambda: np.minimum(rng.lognormal(np.log(max_tokens / 8), 1.0, n), max_tokens),
        "at the budget": lambda: np.full(n, max_tokens),
        "tiny": lambda: rng.integers(0, 3, n),
        "zeros": lambda: np.where(rng.random(n) < 0.5, 0, rng.integers(1, max_tokens + 1, n)),
    }[kind]()
    return lengths.astype(np.int64), ranks, max_tokens, multiple_of, lookahead


@given(held_batches())
def test_every_plan_keeps_the_contract(case):
    lengths, ranks, max_tokens, multiple_of, lookahead = case
    plan = bcl.plan_micro_batches(lengths, ranks, max_tokens, multiple_of=multiple_of,
                                  lookahead=lookahead)  # fmt: skip
    check_contract(plan, lengths, ranks, max_tokens, multiple_of, lookahead)
    s = plan.summary
    # No fewer micro-steps than the tokens need: ceil(tokens / (R*T)), and M covers it per step.
    assert s["micro_steps_bound"] == max(1, math.ceil(lengths.sum() / (ranks * max_tokens)))
    assert s["micro_steps"] >= s["micro_steps_bound"]


@given(held_batches(), st.data())
def test_given_costs_are_the_ones_balanced_and_the_summary_describes_the_plan(case, data):
    lengths, ranks, max_tokens, multiple_of, lookahead = case
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    costs = rng.lognormal(0.0, 1.5, len(lengths)) * data.draw(st.sampled_from([1.0, 1e-6, 1e9]))
    plan = bcl.plan_micro_batches(lengths, ranks, max_tokens, costs, multiple_of=multiple_of,
                                  lookahead=lookahead)  # fmt: skip
    check_contract(plan, lengths, ranks, max_tokens, multiple_of, lookahead)
    s = plan.summary
    assert s["total"] == pytest.approx(costs.sum(), rel=1e-9)
    assert s["objective"] == pytest.approx(objective(plan, costs), rel=1e-9)
    assert s["lower_bound"] <= s["objective"] * (1 + 1e-9)
    assert s["efficiency"] == pytest.approx(s["total"] / (ranks * s["objective"]), rel=1e-9)


def test_the_default_cost_is_l_plus_l_squared_over_24576_exactly():
    lengths = np.array([1, 7, 100, 4096, 24576, 3, 3, 500])
    plan = bcl.plan_micro_batches(lengths, 2, 30000)
    costs = default_cost(lengths)
    assert plan.summary["total"] == costs.sum()  # computed in integers, without rounding
    assert plan.summary["objective"] == objective(plan, costs)
    assert bcl.plan_micro_batches(lengths, 2, 30000, costs=costs) == plan  # the same plan


@given(held_batches(max_records=120), st.booleans(), st.data())
def test_groups_stay_on_one_rank_and_in_one_step_or_in_one_micro_batch(case, together, data):
    lengths, ranks, max_tokens, multiple_of, lookahead = case
    size = data.draw(st.integers(1, 8))  # GRPO: n responses of one prompt
    if together:
        lengths = np.minimum(lengths, max_tokens // size)  # a group fits one micro-batch
    ids = [f"prompt-{i // size}" for i in range(len(lengths))]
    try:
        plan = bcl.plan_micro_batches(lengths, ranks, max_tokens, groups=ids,
                                      multiple_of=multiple_of, lookahead=lookahead,
                                      group_together=together)  # fmt: skip
    except bcl.Error as e:
        # Too few groups, or too large, to give every rank's micro-batches in every step one
        # record (one group with group_together); and the case below.
        assert "do not fill" in str(e)
        return
    check_contract(plan, lengths, ranks, max_tokens, multiple_of, lookahead, ids, together)


def test_groups_kept_to_a_rank_are_planned_whenever_a_plan_exists():
    # Every record its own group: each record alone in a micro-batch is a plan (8 cells of
    # R=2 ranks, K=2 steps, M=2); a deal by cost alone leaves the dearest record alone in its bin.
    lengths = [55, 41, 33, 18, 20, 3, 5, 2]
    plan = bcl.plan_micro_batches(lengths, 2, 64, groups=list(range(8)), multiple_of=2,
                                  lookahead=2)  # fmt: skip
    check_contract(plan, lengths, 2, 64, 2, 2, list(range(8)))


def test_grpo_groups_of_string_ids_and_of_integers_plan_alike():
    rng = np.random.default_rng(3)
    lengths = rng.integers(100, 3000, 64)
    as_text = [f"uid-{i // 4}" for i in range(64)]
    as_numbers = np.repeat(np.arange(16) * 7 + 5, 4)  # any integers, in first-seen order
    a = bcl.plan_micro_batches(lengths, 4, T, groups=as_text)
    b = bcl.plan_micro_batches(lengths, 4, T, groups=as_numbers)
    c = bcl.plan_micro_batches(lengths, 4, T, groups=torch.as_tensor(as_numbers))
    assert a == b == c
    check_contract(a, lengths, 4, T, groups=as_text)


def test_a_record_above_the_budget_has_a_micro_batch_of_its_own_when_allowed():
    lengths = [10, 5000, 30, 0, 9000, 20, 0, 40]
    plan = bcl.plan_micro_batches(lengths, 2, 100, oversized="alone")
    check_contract(plan, lengths, 2, 100, alone=True)
    alone = [batch for rank in plan for batch in rank if 1 in batch or 4 in batch]
    assert sorted(alone) == [[1], [4]]  # records of no tokens do not join them
    with pytest.raises(bcl.Error, match=r"record 1 has 5000 tokens, above max_tokens \(100\); .* "
                                        r"\(oversized='alone'\)"):
        bcl.plan_micro_batches(lengths, 2, 100)


def test_records_of_no_cost_still_fill_every_micro_batch():
    plan = bcl.plan_micro_batches([1, 1, 1, 1], 2, 10, costs=[0.0, 0.0, 0.0, 0.0])
    check_contract(plan, [1, 1, 1, 1], 2, 10)
    plan = bcl.plan_micro_batches([0] * 8, 2, 10, lookahead=2)
    check_contract(plan, [0] * 8, 2, 10, lookahead=2)


def pooled_counts(micro_steps, steps, multiple_of):
    """The documented deal of C pooled micro-steps to K steps: C/K rounded down to a multiple of
    m each, the first steps m more until all C are dealt."""
    chunks, extra = divmod(micro_steps // multiple_of, steps)
    return [(chunks + (s < extra)) * multiple_of for s in range(steps)]


def test_k_held_batches_planned_together_give_each_step_its_own_count_within_m():
    rng = np.random.default_rng(8)
    for seed in range(150):
        ranks, m, k = int(rng.integers(1, 9)), int(rng.integers(1, 4)), int(rng.integers(2, 6))
        n = ranks * m * k * int(rng.integers(1, 12))
        lengths = np.random.default_rng(seed).integers(0, T + 1, n)
        padding = "empty" if seed % 5 == 0 else "error"
        plan = bcl.plan_micro_batches(lengths, ranks, T, multiple_of=m, lookahead=k,
                                      padding=padding)  # fmt: skip
        s = plan.summary
        counts = s["step_micro_batches"]
        assert len(counts) == k and sum(counts) == s["micro_steps"], seed
        assert all(c % m == 0 and c >= m for c in counts), seed
        assert max(counts) - min(counts) <= m and max(counts) == s["micro_batches"], seed
        assert counts == pooled_counts(s["micro_steps"], k, m), seed
        for r in range(ranks):  # every rank's step s holds as many
            assert [len(step) for step in plan.steps(r)] == counts, seed
        flat = sorted(i for rank in plan for batch in rank for i in batch)
        assert flat == list(range(n)), seed  # every index once
        empty = sum(1 for rank in plan for batch in rank if not batch)
        assert empty == s["padding_micro_batches"], seed


def test_k_pooled_steps_need_fewer_micro_steps_than_any_plan_of_one_count_for_every_step():
    # 256 records on R = 4 ranks, m = 2, K = 4 held batches. The tokens need at least
    # ceil(tokens / (R*T)) micro-steps; a plan giving every step the same count M (a multiple
    # of m) needs K*M of at least that. The pooled plan's micro-steps are a multiple of m only.
    lengths = np.random.default_rng(4).integers(50, 4000, 256)
    ranks, m, k = 4, 2, 4
    plan = bcl.plan_micro_batches(lengths, ranks, T, lookahead=k, multiple_of=m)
    check_contract(plan, lengths, ranks, T, m, k)
    bound = math.ceil(int(lengths.sum()) / (ranks * T))
    one_count = k * (math.ceil(math.ceil(bound / k) / m) * m)
    s = plan.summary
    assert s["micro_steps_bound"] == bound
    assert bound <= s["micro_steps"] < one_count
    assert s["step_micro_batches"] == pooled_counts(s["micro_steps"], k, m)
    assert len(set(s["step_micro_batches"])) > 1  # steps of their own counts


def test_the_same_input_gives_the_same_plan_and_digest():
    lengths = np.random.default_rng(5).integers(1, 8000, 512)
    a = bcl.plan_micro_batches(lengths, 8, 16384, lookahead=2)
    b = bcl.plan_micro_batches(list(map(int, lengths)), 8, 16384, lookahead=2)
    assert a == b and a.summary == b.summary
    other = bcl.plan_micro_batches(lengths[::-1].copy(), 8, 16384, lookahead=2)
    assert other.summary["digest"] != a.summary["digest"]


def test_heavy_micro_batches_line_up_across_ranks():
    # 8 ranks, 64 records a rank of ShareGPT-like lengths: per micro-step the mean rank's cost
    # is close to the slowest rank's.
    rng = np.random.default_rng(6)
    lengths = np.minimum(rng.lognormal(7.6, 0.7, 512), 16384).astype(np.int64)
    plan = bcl.plan_micro_batches(lengths, 8, 16384)
    check_contract(plan, lengths, 8, 16384)
    costs = default_cost(lengths)
    assert costs.sum() / (8 * objective(plan, costs)) > 0.97


# -- brute force on tiny instances --------------------------------------------------------------


def partitions(n, k):
    """Every partition of range(n) into exactly k non-empty blocks."""

    def grow(i, blocks):
        if len(blocks) > k or n - i < k - len(blocks):
            return
        if i == n:
            yield [list(b) for b in blocks]
            return
        for b in blocks:
            b.append(i)
            yield from grow(i + 1, blocks)
            b.pop()
        blocks.append([i])
        yield from grow(i + 1, blocks)
        blocks.pop()

    yield from grow(0, [])


def cells_fit(blocks, lengths, max_tokens, alone):
    return all(sum(lengths[i] for i in b) <= max_tokens or (alone and len(b) == 1)
               for b in blocks)  # fmt: skip


def bins_fit(blocks, groups, bins, per_bin):
    """Whether `blocks` go into `bins` bins of exactly `per_bin` blocks with each group's
    records in one bin."""
    parent = list(range(len(blocks)))

    def find(x):
        while parent[x] != x:
            x = parent[x]
        return x

    first = {}
    for b, block in enumerate(blocks):
        for i in block:
            other = first.setdefault(groups[i], b)
            parent[find(b)] = find(other)
    sizes = sorted((sum(1 for b in range(len(blocks)) if find(b) == root)
                    for root in {find(b) for b in range(len(blocks))}), reverse=True)  # fmt: skip

    def place(k, room):
        if k == len(sizes):
            return True
        for j in range(len(room)):
            if room[j] >= sizes[k]:
                left = room[:j] + [room[j] - sizes[k]] + room[j + 1:]
                if place(k + 1, left):
                    return True
        return False

    return place(0, [per_bin] * bins)


def split_group(blocks, groups):
    """Whether some group's records lie in more than one block."""
    seen = {}
    return any(seen.setdefault(groups[i], b) != b for b, block in enumerate(blocks) for i in block)


def brute_force(lengths, ranks, max_tokens, multiple_of, lookahead, groups, together, alone):
    """(the fewest micro-steps of any plan, {micro-steps: the best objective of a plan without
    groups}), or (None, {}) when no plan exists. K steps pooled (no groups, or groups together)
    may hold any multiple of m micro-steps, at least m a step (each step its own count); groups
    kept to a rank need the same count M, a multiple of m, in every step: K*M."""
    costs = default_cost(lengths)
    fewest, best = None, {}
    n = len(lengths)
    by_rank = groups is not None and not together
    micro_steps = lookahead * multiple_of
    while ranks * micro_steps <= n:
        for blocks in partitions(n, ranks * micro_steps):
            if not cells_fit(blocks, lengths, max_tokens, alone):
                continue
            if together and split_group(blocks, groups):
                continue
            if by_rank and not bins_fit(blocks, groups, ranks * lookahead,
                                        micro_steps // lookahead):  # fmt: skip
                continue
            fewest = micro_steps if fewest is None else fewest
            if groups is None:
                loads = sorted((costs[b].sum() for b in blocks), reverse=True)
                value = sum(loads[::ranks])  # cut, dearest first, into micro-steps of R
                best[micro_steps] = min(best.get(micro_steps, value), value)
        micro_steps += lookahead * multiple_of if by_rank else multiple_of
    return fewest, best


@st.composite
def tiny(draw):
    ranks = draw(st.integers(1, 2))
    lookahead = draw(st.integers(1, 2))
    multiple_of = draw(st.integers(1, 2))
    least = ranks * lookahead * multiple_of
    n = draw(st.integers(least, max(least, 7)))
    max_tokens = draw(st.integers(1, 12))
    lengths = draw(st.lists(st.integers(0, 14), min_size=n, max_size=n))
    alone = draw(st.booleans())
    if not alone:
        lengths = [min(x, max_tokens) for x in lengths]
    groups = draw(st.none() | st.lists(st.integers(0, 3), min_size=n, max_size=n))
    together = groups is not None and draw(st.booleans())
    return lengths, ranks, max_tokens, multiple_of, lookahead, groups, together, alone


@example(([0, 9, 0], 1, 5, 1, 1, None, False, True))  # a record of no tokens beside one above T
@example(([1, 1, 1, 1], 2, 10, 1, 1, None, False, False))
@given(tiny())
def test_a_plan_is_found_whenever_one_exists_and_no_plan_beats_its_bounds(case):
    lengths, ranks, max_tokens, multiple_of, lookahead, groups, together, alone = case
    fewest, best = brute_force(np.array(lengths), ranks, max_tokens, multiple_of, lookahead,
                               groups, together, alone)  # fmt: skip
    options = dict(groups=groups, multiple_of=multiple_of, lookahead=lookahead,
                   group_together=together, oversized="alone" if alone else "error")  # fmt: skip
    if together and any(
        sum(min(lengths[i], max_tokens) for i in range(len(lengths)) if groups[i] == g)
        > max_tokens or (sum(1 for x in groups if x == g) > 1 and any(
            lengths[i] > max_tokens for i in range(len(lengths)) if groups[i] == g))
        for g in set(groups)
    ):  # fmt: skip
        with pytest.raises(bcl.Error, match="group_together=True keeps a group"):
            bcl.plan_micro_batches(lengths, ranks, max_tokens, **options)
        return
    if fewest is None:
        with pytest.raises(bcl.Error, match="do not fill"):
            bcl.plan_micro_batches(lengths, ranks, max_tokens, **options)
        return
    if groups is not None and not together:
        try:  # groups kept to a rank may miss a plan: the xfail test above
            plan = bcl.plan_micro_batches(lengths, ranks, max_tokens, **options)
        except bcl.Error as e:
            assert "do not fill" in str(e)
            return
    else:
        plan = bcl.plan_micro_batches(lengths, ranks, max_tokens, **options)
    check_contract(plan, lengths, ranks, max_tokens, multiple_of, lookahead, groups, together,
                   alone)  # fmt: skip
    s = plan.summary
    assert s["micro_steps"] >= fewest >= s["micro_steps_bound"]
    if groups is None:
        assert s["lower_bound"] <= best[s["micro_steps"]] * (1 + 1e-12)
        assert s["objective"] >= best[s["micro_steps"]] * (1 - 1e-12)


# -- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "arguments, words",
    [
        (dict(lengths=[5, 2.5, 3, 4]), r"lengths\[1\] is 2.5, not an integer"),
        (dict(lengths=np.array([5.0, 6.0, 3.0, 4.0])), "must hold integers .*dtype float64"),
        (dict(lengths=torch.ones(4)), "must hold integers .*torch.float32"),
        (dict(lengths=[5, True, 3, 4]), r"lengths\[1\] is True, not an integer"),
        (dict(lengths=[5, 1, -3, 4]), r"lengths\[2\] is -3, not in \[0, 2\^64\)"),
        (dict(lengths=np.array([5, 1, 3, -4])), r"lengths\[3\] is -4, negative"),
        (dict(lengths=[5, 1, 3, 2**64]), r"lengths\[3\] is 18446744073709551616"),
        (dict(lengths="abcd"), "lengths must be a sequence, array or tensor of integers"),
        (dict(lengths=np.ones((2, 2), dtype=np.int64)), "one-dimensional"),
        (dict(lengths=[]), "lengths is empty"),
        (dict(costs=[1.0, 2.0, 3.0]), "costs has 3 entries but lengths has 4"),
        (dict(costs=[1.0, float("nan"), 3.0, 4.0]), r"costs\[1\] is nan"),
        (dict(costs=[1.0, -2.0, 3.0, 4.0]), r"costs\[1\] is -2"),
        (dict(costs=[1.0, "2", 3.0, 4.0]), r"costs\[1\] is '2', not a real number"),
        (dict(lengths=[5, 1, 3000, 4]), r"record 2 has 3000 tokens, above max_tokens \(1000\)"),
        (dict(lengths=[5, 1, 2**31 + 1, 4], oversized="alone"),
         r"record 2 has 2147483649 tokens, .* no record may have more than 2\^31"),
        (dict(max_tokens=0), "max_tokens must be at least 1 (got 0)"),
        (dict(max_tokens=2**31 + 1), "max_tokens is 2147483649, above 2^31"),
        (dict(max_tokens=1000.0), "max_tokens must be an integer"),
        (dict(num_ranks=0), "num_ranks must be at least 1"),
        (dict(multiple_of=0), "multiple_of must be at least 1"),
        (dict(lookahead=0), "lookahead must be at least 1"),
        (dict(num_ranks=2**20, lookahead=2**11), "above the 1073741824 cells a plan may hold"),
        (dict(num_ranks=5), "4 records .* do not fill 5 ranks' micro-batches"),
        (dict(oversized="skip"), "oversized must be 'error' or 'alone'"),
        (dict(groups=[1, 1, 2]), "groups has 3 entries but lengths has 4"),
        (dict(groups=[1, 1.5, 2, 2]), r"groups\[1\] is 1.5; a group id is an integer or a string"),
        (dict(groups=[1, None, 2, 2]), r"groups\[1\] is None"),
        (dict(group_together=True), "group_together=True keeps groups in one micro-batch: pass"),
        (dict(groups=["a", "a", "b", "b"], group_together=True, lengths=[600, 500, 1, 1]),
         r"the group of groups\[0\] \('a'\) has 1100 tokens, above max_tokens \(1000\)"),
        (dict(groups=["a", "a", "b", "b"], group_together=True, lengths=[500, 490, 1, 1],
              pad_to_multiple_of=16),  # 512 + 496 tokens, as the plan counts them
         r"the group of groups\[0\] \('a'\) has 1008 tokens, above max_tokens \(1000\)"),
        (dict(group_together=1, groups=[1, 1, 2, 2]), "group_together must be True or False"),
        (dict(num_ranks=5), r"allow_empty_micro_batches \(Python: padding=\"empty\"\)"),
        (dict(padding="pad"), "padding must be one of 'error', 'empty'"),
        (dict(padding="repeat"), "padding must be one of 'error', 'empty'"),
        (dict(pad_to_multiple_of=0), "pad_to_multiple_of is 0; it must be at least 1"),
        (dict(pad_to_multiple_of=-1),
         r"pad_to_multiple_of must be a non-negative integer \(got -1\)"),
        (dict(pad_to_multiple_of=1001),
         r"pad_to_multiple_of is 1001; it must be at least 1 and at most max_tokens \(1000\)"),
        (dict(lengths=[5, 1, 999, 4], pad_to_multiple_of=16),
         r"record 2 has 999 tokens \(1008 padded to a multiple of 16\), above max_tokens"),
    ],
)  # fmt: skip
def test_bad_input_is_an_error_naming_the_argument_and_the_index(arguments, words):
    call = dict(lengths=[5, 1, 3, 4], num_ranks=2, max_tokens=1000)
    call.update(arguments)
    with pytest.raises(bcl.Error, match=words.replace("(got 0)", r"\(got 0\)").replace("^", r"\^")
                       if "(got 0)" in words or words.endswith("2^31") else words):  # fmt: skip
        bcl.plan_micro_batches(**call)


def test_lengths_of_any_integer_kind_plan_alike():
    lengths = [5, 1, 3, 4, 700, 20]
    expected = bcl.plan_micro_batches(lengths, 2, 1000)
    for spelled in (np.array(lengths, dtype=np.uint16), np.array(lengths, dtype=np.int64),
                    torch.tensor(lengths, dtype=torch.int32), tuple(lengths),
                    [np.int64(x) for x in lengths]):  # fmt: skip
        assert bcl.plan_micro_batches(spelled, 2, 1000) == expected


def test_padding_empty_gives_the_ranks_short_of_records_empty_micro_batches():
    # 17 records that need a micro-batch each cannot give 8 ranks equal non-empty counts.
    with pytest.raises(bcl.Error, match='padding="empty"'):
        bcl.plan_micro_batches([100000] * 17, 8, 131072)
    plan = bcl.plan_micro_batches([100000] * 17, 8, 131072, padding="empty")
    assert [len(rank) for rank in plan] == [3] * 8
    assert sorted(i for rank in plan for b in rank for i in b) == list(range(17))
    assert sum(1 for rank in plan for b in rank if not b) == 3 * 8 - 17
    assert plan.summary["padding_micro_batches"] == 7
    # Where a plan without empty micro-batches exists, padding="empty" changes nothing.
    lengths = np.random.default_rng(2).integers(1, 4000, size=500)
    strict = bcl.plan_micro_batches(lengths, 4, 8192)
    padded = bcl.plan_micro_batches(lengths, 4, 8192, padding="empty")
    assert list(padded) == list(strict) and padded.summary == strict.summary
    assert strict.summary["padding_micro_batches"] == 0


def test_pad_to_multiple_of_counts_each_record_rounded_up_for_the_budget_and_the_cost():
    plan = bcl.plan_micro_batches([5, 7, 9, 9], 1, 16, pad_to_multiple_of=4)
    assert len(plan[0]) == 3  # 8 + 8 | 12 | 12
    assert plan.summary["tokens"] == 8 + 8 + 12 + 12
    assert plan.summary["total"] == pytest.approx(sum(t + t * t / 24576 for t in (8, 8, 12, 12)))
    assert len(bcl.plan_micro_batches([5, 7, 9, 9], 1, 16)[0]) == 2
