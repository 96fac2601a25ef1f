"""Closed-form posterior means and standard deviations of the suite's analytic models.

Each function returns ``(mean, sd)`` arrays in the order of
:func:`benchmarks.suite.models.free_var_labels` of the corresponding model.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pymc_kameleon.models.classic import FUNNEL_SCALE, SCALES_K0, gauss50_cov
from pymc_kameleon.models.data import MULTINOMIAL_COUNTS, scales_data

from .models import REGRESSION_PRIOR_SD, regression_data

__all__ = ["ANALYTIC", "RegressionPosterior", "banana_moments", "dirichlet_moments",
           "funnel_moments", "gauss50_moments", "regression_posterior", "scales_moments"]


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


@dataclass(frozen=True)
class RegressionPosterior:
    """:func:`~benchmarks.suite.models.regression_model`'s posterior on a grid of the noise
    sd ``sigma``: its weights, and per grid point the coefficients' conditional normal
    (means ``(g, 5)``, sds ``(g, 5)``); ``log_z`` the log evidence."""

    grid: np.ndarray
    weights: np.ndarray
    cond_mean: np.ndarray
    cond_sd: np.ndarray
    log_z: float

    def moments(self) -> tuple[np.ndarray, np.ndarray]:
        """Means and sds of ``beta[0..4], sigma`` (the mixture's over the grid)."""
        w = self.weights
        mean = np.append(w @ self.cond_mean, w @ self.grid)
        second = np.append(w @ (self.cond_sd**2 + self.cond_mean**2), w @ self.grid**2)
        return mean, np.sqrt(second - mean**2)

    def quantiles(self, levels: tuple[float, ...]) -> np.ndarray:
        """Quantiles ``(len(levels), 6)``: the mixture CDF of each coefficient solved by
        bisection on a fine grid, sigma's by interpolating its CDF."""
        from scipy.stats import norm

        mean, sd = self.moments()
        out = np.empty((len(levels), mean.size))
        for j in range(mean.size - 1):
            xs = np.linspace(mean[j] - 10 * sd[j], mean[j] + 10 * sd[j], 20001)
            cdf = self.weights @ norm.cdf((xs[None] - self.cond_mean[:, j, None])
                                          / self.cond_sd[:, j, None])
            out[:, j] = np.interp(levels, cdf, xs)
        cdf = np.cumsum(self.weights)
        out[:, -1] = np.interp(levels, cdf - 0.5 * self.weights, self.grid)
        return out


def regression_posterior(n_grid: int = 4001) -> RegressionPosterior:
    """The regression's posterior: given ``sigma``, ``beta | sigma, y`` is normal
    (conjugate normal prior) and ``y | sigma ~ N(0, sigma^2 I + s0^2 X X^T)``; the
    half-normal sd is integrated on an equally spaced grid (midpoint rule) over the
    range where its posterior density exceeds 1e-30 of its peak.  By the SVD ``X = U S V^T``
    both are diagonal in the right basis, so each grid point costs O(n)."""
    X, y = regression_data()
    s0, sigma_sd = REGRESSION_PRIOR_SD
    n, k = X.shape
    U, S, Vt = np.linalg.svd(X, full_matrices=False)
    uy = U.T @ y
    rest = y @ y - uy @ uy  # the part of y outside X's column space

    def log_joint(sig: np.ndarray) -> np.ndarray:
        lam = sig[:, None] ** 2 + s0**2 * S**2  # eigenvalues of the marginal covariance
        quad = (uy**2 / lam).sum(1) + rest / sig**2
        logdet = np.log(lam).sum(1) + (n - k) * np.log(sig**2)
        log_lik = -0.5 * (quad + logdet + n * np.log(2 * np.pi))
        log_prior = np.log(2.0) - 0.5 * np.log(2 * np.pi * sigma_sd**2) - sig**2 / (
            2 * sigma_sd**2)
        return log_lik + log_prior

    # locate the mass first on a coarse grid, then integrate on a fine one
    coarse = np.linspace(1e-3, 10 * sigma_sd, 20001)
    lj = log_joint(coarse)
    inside = coarse[lj > lj.max() - np.log(1e30)]
    grid = np.linspace(inside[0], inside[-1], n_grid)
    lj = log_joint(grid)
    h = grid[1] - grid[0]
    log_z = float(np.log(np.exp(lj - lj.max()).sum() * h) + lj.max())
    weights = np.exp(lj - lj.max())
    weights /= weights.sum()
    # beta | sigma: precision V diag(S^2 / sigma^2 + 1 / s0^2) V^T
    prec = S[None] ** 2 / grid[:, None] ** 2 + 1.0 / s0**2
    cond_mean = ((S * uy)[None] / grid[:, None] ** 2 / prec) @ Vt
    cond_sd = np.sqrt((1.0 / prec) @ Vt**2)
    return RegressionPosterior(grid, weights, cond_mean, cond_sd, log_z)


#: Analytic moments by model name.
ANALYTIC = {
    "scales": scales_moments,
    "gauss-50": gauss50_moments,
    "funnel": funnel_moments,
    "banana-moderate": lambda: banana_moments(0.03),
    "banana-strong": lambda: banana_moments(0.1),
    "dirichlet": dirichlet_moments,
    "regression": lambda: regression_posterior().moments(),
}
