"""Gaussian-process regression with per-coordinate lengths (pure NumPy/SciPy).

``y = m(x) + c + f(x) + noise``, ``f ~ GP(0, s_f^2 exp(-sum_i (x_i - x'_i)^2 / (2 l_i^2)))``
(automatic relevance determination), ``noise ~ N(0, s_n^2)``, with a fixed mean function
``m`` (the emulator's Laplace quadratic, so that the fit falls off away from the data) and
a constant ``c`` (the mean residual).  The lengths, ``s_f`` and ``s_n`` maximise the log
marginal likelihood (L-BFGS-B on its analytic gradient, from a few starts).
:meth:`GaussianProcess.predict` gives the predictive mean and sd of ``m + c + f``, and
:meth:`GaussianProcess.loo_residuals` the exact leave-one-out residuals (held-out errors
without refitting).

References
----------
- Rasmussen, C. E., Williams, C. K. I. (2006). Gaussian Processes for Machine Learning.
  MIT Press, Algorithm 2.1, Sections 5.4.1 (marginal likelihood and its gradient) and
  5.4.2 (leave-one-out in closed form).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from scipy.linalg import cho_solve, solve_triangular
from scipy.optimize import minimize

from .linalg import safe_cholesky

__all__ = ["GaussianProcess"]

_LOG_2PI = np.log(2.0 * np.pi)
#: Bounds of the log hyperparameters, relative to the data's scales (lengths to the
#: points' spread per coordinate, ``s_f`` and ``s_n`` to the residuals' sd).
_LOG_LENGTH = (np.log(0.02), np.log(50.0))
_LOG_SIGNAL = (np.log(1e-3), np.log(1e2))
_LOG_NOISE = (np.log(1e-6), np.log(1.0))


def _sq_dists(X: np.ndarray, Y: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    A, B = X / lengths, Y / lengths
    d2 = np.sum(A**2, 1)[:, None] + np.sum(B**2, 1)[None, :] - 2.0 * A @ B.T
    return np.maximum(d2, 0.0)


def _neg_log_ml(theta: np.ndarray, X: np.ndarray, r: np.ndarray,
                diffs: np.ndarray) -> tuple[float, np.ndarray]:
    """Negative log marginal likelihood and its gradient in ``theta`` (log lengths,
    log ``s_f``, log ``s_n``)."""
    d = X.shape[1]
    lengths, sf2, sn2 = np.exp(theta[:d]), np.exp(2 * theta[d]), np.exp(2 * theta[d + 1])
    K = sf2 * np.exp(-0.5 * _sq_dists(X, X, lengths))
    Ky = K + sn2 * np.eye(len(X))
    try:
        L = np.linalg.cholesky(Ky)
    except np.linalg.LinAlgError:
        return 1e25, np.zeros_like(theta)
    a = cho_solve((L, True), r)
    nll = 0.5 * r @ a + np.sum(np.log(np.diag(L))) + 0.5 * len(r) * _LOG_2PI
    W = cho_solve((L, True), np.eye(len(X))) - np.outer(a, a)
    grad = np.empty_like(theta)
    WK = W * K
    for k in range(d):  # dK/dlog l_k = K (x_k - x'_k)^2 / l_k^2
        grad[k] = 0.5 * np.sum(WK * diffs[k]) / lengths[k] ** 2
    grad[d] = np.sum(WK)  # dK/dlog s_f = 2 K
    grad[d + 1] = sn2 * np.trace(W)  # dK/dlog s_n = 2 s_n^2 I
    return float(nll), grad


@dataclass
class GaussianProcess:
    """A fitted Gaussian-process regression (use :meth:`fit`).

    Attributes
    ----------
    X : ndarray, shape (n, d)
        The fitted points.
    y : ndarray, shape (n,)
        Their values.
    alpha : ndarray, shape (n,)
        ``(K + s_n^2 I)^{-1} (y - m(X) - c)``.
    chol : ndarray, shape (n, n)
        Lower Cholesky factor of ``K + s_n^2 I``.
    lengths : ndarray, shape (d,)
    signal, noise, offset : float
        ``s_f``, ``s_n`` and ``c``.
    mean_function : callable or None
        ``m(X)`` for rows ``X``.
    """

    X: np.ndarray
    y: np.ndarray
    alpha: np.ndarray
    chol: np.ndarray
    lengths: np.ndarray
    signal: float
    noise: float
    offset: float
    mean_function: Callable[[np.ndarray], np.ndarray] | None = None

    @classmethod
    def fit(cls, X: np.ndarray, y: np.ndarray,
            mean_function: Callable[[np.ndarray], np.ndarray] | None = None,
            rng: np.random.Generator | None = None, restarts: int = 1,
            start: GaussianProcess | None = None, max_fit: int = 300) -> GaussianProcess:
        """Fit to points ``X`` with values ``y`` (finite), maximising the marginal likelihood.

        Parameters
        ----------
        X : ndarray, shape (n, d)
        y : ndarray, shape (n,)
        mean_function : callable, optional
            Fixed mean ``m(X)``; the process fits ``y - m(X) - c``.
        rng : numpy.random.Generator, optional
            Draws the extra starts of the optimiser.
        restarts : int
            Extra random starts besides the default (and ``start``'s hyperparameters).
        start : GaussianProcess, optional
            A previous fit whose hyperparameters are one of the starts.
        max_fit : int
            The hyperparameters are fitted to at most this many of the points (the
            largest values; the cost is cubic in their number); the fit conditions on all.
        """
        X = np.array(X, dtype=float, ndmin=2)
        y = np.asarray(y, dtype=float).reshape(-1)
        n, d = X.shape
        r = y - (mean_function(X) if mean_function is not None else 0.0)
        offset = float(np.mean(r))
        r = r - offset
        spread = np.maximum(np.std(X, axis=0), 1e-12)
        scale = max(float(np.std(r)), 1e-8)
        bounds = ([tuple(_LOG_LENGTH + np.log(s)) for s in spread]
                  + [tuple(np.add(_LOG_SIGNAL, np.log(scale))),
                     tuple(np.add(_LOG_NOISE, np.log(scale)))])
        # the largest values, not residuals: those lie where the mean function is too
        # low, and lengths fitted there let the emulator ring into spurious peaks far
        # out (docs/benchmarks/emulator.md, "emulator-past-edge-restart")
        sub = np.argsort(-y)[:max_fit] if n > max_fit else np.arange(n)
        Xs, rs = X[sub], r[sub]
        diffs = (Xs[:, None, :] - Xs[None, :, :]).transpose(2, 0, 1) ** 2
        starts = [np.r_[np.log(spread), np.log(scale), np.log(1e-3 * scale)]]
        if start is not None:
            starts.append(np.r_[np.log(start.lengths), np.log(start.signal),
                                np.log(start.noise)])
        rng = np.random.default_rng(0) if rng is None else rng
        lo, hi = np.array(bounds).T
        starts += [rng.uniform(lo, hi) for _ in range(restarts)]
        best = None
        for theta0 in starts:
            theta0 = np.clip(theta0, lo, hi)
            res = minimize(_neg_log_ml, theta0, args=(Xs, rs, diffs), jac=True,
                           method="L-BFGS-B", bounds=bounds, options={"maxiter": 100})
            if best is None or res.fun < best.fun:
                best = res
        theta = best.x
        lengths, signal, noise = np.exp(theta[:d]), float(np.exp(theta[d])), float(
            np.exp(theta[d + 1]))
        K = signal**2 * np.exp(-0.5 * _sq_dists(X, X, lengths)) + noise**2 * np.eye(n)
        chol = safe_cholesky(K)[0]
        alpha = cho_solve((chol, True), r)
        return cls(X, y, alpha, chol, lengths, signal, noise, offset, mean_function)

    def _mean_part(self, X: np.ndarray) -> np.ndarray:
        m = self.mean_function(X) if self.mean_function is not None else 0.0
        return m + self.offset

    def predict_mean(self, X: np.ndarray) -> np.ndarray:
        """Predictive mean of ``m + c + f`` at rows ``X`` (:meth:`predict` without the sd,
        whose triangular solve costs the most)."""
        X = np.array(X, dtype=float, ndmin=2)
        return self._mean_part(X) + self._cross(X) @ self.alpha

    def _cross(self, X: np.ndarray) -> np.ndarray:
        return self.signal**2 * np.exp(-0.5 * _sq_dists(X, self.X, self.lengths))

    def predict(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Predictive mean and sd of ``m + c + f`` (without the noise) at rows ``X``."""
        X = np.array(X, dtype=float, ndmin=2)
        Ks = self._cross(X)
        mean = self._mean_part(X) + Ks @ self.alpha
        v = solve_triangular(self.chol, Ks.T, lower=True)
        var = np.maximum(self.signal**2 - np.sum(v**2, axis=0), 0.0)
        return mean, np.sqrt(var)

    def posterior_cov(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        """Posterior covariance of ``f`` between rows ``A`` and rows ``B``."""
        Ka = self.signal**2 * np.exp(-0.5 * _sq_dists(A, self.X, self.lengths))
        Kb = self.signal**2 * np.exp(-0.5 * _sq_dists(B, self.X, self.lengths))
        va = solve_triangular(self.chol, Ka.T, lower=True)
        vb = solve_triangular(self.chol, Kb.T, lower=True)
        return self.signal**2 * np.exp(-0.5 * _sq_dists(A, B, self.lengths)) - va.T @ vb

    def loo_residuals(self) -> np.ndarray:
        """Exact leave-one-out residuals ``y_i - mu_{-i}(x_i)`` of the fitted points."""
        inv_diag = np.sum(solve_triangular(self.chol, np.eye(len(self.X)), lower=True) ** 2,
                          axis=0)
        return self.alpha / inv_diag
