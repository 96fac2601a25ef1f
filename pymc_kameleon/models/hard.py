"""Hard real posteriors: the classes of model where a gradient-free step fails.

Each class was measured to defeat the steps' warm-up of 2026-11-26 (docs/benchmarks/suite.md,
"Hard posteriors"):

* :func:`hare_lynx_model`: the predator-prey equations fitted to the Hudson's Bay Company
  pelt counts with unknown initial states (8 parameters); PyMC's initial point lies in the
  basin of a local mode that holds no posterior mass;
* :func:`years_regression_model`: a regression on calendar years, intercept-slope
  correlation -0.9999;
* :func:`collinear_regression_model`: 24 collinear predictors, d = 26;
* :func:`pk_model`: a pharmacokinetic ODE (black box) whose posterior runs out along a long
  curved arm where Km and Vm grow together (d = 4);
* :func:`gp_poisson_model`: a latent Gaussian process under Poisson counts, centred: a
  funnel between the GP's amplitude and its 11 latent values (d = 13);
* :func:`gp_pois_regr_model`: posteriordb's ``gp_pois_regr-gp_pois_regr``, the latent GP
  written non-centred as Stan writes it (d = 13); its reference is posteriordb's.

Each has a reference parametrisation with the same posterior (NUTS can sample it) or a
start for a long reference chain.
"""

from __future__ import annotations

import math
import warnings
from functools import lru_cache

import numba
import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.gradient import grad_not_implemented
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from scipy.integrate import odeint
from scipy.linalg import solve_triangular

from .ode import lotka_volterra_rhs  # the same equations, initial state free

__all__ = [
    "HARE_LYNX",
    "collinear_regression_model",
    "GP_COUNTS",
    "PK_CONC",
    "collinear_regression_whitened",
    "collinear_whitening",
    "GP_POIS_REGR_K",
    "gp_correlation",
    "gp_pois_regr_cov",
    "gp_pois_regr_from_posteriordb",
    "gp_pois_regr_model",
    "gp_poisson_model",
    "gp_poisson_noncentred",
    "hare_lynx_model",
    "pk_model",
    "pk_model_differentiable",
    "years_regression_centred",
    "years_regression_model",
]

#: Hudson's Bay Company pelts (thousands), 1900-1920: year, hares, lynxes (public data, as
#: used in Carpenter's Stan case study "Predator-prey population dynamics").
HARE_LYNX = np.array([
    [1900, 30.0, 4.0], [1901, 47.2, 6.1], [1902, 70.2, 9.8], [1903, 77.4, 35.2],
    [1904, 36.3, 59.4], [1905, 20.6, 41.7], [1906, 18.1, 19.0], [1907, 21.4, 13.0],
    [1908, 22.0, 8.3], [1909, 25.4, 9.1], [1910, 27.1, 7.4], [1911, 40.3, 8.0],
    [1912, 57.0, 12.3], [1913, 76.6, 19.5], [1914, 52.3, 45.7], [1915, 19.5, 51.1],
    [1916, 11.2, 29.7], [1917, 7.6, 15.8], [1918, 14.6, 9.7], [1919, 16.2, 10.1],
    [1920, 24.7, 8.6],
])


def solve_hare_lynx(params: np.ndarray) -> np.ndarray:
    """Populations at the 21 years from ``(alpha, beta, gamma, delta, z0_prey, z0_pred)``,
    shape ``(21, 2)``; ``+inf`` where the solver fails.

    The solver fails on wild cycles whose predators crash below its absolute tolerance
    (2 of chain 4's 2000 prior draws in ``pm.sample_smc(random_seed=1)``).  ``+inf`` makes
    the log likelihood ``-inf`` there: zero density, the target the MCMC steps already had
    (they reject a NaN as they do ``-inf``), where a NaN stopped pm.sample_smc's tempering
    (docs/benchmarks/suite.md, "pm.sample_smc on hare-lynx and gp-poisson").
    """
    times = HARE_LYNX[:, 0] - HARE_LYNX[0, 0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sol, info = odeint(lotka_volterra_rhs, params[4:6], times,
                           args=tuple(float(v) for v in params[:4]),
                           rtol=1e-6, atol=1e-6, mxstep=5000, full_output=True)
    if info["message"] != "Integration successful." or not np.all(np.isfinite(sol)):
        return np.full((times.size, 2), np.inf)
    return np.maximum(sol, 1e-10)


class HareLynxOp(Op):
    """``(alpha, beta, gamma, delta, z0_prey, z0_pred) -> populations (21, 2)``; no gradient."""

    __props__ = ()

    def make_node(self, params) -> Apply:
        params = pt.as_tensor_variable(params)
        return Apply(self, [params], [pt.dmatrix()])

    def perform(self, node, inputs, output_storage) -> None:
        output_storage[0][0] = solve_hare_lynx(inputs[0])

    def grad(self, inputs, output_gradients):
        return [grad_not_implemented(self, 0, inputs[0], "odeint black box: no gradient")]


def hare_lynx_model() -> pm.Model:
    """Lotka-Volterra fitted to :data:`HARE_LYNX` with unknown initial states (d = 8).

    Priors as in the Stan case study: ``alpha, gamma ~ N+(1, 0.5)``, ``beta, delta ~
    N+(0.05, 0.05)``, initial states ``~ LogNormal(log 10, 1)``, noise sds ``~
    LogNormal(-1, 1)``; ``log y_t ~ N(log z_t, sigma)`` per species, the first year
    included (it observes the initial state).
    """
    with pm.Model() as model:
        rates = pm.TruncatedNormal("rates", mu=[1.0, 0.05, 1.0, 0.05],
                                   sigma=[0.5, 0.05, 0.5, 0.05], lower=0.0, shape=4)
        z0 = pm.LogNormal("z0", np.log(10.0), 1.0, shape=2)
        sigma = pm.LogNormal("sigma", -1.0, 1.0, shape=2)
        z = HareLynxOp()(pt.concatenate([rates, z0]))
        pm.Normal("log_pelts", mu=pt.log(z), sigma=sigma, observed=np.log(HARE_LYNX[:, 1:]))
    return model


#: Where the hare-lynx reference chains start: the global mode's neighbourhood (the Stan
#: case study's posterior means), so that no reference chain sits in the local mode.
HARE_LYNX_START = {"rates": np.array([0.55, 0.028, 0.80, 0.024]),
                   "z0": np.array([33.9, 5.9]), "sigma": np.array([0.25, 0.25])}


# ------------------------------------------------------------------ regression on years
@lru_cache(maxsize=1)
def years_data() -> tuple[np.ndarray, np.ndarray]:
    """62 yearly observations, 1952-2013, of a slow linear trend with noise (fixed seed)."""
    years = np.arange(1952.0, 2014.0)
    rng = np.random.default_rng(19522013)
    y = 14.0 + 0.012 * (years - 1952.0) + rng.normal(0.0, 0.15, years.size)
    return years, y


_YEARS_PRIOR = {"alpha": 100.0, "beta": 1.0, "sigma": 1.0}


def years_regression_model() -> pm.Model:
    """``y ~ N(alpha + beta * year, sigma)`` on the raw calendar years (d = 3).

    ``alpha ~ N(0, 100)``, ``beta ~ N(0, 1)``, ``sigma ~ HalfNormal(1)``: the intercept at
    year 0 and the slope have posterior correlation -0.9999.
    """
    years, y = years_data()
    with pm.Model() as model:
        alpha = pm.Normal("alpha", 0.0, _YEARS_PRIOR["alpha"])
        beta = pm.Normal("beta", 0.0, _YEARS_PRIOR["beta"])
        sigma = pm.HalfNormal("sigma", _YEARS_PRIOR["sigma"])
        pm.Normal("y", alpha + beta * years, sigma, observed=y)
    return model


def years_regression_centred() -> pm.Model:
    """The same posterior with the intercept at the mean year (for the NUTS reference).

    ``alpha = a_c - beta * mean(year)`` is a linear map of unit Jacobian, so a flat
    ``a_c`` with the ``N(0, 100)`` prior of ``alpha`` as a potential is exactly the same
    posterior.
    """
    years, y = years_data()
    centre = years.mean()
    with pm.Model() as model:
        a_c = pm.Flat("a_c")
        beta = pm.Normal("beta", 0.0, _YEARS_PRIOR["beta"])
        sigma = pm.HalfNormal("sigma", _YEARS_PRIOR["sigma"])
        alpha = pm.Deterministic("alpha", a_c - beta * centre)
        pm.Potential("alpha_prior", pm.logp(pm.Normal.dist(0.0, _YEARS_PRIOR["alpha"]), alpha))
        pm.Normal("y", a_c + beta * (years - centre), sigma, observed=y)
    return model


# ------------------------------------------------------------------ collinear regression
@lru_cache(maxsize=1)
def collinear_data() -> tuple[np.ndarray, np.ndarray]:
    """100 observations of 24 predictors driven by 3 latent factors (correlations up to
    0.999) and a response with noise sd 0.5 (fixed seed)."""
    rng = np.random.default_rng(2426)
    n, p, k = 100, 24, 3
    factors = rng.normal(size=(n, k))
    X = factors @ rng.normal(size=(k, p)) + 0.05 * rng.normal(size=(n, p)) + 3.0
    beta = rng.normal(0.0, 0.5, p)
    y = 1.0 + X @ beta + rng.normal(0.0, 0.5, n)
    return X, y


_COLLINEAR_PRIOR_SD = 5.0


def collinear_regression_model() -> pm.Model:
    """``y ~ N(alpha + X beta, sigma)``, 24 collinear predictors (d = 26), ``N(0, 5)``
    coefficients, ``sigma ~ HalfNormal(2)``."""
    X, y = collinear_data()
    with pm.Model() as model:
        alpha = pm.Normal("alpha", 0.0, _COLLINEAR_PRIOR_SD)
        beta = pm.Normal("beta", 0.0, _COLLINEAR_PRIOR_SD, shape=X.shape[1])
        sigma = pm.HalfNormal("sigma", 2.0)
        pm.Normal("y", alpha + pt.dot(X, beta), sigma, observed=y)
    return model


def collinear_whitening() -> np.ndarray:
    """``T`` with ``T T^T`` the coefficients' posterior covariance at the true noise sd."""
    X, _ = collinear_data()
    design = np.column_stack([np.ones(len(X)), X])
    precision = design.T @ design / 0.25 + np.eye(design.shape[1]) / _COLLINEAR_PRIOR_SD**2
    return np.linalg.cholesky(np.linalg.inv(precision))


def collinear_regression_whitened() -> pm.Model:
    """The same posterior in nearly whitened coefficients (for the NUTS reference).

    ``(alpha, beta) = T z`` with ``T T^T`` the posterior covariance of the coefficients at
    the true noise sd; ``z`` is flat and the ``N(0, 5)`` prior a potential (a linear map has
    a constant Jacobian), so the posterior is the same.
    """
    X, y = collinear_data()
    T = collinear_whitening()
    with pm.Model() as model:
        z = pm.Flat("z", shape=T.shape[0])
        coef = pt.dot(T, z)
        alpha = pm.Deterministic("alpha", coef[0])
        beta = pm.Deterministic("beta", coef[1:])
        sigma = pm.HalfNormal("sigma", 2.0)
        pm.Potential("prior", pm.logp(pm.Normal.dist(0.0, _COLLINEAR_PRIOR_SD), coef).sum())
        pm.Normal("y", alpha + pt.dot(X, beta), sigma, observed=y)
    return model


# ------------------------------------------------------------------ pharmacokinetic ODE
#: One oral dose (mg) into a fixed volume of distribution (L): the plasma concentration
#: obeys ``dC/dt = ka (PK_DOSE / PK_VOLUME) exp(-ka t) - Vm C / (Km + C)``, ``C(0) = 0``
#: (the gut compartment's first-order absorption solved in closed form).
PK_DOSE, PK_VOLUME = 100.0, 10.0
#: The twelve sampling times (h) after the dose.
PK_TIMES = np.array([0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 10.0, 12.0, 16.0])
#: The true ``(ka [1/h], Vm [mg/L/h], Km [mg/L], sigma)`` the data were simulated with: the
#: peak concentration (about 6 mg/L) stays far below Km, so the data pin Vm / Km (the
#: linear clearance, 0.3 / h) and Km only weakly from below.
PK_TRUE = np.array([1.0, 9.0, 30.0, 0.1])
#: Concentrations (mg/L) at :data:`PK_TIMES`: the solution at :data:`PK_TRUE` times
#: ``exp(N(0, 0.1))`` noise, ``np.random.default_rng(20261126)``, rounded to 4 digits
#: (``pk_simulate()`` recomputes them; a test checks it).
PK_CONC = np.array([2.0533, 3.5618, 5.9711, 7.0671, 5.4263, 5.6507, 5.567, 3.0747, 1.3684,
                    1.022, 0.4786, 0.1412])
PK_SEED = 20261126
#: Tolerances of the black box's ``odeint``: it and the reference's RK4 agree to ~1e-9
#: relative, their log densities to ~1e-6 (tests/test_suite_models.py).
_PK_TOL = {"rtol": 1e-10, "atol": 1e-14, "mxstep": 20000}


def _pk_rhs(c: np.ndarray, t: float, ka: float, vm: float, km: float) -> list[float]:
    conc = float(c[0])
    return [ka * PK_DOSE / PK_VOLUME * math.exp(-ka * t) - vm * conc / (km + conc)]


def _pk_odeint(rhs, y0: np.ndarray, log_theta: np.ndarray) -> np.ndarray | None:
    times = np.concatenate([[0.0], PK_TIMES])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sol, info = odeint(rhs, y0, times, args=tuple(float(v) for v in np.exp(log_theta)),
                           full_output=True, **_PK_TOL)
    if info["message"] != "Integration successful." or not np.all(np.isfinite(sol)):
        return None
    return sol[1:]


def solve_pk(log_theta: np.ndarray) -> np.ndarray:
    """Concentrations at :data:`PK_TIMES` from ``log (ka, Vm, Km)``; ``+inf`` where the
    solver fails or the right-hand side is undefined.

    ``Km`` underflows to 0 below ``log Km = -745``, where ``Vm C / (Km + C)`` at ``C(0) = 0``
    is 0 / 0 (pm.Slice on pk stopped there).  ``+inf`` makes the log likelihood ``-inf``:
    zero density, as for :func:`solve_hare_lynx`, which every sampler rejects (pm.Slice
    accepts a NaN: its comparisons with NaN are false).  Measured in
    docs/benchmarks/suite.md, "pm.sample_smc on hare-lynx and gp-poisson".
    """
    try:
        sol = _pk_odeint(_pk_rhs, np.zeros(1), log_theta)
    except ArithmeticError:  # ZeroDivisionError, OverflowError in the right-hand side
        sol = None
    return np.full(PK_TIMES.size, np.inf) if sol is None else np.maximum(sol[:, 0], 1e-300)


#: Steps of the reference's RK4 per quarter hour (every sampling time is a multiple of it).
PK_RK4_STEPS = 40


@numba.njit(cache=True)
def _pk_sens_rhs(t, c, s_ka, s_vm, s_km, ka, vm, km):
    """``C' = f`` and the forward sensitivities ``S_j = dC / dlog(theta_j)``,
    ``theta = (ka, Vm, Km)``: ``S' = (df/dC) S + df/dlog(theta)``."""
    denom = km + c
    source = ka * PK_DOSE / PK_VOLUME * math.exp(-ka * t)
    dfdc = -vm * km / denom**2
    return (source - vm * c / denom, dfdc * s_ka + source * (1.0 - ka * t),
            dfdc * s_vm - vm * c / denom, dfdc * s_km + vm * c * km / denom**2)


@numba.njit(cache=True)
def _pk_rk4(theta, times, steps_per_quarter):
    ka, vm, km = theta[0], theta[1], theta[2]
    h = 0.25 / steps_per_quarter
    y0 = y1 = y2 = y3 = 0.0
    out = np.empty((times.size, 4))
    step = 0
    for i in range(times.size):
        n_to = int(round(times[i] / h))
        while step < n_to:
            t = step * h
            a0, a1, a2, a3 = _pk_sens_rhs(t, y0, y1, y2, y3, ka, vm, km)
            b0, b1, b2, b3 = _pk_sens_rhs(t + 0.5 * h, y0 + 0.5 * h * a0, y1 + 0.5 * h * a1,
                                          y2 + 0.5 * h * a2, y3 + 0.5 * h * a3, ka, vm, km)
            c0, c1, c2, c3 = _pk_sens_rhs(t + 0.5 * h, y0 + 0.5 * h * b0, y1 + 0.5 * h * b1,
                                          y2 + 0.5 * h * b2, y3 + 0.5 * h * b3, ka, vm, km)
            d0, d1, d2, d3 = _pk_sens_rhs(t + h, y0 + h * c0, y1 + h * c1, y2 + h * c2,
                                          y3 + h * c3, ka, vm, km)
            y0 += h / 6.0 * (a0 + 2.0 * b0 + 2.0 * c0 + d0)
            y1 += h / 6.0 * (a1 + 2.0 * b1 + 2.0 * c1 + d1)
            y2 += h / 6.0 * (a2 + 2.0 * b2 + 2.0 * c2 + d2)
            y3 += h / 6.0 * (a3 + 2.0 * b3 + 2.0 * c3 + d3)
            step += 1
        out[i, 0], out[i, 1], out[i, 2], out[i, 3] = y0, y1, y2, y3
    return out


def solve_pk_sensitivities(log_theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Concentrations ``(12,)`` and their Jacobian ``(12, 3)`` in ``log (ka, Vm, Km)`` by
    fixed-step RK4 (:data:`PK_RK4_STEPS`) of the ODE and its sensitivity equations.

    An explicit Runge-Kutta method applied to the augmented system gives the exact
    derivative of its own solution, so NUTS sees a consistent gradient.
    """
    sol = _pk_rk4(np.exp(np.asarray(log_theta, dtype=float)), PK_TIMES, PK_RK4_STEPS)
    if not np.all(np.isfinite(sol)):
        return np.full(PK_TIMES.size, np.nan), np.full((PK_TIMES.size, 3), np.nan)
    return np.maximum(sol[:, 0], 1e-300), sol[:, 1:]


def pk_simulate() -> np.ndarray:
    """The data of :data:`PK_CONC`, recomputed from :data:`PK_TRUE` and :data:`PK_SEED`."""
    clean = solve_pk(np.log(PK_TRUE[:3]))
    noise = np.random.default_rng(PK_SEED).normal(0.0, PK_TRUE[3], PK_TIMES.size)
    return np.round(clean * np.exp(noise), 4)


class PKOp(Op):
    """``log (ka, Vm, Km) -> concentrations (12,)`` by ``odeint``; no gradient."""

    __props__ = ()

    def make_node(self, log_theta) -> Apply:
        return Apply(self, [pt.as_tensor_variable(log_theta)], [pt.dvector()])

    def perform(self, node, inputs, output_storage) -> None:
        output_storage[0][0] = solve_pk(inputs[0])

    def grad(self, inputs, output_gradients):
        return [grad_not_implemented(self, 0, inputs[0], "odeint black box: no gradient")]


class PKSensitivityOp(Op):
    """``log (ka, Vm, Km) -> (concentrations (12,), Jacobian (12, 3))`` from one solve of
    the forward sensitivity equations; the gradient of the concentrations is ``J^T g``."""

    __props__ = ()

    def make_node(self, log_theta) -> Apply:
        return Apply(self, [pt.as_tensor_variable(log_theta)], [pt.dvector(), pt.dmatrix()])

    def perform(self, node, inputs, output_storage) -> None:
        conc, jac = solve_pk_sensitivities(inputs[0])
        output_storage[0][0], output_storage[1][0] = conc, jac

    def grad(self, inputs, output_gradients):
        from pytensor.gradient import DisconnectedType

        g_conc, g_jac = output_gradients
        if not isinstance(g_jac.type, DisconnectedType):
            raise NotImplementedError("second derivatives of the PK solution")
        _, jac = self(inputs[0])  # merged with the forward node: one solve
        return [pt.dot(g_conc, jac)]

    def connection_pattern(self, node):
        return [[True, True]]


_PK_PRIOR = {"log_ka": (0.0, 1.0), "log_Vm": (np.log(10.0), 1.5),
             "log_Km": (np.log(10.0), 1.5), "log_sigma": (np.log(0.1), 0.5)}


def _pk(differentiable: bool) -> pm.Model:
    with pm.Model() as model:
        params = {name: pm.Normal(name, mu, sd) for name, (mu, sd) in _PK_PRIOR.items()}
        log_theta = pt.stack([params["log_ka"], params["log_Vm"], params["log_Km"]])
        conc = PKSensitivityOp()(log_theta)[0] if differentiable else PKOp()(log_theta)
        pm.Normal("log_conc", mu=pt.log(conc), sigma=pt.exp(params["log_sigma"]),
                  observed=np.log(PK_CONC))
    return model


def pk_model() -> pm.Model:
    """One-compartment PK with first-order absorption and Michaelis-Menten elimination,
    fitted to :data:`PK_CONC` (d = 4, everything on the log scale, black-box ``odeint``).

    ``log ka ~ N(0, 1)``, ``log Vm, log Km ~ N(log 10, 1.5)``, ``log sigma ~ N(log 0.1,
    0.5)``; ``log C_obs ~ N(log C(t), sigma)``.  The concentrations stay below Km, so the
    posterior runs out along a long arm where Km and Vm grow together at fixed Vm / Km and
    bends where the elimination's saturation starts to show.
    """
    return _pk(differentiable=False)


def pk_model_differentiable() -> pm.Model:
    """The same posterior with the ODE's gradient from forward sensitivities (for NUTS)."""
    return _pk(differentiable=True)


# ------------------------------------------------------------------ latent GP Poisson
#: Inputs of the latent GP (11 equally spaced periods) and the fixed log-rate offset.
GP_X = np.arange(11.0)
GP_OFFSET = 0.5
#: True amplitude and lengthscale of the simulated latent function.
GP_TRUE = (0.8, 2.0)
GP_SEED = 20261127
#: Relative jitter on the GP's correlation matrix (part of the model: ``K = amp^2 (R + eps I)``).
GP_JITTER = 1e-6
#: Counts at :data:`GP_X`: ``f ~ GP(0, K(GP_TRUE))``, ``y ~ Poisson(exp(GP_OFFSET + f))``
#: drawn with ``np.random.default_rng(GP_SEED)`` (``gp_simulate()`` recomputes them).
GP_COUNTS = np.array([4, 5, 3, 2, 4, 6, 5, 5, 4, 4, 0])


def gp_correlation(lengthscale) -> pt.TensorVariable:
    """The latent GP's correlation matrix on :data:`GP_X`: squared exponential with
    ``lengthscale`` plus ``1e-6 I`` (a PyTensor expression; ``.eval()`` for its values)."""
    d2 = (GP_X[:, None] - GP_X[None, :]) ** 2
    return pt.exp(-0.5 * d2 / lengthscale**2) + GP_JITTER * np.eye(GP_X.size)


def gp_simulate() -> np.ndarray:
    """The counts of :data:`GP_COUNTS`, recomputed from :data:`GP_TRUE` and :data:`GP_SEED`."""
    amp, ls = GP_TRUE
    rng = np.random.default_rng(GP_SEED)
    cov = amp**2 * gp_correlation(ls).eval()
    f = rng.multivariate_normal(np.zeros(GP_X.size), cov)
    return rng.poisson(np.exp(GP_OFFSET + f))


_GP_PRIOR = {"log_amp": (0.0, 1.0), "log_ls": (np.log(2.0), 0.5)}


def _gp(centred: bool) -> pm.Model:
    with pm.Model() as model:
        log_amp = pm.Normal("log_amp", *_GP_PRIOR["log_amp"])
        log_ls = pm.Normal("log_ls", *_GP_PRIOR["log_ls"])
        chol = pt.exp(log_amp) * pt.linalg.cholesky(gp_correlation(pt.exp(log_ls)))
        if centred:
            f = pm.MvNormal("f", mu=np.zeros(GP_X.size), chol=chol)
        else:
            z = pm.Normal("z", 0.0, 1.0, shape=GP_X.size)
            f = pm.Deterministic("f", pt.dot(chol, z))
        pm.Poisson("y", pt.exp(GP_OFFSET + f), observed=GP_COUNTS)
    return model


def gp_poisson_model() -> pm.Model:
    """Latent GP Poisson regression, centred (d = 13): ``f ~ MvNormal(0, K)``,
    ``K = amp^2 (exp(-(x - x')^2 / (2 ls^2)) + 1e-6 I)``, ``y ~ Poisson(exp(0.5 + f))``.

    ``log amp ~ N(0, 1)``, ``log ls ~ N(log 2, 0.5)``: the latent values and the GP's
    amplitude form a funnel (small counts inform ``f`` weakly).
    """
    return _gp(centred=True)


def gp_poisson_noncentred() -> pm.Model:
    """The same posterior, non-centred: ``f = L(amp, ls) z`` (for the NUTS reference)."""
    return _gp(centred=False)


# ------------------------------------------------------- posteriordb gp_pois_regr
#: posteriordb's data ``gp_pois_regr``: 11 inputs and counts (public, posteriordb's
#: ``posterior_database/data/data/gp_pois_regr.json.zip``).
GP_POIS_REGR_X = np.arange(-10.0, 11.0, 2.0)
GP_POIS_REGR_K = np.array([40, 37, 29, 12, 4, 3, 9, 19, 77, 82, 33])
#: Stan's jitter on the covariance (``diag_matrix(rep_vector(1e-10, N))``).
GP_POIS_REGR_JITTER = 1e-10


def gp_pois_regr_cov(alpha, rho):
    """``gp_exp_quad_cov(x, alpha, rho) + 1e-10 I`` (NumPy or PyTensor arguments)."""
    d2 = (GP_POIS_REGR_X[:, None] - GP_POIS_REGR_X[None, :]) ** 2
    lib = pt if isinstance(alpha, pt.TensorVariable) else np
    return alpha**2 * lib.exp(-0.5 * d2 / rho**2) + GP_POIS_REGR_JITTER * np.eye(d2.shape[0])


def gp_pois_regr_model() -> pm.Model:
    """posteriordb's ``gp_pois_regr-gp_pois_regr`` as its Stan model writes it (d = 13).

    ``rho ~ Gamma(25, 4)``, ``alpha ~ HalfNormal(2)``, ``f_tilde ~ N(0, I_11)``,
    ``f = L f_tilde`` with ``L L^T = alpha^2 exp(-(x - x')^2 / (2 rho^2)) + 1e-10 I``,
    ``k ~ Poisson(exp(f))``: the hyperparameters act on the counts only through ``L``.
    """
    with pm.Model() as model:
        rho = pm.Gamma("rho", alpha=25.0, beta=4.0)
        alpha = pm.HalfNormal("alpha", 2.0)
        f_tilde = pm.Normal("f_tilde", 0.0, 1.0, shape=GP_POIS_REGR_X.size)
        chol = pt.linalg.cholesky(gp_pois_regr_cov(alpha, rho))
        f = pm.Deterministic("f", pt.dot(chol, f_tilde))
        pm.Poisson("k", pt.exp(f), observed=GP_POIS_REGR_K)
    return model


def gp_pois_regr_from_posteriordb(draws: dict[str, np.ndarray]) -> np.ndarray:
    """posteriordb's reference draws (``rho``, ``alpha``, ``f[1]`` .. ``f[11]``, each
    ``(chains, draws)``) as the model's free variables ``(rho, alpha, f_tilde)``, shape
    ``(chains, draws, 13)``: posteriordb stores ``f``, the model samples
    ``f_tilde = L^{-1} f`` (L's condition number stays below 1e6 there, so the 15 digits
    stored leave ``f_tilde`` exact to about 1e-9)."""
    rho, alpha = np.asarray(draws["rho"], float), np.asarray(draws["alpha"], float)
    f = np.stack([np.asarray(draws[f"f[{i + 1}]"], float)
                  for i in range(GP_POIS_REGR_X.size)], axis=-1)
    f_tilde = np.empty_like(f)
    for idx in np.ndindex(rho.shape):
        chol = np.linalg.cholesky(gp_pois_regr_cov(float(alpha[idx]), float(rho[idx])))
        f_tilde[idx] = solve_triangular(chol, f[idx], lower=True)
    return np.concatenate([rho[..., None], alpha[..., None], f_tilde], axis=-1)
