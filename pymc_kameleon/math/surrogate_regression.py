"""Kernel ridge regression of log-density values: a surrogate for delayed acceptance.

Every point a chain evaluates comes with its log density, so a regression of those values
on the points is a log-density surrogate ``s(x) = m(x) + c + sum_i alpha_i k(x, x_i)`` with a
Gaussian kernel ``k`` (:func:`~pymc_kameleon.math.kernels.gaussian_kernel`), an optional
fixed mean function ``m`` (e.g. the log density of the warm-up's Gaussian, so that the
surrogate falls off away from the data instead of flattening to a constant), and a constant
``c`` (the mean residual).  The bandwidth and the ridge are chosen by exact leave-one-out
cross-validation: with ``K = U diag(w) U^T``, ``A = (K + lam I)^{-1}`` and ``alpha = A r``,
the leave-one-out residual of point ``i`` is ``alpha_i / A_ii`` (Rifkin and Lippert 2007),
so one eigendecomposition per bandwidth scores every ridge.

Values far below the maximum (points a chain will never visit) would dominate a squared
loss; ``floor_gap`` raises them to ``max(y) - floor_gap`` before the fit, which keeps such
points ranked below every plausible one.

References
----------
- Rifkin, R. M., Lippert, R. A. (2007). Notes on regularized least squares. MIT-CSAIL-TR
  2007-025, Section 4 (leave-one-out in closed form).
- Sherlock, C., Golightly, A., Henderson, D. A. (2017). Adaptive, delayed-acceptance MCMC
  for targets with expensive likelihoods. JCGS 26(2), 434-444 (a nearest-neighbour
  surrogate of the evaluated points).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.linalg import eigh

from .kernels import gaussian_kernel, median_heuristic

__all__ = ["KernelRidgeSurrogate", "loo_residuals"]


def loo_residuals(w: np.ndarray, U: np.ndarray, r: np.ndarray, lam: float) -> np.ndarray:
    """Leave-one-out residuals of kernel ridge regression from ``K = U diag(w) U^T``.

    Parameters
    ----------
    w, U : ndarray
        Eigenvalues ``(n,)`` and eigenvectors ``(n, n)`` of the kernel matrix.
    r : ndarray, shape (n,)
        Centred responses.
    lam : float
        Ridge ``> 0``.

    Returns
    -------
    ndarray, shape (n,)
        ``r_i - f_{-i}(x_i)`` where ``f_{-i}`` is the fit without point ``i``.
    """
    inv = 1.0 / (np.maximum(w, 0.0) + lam)
    alpha = U @ (inv * (U.T @ r))
    diag = np.einsum("ij,j,ij->i", U, inv, U)
    return alpha / diag


@dataclass
class KernelRidgeSurrogate:
    """A fitted kernel ridge regression of log densities (use :meth:`fit`).

    Attributes
    ----------
    points : ndarray, shape (n, d)
        The fitted points.
    alpha : ndarray, shape (n,)
        Coefficients of the kernel expansion.
    offset : float
        The constant ``c``.
    bandwidth, lam : float
        Chosen by leave-one-out cross-validation (or fixed).
    loo_rmse : float
        Root mean squared leave-one-out residual at the chosen pair.
    mean_function : callable or None
        ``m(X)`` for rows ``X``, returning ``(n,)``.
    """

    points: np.ndarray
    alpha: np.ndarray
    offset: float
    bandwidth: float
    lam: float
    loo_rmse: float
    mean_function: Callable[[np.ndarray], np.ndarray] | None = None

    @classmethod
    def fit(
        cls,
        X: np.ndarray,
        y: np.ndarray,
        bandwidths: Sequence[float] | None = None,
        lams: Sequence[float] | None = None,
        mean_function: Callable[[np.ndarray], np.ndarray] | None = None,
        floor_gap: float | None = None,
    ) -> KernelRidgeSurrogate:
        """Fit on points ``X`` with log densities ``y`` (non-finite values are dropped).

        Parameters
        ----------
        X : ndarray, shape (n, d)
        y : ndarray, shape (n,)
        bandwidths : sequence of float, optional
            Default: the median heuristic times ``2^-2, 2^-1.5, ..., 2^1``.
        lams : sequence of float, optional
            Ridges relative to the kernel's unit diagonal; default ``10^-6, ..., 10^0``.
        mean_function : callable, optional
            Fixed mean ``m(X)``; the kernel part fits ``y - m(X)``.
        floor_gap : float, optional
            Raise values below ``max(y) - floor_gap`` to that level first.

        Returns
        -------
        KernelRidgeSurrogate
        """
        X = np.array(X, dtype=float, ndmin=2)
        y = np.asarray(y, dtype=float).reshape(-1)
        keep = np.isfinite(y) & np.all(np.isfinite(X), axis=1)
        X, y = X[keep], y[keep]
        # repeated points (a chain's rejections) make K singular without adding information
        X, first = np.unique(X, axis=0, return_index=True)
        y = y[first]
        if X.shape[0] < 3:
            raise ValueError(
                f"need at least 3 distinct points with finite values, got {X.shape[0]}")
        if floor_gap is not None:
            y = np.maximum(y, y.max() - float(floor_gap))
        r = y - (mean_function(X) if mean_function is not None else 0.0)
        offset = float(r.mean())
        r = r - offset
        if bandwidths is None:
            bandwidths = median_heuristic(X) * 2.0 ** np.arange(-2.0, 1.25, 0.5)
        lams = 10.0 ** np.arange(-6.0, 0.5) if lams is None else np.asarray(lams, dtype=float)
        best = (np.inf, None, None, None)
        for s in bandwidths:
            w, U = eigh(gaussian_kernel(X, X, float(s)))
            for lam in lams:
                mse = float(np.mean(loo_residuals(w, U, r, float(lam)) ** 2))
                if mse < best[0]:
                    best = (mse, float(s), float(lam), (w, U))
        mse, s, lam, (w, U) = best
        alpha = U @ ((U.T @ r) / (np.maximum(w, 0.0) + lam))
        return cls(X, alpha, offset, s, lam, float(np.sqrt(mse)), mean_function)

    def log_density(self, X: np.ndarray) -> np.ndarray:
        """Surrogate log density at rows ``X`` (shape ``(n, d)``), returning ``(n,)``."""
        X = np.array(X, dtype=float, ndmin=2)
        out = gaussian_kernel(X, self.points, self.bandwidth) @ self.alpha + self.offset
        if self.mean_function is not None:
            out = out + self.mean_function(X)
        return out
