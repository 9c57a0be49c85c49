"""Calibration from Python: a sampler over bcl.affine_quadratic(lengths, a, b, c) with
calibrate=True fits (a, b, c) to the step times the training loop reports with observe(), keeps
the fit from epoch to epoch and through a state, and shows it in stats["calibration"]."""

import pickle

import numpy as np
import pytest

import bcl

TRUE = (2.0e-3, 1.5e-5, 4.0e-8)  # seconds: a + b*L + c*L^2


def lengths_of(n, seed=0):
    return np.maximum(np.rint(np.random.default_rng(seed).lognormal(5.5, 0.8, size=n)), 1.0)


def true_time(batch, lengths):
    a, b, c = TRUE
    return sum(a + b * lengths[i] + c * lengths[i] ** 2 for i in batch)


def train(sampler, lengths, epochs, noise=0.0, seed=1):
    """Iterates `epochs` epochs, reporting every batch's (noisy) true time; returns the batches."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(epochs):
        for k, batch in enumerate(sampler):
            sampler.observe(k, true_time(batch, lengths) * float(np.exp(noise * rng.normal())))
            out.append(batch)
    return out


def make(lengths, n, **options):
    return bcl.BalancedBatchSampler(
        np.random.default_rng(7).permutation(n).tolist(),
        bcl.affine_quadratic(lengths, 0.0, 1.0, 0.0),  # a tokens-only prior
        16, calibrate=True, **options,
    )  # fmt: skip


def test_the_fit_finds_the_true_cost_model_from_the_step_times():
    n = 4000
    lengths = lengths_of(n)
    sampler = make(lengths, n)
    train(sampler, lengths, epochs=2, noise=0.05)
    fit = sampler.stats["calibration"]
    assert fit["has_fit"] and fit["times_observed"] == 2 * 250
    fitted = np.array(fit["fitted"])
    # The quadratic and linear terms within 10% of the truth (5% noise on every time).
    assert fitted[2] == pytest.approx(TRUE[2], rel=0.1)
    assert fitted[1] == pytest.approx(TRUE[1], rel=0.1)
    # In force: the fit's shape, in the prior's units (a record of the mean length costs what the
    # prior says), so c / b is the truth's.
    applied = np.array(fit["applied"])
    assert applied[2] / applied[1] == pytest.approx(TRUE[2] / TRUE[1], rel=0.15)


def test_the_fit_carries_into_the_next_epoch_and_through_a_state():
    n = 2000
    lengths = lengths_of(n, 3)
    reference = make(lengths, n)
    train(reference, lengths, epochs=1)
    learned = reference.stats["calibration"]
    expected = train(reference, lengths, epochs=1)  # the second epoch, fitting on

    first = make(lengths, n)
    train(first, lengths, epochs=1)
    assert first.stats["calibration"] == learned
    second = make(lengths, n)
    second.load_state_dict(pickle.loads(pickle.dumps(first.state_dict())))
    assert second.stats["calibration"]["applied"] == learned["applied"]
    assert train(second, lengths, epochs=1) == expected


def test_resuming_mid_epoch_with_times_outstanding_is_exact():
    n = 1500
    lengths = lengths_of(n, 4)
    expected = train(make(lengths, n), lengths, epochs=1)
    first = make(lengths, n)
    it = iter(first)
    head = []
    for k in range(37):
        head.append(next(it))
        if k < 33:  # the last 4 batches' times have not come yet
            first.observe(k, true_time(head[k], lengths))
    second = make(lengths, n)
    second.load_state_dict(pickle.loads(pickle.dumps(first.state_dict())))
    for k in range(33, 37):
        second.observe(k, true_time(head[k], lengths))
    rest = []
    for k, batch in enumerate(second, start=37):
        second.observe(k, true_time(batch, lengths))
        rest.append(batch)
    assert head + rest == expected


def test_an_affine_quadratic_cost_without_calibration_is_its_table():
    n = 300
    lengths = lengths_of(n, 5)
    a, b, c = 1.0, 2.0, 0.01
    costs = a + b * lengths + c * lengths**2
    order = np.random.default_rng(2).permutation(n).tolist()
    as_table = list(bcl.BalancedBatchSampler(order, costs, 8))
    as_model = bcl.affine_quadratic(lengths, a, b, c)
    assert list(bcl.BalancedBatchSampler(order, as_model, 8)) == as_table
    as_function = bcl.affine_quadratic(lambda i: lengths[i], a, b, c)
    assert list(bcl.BalancedBatchSampler(order, as_function, 8)) == as_table


def test_calibration_errors_name_what_is_wrong():
    lengths = lengths_of(100)
    with pytest.raises(bcl.Error, match="costs=bcl.affine_quadratic"):
        bcl.BalancedBatchSampler(range(100), np.ones(100), 4, calibrate=True)
    with pytest.raises(bcl.Error, match="takes no memory estimate"):
        bcl.BalancedBatchSampler(
            range(100), bcl.affine_quadratic(lengths), 4, calibrate=True, memory=np.ones(100)
        )
    with pytest.raises(bcl.Error, match="not all 0"):
        bcl.affine_quadratic(lengths, 0.0, 0.0, 0.0)
    with pytest.raises(bcl.Error, match="does not calibrate"):
        bcl.BalancedBatchSampler(range(100), np.ones(100), 4).observe(0, 1.0)
    sampler = bcl.BalancedBatchSampler(range(100), bcl.affine_quadratic(lengths), 4, calibrate=True)
    with pytest.raises(bcl.Error, match="no batch of this epoch"):
        sampler.observe(0, 1.0)
    it = iter(sampler)
    next(it)
    with pytest.raises(bcl.Error, match="time"):
        sampler.observe(0, -1.0)
    with pytest.raises(bcl.Error):
        sampler.observe(5, 1.0)  # not handed out yet
    with pytest.raises(bcl.Error, match="batch_index must be an integer"):
        sampler.observe(0.0, 1.0)
    sampler.observe(0, 1.0)
    with pytest.raises(bcl.Error):
        sampler.observe(0, 1.0)  # already observed
