"""Unit tests of the warm-up numerics (adaptation.warmup, adaptation.laplace), step state
conversion and the shared-estimate key, against independent computations."""

from __future__ import annotations

import re

import numpy as np
import pytest
from pymc.step_methods.state import equal_dataclass_values

from pymc_kameleon.adaptation import RobbinsMonro
from pymc_kameleon.adaptation.laplace import (
    finite_difference_hessian,
    laplace_mismatch,
    laplace_start,
)
from pymc_kameleon.adaptation.laplace_hessian import (
    _covariance,
    _curvature_probe,
    _rise,
    _scaled_eigen,
)
from pymc_kameleon.adaptation.warmup import (
    AffineMap,
    NoiseCeiling,
    WindowMoments,
    climb_end,
    final_window_end,
    regularised_covariance,
    tuning_window_ends,
    window_ends,
)
from pymc_kameleon.steps.state import ObjectState, from_state, to_state
from pymc_kameleon.steps.store import SharedEstimate, point_key


def test_affine_map_round_trip_and_whitening():
    rng = np.random.default_rng(0)
    A = rng.normal(size=(4, 4))
    cov = A @ A.T + 0.1 * np.eye(4)
    mean = rng.normal(size=4)
    amap = AffineMap.from_cov(mean, cov)
    x = rng.multivariate_normal(mean, cov, size=20000)
    u = np.array([amap.to_u(xi) for xi in x])
    np.testing.assert_allclose(np.cov(u.T), np.eye(4), atol=0.05)
    np.testing.assert_allclose(amap.to_x(amap.to_u(x[0])), x[0])
    np.testing.assert_allclose(amap.cov, cov)


@pytest.mark.parametrize("d", [1, 2, 7, 50])
def test_affine_map_to_u_solves_the_triangular_system(d):
    """``to_u`` calls LAPACK directly (once per draw: scipy's wrapper cost more than the
    solve).  It solves ``L u = x - mean`` (checked by the residual) and gives scipy's
    ``solve_triangular`` result (to the bit with SciPy 1.17, whose call it repeats, so
    chains stayed those of the documented runs; to rounding is what the test asks, so a
    SciPy that calls LAPACK otherwise does not fail it), on badly scaled inputs too."""
    from scipy.linalg import solve_triangular

    rng = np.random.default_rng(d)
    for _ in range(10):
        A = rng.normal(size=(d, 3 * d)) * 10.0 ** rng.uniform(-3, 3, size=(d, 1))
        amap = AffineMap.from_cov(rng.normal(size=d), A @ A.T / d + 1e-6 * np.eye(d))
        x = rng.normal(size=d) * 10.0 ** rng.uniform(-3, 3)
        u = amap.to_u(x)
        np.testing.assert_allclose(amap.chol @ u, x - amap.mean, rtol=1e-9,
                                   atol=1e-12 * np.abs(x - amap.mean).max())
        expected = solve_triangular(amap.chol, x - amap.mean, lower=True)
        np.testing.assert_allclose(u, expected, rtol=1e-10, atol=1e-12 * np.abs(expected).max())


def test_window_ends_grow_and_end_at_the_warmup_length():
    assert window_ends(500) == (75, 125, 225, 500)
    ends = window_ends(40)
    assert ends[-1] == 40 and list(ends) == sorted(set(ends))
    assert window_ends(1) == (1,)


@pytest.mark.parametrize("warmup, tune, expected", [
    # written out by hand: the warm-up's windows (15/25/45/100 % of it), doublings that end
    # before tune - max(50, tune // 10), then one ending there
    (500, 1000, (75, 125, 225, 500, 900)),
    (150, 300, (22, 38, 68, 150, 250)),
    (100, 1000, (15, 25, 45, 100, 200, 400, 800, 900)),
    (1000, 2000, (150, 250, 450, 1000, 1800)),
    (50, 100, (8, 12, 22, 50)),  # no room: the last tenth re-adapts the scale only
])
def test_tuning_windows_end_a_tenth_of_tuning_before_its_end(warmup, tune, expected):
    assert tuning_window_ends(warmup, tune) == expected
    assert final_window_end(tune) == tune - max(50, tune // 10)


def test_tuning_windows_without_a_known_tuning_length_keep_doubling():
    assert tuning_window_ends(500, None, upto=0) == (75, 125, 225, 500)
    assert tuning_window_ends(500, None, upto=1001) == (75, 125, 225, 500, 1000, 2000)


def test_climb_end_is_where_the_log_density_reaches_its_later_level():
    rng = np.random.default_rng(3)
    level = -rng.chisquare(4, size=60) / 2  # a 4-d Gaussian's log density, stationary
    climb = np.linspace(-400.0, -6.0, 20)  # rising from the initial point
    logps = np.concatenate([climb, level])
    # independently: the first value at or above the median of the last half
    median = np.sort(logps[40:])[19:21].mean()  # 40 values
    assert climb_end(logps) == next(i for i, v in enumerate(logps) if v >= median)
    assert 19 <= climb_end(logps) <= 22
    assert climb_end(level) <= 3  # started in the bulk: (almost) nothing is the climb
    assert climb_end([]) == 0 and climb_end([-np.inf, -1.0, -2.0, -1.5]) == 1


def test_window_moments_match_numpy():
    X = np.random.default_rng(1).normal(size=(50, 3))
    w = WindowMoments(3)
    for i, x in enumerate(X):
        w.add(x, moved=i % 2 == 0)
    np.testing.assert_allclose(w.mean, X.mean(0))
    np.testing.assert_allclose(w.cov, np.cov(X.T))
    assert w.n_moves == 25


def test_regularised_covariance_limits():
    S = np.array([[4.0, 1.9], [1.9, 1.0]])
    P = np.diag([9.0, 9.0])
    # many moves, no prior: the sample covariance (shrinkage d / n -> 0)
    np.testing.assert_allclose(regularised_covariance(S, 1e12, P, 0.0), S, atol=1e-9)
    # fewer moves than dimensions: only the diagonal is trusted
    np.testing.assert_allclose(regularised_covariance(S, 1.0, P, 0.0), np.diag([4.0, 1.0]))
    # nothing learned: the prior
    np.testing.assert_allclose(regularised_covariance(S, 0.0, P, 10.0), P)
    # weights: n_eff samples against n_prior pseudo-samples
    out = regularised_covariance(S, 1e12, P, 1e12)
    np.testing.assert_allclose(out, 0.5 * (S + P), atol=1e-6)


def test_noise_ceiling_lowers_an_unreachable_target_only():
    nc = NoiseCeiling()
    assert nc.target(0.234) == 0.234  # no evidence of noise
    for _ in range(99):
        nc.add(0.2)
    assert nc.ceiling == pytest.approx((99 * 0.2 + 1) / 100)
    assert nc.target(0.234) == pytest.approx(0.5 * nc.ceiling)


def test_noise_ceiling_scales_a_trajectory_target_and_caps_a_walk_target():
    nc = NoiseCeiling()
    assert nc.scaled(0.8) == 0.8  # no evidence of noise: ceiling 1
    for _ in range(9):
        nc.add(0.6)
    ceiling = (9 * 0.6 + 1) / 10
    assert nc.scaled(0.8) == pytest.approx(0.8 * ceiling)  # both factors of acceptance
    assert nc.target(0.8) == pytest.approx(0.5 * ceiling)  # a walk's target is capped
    assert nc.target(0.2) == 0.2  # below the cap: unchanged


def test_robbins_monro_exact_initial_value_and_bounds():
    rm = RobbinsMonro(0.1, 0.234, lower=0.05, upper=0.2)
    assert rm.value == 0.1  # no exp(log(.)) round trip
    for _ in range(1000):
        rm.update(0.0)
    assert rm.value == 0.05  # bounded away from zero however low the acceptance
    for _ in range(1000):
        rm.update(1.0)
    assert rm.value == 0.2
    rm.update(0.5, target=0.5)  # an explicit target: no move at the target
    assert rm.value == 0.2


def test_finite_difference_hessian_of_a_cubic():
    def f(v):
        return v[0] ** 3 + 2 * v[0] * v[1] ** 2

    x = np.array([1.0, 2.0])
    exact = np.array([[6 * x[0], 4 * x[1]], [4 * x[1], 4 * x[0]]])
    H = finite_difference_hessian(f, x, f(x), np.full(2, 1e-3))
    np.testing.assert_allclose(H, exact, rtol=1e-5)


@pytest.mark.parametrize("scales", [(1.0, 1.0, 1.0), (1e-3, 1.0, 1e3)])
def test_laplace_start_recovers_a_gaussian(scales):
    rng = np.random.default_rng(2)
    corr = np.array([[1.0, 0.9, 0.0], [0.9, 1.0, 0.3], [0.0, 0.3, 1.0]])
    D = np.diag(scales)
    cov = D @ corr @ D
    P = np.linalg.inv(cov)
    mean = rng.normal(size=3) * np.array(scales)
    res = laplace_start(lambda x: -0.5 * (x - mean) @ P @ (x - mean), np.zeros(3), 5000)
    z = np.linalg.solve(np.linalg.cholesky(cov), res.mode - mean)
    assert np.abs(z).max() < 1e-2  # mode within 1% of a posterior sd
    np.testing.assert_allclose(res.cov / np.outer(scales, scales), corr, atol=1e-3)
    assert res.n_evals > 0


def test_laplace_start_rejects_a_spike():
    """A curvature no statistical model has (marginal sd below 1e-10 (1 + |mode|); on the
    centred eight schools the optimiser ran into the funnel's neck and the finite-difference
    Hessian gave 1e-94) is no mode to start a chain at: ``cov`` is None and ``degenerate``
    names the coordinate.  A sharp but ordinary Gaussian (relative sds 2e-10 and 5e-10 of
    ``1 + |mode|``) is kept.  (The chain-level check is in ``test_suite_models.py``.)"""
    mean = np.array([1e3, -2.0])
    for sd, spike in [((2e-7, 1.5e-9), False), ((1.0, 1e-11), True), ((1e-9, 1.0), True)]:
        sd = np.array(sd)
        res = laplace_start(lambda x, sd=sd: -0.5 * np.sum(((x - mean) / sd) ** 2),
                            mean + sd, 2000)
        if spike:
            i = int(np.argmin(sd / (1.0 + np.abs(mean))))
            assert res.cov is None and f"coordinate {i}" in res.degenerate, (sd, res)
        else:
            assert res.cov is not None and not res.degenerate, (sd, res)
            np.testing.assert_allclose(np.sqrt(np.diag(res.cov)), sd, rtol=1e-2)


def test_laplace_start_rejects_a_point_where_the_density_still_rises():
    """A maximum has zero slope: for a Gaussian of sd ``s`` the one-dimensional Newton step
    from ``m + k s`` is ``k`` conditional sds, so a point 5 sds off is no maximum and one
    1 sd off is (bound 3).  In a centred hierarchical model's neck the density grows without
    bound as log tau falls; the optimiser stops there on a slope it cannot follow, and the
    point is not used (``degenerate`` names log tau's coordinate)."""
    s, m = 0.01, 2.0
    for k, rises in [(5.0, True), (1.0, False), (-5.0, True)]:
        x = np.array([m + k * s])
        f = lambda v: 0.5 * float(np.sum(((v - m) / s) ** 2))  # -log p  # noqa: E731
        _, curv, slope = _curvature_probe(f, x, f(x))
        assert bool(_rise(x, curv, slope)) is rises, (k, curv, slope)
        np.testing.assert_allclose(np.abs(slope) * s, abs(k), rtol=1e-6)
    y = np.array([28.0, 8, -3, 7, -1, 1, 18, 12])
    sigma = np.array([15.0, 10, 16, 11, 9, 11, 10, 18])

    def eight_schools(x):  # mu ~ N(0, 5), tau ~ HalfCauchy(5) on log tau, theta_j ~ N(mu, tau)
        mu, v, theta = x[0], x[1], x[2:]
        return (-0.5 * mu**2 / 25 - 7 * v - np.log1p(np.exp(2 * v) / 25)
                - 0.5 * np.sum((theta - mu) ** 2) * np.exp(-2 * v)
                - 0.5 * np.sum(((y - theta) / sigma) ** 2))

    res = laplace_start(eight_schools, np.r_[0.0, np.log(5.0), np.zeros(8)], 2200)
    assert res.mode[1] < -8 and res.cov is None, res  # the optimiser went down the neck
    # on the slope, or so far down that log tau's marginal sd underflows first (which of the
    # two depends on the CPU's floating point): either way log tau's coordinate is named
    assert re.search(r"(rises along|marginal sd .* in) coordinate 1\b", res.degenerate), res


def test_laplace_mismatch_against_its_closed_form():
    """For a Gaussian target ``N(0, S)`` and the Gaussian ``N(0, C)``, ``C = L L^T``, the log
    weight is ``z^T A z / 2`` with ``A = I - L^T S^{-1} L`` (up to a constant), whose
    standard deviation is ``sqrt(tr(A^2) / 2)``."""
    rng = np.random.default_rng(5)
    B = rng.normal(size=(4, 4))
    S = B @ B.T + 0.5 * np.eye(4)
    P = np.linalg.inv(S)
    for factor in (1.0, 0.6, 1.5):
        C = factor * S + 0.1 * np.diag(np.diag(S)) * (factor != 1.0)
        L = np.linalg.cholesky(C)
        A = np.eye(4) - L.T @ P @ L
        exact = np.sqrt(0.5 * np.trace(A @ A))
        got = laplace_mismatch(lambda x: -0.5 * x @ P @ x, np.zeros(4), C, n_draws=20000,
                               rng=np.random.default_rng(6))
        assert abs(got - exact) < 0.03 * exact + 1e-12, (factor, got, exact)


def _funnel(x: np.ndarray) -> float:
    """Neal's funnel, centred: v ~ N(0, 3), x_i | v ~ N(0, exp(v / 2)), i = 1..9."""
    v, rest = x[0], x[1:]
    return -v**2 / 18.0 - 0.5 * np.sum(rest**2) * np.exp(-v) - 0.5 * rest.size * v


def test_laplace_start_not_used_where_the_gaussian_misses_the_target():
    """The funnel's joint mode is its neck (v = -40.5, x ~ 1e-9), far from the mass at v ~
    N(0, 3); a chain started there with that covariance does not leave the neck in pm.sample's
    tuning (suite: the centred radon reached R-hat 2.8 with the Laplace start, 1.02 without).
    The Gaussian's log importance weights there have an sd far above the bound sqrt(d)
    (8500 here): the start is not used.  Gaussians of very different scales (the case the
    start exists for) are kept, with sd 0."""
    res = laplace_start(_funnel, np.zeros(10), 2200)
    assert res.mode[0] < -30  # the optimiser does find the neck
    assert res.cov is None and res.mismatch > 2.0 * np.sqrt(10) and not res.degenerate, res
    for scales in [(1.0, 1.0, 1.0), (1e-3, 1.0, 1e3)]:
        P = np.diag(1.0 / np.square(scales))
        res = laplace_start(lambda x, P=P: -0.5 * x @ P @ x, np.ones(3), 2000)
        assert res.cov is not None and res.mismatch < 1e-3, (scales, res.mismatch)


def test_laplace_start_outside_support_and_flat_direction():
    res = laplace_start(lambda x: -np.inf, np.zeros(2), 100)
    assert res.cov is None
    # a flat direction: no curvature, so that direction gets the median positive curvature
    cov = _covariance(_scaled_eigen(np.array([[0.25, 0.0], [0.0, 0.0]])))
    np.testing.assert_allclose(cov, 4.0 * np.eye(2))
    res = laplace_start(lambda x: -0.5 * x[0] ** 2 / 4.0, np.zeros(2), 100)
    assert res.cov is not None and np.all(np.linalg.eigvalsh(res.cov) > 0)
    # (its log importance weights vary by z^2 / 2 along the flat direction: sd ~0.7, below
    # the bound sqrt(2))
    assert 0.3 < res.mismatch < np.sqrt(2.0)


def test_state_round_trip_compares_with_pymc():
    rng = np.random.default_rng(3)
    obj = {"scaler": RobbinsMonro(0.5, 0.3), "arr": np.array([1.0, np.nan]), "f": np.nan,
           "rng": np.random.default_rng(4), "items": [1, (2.0, "a")]}
    s1, s2 = to_state(obj), to_state(obj)
    assert equal_dataclass_values(s1, s2)  # NaN scalars and arrays compare equal
    assert isinstance(s1["scaler"], ObjectState)
    back = from_state(s1)
    assert isinstance(back["scaler"], RobbinsMonro) and back["scaler"].value == 0.5
    assert back["rng"].random() == obj["rng"].random()
    obj["scaler"].update(1.0)
    assert not equal_dataclass_values(to_state(obj), s1)
    rng.random()


def test_state_without_a_later_field_restores_its_default():
    """A state saved before a field was added (F-KAMH's ``factor_rank``) restores with the
    field's default; a missing field without a default is a clear error, not an
    AttributeError at the first stats."""
    from pymc_kameleon.adaptation.local_gaussian import FastKameleonAdaptState

    state = to_state(FastKameleonAdaptState(gammas=None, zero_gram=np.zeros((2, 2)),
                                            factor_rank=7, t=3))
    del state.values["factor_rank"], state.values["cache"]  # a default and a default_factory
    back = from_state(state)
    assert back.factor_rank == 0 and back.cache == {} and back.t == 3
    scaler = to_state(RobbinsMonro(0.5, 0.3))
    del scaler.values["initial"]  # no default
    with pytest.raises(ValueError, match="RobbinsMonro.*'initial'"):
        from_state(scaler)


def test_point_key_and_shared_estimate():
    p1 = {"a": np.array([1.0]), "b": np.array(2.0, dtype=np.float32)}
    p2 = {"b": np.array(2.0, dtype=np.float32), "a": np.array([1.0])}
    assert point_key(p1) == point_key(p2)
    assert point_key(p1) != point_key({**p1, "a": np.array([1.0 + 1e-15])})
    assert point_key(p1) != point_key({**p1, "b": np.array(2.0)})  # the dtype counts
    assert point_key(p1) != point_key({"a": p1["a"], "c": p1["b"]})  # and the names
    store = SharedEstimate()
    assert store.get(point_key(p1)) is None
    store.put(point_key(p1), -3.5)
    assert store.get(point_key(p2)) == -3.5 and store.get(b"other") is None


def _raw_diagonal_shrinkage(sample_cov, n_eff, prior_cov, n_prior):
    """The former regularisation (shrinkage toward the raw diagonal): the broken
    variant the whitened-shrinkage test must reject."""
    d = sample_cov.shape[0]
    lam = 1.0 if n_eff < d else min(1.0, d / n_eff)
    est = (1.0 - lam) * sample_cov + lam * np.diag(np.diag(sample_cov))
    return (n_eff * est + n_prior * prior_cov) / (n_eff + n_prior)


def _whitened_condition(regularise) -> float:
    """Condition number of the true covariance whitened by the regularised estimate of a
    window of 300 draws (150 moves) from it: intercept and slope on calendar years,
    correlation -0.9999, prior = the truth (a Laplace start)."""
    sd = np.array([2.0, 1e-3])
    corr = np.array([[1.0, -0.9999], [-0.9999, 1.0]])
    true = corr * np.outer(sd, sd)
    draws = np.random.default_rng(11).multivariate_normal(np.zeros(2), true, size=300)
    est = regularise(np.cov(draws.T), 150.0, true, 40.0)
    chol = np.linalg.cholesky(est)
    white = np.linalg.solve(chol, np.linalg.solve(chol, true).T)
    return float(np.linalg.cond(white))


def test_regularised_covariance_keeps_a_near_singular_correlation():
    """Shrinkage in the prior's whitened coordinates keeps the thin direction of a posterior
    with correlation -0.9999 (whitened condition near 1); shrinking toward the raw diagonal
    puts back about 10^3 times its variance (condition 1e3-5e3)."""
    assert _whitened_condition(regularised_covariance) < 2.0
    assert _whitened_condition(_raw_diagonal_shrinkage) > 100.0  # the broken variant


def test_regularised_covariance_is_invariant_under_a_linear_map():
    """Whitened shrinkage commutes with a change of coordinates ``x -> A x``: the estimate of
    the mapped window is the mapped estimate (raw-axis shrinkage is not)."""
    rng = np.random.default_rng(4)
    A = rng.normal(size=(3, 3)) + 3.0 * np.eye(3)
    B = rng.normal(size=(3, 3))
    S, P = B @ B.T + np.eye(3), np.diag([1.0, 2.0, 0.5])
    for n_eff in (2.0, 10.0, 1e4):
        got = regularised_covariance(A @ S @ A.T, n_eff, A @ P @ A.T, 6.0)
        # A P A^T has another Cholesky factor than A chol(P): the whitened diagonal differs,
        # so compare where the diagonal does not enter (no shrinkage) or is the identity
        if n_eff >= 1e4:
            want = A @ regularised_covariance(S, n_eff, P, 6.0) @ A.T
            np.testing.assert_allclose(got, want, rtol=1e-3)
    np.testing.assert_allclose(regularised_covariance(P, 2.0, P, 6.0), P)


def test_laplace_start_from_dispersed_starts_keeps_the_highest_usable_mode():
    """Two Gaussian modes 4 nats apart; the chain's start is in the lower one's basin.  From
    the start alone the optimiser stays there; with dispersed starts the higher mode is
    kept and ``start`` names the start it came from.  A mode far below the best point found
    (a local mode without mass) is not used, even when the best point is unusable."""
    def bimodal(x):
        return np.logaddexp(-0.5 * np.sum((x + 5.0) ** 2) - 4.0, -0.5 * np.sum((x - 5.0) ** 2))

    x0 = np.full(3, -4.0)
    assert np.allclose(laplace_start(bimodal, x0, 800).mode, -5.0, atol=1e-3)
    starts = [np.full(3, -6.0), np.full(3, 4.0), np.full(3, 6.0)]
    res = laplace_start(bimodal, x0, 800, starts=starts)
    assert np.allclose(res.mode, 5.0, atol=1e-3) and res.start in (2, 3)
    np.testing.assert_allclose(res.cov, np.eye(3), atol=1e-3)

    sd = np.array([1.0, 1e-11, 1.0])

    def spike_and_low_mode(x):  # a spike (unusable) 100 nats above a usable mode
        spike = -0.5 * np.sum(((x - 5.0) / sd) ** 2) + 100.0
        return np.logaddexp(spike, -0.5 * np.sum((x + 5.0) ** 2))

    res = laplace_start(spike_and_low_mode, np.full(3, 5.0) + sd, 800,
                        starts=[np.full(3, -4.0)])
    assert res.cov is None and res.logp > 90.0, res  # the best point, unusable


def test_laplace_start_leaks_no_floating_point_warnings():
    """Finite differences at the edge of the support overflow by design; no RuntimeWarning
    reaches the user."""
    def edge(x):  # finite on x > 0 only, with values near the float limit nearby
        return float(-np.sum(x**2) - 1e300 * np.sum(x < 0.0)) if np.all(x > -1) else -np.inf

    import warnings as _w
    with _w.catch_warnings():
        _w.simplefilter("error")
        laplace_start(edge, np.full(2, 0.1), 300, starts=[np.full(2, 1e-3)])
