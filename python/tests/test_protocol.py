"""The samplers' protocol, the same for both samplers (and the distributed one's token mode):
each iterator is a pass of its own, a state describes the iterator started last and says when
its epoch is finished, a copy (pickle, deepcopy) continues where the sampler stood, and every
input (epoch, seed, cap, costs, shape) is checked where it enters, by one rule and in the user's
words."""

import copy
import os
import pickle
import tempfile

import numpy as np
import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.utils.data import DataLoader, Dataset, DistributedSampler

import bcl

import forked
import tampering
from conftest import resealed, sequence_costs

N, B = 203, 4  # not a multiple of B: the epoch ends with a short batch


def rank_local(**options):
    inner = DistributedSampler(range(N), num_replicas=2, rank=1, shuffle=True, seed=3)
    return bcl.BalancedBatchSampler(inner, sequence_costs(N, 7), B, lookahead=3, **options)


def distributed(**options):
    return bcl.DistributedBalancedBatchSampler(sequence_costs(N, 7), B, 2, 1, lookahead=3,
                                               **options)  # fmt: skip


def token_mode(**options):
    lengths = np.random.default_rng(7).integers(1, 1000, N)
    return bcl.DistributedBalancedBatchSampler(num_replicas=2, rank=1, lookahead=3,
                                               lengths=lengths, max_tokens=1200, micro_batches=2,
                                               **options)  # fmt: skip


SAMPLERS = {
    "BalancedBatchSampler": rank_local, "DistributedBalancedBatchSampler": distributed,
    "DistributedBalancedBatchSampler, token mode": token_mode,
}  # fmt: skip
# The samplers that take a cap (token mode plans every record at its own cost).
CAPPED = [rank_local, distributed]


@pytest.fixture(params=list(SAMPLERS))
def make(request):
    return SAMPLERS[request.param]


def epoch_of(make, epoch):
    s = make()
    s.set_epoch(epoch)
    return list(s)


class Indexed(Dataset):
    def __len__(self):
        return N

    def __getitem__(self, i):
        return i


def loader(sampler, workers):
    return DataLoader(Indexed(), batch_sampler=sampler, num_workers=workers, collate_fn=list)


# -- iterators -------------------------------------------------------------------------------------


def test_two_live_iterators_each_get_the_whole_epoch(make):
    expected = epoch_of(make, 0)
    s = make()
    s.set_epoch(0)
    first, second = iter(s), iter(s)
    pairs = list(zip(first, second))
    assert [a for a, _ in pairs] == expected and [b for _, b in pairs] == expected


def test_zip_of_a_loader_with_itself_gives_each_the_whole_epoch(make):
    expected = epoch_of(make, 0)
    s = make()
    data = loader(s, 0)
    assert [(a, b) for a, b in zip(data, data)] == list(zip(expected, expected))


def test_a_state_describes_the_iterator_started_last(make):
    expected = epoch_of(make, 0)
    s = make()
    s.set_epoch(0)
    older = iter(s)
    for _ in range(9):
        next(older)
    newer = iter(s)
    for _ in range(4):
        next(newer)
    state = pickle.loads(pickle.dumps(s.state_dict()))
    resumed = make()
    resumed.load_state_dict(state)
    assert list(resumed) == expected[4:]
    assert list(older) == expected[9:] and list(newer) == expected[4:]  # neither disturbed


# -- the epoch's last checkpoint -------------------------------------------------------------------


@pytest.mark.parametrize("workers", [0, 2])
def test_a_state_after_the_epochs_last_batch_says_the_epoch_is_finished(make, workers):
    # A loader with workers has already ended the sampler's iterator when the loop takes the last
    # batch; the state must not depend on it.
    s = make()
    s.set_epoch(3)
    state = None
    for taken, _ in enumerate(loader(s, workers), start=1):
        if taken == len(s):  # the checkpoint after the loop's last step, inside the loop
            state = pickle.loads(pickle.dumps(s.state_dict(consumed=taken)))
    resumed = make()
    resumed.load_state_dict(state)
    resumed.set_epoch(3)  # the loop resumes at the state's epoch ...
    assert list(resumed) == []  # ... which owes nothing more,
    resumed.set_epoch(4)
    assert list(resumed) == epoch_of(make, 4)  # and the next epoch is whole


def test_the_finished_state_is_the_same_with_and_without_workers(make):
    states = []
    for workers in (0, 2):
        s = make()
        s.set_epoch(1)
        for taken, _ in enumerate(loader(s, workers), start=1):
            if taken == len(s):
                states.append(s.state_dict(consumed=taken))
    assert len(states) == 2 and states[0] == states[1]


def test_a_finished_epoch_gives_way_to_the_epoch_set_after_loading_it(make):
    s = make()
    s.set_epoch(2)
    it = iter(s)
    for _ in range(len(s)):
        next(it)
    resumed = make()
    resumed.load_state_dict(s.state_dict())
    resumed.set_epoch(3)
    assert list(resumed) == epoch_of(make, 3)


def test_a_state_taken_after_the_loop_over_an_epoch_starts_the_next_pass(make):
    # No count given and the iterator ended: the loop is over; the next pass is whole.
    s = make()
    s.set_epoch(2)
    list(s)
    resumed = make()
    resumed.load_state_dict(s.state_dict())
    assert list(resumed) == epoch_of(make, 2)


def test_a_state_mid_epoch_is_resumed_whatever_set_epoch_says(make):
    expected = epoch_of(make, 2)
    s = make()
    s.set_epoch(2)
    it = iter(s)
    for _ in range(7):
        next(it)
    resumed = make()
    resumed.load_state_dict(s.state_dict())
    resumed.set_epoch(5)
    assert list(resumed) == expected[7:]


def test_a_numpy_array_in_a_state_field_is_a_bcl_error_that_changes_nothing(make):
    s = make()
    it = iter(s)
    for _ in range(3):
        next(it)
    state = s.state_dict()
    target = make()
    next(iter(target))
    before = target.state_dict()
    for what, edited in tampering.numpy_edits(state):
        with pytest.raises(bcl.Error):
            target.load_state_dict(edited)
        assert target.state_dict()["checksum"] == before["checksum"], what


# -- copies ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
@pytest.mark.parametrize("stop", [0, 1, 9, "end"])
def test_a_copy_continues_where_the_sampler_stood(make, how, stop):
    expected = epoch_of(make, 1)
    s = make()
    s.set_epoch(1)
    it = iter(s)
    head = list(it) if stop == "end" else [next(it) for _ in range(stop)]
    twin = pickle.loads(pickle.dumps(s)) if how == "pickle" else copy.deepcopy(s)
    if stop == "end":
        twin.set_epoch(2)
        assert list(twin) == epoch_of(make, 2)
    else:
        assert head + list(twin) == expected
        assert head + list(it) == expected  # the original is not disturbed


def test_a_copy_of_a_rank_local_sampler_needs_no_repeat_of_its_inner_samplers_order():
    # A RandomSampler without a generator draws another order every pass: the copy carries the
    # epoch's indices instead of asking for them again.
    s = bcl.BalancedBatchSampler(torch.utils.data.RandomSampler(range(N)), sequence_costs(N), B)
    it = iter(s)
    head = [next(it) for _ in range(5)]
    twin = pickle.loads(pickle.dumps(s))
    assert head + list(twin) == head + list(it)


def test_costs_with_a_callable_copy_if_the_callable_does():
    costs = sequence_costs(N).tolist()
    s = bcl.BalancedBatchSampler(list(range(N)), costs.__getitem__, B)  # a bound method pickles
    assert list(pickle.loads(pickle.dumps(s))) == list(s)
    unpicklable = bcl.BalancedBatchSampler(list(range(N)), lambda i: costs[i], B)
    with pytest.raises((pickle.PicklingError, AttributeError)):
        pickle.dumps(unpicklable)


# -- one rule for every input, checked where it enters ---------------------------------------------


@pytest.mark.parametrize("epoch", [-1, 2**63, 1.0, True])
def test_an_epoch_outside_0_to_2_63_is_refused_by_set_epoch(make, epoch):
    s = make()
    with pytest.raises(bcl.Error, match="epoch must be an integer"):
        s.set_epoch(epoch)


def test_the_largest_epoch_and_seed_round_trip_through_a_state(make):
    s = make(seed=2**63 - 1)
    s.set_epoch(2**63 - 1)
    it = iter(s)
    head = [next(it) for _ in range(3)]
    resumed = make(seed=2**63 - 1)
    resumed.load_state_dict(s.state_dict())
    assert head + list(resumed) == head + list(it)


@pytest.mark.parametrize("seed", [-1, 2**63, 2**64 - 1])
def test_a_seed_outside_0_to_2_63_is_refused_at_construction(make, seed):
    with pytest.raises(bcl.Error, match=r"seed must be an integer in \[0, 2\^63\)"):
        make(seed=seed)


@pytest.mark.parametrize("make", CAPPED)
@pytest.mark.parametrize("cap", ["p0", "p100", "p99999", "p100.0"])
def test_a_quantile_cap_outside_p0_to_p100_is_refused_alike_everywhere(make, cap):
    with pytest.raises(bcl.Error, match=r"cap.quantile must be in \(0, 1\)"):
        make(cap=cap)
    with pytest.raises(bcl.Error, match=r"cap.quantile must be in \(0, 1\)"):
        bcl.plan_batches(np.ones(8), 2, 2, cap=cap)


@pytest.mark.parametrize("make", CAPPED)
@pytest.mark.parametrize("cap", [0.0, -1.0, float("inf"), float("nan")])
def test_a_fixed_cap_must_be_finite_and_positive_everywhere(make, cap):
    with pytest.raises(bcl.Error, match="cap.value must be finite and > 0"):
        make(cap=cap)
    with pytest.raises(bcl.Error, match="cap.value must be finite and > 0"):
        bcl.plan_batches(np.ones(8), 2, 2, cap=cap)


def test_a_quantile_cap_that_is_0_in_the_table_is_refused_not_taken_for_no_cap():
    costs = np.where(np.arange(100) < 60, 0.0, 5.0)  # the median cost is 0
    with pytest.raises(bcl.Error, match="cap='p50' is 0 for these costs"):
        bcl.DistributedBalancedBatchSampler(costs, 4, 2, 0, cap="p50")
    with pytest.raises(bcl.Error, match="cap='p50' is 0 for these costs"):
        bcl.plan_batches(costs, 2, 4, cap="p50")
    bcl.DistributedBalancedBatchSampler(costs, 4, 2, 0, cap="p70")  # 5.0: a cap


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.int32, torch.uint8])
def test_costs_of_any_real_tensor_dtype_are_taken_exactly(dtype):
    costs = torch.arange(1, 41).to(dtype)
    exact = costs.double().numpy()
    assert bcl.plan_batches(costs, 2, 4) == bcl.plan_batches(exact, 2, 4)
    a = bcl.DistributedBalancedBatchSampler(costs, 4, 2, 0)
    assert list(a) == list(bcl.DistributedBalancedBatchSampler(exact, 4, 2, 0))
    b = bcl.BalancedBatchSampler(range(40), costs, 4)
    assert list(b) == list(bcl.BalancedBatchSampler(range(40), exact, 4))


@pytest.mark.parametrize(
    "costs, words",
    [
        (torch.ones(40).to_sparse(), "is a torch.sparse_coo tensor; pass costs.to_dense()"),
        (torch.quantize_per_tensor(torch.ones(40), 0.1, 0, torch.quint8),
         "a quantized tensor; pass costs.dequantize()"),
        (torch.ones(40, dtype=torch.complex64), "a tensor of torch.complex64"),
        (torch.ones(40, dtype=torch.bool), "a tensor of torch.bool"),
        (torch.ones(40, device="meta"), "cannot be read as numbers"),
    ],
)  # fmt: skip
def test_costs_that_are_not_plain_real_tensors_are_bcl_errors_everywhere(costs, words):
    for build in (
        lambda: bcl.DistributedBalancedBatchSampler(costs, 4, 2, 0),
        lambda: bcl.BalancedBatchSampler(range(40), costs, 4),
        lambda: bcl.plan_batches(costs, 2, 4),
    ):
        with pytest.raises(bcl.Error, match=words):
            build()


@pytest.mark.parametrize(
    "options, words",
    [
        (dict(batch_size=2**27), r"num_replicas \* lookahead \* batch_size = 2 \* 8 \* 134217728"),
        (dict(num_replicas=2**40, rank=0), "above the 1073741824 a window may hold"),
        (dict(num_replicas=2**20, rank=0, lookahead=2**11), "lower lookahead or batch_size"),
    ],
)
def test_a_shape_too_large_for_a_plan_is_refused_at_construction_in_the_users_words(options,
                                                                                    words):
    arguments = dict(costs=np.ones(100), batch_size=4, num_replicas=2, rank=0)
    arguments.update(options)
    with pytest.raises(bcl.Error, match=words):
        bcl.DistributedBalancedBatchSampler(**arguments)


# -- every field of a state covered and strictly typed ---------------------------------------------


@pytest.mark.parametrize(
    "key, value",
    [("rank", 1.0), ("shuffle", 1), ("seed", np.array([11, 11])), ("drop_last", "False"),
     ("cap", 0), ("batching", 0), ("num_replicas", np.float64(2.0))],
)  # fmt: skip
def test_every_setting_of_a_state_is_covered_by_its_checksum_and_strictly_typed(key, value):
    s = distributed()
    it = iter(s)
    next(it)
    state = s.state_dict()
    edited = dict(state, settings=dict(state["settings"], **{key: value}))
    for attempt in (edited, resealed(edited)):  # the checksum, then the typed reading behind it
        target, untouched = distributed(), distributed()
        with pytest.raises(bcl.Error, match=f"settings.{key}|checksum does not match"):
            target.load_state_dict(attempt)
        assert list(target) == list(untouched)


def test_an_unknown_setting_is_refused_naming_it():
    state = distributed().state_dict()
    edited = resealed(state, settings=dict(state["settings"], extra=1))
    with pytest.raises(bcl.Error, match="unknown field 'settings.extra'"):
        distributed().load_state_dict(edited)


# -- the digest check's process group --------------------------------------------------------------


def _subgroup_job(rank, world, store, results):
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    group = dist.new_group([0, 1])  # the data-parallel group: ranks 0 and 1 of 3
    costs = sequence_costs(400, 9)
    outcome = {}
    if rank < 2:
        try:
            bcl.DistributedBalancedBatchSampler(costs, 4, num_replicas=2, rank=rank)
            outcome["world"] = "built"
        except bcl.Error as e:
            outcome["world"] = str(e)
        s = bcl.DistributedBalancedBatchSampler(costs, 4, process_group=group)
        outcome["group"] = (s.num_replicas, s.rank, len(list(s)))
        twin = copy.deepcopy(s)
        outcome["deepcopy"] = len(list(twin))
    results[rank] = outcome
    dist.barrier()
    dist.destroy_process_group()


def test_the_digest_check_runs_on_the_data_parallel_group_and_never_waits_for_other_ranks():
    def job():
        with tempfile.TemporaryDirectory() as tmp:
            results = mp.Manager().dict()
            mp.spawn(_subgroup_job, args=(3, os.path.join(tmp, "store"), results), nprocs=3,
                     join=True)  # fmt: skip
            return dict(results)

    outcome = forked.run(job, timeout=120.0)
    assert outcome[0] == "ok", outcome  # no hang
    results = outcome[1]
    for rank in (0, 1):
        assert "pass process_group=" in results[rank]["world"]
        assert results[rank]["group"] == (2, rank, 50)
        assert results[rank]["deepcopy"] == 50
    assert results[2] == {}
