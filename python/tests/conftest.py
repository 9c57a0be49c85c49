"""Shared helpers and hypothesis settings for the bcl Python tests."""

import pickle

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from bcl import _distributed, _sampler, _state

settings.register_profile(
    "bcl",
    max_examples=60,
    deadline=None,
    database=None,  # nothing written into the source tree
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile("bcl")


def sequence_costs(n, seed=0):
    """Costs of sequences under a + b*L + c*L^2, with lognormal lengths (about ShareGPT's
    spread)."""
    lengths = np.random.default_rng(seed).lognormal(mean=6.0, sigma=0.5, size=n)
    return 1.0 + lengths + lengths**2 / 165.0


@pytest.fixture
def costs_1000():
    return sequence_costs(1000)


class Indexed(torch.utils.data.Dataset):
    """A dataset whose item i is i: a DataLoader over it hands out the sampler's batches."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return i


def check_resume(make, fresh, data):
    """A state taken after a drawn number of batches handed out and a drawn number of those
    consumed, pickled and loaded into fresh(), resumes make()'s epoch exactly: the rest of it,
    and len() the epoch's."""
    expected = list(make())
    handed_out = data.draw(st.integers(0, len(expected)))
    consumed = data.draw(st.integers(0, handed_out))
    first = make()
    it = iter(first)
    for _ in range(handed_out):
        next(it)
    state = pickle.loads(pickle.dumps(first.state_dict(consumed=consumed)))
    second = fresh()
    second.load_state_dict(state)
    assert len(second) == len(expected)
    assert expected[:consumed] + list(second) == expected


def resealed(state, **changes):
    """`state` with `changes` applied and its checksum recomputed: a state edited with care, so
    that a test reaches the checks behind the checksum (which catches careless edits)."""
    state = dict(state, **changes)
    distributed = str(state.get("format", "")).startswith("bcl.DistributedBalancedBatchSampler")
    fields = _distributed._CHECKED_FIELDS if distributed else _sampler._CHECKED_FIELDS
    state["checksum"] = _state.checksum(state, fields)
    return state
