"""The Laplace start searches from dispersed starts: a chain whose initial point
lies in the basin of a local mode without mass starts at the global mode instead, and a
chain the user started keeps its start."""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from checks import sample, wrap_py

from pymc_kameleon import LogDensityError, RandomWalkStep
from pymc_kameleon.adaptation.laplace import laplace_start
from pymc_kameleon.steps.start import ChainStart, searching

#: modes of the potential: a local one at -1 (e^-8 of the mass) and the global one at 6
LOCAL, GLOBAL = -1.0, 6.0
CHAINS = 8


@pytest.fixture(scope="module")
def two_basins():
    """``x ~ N(0, 5)`` times two narrow bumps; PyMC's initial point 0 lies in the basin of
    the local mode.  A prior draw lies in the global mode's basin (``x > 2.5``) with
    probability 0.31, so 4 prior draws miss it with probability 0.23."""
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 5.0)
        pm.Potential("bumps", pt.logaddexp(-0.5 * ((x - LOCAL) / 0.3) ** 2 - 8.0,
                                           -0.5 * ((x - GLOBAL) / 0.3) ** 2))
    return model


def _chain_start(model, vars=None, **kwargs):
    """A step's block, its chain start and its log density as the optimiser evaluates it
    (the compiled one, caught through ``logp_wrapper``)."""
    compiled = []
    with model:
        step = RandomWalkStep(vars, logp_wrapper=lambda f: compiled.append(f) or f, **kwargs)
    return step, ChainStart(model, step.vars), searching(compiled[0])


def _first_draws(model, **step_kwargs) -> tuple[np.ndarray, np.ndarray]:
    idata = sample(model, lambda: RandomWalkStep(**step_kwargs), draws=2, tune=10,
                   chains=CHAINS, seed=3, discard_tuned_samples=False)
    first = np.asarray(idata.warmup_posterior["x"].values)[:, 0]
    start = np.asarray(idata.warmup_sample_stats["laplace_start"].values)[:, 0]
    return first, start


def test_dispersed_starts_find_the_global_mode(two_basins):
    """Each chain misses the global mode with probability 0.23 (its 4 prior draws all in
    the local basin); at least half of 8 chains must find it: a false failure has
    probability P(Binomial(8, 0.77) < 4) = 0.003.  From the initial point alone
    (``laplace_starts=0``, the behaviour before) no chain does."""
    first, start = _first_draws(two_basins)
    found = np.abs(first - GLOBAL) < 1.5
    assert found.sum() >= CHAINS // 2, first
    assert np.all(start[found] > 0)  # the mode came from a prior draw
    first, start = _first_draws(two_basins, laplace_starts=0)
    assert np.all(np.abs(first - LOCAL) < 1.5) and np.all(start == 0), first


def test_user_initvals_keep_their_start(two_basins):
    """A chain given its own start begins there, in its basin: no dispersed search."""
    with two_basins:
        idata = pm.sample(tune=3, draws=1, chains=2, cores=1, step=RandomWalkStep(),
                          initvals=[{"x": -1.2}, {"x": 5.5}], random_seed=1,
                          discard_tuned_samples=False, progressbar=False,
                          compute_convergence_checks=False)
    first = np.asarray(idata.warmup_posterior["x"].values)[:, 0]
    assert abs(first[0] - LOCAL) < 1.0 and abs(first[1] - GLOBAL) < 1.0, first
    assert np.all(np.asarray(idata.warmup_sample_stats["laplace_start"].values) == -1)


def test_laplace_starts_is_validated(two_basins):
    with two_basins:
        for bad in (-1, 1.5, True):
            with pytest.raises((TypeError, ValueError), match="laplace_starts"):
                RandomWalkStep(laplace_starts=bad)


def test_a_log_density_raising_far_out_does_not_stop_the_start_search():
    """A black-box log density that raises outside |x| < 20 (an ODE solver failing at
    extreme rates) under a wide prior: most of the Laplace start's prior-draw starts lie
    where it raises.  The search treats those points as -inf and the chains run with no
    failure reported; the chain's own proposals still follow ``on_error`` (a chain
    started outside the region raises)."""

    @wrap_py(itypes=[pt.dscalar], otypes=[pt.dscalar])
    def fragile(x):
        if abs(x) > 20.0:
            raise RuntimeError("solver failed")
        return np.asarray(-0.5 * x**2)

    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 1000.0)
        pm.Potential("lik", fragile(x))
    idata = sample(model, RandomWalkStep, draws=200, tune=300, chains=2, seed=2)
    stats = idata.sample_stats
    assert int(stats.n_errors.sum()) == 0 and int(stats.n_nan.sum()) == 0
    assert 0.7 < float(idata.posterior.x.std()) < 1.3
    with pytest.raises(LogDensityError, match="raised at draw 0"):
        sample(model, RandomWalkStep, draws=5, tune=5, chains=1, seed=2,
               initvals={"x": 25.0})


# ---------------------------------------------------------------- modes that hold no mass
SPIKE = np.array([7.0, 3.0])


def _spike_and_bump(x: np.ndarray) -> float:
    """Normalised 2-d mixture: a broad bump N(0, 10^2 I) and a spike N(SPIKE, 0.001^2 I) of
    weight 1e-5, whose peak is the higher (log density 0.5 against -6.4) though it holds
    e^-11.5 of the mass."""
    spike = -0.5 * np.sum((x - SPIKE) ** 2) / 1e-6 - np.log(2 * np.pi * 1e-6) + np.log(1e-5)
    bump = -0.5 * np.sum(x**2) / 100.0 - np.log(2 * np.pi * 100.0)
    return float(np.logaddexp(spike, bump))


def test_a_mode_that_holds_almost_no_mass_is_not_kept():
    """Given the log normalising constant (0 here), the spike's mode is passed over for
    the bump's, whose ``log_mass`` is the constant, although the bump's peak lies more
    than ``d/2 + 3 sqrt(d/2)`` below the spike's; without it the higher peak wins."""
    x0, starts = SPIKE + 0.001, [np.full(2, -3.0)]
    res = laplace_start(_spike_and_bump, x0, 500, starts=starts, log_evidence=0.0)
    assert res.start == 1 and np.allclose(res.mode, 0.0, atol=1e-2), res
    assert abs(res.log_mass) < 0.05
    res = laplace_start(_spike_and_bump, x0, 500, starts=starts)
    assert res.start == 0 and np.allclose(res.mode, SPIKE, atol=1e-4), res
    assert abs(res.log_mass - np.log(1e-5)) < 0.05
    res = laplace_start(_spike_and_bump, x0, 500, log_evidence=0.0)  # the spike alone
    assert res.cov is None and "holds about e^-11 of the target's mass" in res.degenerate


def test_log_mass_of_a_gaussian_is_its_normalising_constant():
    cov = np.array([[2.0, 0.3], [0.3, 0.5]])
    P = np.linalg.inv(cov)
    res = laplace_start(lambda x: 7.0 - 0.5 * (x - 1.0) @ P @ (x - 1.0), np.zeros(2), 500)
    exact = 7.0 + 0.5 * np.linalg.slogdet(2 * np.pi * cov)[1]
    assert abs(res.log_mass - exact) < 1e-6


@pytest.fixture(scope="module")
def conjugate():
    """``mu ~ N(0, 1)``, 5 observations ``~ N(mu, 1)``: the log normalising constant is
    that of ``y ~ N(0, I + 11')``."""
    y = np.array([0.3, -0.4, 1.1, 0.8, 0.2])
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 1.0)
        pm.Normal("y", mu, 1.0, observed=y)
    cov = np.eye(y.size) + 1.0
    exact = -0.5 * (y @ np.linalg.solve(cov, y) + np.linalg.slogdet(2 * np.pi * cov)[1])
    return model, exact


def test_prior_draws_estimate_the_normalising_constant(conjugate):
    """200 fixed prior draws (the posterior sd is 0.41 of the prior's: the estimate's
    relative error is about 0.1), the same in every chain; ``-inf`` for a block that is not
    the whole model and for a prior that cannot be drawn from."""
    model, exact = conjugate
    _, start, logp = _chain_start(model)
    estimate, evals = start.prior_evidence(logp)
    assert abs(estimate - exact) < 0.3 and evals == 200
    assert start.prior_evidence(logp) == (estimate, 200)
    with pm.Model() as other:
        a, b = pm.Normal("a"), pm.Normal("b")
        pm.Normal("y", a + b, 1.0, observed=[0.5])
    _, start, logp = _chain_start(other, [a])
    assert start.prior_evidence(logp) == (-np.inf, 0)
    with other:
        flat = pm.Flat("c")
        pm.Potential("p", -0.5 * flat**2)
    _, start, logp = _chain_start(other)
    assert start.prior_evidence(logp) == (-np.inf, 0)


def test_funnel_neck_modes_of_the_latent_time_series_are_not_kept():
    """The suite's centred latent random walk (d = 26): its density grows without bound
    as the innovation sd goes to 0.  With the chain generators of seeds 3 and 5 a prior
    draw's optimisation ends in the neck (log sd -11 to -13, the reference's about -1.6)
    at a mode whose Gaussian passes the mismatch check; it holds about e^-35 of the mass
    that the prior draws show (docs/tuning.md), and no mode is kept."""
    from pymc_kameleon.models.features import timeseries_model

    model = timeseries_model()
    for seed in (3, 5):
        step, start, logp = _chain_start(model, rng=np.random.default_rng(seed))
        x0 = start.ravel(model.initial_point())
        starts = start.dispersed_starts(x0, step.rng, step.laplace_starts)
        log_evidence, _ = start.prior_evidence(logp)
        kept = laplace_start(logp, x0, 200 * 27, starts=starts)
        assert kept.cov is not None and kept.mode[0] < -10.0, kept  # the neck
        res = laplace_start(logp, x0, 200 * 27, starts=starts, log_evidence=log_evidence)
        assert res.cov is None, res


def _years_logp(theta: np.ndarray) -> float:
    """The suite's ``years`` regression in NumPy: ``y ~ N(alpha + beta year, sigma)`` on the
    calendar years, ``alpha ~ N(0, 100)``, ``beta ~ N(0, 1)``, ``sigma ~ HalfNormal(1)``
    on ``log sigma`` (its Jacobian included); intercept and slope correlate -0.9999."""
    from pymc_kameleon.models.hard.regression import years_data

    years, y = years_data()
    alpha, beta, log_sigma = theta
    sigma = np.exp(log_sigma)
    r = y - alpha - beta * years
    return float(-0.5 * np.sum(r**2) / sigma**2 - years.size * log_sigma
                 - 0.5 * (alpha / 100.0) ** 2 - 0.5 * beta**2 - 0.5 * sigma**2 + log_sigma)


def test_a_climb_follows_a_narrow_ridge_to_the_mode():
    """From a point on the ridge where a short climb stopped, L-BFGS on finite differences
    stops again about 60 nats below the mode (the Hessian there is indefinite); climbing on
    in the coordinates it whitens reaches the mode, found independently in centred
    coordinates (where the ridge is no ridge)."""
    from scipy.optimize import minimize

    from pymc_kameleon.models.hard.regression import years_data

    centre = years_data()[0].mean()

    def centred(v):  # alpha = a - beta * centre: a linear map of unit Jacobian
        return -_years_logp(np.array([v[0] - v[1] * centre, v[1], v[2]]))

    best = minimize(centred, np.array([14.0, 0.0, 0.0]), method="Nelder-Mead",
                    options={"xatol": 1e-10, "fatol": 1e-12, "maxfev": 20000})
    x0 = np.array([32.0846, -0.0089, -0.4644])  # where a short climb from a prior draw ended
    plain = laplace_start(_years_logp, x0, 140, check=False)
    ridge = laplace_start(_years_logp, x0, 140, check=False, follow_ridges=True)
    assert plain.logp < -best.fun - 10.0  # the variant without the climb stops short
    assert ridge.logp == pytest.approx(-best.fun, abs=1e-3)
    np.testing.assert_allclose(ridge.mode[1], best.x[1], rtol=1e-3)
