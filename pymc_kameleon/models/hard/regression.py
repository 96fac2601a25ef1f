"""Two regressions whose coefficients are nearly collinear in the posterior.

* :func:`years_regression_model`: a regression on calendar years, intercept-slope
  correlation -0.9999;
* :func:`collinear_regression_model`: 24 collinear predictors, d = 26.

Each has a reparametrisation with the same posterior for the NUTS reference.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pymc as pm
import pytensor.tensor as pt

__all__ = [
    "collinear_data",
    "collinear_regression_model",
    "collinear_regression_whitened",
    "collinear_whitening",
    "years_data",
    "years_regression_centred",
    "years_regression_model",
]


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
