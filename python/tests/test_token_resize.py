"""Token mode over the keyed order, window by window: the micro-batches are those of the whole
epoch's token plan over the same order; len() is exact; the tables are read in place (memory
maps, any integer dtype, tensors), checked once naming the dataset index; a state saved at R
ranks at a step boundary loads at R' ranks and the epoch goes on with every index exactly once,
as many micro-batches on every new rank, any saving rank's state serving every new rank; chains
of resizes; DataLoader workers' ``consumed=``; a state within a step resumes at its own size and
is refused at another, naming the step boundary; states of another table, seed or option are
refused, changing nothing."""

import collections
import pickle

import numpy as np
import pytest

import bcl
from bcl import _core

M = 2  # micro-batches a step


def token_lengths(n, seed, t=1000):
    rng = np.random.default_rng(seed)
    kind = rng.integers(0, 10, n)
    short = rng.integers(0, t // 4 + 1, n)
    long = rng.integers(t // 2, t, n)
    return np.where(kind == 0, t, np.where(kind < 3, long, short)).astype(np.uint32)


def sampler(lengths, ranks, rank, k=2, **options):
    options.setdefault("order", "keyed")
    options.setdefault("padding", "empty")
    return bcl.DistributedBalancedBatchSampler(
        options.pop("costs", None), None, ranks, rank, lookahead=k, check_digest=False,
        max_tokens=1000, micro_batches=M, lengths=lengths, **options,
    )  # fmt: skip


def run(samplers, steps):
    """`steps` steps (M micro-batches each) of every rank, fewer where the epoch ends (the
    iterators not run past it: a state after an iterator's end is the next epoch's)."""
    taken = []
    iterators = [iter(s) for s in samplers]
    for s, it in zip(samplers, iterators):
        for _ in range(min(steps * M, len(s))):
            taken += next(it)
    return taken, iterators


def check_once(n, taken):
    counts = collections.Counter(taken)
    assert set(counts) == set(range(n)), "every index of the epoch comes out"
    assert all(c == 1 for c in counts.values()), "and once"


@pytest.mark.parametrize("with_costs", [False, True])
def test_the_micro_batches_are_the_whole_epochs_plan_over_the_keyed_order(with_costs):
    n, ranks = 900, 3
    lengths = token_lengths(n, 1)
    costs = np.random.default_rng(2).random(n) * 50 if with_costs else None
    order = _core.keyed_order(n, 0, 4, 0, n)
    budget = _core.token_budget(ranks, 1000, 1)
    for rank in range(ranks):
        s = sampler(lengths, ranks, rank, costs=costs)
        s.set_epoch(4)
        whole = _core.token_epoch(
            lengths.astype(np.uint64), costs, order, budget, M, 2, rank, False, "empty", 1
        )
        expected = [whole.batch(i) for i in range(whole.batches)]
        assert len(s) == whole.batches  # exact, from a walk that keeps nothing
        assert list(s) == expected
        assert s.stats["batches"] == whole.batches
        assert s.stats["planned_efficiency"] == pytest.approx(whole.stats()["planned_efficiency"])


SIZES = [(4, 1), (4, 3), (4, 5), (4, 8), (4, 2), (4, 7), (3, 3), (1, 4)]


@pytest.mark.parametrize("ranks, new_ranks", SIZES)
def test_an_epoch_goes_on_at_another_size_with_every_index_once(ranks, new_ranks):
    n = 400
    lengths = token_lengths(n, ranks + new_ranks)
    steps_in_epoch = -(-len(sampler(lengths, ranks, 0)) // M)
    for steps in range(steps_in_epoch + 1):  # every step boundary, the epoch's end too
        old = [sampler(lengths, ranks, r) for r in range(ranks)]
        taken, _ = run(old, steps)
        state = old[steps % ranks].state_dict()  # any saving rank's state serves every new rank
        new = [sampler(lengths, new_ranks, r) for r in range(new_ranks)]
        for s in new:
            s.load_state_dict(state)
        counts = {len(s) for s in new}
        rests = [list(s) for s in new]
        assert len(counts) == 1 and len({len(r) for r in rests}) == 1  # equal counts
        if new_ranks != ranks:  # the rest is an epoch of its own: len() counts it
            assert {len(r) for r in rests} == counts
        assert all(sum(int(lengths[i]) for i in b) <= 1000 for r in rests for b in r)
        check_once(n, taken + [i for r in rests for b in r for i in b])


def test_with_repeat_padding_the_new_size_repeats_only_to_fill():
    n = 301
    lengths = np.full(n, 1000, dtype=np.uint16)  # one record a micro-batch: 301 on 4, then 3
    old = [sampler(lengths, 4, r, padding="repeat") for r in range(4)]
    taken, _ = run(old, 10)
    new = [sampler(lengths, 3, r, padding="repeat") for r in range(3)]
    for s in new:
        s.load_state_dict(old[0].state_dict())
    rests = [list(s) for s in new]
    assert len({len(r) for r in rests}) == 1
    counts = collections.Counter(taken + [i for r in rests for b in r for i in b])
    assert set(counts) == set(range(n))
    assert sum(c - 1 for c in counts.values()) < 3 * M  # fewer than one more step


@pytest.mark.parametrize("sizes", [(4, 3, 5), (2, 7, 2), (8, 1, 3)])
def test_chains_of_resizes_within_one_epoch(sizes):
    n = 1500
    lengths = token_lengths(n, 9)
    taken, current = [], [sampler(lengths, sizes[0], r) for r in range(sizes[0])]
    for new_ranks in sizes[1:] + (None,):
        got, iterators = run(current, 5)
        taken += got
        if new_ranks is None:
            for it in iterators:
                taken += [i for b in it for i in b]  # the rest of the pass
            break
        state = current[-1].state_dict()
        assert len(pickle.dumps(state)) < 4096  # a bitmap of about a window, never a list
        current = [sampler(lengths, new_ranks, r) for r in range(new_ranks)]
        for s in current:
            s.load_state_dict(state)
    check_once(n, taken)


def test_a_state_within_a_step_resumes_at_its_size_and_is_refused_at_another():
    n = 600
    lengths = token_lengths(n, 3)
    old = sampler(lengths, 4, 1)
    it = iter(old)
    for _ in range(2 * M + 1):  # a micro-batch into the third step
        next(it)
    state = old.state_dict()
    same = sampler(lengths, 4, 1)
    same.load_state_dict(state)
    assert list(same) == list(sampler(lengths, 4, 1))[2 * M + 1 :]
    other = sampler(lengths, 3, 0)
    before = other.state_dict()
    with pytest.raises(bcl.Error, match=r"within a step .*save it after the optimizer step"):
        other.load_state_dict(state)
    assert other.state_dict() == before
    assert len(list(other)) == len(sampler(lengths, 3, 0))


def test_a_state_deep_in_the_epoch_is_small_and_resumes_exactly():
    n = 3000
    lengths = token_lengths(n, 5)
    old = sampler(lengths, 2, 0)
    it = iter(old)
    for _ in range(101):
        next(it)
    state = old.state_dict()
    assert state["position"] < 101  # the window's start is the state's, not the epoch's
    assert len(pickle.dumps(state)) < 4096
    again = sampler(lengths, 2, 0)
    again.load_state_dict(state)
    assert list(again) == list(it)


def test_workers_consumed_count_is_the_step_boundary():
    n = 600
    lengths = token_lengths(n, 4)
    old = [sampler(lengths, 2, r) for r in range(2)]
    taken, iterators = run(old, 6)
    for it in iterators:  # read ahead, not trained
        for _ in range(3):
            next(it)
    state = old[0].state_dict(consumed=6 * M)
    new = [sampler(lengths, 5, r) for r in range(5)]
    for s in new:
        s.load_state_dict(state)
    check_once(n, taken + [i for s in new for b in s for i in b])


def test_a_state_of_another_table_seed_or_option_is_refused_changing_nothing():
    n = 500
    lengths = token_lengths(n, 5)
    old = sampler(lengths, 4, 1)
    it = iter(old)
    for _ in range(M):
        next(it)
    state = old.state_dict()
    other = lengths.copy()
    other[3] += 1
    cases = [
        (sampler(other, 2, 0), r"digest does not match"),
        (sampler(lengths, 2, 0, seed=7), r"seed=0, but this sampler has seed=7"),
        (sampler(lengths, 2, 0, padding="repeat"), r"padding"),
        (sampler(lengths, 2, 0, order="randperm"), r"order"),
        (sampler(lengths, 2, 0, costs=np.ones(n)), r"digest does not match"),
    ]
    for s, match in cases:
        before = s.state_dict()
        with pytest.raises(bcl.Error, match=match):
            s.load_state_dict(state)
        assert s.state_dict() == before


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.uint32, np.int64, np.uint64])
def test_lengths_of_any_integer_dtype_memory_mapped_plan_the_same(tmp_path, dtype):
    n = 700
    lengths = token_lengths(n, 6, t=250)
    path = tmp_path / "lengths.npy"
    np.save(path, lengths.astype(dtype))
    mapped = np.load(path, mmap_mode="r")
    a = bcl.DistributedBalancedBatchSampler(None, None, 3, 2, max_tokens=250, micro_batches=M,
                                            lengths=mapped, order="keyed", check_digest=False)
    b = bcl.DistributedBalancedBatchSampler(None, None, 3, 2, max_tokens=250, micro_batches=M,
                                            lengths=list(map(int, lengths)), order="keyed",
                                            check_digest=False)
    assert list(a) == list(b)


def test_lengths_as_a_tensor_are_read_in_place():
    torch = pytest.importorskip("torch")
    lengths = torch.from_numpy(token_lengths(400, 7).astype(np.int32))
    a = sampler(lengths, 2, 0)
    b = sampler(lengths.numpy().astype(np.uint64), 2, 0)
    assert list(a) == list(b)


@pytest.mark.parametrize(
    "lengths, costs, match",
    [
        (np.array([5, 3, -1, 4] * 10, dtype=np.int32), None, r"lengths\[2\]"),
        (np.array([5.0, 3.0] * 20), None, r"lengths must hold integers"),
        (np.array([True, False] * 20), None, r"lengths must hold integers"),
        (np.array([1 + 2j] * 40), None, r"lengths must hold integers"),
        (np.array([object()] * 40), None, r"lengths"),
        (np.array([5, 3, 1001, 4] * 10), None, r"dataset index 2 .*oversized='alone'"),
        (np.full(40, 5), np.ones(39), r"costs has 39 entries but lengths has 40"),
        (np.full(40, 5), np.array([1.0, np.nan] * 20), r"costs\[1\]"),
        (np.full(40, 5), np.array([1.0, -1.0] * 20), r"costs\[1\]"),
        (np.full(40, 5), np.array([1 + 1j] * 40), r"costs must hold real numbers"),
    ],
)
def test_bad_tables_are_refused_at_construction_naming_the_entry(lengths, costs, match):
    with pytest.raises(bcl.Error, match=match):
        sampler(lengths, 2, 0, costs=costs)


def test_cpu_tensors_and_arrays_are_read_in_place_without_a_copy():
    torch = pytest.importorskip("torch")
    from bcl import _inputs

    for tensor in (torch.arange(50, dtype=torch.float32), torch.arange(50, dtype=torch.int64)):
        kept = _inputs.table_in_place("costs", tensor)
        assert np.shares_memory(kept, tensor.numpy())
    lengths = torch.arange(50, dtype=torch.int32)
    assert np.shares_memory(_inputs.counts_in_place("lengths", lengths), lengths.numpy())
    mapped = np.arange(50, dtype=np.uint16)
    assert _inputs.counts_in_place("lengths", mapped) is mapped
    # bfloat16 has no numpy dtype: widened, a copy.
    widened = _inputs.table_in_place("costs", torch.ones(5, dtype=torch.bfloat16))
    assert widened.dtype == np.float64
