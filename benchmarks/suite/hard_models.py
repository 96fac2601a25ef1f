"""The suite's hard real posteriors: the classes of model where a gradient-free step fails.

Each class was measured to defeat the steps' warm-up of 2026-11-26 (docs/benchmarks/suite.md,
"Hard posteriors"):

* :func:`hare_lynx_model`: the predator-prey equations fitted to the Hudson's Bay Company
  pelt counts with unknown initial states (8 parameters); PyMC's initial point lies in the
  basin of a local mode that holds no posterior mass;
* :func:`years_regression_model`: a regression on calendar years, intercept-slope
  correlation -0.9999;
* :func:`collinear_regression_model`: 24 collinear predictors, d = 26.

Each has a reference parametrisation with the same posterior (NUTS can sample it) or a
start for a long reference chain.
"""

from __future__ import annotations

import warnings
from functools import lru_cache

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.gradient import grad_not_implemented
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from scipy.integrate import odeint

from pymc_kameleon.models.ode import _rhs  # the same equations, initial state free

__all__ = [
    "HARE_LYNX",
    "collinear_regression_model",
    "collinear_regression_whitened",
    "collinear_whitening",
    "hare_lynx_model",
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
    shape ``(21, 2)``; NaN where the solver fails (a rejected proposal)."""
    times = HARE_LYNX[:, 0] - HARE_LYNX[0, 0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sol, info = odeint(_rhs, params[4:6], times, args=tuple(float(v) for v in params[:4]),
                           rtol=1e-6, atol=1e-6, mxstep=5000, full_output=True)
    if info["message"] != "Integration successful." or not np.all(np.isfinite(sol)):
        return np.full((times.size, 2), np.nan)
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
