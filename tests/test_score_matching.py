"""Tests for the kernel-HMC score-matching surrogates (pymc_kameleon.math.score_matching)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg
from scipy.spatial.distance import cdist

from pymc_kameleon.math import compiled
from pymc_kameleon.math.linalg import cholesky_update
from pymc_kameleon.math.rff import RandomFourierFeatures
from pymc_kameleon.math.score_matching import (
    FiniteScoreEstimator,
    LiteScoreEstimator,
    cross_validate,
)
from pymc_kameleon.math.score_matching import finite as sm_finite
from pymc_kameleon.math.score_matching import lite as sm_lite

S_TRUE = np.array([[2.0, 0.9], [0.9, 1.0]])  # non-diagonal target covariance


@pytest.fixture(autouse=True, scope="module")
def _single_threaded_blas():
    """Many small BLAS calls: multi-threaded OpenBLAS is much slower on a busy machine."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover
        yield
        return
    with threadpool_limits(1):
        yield


def _features(bandwidth=1.5, dim=2, n_features=60, seed=0):
    rng = np.random.default_rng(seed)
    return RandomFourierFeatures.draw(dim, n_features, bandwidth, rng)


def _fd_grad(fun, x, h=1e-5):
    e = np.eye(x.size)
    return np.array([(fun(x + h * e[i]) - fun(x - h * e[i])) / (2 * h) for i in range(x.size)])


# --------------------------------------------------------------------------------- lite


def test_lite_system_matches_thesis_matrix_form():
    """b, C of Prop. 3 written literally (sigma = 2 s^2, uncentred data) vs the fast version
    (the internal ``_lite_system``, whose result no public method returns)."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(25, 3)) + 5.0
    s = 1.3
    sigma = 2 * s**2
    K = np.exp(-cdist(X, X, "sqeuclidean") / sigma)
    one = np.ones(len(X))
    b = np.zeros(len(X))
    C = np.zeros((len(X), len(X)))
    for ell in range(X.shape[1]):
        x = X[:, ell]
        D = np.diag(x)
        b += (2 / sigma) * (K @ (x * x) + np.diag(x * x) @ K @ one - 2 * D @ K @ x) - K @ one
        C += (D @ K - K @ D) @ (K @ D - D @ K)
    b_fast, C_fast = sm_lite._lite_system(X, s)
    np.testing.assert_allclose(b_fast, b, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(C_fast, C, rtol=1e-9, atol=1e-9 * np.abs(C).max())


def test_lite_loss_on_training_points_equals_closed_form():
    """Direct held-out loss on the fitted points = 2/(n sigma) a.b + 2/(n sigma^2) a.C.a."""
    X = np.random.default_rng(2).normal(size=(40, 2))
    s, lam = 0.8, 0.5
    est = LiteScoreEstimator(s, lam).fit(X)
    b, C = sm_lite._lite_system(X, s)  # checked against the literal form above
    n, sigma, a = len(X), 2 * s**2, est.alpha
    closed = 2 / (n * sigma) * a @ b + 2 / (n * sigma**2) * a @ C @ a
    assert est.score_matching_loss(X) == pytest.approx(closed, rel=1e-10)


def test_lite_closed_form_is_minimiser_of_direct_objective():
    """alpha = -(sigma/2)(C + lam I)^{-1} b minimises J_direct + lam/(2 n s^4) |alpha|^2.

    The quadratic is recovered from the *direct* objective (kernel derivatives at the data)
    by polarisation and minimised by brute force.  The thesis' constant n sigma^2 lam / 2
    does not give the closed form.
    """
    X = np.random.default_rng(3).normal(size=(15, 2))
    s, lam = 0.9, 0.3
    n = len(X)
    est = LiteScoreEstimator(s, lam).fit(X)
    alpha_closed = est.alpha.copy()

    def direct(alpha):
        est.alpha = np.asarray(alpha, dtype=float)
        return est.score_matching_loss(X)

    e = np.eye(n)
    q0 = direct(np.zeros(n))
    qp = np.array([direct(e[i]) for i in range(n)])
    qm = np.array([direct(-e[i]) for i in range(n)])
    grad0 = (qp - qm) / 2
    H = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            H[i, j] = direct(e[i] + e[j]) - qp[i] - qp[j] + q0
    H = 0.5 * (H + H.T)

    def minimiser(reg):
        return np.linalg.solve(H + 2 * reg * np.eye(n), -grad0)

    np.testing.assert_allclose(minimiser(lam / (2 * n * s**4)), alpha_closed, rtol=1e-7)
    sigma = 2 * s**2
    thesis = minimiser(0.5 * n * sigma**2 * lam)
    assert np.max(np.abs(thesis - alpha_closed)) > 0.1 * np.max(np.abs(alpha_closed))


def test_lite_grad_matches_finite_differences():
    rng = np.random.default_rng(4)
    est = LiteScoreEstimator(1.1, 0.2).fit(rng.normal(size=(60, 3)))
    for x in rng.normal(size=(4, 3)):
        np.testing.assert_allclose(est.grad(x), _fd_grad(est.log_density, x), rtol=1e-6, atol=1e-8)
    rows = rng.normal(size=(5, 3))
    assert est.grad(rows).shape == (5, 3)
    np.testing.assert_allclose(est.grad(rows)[2], est.grad(rows[2]))
    assert est.log_density(rows).shape == (5,)


def test_lite_gradient_vanishes_far_from_data():
    est = LiteScoreEstimator(1.0, 0.1).fit(np.random.default_rng(5).normal(size=(50, 2)))
    assert np.linalg.norm(est.grad(np.array([30.0, -30.0]))) < 1e-100


# ------------------------------------------------------------------------------- finite


def _sums_from_definitions(features, X):
    """Cbar = sum_i sum_l dphi_l dphi_l^T; bbar = -sum_i sum_l d^2 phi/dx_l^2 (by FD)."""
    m, d, h = features.n_features, features.dim, 1e-4
    Cbar, bbar = np.zeros((m, m)), np.zeros(m)
    for x in X:
        J = features.jacobian(x)  # (m, d)
        for ell in range(d):
            Cbar += np.outer(J[:, ell], J[:, ell])
            dx = h * np.eye(d)[ell]
            bbar -= (features.jacobian(x + dx)[:, ell] - features.jacobian(x - dx)[:, ell]) / (
                2 * h
            )
    return Cbar, bbar


def test_finite_fit_is_ridge_solution_in_mean_form():
    feats = _features()
    X = np.random.default_rng(6).normal(size=(40, 2))
    lam = 0.05
    Cbar, bbar = _sums_from_definitions(feats, X)
    n = len(X)
    theta = np.linalg.solve(Cbar / n + lam * np.eye(feats.n_features), bbar / n)
    est = FiniteScoreEstimator(feats, lam).fit(X)
    np.testing.assert_allclose(est.theta, theta, rtol=1e-5, atol=1e-8)
    assert est.n_seen == n


def test_finite_updates_equal_explicit_formula_and_fresh_factor():
    feats = _features()
    rng = np.random.default_rng(7)
    X, Y = rng.normal(size=(30, 2)), rng.normal(size=(12, 2)) + 0.5
    lam = 0.02
    est = FiniteScoreEstimator(feats, lam).fit(X)
    for y in Y[:7]:
        est.update(y)
    est.update(Y[7:])  # several rows at once
    assert est.n_seen == len(X) + len(Y)
    assert est.ridge == lam * len(X)
    Cbar, bbar = _sums_from_definitions(feats, np.vstack([X, Y]))
    A = Cbar + lam * len(X) * np.eye(feats.n_features)
    np.testing.assert_allclose(est.theta, np.linalg.solve(A, bbar), rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(est.cholesky_factor, np.linalg.cholesky(A), atol=1e-10)


def test_finite_update_before_fit_uses_ridge_lam():
    feats = _features()
    Y = np.random.default_rng(8).normal(size=(10, 2))
    lam = 0.3
    est = FiniteScoreEstimator(feats, lam)
    for y in Y:
        est.update(y)
    Cbar, bbar = _sums_from_definitions(feats, Y)
    A = Cbar + lam * np.eye(feats.n_features)
    np.testing.assert_allclose(est.theta, np.linalg.solve(A, bbar), rtol=1e-5, atol=1e-8)
    with pytest.raises(ValueError):
        FiniteScoreEstimator(feats, 0.0).update(Y[0])


def test_finite_update_never_refactorises(monkeypatch):
    est = FiniteScoreEstimator(_features(), 0.1).fit(np.zeros((3, 2)))

    def forbidden(*args, **kwargs):
        raise AssertionError("update() must not factorise from scratch")

    monkeypatch.setattr(sm_finite, "safe_cholesky", forbidden)
    monkeypatch.setattr(scipy.linalg, "cholesky", forbidden)
    monkeypatch.setattr(np.linalg, "cholesky", forbidden)
    est.update(np.ones(2))


@pytest.mark.parametrize("update", [cholesky_update, compiled.cholesky_update],
                         ids=["reference", "compiled"])
def test_rank_d_cholesky_update(update):
    """Both versions against a fresh factorisation of ``A + V V^T``."""
    rng = np.random.default_rng(9)
    m, r = 40, 5
    B = rng.normal(size=(m, 2 * m))
    A = B @ B.T / m + 0.1 * np.eye(m)
    V = rng.normal(size=(m, r))
    V[3] = 0.0  # a row with nothing to rotate
    L = np.linalg.cholesky(A)
    update(L, V.copy())
    np.testing.assert_allclose(L, np.linalg.cholesky(A + V @ V.T), atol=1e-12)
    assert np.allclose(L, np.tril(L))


def test_finite_held_out_loss_equals_quadratic_form():
    feats = _features()
    rng = np.random.default_rng(10)
    est = FiniteScoreEstimator(feats, 0.01).fit(rng.normal(size=(50, 2)))
    X_test = rng.normal(size=(20, 2)) * 1.5
    Cbar, bbar = _sums_from_definitions(feats, X_test)
    n = len(X_test)
    expected = 0.5 * est.theta @ (Cbar / n) @ est.theta - est.theta @ (bbar / n)
    assert est.score_matching_loss(X_test) == pytest.approx(expected, rel=1e-6)


def test_finite_grad_matches_finite_differences():
    rng = np.random.default_rng(11)
    feats = _features(dim=3)
    est = FiniteScoreEstimator(feats, 0.01).fit(rng.normal(size=(50, 3)))
    for x in rng.normal(size=(4, 3)):
        np.testing.assert_allclose(est.grad(x), _fd_grad(est.log_density, x), rtol=1e-6, atol=1e-8)
    rows = rng.normal(size=(5, 3))
    np.testing.assert_allclose(est.grad(rows)[3], est.grad(rows[3]))


# ------------------------------------------------------------- statistical behaviour


def _gradient_rel_error(est, seed=123):
    """RMS relative error of grad f vs the true score -S^{-1} x within one sd (Mahalanobis)."""
    L = np.linalg.cholesky(S_TRUE)
    Z = np.random.default_rng(seed).normal(size=(2000, 2))
    T = Z[np.sum(Z**2, axis=1) <= 1.0][:300] @ L.T
    g_true = -np.linalg.solve(S_TRUE, T.T).T
    err = np.sum((est.grad(T) - g_true) ** 2, axis=1)
    return float(np.sqrt(np.mean(err) / np.mean(np.sum(g_true**2, axis=1))))


@pytest.mark.parametrize("kind", ["lite", "finite"])
def test_gradient_approaches_gaussian_score(kind):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1200, 2)) @ np.linalg.cholesky(S_TRUE).T
    bws = [0.5, 1.0, 2.0, 4.0, 8.0]
    if kind == "lite":
        make, lams = LiteScoreEstimator, [1e-2, 1e-1, 1.0, 10.0]
    else:
        base = RandomFourierFeatures.draw(2, 200, 1.0, rng)

        def make(s, lam):
            return FiniteScoreEstimator(base.with_bandwidth(s), lam)

        lams = [1e-5, 1e-4, 1e-3, 1e-2]
    cv = cross_validate(X[:300], bws, lams, make, rng=1)
    err_small = _gradient_rel_error(make(cv.best_bandwidth, cv.best_lam).fit(X[:300]))
    err_large = _gradient_rel_error(make(cv.best_bandwidth, cv.best_lam).fit(X))
    # calibrated on seeds 0-2: 0.13-0.28 at n = 300, 0.05-0.12 at n = 1200
    assert err_small < 0.35
    assert err_large < 0.15
    assert err_large < 0.7 * err_small


def _two_blobs(n, scale, rng):
    X = rng.normal(size=(n, 2))
    X[:, 0] += rng.choice([-2.0, 2.0], size=n)
    return scale * X


@pytest.mark.parametrize("kind", ["lite", "finite"])
def test_cv_bandwidth_scales_with_data(kind):
    """A bimodal target at scales 1 and 10: CV bandwidths are interior and scale ~10x.

    (For a single Gaussian the lite loss keeps decreasing with the bandwidth, since a quadratic
    log density is the large-bandwidth limit, so the optimum would sit at the grid edge.)
    """
    bws = np.logspace(0.0, 2.5, 6)  # 1 .. 316
    base = RandomFourierFeatures.draw(2, 100, 1.0, np.random.default_rng(2))
    chosen = []
    for scale in (1.0, 10.0):
        X = _two_blobs(300, scale, np.random.default_rng(3))
        if kind == "lite":
            make, lams = LiteScoreEstimator, np.logspace(-2, 4, 4)
        else:

            def make(s, lam):
                return FiniteScoreEstimator(base.with_bandwidth(s), lam)

            lams = np.logspace(-8, 0, 5)
        cv = cross_validate(X, bws, lams, make, rng=4)
        assert 0 < np.flatnonzero(bws == cv.best_bandwidth)[0] < len(bws) - 1
        assert np.isfinite(cv.best_loss) and cv.losses.shape == (len(bws), len(lams))
        chosen.append(cv.best_bandwidth)
    assert 10 / 3 <= chosen[1] / chosen[0] <= 30


def test_cv_failures_count_as_inf():
    X = np.random.default_rng(5).normal(size=(20, 2))

    class Broken:
        def __init__(self, s, lam):
            self.s = s

        def fit(self, X):
            if self.s == 1.0:
                raise np.linalg.LinAlgError("singular")
            return self

        def score_matching_loss(self, X):
            return np.nan if self.s == 2.0 else self.s

    cv = cross_validate(X, [1.0, 2.0, 3.0, 4.0], [0.1], Broken, n_folds=4, rng=0)
    np.testing.assert_array_equal(cv.losses[:, 0], [np.inf, np.inf, 3.0, 4.0])
    assert cv.best_bandwidth == 3.0 and cv.best_loss == 3.0


def test_blocked_cross_validation_uses_contiguous_folds():
    rng = np.random.default_rng(5)
    X = np.cumsum(rng.normal(size=(60, 2)), axis=0)  # an autocorrelated path
    res = cross_validate(X, [2.0], [0.1], LiteScoreEstimator, n_folds=3, shuffle=False)
    blocks = np.array_split(np.arange(60), 3)
    manual = np.mean([
        LiteScoreEstimator(2.0, 0.1).fit(np.delete(X, b, axis=0)).score_matching_loss(X[b])
        for b in blocks
    ])
    assert res.losses[0, 0] == pytest.approx(manual, rel=1e-12)
    shuffled = cross_validate(X, [2.0], [0.1], LiteScoreEstimator, n_folds=3, rng=0)
    assert shuffled.losses[0, 0] != pytest.approx(manual, rel=1e-6)
