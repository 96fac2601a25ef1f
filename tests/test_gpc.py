"""Tests for the pseudo-marginal GP-classification target (:mod:`pymc_kameleon.models.gpc`)."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy import optimize, stats
from scipy.special import expit

from pymc_kameleon.models.gpc import (
    GLASS_ENV_VAR,
    GPClassificationLikelihood,
    ard_kernel,
    laplace_approximation,
    load_glass,
    whiten,
)


# ---------------------------------------------------------------------------------------------
# Helpers
# ---------------------------------------------------------------------------------------------
def _glass_path() -> Path | None:
    env = os.environ.get(GLASS_ENV_VAR)
    candidates = [Path(env)] if env else []
    candidates.append(Path(__file__).resolve().parents[2] / "shared" / "data" / "glass.data")
    for path in candidates:
        if path.is_file():
            return path
    return None


@pytest.fixture(scope="module")
def glass():
    path = _glass_path()
    if path is None:
        pytest.skip(f"UCI Glass data not found (set {GLASS_ENV_VAR} or provide shared/data)")
    return load_glass(path)


def exact_log_marginal(K: np.ndarray, y: np.ndarray, m: int = 120) -> float:
    """``log ∫ prod_a sigmoid(y_a f_a) N(f; 0, K) df`` by tensor Gauss-Hermite quadrature.

    Substituting ``f = L z`` (``K = L L^T``) turns the integral into ``E[g(L z)]`` for
    ``z ~ N(0, I)``; the probabilists' Hermite rule with ``m`` nodes per axis is exact for
    polynomials of degree ``2m - 1`` and converges very fast for the smooth integrand.
    """
    nodes, weights = np.polynomial.hermite_e.hermegauss(m)
    weights = weights / weights.sum()
    n = y.size
    Z = np.stack(np.meshgrid(*([nodes] * n), indexing="ij")).reshape(n, -1)
    Wq = np.prod(np.stack(np.meshgrid(*([weights] * n), indexing="ij")).reshape(n, -1), axis=0)
    F = np.linalg.cholesky(K) @ Z
    return float(np.log(np.sum(Wq * np.prod(expit(y[:, None] * F), axis=0))))


class ScaledGPC(GPClassificationLikelihood):
    """Same estimator with signal variance 4: a less Gaussian posterior, a noisier estimator."""

    def kernel(self, theta):
        K = 4.0 * ard_kernel(self.X, theta, jitter=0.0)
        K[np.diag_indices_from(K)] += self.jitter
        return K


# Tiny problem with three points: exact marginal likelihood by quadrature.
X3 = np.array([[0.0], [1.0], [2.5]])
Y3 = np.array([1, 1, -1])
THETA3 = np.array([-1.0])


def _weight_tail_index(lik) -> float:
    """``lambda_max(L_K^T W L_K)`` at the mode for ``THETA3``.

    For a Gaussian ``q`` the importance weights ``w = p(y|f) N(f; 0, K) / q(f)`` have a finite
    ``k``-th moment if ``K^{-1} - (k - 1) W`` is positive definite, i.e. if this index is
    below ``1 / (k - 1)`` (the likelihood is bounded by one and does not help).
    """
    la = lik.laplace(THETA3)
    L = np.linalg.cholesky(la.K)
    return float(np.linalg.eigvalsh(L.T @ (la.W[:, None] * L)).max())


@pytest.fixture(scope="module")
def tiny():
    lik = GPClassificationLikelihood(X3, Y3)
    scaled = ScaledGPC(X3, Y3)
    # unit: weights with finite 4th moment (standard errors are reliable);
    # scaled: finite variance only, but a much poorer Laplace fit and a visible Jensen gap.
    assert _weight_tail_index(lik) < 1.0 / 3.0
    assert _weight_tail_index(scaled) < 1.0
    return {
        "unit": (lik, exact_log_marginal(lik.kernel(THETA3), Y3.astype(float))),
        "scaled": (scaled, exact_log_marginal(scaled.kernel(THETA3), Y3.astype(float))),
    }


def test_quadrature_reference_converged(tiny):
    lik, exact = tiny["scaled"]
    K = lik.kernel(THETA3)
    assert exact_log_marginal(K, Y3.astype(float), m=150) == pytest.approx(exact, abs=1e-10)
    # independent points: f ~ N(0, s2) gives E[sigmoid(f)] = 1/2 for each point
    K_diag = 4.0 * np.eye(2)
    assert exact_log_marginal(K_diag, np.array([1.0, -1.0])) == pytest.approx(2 * np.log(0.5))


# ---------------------------------------------------------------------------------------------
# Kernel and data
# ---------------------------------------------------------------------------------------------
def test_ard_kernel_matches_definition():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(6, 3))
    theta = np.array([0.5, -1.0, 2.0])
    K = ard_kernel(X, theta, jitter=1e-3)
    diff2 = (X[:, None, :] - X[None, :, :]) ** 2
    expected = np.exp(-0.5 * np.sum(diff2 / np.exp(theta), axis=-1)) + 1e-3 * np.eye(6)
    np.testing.assert_allclose(K, expected, rtol=1e-12, atol=1e-14)
    with pytest.raises(ValueError):
        ard_kernel(X, theta[:2])


def test_whiten_synthetic():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 4)) @ rng.normal(size=(4, 4)) + 5.0
    Z = whiten(X)
    np.testing.assert_allclose(Z.mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(np.cov(Z, rowvar=False), np.eye(4), atol=1e-10)
    with pytest.raises(ValueError, match="singular"):
        whiten(np.c_[X[:, :2], np.ones(200)])


def test_load_glass_errors(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="not found"):
        load_glass(tmp_path / "missing.data")
    monkeypatch.delenv(GLASS_ENV_VAR, raising=False)
    with pytest.raises(FileNotFoundError, match=GLASS_ENV_VAR):
        load_glass()
    bad = tmp_path / "bad.data"
    bad.write_text("1,2,3\n4,5,6\n")
    with pytest.raises(ValueError, match="11"):
        load_glass(bad)
    bad.write_text("1,a,b,c,d,e,f,g,h,i,1\n")
    with pytest.raises(ValueError, match="parse"):
        load_glass(bad)
    rows = np.c_[np.arange(1, 21), np.random.default_rng(0).normal(size=(20, 9)), np.full(20, 9)]
    np.savetxt(bad, rows, delimiter=",")
    with pytest.raises(ValueError, match="1..7"):
        load_glass(bad)


def test_load_glass(glass):
    X, y = glass
    assert X.shape == (214, 9)
    assert y.shape == (214,)
    np.testing.assert_allclose(X.mean(axis=0), 0.0, atol=1e-10)
    np.testing.assert_allclose(np.cov(X, rowvar=False), np.eye(9), atol=1e-8)
    assert set(np.unique(y)) == {-1, 1}
    assert np.sum(y == 1) == 163
    assert np.sum(y == -1) == 51


def test_load_glass_env_var(glass, monkeypatch):
    monkeypatch.setenv(GLASS_ENV_VAR, str(_glass_path()))
    X, y = load_glass()
    np.testing.assert_array_equal(X, glass[0])
    np.testing.assert_array_equal(y, glass[1])


def test_glass_estimate_finite_and_reproducible(glass):
    X, y = glass
    lik = GPClassificationLikelihood(X, y, n_importance=100)
    theta = np.zeros(9)
    est1 = lik(theta, np.random.default_rng(42))
    est2 = lik.log_likelihood_estimate(theta, np.random.default_rng(42))
    est3 = GPClassificationLikelihood(X, y)(theta, np.random.default_rng(42))
    assert np.isfinite(est1)
    assert est1 == est2 == est3
    assert lik(theta, np.random.default_rng(43)) != est1
    # near the Laplace value (which is biased low, a few tenths of a nat here)
    laplace = lik.laplace_log_marginal(theta)
    assert -200.0 < laplace < 0.0
    assert abs(est1 - laplace) < 2.0


# ---------------------------------------------------------------------------------------------
# Laplace approximation
# ---------------------------------------------------------------------------------------------
def _small_problem(n=15, seed=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = np.where(X[:, 0] - 0.5 * X[:, 1] + 0.5 * rng.normal(size=n) > 0, 1.0, -1.0)
    K = 3.0 * ard_kernel(X, np.array([0.3, -0.5]), jitter=0.0) + 1e-3 * np.eye(n)
    return K, y


def test_laplace_mode_matches_scipy_optimize():
    K, y = _small_problem()
    la = laplace_approximation(K, y, tol=1e-12)
    K_inv = np.linalg.inv(K)
    t = 0.5 * (y + 1.0)

    def neg_log_joint(f):
        return np.sum(np.logaddexp(0.0, -y * f)) + 0.5 * f @ K_inv @ f

    def grad(f):
        return -(t - expit(f)) + K_inv @ f

    def hess(f):
        p = expit(f)
        return np.diag(p * (1 - p)) + K_inv

    res = optimize.minimize(
        neg_log_joint,
        np.zeros(y.size),
        jac=grad,
        hess=hess,
        method="trust-exact",
        options={"gtol": 1e-9},
    )
    assert np.max(np.abs(grad(res.x))) < 1e-6
    assert la.converged
    np.testing.assert_allclose(la.f_hat, res.x, atol=1e-6)
    np.testing.assert_allclose(la.a, K_inv @ la.f_hat, rtol=1e-6, atol=1e-6)
    p = expit(la.f_hat)
    np.testing.assert_allclose(la.W, p * (1 - p), rtol=1e-12)
    # gradient of the log joint vanishes at the mode
    np.testing.assert_allclose(grad(la.f_hat), 0.0, atol=1e-6)


def test_laplace_quantities_against_dense_formulas():
    K, y = _small_problem(n=8, seed=5)
    la = laplace_approximation(K, y)
    Sigma = np.linalg.inv(np.linalg.inv(K) + np.diag(la.W))
    np.testing.assert_allclose(la.cov, Sigma, rtol=1e-8, atol=1e-10)
    # GPML (3.32), written with dense matrices
    _, logdet_B = np.linalg.slogdet(np.eye(y.size) + np.diag(la.W) @ K)
    expected = (
        -0.5 * la.f_hat @ np.linalg.solve(K, la.f_hat)
        - np.sum(np.logaddexp(0.0, -y * la.f_hat))
        - 0.5 * logdet_B
    )
    assert la.log_marginal == pytest.approx(expected, abs=1e-8)
    # densities of q and of the prior
    rng = np.random.default_rng(0)
    F = la.sample(5, rng)
    assert F.shape == (5, y.size)
    q = stats.multivariate_normal(la.f_hat, Sigma)
    np.testing.assert_allclose(la.log_q(F), q.logpdf(F), rtol=1e-9)
    assert la.log_q(F[0]) == pytest.approx(q.logpdf(F[0]), rel=1e-9)
    prior = stats.multivariate_normal(np.zeros(y.size), K)
    np.testing.assert_allclose(la.log_prior_f(F), prior.logpdf(F), rtol=1e-9)
    # log weights of the estimator = log p(y|f) + log N(f; 0, K) - log q(f) for the same draws
    lw = la.log_importance_weights(5, np.random.default_rng(0))
    loglik = -np.sum(np.logaddexp(0.0, -y * F), axis=1)
    np.testing.assert_allclose(lw, loglik + prior.logpdf(F) - q.logpdf(F), rtol=1e-9)


def test_laplace_samples_have_laplace_moments():
    K, y = _small_problem(n=6, seed=7)
    la = laplace_approximation(K, y)
    F = la.sample(40000, np.random.default_rng(11))
    np.testing.assert_allclose(F.mean(axis=0), la.f_hat, atol=0.05)
    np.testing.assert_allclose(np.cov(F, rowvar=False), la.cov, atol=0.05)


@pytest.mark.parametrize(("case", "tol"), [("unit", 0.05), ("scaled", 0.15)])
def test_laplace_log_marginal_close_to_exact(tiny, case, tol):
    lik, exact = tiny[case]
    approx = lik.laplace_log_marginal(THETA3)
    # Biased but close: observed errors 0.02 (unit) and 0.08 (scaled) nats.
    assert abs(approx - exact) < tol


# ---------------------------------------------------------------------------------------------
# The estimator
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("case", "n_imp"), [("unit", 1), ("unit", 3), ("scaled", 2)])
def test_estimator_unbiased_in_exp(tiny, case, n_imp):
    lik, exact = tiny[case]
    rng = np.random.default_rng(2024)
    n_rep = 20000
    est = np.array(
        [lik.log_likelihood_estimate(THETA3, rng, n_importance=n_imp) for _ in range(n_rep)]
    )
    ratio = np.exp(est - exact)  # p^ / p, unbiased for 1
    se = ratio.std(ddof=1) / np.sqrt(n_rep)
    assert se > 0
    assert abs(ratio.mean() - 1.0) < 4.0 * se
    # ... while the log estimate itself is biased low (Jensen), visibly so in the scaled case
    if case == "scaled":
        assert est.mean() < exact - 5.0 * est.std(ddof=1) / np.sqrt(n_rep)


def test_estimator_log_mean_approaches_exact_as_n_grows(tiny):
    lik, exact = tiny["scaled"]
    laplace_error = abs(lik.laplace_log_marginal(THETA3) - exact)
    rng = np.random.default_rng(7)
    n_rep = 2000
    bias, spread, se = {}, {}, {}
    for n_imp in (1, 10, 100, 1000):
        est = np.array(
            [lik.log_likelihood_estimate(THETA3, rng, n_importance=n_imp) for _ in range(n_rep)]
        )
        bias[n_imp] = est.mean() - exact
        spread[n_imp] = est.std(ddof=1)
        se[n_imp] = spread[n_imp] / np.sqrt(n_rep)
    # Jensen gap E[log p^] - log p ~ -Var(w / p) / (2N) < 0: clearly visible for N = 1 ...
    assert bias[1] < -5.0 * se[1]
    # ... and negligible for large N, where the estimator beats the Laplace approximation
    assert abs(bias[1000]) < 4.0 * se[1000] + 1e-3
    assert abs(bias[100]) < 4.0 * se[100] + 2e-3
    assert abs(bias[100]) < 0.1 * laplace_error
    for small, large in ((1, 10), (10, 100), (100, 1000)):
        assert spread[small] > 2.0 * spread[large]  # ~ sqrt(10) with finite weight variance


def test_log_sum_exp_stability():
    # 1200 independent latent values (tiny lengthscale): p(y|theta) = 2^-n exactly by symmetry,
    # far below the smallest double, so the weights must be combined in log space.
    n = 1200
    X = np.linspace(0.0, 100.0, n)[:, None]
    y = np.where(np.arange(n) % 3 == 0, -1, 1)
    lik = GPClassificationLikelihood(X, y, n_importance=100)
    theta = np.array([-12.0])
    K = lik.kernel(theta)
    np.testing.assert_allclose(K, 1.001 * np.eye(n), atol=1e-200)
    exact = -n * np.log(2.0)
    assert exact < np.log(np.finfo(float).tiny)
    est = np.array([lik(theta, np.random.default_rng(s)) for s in range(5)])
    assert np.all(np.isfinite(est))
    assert np.all(np.abs(est - exact) < 0.5)


# ---------------------------------------------------------------------------------------------
# Robustness
# ---------------------------------------------------------------------------------------------
def _extreme_thetas(d, rng):
    thetas = [np.full(d, 15.0), np.full(d, -15.0), np.full(d, 40.0), np.full(d, -40.0)]
    thetas += [np.full(d, 800.0), np.full(d, -800.0)]
    thetas += [rng.choice([-15.0, 15.0], size=d) for _ in range(4)]
    thetas += [rng.normal(0.0, 10.0, size=d) for _ in range(4)]
    return thetas


def _check_robust(lik, thetas):
    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarnings leak either
        for theta in thetas:
            for value in (lik(theta, rng), lik.laplace_log_marginal(theta)):
                assert isinstance(value, float)
                assert not np.isnan(value)
                assert value < np.inf


def test_extreme_theta_synthetic():
    rng = np.random.default_rng(5)
    X = whiten(rng.normal(size=(60, 3)))
    X = np.r_[X, X[:5]]  # exact duplicates, as in Glass
    y = np.where(X[:, 0] * X[:, 1] > 0, 1, -1)
    lik = GPClassificationLikelihood(X, y)
    thetas = _extreme_thetas(3, rng)
    _check_robust(lik, thetas)
    for theta in thetas[:4]:
        assert np.isfinite(lik(theta, rng))


def test_extreme_theta_glass(glass):
    X, y = glass
    lik = GPClassificationLikelihood(X, y, n_importance=20)
    _check_robust(lik, _extreme_thetas(9, np.random.default_rng(1)))


def test_numerical_failure_gives_minus_inf():
    X = np.array([[0.0], [0.0], [1.0]])  # duplicate rows and no jitter: K is singular
    lik = GPClassificationLikelihood(X, np.array([1, 1, -1]), jitter=0.0)
    assert lik(np.array([0.0]), np.random.default_rng(0)) == -np.inf
    ok = GPClassificationLikelihood(X, np.array([1, 1, -1]))
    assert np.isfinite(ok(np.array([0.0]), np.random.default_rng(0)))
    for bad in (np.array([np.nan]), np.array([np.inf]), np.array([-np.inf])):
        assert ok(bad, np.random.default_rng(0)) == -np.inf
        assert ok.laplace_log_marginal(bad) == -np.inf


def test_input_validation_and_prior():
    X = np.zeros((3, 2))
    with pytest.raises(ValueError):
        GPClassificationLikelihood(X, np.array([0, 1, 1]))
    with pytest.raises(ValueError):
        GPClassificationLikelihood(X, np.array([1, 1]))
    lik = GPClassificationLikelihood(np.eye(3)[:, :2], np.array([1, -1, 1]))
    with pytest.raises(ValueError):
        lik(np.zeros(3), np.random.default_rng(0))
    theta = np.array([1.0, -2.0])
    expected = stats.multivariate_normal(np.zeros(2), 5.0 * np.eye(2)).logpdf(theta)
    assert lik.log_prior(theta) == pytest.approx(expected, rel=1e-12)
    rng = np.random.default_rng(3)
    value = lik.log_posterior_estimate(theta, rng)
    assert value == pytest.approx(
        lik.log_prior(theta) + lik(theta, np.random.default_rng(3)), rel=1e-12
    )
