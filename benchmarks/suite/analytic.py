"""Closed-form posterior means and standard deviations of the suite's analytic models.

Each function returns ``(mean, sd)`` arrays in the order of
:func:`benchmarks.suite.models.free_var_labels` of the corresponding model.
"""

from __future__ import annotations

import numpy as np

from pymc_kameleon.models.classic import FUNNEL_SCALE, SCALES_K0, gauss50_cov
from pymc_kameleon.models.data import MULTINOMIAL_COUNTS, scales_data

__all__ = ["ANALYTIC", "banana_moments", "dirichlet_moments", "funnel_moments", "gauss50_moments",
           "scales_moments"]


def scales_moments() -> tuple[np.ndarray, np.ndarray]:
    """Posterior of :func:`~pymc_kameleon.models.classic.scales_model`: ``lam, p, sigma2, mu, c``.

    ``lam | t ~ Gamma(2 + n, 500 + sum t)``; ``p | k ~ Beta(2 + k, 2 + n - k)``; the
    normal-inverse-gamma update gives ``sigma2 ~ InvGamma(a_n, b_n)`` and
    ``mu ~ t_{2 a_n}(m_n, b_n / (a_n k_n))``; ``c`` is a conjugate normal.
    """
    d = scales_data()
    # exponential rate, Gamma(2, rate 500) prior
    a_lam, b_lam = 2.0 + d.failure_times.size, 500.0 + d.failure_times.sum()
    lam = (a_lam / b_lam, np.sqrt(a_lam) / b_lam)
    # binomial probability, Beta(2, 2) prior
    a_p, b_p = 2.0 + d.successes, 2.0 + d.trials - d.successes
    p_var = a_p * b_p / ((a_p + b_p) ** 2 * (a_p + b_p + 1.0))
    p = (a_p / (a_p + b_p), np.sqrt(p_var))
    # normal-inverse-gamma: sigma2 ~ InvGamma(3, 2000), mu | sigma2 ~ N(1000, sigma2 / k0)
    y, n, m0 = d.measurements, d.measurements.size, 1000.0
    k_n = SCALES_K0 + n
    m_n = (SCALES_K0 * m0 + y.sum()) / k_n
    a_n = 3.0 + n / 2.0
    b_n = (2000.0 + 0.5 * np.sum((y - y.mean()) ** 2)
           + SCALES_K0 * n * (y.mean() - m0) ** 2 / (2.0 * k_n))
    sigma2 = (b_n / (a_n - 1.0), b_n / ((a_n - 1.0) * np.sqrt(a_n - 2.0)))
    mu = (m_n, np.sqrt(b_n / (k_n * (a_n - 1.0))))
    # slope with known noise 1 and N(0, 0.01) prior
    precision = 1.0 / 0.01**2 + np.sum(d.dose**2)
    c = (np.sum(d.dose * d.response) / precision, 1.0 / np.sqrt(precision))
    blocks = (lam, p, sigma2, mu, c)
    return np.array([b[0] for b in blocks]), np.array([b[1] for b in blocks])


def gauss50_moments() -> tuple[np.ndarray, np.ndarray]:
    """Mean and marginal sds of the 50-d Gaussian."""
    mean, cov = gauss50_cov()
    return mean.copy(), np.sqrt(np.diag(cov))


def funnel_moments(dim: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """Neal's funnel: ``v`` has sd 3; ``x_i`` has mean 0 and variance ``E exp(v) = e^{9/2}``."""
    sd_x = np.exp(FUNNEL_SCALE**2 / 4.0)
    return np.zeros(dim), np.array([FUNNEL_SCALE] + [sd_x] * (dim - 1))


def banana_moments(b: float, v: float = 100.0, dim: int = 8) -> tuple[np.ndarray, np.ndarray]:
    """Banana ``B(b, v)``: mean 0; ``x2 = z + b (x1^2 - v)`` has variance ``1 + 2 b^2 v^2``."""
    sd = np.ones(dim)
    sd[0], sd[1] = np.sqrt(v), np.sqrt(1.0 + 2.0 * b**2 * v**2)
    return np.zeros(dim), sd


def dirichlet_moments() -> tuple[np.ndarray, np.ndarray]:
    """Flat Dirichlet prior, multinomial counts ``c``: ``p ~ Dirichlet(1 + c)``, whose
    components have mean ``a_i / a_0`` and variance ``a_i (a_0 - a_i) / (a_0^2 (a_0 + 1))``."""
    a = 1.0 + MULTINOMIAL_COUNTS.astype(float)
    a0 = a.sum()
    return a / a0, np.sqrt(a * (a0 - a) / (a0**2 * (a0 + 1.0)))


#: Analytic moments by model name.
ANALYTIC = {
    "scales": scales_moments,
    "gauss-50": gauss50_moments,
    "funnel": funnel_moments,
    "banana-moderate": lambda: banana_moments(0.03),
    "banana-strong": lambda: banana_moments(0.1),
    "dirichlet": dirichlet_moments,
}
