"""A stream's state is input: however it was tampered with, loading it either raises bcl.Error
and changes nothing (the stream and its upstream are as they were), or continues into an exact
stream (every record once, exact batch sizes and count). Never a hang, a crash, another
exception, or a record lost, duplicated or invented. Each group of trials runs in a forked
child with a time limit, so a hang or a crash is reported as such. The upstream's own state is
the upstream's to check and is left alone."""

import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bcl
from bcl import _state, _stream

import forked
import tampering
from streams import StatefulUpstream, drain, ids, records

N = 203  # not a multiple of the batch size: the stream ends with a short batch
B = 4

CONFIGS = {
    "sliding": dict(),
    "tumbling": dict(policy="tumbling"),
    "fixed mean cost": dict(mean_cost=3000.0),
    "drop_last, p90 cap": dict(drop_last=True, cap="p90", cap_warmup=20),
    "memory budget": dict(memory="cost", memory_budget=4 * 60000.0),
    "calibrated": dict(cost=bcl.affine_quadratic("cost", 1.0, 0.5, 0.0), calibrate=True),
    "keyed": dict(key="id", restore="id"),
    "length": dict(length=N),
    "stateful upstream": dict(stateful=True),
}

ITEMS = records(N, 7)


def build(config):
    """(a fresh stream for `config`, its upstream)."""
    options = dict(CONFIGS[config])
    upstream = StatefulUpstream(ITEMS) if options.pop("stateful", False) else ITEMS
    if options.get("key") == "id":
        options.update(key=lambda r: r.id, restore=ITEMS.__getitem__)
    cost = options.pop("cost", "cost")
    return bcl.balance(upstream, cost, B, lookahead=3, **options), upstream


def saved(config, stop):
    """(the state after `stop` batches, those batches)."""
    stream, _ = build(config)
    head = [b for _, b in zip(range(stop), stream)]
    return pickle.loads(pickle.dumps(stream.state_dict())), head


def resealed(state):
    state = dict(state)
    state["checksum"] = _state.checksum(state, _stream._CHECKED_FIELDS)
    return state


def exact(batches, drop_last):
    """Whether `batches` is an exact stream over ITEMS (the contract)."""
    flat = [r.id for b in batches for r in b]
    count = N // B if drop_last else -(-N // B)
    sizes = all(len(b) == B for b in batches[:-1]) and (not batches or 0 < len(batches[-1]) <= B)
    if len(batches) != count or not sizes or len(set(flat)) != len(flat):
        return False
    return set(flat) <= set(range(N)) and len(flat) == (count * B if drop_last else N)


def trial(config, state, head, tamper, reseal):
    """The outcome of loading `tamper(state)` into a fresh stream (in the calling process)."""
    bad = tamper(dict(state))
    if reseal and isinstance(bad, dict):
        bad = resealed(bad)
    stream, upstream = build(config)
    untouched, _ = build(config)
    try:
        stream.load_state_dict(bad)
    except bcl.Error as e:
        # Nothing changed: the stream (and its upstream) give what an untouched one gives.
        if getattr(upstream, "position", 0) != 0 or ids(stream) != ids(untouched):
            return ("changed by a refused load", str(e))
        return ("refused", str(e))
    except Exception as e:  # noqa: BLE001 - any other exception is a finding
        return ("other exception", f"{type(e).__name__}: {e}")
    rest, _ = drain(stream, limit=N)
    drop_last = CONFIGS[config].get("drop_last", False)
    return ("exact", None) if exact(head + rest, drop_last) else ("wrong stream", f"{len(rest)}")


def _set(key, value):
    return lambda s: dict(s, **{key: value})


def _positions(edit):
    return lambda s: dict(s, positions=edit(list(s["positions"])))


def _pending(edit):
    return lambda s: dict(s, pending=pickle.dumps(edit(pickle.loads(s["pending"]))))


def _handed_out(s):
    """A position taken that is no longer pending: a record already emitted."""
    return next(p for p in range(s["upstream_consumed"]) if p not in s["positions"])


def _flip(data, at):
    data = bytearray(data)
    data[at % len(data)] ^= 0x10
    return bytes(data)


TAMPERS = {
    "upstream_consumed + 1": lambda s: dict(s, upstream_consumed=s["upstream_consumed"] + 1),
    "upstream_consumed - 1": lambda s: dict(s, upstream_consumed=s["upstream_consumed"] - 1),
    "upstream_consumed + 16": lambda s: dict(s, upstream_consumed=s["upstream_consumed"] + 16),
    "upstream_consumed 0": _set("upstream_consumed", 0),
    "upstream_consumed -1": _set("upstream_consumed", -1),
    "upstream_consumed True": _set("upstream_consumed", True),
    "upstream_consumed 1.0": lambda s: dict(s, upstream_consumed=float(s["upstream_consumed"])),
    "returned + 1": lambda s: dict(s, returned=s["returned"] + 1),
    "returned and upstream_consumed + 1": lambda s: dict(
        s, returned=s["returned"] + 1, upstream_consumed=s["upstream_consumed"] + 1
    ),
    "positions swapped": _positions(lambda p: p[1:2] + p[:1] + p[2:]),
    "positions reversed": _positions(lambda p: p[::-1]),
    "position + 1": _positions(lambda p: [p[0] + 1] + p[1:] if p else [0]),
    "position handed out": lambda s: dict(s, positions=[_handed_out(s)] + s["positions"][1:]),
    "position duplicated": _positions(lambda p: p[:1] + p),
    "position dropped": _positions(lambda p: p[1:]),
    "position -1": _positions(lambda p: [-1] + p[1:]),
    "position 1.5": _positions(lambda p: [1.5] + p[1:]),
    "position 2**64": _positions(lambda p: [2**64] + p[1:]),
    "positions a string": _set("positions", "0,1,2"),
    "pending dropped": _pending(lambda p: p[1:]),
    "pending duplicated": _pending(lambda p: p[:1] + p),
    "pending reversed": _pending(lambda p: p[::-1]),
    "pending a tuple": _pending(tuple),
    "pending garbage": _set("pending", b"\x80\x05garbage"),
    "pending a string": _set("pending", "records"),
    "intake one more": lambda s: dict(s, intake=pickle.dumps([ITEMS[0]])),
    "balancer truncated": lambda s: dict(s, balancer=s["balancer"][:-9]),
    "balancer flipped": lambda s: dict(s, balancer=_flip(s["balancer"], 200)),
    "balancer of the next batch": None,  # set per state: saved(config, stop + 1)'s bytes
    "balancer empty": _set("balancer", b""),
    "keyed flipped": lambda s: dict(s, keyed=not s["keyed"]),
    "cost": _set("cost", "field 'tokens'"),
    "memory": _set("memory", "len"),
    "length": _set("length", N + 1),
    "worker": _set("worker", [0, 2]),
    "worker garbage": _set("worker", "0 of 2"),
    "format": _set("format", "bcl.balance/0"),
    "no checksum": lambda s: {k: v for k, v in s.items() if k != "checksum"},
    "no positions": lambda s: {k: v for k, v in s.items() if k != "positions"},
    "an unknown field": _set("note", 1),
    "a list": lambda s: list(s.items()),
}


def _group(config, stop):
    """Every tamper, resealed or not, on one saved state; a map of (tamper, reseal) to outcome."""
    state, head = saved(config, stop)
    next_bytes = saved(config, stop + 1)[0]["balancer"]
    tampers = dict(TAMPERS, **{"balancer of the next batch": _set("balancer", next_bytes)})
    return tampering.run_group(
        tampers, lambda tamper, reseal: trial(config, state, head, tamper, reseal)
    )


def _stops():
    batches = -(-N // B)
    return [0, 1, 5, 20, batches - 1, batches]


@pytest.mark.parametrize("config", list(CONFIGS))
def test_no_tampered_state_hangs_crashes_or_yields_a_wrong_stream(config):
    tampering.check_groups(config, lambda stop: _group(config, stop), _stops())


@pytest.mark.parametrize(
    "name, words",
    [
        ("upstream_consumed + 1", "the state's checksum does not match its fields"),
        ("position + 1", "the state's positions[0] is"),
        ("position dropped", "the state has 20 pending records, but 19 positions"),
        ("upstream_consumed - 1", "less its intake, is"),
        ("pending garbage", "the state's pending does not unpickle"),
        ("worker garbage", "the state's worker must be None or [id, num_workers]"),
        ("cost", "the state was saved with cost=\"field 'tokens'\""),
        ("an unknown field", "the state has an unknown field 'note'"),
    ],
)
def test_a_tampered_state_is_refused_naming_its_field(name, words):
    state, head = saved("sliding", 7)
    reseal = name != "upstream_consumed + 1"
    kind, detail = forked.run(lambda: trial("sliding", state, head, TAMPERS[name], reseal))[1]
    assert kind == "refused" and words in detail, detail


def test_a_numpy_array_in_a_state_field_is_a_bcl_error_that_changes_nothing():
    state, _ = saved("sliding", 7)
    whole = ids(drain(build("sliding")[0])[0])
    for what, edited in tampering.numpy_edits(state):
        stream, _ = build("sliding")
        with pytest.raises(bcl.Error):
            stream.load_state_dict(edited)
        assert ids(drain(stream)[0]) == whole, what


@settings(max_examples=40)
@given(st.sampled_from(sorted(CONFIGS)), st.integers(0, 60), st.data())
def test_random_edits_of_a_state_are_refused_or_exact(config, stop, data):
    state, head = saved(config, stop)
    keys = sorted(k for k in state if k != "upstream")
    tampering.check_random_edits(
        data, state, keys, lambda tamper, reseal: trial(config, state, head, tamper, reseal)
    )


if __name__ == "__main__":
    # The tally docs/python.md cites: every tamper of every configuration and stop.
    tampering.print_tally(_group(c, stop)[1] for c in CONFIGS for stop in _stops())
