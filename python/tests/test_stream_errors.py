"""Errors in a stream: a bad cost is a bcl.Error naming the record's position, raised before the
balancer takes anything of its chunk; an exception from the upstream or the cost propagates
unchanged and loses nothing; a length promise broken either way is a bcl.Error where it is found.
Never a lost, duplicated or invented record, never another batch count, never a hang."""

import collections
import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import bcl

from streams import (
    CostFailure, FlakyCost, FlakyUpstream, Record, UpstreamFailure, drain, ids, records,
    stream_options,
)  # fmt: skip


@pytest.mark.parametrize(
    "bad, text",
    [
        (math.nan, "is nan; it must be >= 0 and at most bcl::max_estimate"),
        (-1.0, "is -1; it must be >= 0"),
        (-1, "is -1; it must be >= 0"),
        (math.inf, "is inf; it must be >= 0"),
        (1e121, "is 1e+121; it must be >= 0 and at most bcl::max_estimate (1e+120)"),
        (10**400, "too large for a float"),
        (True, "is True; a cost must be a real number (an int or a float, not bool)"),
        ("3", "is '3'; a cost must be a real number"),
        (None, "is None; a cost must be a real number"),
        (1 + 2j, "a cost must be a real number"),
        (Decimal("1.5"), "a cost must be a real number"),
        (np.float32("nan"), "is nan; it must be >= 0"),
        (torch.tensor([1.0, 2.0]), "a cost must be a real number"),
    ],
)
def test_a_bad_cost_names_the_records_position_and_changes_nothing(bad, text):
    items = records(100)
    costs = [r.cost for r in items]
    costs[37] = bad
    stream = bcl.balance(items, lambda r: costs[r.id], 4, lookahead=2)
    head = []
    with pytest.raises(bcl.Error) as e:
        while True:  # until the chunk of record 37 is taken
            ready = stream.state_dict()
            head.append(next(stream))
    assert str(e.value).startswith("the cost of record 37 of the stream is ")
    assert text in str(e.value)
    # The balancer took nothing of the failing chunk; its records wait in the intake.
    after = stream.state_dict()
    assert after["balancer"] == ready["balancer"]
    assert after["upstream_consumed"] > 37 and after["intake"] != ready["intake"]
    with pytest.raises(bcl.Error):  # the same cost again: the same error, nothing lost
        next(stream)
    costs[37] = 1.0  # fixed: the stream goes on with every record
    rest = list(stream)
    assert sorted(r.id for b in head + rest for r in b) == list(range(100))


@pytest.mark.parametrize("which", ["cost", "memory"])
@pytest.mark.parametrize("bad", [math.nan, -1.0, None, "3"])
def test_after_a_bad_value_the_stream_asks_again_for_that_record_alone(which, bad):
    # The chunk of record 37 is valued, 37's value refused; the next next() asks for 37's value
    # again and keeps the values the chunk's other records gave.
    items = records(100)
    asked = collections.Counter()

    def value(r):
        asked[r.id] += 1
        return bad if r.id == 37 and asked[r.id] == 1 else r.cost

    options = dict(memory=value, memory_budget=1e12) if which == "memory" else {}
    cost = value if which == "cost" else (lambda r: r.cost)
    stream = bcl.balance(items, cost, 4, lookahead=2, **options)
    head = []
    with pytest.raises(bcl.Error, match=f"the {which} of record 37 of the stream is "):
        while True:
            head.append(next(stream))
    rest = list(stream)
    assert sorted(r.id for b in head + rest for r in b) == list(range(100))
    assert asked[37] == 2
    assert all(asked[i] == 1 for i in range(100) if i != 37), asked


def test_a_refused_value_is_a_bcl_error_whatever_the_values_after_it_hold():
    # The push checks record 5's cost, then its memory, which it refuses. The costs of the records
    # after it are valued but not yet checked, and may be anything (an array, whose == is
    # elementwise and has no truth value): they are neither looked at nor asked for again, and
    # the refused memory is asked for again alone.
    items = records(40)
    asked = collections.Counter()
    bad_memory, bad_costs = {5}, set(range(6, 40))

    def cost(r):
        asked["cost", r.id] += 1
        return np.array([r.cost, r.cost]) if r.id in bad_costs else r.cost

    def memory(r):
        asked["memory", r.id] += 1
        return -1.0 if r.id in bad_memory else 1.0

    stream = bcl.balance(items, cost, 4, lookahead=2, memory=memory, memory_budget=1e12)
    with pytest.raises(bcl.Error, match="the memory of record 5 of the stream is -1"):
        next(stream)
    chunk = [i for i in range(40) if asked["cost", i]]
    assert len(chunk) > 6 and all(asked["cost", i] == 1 for i in chunk)
    bad_memory.clear()
    with pytest.raises(bcl.Error, match=r"the cost of record 6 of the stream is array\(\["):
        next(stream)
    assert asked["memory", 5] == 2 and all(asked["cost", i] == 1 for i in chunk)
    bad_costs.clear()  # each cost valued already is refused in turn, and asked for again
    out, refused = [], 0
    while True:
        try:
            out += [r.id for r in next(stream)]
        except StopIteration:
            break
        except bcl.Error:
            refused += 1
    assert sorted(out) == list(range(40))
    assert refused == len(chunk) - 7  # records 7.. of the chunk
    assert all(asked["cost", i] == (2 if 6 <= i <= chunk[-1] else 1) for i in range(40))


def test_a_record_the_balancer_refuses_is_a_bcl_error_and_no_value_is_asked_again():
    # A record whose memory alone is over the budget: its values are valid, the balancer refuses
    # it (pushing the records before it), and the stream refuses it again at every next().
    items = records(40)
    asked = collections.Counter()

    def cost(r):
        asked[r.id] += 1
        return np.array([r.cost])  # a one-element array: a valid cost

    memory = lambda r: 50.0 if r.id == 9 else 1.0  # noqa: E731
    stream = bcl.balance(items, cost, 4, lookahead=2, memory=memory, memory_budget=10.0)
    with pytest.raises(bcl.Error, match="record 9 alone needs memory 50"):
        next(stream)
    with pytest.raises(bcl.Error, match="record 9 alone needs memory 50"):
        next(stream)
    assert asked and set(asked.values()) == {1}


@pytest.mark.parametrize(
    "value, expected", [(np.float32(2.5), 2.5), (np.int64(3), 3.0), (Fraction(1, 4), 0.25),
                        (torch.tensor(1.5), 1.5), (np.array(7.0), 7.0), (2**70, 2.0**70)],
)  # fmt: skip
def test_real_numbers_of_any_kind_are_costs(value, expected):
    stream = bcl.balance([Record(0, 0.0)], lambda r: value, 1)
    assert [r.id for r in next(stream)] == [0]
    assert stream.stats["batch_cost"]["mean"] == expected


@pytest.mark.parametrize(
    "options, words",
    [
        (dict(cost="tokens"), "'Record' object has no attribute 'tokens'"),
        (dict(memory=lambda r: math.nan, memory_budget=10.0), "the memory of record 0 of the"),
        (dict(cost=bcl.affine_quadratic("cost", 1, 1, 1e117)), "the cost a + b*L + c*L^2 of"),
    ],
)
def test_a_bad_value_of_any_kind_names_what_is_wrong(options, words):
    cost = options.pop("cost", "cost")
    with pytest.raises((bcl.Error, AttributeError)) as e:
        list(bcl.balance(records(10), cost, 2, **options))
    assert words in str(e.value)


@pytest.mark.parametrize("cost", [np.ones(10), [1.0] * 10, {0: 1.0}, torch.ones(10), None, 3])
def test_a_table_of_costs_is_for_the_samplers_not_a_stream(cost):
    with pytest.raises(bcl.Error) as e:
        bcl.balance(records(10), cost, 2)
    assert "a callable record -> cost, a field name or len" in str(e.value)
    with pytest.raises(bcl.Error) as e:
        bcl.balance(records(10), bcl.affine_quadratic(np.ones(10)), 2)
    assert "length must be a callable record -> length" in str(e.value)


@st.composite
def failing_runs(draw):
    n = draw(st.integers(0, 300))
    items = records(n, draw(st.integers(0, 1000)))
    upstream_fails = draw(st.sets(st.integers(0, n), max_size=4))
    cost_fails = draw(st.sets(st.integers(0, max(n - 1, 0)), max_size=4)) if n else set()
    return items, upstream_fails, cost_fails, draw(stream_options())


@settings(max_examples=200)
@given(failing_runs())
def test_exceptions_from_the_upstream_and_the_cost_propagate_and_lose_nothing(run):
    # Each injected failure reaches the caller unchanged; iteration goes on after it, and the
    # batches are those of a run without failures: every record once, the same count, the same
    # order. The cost is asked again only for the record it failed on.
    items, upstream_fails, cost_fails, options = run
    expected = ids(bcl.balance(items, "cost", **options))
    cost = FlakyCost(cost_fails)
    stream = bcl.balance(FlakyUpstream(items, upstream_fails), cost, **options)
    batches, failures = drain(stream)
    assert ids(batches) == expected
    assert failures == len(upstream_fails) + len(cost_fails)
    assert all(cost.calls[r.id] == 1 + (r.id in cost_fails) for r in items)


def test_an_exception_from_a_generator_ends_its_records_but_none_is_lost():
    def upstream():
        yield from records(50)
        raise OSError("the shard is truncated")

    stream = bcl.balance(upstream(), "cost", 8)
    with pytest.raises(OSError, match="truncated"):
        list(stream)  # list() stops at the exception; the records taken are still held
    rest = list(stream)  # a generator that raised has ended: the stream drains
    assert sorted(r.id for b in rest for r in b) == list(range(50))


def test_finish_hands_back_the_records_not_yet_balanced_and_drains_the_rest():
    items = records(200)

    def cost(r):
        if r.id == 70:
            raise CostFailure("no cost, ever")
        return r.cost

    stream = bcl.balance(items, cost, 8, lookahead=2)
    head, failures = drain(stream, max_failures=3)
    assert failures == 3 and len(head) < 25
    back = stream.finish()  # the failing record's chunk, from the first record not balanced
    assert 70 in [r.id for r in back]
    assert [r.id for r in back] == list(range(back[0].id, back[0].id + len(back)))
    resumed = bcl.balance(items, cost, 8, lookahead=2)
    resumed.load_state_dict(stream.state_dict())  # a finished stream: it only drains
    rest = list(stream)
    assert ids(resumed) == ids(rest)
    out = [r.id for b in head + rest for r in b] + [r.id for r in back]
    assert sorted(out) == list(range(stream.upstream_consumed))
    assert all(len(b) == 8 for b in (head + rest)[:-1])


@pytest.mark.parametrize("n", [0, 10, 37])
@pytest.mark.parametrize("drop_last", [False, True])
def test_a_promised_length_is_checked_where_the_upstream_breaks_it(n, drop_last):
    items = records(n)
    kept = n // 4 * 4 if drop_last else n
    exact = list(bcl.balance(items, "cost", 4, length=n, drop_last=drop_last))
    assert sum(len(b) for b in exact) == kept
    for promised, words in ((n + 1, f"ended after {n} records, but length={n + 1}"),
                            (n - 1, f"yields more than length={n - 1}")):  # fmt: skip
        if promised < 0:
            continue
        stream = bcl.balance(items, "cost", 4, length=promised, drop_last=drop_last)
        with pytest.raises(bcl.Error) as e:
            list(stream)
        assert words in str(e.value)
        with pytest.raises(bcl.Error):  # again at every next(): never a different batch count
            next(stream)


@given(st.integers(0, 200), st.integers(0, 200), st.sets(st.integers(0, 200), max_size=3))
def test_a_stream_that_keeps_its_promise_ends_and_one_that_breaks_it_never_emits_more(
    n, promised, fails
):
    # However the upstream fails on the way, a stream with length= emits exactly
    # ceil(promised / B) batches, or raises bcl.Error (before its last batch) if the upstream
    # yields another number of records.
    stream = bcl.balance(FlakyUpstream(records(n), fails), "cost", 4, lookahead=2, length=promised)
    batches = []
    while True:
        try:
            batches.append(next(stream))
        except StopIteration:
            assert n == promised
            break
        except UpstreamFailure:
            continue
        except bcl.Error:
            assert n != promised
            break
    assert len(batches) <= -(-promised // 4)
    if n == promised:
        assert len(batches) == -(-n // 4)
