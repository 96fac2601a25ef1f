"""Unit tests of the KAMH numerics against independent computations."""

import numpy as np
import pytest
from scipy.spatial.distance import pdist
from scipy.stats import multivariate_normal

import pymc_kameleon.math.kernels as kernels_module
from pymc_kameleon.math.kamh import (
    kamh_covariance,
    kamh_covariances,
    kamh_gram,
    kamh_gram_t,
    kamh_grams,
    kamh_proposal,
    proposal_covariance,
)
from pymc_kameleon.math.kernels import (
    exact_median,
    gaussian_kernel,
    gaussian_kernel_grad,
    median_heuristic,
)
from pymc_kameleon.math.linalg import gaussian_factor


@pytest.fixture(scope="module")
def history():
    rng = np.random.default_rng(0)
    y1 = rng.normal(0, 3, size=30)
    return np.column_stack([y1, 0.2 * y1**2 + rng.normal(0, 0.5, size=30), rng.normal(size=30)])


def test_kernel_matches_definition():
    rng = np.random.default_rng(1)
    X, Y = rng.normal(size=(4, 3)), rng.normal(size=(5, 3))
    s = 0.7
    brute = np.array([[np.exp(-np.sum((x - y) ** 2) / (2 * s**2)) for y in Y] for x in X])
    np.testing.assert_allclose(gaussian_kernel(X, Y, s), brute, rtol=1e-12)


@pytest.mark.parametrize("s", [0.3, 1.0, 4.0])
def test_kernel_gradient_vs_finite_differences(history, s):
    x = np.array([0.3, -0.2, 0.5])
    grads = gaussian_kernel_grad(x, history, s)
    h = 1e-6
    fd = np.empty_like(grads)
    for j in range(3):
        e = np.zeros(3)
        e[j] = h
        fd[:, j] = (gaussian_kernel(x + e, history, s) - gaussian_kernel(x - e, history, s))[0] / (
            2 * h
        )
    np.testing.assert_allclose(grads, fd, atol=1e-8, rtol=1e-5)


def test_median_heuristic_ignores_duplicates():
    Z = np.array([[0.0, 0.0], [3.0, 4.0], [0.0, 0.0], [0.0, 0.0], [6.0, 8.0]])
    distinct = np.array([[0.0, 0.0], [3.0, 4.0], [6.0, 8.0]])
    assert median_heuristic(Z) == pytest.approx(np.median(pdist(distinct)))
    assert median_heuristic(np.ones((10, 2))) == 0.0
    assert median_heuristic(np.ones((1, 2))) == 0.0


def _median_arrays():
    """Arrays of every kind the median heuristic can meet, and some it cannot."""
    rng = np.random.default_rng(3)
    yield pdist(rng.normal(size=(500, 10)))  # 124750 values: even
    yield pdist(rng.standard_t(3, size=(301, 4)) * [1e-3, 1.0, 10.0, 1e3])  # 45150
    yield pdist(np.sort(rng.normal(size=(400, 2)), axis=0))  # structured order
    yield np.round(rng.normal(size=90001), 1)  # odd, heavy ties
    yield np.full(30001, 1.5e308)  # odd: the middle value, not (a + a) / 2 = inf
    yield np.repeat(rng.normal(size=3), 30001)  # three values
    yield rng.exponential(size=40000)  # a stride of 9
    yield rng.normal(size=29999)  # below the bracketing size
    x = rng.standard_cauchy(size=60000)
    x[[5, 17]] = np.inf, -np.inf
    yield x
    x = rng.normal(size=60000)
    x[1234] = np.nan
    yield x


def test_exact_median_is_numpys_median_to_the_last_bit():
    for x in _median_arrays():
        expected = np.median(x)
        got = exact_median(x)
        assert isinstance(got, float)
        assert got == expected or (np.isnan(expected) and np.isnan(got)), (x.size, got)


def test_exact_median_brackets_without_sorting_all_and_falls_back_when_it_misses(
    monkeypatch,
):
    x = pdist(np.random.default_rng(4).normal(size=(500, 10)))
    calls = []
    real_median = np.median
    monkeypatch.setattr(kernels_module.np, "median", lambda a: calls.append(1) or real_median(a))
    assert exact_median(x) == real_median(x)
    assert not calls  # the bracket held: no full selection
    monkeypatch.setattr(kernels_module, "_BRACKET_MARGIN", 0)  # a bracket of one value
    assert exact_median(x) == real_median(x)
    assert calls  # missed, fell back, same number


def test_gram_equals_brute_force_centred_product(history):
    y, s = np.array([1.0, 0.5, -0.3]), 1.5
    n = history.shape[0]
    M = np.column_stack([2 * np.exp(-np.sum((y - z) ** 2) / (2 * s**2)) * (z - y) / s**2
                         for z in history])
    H = np.eye(n) - np.ones((n, n)) / n
    np.testing.assert_allclose(kamh_gram(y, history, s), M @ H @ M.T, rtol=1e-10, atol=1e-14)


def test_one_covariance_formula_for_the_batched_and_compiled_grams(history):
    """SMC's batched covariances and the steps' (the Gram of the compiled path, then the
    factorisation's entries) are ``gamma^2 I + nu^2 G`` of the same ``G``."""
    rng = np.random.default_rng(5)
    Y, s, gamma, nu2 = rng.normal(size=(4, 3)), 1.3, 0.3, 0.7
    covs = kamh_covariances(Y, history, s, gamma, nu2)
    G = kamh_grams(Y, history, s)
    expected = nu2 * G + gamma**2 * np.eye(3)
    np.testing.assert_array_equal(covs, expected)
    np.testing.assert_array_equal(proposal_covariance(G, gamma, nu2), expected)
    Zt = np.ascontiguousarray(history.T)
    for y, cov in zip(Y, covs, strict=True):
        C = proposal_covariance(kamh_gram_t(y, Zt, s), gamma, nu2)
        np.testing.assert_allclose(C, cov, rtol=1e-10, atol=1e-10 * np.abs(cov).max())
        L, _, ok = gaussian_factor(kamh_gram(y, history, s), gamma**2, nu2)
        assert ok
        np.testing.assert_allclose(L @ L.T, cov, rtol=1e-10, atol=1e-12)


def test_proposal_covariance_matches_generative_construction(history):
    """Monte Carlo of the paper's construction: beta ~ N(0, nu^2 I), one gradient step on
    g(x) = k(x,x) - 2 k(x,y) - 2 sum_i beta_i [k(x,z_i) - mu_z(x)], plus N(0, gamma^2 I).

    The gradient of g is taken by finite differences of kernel evaluations, independently of
    ``kamh_gram`` and ``gaussian_kernel_grad``.
    """
    rng = np.random.default_rng(2)
    y, s, gamma, nu2 = np.array([1.0, 0.5, -0.3]), 1.5, 0.2, 0.8
    d, n, h = 3, history.shape[0], 1e-5

    def kvec(x):
        return gaussian_kernel(x[None, :], history, s)[0]

    # dk[j, i] = d/dx_j k(x, z_i) at y by central differences; g is linear in beta
    dk = np.array([(kvec(y + h * e) - kvec(y - h * e)) / (2 * h) for e in np.eye(d)])
    dk_centred = dk - dk.mean(axis=1, keepdims=True)
    def g_const(x):  # the beta-free part of g: k(x, x) - 2 k(x, y)
        return (gaussian_kernel(x[None], x[None], s) - 2 * gaussian_kernel(x[None], y[None], s))[
            0, 0
        ]

    # Proposition 1 says this gradient vanishes; computing it keeps the test independent of it
    a_y = np.array([(g_const(y + h * e) - g_const(y - h * e)) / (2 * h) for e in np.eye(d)])
    n_mc = 200_000
    beta = rng.normal(0.0, np.sqrt(nu2), size=(n_mc, n))
    grad_g = a_y[None, :] - 2.0 * beta @ dk_centred.T
    x_star = y - grad_g + rng.normal(0.0, gamma, size=(n_mc, d))

    closed = kamh_covariance(y, history, s, gamma, nu2)
    mc = np.cov(x_star.T)
    assert np.all(np.abs(x_star.mean(axis=0) - y) < 4 * np.sqrt(np.diag(closed) / n_mc))
    # relative Frobenius error of a sample covariance with 2e5 draws is ~ 0.5%
    assert np.linalg.norm(mc - closed) / np.linalg.norm(closed) < 0.02


def test_log_density_matches_scipy(history):
    y, s = np.array([0.2, 1.0, 0.0]), 2.0
    q = kamh_proposal(y, history, s, gamma=0.3, nu2=1.7)
    cov = kamh_covariance(y, history, s, 0.3, 1.7)
    rng = np.random.default_rng(3)
    for x in rng.normal(size=(5, 3)):
        assert q.logpdf(x) == pytest.approx(multivariate_normal(y, cov).logpdf(x), rel=1e-10)


def test_proposal_falls_back_to_random_walk_far_from_history(history):
    far = np.array([1e3, -1e3, 1e3])
    cov = kamh_covariance(far, history, 1.0, gamma=0.2, nu2=10.0)
    np.testing.assert_allclose(cov, 0.04 * np.eye(3), atol=1e-300)


def test_proposal_is_not_symmetric(history):
    """The reverse density must be built at the proposed point: q(x|y) != q(y|x)."""
    s = median_heuristic(history)
    y, x = history[0], history[5]
    forward = kamh_proposal(y, history, s, 0.2, 5.0).logpdf(x)
    reverse = kamh_proposal(x, history, s, 0.2, 5.0).logpdf(y)
    assert abs(forward - reverse) > 1e-3
