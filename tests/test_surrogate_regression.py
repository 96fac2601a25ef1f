"""Kernel ridge regression of log densities (the delayed-acceptance surrogate)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import eigh

from pymc_kameleon.math.kernels import gaussian_kernel
from pymc_kameleon.math.surrogate_regression import KernelRidgeSurrogate, loo_residuals


def _data(n=60, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = -0.5 * np.sum(X**2, axis=1) + 0.3 * np.sin(2.0 * X[:, 0])
    return X, y


def test_loo_residuals_match_refitting_without_each_point():
    X, y = _data(30)
    r = y - y.mean()
    K = gaussian_kernel(X, X, 1.3)
    w, U = eigh(K)
    lam = 1e-2
    brute = []
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        alpha = np.linalg.solve(K[np.ix_(keep, keep)] + lam * np.eye(len(y) - 1), r[keep])
        brute.append(r[i] - K[i, keep] @ alpha)
    np.testing.assert_allclose(loo_residuals(w, U, r, lam), brute, rtol=1e-8, atol=1e-10)


def test_fixed_hyperparameters_give_the_ridge_solution():
    X, y = _data(40)
    mean = lambda Z: -0.4 * np.sum(Z**2, axis=1)  # noqa: E731
    fit = KernelRidgeSurrogate.fit(X, y, bandwidths=[0.9], lams=[1e-3], mean_function=mean)
    r = y - mean(X)
    c = r.mean()
    alpha = np.linalg.solve(gaussian_kernel(X, X, 0.9) + 1e-3 * np.eye(len(y)), r - c)
    Z = np.random.default_rng(5).normal(size=(7, 2))
    expected = gaussian_kernel(Z, X, 0.9) @ alpha + c + mean(Z)
    np.testing.assert_allclose(fit.log_density(Z), expected, rtol=1e-9, atol=1e-9)
    assert (fit.bandwidth, fit.lam) == (0.9, 1e-3)


def test_cross_validated_fit_predicts_held_out_log_densities():
    X, y = _data(300)
    fit = KernelRidgeSurrogate.fit(X, y)
    Z, yz = _data(200, seed=1)
    assert np.sqrt(np.mean((fit.log_density(Z) - yz) ** 2)) < 0.05 * np.std(yz)
    assert fit.loo_rmse < 0.05 * np.std(y)


def test_repeated_and_non_finite_points_are_dropped_and_floor_applies():
    X, y = _data(20)
    X2 = np.vstack([X, X[:5], [[50.0, 50.0]]])
    y2 = np.concatenate([y, y[:5], [-np.inf]])
    y2[0] = -1e6  # far below the others: raised to max(y) - 5
    fit = KernelRidgeSurrogate.fit(X2, y2, floor_gap=5.0)
    assert fit.points.shape == (20, 2)
    assert fit.log_density(X[:1])[0] > y.max() - 8.0
    with pytest.raises(ValueError, match="at least 3"):
        KernelRidgeSurrogate.fit(X[:2], y[:2])
