"""Data of the classic and feature models: small public data sets and fixed simulations.

Every function returns the same arrays on every call (the seeds are fixed here, not passed
in), so a model and its cached reference always see the same data.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "CENSOR_AT",
    "EIGHT_SCHOOLS_SIGMA",
    "EIGHT_SCHOOLS_Y",
    "MULTINOMIAL_COUNTS",
    "RadonData",
    "ScalesData",
    "anova_data",
    "censored_data",
    "imputation_data",
    "lkj_data",
    "logistic_data",
    "logistic_raw_data",
    "mixture_data",
    "poisson_data",
    "radon_data",
    "robust_data",
    "scales_data",
    "timeseries_data",
    "truncated_data",
]

#: Rubin (1981), SAT coaching effects and standard errors of 8 schools (public).
EIGHT_SCHOOLS_Y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
EIGHT_SCHOOLS_SIGMA = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])


@dataclass(frozen=True)
class RadonData:
    """Radon-style measurements: log radon ``y`` of houses in ``n_counties`` counties."""

    y: np.ndarray
    floor: np.ndarray  # 1 = measured on the first floor (no basement), 0 = basement
    county: np.ndarray  # county index of each house, 0 .. n_counties - 1
    n_counties: int


def radon_data(n_counties: int = 20) -> RadonData:
    """Simulated radon-like data (Gelman & Hill, 2007, ch. 12), unbalanced counties.

    County sizes are geometric (mean about 9; several counties with 1-2 houses, as in the
    Minnesota data), county intercepts ``N(1.4, 0.35)``, floor effect ``-0.65``, residual
    sd ``0.75``, 25 % of houses without basement.
    """
    rng = np.random.default_rng(20070101)
    sizes = np.minimum(rng.geometric(1.0 / 9.0, size=n_counties), 40)
    county = np.repeat(np.arange(n_counties), sizes)
    floor = (rng.random(county.size) < 0.25).astype(float)
    intercepts = rng.normal(1.4, 0.35, size=n_counties)
    y = intercepts[county] - 0.65 * floor + rng.normal(0.0, 0.75, size=county.size)
    return RadonData(y=y, floor=floor, county=county, n_counties=n_counties)


def logistic_data(n: int = 300, p: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """Standardised, mildly correlated predictors ``X`` (n, p) and binary outcomes ``y``."""
    rng = np.random.default_rng(19580101)
    latent = rng.normal(size=(n, p)) + 0.5 * rng.normal(size=(n, 1))
    X = (latent - latent.mean(axis=0)) / latent.std(axis=0)
    beta = np.linspace(-1.0, 1.0, p)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-(-0.5 + X @ beta)))).astype(float)
    return X, y


def logistic_raw_data(n: int = 300) -> tuple[np.ndarray, np.ndarray]:
    """Unstandardised, collinear predictors and binary outcomes.

    Columns: age (years, ~45 +- 12), income (k$, ~50 +- 15), tenure (years, 0.8 age - 12
    plus noise: correlation with age about 0.95) and a small rate (~0.02 +- 0.005).  The
    posterior sds of the coefficients of a logistic regression on them differ by 3 orders
    of magnitude, and the intercept is strongly correlated with them (uncentred columns).
    """
    rng = np.random.default_rng(19580202)
    age = rng.normal(45.0, 12.0, size=n)
    income = rng.normal(50.0, 15.0, size=n)
    tenure = 0.8 * age - 12.0 + rng.normal(0.0, 3.0, size=n)
    rate = rng.normal(0.02, 0.005, size=n)
    X = np.column_stack([age, income, tenure, rate])
    eta = -4.0 + 0.04 * age + 0.02 * income + 0.03 * tenure + 40.0 * rate
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-eta))).astype(float)
    return X, y


def poisson_data(n: int = 200, p: int = 4) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Predictors ``X`` (n, p), exposures and counts of a Poisson regression with offset."""
    rng = np.random.default_rng(18370101)
    X = rng.normal(size=(n, p))
    exposure = rng.uniform(0.5, 2.0, size=n)
    beta = np.array([0.4, -0.3, 0.2, 0.0])[:p]
    y = rng.poisson(exposure * np.exp(0.8 + X @ beta)).astype(float)
    return X, exposure, y


@dataclass(frozen=True)
class ScalesData:
    """Data of the model with parameters of very different scales (all conjugate)."""

    failure_times: np.ndarray  # exponential, rate ~2e-3 per hour
    successes: int  # binomial, probability ~0.3
    trials: int
    measurements: np.ndarray  # normal, mean ~1200, variance ~1600
    dose: np.ndarray  # regressor ~1e3
    response: np.ndarray  # N(c * dose, 1), c ~1e-3


def scales_data() -> ScalesData:
    """Simulated data for :func:`pymc_kameleon.models.classic.scales_model`."""
    rng = np.random.default_rng(10001000)
    failure_times = rng.exponential(1.0 / 2e-3, size=25)
    trials = 40
    successes = int(rng.binomial(trials, 0.3))
    measurements = rng.normal(1200.0, 40.0, size=15)
    dose = rng.uniform(500.0, 1500.0, size=20)
    response = 1e-3 * dose + rng.normal(0.0, 1.0, size=20)
    return ScalesData(failure_times, successes, trials, measurements, dose, response)


# ------------------------------------------------------------------ the PyMC-feature models
#: Category counts of the Dirichlet-multinomial model.
MULTINOMIAL_COUNTS = np.array([10, 20, 5, 40])


def imputation_data() -> np.ndarray:
    """30 normal measurements (mean 1, sd 2), three of them missing (NaN)."""
    y = np.random.default_rng(30303).normal(1.0, 2.0, size=30)
    y[[3, 11, 22]] = np.nan
    return y


def lkj_data() -> np.ndarray:
    """100 draws of a 3-d normal with sds (1, 2, 0.5) and correlations 0.5, 0.2, 0.3."""
    corr = np.array([[1.0, 0.5, 0.2], [0.5, 1.0, 0.3], [0.2, 0.3, 1.0]])
    sds = np.array([1.0, 2.0, 0.5])
    rng = np.random.default_rng(333)
    return rng.multivariate_normal([0.5, -1.0, 2.0], corr * np.outer(sds, sds), size=100)


def anova_data(n: int = 80, groups: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """One-way layout: group index of each of ``n`` observations and the responses."""
    rng = np.random.default_rng(5555)
    group = rng.integers(0, groups, size=n)
    effects = np.linspace(-0.6, 0.6, groups)
    return group, 2.0 + effects[group] + rng.normal(0.0, 1.0, size=n)


def timeseries_data(n: int = 25) -> np.ndarray:
    """A Gaussian random walk (innovation sd 0.3) observed with noise of sd 0.5."""
    rng = np.random.default_rng(2525)
    return np.cumsum(rng.normal(0.0, 0.3, size=n)) + rng.normal(0.0, 0.5, size=n)


#: Upper censoring point of :func:`censored_data`.
CENSOR_AT = 1.5


def censored_data() -> np.ndarray:
    """50 normal values (mean 1, sd 1) recorded as ``CENSOR_AT`` when above it."""
    return np.minimum(np.random.default_rng(5050).normal(1.0, 1.0, size=50), CENSOR_AT)


def mixture_data() -> np.ndarray:
    """200 values from an equal mixture of N(-2, 1) and N(2, 1)."""
    rng = np.random.default_rng(2002)
    return np.concatenate([rng.normal(-2.0, 1.0, 100), rng.normal(2.0, 1.0, 100)])


def robust_data(n: int = 40) -> tuple[np.ndarray, np.ndarray]:
    """A line ``1 + 2 x`` with noise of sd 0.5 and three gross outliers."""
    rng = np.random.default_rng(4040)
    x = rng.normal(size=n)
    y = 1.0 + 2.0 * x + rng.normal(0.0, 0.5, size=n)
    y[[5, 17, 31]] += np.array([6.0, -5.0, 8.0])
    return x, y


def truncated_data() -> np.ndarray:
    """Normal values (mean 0.5, sd 1) observed only when positive."""
    y = np.random.default_rng(6060).normal(0.5, 1.0, size=60)
    return y[y > 0]
