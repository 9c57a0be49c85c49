"""A state is input: however it was tampered with or mismatched, loading it either raises
bcl.Error and changes nothing, or yields an exact epoch (every index once, exact batch sizes and
count). Never a hang, a crash, another exception, or an epoch with an index lost, duplicated or
invented. Each trial runs in a forked child with a time limit, so a hang or a crash is reported
as such instead of stopping the suite."""

import collections
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import DistributedSampler

import bcl

import forked
import tampering
from conftest import resealed, sequence_costs

N = 203  # not a multiple of the batch size: the epoch ends with a short batch
B = 4

CONFIGS = {
    "sliding": dict(),
    "tumbling": dict(policy="tumbling"),
    "fixed mean cost": dict(mean_cost=300.0),
    "running mean cost": dict(mean_cost="running"),
    "drop_last, p90 cap": dict(drop_last=True, cap="p90", cap_warmup=20),
    "memory budget": dict(memory=True),
    "callable costs": dict(callable=True),
    "distributed inner sampler": dict(distributed=True),
    "calibrated": dict(calibrated=True),
}


def build(config, n=N):
    """A sampler for `config` over n dataset indices (a fresh one each call)."""
    options = dict(CONFIGS[config])
    costs = sequence_costs(n, 7)
    if options.pop("callable", False):
        costs = costs.tolist().__getitem__
    if options.pop("calibrated", False):
        costs = bcl.affine_quadratic(np.sqrt(costs), 1.0, 0.5, 0.01)
        options["calibrate"] = True
    if options.pop("memory", False):
        memory = sequence_costs(n, 8)
        options.update(memory=memory, memory_budget=float(B * memory.max()))
    if options.pop("distributed", False):
        inner = DistributedSampler(range(n), num_replicas=2, rank=1, shuffle=True, seed=3)
        inner.set_epoch(5)
    else:
        inner = np.random.default_rng(1).permutation(n).tolist()
    return bcl.BalancedBatchSampler(inner, costs, B, lookahead=3, **options)


def saved(config, stop):
    """(the state after `stop` batches, those batches, the whole uninterrupted epoch); stop
    "end": the state after the epoch's iterator ended, which carries what its balancer learned
    into the next epoch."""
    sampler = build(config)
    it = iter(sampler)
    if stop == "end":
        head = list(it)
        return pickle.loads(pickle.dumps(sampler.state_dict())), [], head
    head = [next(it) for _ in range(stop)]
    state = pickle.loads(pickle.dumps(sampler.state_dict()))
    return state, head, head + list(it)


def exact_epoch(batches, epoch, drop_last):
    """Whether `batches` is an exact epoch over the multiset `epoch` (the contract)."""
    flat = [i for batch in batches for i in batch]
    n = len(epoch)
    count = n // B if drop_last else -(-n // B)
    sizes_ok = all(len(b) == B for b in batches[:-1]) and (not batches or 0 < len(batches[-1]) <= B)
    if len(batches) != count or not sizes_ok:
        return False
    if drop_last:  # n mod B indices are dropped: the rest is a sub-multiset of the epoch
        extra = collections.Counter(flat) - collections.Counter(epoch)
        return not extra and len(flat) == count * B
    return collections.Counter(flat) == collections.Counter(epoch)


def trial(config, state, head, tamper, reseal, loader=build):
    """The outcome of loading `tamper(state)` into a fresh sampler (in the calling process)."""
    drop_last = CONFIGS[config].get("drop_last", False)
    bad = tamper(dict(state))
    if reseal and isinstance(bad, dict):
        bad = resealed(bad)
    # Refused: nothing changed, the sampler's next epoch is the one an untouched sampler gives.
    sampler, refused = tampering.load(lambda: loader(config), bad)
    if refused:
        return refused
    epoch = list(sampler.sampler)  # the indices of the epoch the loaded state is in
    rest = list(sampler)
    if bad.get("finished") is True:
        # A state that says its epoch is finished (true or not: nothing in it could tell) owes
        # no batch of that epoch.
        return ("exact", None) if rest == [] else ("wrong epoch", f"{len(rest)} batches after")
    if not bad["running"]:
        head = []  # a state saved between epochs: the next epoch is a whole one
    if exact_epoch(head + rest, epoch, drop_last):
        return ("exact", None)
    return ("wrong epoch", f"{len(head)} + {len(rest)} batches")


def _set(key, value):
    return lambda s: dict(s, **{key: value})


def _pending(edit):
    return lambda s: dict(s, pending=edit(list(s.get("pending") or [])))


def _emitted_index(s):
    """An index of the epoch that is not pending: already emitted, or not yet pushed."""
    pending = set(s.get("pending") or [])
    return next(i for i in range(N) if i not in pending)


def _pending_plus_emitted(s):
    return dict(s, pending=list(s.get("pending") or []) + [_emitted_index(s)])


TAMPERS = {
    "position + 1": lambda s: dict(s, position=s["position"] + 1),
    "position - 1": lambda s: dict(s, position=max(s["position"] - 1, 0)),
    "position + 16": lambda s: dict(s, position=s["position"] + 16),
    "position - 16": lambda s: dict(s, position=max(s["position"] - 16, 0)),
    "position 0": _set("position", 0),
    "position at the end": lambda s: dict(s, position=s["length"]),
    "pending -3": _pending(lambda p: p + [-3]),
    "pending 10**12": _pending(lambda p: [10**12] + p[1:]),
    "pending 2**63 - 1": _pending(lambda p: p[:-1] + [2**63 - 1]),
    "pending out of range": _pending(lambda p: [N] + p[1:]),
    "pending duplicated": _pending(lambda p: p[:1] + p if p else [0]),
    "pending dropped": _pending(lambda p: p[1:]),
    "pending last dropped": _pending(lambda p: p[:-1]),
    "pending True": _pending(lambda p: [True] + p[1:]),
    "pending 1.5": _pending(lambda p: [1.5] + p[1:]),
    "pending numpy uint64 max": _pending(lambda p: [np.uint64(2**64 - 1)] + p[1:]),
    "pending swapped": _pending(lambda p: p[::-1]),
    "pending extra (emitted)": _pending_plus_emitted,
    "pending replaced by an emitted one": lambda s: dict(
        s, pending=[_emitted_index(s)] + list(s.get("pending") or [])[1:]
    ),
    "length + 1": lambda s: dict(s, length=s["length"] + 1),
    "digest": _set("digest", "0" * 32),
    "epoch + 1": lambda s: dict(s, epoch=(s["epoch"] or 0) + 1),
    "running flipped": lambda s: dict(s, running=not s["running"]),
    "finished flipped": lambda s: dict(s, finished=not s["finished"]),
    "finished 1": _set("finished", 1),
    "no finished": lambda s: {k: v for k, v in s.items() if k != "finished"},
    "dataset_size": lambda s: dict(s, dataset_size=(s["dataset_size"] or 0) + 7),
    "inner_kind": _set("inner_kind", "builtins.list"),
    "epoch_mean_cost doubled": lambda s: dict(
        s, epoch_mean_cost=None if s.get("epoch_mean_cost") is None else 2 * s["epoch_mean_cost"]
    ),
    "mean_cost_mode": _set("mean_cost_mode", "fixed"),
    "no checksum": lambda s: {k: v for k, v in s.items() if k != "checksum"},
    "format 2": _set("format", "bcl.BalancedBatchSampler/2"),
    "format 3": _set("format", "bcl.BalancedBatchSampler/3"),
    "balancer truncated": lambda s: dict(s, balancer=(s.get("balancer") or b"")[:-9]),
    "learned truncated": lambda s: dict(s, learned=(s.get("learned") or b"")[:-9]),
    "learned from a running epoch": lambda s: dict(s, learned=saved("sliding", 3)[0]["balancer"]),
    "a list": lambda s: list(s.items()),
}


def _group(config, stop):
    """Every tamper, resealed or not, on one saved state; a map of (tamper, reseal) to outcome."""
    state, head, _ = saved(config, stop)
    running_only = ("position", "pending", "length", "digest", "epoch_mean", "balancer")
    between_only = ("learned",)

    applicable = {
        name: tamper
        for name, tamper in TAMPERS.items()
        if not name.startswith(between_only if state["running"] else running_only)
    }
    return tampering.run_group(
        applicable, lambda tamper, reseal: trial(config, state, head, tamper, reseal)
    )


def _stops(config):
    batches = len(list(build(config)))
    return sorted({0, 1, 5, 20, batches - 1, batches}) + ["end"]


@pytest.mark.parametrize("config", list(CONFIGS))
def test_no_tampered_state_hangs_crashes_or_yields_a_wrong_epoch(config):
    tampering.check_groups(config, lambda stop: _group(config, stop), _stops(config))


def test_a_state_of_a_sampler_over_another_dataset_size_is_refused_naming_it():
    state, head, _ = saved("sliding", 7)

    def loader(config):
        return build(config, n=N + 50)

    def attempt():
        return trial("sliding", state, head, lambda s: s, reseal=False, loader=loader)

    kind, detail = forked.run(attempt)[1]
    assert kind == "refused" and "dataset_size is 203" in detail, detail


def test_the_state_that_once_hung_is_refused_at_once():
    # Every index pushed (the drain under way), position set to 0: the old core looked for room
    # to push forever, holding the GIL.
    state, head, _ = saved("sliding", len(list(build("sliding"))) - 1)
    kind, detail = forked.run(
        lambda: trial("sliding", state, head, _set("position", 0), reseal=True), timeout=30.0
    )[1]
    assert kind == "refused" and "position is 0" in detail and "were pushed" in detail, detail


@settings(max_examples=40)
@given(st.sampled_from(sorted(CONFIGS)), st.integers(0, 60), st.data())
def test_random_edits_of_a_state_are_refused_or_exact(config, stop, data):
    state, head, _ = saved(config, min(stop, len(list(build(config)))))
    keys = sorted(k for k in state if k != "inner")
    tampering.check_random_edits(
        data, state, keys, lambda tamper, reseal: trial(config, state, head, tamper, reseal)
    )


if __name__ == "__main__":
    # The tally docs/python.md cites: every tamper of every configuration and stop.
    tampering.print_tally(_group(c, stop)[1] for c in CONFIGS for stop in _stops(c))
