"""Convergence and accuracy metrics of one multi-chain run against a reference.

Everything goes through NumPy arrays of shape ``(chains, draws)`` per scalar, so the same code
runs with ArviZ 0.x (``InferenceData``) and ArviZ 1.x (``DataTree``): ``az.rhat`` and
``az.ess`` are called on 2-d arrays, for which both return a float.
"""

from __future__ import annotations

from dataclasses import dataclass

import arviz as az
import numpy as np

__all__ = [
    "ESS_MIN",
    "MEAN_TOL",
    "RHAT_MAX",
    "SD_TOL",
    "Accuracy",
    "Diagnostics",
    "accuracy",
    "diagnostics",
    "spread_ess",
    "stack_posterior",
]

#: The issue's acceptance criteria (4 chains x 1000 draws).
RHAT_MAX = 1.01
ESS_MIN = 400.0
MEAN_TOL = 0.1  # |mean - mean_ref| / sd_ref
SD_TOL = 0.1  # |sd / sd_ref - 1|


def stack_posterior(posterior, names: list[str]) -> np.ndarray:
    """Free variables ``names`` of a posterior group as one array ``(chains, draws, k)``.

    ``posterior`` is ``idata.posterior`` (an xarray ``Dataset`` or ``DataTree`` node) or any
    mapping ``name -> array (chains, draws, *shape)``.  Values are in the constrained space.
    """
    parts = []
    for name in names:
        values = np.asarray(posterior[name].values if hasattr(posterior[name], "values")
                            else posterior[name], dtype=float)
        parts.append(values.reshape(values.shape[0], values.shape[1], -1))
    return np.concatenate(parts, axis=2)


@dataclass
class Diagnostics:
    """Per-scalar R-hat (rank-normalised), bulk and tail ESS, mean and sd of the draws."""

    rhat: np.ndarray
    ess_bulk: np.ndarray
    ess_tail: np.ndarray
    mean: np.ndarray
    sd: np.ndarray


def spread_ess(means: np.ndarray, ref_sd: np.ndarray) -> np.ndarray:
    """The ESS per replicate from the spread of independent replicates' means (rows of
    ``means``, one column per scalar): the reference variance over the means' variance.
    NaN with fewer than two replicates.  With ``n`` replicates the estimate is the truth
    times ``(n - 1) / chi2_(n-1)``: the minimum over many scalars is biased low."""
    means = np.atleast_2d(np.asarray(means, dtype=float))
    if len(means) < 2:
        return np.full(np.shape(ref_sd), np.nan)
    return np.asarray(ref_sd, dtype=float) ** 2 / means.var(axis=0, ddof=1)


def _scalar(value) -> float:
    return float(np.asarray(value).reshape(()))


def diagnostics(draws: np.ndarray) -> Diagnostics:
    """ArviZ diagnostics of ``draws`` with shape ``(chains, draws, k)``.

    A scalar that never moved (the same value in every draw of every chain) gets R-hat NaN
    (a failure in :func:`accuracy`) and ESS 0 (ArviZ would report the number of draws).
    """
    draws = np.asarray(draws, dtype=float)
    if draws.ndim != 3:
        raise ValueError(f"expected draws of shape (chains, draws, k), got {draws.shape}")
    k = draws.shape[2]
    rhat, bulk, tail = np.empty(k), np.empty(k), np.empty(k)
    for j in range(k):
        x = draws[:, :, j]
        if np.ptp(x) == 0.0:
            rhat[j], bulk[j], tail[j] = np.nan, 0.0, 0.0
            continue
        rhat[j] = _scalar(az.rhat(x))
        bulk[j] = _scalar(az.ess(x, method="bulk"))
        tail[j] = _scalar(az.ess(x, method="tail", prob=(0.05, 0.95)))
    flat = draws.reshape(-1, k)
    return Diagnostics(rhat=rhat, ess_bulk=bulk, ess_tail=tail, mean=flat.mean(axis=0),
                       sd=flat.std(axis=0, ddof=1))


@dataclass
class Accuracy:
    """Summary of one run against the reference, with the issue's pass flags.

    ``mean_err`` is ``max_i |mean_i - ref_mean_i| / ref_sd_i``; ``sd_ratio`` is the
    ``sd_i / ref_sd_i`` farthest from 1 (in log scale); ``worst_mean`` and ``worst_sd`` are
    the labels of those scalars.  Non-finite values fail.
    """

    max_rhat: float
    min_ess_bulk: float
    min_ess_tail: float
    mean_err: float
    sd_ratio: float
    worst_mean: str
    worst_sd: str

    @property
    def rhat_ok(self) -> bool:
        return bool(self.max_rhat <= RHAT_MAX)

    @property
    def ess_ok(self) -> bool:
        return bool(self.min_ess_bulk >= ESS_MIN)

    @property
    def mean_ok(self) -> bool:
        return bool(self.mean_err <= MEAN_TOL)

    @property
    def sd_ok(self) -> bool:
        return bool(abs(self.sd_ratio - 1.0) <= SD_TOL)

    @property
    def all_ok(self) -> bool:
        return self.rhat_ok and self.ess_ok and self.mean_ok and self.sd_ok

    def to_dict(self) -> dict:
        """JSON-ready fields and flags."""
        out = dict(self.__dict__)
        out.update(rhat_ok=self.rhat_ok, ess_ok=self.ess_ok, mean_ok=self.mean_ok,
                   sd_ok=self.sd_ok, all_ok=self.all_ok)
        return out


def _nan_max(values: np.ndarray) -> float:
    """Maximum, NaN if any value is NaN (inf is kept: ArviZ 1.x gives R-hat inf)."""
    return float("nan") if np.any(np.isnan(values)) else float(np.max(values))


def _nan_min(values: np.ndarray) -> float:
    return float("nan") if np.any(np.isnan(values)) else float(np.min(values))


def accuracy(diag: Diagnostics, ref_mean: np.ndarray, ref_sd: np.ndarray,
             labels: list[str]) -> Accuracy:
    """Compare :class:`Diagnostics` with reference means and sds (one per scalar)."""
    ref_mean, ref_sd = np.asarray(ref_mean, float), np.asarray(ref_sd, float)
    if ref_mean.shape != diag.mean.shape or ref_sd.shape != diag.sd.shape:
        raise ValueError(f"reference has {ref_mean.size} scalars, the run {diag.mean.size}")
    z = np.abs(diag.mean - ref_mean) / ref_sd
    with np.errstate(divide="ignore", invalid="ignore"):
        log_ratio = np.abs(np.log(diag.sd / ref_sd))
    i_mean = int(np.nanargmax(z)) if np.any(np.isfinite(z)) else 0
    i_sd = int(np.nanargmax(log_ratio)) if np.any(np.isfinite(log_ratio)) else 0
    return Accuracy(
        max_rhat=_nan_max(diag.rhat),
        min_ess_bulk=_nan_min(diag.ess_bulk),
        min_ess_tail=_nan_min(diag.ess_tail),
        mean_err=_nan_max(z),
        sd_ratio=(float(diag.sd[i_sd] / ref_sd[i_sd]) if np.all(np.isfinite(log_ratio))
                  else float("nan")),
        worst_mean=labels[i_mean],
        worst_sd=labels[i_sd],
    )
