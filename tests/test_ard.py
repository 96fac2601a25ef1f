"""Per-coordinate kernel lengths: the anisotropic random features and their search."""

from __future__ import annotations

import numpy as np
import pytest

from pymc_kameleon.math.ard import search_lengths
from pymc_kameleon.math.rff import RandomFourierFeatures
from pymc_kameleon.math.score_matching import FiniteScoreEstimator, cross_validate


def _banana_sample(n: int, rng: np.random.Generator) -> np.ndarray:
    """Whitened-looking sample of a 5-d banana: curved in (x0, x1), Gaussian elsewhere."""
    x0 = rng.normal(size=n)
    x1 = (rng.normal(size=n) * 0.25 + 0.7 * (x0**2 - 1.0)) / 1.0
    rest = rng.normal(size=(n, 3))
    return np.column_stack([x0, x1, rest])


@pytest.mark.parametrize("embedding", ["phase", "sincos"])
def test_lengths_are_a_rescaling_of_the_coordinates(embedding):
    # features with lengths l at x are the isotropic features at x / l, and their Jacobian
    # follows the chain rule (an independent computation of the same map)
    rng = np.random.default_rng(0)
    base = RandomFourierFeatures.draw(3, 40, 1.7, rng, embedding)
    lengths = np.array([0.5, 2.0, 4.0])
    ard = base.with_lengths(lengths)
    X = rng.normal(size=(6, 3))
    np.testing.assert_allclose(ard.features(X), base.features(X / lengths), atol=1e-14)
    np.testing.assert_allclose(ard.jacobian(X), base.jacobian(X / lengths) / lengths,
                               atol=1e-14)
    assert ard.with_bandwidth(3.0).lengths is ard.lengths  # a new bandwidth keeps them
    assert base.with_lengths(None).lengths is None


def test_lengths_approximate_the_anisotropic_kernel():
    rng = np.random.default_rng(1)
    lengths = np.array([0.5, 3.0])
    rff = RandomFourierFeatures.draw(2, 20000, 1.2, rng).with_lengths(lengths)
    x, y = np.array([0.1, -0.4]), np.array([0.4, 1.5])
    exact = np.exp(-np.sum(((x - y) / (1.2 * lengths)) ** 2) / 2.0)
    assert abs(float(rff.features(x) @ rff.features(y)) - exact) < 0.02


@pytest.mark.parametrize("bad", [np.ones(2), np.array([1.0, 0.0, 1.0]),
                                 np.array([1.0, np.inf, 1.0])])
def test_invalid_lengths(bad):
    rff = RandomFourierFeatures.draw(3, 10, 1.0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="lengths"):
        rff.with_lengths(bad)


@pytest.fixture(scope="module")
def banana_search():
    rng = np.random.default_rng(3)
    X = _banana_sample(300, rng)
    base = RandomFourierFeatures.draw(5, 200, 1.0, rng)
    s_med = np.sqrt(2 * 5)
    grid = s_med * 2.0 ** np.arange(-1.0, 2.25, 0.5)
    lams = s_med**-2 * 10.0 ** np.arange(-5.0, 2.0)
    return X, base, grid, lams, search_lengths(X, base, grid, lams)


def test_search_finds_the_curved_coordinates(banana_search):
    X, base, grid, lams, res = banana_search
    # the held-out loss improves on the isotropic kernel by a wide margin
    assert res.loss < res.isotropic_loss - 1.0
    # the curved coordinate gets the shortest length, the Gaussian ones longer lengths
    assert res.lengths[0] == res.lengths.min()
    assert res.lengths[0] < 0.5 * np.min(res.lengths[2:])
    assert np.isclose(np.exp(np.mean(np.log(res.lengths))), 1.0)
    # every coordinate's bandwidth within the search's bounds
    assert np.all(res.lengths * res.bandwidth <= grid.max() * 2.0)


def test_search_reports_the_loss_of_what_it_returns(banana_search):
    # independent recomputation of the held-out loss at the returned hyperparameters
    X, base, grid, lams, res = banana_search
    basis = base.with_lengths(res.lengths)
    again = cross_validate(X, [res.bandwidth], [res.lam],
                           lambda s, lam: FiniteScoreEstimator(basis.with_bandwidth(s), lam),
                           n_folds=5, shuffle=False)
    assert np.isclose(again.best_loss, res.loss, rtol=1e-10)
    assert res.loss <= res.isotropic_loss


def test_search_keeps_a_gaussian_near_isotropic():
    # nothing to find on a standard Gaussian: no coordinate is singled out as short
    rng = np.random.default_rng(4)
    X = rng.normal(size=(300, 4))
    base = RandomFourierFeatures.draw(4, 200, 1.0, rng)
    grid = np.sqrt(8.0) * 2.0 ** np.arange(-1.0, 2.25, 0.5)
    lams = 10.0 ** np.arange(-6.0, 1.0)
    res = search_lengths(X, base, grid, lams)
    assert np.min(res.lengths * res.bandwidth) >= grid.min()


def test_search_starts_from_given_lengths_and_stops_when_nothing_changes(banana_search):
    X, base, grid, lams, res = banana_search
    again = search_lengths(X, base, grid, lams, lengths=res.lengths)
    assert again.loss <= res.loss + 1e-12
    # a converged start costs the grid, at most two sweeps, and the final grid
    assert again.n_evaluated <= 2 * len(grid) + 1 + 2 * 2 * X.shape[1]


@pytest.mark.parametrize("warm", [False, True])
def test_min_bandwidth_bounds_every_coordinate(banana_search, warm):
    # a sampler's bandwidth floor (e.g. kernel HMC's against a pseudo-marginal history
    # collapsed on a lucky estimate) holds per coordinate, also from warm-started lengths
    # that undercut it
    X, base, grid, lams, res = banana_search
    unbounded = float(np.min(res.lengths * res.bandwidth))
    floor = 1.5 * unbounded  # binds: the unbounded search went below it
    assert floor > grid.min() / 4.0
    bounded = search_lengths(X, base, grid, lams, lengths=res.lengths if warm else None,
                             min_bandwidth=floor)
    assert np.min(bounded.lengths * bounded.bandwidth) >= floor * (1 - 1e-9)
    assert np.isclose(np.exp(np.mean(np.log(bounded.lengths))), 1.0)
    # still an anisotropic kernel that beats the isotropic one, the curved coordinate shortest
    assert bounded.loss < res.isotropic_loss - 1.0
    assert bounded.lengths[0] == bounded.lengths.min()
