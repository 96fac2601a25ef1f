"""Models built from the PyMC features users rely on.

Transforms other than ``log`` (simplex, ordered, zero-sum, packed Cholesky factor), missing
values imputed by PyMC, censored and truncated likelihoods, a mixture, ``pm.Data`` with a
``Deterministic``, and a latent time series.  A drop-in step must run on these unchanged and
converge at ``pm.sample``'s defaults; their references are long NUTS runs (the
Dirichlet-multinomial's is closed form).  Their data are in :mod:`pymc_kameleon.models.data`.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytensor.tensor as pt

from .data import (
    CENSOR_AT,
    MULTINOMIAL_COUNTS,
    anova_data,
    censored_data,
    imputation_data,
    lkj_data,
    mixture_data,
    robust_data,
    timeseries_data,
    truncated_data,
)

__all__ = ["anova_zerosum_model", "censored_model", "dirichlet_multinomial_model",
           "imputation_model", "lkj_model", "mixture_model", "robust_regression_model",
           "timeseries_model", "timeseries_noncentred", "truncated_model"]


def imputation_model() -> pm.Model:
    """Normal mean and sd with three missing observations (PyMC's ``y_unobserved``), d = 5."""
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 10.0)
        sigma = pm.HalfNormal("sigma", 5.0)
        pm.Normal("y", mu, sigma, observed=np.ma.masked_invalid(imputation_data()))
    return model


def lkj_model() -> pm.Model:
    """3-d normal with an LKJ(2) prior on the correlations: packed Cholesky factor, d = 9."""
    with pm.Model() as model:
        chol, _, _ = pm.LKJCholeskyCov("chol", n=3, eta=2.0, compute_corr=True,
                                       sd_dist=pm.Exponential.dist(1.0, shape=3))
        mu = pm.Normal("mu", 0.0, 5.0, shape=3)
        pm.MvNormal("obs", mu, chol=chol, observed=lkj_data())
    return model


def dirichlet_multinomial_model() -> pm.Model:
    """Category probabilities with a flat Dirichlet prior (simplex transform), d = 4 (3 free)."""
    with pm.Model() as model:
        p = pm.Dirichlet("p", a=np.ones(MULTINOMIAL_COUNTS.size))
        pm.Multinomial("counts", n=int(MULTINOMIAL_COUNTS.sum()), p=p,
                       observed=MULTINOMIAL_COUNTS)
    return model


def anova_zerosum_model() -> pm.Model:
    """One-way ANOVA, 5 group effects summing to zero (``ZeroSumNormal``), d = 7 (6 free)."""
    group, y = anova_data()
    with pm.Model(coords={"group": list("abcde")}) as model:
        intercept = pm.Normal("intercept", 0.0, 5.0)
        effect = pm.ZeroSumNormal("effect", sigma=1.0, dims="group")
        sigma = pm.HalfNormal("sigma", 2.0)
        pm.Normal("y", intercept + effect[group], sigma, observed=y)
    return model


def timeseries_model() -> pm.Model:
    """Latent Gaussian random walk with unknown innovation sd, observed with noise, d = 26."""
    y = timeseries_data()
    with pm.Model() as model:
        sigma = pm.HalfNormal("sigma", 1.0)
        x = pm.GaussianRandomWalk("x", sigma=sigma, init_dist=pm.Normal.dist(0.0, 5.0),
                                  shape=y.size)
        pm.Normal("y", x, 0.5, observed=y)
    return model


def timeseries_noncentred() -> pm.Model:
    """The same posterior, non-centred: ``x = x_0 + cumsum(sigma z)`` (a deterministic).

    The random walk's path and ``sigma`` form a funnel (NUTS on :func:`timeseries_model`
    reached a bulk ESS of 915 of 20000 with max R-hat 1.008); the reference is made here.
    """
    y = timeseries_data()
    with pm.Model() as model:
        sigma = pm.HalfNormal("sigma", 1.0)
        x0 = pm.Normal("x0", 0.0, 5.0)
        z = pm.Normal("z", 0.0, 1.0, shape=y.size - 1)
        steps = pt.concatenate([pt.zeros(1), pt.cumsum(sigma * z)])
        x = pm.Deterministic("x", x0 + steps)
        pm.Normal("y", x, 0.5, observed=y)
    return model


def censored_model() -> pm.Model:
    """Normal mean and sd from right-censored data (``pm.Censored``), d = 2."""
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 5.0)
        sigma = pm.HalfNormal("sigma", 2.0)
        pm.Censored("y", pm.Normal.dist(mu, sigma), lower=None, upper=CENSOR_AT,
                    observed=censored_data())
    return model


def mixture_model() -> pm.Model:
    """Two-component normal mixture: ordered means, Dirichlet weights, d = 4 (3 free)."""
    with pm.Model() as model:
        w = pm.Dirichlet("w", np.ones(2))
        mu = pm.Normal("mu", [-1.0, 1.0], 3.0, shape=2, initval=[-1.0, 1.0],
                       transform=pm.distributions.transforms.ordered)
        pm.NormalMixture("y", w=w, mu=mu, sigma=1.0, observed=mixture_data())
    return model


def robust_regression_model() -> pm.Model:
    """Student-t regression on ``pm.Data`` with the line as a ``Deterministic``, d = 3."""
    x, y = robust_data()
    with pm.Model() as model:
        xd = pm.Data("x", x)
        coef = pm.Normal("coef", 0.0, 5.0, shape=2)
        sigma = pm.HalfNormal("sigma", 2.0)
        line = pm.Deterministic("line", coef[0] + coef[1] * xd)
        pm.StudentT("y", nu=4.0, mu=line, sigma=sigma, observed=y)
    return model


def truncated_model() -> pm.Model:
    """Normal mean and sd from data truncated at 0 (``pm.Truncated``), d = 2."""
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 5.0)
        sigma = pm.HalfNormal("sigma", 2.0)
        pm.Truncated("y", pm.Normal.dist(mu, sigma), lower=0.0, observed=truncated_data())
    return model
