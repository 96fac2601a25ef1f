"""Gaussian densities and samplers given by a mean and a lower Cholesky factor."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.linalg import LinAlgError
from scipy.linalg.lapack import dtrtrs

from .cholesky import safe_cholesky

__all__ = ["BatchedMultivariateNormal", "MultivariateNormal", "gaussian_logpdf"]

_LOG_2PI = float(np.log(2.0 * np.pi))


@dataclass(frozen=True)
class MultivariateNormal:
    """``N(mean, L L^T)`` given by its mean and lower Cholesky factor.

    The proposal distributions of the step methods: sampling costs ``O(d^2)``, the density
    ``O(d^2)`` (one triangular solve).

    Parameters
    ----------
    mean : ndarray, shape (d,)
        Mean.
    chol : ndarray, shape (d, d)
        Lower-triangular factor ``L`` of the covariance (use :meth:`from_cov` to build it
        from a covariance matrix).

    References
    ----------
    .. [1] Rasmussen, C. E., Williams, C. K. I. (2006). Gaussian Processes for Machine
       Learning. MIT Press, Appendix A.2 (Gaussian identities) and A.4.

    Examples
    --------
    >>> import numpy as np
    >>> q = MultivariateNormal.from_cov(np.zeros(2), np.eye(2))
    >>> bool(np.isclose(q.logpdf(np.zeros(2)), -np.log(2 * np.pi)))
    True
    """

    mean: np.ndarray
    chol: np.ndarray
    half_logdet: float = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "half_logdet", float(np.sum(np.log(np.abs(self.chol.diagonal()))))
        )

    @classmethod
    def from_cov(cls, mean: np.ndarray, cov: np.ndarray) -> MultivariateNormal:
        """Build from a covariance matrix (factorised with :func:`safe_cholesky`)."""
        L, _ = safe_cholesky(cov)
        return cls(np.asarray(mean, dtype=float), L)

    @property
    def dim(self) -> int:
        return self.mean.shape[0]

    def logpdf(self, x: np.ndarray) -> float:
        """Log density at ``x``."""
        z, info = dtrtrs(self.chol, np.asarray(x, dtype=float) - self.mean, lower=1)
        if info != 0:  # singular factor: cannot happen for a factor from safe_cholesky
            return -np.inf
        return float(-0.5 * (z @ z) - self.half_logdet - 0.5 * self.dim * _LOG_2PI)

    def sample(self, rng: np.random.Generator) -> np.ndarray:
        """One draw."""
        return self.mean + self.chol @ rng.standard_normal(self.dim)


@dataclass(frozen=True)
class BatchedMultivariateNormal:
    """``m`` Gaussians ``N(mean[j], L[j] L[j]^T)``, for vectorised MH over SMC particles.

    Parameters
    ----------
    mean : ndarray, shape (m, d)
        Means.
    chol : ndarray, shape (m, d, d)
        Lower-triangular factors (use :meth:`from_covs`).

    References
    ----------
    .. [1] Rasmussen, C. E., Williams, C. K. I. (2006). Gaussian Processes for Machine
       Learning. MIT Press, Appendix A.2.

    Examples
    --------
    >>> import numpy as np
    >>> q = BatchedMultivariateNormal.from_covs(np.zeros((2, 1)), np.ones((2, 1, 1)))
    >>> q.logpdf(np.zeros((2, 1))).round(6)
    array([-0.918939, -0.918939])
    """

    mean: np.ndarray
    chol: np.ndarray
    half_logdet: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        diag = np.abs(np.diagonal(self.chol, axis1=-2, axis2=-1))
        object.__setattr__(self, "half_logdet", np.sum(np.log(diag), axis=-1))

    @classmethod
    def from_covs(cls, mean: np.ndarray, covs: np.ndarray) -> BatchedMultivariateNormal:
        """Factorise each covariance; those NumPy cannot factorise go to :func:`safe_cholesky`
        (the same factor a single-point :class:`MultivariateNormal` would use)."""
        covs = 0.5 * (covs + np.swapaxes(covs, -1, -2))
        try:
            L = np.linalg.cholesky(covs)
        except LinAlgError:
            L = np.empty_like(covs)
            for j in range(covs.shape[0]):
                L[j] = safe_cholesky(covs[j])[0]
        return cls(np.asarray(mean, dtype=float), L)

    def replace(self, mask: np.ndarray, other: BatchedMultivariateNormal) -> None:
        """In place: the Gaussians at ``mask`` become those of ``other`` (an accepted move)."""
        self.mean[mask] = other.mean[mask]
        self.chol[mask] = other.chol[mask]
        self.half_logdet[mask] = other.half_logdet[mask]

    def logpdf(self, x: np.ndarray) -> np.ndarray:
        """Log density of ``x[j]`` under Gaussian ``j``, shape ``(m,)``."""
        diff = np.asarray(x, dtype=float) - self.mean
        z = np.linalg.solve(self.chol, diff[..., None])[..., 0]
        d = self.mean.shape[-1]
        return -0.5 * np.einsum("mi,mi->m", z, z) - self.half_logdet - 0.5 * d * _LOG_2PI

    def sample(self, rng: np.random.Generator) -> np.ndarray:
        """One draw from each Gaussian, shape ``(m, d)``."""
        eps = rng.standard_normal(self.mean.shape)
        return self.mean + np.matmul(self.chol, eps[..., None])[..., 0]


def gaussian_logpdf(x: np.ndarray, mean: np.ndarray, L: np.ndarray, half_logdet: float) -> float:
    """``log N(x | mean, L L^T)`` given the factor and its ``half_logdet``.

    The reference of the compiled version; see :meth:`MultivariateNormal.logpdf`.

    Examples
    --------
    >>> import numpy as np
    >>> round(gaussian_logpdf(np.zeros(1), np.zeros(1), np.eye(1), 0.0), 6)
    -0.918939
    """
    return MultivariateNormal(np.asarray(mean, dtype=float), L).logpdf(x)
