"""Data of the suite's models: small public data sets and data simulated with fixed seeds.

Every function returns the same arrays on every call (the seeds are fixed here, not passed
in), so a model and its cached reference always see the same data.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = [
    "EIGHT_SCHOOLS_SIGMA",
    "EIGHT_SCHOOLS_Y",
    "RadonData",
    "ScalesData",
    "logistic_data",
    "logistic_raw_data",
    "poisson_data",
    "radon_data",
    "scales_data",
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
    """Simulated data for :func:`benchmarks.suite.models.scales_model`."""
    rng = np.random.default_rng(10001000)
    failure_times = rng.exponential(1.0 / 2e-3, size=25)
    trials = 40
    successes = int(rng.binomial(trials, 0.3))
    measurements = rng.normal(1200.0, 40.0, size=15)
    dose = rng.uniform(500.0, 1500.0, size=20)
    response = 1e-3 * dose + rng.normal(0.0, 1.0, size=20)
    return ScalesData(failure_times, successes, trials, measurements, dose, response)
