"""Unit tests: robust Cholesky, Gaussian densities, log-sum-exp, mixture EM, online summaries,
adaptation rules."""

import numpy as np
import pytest
from scipy import stats
from scipy.linalg import cho_solve
from scipy.special import logsumexp as scipy_logsumexp

from pymc_kameleon.adaptation import GeometricSchedule, RobbinsMonro
from pymc_kameleon.math import mixture
from pymc_kameleon.math.importance import logsumexp
from pymc_kameleon.math.kernels import distinct_rows
from pymc_kameleon.math.linalg import MultivariateNormal, ridge_solves, safe_cholesky
from pymc_kameleon.math.online import OnlineMeanCov, Reservoir, WeightedReservoir


def test_safe_cholesky_plain_singular_and_indefinite():
    A = np.array([[4.0, 2.0], [2.0, 3.0]])
    L, jitter = safe_cholesky(A)
    assert jitter == 0.0
    np.testing.assert_allclose(L @ L.T, A)

    singular = np.ones((3, 3))
    L, jitter = safe_cholesky(singular)
    assert 0 < jitter < 1e-3
    np.testing.assert_allclose(L @ L.T, singular + jitter * np.eye(3), atol=1e-12)

    indefinite = np.diag([1.0, -1.0])
    L, jitter = safe_cholesky(indefinite)
    assert np.isnan(jitter) and np.all(np.isfinite(L))
    with pytest.raises(ValueError, match="non-finite"):
        safe_cholesky(np.array([[np.nan]]))


def test_safe_cholesky_ill_conditioned_is_deterministic():
    rng = np.random.default_rng(0)
    V = rng.normal(size=(50, 2))
    A = V @ V.T  # rank 2 in 50 dimensions
    L1, j1 = safe_cholesky(A)
    L2, j2 = safe_cholesky(A)
    assert j1 == j2 and np.array_equal(L1, L2)
    assert np.all(np.isfinite(L1))


@pytest.mark.parametrize("a", [np.log([1.0, 2.0, 3.0]), np.array([-1e4, -1e4 - 1.0, 3.0]),
                               np.array([-np.inf, -np.inf]), np.array([]),
                               np.array([np.inf, 1.0]), np.array([np.nan, 1.0]),
                               np.array([-np.inf, 2.0])])
def test_logsumexp_is_scipys(a):
    np.testing.assert_allclose(logsumexp(a), scipy_logsumexp(a), rtol=1e-13)
    A = np.stack([a, a[::-1]]) if a.size else np.zeros((2, 0))
    for axis in (0, 1):
        np.testing.assert_allclose(logsumexp(A, axis=axis), scipy_logsumexp(A, axis=axis),
                                   rtol=1e-13)


def test_em_refine_factors_a_singular_component_with_jitter():
    """The batched factorisation falls back to safe_cholesky's jitter, one by one, when a
    component's covariance is singular (here its points lie on a line)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 2))
    C = np.array([np.eye(2), np.ones((2, 2))])  # the second is singular
    assert np.allclose(mixture._cholesky_factors(C[:1]), np.eye(2))
    L = mixture._cholesky_factors(C)
    np.testing.assert_array_equal(L[1], safe_cholesky(C[1])[0])
    w, m, covs = mixture.em_refine(X, np.array([0.5, 0.5]), np.array([[-1.0, 0], [1.0, 0]]),
                                   C, 20)
    assert np.isclose(w.sum(), 1.0) and np.all(np.isfinite(covs))
    with pytest.raises(ValueError, match="non-finite"):
        mixture._cholesky_factors(np.array([np.eye(2), np.full((2, 2), np.nan)]))


def test_ridge_solves_are_the_safe_cholesky_solves():
    """Bit for bit the solves of ``safe_cholesky(A + r I)`` (the route they replace in the
    cross-validations: a held-out loss that ties within rounding would otherwise pick
    another ridge and change the chain), close to an independent solve, the jitter route
    where the factorisation fails, and ``None`` for non-finite matrices."""
    rng = np.random.default_rng(5)
    V = rng.normal(size=(40, 30))
    A = V @ V.T - 0.3 * (V[:, :5] @ V[:, :5].T)  # from products: symmetric up to rounding
    A[0, 1] += 1e-12  # and slightly not
    b = rng.normal(size=40)
    ridges = [0.0, 1e-6, 1e-2, 1.0, 1e3]  # 0: singular (rank 30), factored with jitter
    for r, x in zip(ridges, ridge_solves(A, b, ridges), strict=True):
        M = A.copy()
        M[np.diag_indices_from(M)] += r
        L, jitter = safe_cholesky(M)
        assert (jitter > 0) == (r == 0.0)
        np.testing.assert_array_equal(x, cho_solve((L, True), b, check_finite=False))
        if r >= 1e-2:
            np.testing.assert_allclose(x, np.linalg.solve(0.5 * (M + M.T), b), rtol=1e-8)
    A[3, 3] = np.nan
    assert ridge_solves(A, b, [1.0, 2.0]) == [None, None]
    assert ridge_solves(np.eye(2), np.ones(2), [np.inf]) == [None]


def test_mvn_logpdf_and_sampling_match_scipy():
    rng = np.random.default_rng(1)
    cov = np.array([[2.0, 0.9, 0.0], [0.9, 1.0, 0.3], [0.0, 0.3, 0.5]])
    mean = np.array([1.0, -1.0, 0.5])
    q = MultivariateNormal.from_cov(mean, cov)
    ref = stats.multivariate_normal(mean, cov)
    for x in rng.normal(size=(4, 3)):
        assert q.logpdf(x) == pytest.approx(ref.logpdf(x), rel=1e-12)
    draws = np.array([q.sample(rng) for _ in range(20000)])
    assert np.abs(np.cov(draws.T) - cov).max() < 0.08
    assert np.abs(draws.mean(axis=0) - mean).max() < 0.05


def test_welford_equals_batch_formulas():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 4)) @ rng.normal(size=(4, 4)) + 5.0
    seq = OnlineMeanCov(4)
    for x in X:
        seq.update(x)
    np.testing.assert_allclose(seq.mean, X.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(seq.cov, np.cov(X.T, bias=True), rtol=1e-10)
    chunked = OnlineMeanCov(4)
    for chunk in np.array_split(X, 7):
        chunked.update_batch(chunk)
    np.testing.assert_allclose(chunked.cov, seq.cov, rtol=1e-10)
    assert chunked.count == seq.count == 300


def test_weighted_batch_equals_repeated_rows():
    # a chain's history as distinct points with multiplicities: the same moments
    rng = np.random.default_rng(5)
    X = rng.normal(size=(40, 3)) * [1.0, 10.0, 0.1] + 3.0
    reps = rng.integers(1, 6, size=40)
    full = OnlineMeanCov(3)
    full.update_batch(X[:7])
    full.update_batch(np.repeat(X[7:], reps[7:], axis=0))
    weighted = OnlineMeanCov(3)
    weighted.update_batch(X[:7])
    weighted.update_batch(X[7:], weights=reps[7:])
    np.testing.assert_allclose(weighted.mean, full.mean, rtol=1e-12)
    np.testing.assert_allclose(weighted.cov, full.cov, rtol=1e-10)
    assert weighted.count == full.count == 7 + reps[7:].sum()
    # and against numpy's frequency-weighted covariance
    np.testing.assert_allclose(
        weighted.cov,
        np.cov(X.T, fweights=np.r_[np.ones(7, int), reps[7:]], bias=True), rtol=1e-10)


def test_reservoir_is_uniform_over_the_stream():
    capacity, n_stream, reps = 5, 40, 4000
    rng = np.random.default_rng(3)
    counts = np.zeros(n_stream)
    for _ in range(reps):
        res = Reservoir(capacity, 1)
        for i in range(n_stream):
            res.add(np.array([float(i)]), rng)
        counts[res.points[:, 0].astype(int)] += 1
    expected = reps * capacity / n_stream
    chi2 = np.sum((counts - expected) ** 2 / expected)
    assert stats.chi2(n_stream - 1).sf(chi2) > 1e-3
    # a biased scheme (keep the first items) would be rejected by the same statistic
    biased = np.zeros(n_stream)
    biased[:capacity] = reps
    assert stats.chi2(n_stream - 1).sf(np.sum((biased - expected) ** 2 / expected)) < 1e-10


def test_weighted_reservoir_keeps_a_point_with_its_weights_share():
    """Capacity 1: point i is kept with probability w_i / sum(w) (A-Res's defining
    property), chi-square against those shares; equal weights are uniform; the uniform
    shares are rejected for unequal weights by the same statistic."""
    weights = np.array([1.0, 2.0, 7.0, 0.5, 4.0])
    rng = np.random.default_rng(5)
    reps = 8000

    def counts(log_w):
        out = np.zeros(len(log_w))
        for _ in range(reps):
            res = WeightedReservoir(1, 1)
            for i, lw in enumerate(log_w):
                res.add(np.array([float(i)]), lw, rng)
            out[int(res.points[0, 0])] += 1
        return out

    def pvalue(got, shares):
        expected = reps * shares
        return stats.chi2(len(shares) - 1).sf(np.sum((got - expected) ** 2 / expected))

    got = counts(np.log(weights))
    assert pvalue(got, weights / weights.sum()) > 1e-3
    assert pvalue(got, np.full(5, 0.2)) < 1e-10
    assert pvalue(counts(np.zeros(5)), np.full(5, 0.2)) > 1e-3
    res = WeightedReservoir(3, 2)
    for i in range(2):
        res.add(np.full(2, float(i)), 0.0, rng)
    assert res.points.shape == (2, 2) and res.seen == 2
    with pytest.raises(ValueError, match="capacity"):
        WeightedReservoir(0, 1)


def test_robbins_monro_reaches_target_acceptance():
    """Acceptance exp(-scale) decreases in the scale; RM must find scale = -log(target)."""
    rng = np.random.default_rng(4)
    rm = RobbinsMonro(initial=10.0, target=0.234, exponent=0.6)
    for _ in range(20000):
        p = np.exp(-rm.value)
        rm.update(float(rng.uniform() < p))  # noisy 0/1 acceptance, as in MCMC
    assert rm.value == pytest.approx(-np.log(0.234), rel=0.1)


def test_robbins_monro_at_floor():
    rm = RobbinsMonro(initial=1.0, target=0.5, lower=0.5)
    assert not rm.at_floor
    for _ in range(50):
        rm.update(0.0)
    assert rm.value == 0.5 and rm.at_floor
    rm.rescale(3.0)  # a new natural scale moves value and bound together
    assert rm.at_floor
    rm.update(1.0)
    assert not rm.at_floor
    assert not RobbinsMonro(initial=1e-300, target=0.5).at_floor  # no lower bound


def test_robbins_monro_validation():
    with pytest.raises(ValueError):
        RobbinsMonro(initial=-1.0, target=0.2)
    with pytest.raises(ValueError):
        RobbinsMonro(initial=1.0, target=1.5)
    with pytest.raises(ValueError):
        RobbinsMonro(initial=1.0, target=0.2, exponent=0.4)


def test_geometric_schedule():
    sched = GeometricSchedule(first=10, ratio=2.0)
    events, t = [], sched.first
    while t <= 200:
        events.append(t)
        t = sched.next_after(t)
    assert events == [10, 20, 40, 80, 160]
    assert sched.next_after(3) == 10
    assert GeometricSchedule(first=5, ratio=1.0).next_after(5) == 6


def test_distinct_rows_are_np_unique_rows_in_chain_order():
    """The byte-string comparison finds the rows np.unique(axis=0) finds, signed zeros
    included, each at its first occurrence and in the original order."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 4))
    X = X[rng.integers(0, 300, size=1000)]  # repeats, as a chain's rejections make
    X[::7, 1] = 0.0
    X[3::7, 1] = -0.0
    _, first = np.unique(X, axis=0, return_index=True)
    np.testing.assert_array_equal(distinct_rows(X), X[np.sort(first)])
    rows, counts = distinct_rows(X, return_counts=True)
    np.testing.assert_array_equal(rows, X[np.sort(first)])
    assert counts.sum() == len(X)
    np.testing.assert_array_equal(counts, [np.sum(np.all(X == r, axis=1)) for r in rows])
