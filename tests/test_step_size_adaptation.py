"""AnchoredStepSize (pure, no PyMC) and the lambda-path cross-validation."""

import numpy as np
import pytest

from pymc_kameleon.adaptation import AnchoredStepSize, RobbinsMonro
from pymc_kameleon.math.hmc import hamiltonian_accept_prob, leapfrog
from pymc_kameleon.math.rff import RandomFourierFeatures
from pymc_kameleon.math.score_matching import (
    FiniteScoreEstimator,
    LiteScoreEstimator,
    cross_validate,
)


def _capped_accept(eps, rng, cap=0.2):
    """Acceptance of a step size eps on a unit-scale target, capped at ``cap`` by noise."""
    return cap * min(1.0, np.exp(-(eps**2) + 0.1 * rng.normal()))


def _surrogate_accept(eps, rng):
    """Noise-free acceptance on the surrogate at step ``eps`` (0.65 at eps ~ 0.66)."""
    return min(1.0, np.exp(-(eps**2) + 0.05 * rng.normal()))


def test_capped_acceptance_keeps_the_step_size_away_from_zero():
    rng = np.random.default_rng(0)
    rule = AnchoredStepSize(1.0, target=0.65, lower=0.1)
    for _ in range(20000):
        eps = rule.value
        rule.update(_capped_accept(eps, rng), _surrogate_accept(rule.anchor, rng))
    assert 0.6 < rule.anchor < 0.72  # exp(-eps^2) = 0.65
    assert rule.value == pytest.approx(0.1 * rule.anchor) and rule.at_floor


def test_plain_robbins_monro_collapses_on_the_same_input():
    """The broken variant (today's rule): the step size goes to zero."""
    rng = np.random.default_rng(0)
    rule = RobbinsMonro(1.0, 0.65)
    for _ in range(20000):
        rule.update(_capped_accept(rule.value, rng))
    assert rule.value < 1e-6


def test_without_noise_the_step_size_follows_the_target():
    rng = np.random.default_rng(1)
    rule = AnchoredStepSize(0.05, target=0.65, lower=0.1)
    for _ in range(20000):
        eps = rule.value
        a = min(1.0, np.exp(-2.0 * eps**2))  # the target wants a smaller step than the anchor
        rule.update(a + 0.05 * rng.normal(), _surrogate_accept(rule.anchor, rng))
    assert rule.value == pytest.approx(np.sqrt(-np.log(0.65) / 2.0), rel=0.1)
    assert not rule.at_floor


def test_without_anchor_statistic_the_band_is_fixed_around_the_initial_value():
    rule = AnchoredStepSize(0.1, target=0.234, lower=1e-3, upper=1e3)
    for _ in range(100000):
        rule.update(0.0)
    assert rule.anchor == pytest.approx(0.1) and rule.value == pytest.approx(1e-4)


@pytest.mark.parametrize("kwargs", [dict(initial=0.0), dict(initial=1.0, target=1.0),
                                    dict(initial=1.0, exponent=0.5),
                                    dict(initial=1.0, lower=2.0), dict(initial=1.0, upper=0.5)])
def test_invalid_arguments(kwargs):
    with pytest.raises(ValueError):
        AnchoredStepSize(**kwargs)


def test_hamiltonian_accept_prob():
    f = lambda q: -0.5 * float(q @ q)  # noqa: E731
    q0, p0 = np.array([1.0, -0.5]), np.array([0.3, 0.2])
    q1, p1 = leapfrog(q0, p0, lambda q: -q, 0.5, 5)
    h0 = -f(q0) + 0.5 * p0 @ p0
    h1 = -f(q1) + 0.5 * p1 @ p1
    assert hamiltonian_accept_prob(f, q0, p0, q1, p1) == pytest.approx(min(1, np.exp(h0 - h1)))
    assert hamiltonian_accept_prob(f, q0, p0, np.array([np.inf, 0.0]), p1) == 0.0


@pytest.mark.parametrize("surrogate", ["lite", "finite"])
def test_lambda_path_gives_the_losses_of_separate_fits(surrogate):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(90, 3)) * np.array([0.5, 1.0, 2.0])
    lams = 10.0 ** np.arange(-4.0, 2.0)
    if surrogate == "lite":
        make = LiteScoreEstimator
    else:
        rff = RandomFourierFeatures.draw(3, 40, 1.0, rng, "phase")

        def make(s, lam):
            return FiniteScoreEstimator(rff.with_bandwidth(s), lam)

    class Plain:  # hides lambda_path_losses: one fit per grid point and fold
        def __init__(self, s, lam):
            self.est = make(s, lam)

        def fit(self, X):
            self.est.fit(X)
            return self

        def score_matching_loss(self, X):
            return self.est.score_matching_loss(X)

    fast = cross_validate(X, [0.7, 1.5, 3.0], lams, make, n_folds=5, shuffle=False)
    slow = cross_validate(X, [0.7, 1.5, 3.0], lams, Plain, n_folds=5, shuffle=False)
    np.testing.assert_allclose(fast.losses, slow.losses, rtol=1e-8)
    assert (fast.best_bandwidth, fast.best_lam) == (slow.best_bandwidth, slow.best_lam)


def test_target_override_moves_the_step_size_but_not_the_anchor():
    """A noise-lowered target (here 0.65 * 0.2) lets the step size settle inside the band
    where the capped acceptance reaches it, while the anchor keeps the noise-free target."""
    rng = np.random.default_rng(3)
    rule = AnchoredStepSize(1.0, target=0.65, lower=0.1)
    for _ in range(20000):
        accept = 0.2 * min(1.0, np.exp(-(rule.value**2) + 0.05 * rng.normal()))
        rule.update(accept, _surrogate_accept(rule.anchor, rng), target=0.65 * 0.2)
    assert 0.6 < rule.anchor < 0.72
    assert rule.value == pytest.approx(rule.anchor, rel=0.15) and not rule.at_floor


def test_anchor0_fixes_the_band_in_absolute_units():
    rule = AnchoredStepSize(0.1, target=0.234, lower=0.02, upper=20.0, anchor0=2.0)
    assert rule.value == 0.1 and rule.anchor == 2.0
    for _ in range(100000):
        rule.update(0.0)
    assert rule.value == pytest.approx(0.04)
    with pytest.raises(ValueError):
        AnchoredStepSize(0.1, anchor0=0.0)
