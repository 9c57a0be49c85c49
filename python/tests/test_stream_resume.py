"""Exact resume of a stream: a stream restored from state_dict() (through pickle or torch.save),
fed the upstream from where the saved one stood, emits exactly the batches the uninterrupted one
would have, at any point, after any failure of the upstream or the cost, for every kind of
upstream: one with its own state, a re-iterable one it fast-forwards, an iterator the caller
positions."""

import io
import pickle

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import bcl

from streams import (
    FlakyCost, FlakyUpstream, Record, StatefulUpstream, drain, ids, positioned, records,
    stream_options,
)  # fmt: skip

KINDS = ("stateful", "re-iterable", "iterator")


def upstream(kind, items, fails=()):
    """The upstream of a first run: an iterator with its own state, a list, an iterator."""
    if kind == "stateful":
        return StatefulUpstream(items, fails)
    if kind == "re-iterable":
        return items
    return FlakyUpstream(items, fails)


def resumed_upstream(kind, items, state):
    """What the caller hands the resumed stream: the same kind of upstream; an iterator already
    past the records the state took (upstream_consumed)."""
    if kind == "iterator":
        return positioned(items, state["upstream_consumed"])
    return StatefulUpstream(items) if kind == "stateful" else items


def through(state, how):
    if how == "pickle":
        return pickle.loads(pickle.dumps(state))
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return torch.load(buffer)


@st.composite
def interruptions(draw):
    n = draw(st.integers(0, 250))
    items = records(n, draw(st.integers(0, 1000)))
    kind = draw(st.sampled_from(KINDS))
    fails = () if kind == "re-iterable" else draw(st.sets(st.integers(0, n), max_size=3))
    cost_fails = draw(st.sets(st.integers(0, max(n - 1, 0)), max_size=3)) if n else set()
    options = draw(stream_options())
    if draw(st.booleans()):
        options["length"] = n
    stop = draw(st.integers(0, n // options["batch_size"] + 2))
    at_failure = draw(st.booleans())  # save right after an exception, with records in the intake
    return items, kind, fails, cost_fails, options, stop, at_failure, draw(
        st.sampled_from(["pickle", "torch.save"])
    )


@settings(max_examples=200)
@given(interruptions())
def test_a_resumed_stream_emits_exactly_the_batches_of_the_uninterrupted_one(run):
    items, kind, fails, cost_fails, options, stop, at_failure, how = run
    expected = ids(bcl.balance(items, "cost", **options))
    first = bcl.balance(upstream(kind, items, fails), FlakyCost(cost_fails), **options)
    head, failures = drain(first, limit=stop)
    if at_failure:
        more, failures = drain(first, max_failures=1)
        head += more
    state = through(first.state_dict(), how)
    second = bcl.balance(resumed_upstream(kind, items, state), FlakyCost(cost_fails), **options)
    second.load_state_dict(state)
    rest, _ = drain(second)
    assert ids(head + rest) == expected


@pytest.mark.parametrize("kind", KINDS)
def test_every_point_of_a_stream_resumes_exactly(kind):
    items = records(203)
    options = dict(batch_size=4, lookahead=3, cap="p90", cap_warmup=20)
    expected = ids(bcl.balance(items, "cost", **options))
    for stop in range(len(expected) + 2):
        first = bcl.balance(upstream(kind, items), "cost", **options)
        head = [b for _, b in zip(range(stop), first)]
        state = first.state_dict()
        second = bcl.balance(resumed_upstream(kind, items, state), "cost", **options)
        second.load_state_dict(state)
        assert ids(head + list(second)) == expected, stop


def test_the_upstreams_own_state_travels_in_the_state_and_the_stage_skips_nothing():
    items = records(100)
    first_upstream = StatefulUpstream(items)
    first = bcl.balance(first_upstream, "cost", 4, lookahead=2)
    head = [next(first) for _ in range(3)]
    state = first.state_dict()
    assert state["upstream"] == {"position": first_upstream.position}
    assert state["upstream_consumed"] == first_upstream.position
    again = StatefulUpstream(items)
    second = bcl.balance(again, "cost", 4, lookahead=2)
    second.load_state_dict(state)
    assert again.position == state["upstream_consumed"]  # restored, not skipped through
    assert ids(head + list(second)) == ids(bcl.balance(items, "cost", 4, lookahead=2))


def test_records_that_do_not_pickle_are_saved_by_key():
    class Handle:  # a record that holds something unpicklable (an open file, a lock)
        def __init__(self, record):
            self.record, self.lock = record, __import__("threading").Lock()

    items = records(150)
    table = {r.id: r for r in items}
    handles = [Handle(r) for r in items]
    cost = lambda h: h.record.cost  # noqa: E731
    first = bcl.balance(handles, cost, 4)
    head = [next(first) for _ in range(7)]
    with pytest.raises(bcl.Error, match="do not pickle .* pass key= and restore="):
        first.state_dict()
    keyed = dict(key=lambda h: h.record.id, restore=lambda k: Handle(table[k]))
    first = bcl.balance(handles, cost, 4, **keyed)
    head = [next(first) for _ in range(7)]
    state = pickle.loads(pickle.dumps(first.state_dict()))
    assert state["keyed"] and isinstance(pickle.loads(state["pending"])[0], int)
    second = bcl.balance(handles, cost, 4, **keyed)
    second.load_state_dict(state)
    out = [[h.record.id for h in b] for b in head + list(second)]
    assert out == ids(bcl.balance(items, "cost", 4))


class Fragile:
    """A record whose pickling raises what pickle itself never does (a live connection)."""

    def __init__(self, record):
        self.record = record

    def __reduce__(self):
        raise RuntimeError("a live connection does not travel")


def test_a_pending_record_whose_pickling_raises_anything_is_a_bcl_error_with_the_hint():
    items = [Fragile(r) for r in records(60)]
    stream = bcl.balance(items, lambda f: f.record.cost, 4)
    head = [next(stream) for _ in range(3)]
    with pytest.raises(bcl.Error, match=r"the pending records do not pickle \(RuntimeError: a "
                       r"live connection does not travel\); pass key= and restore=") as e:
        stream.state_dict()
    assert isinstance(e.value.__cause__, RuntimeError)
    out = [[f.record.id for f in b] for b in head + list(stream)]  # the stream goes on as it was
    assert out == ids(bcl.balance(records(60), "cost", 4))
    keyed = bcl.balance(items, lambda f: f.record.cost, 4, key=lambda f: f, restore=lambda k: k)
    next(keyed)
    with pytest.raises(bcl.Error, match=r"the keys key= gave the pending records do not pickle "
                       r"\(RuntimeError: .*\); key\(record\) must return a value that pickles"):
        keyed.state_dict()


def test_a_calibrated_stream_resumes_with_its_fit():
    items = records(400, 5)
    cost = bcl.affine_quadratic("cost", 0.0, 1.0, 0.0)

    def run(stream, start=0, stop=None):
        out = []
        for k, batch in enumerate(stream, start=start):
            stream.observe(k, sum(1e-3 + 2e-6 * r.cost**1.5 for r in batch))
            out.append(batch)
            if stop is not None and k + 1 == stop:
                break
        return out

    expected = ids(run(bcl.balance(items, cost, 8, calibrate=True)))
    first = bcl.balance(items, cost, 8, calibrate=True)
    head = run(first, stop=20)
    state = first.state_dict()
    second = bcl.balance(items, cost, 8, calibrate=True)
    second.load_state_dict(state)
    assert second.stats["calibration"] == first.stats["calibration"]
    assert ids(head + run(second, start=20)) == expected


def test_a_state_saved_before_the_first_batch_or_after_the_last_resumes_as_such():
    items = records(30)
    fresh = bcl.balance(items, "cost", 4)
    state = fresh.state_dict()
    assert state["upstream_consumed"] == 0
    again = bcl.balance(items, "cost", 4)
    again.load_state_dict(state)
    assert ids(again) == ids(bcl.balance(items, "cost", 4))
    done = bcl.balance(items, "cost", 4)
    list(done)
    finished = bcl.balance(items, "cost", 4)
    finished.load_state_dict(done.state_dict())
    assert list(finished) == []


def test_a_stream_that_has_started_takes_no_state():
    stream = bcl.balance(records(50), "cost", 4)
    state = stream.state_dict()
    next(stream)
    with pytest.raises(bcl.Error, match="in a stream that has not started; this one has taken"):
        stream.load_state_dict(state)


@pytest.mark.parametrize(
    "change, words",
    [
        (dict(cost=lambda r: r.cost), "the state was saved with cost=\"field 'cost'\", but this "
                                      "stream has cost="),
        (dict(cost=bcl.affine_quadratic("cost", 1.0, 1.0, 0.0)), "saved with cost="),
        (dict(batch_size=5), "options::batch_size = 4, not 5"),
        (dict(policy="tumbling"), "options::policy"),
        (dict(mean_cost=5.0), "options::mean_cost"),
        (dict(seed=1), "options::seed = 0, not 1"),
        (dict(length=60), "saved with length=None, but this stream has length=60"),
        (dict(memory="cost", memory_budget=1e9), "saved with memory=None"),
        (dict(key=id, restore=id), "the state's keyed is False: the state holds its pending"),
    ],
)
def test_a_state_of_other_settings_is_refused_naming_them(change, words):
    items = records(60)
    first = bcl.balance(items, "cost", 4)
    [next(first) for _ in range(3)]
    state = first.state_dict()
    options = dict(cost="cost", batch_size=4)
    options.update(change)
    other = bcl.balance(items, **options)
    with pytest.raises(bcl.Error) as e:
        other.load_state_dict(state)
    assert words in str(e.value)
    assert other.upstream_consumed == 0


def test_a_reiterable_upstream_that_lost_records_is_refused():
    first = bcl.balance(records(100), "cost", 4)
    [next(first) for _ in range(10)]
    state = first.state_dict()
    second = bcl.balance(records(20), "cost", 4)
    with pytest.raises(bcl.Error, match="yields 20 records, fewer than the .* the state took"):
        second.load_state_dict(state)


def test_an_upstream_whose_kind_changed_is_refused_and_its_state_kept():
    items = records(100)
    plain = bcl.balance(items, "cost", 4)
    [next(plain) for _ in range(5)]
    with_state = StatefulUpstream(items)
    with_state.position = 7
    resumed = bcl.balance(with_state, "cost", 4)
    with pytest.raises(bcl.Error, match="the state's upstream is None, but this stream's"):
        resumed.load_state_dict(plain.state_dict())
    assert with_state.position == 7
    stateful = bcl.balance(StatefulUpstream(items), "cost", 4)
    [next(stateful) for _ in range(5)]
    with pytest.raises(bcl.Error, match="holds the upstream's state_dict"):
        bcl.balance(items, "cost", 4).load_state_dict(stateful.state_dict())


def test_a_state_from_a_dataloader_worker_resumes_only_in_that_worker():
    stream = bcl.balance(records(40), "cost", 4)
    state = dict(stream.state_dict(), worker=[1, 2])
    from bcl import _state, _stream

    state["checksum"] = _state.checksum(state, _stream._CHECKED_FIELDS)
    with pytest.raises(bcl.Error, match="saved in DataLoader worker 1 of 2, but it is loaded in "
                                        "the main process"):  # fmt: skip
        bcl.balance(records(40), "cost", 4).load_state_dict(state)


def test_the_state_is_plain_values_and_names_what_it_holds():
    items = [Record(i, float(i)) for i in range(50)]
    stream = bcl.balance(items, "cost", 4, lookahead=2)
    [next(stream) for _ in range(3)]
    state = stream.state_dict()
    assert state["format"] == "bcl.balance/1"
    assert set(state) == {
        "format", "upstream_consumed", "returned", "balancer", "positions", "pending", "intake",
        "keyed", "cost", "memory", "length", "worker", "checksum", "upstream",
    }  # fmt: skip
    pending = pickle.loads(state["pending"])
    assert [r.id for r in pending] == state["positions"]  # each record at its arrival position
    taken = {r.id for r in pending} | {r.id for b in [] for r in b}
    assert state["upstream_consumed"] == stream.upstream_consumed >= max(taken) + 1
    assert np.all(np.diff(sorted(state["positions"])) > 0)
