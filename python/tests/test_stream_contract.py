"""bcl.balance keeps the README's contract over any iterable of records: exact sizes and counts,
every record exactly once and by reference, bounded delay, determinism; and it balances as the
sampler over indices does, record for record."""

import inspect
import math
import pathlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import bcl
from bcl import _core, _options

from streams import Record, ids, records, stream_options

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHAREGPT = ROOT / "bench" / "workloads" / "sharegpt_8k_filtered_llama2_total_tokens.txt"


@st.composite
def setups(draw, max_n=500):
    n = draw(st.integers(0, max_n))
    seed = draw(st.integers(-(2**31), 2**31))
    return records(n, seed), draw(stream_options())


@given(setups())
def test_every_batch_has_exactly_batch_size_records_but_the_short_last(setup):
    items, options = setup
    batches = list(bcl.balance(items, "cost", **options))
    b, n = options["batch_size"], len(items)
    assert all(isinstance(batch, list) for batch in batches)
    assert all(len(batch) == b for batch in batches[:-1])
    if batches:
        assert len(batches[-1]) == (b if options["drop_last"] or n % b == 0 else n % b)


@given(setups())
def test_the_batch_count_is_ceil_or_floor_of_n_over_b_whatever_the_costs(setup):
    items, options = setup
    b, n = options["batch_size"], len(items)
    expected = n // b if options["drop_last"] else math.ceil(n / b)
    assert sum(1 for _ in bcl.balance(iter(items), "cost", **options)) == expected


@given(setups())
def test_every_record_comes_out_exactly_once_and_is_the_record_itself(setup):
    items, options = setup
    out = [r for batch in bcl.balance(items, "cost", **options) for r in batch]
    by_id = {r.id: r for r in items}
    assert len({r.id for r in out}) == len(out)
    assert all(r is by_id[r.id] for r in out)  # held by reference, never copied
    dropped = len(items) % options["batch_size"] if options["drop_last"] else 0
    assert len(out) == len(items) - dropped


@given(setups())
def test_a_record_leaves_within_the_delay_bound(setup):
    items, options = setup
    stream = bcl.balance(items, "cost", **options)
    arrived_in = {}
    for k, batch in enumerate(stream):
        for r in batch:
            arrived_in[r.id] = k
    b = options["batch_size"]
    bound = _core.max_delay_bound(stream._options)
    assert all(k - r // b <= bound for r, k in arrived_in.items())
    assert stream.stats["max_delay_batches"] <= bound


@given(setups())
def test_same_records_options_and_seed_give_the_same_batches(setup):
    items, options = setup
    one = ids(bcl.balance(items, "cost", **options))
    assert ids(bcl.balance(iter(list(items)), lambda r: r.cost, **options)) == one


@given(setups(max_n=300))
def test_a_stream_balances_as_the_sampler_over_the_same_order_does(setup):
    # The same C++ balancer, over arrival positions instead of dataset indices: with the same
    # costs, order and options it makes the same batches, record for record.
    items, options = setup
    order = np.random.default_rng(len(items)).permutation(len(items)).tolist()
    costs = [r.cost for r in items]
    sampler = bcl.BalancedBatchSampler(order, costs, **options)
    assert ids(bcl.balance([items[i] for i in order], "cost", **options)) == list(sampler)


def sharegpt_reductions(mode):
    """(stream, sampler, plain): over ShareGPT in one shuffled order, B = 16, K = 8, cost
    a + b*L + c*L^2 of a small transformer, the reductions of the batch-cost cv against plain
    batches of that order, and that of plain batches. mode "running": both aim at the running
    mean; "epoch": the sampler at the epoch's own mean, the stream at the same level given as a
    number (a stream cannot compute it, its user can)."""
    lengths = np.loadtxt(SHAREGPT)
    order = np.random.default_rng(0).permutation(len(lengths))
    costs = 3.4e-3 + 2.4e-5 * lengths + 1.45e-7 * lengths**2
    mean_cost = "running" if mode == "running" else float(costs.mean())

    class Conversation:  # its tokens: a byte string (one of each length, shared)
        def __init__(self, tokens):
            self.tokens = tokens

    shared = {}
    in_order = lengths[order].astype(int)
    stream_records = [Conversation(shared.setdefault(n, bytes(n))) for n in in_order]
    cost = bcl.affine_quadratic(lambda c: len(c.tokens), 3.4e-3, 2.4e-5, 1.45e-7)

    def cv(batch_costs):
        full = np.array(batch_costs[: len(lengths) // 16])
        return full.std() / full.mean()

    plain = cv([costs[order[i : i + 16]].sum() for i in range(0, len(order), 16)])
    streamed = cv([
        sum(cost.coefficients[0] + len(c.tokens) * (2.4e-5 + 1.45e-7 * len(c.tokens)) for c in b)
        for b in bcl.balance(stream_records, cost, 16, 8, mean_cost=mean_cost)
    ])  # fmt: skip
    sampled = cv([
        costs[b].sum()
        for b in bcl.BalancedBatchSampler(order.tolist(), costs, 16, 8, mean_cost=mode)
    ])  # fmt: skip
    return 1 - streamed / plain, 1 - sampled / plain, plain


@pytest.mark.parametrize("mode", ["running", "epoch"])
def test_on_sharegpt_the_stream_reduces_the_batch_cost_cv_as_the_sampler_does(mode):
    streamed, sampled, plain = sharegpt_reductions(mode)
    assert plain > 0.15
    assert streamed > 0.8
    assert abs(streamed - sampled) <= 0.01


def test_a_streams_options_are_the_samplers_with_the_same_defaults_but_the_mean_cost():
    sampler = inspect.signature(bcl.BalancedBatchSampler).parameters
    for name, default in _options.OPTION_DEFAULTS.items():
        assert sampler[name].default == default, name
    stream = inspect.signature(bcl.BalancedStream).parameters
    assert list(stream)[:4] == ["iterable", "cost", "batch_size", "lookahead"]
    assert stream["lookahead"].default == 8
    # The sampler holds its epoch and aims at its own mean; a stream only knows what it took.
    assert stream["mean_cost"].default == "running" and sampler["mean_cost"].default == "epoch"
    assert bcl.balance is bcl.BalancedStream
    with pytest.raises(bcl.Error, match="has no option 'lookhead'; besides mean_cost"):
        bcl.balance([], "cost", 4, lookhead=3)


@pytest.mark.parametrize(
    "options",
    [
        dict(batch_size=0), dict(batch_size=2.5), dict(lookahead=0), dict(seed=-3),
        dict(policy="fastest"), dict(emission="random"), dict(batching="tight"),
        dict(drop_last="yes"), dict(cap="99%"), dict(cap=-1.0), dict(cap="p100"),
        dict(cap="p99", cap_prior=-1.0), dict(cap="p99", cap_action="drop"),
        dict(mean_cost=-1.0), dict(memory_budget=-1.0),
        dict(policy="sliding", buffer_windows=2, max_age=0),
        dict(calibrate=True), dict(calibrate=1),
    ],
)  # fmt: skip
def test_a_bad_option_is_refused_with_the_samplers_message(options):
    options.setdefault("batch_size", 4)
    with pytest.raises(bcl.Error) as sampler:
        bcl.BalancedBatchSampler(range(10), np.ones(10), **options)
    with pytest.raises(bcl.Error) as stream:
        bcl.balance([], "cost", **options)
    # One parser: the same rule and words, but for what a stream calls its cost.
    assert str(stream.value) == str(sampler.value).replace(
        "costs=bcl.affine_quadratic(lengths, a, b, c)", "cost=bcl.affine_quadratic(length, a, b, c)"
    )


@pytest.mark.parametrize(
    "options, words",
    [
        (dict(mean_cost="epoch"), "needs every cost of the epoch before its first batch"),
        (dict(mean_cost=0.0), "must be 'running' or a cost > 0 (got 0: name the mode"),
        (dict(mean_cost="high"), "must be 'running' or a cost > 0 (got 'high')"),
        (dict(memory_budget=10.0), "pass memory= (per-record memory"),
        (dict(cap="p99", cap_action="truncate"), "truncate them upstream"),
        (dict(length=-1), "length must be an integer in [0, 2^63)"),
        (dict(length=2.0), "length must be an integer"),
        (dict(key=str), "key= and restore= come together"),
        (dict(key=str, restore=3), "key= and restore= come together"),
    ],
)
def test_what_differs_for_a_stream_is_said_in_a_streams_words(options, words):
    with pytest.raises(bcl.Error) as e:
        bcl.balance([], "cost", 4, **options)
    assert words in str(e.value)


def test_each_option_reaches_the_balancer_by_its_cpp_name():
    stream = bcl.balance(
        [], "cost", 5, 3, policy="tumbling", drop_last=True, seed=11, cap="p95", memory="cost",
        memory_budget=1e6, emission="shuffled", batching="padded", buffer_windows=3, max_age=4,
        mean_cost=2.5, largest_first=True, cap_warmup=7, cap_prior=1.5,
    )  # fmt: skip
    o = stream._options
    assert (o.batch_size, o.lookahead, o.policy.name, o.drop_last, o.seed) == (
        5, 3, "tumbling", True, 11,
    )  # fmt: skip
    assert (o.cap.kind.name, o.cap.quantile) == ("quantile", 0.95)
    assert (o.cap.warmup, o.cap.prior) == (7, 1.5)
    assert (o.memory_budget, o.emission.name, o.batching.name) == (1e6, "shuffled", "padded")
    assert (o.buffer_windows, o.max_age, o.mean_cost, o.largest_first) == (3, 4, 2.5, True)


class Row(dict):
    """A mapping record, as Hugging Face datasets yield."""


@pytest.mark.parametrize(
    "make, cost",
    [
        (lambda r: r, "cost"),  # an attribute
        (lambda r: {"id": r.id, "cost": r.cost}, "cost"),  # a mapping key
        (lambda r: Row(id=r.id, cost=r.cost), "cost"),
        (lambda r: r, lambda r: r.cost),
        (lambda r: [0] * int(r.cost // 50 + 1), len),
        (lambda r: r, bcl.affine_quadratic("cost", 0.0, 1.0, 0.0)),
    ],
)
def test_every_spelling_of_the_cost_balances_alike(make, cost):
    items = records(300)
    reference = bcl.balance(items, "cost", 8, mean_cost=100.0)
    expected = [len(b) for b in reference]
    converted = [make(r) for r in items]
    batches = list(bcl.balance(converted, cost, 8, mean_cost=100.0))
    assert [len(b) for b in batches] == expected
    assert sorted(id(r) for b in batches for r in b) == sorted(id(r) for r in converted)


def test_affine_quadratic_prices_a_records_length():
    items = [Record(i, float(i % 37)) for i in range(400)]
    a, b, c = 2.0, 0.5, 0.01
    quadratic = [Record(r.id, a + r.cost * (b + c * r.cost)) for r in items]
    priced = ids(bcl.balance(items, bcl.affine_quadratic("cost", a, b, c), 8))
    assert priced == ids(bcl.balance(quadratic, "cost", 8))


def test_a_stream_starts_at_its_first_next_and_reads_one_window_ahead():
    taken = []

    def upstream():
        for r in records(1000):
            taken.append(r.id)
            yield r

    stream = bcl.balance(upstream(), "cost", 4, lookahead=2)
    assert taken == []
    next(stream)
    capacity = _core.buffer_capacity(stream._options)
    assert 0 < len(taken) <= capacity + 1
    assert stream.upstream_consumed == len(taken)


def test_the_stats_count_what_was_emitted():
    items = records(1000)
    stream = bcl.balance(items, "cost", 16, lookahead=4)
    assert stream.stats["batches"] == 0
    batches = list(stream)
    s = stream.stats
    assert (s["records_in"], s["records_out"], s["batches"]) == (1000, 1000, len(batches))
    full = [sum(r.cost for r in b) for b in batches if len(b) == 16]
    assert s["batch_cost"]["count"] == len(full)
    assert s["batch_cost"]["mean"] == pytest.approx(np.mean(full))


def test_a_memory_budget_holds_for_every_batch():
    items = records(600, 3)
    memory = {r.id: (r.id % 10) + 1.0 for r in items}
    stream = bcl.balance(items, "cost", 8, memory=lambda r: memory[r.id], memory_budget=60.0)
    batches = list(stream)
    assert all(sum(memory[r.id] for r in b) <= 60.0 for b in batches)
    assert sorted(r.id for b in batches for r in b) == list(range(600))
