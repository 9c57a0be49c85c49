"""What the tamper tests share: running groups of trials in forked children and judging their
outcomes, random edits of a state, and the tally the docs cite. A trial's outcome is one of
"refused" (bcl.Error, nothing changed), "exact" (the contract holds after the load),
"not applicable" (the tamper does not apply to that state), or a finding (anything else)."""

import collections

import numpy as np
from hypothesis import strategies as st

import bcl
import forked

#: Values a random edit puts in a state's fields.
VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True),
    st.text(max_size=5), st.binary(max_size=16), st.lists(st.integers(-5, 300), max_size=40),
)  # fmt: skip


def numpy_edits(state):
    """(what, edited state) pairs that put numpy arrays where a state holds its fields: the format
    as a 1-d array of itself, then each field in turn as a 0-d array holding its value."""
    yield "format as a 1-d array", dict(state, format=np.array([state["format"]] * 2))
    for key, value in state.items():
        zero_d = np.empty((), dtype=object)
        zero_d[()] = value
        yield f"{key} as a 0-d array", dict(state, **{key: zero_d})


def load(make, state):
    """Loads `state` into a fresh sampler of make(): (the sampler, None) if it loads, else (None,
    outcome): "refused" (a bcl.Error, and the sampler's next pass is an untouched one's),
    "changed by a refused load", or "other exception"."""
    sampler, untouched = make(), make()
    try:
        sampler.load_state_dict(state)
    except bcl.Error as e:
        if list(sampler) != list(untouched):
            return None, ("changed by a refused load", str(e))
        return None, ("refused", str(e))
    except Exception as e:  # noqa: BLE001 - any other exception is a finding
        return None, ("other exception", f"{type(e).__name__}: {e}")
    return sampler, None


def rest_of_its_epoch(make, sampler):
    """("exact", None) if what a loaded distributed sampler hands out is the end of the epoch it
    claims (as a fresh sampler of make() plans it), else ("wrong epoch", counts)."""
    claimed = make()
    claimed.set_epoch(sampler.epoch)
    whole = list(claimed)
    rest = list(sampler)
    if rest != whole[len(whole) - len(rest) :]:
        return ("wrong epoch", f"{len(rest)} of {len(whole)}")
    return ("exact", None)


def run_group(tampers, trial):
    """In a forked child: a map (name, reseal) -> trial(tamper, reseal) over `tampers` (name ->
    tamper), each resealed and not; a tamper that raises cannot apply to that state."""

    def all_trials():
        out = {}
        for name, tamper in tampers.items():
            for reseal in (False, True):
                try:
                    out[(name, reseal)] = trial(tamper, reseal)
                except Exception as e:  # noqa: BLE001 - a tamper that cannot apply to this state
                    out[(name, reseal)] = ("not applicable", f"{type(e).__name__}: {e}")
        return out

    return forked.run(all_trials, timeout=240.0)


def check_groups(where, group, stops):
    """Runs group(stop) (a forked.run of a map (tamper, reseal) -> outcome) for each stop and
    fails on any finding, or unless both a refusal and an exact load were reached."""
    outcomes = collections.Counter()
    findings = []
    for stop in stops:
        result = group(stop)
        assert result[0] == "ok", f"{where}, saved after {stop} batches: {result}"
        for (name, reseal), (kind, detail) in result[1].items():
            outcomes[kind] += 1
            if kind not in ("refused", "exact", "not applicable"):
                findings.append(f"{name} (resealed={reseal}, after {stop}): {kind}: {detail}")
    assert not findings, "\n".join(findings)
    assert outcomes["refused"] > 0 and outcomes["exact"] > 0  # both outcomes were reached


def check_random_edits(data, state, keys, trial):
    """Draws up to three fields of `keys` and values for them, resealed or not; trial(tamper,
    reseal) must refuse the edited state or load it exactly, in a forked child."""
    edits = data.draw(st.dictionaries(st.sampled_from(keys), VALUES, min_size=1, max_size=3))
    reseal = data.draw(st.booleans())
    result = forked.run(lambda: trial(lambda s: dict(s, **edits), reseal))
    assert result[0] == "ok", result
    assert result[1][0] in ("refused", "exact"), (edits, result)


def print_tally(results):
    """Prints how many tampered states `results` (maps of outcomes) hold, by outcome."""
    tally: collections.Counter = collections.Counter()
    for outcomes in results:
        for kind, _ in outcomes.values():
            tally[kind] += 1
    print(f"{sum(tally.values()) - tally['not applicable']} tampered states: {dict(tally)}")
