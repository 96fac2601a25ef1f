"""The kameleons' ``gamma`` chosen by trials while tuning (KameleonStep and FastKameleonStep)."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest
from checks import moment_zscores, sample

from pymc_kameleon import FastKameleonStep, KameleonStep
from pymc_kameleon.adaptation.local_gaussian import GAMMA_GRID
from pymc_kameleon.compat import group_dataset

STEPS = [KameleonStep, FastKameleonStep]


def _candidates(d: int) -> np.ndarray:
    return np.array(GAMMA_GRID) * (2.38 / np.sqrt(d))  # as the step computes them


@pytest.mark.parametrize("cls", STEPS)
def test_round_robin_trials_in_the_stats_then_one_value(gauss, cls):
    """The ``gamma`` stat: the first candidate through the warm-up, round-robin blocks of
    draws over three rounds in the sampler's tuning phase, then one candidate, frozen."""
    make = lambda: cls(warmup_draws=50, n_steps=2)  # noqa: E731
    idata = sample(gauss, make, draws=60, tune=450, chains=1, discard_tuned_samples=False)
    g = group_dataset(idata, "warmup_sample_stats")["gamma"].values[0]
    after = group_dataset(idata, "sample_stats")["gamma"].values[0]
    cand = _candidates(2)
    assert np.all(g[:50] == cand[0])
    block = int(np.argmax(g[50:] != cand[0]))  # the first candidate's first block
    assert block >= 1
    trial = 3 * len(cand) * block
    expected = cand[(np.arange(trial) // block) % len(cand)]
    np.testing.assert_array_equal(g[50:50 + trial], expected)
    chosen = g[50 + trial]
    assert chosen in cand
    assert np.all(g[50 + trial:] == chosen) and np.all(after == chosen)


@pytest.mark.parametrize("cls", STEPS)
def test_fixed_gamma_never_changes_and_a_sequence_is_the_candidates(gauss, cls):
    idata = sample(gauss, lambda: cls(gamma=0.3, warmup_draws=50, n_steps=2), draws=20,
                   tune=300, chains=1, discard_tuned_samples=False)
    assert np.all(group_dataset(idata, "warmup_sample_stats")["gamma"].values == 0.3)
    with gauss:
        step = cls(gamma=(0.2, 0.5))
    assert step.gamma_candidates == (0.2, 0.5)
    assert step.gamma == 0.2


@pytest.mark.parametrize("cls", STEPS)
def test_cached_proposal_follows_a_change_of_gamma(gauss, cls):
    """Every proposal, also the first after the trials switch ``gamma``, uses the covariance
    ``gamma^2 I + scale * G(y)`` of the value in use.  (A cache checked on the scale alone
    fails this: after a switch it serves the previous candidate's factor at the current
    point; with adapted scales every switch changes the scale too, hence ``adapt_scale``
    off here.)"""
    with gauss:
        step = cls(rng=0, warmup_draws=20, n_steps=2, adapt_scale=False)
    # the proposal cache is the object under test: a stale factor changes no stat, only the
    # MH ratio, too slightly for a statistical test
    kernel = step.adaptation
    cached = kernel.cached_proposal
    seen = set()

    def checked(state, y, cache, rng, tune, params=None):
        key, entry = cached(state, y, cache, rng, tune, params)
        if state.active:
            L = entry[2]
            expected = step.gamma**2 * np.eye(2) + step.scale * kernel.gram(state, y, rng, tune)
            np.testing.assert_allclose(L @ L.T, expected, rtol=1e-10, atol=1e-12)
            seen.add(step.gamma)
        return key, entry

    kernel.cached_proposal = checked
    point = gauss.initial_point()
    for _ in range(400):
        point, _ = step.step(point)
    assert len(seen) == len(step.gamma_candidates)  # checked under every candidate


@pytest.mark.parametrize("cls", STEPS)
def test_gamma_steps_down_when_the_adaptive_scale_is_at_its_floor(gauss, cls):
    """While tuning, a scale at its lower bound (the adaptive part gone, the acceptance still
    below the target: gamma's walk alone too wide) moves gamma to the next smaller
    candidate; a scale above it does not."""
    with gauss:
        step = cls(gamma=(0.05, 30.0), warmup_draws=10, n_steps=2, rng=5)
    point = gauss.initial_point()
    for _ in range(400):  # the warm-up and the trials (120 draws)
        point, _ = step.step(point)
    # unit test of the step-down rule: it puts the scale on its floor, where only long
    # tuning runs take it (a new adaptation state when the warm-up ends)
    a = step.adaptation_state
    assert a.gammas.done
    a.gammas.index = 1  # the wide candidate in use
    for _ in range(5):
        point, _ = step.step(point)
    assert step.gamma == 30.0 and a.scalers[1].value > a.scalers[1].lower
    a.scalers[1].value = a.scalers[1].lower
    point, _ = step.step(point)  # rejections (gamma 30 in whitened units) keep it there
    point, _ = step.step(point)
    assert step.gamma == 0.05
    step.stop_tuning()
    a.scalers[0].value = a.scalers[0].lower
    for _ in range(3):  # never after tuning
        point, _ = step.step(point)
    assert step.gamma == 0.05 and a.scalers[0].value == a.scalers[0].lower


@pytest.fixture(scope="module")
def gauss6():
    """6-d Gaussian with unequal scales and correlation (whitened by the warm-up)."""
    rng = np.random.default_rng(3)
    A = rng.normal(size=(6, 6))
    cov = A @ A.T / 6 + np.diag(np.linspace(0.5, 3.0, 6))
    with pm.Model() as model:
        pm.MvNormal("x", mu=np.arange(6.0), cov=cov)
    return model, cov


@pytest.mark.slow
@pytest.mark.parametrize("cls", STEPS)
def test_gaussian_posterior_gets_a_large_gamma(gauss6, cls):
    """On a Gaussian posterior the trials choose a large ``gamma``: KAMH's kernel part
    hardly moves the chain radially there (docs/benchmarks/kamh_gamma.md), and the suite's
    near-Gaussian models had twice the ESS with the trials than with gamma 0.1.  At least
    three of the four chains must choose the largest candidate, and means and variances
    must be right (z-scores with ArviZ's ESS).
    """
    model, cov = gauss6
    idata = sample(model, cls, draws=500, tune=1000, chains=4, cores=2, seed=2)
    g = group_dataset(idata, "sample_stats")["gamma"].values[:, -1]
    cand = _candidates(6)
    assert np.sum(g == cand[-1]) >= 3, g / (2.38 / np.sqrt(6))
    x = group_dataset(idata, "posterior")["x"].values
    z = np.array([moment_zscores(x[..., i], float(i), cov[i, i]) for i in range(6)])
    assert np.max(np.abs(z)) < 4.0, z
