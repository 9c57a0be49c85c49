"""bcl.BalancedBatchSampler over a table of stage costs (shape (N, D), D >= 2): the rank-local
bcl::stage_balancer over each epoch's indices. Exactly B indices a batch but a short last one,
ceil(N/B) batches (floor with drop_last), every index of the epoch once, under either policy and on
adversarial tables; every stage's batches vary less than in the inner sampler's order; the same
batches every run; states save at any point and resume exactly, copies continue, and a state whose
indices, costs, D or fields do not match is an error that leaves the sampler as it was; the options
that bound or aim one cost are refused by name, and bad tables name the record and the stage."""

import collections
import copy
import pickle

import numpy as np
import pytest

import bcl
from bcl._stage_sampler import StageBalancedBatchSampler as StageLocal
from bcl._state import checksum

from test_stages import vision_language


def tables(n, seed):
    """Stage tables a balancer must survive: a vision-language mix, all equal, zeros, one giant
    outlier, huge finite values, sorted, and three stages."""
    rng = np.random.default_rng(seed)
    mix = vision_language(n, seed)
    giant = np.ones((n, 2))
    giant[rng.integers(n), 0] = 1e9
    return {
        "mix": mix,
        "equal": np.full((n, 2), 3.0),
        "zeros": np.zeros((n, 2)),
        "giant": giant,
        "huge": rng.random((n, 2)) * 1e118,
        "sorted": np.sort(mix, axis=0),
        "three": np.abs(rng.standard_normal((n, 3))) * [1.0, 10.0, 100.0],
    }


def check_contract(batches, indices, b, drop_last):
    n = len(indices)
    assert len(batches) == (n // b if drop_last else -(-n // b))
    assert all(len(x) == b for x in batches[:-1])
    if batches:
        assert len(batches[-1]) == (b if drop_last or n % b == 0 else n % b)
    out = collections.Counter(i for x in batches for i in x)
    assert all(c == 1 for c in out.values())
    kept = set(out)
    assert kept <= set(indices)
    assert len(kept) == (n - n % b if drop_last else n)


@pytest.mark.parametrize("policy", ["sliding", "tumbling"])
@pytest.mark.parametrize("n, b, k, drop_last", [
    (0, 4, 2, False), (1, 4, 2, False), (37, 4, 3, False), (37, 4, 3, True), (500, 16, 8, False),
    (129, 1, 5, True),
])  # fmt: skip
@pytest.mark.parametrize("kind", ["mix", "equal", "zeros", "giant", "huge", "sorted", "three"])
def test_exact_batches_every_index_once_the_same_every_run(policy, n, b, k, drop_last, kind):
    table = tables(max(n, 1), n + b)[kind][:n] if n else np.zeros((0, 2))
    order = np.random.default_rng(n).permutation(n).tolist()

    def batches():
        s = bcl.BalancedBatchSampler(order, table, b, lookahead=k, policy=policy,
                                     drop_last=drop_last)  # fmt: skip
        assert len(s) == (n // b if drop_last else -(-n // b))
        return list(s)

    first = batches()
    check_contract(first, order, b, drop_last)
    assert batches() == first


@pytest.mark.parametrize("policy, share", [("sliding", 0.5), ("tumbling", 0.7)])
def test_every_stage_of_a_vision_language_mix_varies_less_than_in_the_inner_order(policy, share):
    n, b = 16384, 16
    table = vision_language(n, 11)
    s = bcl.BalancedBatchSampler(range(n), table, b, policy=policy)
    batches = list(s)
    balanced = np.array([table[x].sum(axis=0) for x in batches])
    in_order = table.reshape(n // b, b, 2).sum(axis=1)
    cv = balanced.std(axis=0) / balanced.mean(axis=0)
    cv_order = in_order.std(axis=0) / in_order.mean(axis=0)
    assert cv[0] < 0.95 * cv_order[0]  # the encoder: its dearest videos no split can spread
    assert cv[1] < share * cv_order[1]  # the language model levels
    stats = s.stats
    assert stats["records_out"] == n and len(stats["stage_batch_cost"]) == 2
    assert stats["stage_batch_cost"][1]["cv"] == pytest.approx(cv[1], rel=1e-6)
    assert s.mean_cost == pytest.approx(table.mean(axis=0).tolist())
    assert s.stages == 2


@pytest.mark.parametrize("policy", ["sliding", "tumbling"])
def test_a_state_saved_at_any_point_resumes_exactly_and_copies_continue(policy):
    n, b = 300, 8
    table = vision_language(n, 3)
    order = np.random.default_rng(5).permutation(n).tolist()
    s = bcl.BalancedBatchSampler(order, table, b, lookahead=4, policy=policy)
    whole = list(s)
    for taken in range(len(whole) + 1):
        it = iter(s)
        head = [next(it) for _ in range(taken)]
        state = s.state_dict()
        restored = bcl.BalancedBatchSampler(order, table, b, lookahead=4, policy=policy)
        restored.load_state_dict(pickle.loads(pickle.dumps(state)))
        assert head + list(restored) == whole
        assert list(pickle.loads(pickle.dumps(s))) == whole[taken:]
        assert list(copy.deepcopy(s)) == whole[taken:]
    # A prefetching loader's count: the state as of the batches the loop took.
    it = iter(s)
    ahead = [next(it) for _ in range(10)]
    restored = bcl.BalancedBatchSampler(order, table, b, lookahead=4, policy=policy)
    restored.load_state_dict(s.state_dict(consumed=6))
    assert ahead[:6] + list(restored) == whole


def test_epochs_of_a_distributed_sampler_resume_on_their_own_epoch():
    torch_data = pytest.importorskip("torch.utils.data")
    n, b = 400, 8
    table = vision_language(n, 6)
    inner = torch_data.DistributedSampler(range(n), num_replicas=2, rank=1, seed=3)
    s = bcl.BalancedBatchSampler(inner, table, b)
    s.set_epoch(4)
    epoch4 = list(s)
    s.set_epoch(5)
    it = iter(s)
    head = [next(it) for _ in range(3)]
    state = s.state_dict()
    other = bcl.BalancedBatchSampler(
        torch_data.DistributedSampler(range(n), num_replicas=2, rank=1, seed=3), table, b
    )
    other.load_state_dict(state)
    rest = list(other)
    s.set_epoch(5)
    assert head + rest == list(s) != epoch4
    check_contract(head + rest, list(inner), b, False)


def tampered(state, **fields):
    """`state` with `fields` changed and its checksum made good again: only the checks behind the
    checksum can refuse it."""
    bad = dict(state, **fields)
    keys = StageLocal._checked_fields + tuple(k for k in StageLocal._optional_fields if k in bad)
    bad["checksum"] = checksum(bad, keys)
    return bad


def test_a_state_that_does_not_match_is_an_error_and_changes_nothing():
    n, b = 200, 8
    table = vision_language(n, 7)
    s = bcl.BalancedBatchSampler(range(n), table, b)
    it = iter(s)
    [next(it) for _ in range(5)]
    state = s.state_dict()
    fresh = bcl.BalancedBatchSampler(range(n), table, b)
    whole = list(bcl.BalancedBatchSampler(range(n), table, b))
    cases = [
        (bcl.BalancedBatchSampler(range(n), table * [1.0, 1.01], b), state,
         "stage costs of this epoch's indices are not the ones"),
        (bcl.BalancedBatchSampler(range(n), np.hstack([table, table[:, :1]]), b), state,
         "stages"),
        (bcl.BalancedBatchSampler(range(n - 8), table, b), state, "other indices"),
        (fresh, tampered(state, position=10**6), "past the epoch's"),
        (fresh, tampered(state, running=False), "holds a running epoch's"),
        (fresh, tampered(state, finished=True), "running says the epoch is under way"),
        (fresh, dict(state, position=6), "checksum"),
        (bcl.BalancedBatchSampler(range(n), table[:, 0], b), state, "not a state of this"),
    ]  # fmt: skip
    for target, bad, match in cases:
        with pytest.raises(bcl.Error, match=match):
            target.load_state_dict(bad)
    assert list(fresh) == whole  # nothing was loaded
    one_cost = bcl.BalancedBatchSampler(range(n), table.sum(axis=1), b)
    with pytest.raises(bcl.Error, match="not a state of this sampler"):
        fresh.load_state_dict(one_cost.state_dict())


@pytest.mark.parametrize("options, match", [
    ({"cap": "p99"}, "cap must be None"),
    ({"cap": 10.0}, "cap must be None"),
    ({"memory": np.ones(8), "memory_budget": 4.0}, "memory must be None"),
    ({"calibrate": True}, "calibrate must be False"),
    ({"batching": "padded"}, "batching must be 'packed'"),
    ({"mean_cost": "running"}, "mean_cost must be 'epoch'"),
    ({"mean_cost": 3.0}, "mean_cost must be 'epoch'"),
    ({"policy": "galloping"}, "policy"),
    ({"lookahead": 0}, "lookahead must be at least 1"),
])  # fmt: skip
def test_options_that_bound_or_aim_one_cost_are_refused_by_name(options, match):
    with pytest.raises(bcl.Error, match=match):
        bcl.BalancedBatchSampler(range(8), vision_language(8, 1), 2, **options)


@pytest.mark.parametrize("costs, match", [
    ([[1.0, 2.0], [3.0]], "has 1 stages, but costs\\[0\\] has 2"),
    (np.array([[1.0, 2.0], [3.0, np.nan]]), "record 1's cost of stage 1 is nan"),
    (np.array([[1.0, -2.0], [3.0, 4.0]]), "record 0's cost of stage 1 is -2"),
    (np.array([[1.0, 2.0], [np.inf, 4.0]]), "record 1's cost of stage 0 is inf"),
    (np.ones((2, 17)), "1 to 16"),
])  # fmt: skip
def test_bad_tables_name_the_record_and_the_stage_before_any_epoch(costs, match):
    with pytest.raises(bcl.Error, match=match):
        bcl.BalancedBatchSampler(range(2), costs, 2)


def test_an_index_the_table_does_not_cover_is_an_error():
    s = bcl.BalancedBatchSampler([0, 1, 5], np.ones((4, 2)), 2)
    with pytest.raises(bcl.Error, match="yields index 5 \\(position 2\\), but the costs cover 4"):
        list(s)
    with pytest.raises(bcl.Error, match="observe"):
        s.observe(0, 1.0)
