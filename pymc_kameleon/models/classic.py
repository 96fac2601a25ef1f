"""Classic test posteriors: eight schools, radon, regressions, scales, a Gaussian, a funnel.

Every factory takes no argument (the data are fixed in :mod:`pymc_kameleon.models.data`)
and builds a fresh ``pm.Model``; module-level functions, so they pickle.  The real-model
benchmark suite runs them next to :mod:`pymc_kameleon.models.features` and
:mod:`pymc_kameleon.models.hard`; the tests use some of them.

* :func:`eight_schools_centred`, :func:`eight_schools_noncentred`: Rubin's (1981) eight
  schools, the centred form a funnel;
* :func:`radon_centred`, :func:`radon_noncentred`: radon-style varying intercepts;
* :func:`logistic_model`, :func:`logistic_raw_model` (collinear, unstandardised
  predictors) and :func:`logistic_raw_whitened` (the same posterior, whitened);
* :func:`poisson_model`: a Poisson regression with an offset;
* :func:`scales_model`: conjugate blocks on scales from 1e-4 to 1e3;
* :func:`gauss50_model`: a 50-d correlated Gaussian (:func:`gauss50_cov`);
* :func:`funnel_model`: Neal's funnel.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from .data import (
    EIGHT_SCHOOLS_SIGMA,
    EIGHT_SCHOOLS_Y,
    logistic_data,
    logistic_raw_data,
    poisson_data,
    radon_data,
    scales_data,
)

__all__ = ["FUNNEL_SCALE", "SCALES_K0", "eight_schools_centred", "eight_schools_noncentred",
           "funnel_model", "gauss50_cov", "gauss50_model", "logistic_model",
           "logistic_raw_model", "logistic_raw_whitened", "poisson_model", "radon_centred",
           "radon_noncentred", "scales_model"]


def eight_schools_centred() -> pm.Model:
    """8 schools (Rubin, 1981), centred: ``theta_j ~ N(mu, tau)``, ``tau ~ HalfCauchy(5)``."""
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 5.0)
        tau = pm.HalfCauchy("tau", 5.0)
        theta = pm.Normal("theta", mu, tau, shape=8)
        pm.Normal("y", theta, EIGHT_SCHOOLS_SIGMA, observed=EIGHT_SCHOOLS_Y)
    return model


def eight_schools_noncentred() -> pm.Model:
    """8 schools, non-centred: ``theta = mu + tau * theta_std`` (a deterministic)."""
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 5.0)
        tau = pm.HalfCauchy("tau", 5.0)
        theta_std = pm.Normal("theta_std", 0.0, 1.0, shape=8)
        theta = pm.Deterministic("theta", mu + tau * theta_std)
        pm.Normal("y", theta, EIGHT_SCHOOLS_SIGMA, observed=EIGHT_SCHOOLS_Y)
    return model


def _radon(centred: bool) -> pm.Model:
    data = radon_data()
    with pm.Model() as model:
        mu_a = pm.Normal("mu_a", 0.0, 5.0)
        sigma_a = pm.HalfNormal("sigma_a", 1.0)
        if centred:
            a = pm.Normal("a", mu_a, sigma_a, shape=data.n_counties)
        else:
            a_std = pm.Normal("a_std", 0.0, 1.0, shape=data.n_counties)
            a = pm.Deterministic("a", mu_a + sigma_a * a_std)
        b = pm.Normal("b", 0.0, 5.0)
        sigma_y = pm.HalfNormal("sigma_y", 2.0)
        pm.Normal("y", a[data.county] + b * data.floor, sigma_y, observed=data.y)
    return model


def radon_centred() -> pm.Model:
    """Radon-style varying intercepts (centred, as usually written), 20 counties, d = 24."""
    return _radon(centred=True)


def radon_noncentred() -> pm.Model:
    """The same posterior, non-centred: ``a = mu_a + sigma_a * a_std`` (a deterministic).

    A suite model of its own (free variables ``a_std``) and the parametrisation on which the
    NUTS reference of the centred model is made.
    """
    return _radon(centred=False)


def _logistic(X: np.ndarray, y: np.ndarray, prior_sd: float) -> pm.Model:
    """Logistic regression with intercept, ``N(0, prior_sd)`` priors on every coefficient."""
    with pm.Model() as model:
        alpha = pm.Normal("alpha", 0.0, prior_sd)
        beta = pm.Normal("beta", 0.0, prior_sd, shape=X.shape[1])
        pm.Bernoulli("y", logit_p=alpha + pt.dot(X, beta), observed=y)
    return model


def logistic_model() -> pm.Model:
    """Logistic regression, 8 standardised predictors + intercept, ``N(0, 2.5)`` priors."""
    return _logistic(*logistic_data(), prior_sd=2.5)


def logistic_raw_model() -> pm.Model:
    """Logistic regression on *unstandardised, collinear* predictors, ``N(0, 10)`` priors."""
    return _logistic(*logistic_raw_data(), prior_sd=10.0)


def logistic_raw_whitened() -> pm.Model:
    """The posterior of :func:`logistic_raw_model` in whitened coordinates (for NUTS).

    ``(alpha, beta) = T z`` with ``T T^T`` the inverse of a Gauss-Newton approximation of
    the posterior precision, ``D^T D / 4 + I / 100`` (``D = [1, X]``); ``z`` is flat and the
    ``N(0, 10)`` prior is a potential (the Jacobian of a linear map is constant), so this is
    exactly the same posterior, with nearly uncorrelated unit-scale coordinates.
    """
    X, y = logistic_raw_data()
    design = np.column_stack([np.ones(len(X)), X])
    precision = design.T @ design / 4.0 + np.eye(design.shape[1]) / 100.0
    T = np.linalg.cholesky(np.linalg.inv(precision))
    with pm.Model() as model:
        z = pm.Flat("z", shape=design.shape[1])
        coef = pt.dot(T, z)
        alpha = pm.Deterministic("alpha", coef[0])
        beta = pm.Deterministic("beta", coef[1:])
        pm.Potential("prior", pm.logp(pm.Normal.dist(0.0, 10.0), coef).sum())
        pm.Bernoulli("y", logit_p=alpha + pt.dot(X, beta), observed=y)
    return model


def poisson_model() -> pm.Model:
    """Poisson regression with a log-exposure offset, 4 predictors + intercept."""
    X, exposure, y = poisson_data()
    with pm.Model() as model:
        alpha = pm.Normal("alpha", 0.0, 2.0)
        beta = pm.Normal("beta", 0.0, 1.0, shape=X.shape[1])
        pm.Poisson("y", pt.exp(np.log(exposure) + alpha + pt.dot(X, beta)), observed=y)
    return model


#: Prior precision factor of ``mu`` in :func:`scales_model` (``mu ~ N(1000, sigma2 / K0)``).
SCALES_K0 = 0.01


def scales_model() -> pm.Model:
    """Five independent conjugate blocks whose posteriors live on scales 1e-4 .. 1e3.

    ``lam`` (exponential failure rate ~2e-3, Gamma prior), ``p`` (binomial probability,
    Beta prior), ``mu``, ``sigma2`` (normal mean ~1200 and variance ~1600 with the
    normal-inverse-gamma prior) and ``c`` (regression slope ~1e-3 on a regressor ~1e3).
    The posterior is known in closed form.
    """
    d = scales_data()
    with pm.Model() as model:
        lam = pm.Gamma("lam", alpha=2.0, beta=500.0)
        pm.Exponential("failure_times", lam, observed=d.failure_times)
        p = pm.Beta("p", 2.0, 2.0)
        pm.Binomial("successes", n=d.trials, p=p, observed=d.successes)
        sigma2 = pm.InverseGamma("sigma2", alpha=3.0, beta=2000.0)
        mu = pm.Normal("mu", 1000.0, pt.sqrt(sigma2 / SCALES_K0))
        pm.Normal("measurements", mu, pt.sqrt(sigma2), observed=d.measurements)
        c = pm.Normal("c", 0.0, 0.01)
        pm.Normal("response", c * d.dose, 1.0, observed=d.response)
    return model


def gauss50_cov() -> tuple[np.ndarray, np.ndarray]:
    """Mean and covariance of the 50-d Gaussian: AR(1) correlation 0.9, sds 0.5 .. 2."""
    d = 50
    lag = np.abs(np.subtract.outer(np.arange(d), np.arange(d)))
    sds = np.geomspace(0.5, 2.0, d)
    cov = 0.9**lag * np.outer(sds, sds)
    mean = np.random.default_rng(50).normal(0.0, 1.0, size=d)
    return mean, cov


def gauss50_model() -> pm.Model:
    """50-d correlated Gaussian (condition number ~ 1e3); analytic reference."""
    mean, cov = gauss50_cov()
    with pm.Model() as model:
        pm.MvNormal("x", mu=mean, cov=cov, shape=mean.size)
    return model


#: Scale of the log-variance in Neal's funnel.
FUNNEL_SCALE = 3.0


def funnel_model() -> pm.Model:
    """Neal's (2003) funnel, centred: ``v ~ N(0, 3)``, ``x_i | v ~ N(0, exp(v / 2))``, d = 10."""
    with pm.Model() as model:
        v = pm.Normal("v", 0.0, FUNNEL_SCALE)
        pm.Normal("x", 0.0, pt.exp(v / 2.0), shape=9)
    return model
