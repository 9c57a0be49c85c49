"""Indices and costs are taken strictly: an index is an integer in [0, 2^63), a cost a real
number; anything else is a bcl.Error naming the position and the value, never a silent coercion.
Errors raised by the user's own inner sampler or cost callable propagate unchanged, and a
failure (MemoryError included) leaves a sampler that keeps working."""

import decimal
import fractions
import resource

import numpy as np
import pytest
import torch

import bcl

import forked

COSTS = np.linspace(1.0, 2.0, 50)


def batches_of(inner, costs=COSTS, **options):
    return list(bcl.BalancedBatchSampler(inner, costs, 4, **options))


# -- indices -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad, position, words",
    [
        ([0, 1, 0.9], 2, "0.9 at position 2: dataset indices must be integers"),
        ([0, "7"], 1, "'7' at position 1: dataset indices must be integers"),
        ([0, 1, True], 2, "True at position 2: a bool is not a dataset index"),
        ([np.bool_(True)], 0, "True at position 0: a bool is not a dataset index"),
        ([np.uint64(2**64 - 1)], 0, "18446744073709551615 at position 0: dataset indices must"),
        ([3, -3], 1, "-3 at position 1: dataset indices must be in [0, 2^63)"),
        ([2**63], 0, "at position 0: dataset indices must be in [0, 2^63)"),
        ([decimal.Decimal(3)], 0, "Decimal('3') at position 0: dataset indices must be integers"),
        ([None], 0, "None at position 0"),
    ],
)
def test_an_index_that_is_not_an_integer_in_range_is_refused_naming_its_position(
    bad, position, words
):
    with pytest.raises(bcl.Error) as e:
        batches_of(iter(bad))
    assert "the inner sampler gave" in str(e.value) and words in str(e.value)


def test_numpy_integers_that_fit_are_indices():
    inner = [np.int64(3), np.uint8(4), np.int32(5), np.uint64(6)]
    assert sorted(i for b in batches_of(inner) for i in b) == [3, 4, 5, 6]
    assert sorted(sum(batches_of(np.array([1, 2], dtype=np.uint16)), [])) == [1, 2]
    assert sorted(sum(batches_of(np.arange(10, dtype=np.uint64)), [])) == list(range(10))


@pytest.mark.parametrize(
    "array, words",
    [
        (np.arange(6).reshape(2, 3), "an array of 2 dimensions"),
        (np.array([0.0, 1.0]), "an array of dtype float64"),
        (np.array([True, False]), "an array of dtype bool"),
        (np.array(["1", "2"]), "an array of dtype <U1"),
        (np.array([1, -2]), "-2 at position 1"),
        (np.array([2**63], dtype=np.uint64), "9223372036854775808 at position 0"),
        (torch.tensor([0.0, 1.0]), "a tensor of torch.float32"),
    ],
)
def test_an_array_of_indices_must_be_a_flat_array_of_integers_in_range(array, words):
    with pytest.raises(bcl.Error, match="the inner sampler gave") as e:
        batches_of(array)
    assert words in str(e.value)


def test_an_error_of_the_inner_sampler_itself_propagates_unchanged():
    for error in (TypeError("mine"), ValueError("mine"), OverflowError("mine"), KeyError("mine")):

        def inner(error=error):
            yield 0
            yield 1
            raise error

        with pytest.raises(type(error), match="mine") as e:
            batches_of(inner())
        assert not isinstance(e.value, bcl.Error)


# -- costs ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "costs, words",
    [
        (np.ones(50, dtype=complex), "costs must hold real numbers (got an array of dtype complex"),
        (np.array(["2020-01-01"] * 50, dtype="datetime64[D]"), "dtype datetime64[D]"),
        (np.array(["1.5"] * 50), "dtype <U3"),
        (np.ones(50, dtype=bool), "dtype bool"),
        (np.ma.masked_array(np.ones(50), mask=[True] + [False] * 49), "a masked array"),
        ([1.0, 2.0, decimal.Decimal("1.5")], "costs[2] is Decimal('1.5'), not a real number"),
        ([1.0, True, 2.0], "costs[1] is True, not a real number"),
        ([1.0, 10**400], "costs[1] is 1000000000"),
        ([1.0, "1.5"], "costs[1] is '1.5', not a real number"),
        ([1.0, 2j], "costs[1] is 2j, not a real number"),
        (torch.ones(50, dtype=torch.complex64), "a tensor of torch.complex64"),
        (torch.ones(50, dtype=torch.bool), "a tensor of torch.bool"),
        ("12345", "costs must be a sequence, array or tensor"),
    ],
)
def test_costs_that_are_not_real_numbers_are_refused_when_the_sampler_is_built(costs, words):
    with pytest.raises(bcl.Error) as e:
        bcl.BalancedBatchSampler(range(3), costs, 2)
    assert words in str(e.value)


def test_real_costs_of_any_numeric_kind_are_taken():
    for costs in (
        [1, 2.5, fractions.Fraction(1, 3), np.float32(2.0), np.int64(4)],
        np.arange(5, dtype=np.int32),
        torch.arange(5, dtype=torch.float64),
    ):
        assert sorted(sum(batches_of(range(5), costs), [])) == list(range(5))


@pytest.mark.parametrize(
    "value, words",
    [
        (decimal.Decimal("1.5"), "is Decimal('1.5'); a cost must be a real number"),
        ("1.5", "is '1.5'; a cost must be a real number"),
        (1 + 2j, "is (1+2j); a cost must be a real number"),
        (True, "is True; a cost must be a real number"),
        (None, "is None; a cost must be a real number"),
        (10**400, "too large for a float"),
        (np.datetime64("2020-01-01"), "a cost must be a real number"),
        (float("nan"), "the cost of dataset index 2 is nan"),
        (-1.0, "the cost of dataset index 2 is -1"),
    ],
)
def test_a_callable_cost_that_is_not_a_valid_real_number_names_the_index(value, words):
    sampler = bcl.BalancedBatchSampler(range(5), lambda i: value if i == 2 else 1.0, 2)
    with pytest.raises(bcl.Error) as e:
        next(iter(sampler))
    assert words in str(e.value) and "dataset index 2" in str(e.value)


def test_a_callable_may_give_numpy_scalars_and_one_element_tensors():
    costs = [np.float64(1.0), np.array(2.0), torch.tensor(3.0), torch.tensor([4]), 5]
    sampler = bcl.BalancedBatchSampler(range(5), lambda i: costs[i], 2)
    assert sorted(sum(list(sampler), [])) == list(range(5))


def test_an_error_of_the_cost_callable_itself_propagates_unchanged():
    for error in (KeyError("mine"), IndexError("mine"), TypeError("mine"), ValueError("mine")):

        def cost(i, error=error):
            raise error

        with pytest.raises(type(error), match="mine") as e:
            batches_of(range(4), cost)
        assert not isinstance(e.value, bcl.Error)


def test_costs_given_one_index_at_a_time_hold_huge_indices_without_a_huge_table():
    inner = [0, 2**32 - 1, 2**40, 2**62, 5]
    batches = list(bcl.BalancedBatchSampler(inner, lambda i: float(i % 7 + 1), 2))
    assert sorted(sum(batches, [])) == sorted(inner)


def test_a_memory_error_while_costs_are_looked_up_leaves_a_sampler_that_keeps_working():
    def attempt():
        sampler = bcl.BalancedBatchSampler(range(10), lambda i: 1.0 + i % 3, 4)
        first = list(sampler)
        # Millions of new indices, with too little address space left to hold their entries.
        sampler.sampler = np.arange(10, 6_000_010, dtype=np.int64)
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        used = _address_space()
        resource.setrlimit(resource.RLIMIT_AS, (used + 120 * 2**20, hard))
        try:
            next(iter(sampler))
            outcome = "no error"
        except MemoryError:
            outcome = "MemoryError"
        finally:
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        sampler.sampler = range(10)
        return outcome, first, list(sampler)

    result = forked.run(attempt, timeout=120.0)
    assert result[0] == "ok", result
    outcome, first, again = result[1]
    assert outcome == "MemoryError"
    assert again == first  # the table still holds the first epoch's costs, nothing else broke


def _address_space():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


# -- a failed load changes nothing ----------------------------------------------------------------


class Picky:
    """An inner sampler with epochs and a state_dict() whose load_state_dict() may refuse."""

    def __init__(self, n):
        self.n, self.epoch, self.offset = n, 0, 0

    def __iter__(self):
        return iter([(i + self.epoch + self.offset) % self.n for i in range(self.n)])

    def __len__(self):
        return self.n

    def set_epoch(self, epoch):
        self.epoch = epoch

    def state_dict(self):
        return {"offset": self.offset}

    def load_state_dict(self, state):
        if state.get("offset") == "bad":
            raise RuntimeError("inner state refused")
        self.offset = state["offset"]


def test_a_load_refused_by_the_inner_sampler_leaves_the_epochs_as_they_were():
    costs = np.linspace(1.0, 3.0, 40)
    saved = bcl.BalancedBatchSampler(Picky(40), costs, 4)
    saved.set_epoch(77)
    state = saved.state_dict()
    state["inner"] = {"offset": "bad"}

    sampler = bcl.BalancedBatchSampler(Picky(40), costs, 4)
    sampler.set_epoch(1)
    sampler.sampler.offset = 3
    reference = bcl.BalancedBatchSampler(Picky(40), costs, 4)
    reference.set_epoch(1)
    reference.sampler.offset = 3
    expected = list(reference)
    with pytest.raises(RuntimeError, match="inner state refused"):
        sampler.load_state_dict(state)
    assert sampler.sampler.epoch == 1 and sampler.sampler.offset == 3
    assert list(sampler) == expected
