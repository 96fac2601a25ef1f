"""The compiled per-iteration numerics agree with their NumPy references to 1e-10."""

import numpy as np
import pytest

from pymc_kameleon.math import compiled, kamh
from pymc_kameleon.math.jit import HAVE_NUMBA
from pymc_kameleon.math.kamh import kamh_gram, kamh_gram_t, kamh_grams
from pymc_kameleon.math.linalg import (
    MultivariateNormal,
    cholesky_update,
    gaussian_factor,
    gaussian_logpdf,
    lowrank_root,
    refine_lowrank_root,
    safe_cholesky,
)
from pymc_kameleon.math.rff import RandomFourierFeatures, full_gram, lowrank_gram

pytestmark = pytest.mark.skipif(not HAVE_NUMBA, reason="numba not available")

RTOL = 1e-10


def _close(a, b):
    np.testing.assert_allclose(a, b, rtol=RTOL, atol=RTOL * np.max(np.abs(b)))


@pytest.mark.parametrize("d, n", [(1, 5), (2, 300), (8, 1000), (33, 200)])
def test_kamh_gram(d, n):
    rng = np.random.default_rng(d)
    Z, y = rng.normal(size=(n, d)) + 3.0, rng.normal(size=d) + 3.0
    Zt = np.ascontiguousarray(Z.T)
    for s in (0.3, 1.0, 5.0):
        _close(kamh_gram_t(y, Zt, s), kamh_gram(y, Z, s))


@pytest.mark.parametrize("d, n, m", [(1, 5, 3), (2, 500, 1000), (9, 200, 50)])
def test_kamh_grams(d, n, m):
    """SMC's batched Gram: the compiled loop per point against the NumPy blocks."""
    rng = np.random.default_rng(d)
    Z, Y = rng.normal(size=(n, d)) + 3.0, rng.normal(size=(m, d)) + 3.0
    for s in (0.3, 1.0, 5.0):
        _close(kamh_grams(Y, Z, s), kamh._kamh_grams_numpy(Y, Z, s))
    # a strided view of the points (a column slice) is read as its values
    wide = np.column_stack([Y, Y])
    np.testing.assert_array_equal(kamh_grams(wide[:, :d], Z, 1.0), kamh_grams(Y, Z, 1.0))


@pytest.mark.parametrize("embedding", ["sincos", "phase"])
# d and r odd and even: the compiled product works in blocks of 2 x 4 with remainders
@pytest.mark.parametrize("d, D, r", [(1, 20, 3), (2, 200, 17), (10, 500, 160), (7, 300, 22),
                                     (30, 500, 500), (33, 400, 97)])
def test_rff_lowrank_gram(embedding, d, D, r):
    rng = np.random.default_rng(D + r)
    rff = RandomFourierFeatures.draw(d, D, 1.7, rng, embedding, "halton")
    root = rng.normal(size=(r, D)) / np.sqrt(D)
    y = rng.normal(size=d)
    expected = lowrank_gram(y, rff.omega, rff.phase, root, embedding == "sincos")
    _close(expected, rff.lowrank_gram(y, root))
    omega_t = np.ascontiguousarray(rff.omega.T)
    _close(compiled.rff_lowrank_gram_t(y, omega_t, rff.phase, root, embedding == "sincos"),
           expected)


@pytest.mark.parametrize("embedding", ["sincos", "phase"])
@pytest.mark.parametrize("d, D", [(1, 20), (2, 200), (10, 500), (30, 500)])
def test_rff_full_gram(embedding, d, D):
    rng = np.random.default_rng(D + d)
    rff = RandomFourierFeatures.draw(d, D, 1.7, rng, embedding, "halton")
    B = rng.normal(size=(D + 5, D)) / D
    cov = 0.5 * (B.T @ B + (B.T @ B).T)
    y = rng.normal(size=d)
    J = rff.jacobian(y)
    expected = full_gram(y, rff.omega, rff.phase, cov, embedding == "sincos")
    _close(expected, np.einsum("ia,ij,jb->ab", J, cov, J))  # independent of the reference
    _close(compiled.rff_full_gram(y, rff.omega, rff.phase, cov, embedding == "sincos"),
           expected)


@pytest.mark.parametrize("embedding", ["sincos", "phase"])
@pytest.mark.parametrize("d, D", [(1, 20), (3, 200), (10, 400)])
def test_rff_leapfrog(embedding, d, D):
    """The compiled leapfrog with the KMC finite gradient against ``hmc.leapfrog`` with the
    estimator's NumPy gradient (and ``J^T theta`` from the Jacobian, independently)."""
    from pymc_kameleon.math.hmc import leapfrog
    from pymc_kameleon.math.score_matching import FiniteScoreEstimator

    rng = np.random.default_rng(d + D)
    rff = RandomFourierFeatures.draw(d, D, 1.5, rng, embedding, "halton")
    X = rng.normal(size=(300, d)) * 1.3 + 0.5
    est = FiniteScoreEstimator(rff, lam=1e-3).fit(X)
    q, p = rng.normal(size=d), rng.normal(size=d)
    np.testing.assert_allclose(est.grad(q), rff.jacobian(q).T @ est.theta, rtol=1e-12)
    for step, n_steps in [(0.1, 0), (0.1, 1), (0.05, 20), (rng.uniform(0.02, 0.1, size=d), 7)]:
        expected = leapfrog(q, p, est.grad, step, n_steps)
        got = est.leapfrog(q, p, step, n_steps)
        for a, b in zip(got, expected, strict=True):
            _close(a, b)
    assert est.leapfrog(q, p, 0.1, 3)[0] is not q  # new arrays, inputs untouched


@pytest.mark.parametrize("m, r", [(1, 1), (7, 3), (200, 100)])
def test_cholesky_update(m, r):
    """The compiled rank-r update of KMC finite's factor against the NumPy reference (both
    arrays updated in place), shapes of the finite surrogate included (m = 200 features,
    10 points x 10 dimensions)."""
    rng = np.random.default_rng(m + r)
    B = rng.normal(size=(m, m + 2))
    L = np.linalg.cholesky(B @ B.T / m + 1e-3 * np.eye(m))
    V = rng.normal(size=(m, r))
    V[m // 2] = 0.0  # a row with nothing to rotate
    L_ref, V_ref = L.copy(), V.copy()
    cholesky_update(L_ref, V_ref)
    compiled.cholesky_update(L, V)
    _close(L, L_ref)
    np.testing.assert_allclose(V, V_ref, atol=RTOL * np.abs(L_ref).max())


@pytest.mark.parametrize("d", [1, 2, 10, 100])
def test_gaussian_factor_and_logpdf(d):
    rng = np.random.default_rng(d)
    B = rng.normal(size=(d + 3, d))
    G = B.T @ B
    L, half_logdet, ok = compiled.gaussian_factor(G, 0.01, 0.7)
    L_ref, half_ref, ok_ref = gaussian_factor(G, 0.01, 0.7)
    assert ok and ok_ref
    _close(L, L_ref)
    assert half_logdet == pytest.approx(half_ref, rel=RTOL)
    _close(L, safe_cholesky(0.01 * np.eye(d) + 0.7 * G)[0])
    mean, x = rng.normal(size=d), rng.normal(size=d)
    expected = MultivariateNormal(mean, L_ref).logpdf(x)
    assert gaussian_logpdf(x, mean, L_ref, half_ref) == pytest.approx(expected, rel=RTOL)
    assert compiled.gaussian_logpdf(x, mean, L, half_logdet) == pytest.approx(expected, rel=RTOL)


@pytest.mark.parametrize("bad", [-1.0, np.nan, np.inf])
def test_gaussian_factor_reports_failure(bad):
    G = np.diag([1.0, bad])
    for factor in (compiled.gaussian_factor, gaussian_factor):
        assert not factor(G, 1e-3 if bad == -1.0 else 1.0, 1.0)[2]


def test_lowrank_root():
    rng = np.random.default_rng(0)
    U = np.linalg.qr(rng.normal(size=(50, 50)))[0]
    w = 2.0 ** -np.arange(50.0)
    C = (U * w) @ U.T
    full = lowrank_root(C, 0.0)
    _close(full.T @ full, C)
    R = lowrank_root(C, 1e-3)
    # 2^-k: the tail from k on holds 2^-k / 2 of the trace (2) -> keep 10 eigenpairs
    assert R.shape == (10, 50)
    assert np.trace(C - R.T @ R) <= 1e-3 * np.trace(C)


def _feature_like_cov(rng, D=120, n=3000):
    """A covariance with a slowly decaying spectrum, as random-feature covariances have."""
    X = rng.normal(size=(n, D)) * (1.0 + np.arange(D)) ** -0.7
    return np.cov(X.T)


def test_refine_lowrank_root_converges_to_the_truncated_eigendecomposition():
    rng = np.random.default_rng(3)
    C = _feature_like_cov(rng)
    exact = lowrank_root(C, 0.05)
    R0, _ = refine_lowrank_root(C, None, 0.05, rng)  # no basis yet: the exact factor
    np.testing.assert_allclose(R0.T @ R0, exact.T @ exact, atol=1e-12)
    # from a poor (random, too small) basis it converges, growing the basis as needed
    basis = np.linalg.qr(rng.normal(size=(C.shape[0], 16)))[0]
    for _ in range(30):
        R, basis = refine_lowrank_root(C, basis, 0.05, rng)
        # Ritz values interlace: the rank is never below the exact rule's, and a basis too
        # small to hold the trace grows within the call: every factor meets the tolerance
        assert R.shape[0] >= exact.shape[0], (R.shape, exact.shape)
        assert np.trace(C - R.T @ R) <= 0.05 * np.trace(C) * (1 + 1e-12)
    assert R.shape == exact.shape
    np.testing.assert_allclose(R.T @ R, exact.T @ exact, atol=1e-6 * np.abs(C).max())
    assert np.allclose(basis.T @ basis, np.eye(basis.shape[1]))


def test_refine_lowrank_root_follows_a_growing_history():
    """Warm-started once per snapshot of an accumulating covariance, the factor stays
    within the tolerance of the snapshot (the use in FastKameleonStep's tuning)."""
    rng = np.random.default_rng(4)
    D = 80
    scales = (1.0 + np.arange(D)) ** -0.8
    X = rng.normal(size=(4000, D)) * scales
    R, basis = refine_lowrank_root(np.cov(X[:200].T), None, 0.1, rng)
    for n in range(300, 4001, 100):
        C = np.cov(X[:n].T)
        R, basis = refine_lowrank_root(C, basis, 0.1, rng)
        assert np.trace(C - R.T @ R) <= 0.1 * np.trace(C) + 1e-12
        assert lowrank_root(C, 0.1).shape[0] <= R.shape[0] <= basis.shape[1]


@pytest.mark.parametrize("case", ["graded", "dependent"])
def test_orthonormalise_spans_the_columns(case):
    """Cholesky QR on scaled columns where it is accurate, Householder QR otherwise: either
    way orthonormal columns spanning those given."""
    from pymc_kameleon.math.linalg import orthonormalise

    rng = np.random.default_rng(6)
    D, k = 60, 12
    A = np.linalg.qr(rng.normal(size=(D, k)))[0] * np.logspace(0, -9, k)  # a power step
    if case == "dependent":  # nearly dependent columns: the Cholesky route is not accurate
        A[:, 1] = A[:, 0] + 1e-13 * rng.normal(size=D)
    Q = orthonormalise(A)
    np.testing.assert_allclose(Q.T @ Q, np.eye(k), atol=1e-12)
    np.testing.assert_allclose(Q @ (Q.T @ A), A, atol=1e-12 * np.abs(A).max())
