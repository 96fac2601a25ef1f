"""The whitening map ``x = m + L u`` shared by the steps and SMC (pure NumPy/SciPy).

The kernel samplers work in whitened coordinates ``u = L^{-1} (x - m)``: the steps with the
warm-up's learned location and scale, SMC with the particles' mean and covariance at each
stage.  A proposal built in ``u`` is a proposal in ``x`` through a fixed linear map, so a
Metropolis-Hastings ratio is the same in either (the Jacobian cancels).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.linalg import solve_triangular
from scipy.linalg.lapack import dtrtrs

from .linalg import safe_cholesky

__all__ = ["AffineMap"]

#: Relative jitter on the diagonal of a sample covariance before its factorisation.
SAMPLE_JITTER = 1e-10


@dataclass
class AffineMap:
    """The whitening map ``x = mean + chol @ u`` (``chol`` lower triangular)."""

    mean: np.ndarray
    chol: np.ndarray

    @classmethod
    def identity(cls, dim: int) -> AffineMap:
        return cls(np.zeros(dim), np.eye(dim))

    @classmethod
    def from_cov(cls, mean: np.ndarray, cov: np.ndarray) -> AffineMap:
        """The map whose ``u`` is standard when ``x ~ N(mean, cov)``."""
        return cls(np.array(mean, dtype=float), safe_cholesky(np.asarray(cov, float))[0])

    @classmethod
    def from_sample(cls, X: np.ndarray) -> AffineMap:
        """The map that whitens the rows of ``X`` (their mean and covariance, a relative
        jitter of ``1e-10`` on its diagonal).

        Raises
        ------
        ValueError
            Where the sample covariance is not finite (too few distinct rows).
        """
        mean = X.mean(axis=0)
        cov = np.atleast_2d(np.cov(X, rowvar=False, ddof=0))
        if not np.all(np.isfinite(cov)):
            raise ValueError('Sample covariances not valid! Likely "draws" is too small!')
        jitter = SAMPLE_JITTER * np.mean(np.diag(cov)) * np.eye(len(cov))
        return cls(mean, safe_cholesky(cov + jitter)[0])

    @property
    def cov(self) -> np.ndarray:
        return self.chol @ self.chol.T

    @property
    def log_det(self) -> float:
        """``log |det L|``: the log density of ``x`` is that of ``u`` minus this."""
        return float(np.sum(np.log(np.diag(self.chol))))

    def to_x(self, u: np.ndarray) -> np.ndarray:
        return self.mean + self.chol @ u

    def to_u(self, x: np.ndarray) -> np.ndarray:
        # LAPACK's triangular solve directly: scipy's wrapper checks its arguments at a
        # cost above the solve's at any d of interest, once per draw
        # (docs/benchmarks/numerics.md).
        # Called as scipy calls it on a C-ordered factor (its transpose, which is Fortran-
        # ordered, transposed back by LAPACK): the same operations, so the same bits.
        u, info = dtrtrs(self.chol.T, np.asarray(x, dtype=float) - self.mean, lower=0,
                         trans=1)
        if info != 0:  # a singular factor (never from from_cov): let SciPy report it
            return solve_triangular(self.chol, x - self.mean, lower=True)
        return u

    def rows_to_x(self, U: np.ndarray) -> np.ndarray:
        """:meth:`to_x` of every row of ``U``."""
        return self.mean + U @ self.chol.T

    def rows_to_u(self, X: np.ndarray) -> np.ndarray:
        """:meth:`to_u` of every row of ``X``."""
        return solve_triangular(self.chol, (X - self.mean).T, lower=True).T
