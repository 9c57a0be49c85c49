"""Shared helpers and hypothesis settings for the bcl Python tests."""

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

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


def resealed(state, **changes):
    """`state` with `changes` applied and its checksum recomputed: a state edited with care, so
    that a test reaches the checks behind the checksum (which catches careless edits)."""
    state = dict(state, **changes)
    distributed = str(state.get("format", "")).startswith("bcl.DistributedBalancedBatchSampler")
    fields = _distributed._CHECKED_FIELDS if distributed else _sampler._CHECKED_FIELDS
    state["checksum"] = _state.checksum(state, fields)
    return state
