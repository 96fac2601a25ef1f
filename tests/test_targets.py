"""Tests of the synthetic targets and model factories.

The banana and the flower (``pymc_kameleon.models.targets``, ``pymc_kameleon.models``) ship with
the package; the flower's model, the Gaussians and the counted model are in
:mod:`pymc_kameleon.models.synthetic`.

The flower sampler is checked against marginals obtained by brute-force integration of
``flower_logp`` on a fine *Cartesian* grid, which shares nothing with the sampler (no polar
Jacobian, no closed-form angle marginal).
"""

from __future__ import annotations

from functools import partial

import cloudpickle
import numpy as np
import pytensor
import pytensor.tensor as pt
import pytest
from pytensor.gradient import NullTypeGradError
from scipy import stats

from pymc_kameleon.models import banana_model
from pymc_kameleon.models.counting import find_counter
from pymc_kameleon.models.synthetic import (
    NumpyLogp,
    counted_model,
    flower_model,
    gaussian_mixture_model,
    gaussian_model,
)
from pymc_kameleon.models.targets import (
    QUANTILE_LEVELS,
    _sample_radius,  # the conditional sampler, tested directly
    banana_coverage,
    banana_coverage_error,
    banana_logp,
    banana_sample,
    banana_to_standard,
    flower_log_normaliser,
    flower_logp,
    flower_sample,
    mixture_logp,
    quantile_coverage,
    quantile_coverage_error,
)

P_MIN = 1e-3  # p-value threshold of the goodness-of-fit tests (fixed seeds: deterministic)

# --------------------------------------------------------------------------------------
# banana
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("b", [0.03, 0.1])
def test_banana_sample_is_exact(b):
    Y = banana_sample(20000, dim=8, b=b, v=100.0, rng=11)
    Z = banana_to_standard(Y, b=b, v=100.0)
    assert stats.kstest(np.sum(Z**2, axis=1), stats.chi2(df=8).cdf).pvalue > P_MIN
    for j in range(3):
        assert stats.kstest(Z[:, j], stats.norm.cdf).pvalue > P_MIN
    # the twisted coordinate and the first one are uncorrelated after the transform
    assert abs(np.corrcoef(Z[:, 0] ** 2, Z[:, 1])[0, 1]) < 0.03


def test_banana_sample_moments():
    b, v, n = 0.1, 100.0, 40000
    Y = banana_sample(n, dim=4, b=b, v=v, rng=3)
    sd = np.sqrt([v, 1 + 2 * b**2 * v**2, 1.0, 1.0])  # Var(y2) = 1 + b^2 Var(y1^2)
    assert np.all(np.abs(Y.mean(axis=0)) < 4.5 * sd / np.sqrt(n))
    assert np.allclose(Y.var(axis=0), sd**2, rtol=0.05)


@pytest.mark.parametrize("b", [0.03, 0.1])
def test_banana_logp_normalised_2d(b):
    v = 100.0
    y1 = np.arange(-70, 70.001, 0.25)  # 7 sd
    y2 = np.arange(-b * v - 8, b * (70**2 - v) + 8, 0.05)
    h1, h2 = y1[1] - y1[0], y2[1] - y2[0]
    G1, G2 = np.meshgrid(y1, y2, indexing="ij", sparse=True)
    dens = np.exp(banana_logp(np.stack(np.broadcast_arrays(G1, G2), axis=-1), b=b, v=v))
    assert np.sum(dens) * h1 * h2 == pytest.approx(1.0, abs=1e-4)


def test_banana_logp_change_of_variables():
    b, v = 0.1, 100.0
    rng = np.random.default_rng(5)
    Y = rng.normal(size=(50, 5)) * [15, 30, 1, 2, 1]
    Z = banana_to_standard(Y, b=b, v=v)
    expected = stats.norm.logpdf(Z).sum(axis=1) - 0.5 * np.log(v)  # |dz/dy| = 1/sqrt(v)
    assert np.allclose(banana_logp(Y, b=b, v=v), expected)
    # b = 0 is the Gaussian N(0, diag(v, 1, ...))
    gauss = stats.multivariate_normal(np.zeros(5), np.diag([v, 1, 1, 1, 1]))
    assert np.allclose(banana_logp(Y, b=0.0, v=v), gauss.logpdf(Y))
    # vectorised over leading axes, scalar for one point
    assert banana_logp(Y.reshape(5, 10, 5), b=b, v=v).shape == (5, 10)
    assert isinstance(banana_logp(Y[0], b=b, v=v), float)


def test_banana_to_standard_roundtrip():
    rng = np.random.default_rng(0)
    Y = banana_sample(100, dim=3, b=0.1, v=100.0, rng=rng)
    Z = banana_to_standard(Y, b=0.1, v=100.0)
    back = Z.copy()
    back[:, 0] *= 10.0
    back[:, 1] += 0.1 * (back[:, 0] ** 2 - 100.0)
    assert np.allclose(back, Y)
    assert not np.shares_memory(Z, Y)


@pytest.mark.parametrize("b", [0.03, 0.1])
def test_banana_coverage_exact_sample(b):
    Y = banana_sample(20000, dim=8, b=b, v=100.0, rng=21)
    cov = banana_coverage(Y, b=b, v=100.0)
    assert cov.shape == (9,)
    assert np.all(np.abs(cov - np.array(QUANTILE_LEVELS)) < 0.015)
    assert banana_coverage_error(Y, b=b, v=100.0) < 0.02
    # chains x draws x d input is pooled
    assert banana_coverage_error(Y.reshape(4, 5000, 8), b=b) == banana_coverage_error(Y, b=b)


def test_banana_coverage_wrong_samples():
    Y = banana_sample(20000, dim=8, b=0.1, v=100.0, rng=22)
    assert banana_coverage_error(Y, b=0.03, v=100.0) > 0.1  # wrong twist
    assert banana_coverage_error(1.5 * Y, b=0.1, v=100.0) > 0.1  # wrong scale
    Y2 = banana_sample(20000, dim=8, b=0.05, v=100.0, rng=23)
    assert banana_coverage_error(Y2, b=0.1, v=100.0) > 0.1


def test_banana_input_validation():
    with pytest.raises(ValueError):
        banana_sample(10, dim=1)
    with pytest.raises(ValueError):
        banana_logp([1.0])
    with pytest.raises(ValueError):
        banana_logp([1.0, 2.0], v=-1.0)
    with pytest.raises(ValueError):
        banana_coverage(np.zeros(8))  # one point is not a sample
    with pytest.raises(ValueError):
        banana_coverage(np.zeros((10, 8)), quantiles=[0.5, 1.0])


# --------------------------------------------------------------------------------------
# flower
# --------------------------------------------------------------------------------------

FLOWER_PARAMS = [
    (10.0, 6.0, 6.0, 1.0),  # the paper's F(10, 6, 6, 1)
    (2.0, 4.0, 3.0, 1.0),  # petals reach through the origin: m(phi) < 0 (Gamma branch)
    (10.0, 0.0, 6.0, 1.0),  # ring
    (3.0, 2.0, 2.5, 0.5),  # non-integer frequency (discontinuous at phi = pi), narrow
]


class _CartesianReference:
    """The 2-d flower factor integrated by the midpoint rule on a fine Cartesian grid."""

    def __init__(self, r0, A, w, s, max_points=1600):
        half = max(r0 + abs(A), 0.0) + 8.0 * s
        h = max(s / 40.0, 2 * half / max_points)
        grid = np.arange(-half + h / 2, half, h)
        X1, X2 = np.meshgrid(grid, grid, indexing="ij")
        pts = np.stack([X1.ravel(), X2.ravel()], axis=-1)
        logw = flower_logp(pts, r0, A, w, s)
        self.log_mass = np.log(np.sum(np.exp(logw))) + 2 * np.log(h)
        keep = logw > -40.0
        wts = np.exp(logw[keep])
        self.weights = wts / wts.sum()
        self.radius = np.hypot(pts[keep, 0], pts[keep, 1])
        self.angle = np.arctan2(pts[keep, 1], pts[keep, 0])
        self.h = h

    def cdf(self, values):
        order = np.argsort(values)
        sorted_values, cum = values[order], np.cumsum(self.weights[order])

        def F(t):
            idx = np.searchsorted(sorted_values, t, side="right")
            return np.where(idx > 0, cum[np.maximum(idx - 1, 0)], 0.0)

        return F


_REFERENCES: dict = {}


def _reference(params):
    if params not in _REFERENCES:
        _REFERENCES[params] = _CartesianReference(*params)
    return _REFERENCES[params]


@pytest.mark.parametrize("params", FLOWER_PARAMS)
def test_flower_marginals_match_grid_integration(params):
    ref = _reference(params)
    X = flower_sample(40000, dim=2, r0=params[0], A=params[1], w=params[2], s=params[3], rng=7)
    angle = np.arctan2(X[:, 1], X[:, 0])
    radius = np.hypot(X[:, 0], X[:, 1])
    assert stats.kstest(angle, ref.cdf(ref.angle)).pvalue > P_MIN
    assert stats.kstest(radius, ref.cdf(ref.radius)).pvalue > P_MIN


@pytest.mark.parametrize("params", FLOWER_PARAMS)
def test_flower_joint_chi_square_on_polar_grid(params):
    ref = _reference(params)
    n = 40000
    X = flower_sample(n, dim=2, r0=params[0], A=params[1], w=params[2], s=params[3], rng=8)
    # 24 angle bins x 10 radius bins of equal reference mass
    angle_edges = np.linspace(-np.pi, np.pi, 25)
    order = np.argsort(ref.radius)
    cum = np.cumsum(ref.weights[order])
    inner = ref.radius[order][np.searchsorted(cum, np.arange(1, 10) / 10)]
    radius_edges = np.concatenate([[0.0], inner, [np.inf]])
    expected, _, _ = np.histogram2d(
        ref.angle, ref.radius, bins=[angle_edges, radius_edges], weights=ref.weights
    )
    observed, _, _ = np.histogram2d(
        np.arctan2(X[:, 1], X[:, 0]), np.hypot(X[:, 0], X[:, 1]), bins=[angle_edges, radius_edges]
    )
    expected, observed = n * expected.ravel(), observed.ravel()
    small = expected < 5  # pool sparse cells
    exp_cells, obs_cells = expected[~small], observed[~small]
    if np.any(small):
        exp_cells = np.append(exp_cells, expected[small].sum())
        obs_cells = np.append(obs_cells, observed[small].sum())
    exp_cells *= obs_cells.sum() / exp_cells.sum()
    assert stats.chisquare(obs_cells, exp_cells).pvalue > P_MIN


@pytest.mark.parametrize("m", [-6.0, -2.0, -0.9, -0.35, 0.0, 0.5, 1.0, 3.0, 10.0])
def test_flower_radius_conditional_is_exact(m):
    """``r | phi`` has density ``∝ r exp(-(r - m)^2 / (2 s^2))``: every branch of the sampler."""
    s = 0.7
    r = _sample_radius(np.full(30000, m), s, np.random.default_rng(12))
    assert np.all(r >= 0)
    grid = np.linspace(0.0, max(m, 0.0) + 10 * s, 200001)
    dens = grid * np.exp(-0.5 * ((grid - m) / s) ** 2)
    cdf = np.concatenate([[0.0], np.cumsum(0.5 * (dens[1:] + dens[:-1]))])
    cdf /= cdf[-1]
    assert stats.kstest(r, lambda x: np.interp(x, grid, cdf)).pvalue > P_MIN


@pytest.mark.parametrize("params", FLOWER_PARAMS)
def test_flower_log_normaliser_matches_grid(params):
    ref = _reference(params)
    assert flower_log_normaliser(*params) == pytest.approx(ref.log_mass, abs=1e-4)


def test_flower_log_normaliser_ring_closed_form():
    # A = 0: 2 pi * int_0^inf r N-kernel dr = 2 pi (s r0 sqrt(2 pi) Phi(r0/s) + s^2 exp(-r0^2/2s^2))
    r0, s = 1.5, 0.7
    g = s * r0 * np.sqrt(2 * np.pi) * stats.norm.cdf(r0 / s) + s**2 * np.exp(-0.5 * (r0 / s) ** 2)
    assert flower_log_normaliser(r0, 0.0, 3.0, s) == pytest.approx(np.log(2 * np.pi * g))


def test_flower_mean_is_zero_and_extra_coordinates_standard_normal():
    n = 50000
    X = flower_sample(n, dim=8, rng=9)
    se = X.std(axis=0) / np.sqrt(n)
    assert np.all(np.abs(X.mean(axis=0)) < 4.5 * se)
    for j in range(2, 8):
        assert stats.kstest(X[:, j], stats.norm.cdf).pvalue > P_MIN
    assert np.corrcoef(X[:, 2], X[:, 0] ** 2)[0, 1] < 0.03


def test_flower_logp_values_and_shapes():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(20, 8)) * 8
    r, phi = np.hypot(X[:, 0], X[:, 1]), np.arctan2(X[:, 1], X[:, 0])
    expected = -0.5 * (r - 10 - 6 * np.cos(6 * phi)) ** 2 + stats.norm.logpdf(X[:, 2:]).sum(1)
    assert np.allclose(flower_logp(X), expected)
    assert flower_logp(X.reshape(4, 5, 8)).shape == (4, 5)
    assert isinstance(flower_logp(X[0]), float)
    assert np.isfinite(flower_logp(np.zeros(8)))


def test_flower_sample_reproducible_and_validated():
    assert np.array_equal(flower_sample(100, rng=3), flower_sample(100, rng=3))
    with pytest.raises(ValueError):
        flower_sample(10, dim=1)
    with pytest.raises(ValueError):
        flower_sample(10, s=0.0)


def test_quantile_coverage_error_generic():
    ref = flower_sample(50000, dim=8, rng=10)
    X = flower_sample(20000, dim=8, rng=11)
    assert quantile_coverage_error(X, ref) < 0.02
    assert np.all(np.abs(quantile_coverage(X, ref) - np.array(QUANTILE_LEVELS)) < 0.02)
    wrong = X.copy()
    wrong[:, :2] *= 1.1  # radius 10% too large
    assert quantile_coverage_error(wrong, ref) > 0.1
    # user statistic: petal (cos(6 phi) = 1) or between petals (-1)
    petal = lambda Y: np.cos(6 * np.arctan2(Y[:, 1], Y[:, 0]))  # noqa: E731
    assert quantile_coverage_error(X, ref, statistic=petal) < 0.02
    rotated = X.copy()
    rotated[:, 0], rotated[:, 1] = -X[:, 1], X[:, 0]  # by 90 degrees: petals to gaps
    assert quantile_coverage_error(rotated, ref, statistic=petal) > 0.1
    # 1-d arrays are scalar draws; chains x draws x d are pooled
    assert quantile_coverage_error(np.arange(1000.0), np.arange(1000.0)) < 0.01
    assert quantile_coverage_error(X.reshape(2, 10000, 8), ref) == quantile_coverage_error(X, ref)
    with pytest.raises(ValueError):
        quantile_coverage(X, ref, statistic=lambda Y: Y[:10, 0])


# --------------------------------------------------------------------------------------
# PyMC models
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("b", [0.03, 0.1])
def test_banana_model_logp_matches_target(b):
    model = banana_model(dim=8, b=b, v=100.0)
    logp = model.compile_logp()
    rng = np.random.default_rng(2)
    pts = np.vstack([banana_sample(10, 8, b, 100.0, rng=rng), rng.normal(size=(10, 8)) * 20])
    diff = np.array([logp({"x": p}) for p in pts]) - banana_logp(pts, b=b, v=100.0)
    assert np.ptp(diff) < 1e-8  # up to an additive constant ...
    assert abs(diff[0]) < 1e-8  # ... which is in fact zero
    assert np.array_equal(model.initial_point()["x"], np.zeros(8))


def test_banana_model_has_a_gradient():
    model = banana_model(dim=3, b=0.1)
    dlogp = model.compile_dlogp()
    x = np.array([4.0, -3.0, 0.5])
    eps = 1e-6
    numeric = [
        (banana_logp(x + eps * e, b=0.1) - banana_logp(x - eps * e, b=0.1)) / (2 * eps)
        for e in np.eye(3)
    ]
    assert np.allclose(dlogp({"x": x}), numeric, rtol=1e-6, atol=1e-6)


def test_flower_model_logp_matches_target():
    model = flower_model(dim=8)
    logp = model.compile_logp()
    rng = np.random.default_rng(4)
    pts = np.vstack([flower_sample(10, 8, rng=rng), rng.normal(size=(10, 8)) * 10])
    diff = np.array([logp({"x": p}) for p in pts]) - flower_logp(pts)
    assert np.ptp(diff) < 1e-8
    init = model.initial_point()["x"]
    assert np.array_equal(init, np.r_[16.0, np.zeros(7)])
    assert np.all(np.isfinite(model.compile_dlogp()({"x": init})))
    other = flower_model(dim=2, r0=2.0, A=4.0, w=3.0, s=0.5)
    pts2 = rng.normal(size=(10, 2)) * 3
    diff2 = [other.compile_logp()({"x": p}) for p in pts2] - flower_logp(pts2, 2.0, 4.0, 3.0, 0.5)
    assert np.ptp(diff2) < 1e-8


def test_gaussian_model_logp():
    cov = np.array([[2.0, 0.5], [0.5, 1.0]])
    mean = np.array([1.0, -1.0])
    model = gaussian_model(cov, mean)
    x = np.array([0.3, 0.7])
    expected = stats.multivariate_normal(mean, cov).logpdf(x)
    assert model.compile_logp()({"x": x}) == pytest.approx(expected)
    assert np.array_equal(model.initial_point()["x"], mean)
    with pytest.raises(ValueError):
        gaussian_model(np.array([[1.0, 2.0], [2.0, 1.0]]))  # not positive definite


# --------------------------------------------------------------------------------------
# evaluation counting
# --------------------------------------------------------------------------------------


def test_counted_model_counts_compiled_evaluations():
    model, op = counted_model(partial(banana_logp, b=0.1), dim=3)
    assert find_counter(model) is op
    logp = model.compile_logp()
    op.count = 0
    rng = np.random.default_rng(0)
    pts = rng.normal(size=(7, 3))
    values = [logp({"x": p}) for p in pts]
    assert op.count == 7
    assert np.allclose(values, banana_logp(pts, b=0.1))
    op.reset()
    assert op.count == 0


def test_numpy_logp_has_no_gradient():
    x = pt.dvector("x")
    with pytest.raises(NullTypeGradError):
        pytensor.grad(NumpyLogp(lambda v: float(np.sum(v)))(x), x)


def test_numpy_logp_input_is_a_copy():
    def mutating(x):
        x[:] = 99.0
        return 0.0

    op = NumpyLogp(mutating)
    x = pt.dvector("x")
    f = pytensor.function([x], [op(x), x * 1.0])
    value = np.arange(3.0)
    _, out = f(value)
    assert np.array_equal(out, np.arange(3.0))


def test_counted_model_pickles():
    model, op = counted_model(lambda x: -0.5 * float(x @ x), dim=2, initval=[1.0, 1.0])
    op.count = 5
    assert cloudpickle.loads(cloudpickle.dumps(op)).count == 5
    model2 = cloudpickle.loads(cloudpickle.dumps(model))
    assert find_counter(model2).count == 5
    assert model2.compile_logp()({"x": np.array([1.0, 2.0])}) == -2.5
    assert np.array_equal(model2.initial_point()["x"], [1.0, 1.0])
    with pytest.raises(ValueError):
        counted_model(lambda x: 0.0, dim=2, initval=[0.0])


def test_mixture_logp_matches_scipy_and_its_pymc_model():
    """The separated mixture's normalised log density: against SciPy's Gaussians
    component by component, over leading axes, and equal to its PyMC model's posterior
    (whose log evidence is 0, so the model's log density is the normalised mixture)."""
    means, sds, weights = np.array([[-4.0, 0.0, 1.0], [4.0, 0.0, 0.0]]), [1.0, 2.0], [3.0, 7.0]
    X = np.random.default_rng(0).normal(0, 5, size=(4, 5, 3))
    direct = np.log(0.3 * stats.multivariate_normal(means[0], np.eye(3)).pdf(X)
                    + 0.7 * stats.multivariate_normal(means[1], 4 * np.eye(3)).pdf(X))
    np.testing.assert_allclose(mixture_logp(X, means, sds, weights), direct, rtol=1e-10)
    logp = gaussian_mixture_model(means, sds, weights).compile_logp(sum=True)
    for x in X[0]:
        assert logp({"x": x}) == pytest.approx(mixture_logp(x, means, sds, weights), rel=1e-6)
    with pytest.raises(ValueError, match="positive sds"):
        mixture_logp(X, means, [1.0, -1.0], weights)
