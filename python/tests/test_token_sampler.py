"""bcl.DistributedBalancedBatchSampler in token mode (max_tokens=, micro_batches=, lengths=), as a
specification: every epoch's global order (torch.randperm, as DistributedSampler draws it) is
planned in windows of K steps of M micro-batches of at most T tokens on every rank, and each rank
hands out its own micro-batches one at a time.

Over all ranks: every index of the epoch exactly once (and the order's first records again when
its tail had to be padded), the same number of micro-batches on every rank, equal to len(), every
step M micro-batches but the epoch's last (a multiple of m), none empty, none above T (but a
record alone above T with oversized="alone"), the same plan on every rank (the digest), an exact
resume from state_dict(consumed=k) at every k, with or without DataLoader workers, and tampered
states refused without a change. (The digest check across processes is test_distributed.py's,
for both modes.)"""

import collections
import pickle
import re

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import bcl

import tampering
from conftest import Indexed, check_resume, resealed


def sharegpt_like(n, seed=0, longest=8000):
    """Token counts of about ShareGPT's spread (mean ~2,800), as integers."""
    lengths = np.random.default_rng(seed).lognormal(7.6, 0.7, size=n)
    return np.minimum(lengths, longest).astype(np.int64) + 1


def sampler(lengths, ranks, rank, **options):
    options.setdefault("max_tokens", 16384)
    options.setdefault("micro_batches", 2)
    return bcl.DistributedBalancedBatchSampler(num_replicas=ranks, rank=rank, lengths=lengths,
                                               **options)  # fmt: skip


def all_ranks(lengths, ranks, epoch=0, **options):
    """(each rank's micro-batches of `epoch`, each rank's sampler)."""
    out, samplers = [], []
    for rank in range(ranks):
        s = sampler(lengths, ranks, rank, **options)
        s.set_epoch(epoch)
        out.append(list(s))
        samplers.append(s)
    return out, samplers


def epoch_order(n, epoch, seed=0, shuffle=True):
    """The epoch's global order, as DistributedSampler draws it."""
    if not shuffle:
        return list(range(n))
    g = torch.Generator()
    g.manual_seed(seed + epoch)
    return torch.randperm(n, generator=g).tolist()


def check_epoch(batches, samplers, lengths, max_tokens, micro_batches, multiple_of=1,
                alone=False, epoch=0, seed=0, shuffle=True):  # fmt: skip
    """Every promise of the token mode, over all ranks' micro-batches of one epoch."""
    ranks = len(batches)
    counts = {len(b) for b in batches}
    assert counts == {len(samplers[0])}  # every rank runs as many, and len() says how many
    assert {len(s) for s in samplers} == counts
    stats = [s.stats for s in samplers]
    assert len({st_["digest"] for st_ in stats}) == 1  # the same plan on every rank
    padded = stats[0]["padded"]
    order = epoch_order(len(lengths), epoch, seed, shuffle)
    got = collections.Counter(i for rank in batches for batch in rank for i in batch)
    assert got == collections.Counter(order + order[:padded])  # exactly once, but the padding
    for rank in batches:
        for batch in rank:
            tokens = int(np.asarray(lengths)[batch].sum())
            assert batch and (tokens <= max_tokens or (alone and len(batch) == 1))
    # Steps: M micro-batches each but the epoch's last, a positive multiple of m.
    steps = stats[0]["steps"]
    total = len(batches[0])
    assert (steps - 1) * micro_batches < total <= steps * micro_batches
    last = total - (steps - 1) * micro_batches
    assert last % multiple_of == 0
    _ = ranks


@st.composite
def jobs(draw):
    ranks = draw(st.integers(1, 6))
    multiple_of = draw(st.integers(1, 2))
    micro_batches = multiple_of * draw(st.integers(1, 3))
    max_tokens = draw(st.sampled_from([600, 4096, 16384]))
    n = draw(st.integers(ranks * multiple_of, 400))
    alone = draw(st.booleans())
    longest = 2 * max_tokens if alone else max_tokens - 1
    lengths = sharegpt_like(n, draw(st.integers(0, 2**16)), longest)
    if draw(st.booleans()):
        lengths[draw(st.integers(0, n - 1))] = 0  # an empty record
    options = dict(
        max_tokens=max_tokens, micro_batches=micro_batches, multiple_of=multiple_of,
        lookahead=draw(st.integers(1, 4)), shuffle=draw(st.booleans()),
        seed=draw(st.integers(0, 50)), oversized="alone" if alone else "error",
    )  # fmt: skip
    if draw(st.booleans()):
        options["costs"] = np.random.default_rng(n).lognormal(0.0, 1.0, n)
    return lengths, ranks, options, draw(st.integers(0, 3))


@given(jobs())
def test_over_all_ranks_every_index_of_the_epoch_comes_out_exactly_once(job):
    lengths, ranks, options, epoch = job
    batches, samplers = all_ranks(lengths, ranks, epoch, **options)
    check_epoch(batches, samplers, lengths, options["max_tokens"], options["micro_batches"],
                options["multiple_of"], options["oversized"] == "alone", epoch, options["seed"],
                options["shuffle"])  # fmt: skip


def test_an_order_whose_tail_cannot_fill_the_last_step_is_padded_with_its_first_records():
    # 3 records of T tokens on 2 ranks: each is a micro-batch of its own, so no plan gives both
    # ranks as many; the order's first record comes again, as DistributedSampler pads its order.
    lengths = [10, 10, 10]
    batches, samplers = all_ranks(lengths, 2, max_tokens=10, micro_batches=1, lookahead=1,
                                  shuffle=False)  # fmt: skip
    assert samplers[0].stats["padded"] == 1
    assert sorted(i for rank in batches for b in rank for i in b) == [0, 0, 1, 2]
    check_epoch(batches, samplers, lengths, 10, 1, shuffle=False)


def test_with_padding_empty_the_ranks_short_of_records_get_empty_micro_batches_instead():
    # The same 3 records of T tokens on 2 ranks: no record comes twice; one rank runs an empty
    # micro-batch beside the other's last record.
    lengths = [10, 10, 10]
    batches, samplers = all_ranks(lengths, 2, max_tokens=10, micro_batches=1, lookahead=1,
                                  shuffle=False, padding="empty")  # fmt: skip
    assert [len(rank) for rank in batches] == [2, 2]
    assert sorted(i for rank in batches for b in rank for i in b) == [0, 1, 2]
    assert sum(1 for rank in batches for b in rank if not b) == 1
    stats = samplers[0].stats
    assert stats["padding_micro_batches"] == 1 and stats["padded"] == 0
    # "error" refuses the epoch, naming the options that would plan it.
    s = sampler(lengths, 2, 0, max_tokens=10, micro_batches=1, lookahead=1, padding="error")
    with pytest.raises(bcl.Error, match="allow_empty_micro_batches"):
        len(s)


def test_padding_empty_keeps_every_promise_but_non_empty_micro_batches_on_random_jobs():
    rng = np.random.default_rng(5)
    for trial in range(40):
        ranks = int(rng.integers(2, 7))
        n = int(rng.integers(ranks, 60))
        lengths = rng.integers(300, 1001, size=n)  # most need a micro-batch of their own
        options = dict(max_tokens=1000, micro_batches=int(rng.integers(1, 3)),
                       lookahead=int(rng.integers(1, 3)), padding="empty")  # fmt: skip
        batches, samplers = all_ranks(lengths, ranks, int(rng.integers(0, 3)), **options)
        assert len({len(rank) for rank in batches}) == 1 == len({len(s) for s in samplers})
        got = sorted(i for rank in batches for b in rank for i in b)
        assert got == list(range(n))  # every index once, none repeated
        empty = sum(1 for rank in batches for b in rank if not b)
        assert empty == samplers[0].stats["padding_micro_batches"]
        for rank in batches:
            for b in rank:
                assert int(lengths[b].sum()) <= 1000


def test_pad_to_multiple_of_counts_each_length_rounded_up_and_is_a_setting_of_the_state():
    # Lengths 5, 7, 9, 9 padded to multiples of 4 (8, 8, 12, 12) fill T = 16 three times.
    lengths = [5, 7, 9, 9]
    batches, samplers = all_ranks(lengths, 1, max_tokens=16, micro_batches=1, lookahead=1,
                                  shuffle=False, pad_to_multiple_of=4)  # fmt: skip
    assert len(batches[0]) == 3
    for b in batches[0]:
        assert sum(-(-lengths[i] // 4) * 4 for i in b) <= 16
    state = samplers[0].state_dict()
    plain = sampler(lengths, 1, 0, max_tokens=16, micro_batches=1, lookahead=1, shuffle=False)
    with pytest.raises(bcl.Error, match="pad_to_multiple_of"):
        plain.load_state_dict(state)
    with pytest.raises(bcl.Error, match=r"dataset index 2 has 9 tokens \(12 padded to a multiple "
                                        r"of 4\), above max_tokens \(10\)"):
        sampler(lengths, 1, 0, max_tokens=10, micro_batches=1, pad_to_multiple_of=4)


def test_a_short_tail_is_planned_with_the_window_before_it_not_padded():
    # A window holds 20 tokens: 6, 6, 4, 4 fill it, and the last record alone cannot give both
    # ranks a micro-batch; it joins the window, two micro-steps.
    lengths = [6, 6, 4, 4, 3]
    batches, samplers = all_ranks(lengths, 2, max_tokens=10, micro_batches=1, lookahead=1,
                                  shuffle=False)  # fmt: skip
    assert samplers[0].stats["padded"] == 0
    assert sorted(i for rank in batches for b in rank for i in b) == [0, 1, 2, 3, 4]
    check_epoch(batches, samplers, lengths, 10, 1, shuffle=False)


def test_no_epoch_is_padded_on_sharegpt():
    lengths = sharegpt_like(4000, 11)
    padded = []
    for epoch in range(40):
        s = sampler(lengths, 8, 0, micro_batches=2, lookahead=2)
        s.set_epoch(epoch)
        padded.append(s.stats["padded"])
    assert padded == [0] * 40


def test_every_rank_computes_the_same_plan_and_other_lengths_another():
    lengths = sharegpt_like(3000, 1)
    digests = {sampler(lengths, 8, rank).stats["digest"] for rank in range(8)}
    assert len(digests) == 1
    other = lengths.copy()
    other[:100] = other[:100] // 2 + 1
    assert sampler(other, 8, 0).stats["digest"] not in digests


def test_micro_steps_are_balanced_and_near_the_fewest_the_tokens_allow():
    # 8 ranks, T = 16384, 4 micro-batches a step: per micro-step the mean rank's cost is close
    # to the slowest rank's, and the plan uses few more micro-steps than the tokens need.
    lengths = sharegpt_like(8192, 2)
    batches, samplers = all_ranks(lengths, 8, max_tokens=16384, micro_batches=4)
    costs = lengths + lengths.astype(float) ** 2 / 24576
    mean = slowest = 0.0
    for step in zip(*batches):
        loads = [costs[b].sum() for b in step]
        mean += np.mean(loads)
        slowest += max(loads)
    assert mean / slowest > 0.99
    stats = samplers[0].stats
    assert stats["planned_efficiency"] == pytest.approx(mean / slowest, rel=1e-6)
    assert len(batches[0]) <= 1.03 * stats["micro_steps_bound"]


def test_len_depends_on_the_epoch_and_is_planned_once():
    lengths = np.random.default_rng(3).integers(4000, 16000, 400)  # 2-4 to a micro-batch
    s = sampler(lengths, 4, 1, micro_batches=1, lookahead=1)
    lengths_by_epoch = []
    for epoch in range(6):
        s.set_epoch(epoch)
        lengths_by_epoch.append(len(s))
        assert len(list(s)) == lengths_by_epoch[-1]
    assert len(set(lengths_by_epoch)) > 1  # the count follows the epoch's order
    s.set_epoch(2)
    planned = s._planned(2)
    assert len(s) == lengths_by_epoch[2] and s._planned(2) is planned  # cached


def test_the_optimizer_steps_every_m_micro_batches_and_after_the_last():
    lengths = sharegpt_like(1500, 4)
    s = sampler(lengths, 4, 2, micro_batches=3, lookahead=2)
    total, steps = len(s), s.stats["steps"]
    boundaries = [k for k in range(1, total + 1) if k % 3 == 0 or k == total]
    assert len(boundaries) == steps


@given(jobs(), st.data())
@settings(max_examples=40)
def test_a_restored_sampler_hands_out_exactly_the_rest_of_the_epoch(job, data):
    lengths, ranks, options, epoch = job
    rank = data.draw(st.integers(0, ranks - 1))

    def fresh():
        return sampler(lengths, ranks, rank, **options)

    def make():
        s = fresh()
        s.set_epoch(epoch)
        return s

    check_resume(make, fresh, data)


@pytest.mark.parametrize("workers", [0, 2])
def test_resume_at_every_micro_batch_under_a_dataloader_equals_the_uninterrupted_epoch(workers):
    lengths = sharegpt_like(300, 5)

    def make():
        return sampler(lengths, 2, 1, max_tokens=8192, micro_batches=2, lookahead=2, seed=5)

    def loader(s):
        return torch.utils.data.DataLoader(Indexed(len(lengths)), batch_sampler=s,
                                           num_workers=workers, collate_fn=list)  # fmt: skip

    expected = list(make())
    states = []
    first = make()
    for k, batch in enumerate(loader(first), start=1):
        assert batch == expected[k - 1]
        states.append(pickle.dumps(first.state_dict(consumed=k)))
    assert len(states) == len(expected)
    for k, state in enumerate(states, start=1):
        resumed = make()
        resumed.load_state_dict(pickle.loads(state))
        rest = list(loader(resumed)) if k in (1, len(states) // 2) else list(resumed)
        assert rest == expected[k:], k


# -- tampered states --------------------------------------------------------------------------

LENGTHS = sharegpt_like(240, 6, 4000)


def _make():
    return sampler(LENGTHS, 3, 1, max_tokens=6000, micro_batches=2, lookahead=2)


def _saved(stop):
    s = _make()
    it = iter(s)
    head = [next(it) for _ in range(stop)]
    return s.state_dict(), head


def _trial(state, head, tamper, reseal):
    bad = tamper(dict(state))
    if reseal and isinstance(bad, dict):
        bad = resealed(bad)
    target, refused = tampering.load(_make, bad)
    return refused or tampering.rest_of_its_epoch(_make, target)


def _settings(**changes):
    return lambda s: dict(s, settings=dict(s["settings"], **changes))


TAMPERS = {
    "position + 1": lambda s: dict(s, position=s["position"] + 1),
    "position - 1": lambda s: dict(s, position=max(s["position"] - 1, 0)),
    "position past the end": lambda s: dict(s, position=10**6),
    "position -1": lambda s: dict(s, position=-1),
    "position 1.0": lambda s: dict(s, position=1.0),
    "epoch + 1": lambda s: dict(s, epoch=s["epoch"] + 1),
    "digest": lambda s: dict(s, digest="0123456789abcdef"),
    "digest None": lambda s: dict(s, digest=None),
    "max_tokens": _settings(max_tokens=4096),
    "micro_batches": _settings(micro_batches=4),
    "multiple_of": _settings(multiple_of=2),
    "oversized": _settings(oversized="alone"),
    "lookahead": _settings(lookahead=1),
    "rank": _settings(rank=0),
    "dataset_size": _settings(dataset_size=241),
    "batch_size added": _settings(batch_size=4),
    "max_tokens as a float": _settings(max_tokens=6000.0),
    "no micro_batches": lambda s: dict(
        s, settings={k: v for k, v in s["settings"].items() if k != "micro_batches"}
    ),
    "format of fixed batches": lambda s: dict(s, format="bcl.DistributedBalancedBatchSampler/2"),
    "no checksum": lambda s: {k: v for k, v in s.items() if k != "checksum"},
    "a list": lambda s: list(s.items()),
}


def _group(stop):
    state, head = _saved(stop)
    return tampering.run_group(TAMPERS, lambda tamper, reseal: _trial(state, head, tamper, reseal))


def test_no_tampered_state_hangs_crashes_or_yields_a_wrong_epoch():
    stops = sorted({0, 1, 7, len(_make()) - 1, len(_make())})
    tampering.check_groups("token mode", _group, stops)


@settings(max_examples=30)
@given(st.integers(0, 30), st.data())
def test_random_edits_of_a_state_are_refused_or_exact(stop, data):
    state, head = _saved(min(stop, len(_make())))
    keys = sorted(state)
    tampering.check_random_edits(
        data, state, keys, lambda tamper, reseal: _trial(state, head, tamper, reseal)
    )


def test_a_state_of_other_lengths_or_of_fixed_batches_is_refused_naming_why():
    state, _ = _saved(5)
    other = LENGTHS.copy()
    other[::2] += 500
    target = sampler(other, 3, 1, max_tokens=6000, micro_batches=2, lookahead=2)
    before = list(target)
    with pytest.raises(bcl.Error, match="digest does not match"):
        target.load_state_dict(state)
    assert list(target) == before
    fixed = bcl.DistributedBalancedBatchSampler(np.ones(240), 4, 3, 1)
    with pytest.raises(bcl.Error, match="not a state of this sampler"):
        fixed.load_state_dict(state)
    with pytest.raises(bcl.Error, match="not a state of this sampler"):
        _make().load_state_dict(fixed.state_dict())


# -- bad input ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options, words",
    [
        (dict(batch_size=8), "batch_size is 8, but with max_tokens"),
        (dict(lengths=None), "max_tokens= needs lengths="),
        (dict(micro_batches=None), "max_tokens= needs micro_batches="),
        (dict(micro_batches=3, multiple_of=2),
         r"micro_batches is 3; it must be a positive multiple of multiple_of \(2\)"),
        (dict(micro_batches=0), "micro_batches is 0; it must be a positive multiple of"),
        (dict(max_tokens=0), r"max_tokens must be at least 1 \(got 0\)"),
        (dict(max_tokens=2**31 + 1), r"above 2\^31"),
        (dict(max_tokens=500), r"dataset index 1 has 900 tokens, above max_tokens \(500\); .* "
                               r"\(oversized='alone'\)"),
        (dict(lengths=[100, 900.0, 30, 40]), r"lengths\[1\] is 900.0, not an integer"),
        (dict(lengths=np.array([100, -9, 30, 40])), r"lengths\[1\] is -9, negative"),
        (dict(lengths=lambda i: 100), "must be whole tables"),
        (dict(costs=[1.0, 2.0, 3.0]), "costs has 3 entries but lengths has 4"),
        (dict(costs=[1.0, float("nan"), 3.0, 4.0]), r"costs\[1\] is nan"),
        (dict(drop_last=True), "drop_last=True is for batches of batch_size"),
        (dict(cap="p99"), "cap='p99' is for batches of batch_size"),
        (dict(batching="padded"), "batching='padded' is for batches"),
        (dict(oversized="drop"), "oversized must be 'error' or 'alone'"),
        (dict(padding="zeros"), "padding must be one of 'repeat', 'empty', 'error'"),
        (dict(padding=None), "padding must be one of"),
        (dict(pad_to_multiple_of=0), "pad_to_multiple_of is 0; it must be at least 1"),
        (dict(pad_to_multiple_of=-2),
         r"pad_to_multiple_of must be a non-negative integer \(got -2\)"),
        (dict(pad_to_multiple_of=1001),
         r"pad_to_multiple_of is 1001; it must be at least 1 and at most max_tokens \(1000\)"),
        (dict(num_replicas=5, rank=0), "4 dataset indices cannot give one to each of"),
        (dict(micro_batches=2**29, lookahead=2**2), "micro-batches in one plan window, above"),
    ],
)
def test_bad_arguments_are_errors_naming_them(options, words):
    arguments = dict(lengths=[100, 900, 30, 40], max_tokens=1000, micro_batches=1,
                     num_replicas=2, rank=0)  # fmt: skip
    arguments.update(options)
    with pytest.raises(bcl.Error, match=words):
        bcl.DistributedBalancedBatchSampler(**arguments)


@pytest.mark.parametrize(
    "options, words",
    [
        (dict(micro_batches=2), "micro_batches= is for token-budget micro-batches"),
        (dict(lengths=np.ones(10, dtype=int)), "lengths= is for token-budget micro-batches"),
        (dict(oversized="alone"), "oversized= is for token-budget"),
        (dict(padding="empty"), "padding= is for token-budget"),
        (dict(pad_to_multiple_of=2), "pad_to_multiple_of= is for token-budget"),
        (dict(batch_size=None), "batch_size is needed"),
        (dict(costs=None), "costs is needed"),
    ],
)
def test_token_arguments_without_max_tokens_are_refused(options, words):
    arguments = dict(costs=np.ones(10), batch_size=2, num_replicas=2, rank=0)
    arguments.update(options)
    with pytest.raises(bcl.Error, match=words):
        bcl.DistributedBalancedBatchSampler(**arguments)


@pytest.mark.parametrize(
    "table, bad, words",
    [("lengths", 5000, r"dataset index 41 has 5000 tokens, above max_tokens \(1000\)"),
     ("costs", -1.0, r"costs\[41\] is -1; it must be >= 0")],
)  # fmt: skip
def test_a_table_entry_edited_after_construction_is_an_error_naming_its_dataset_index(
    table, bad, words
):
    # The sampler reads a uint64 lengths table and a float64 costs table by reference (a
    # memory-mapped table is not copied), so an edit after construction skips the construction's
    # checks; the epoch's plan then fails, and the error names the entry's dataset index, not
    # its position in the plan window.
    n = 64
    tables = dict(lengths=np.full(n, 100, dtype=np.uint64), costs=np.ones(n))
    s = sampler(tables["lengths"], 2, 0, max_tokens=1000, costs=tables["costs"], lookahead=2,
                seed=3)  # fmt: skip
    order = epoch_order(n, 0, seed=3)
    assert order.index(41) != 41  # the position of index 41 in the epoch is another number
    tables[table][41] = bad
    with pytest.raises(bcl.Error, match=words) as e:
        list(s)
    assert not re.search(r"record \d", str(e.value))  # no position in a window
    assert "edited after it was built" in str(e.value)
    tables[table][41] = tables[table][0]  # put back: the epoch plans as a new sampler's
    fresh = sampler(tables["lengths"].copy(), 2, 0, max_tokens=1000, costs=tables["costs"].copy(),
                    lookahead=2, seed=3)  # fmt: skip
    assert list(s) == list(fresh)


def test_lengths_above_the_budget_are_micro_batches_of_their_own_when_allowed():
    lengths = sharegpt_like(500, 7)
    lengths[[3, 77, 300]] = [20000, 50000, 16385]
    batches, samplers = all_ranks(lengths, 4, max_tokens=16384, oversized="alone")
    check_epoch(batches, samplers, lengths, 16384, 2, alone=True)
    assert samplers[0].stats["oversized"] == 3
    with pytest.raises(bcl.Error, match=r"dataset index 3 has 20000 tokens, above max_tokens"):
        sampler(lengths, 4, 0)
