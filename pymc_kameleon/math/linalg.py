"""Robust Cholesky factorisation and a small Gaussian density/sampler built on it."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.linalg import LinAlgError
from scipy.linalg.lapack import dtrtrs

__all__ = ["MultivariateNormal", "safe_cholesky"]

_LOG_2PI = float(np.log(2.0 * np.pi))


def safe_cholesky(A: np.ndarray, max_tries: int = 10) -> tuple[np.ndarray, float]:
    """Lower Cholesky factor of a symmetric matrix, adding jitter if needed.

    Tries ``A``, then ``A + j I`` with ``j = 1e-10 * mean(|diag A|) * 10^k`` for
    ``k = 0 .. max_tries - 1``.  If all fail (a badly indefinite matrix), the eigenvalues are
    clipped from below at ``1e-8 * max(|eigenvalue|)`` (or ``1e-8`` if that is zero).  The
    result is a deterministic function of ``A``, so a proposal built on it is still a
    well-defined density and Metropolis-Hastings stays exact.

    Parameters
    ----------
    A : ndarray, shape (d, d)
        Symmetric matrix with finite entries.
    max_tries : int
        Number of jitter levels tried before the eigenvalue fallback.

    Returns
    -------
    L : ndarray, shape (d, d)
        Lower-triangular factor with ``L @ L.T`` approximately ``A + jitter I``.
    jitter : float
        The jitter that was added (``0.0`` if none; ``nan`` if the eigenvalue fallback ran).

    Raises
    ------
    ValueError
        If ``A`` has non-finite entries.

    References
    ----------
    .. [1] Rasmussen, C. E., Williams, C. K. I. (2006). Gaussian Processes for Machine
       Learning. MIT Press, Appendix A.4 (Cholesky decomposition with added jitter).

    Examples
    --------
    >>> import numpy as np
    >>> L, jitter = safe_cholesky(np.ones((2, 2)))  # singular: jitter is added
    >>> jitter > 0
    True
    """
    A = np.asarray(A, dtype=float)
    if not np.all(np.isfinite(A)):
        raise ValueError("safe_cholesky: matrix has non-finite entries")
    A = 0.5 * (A + A.T)
    try:
        return np.linalg.cholesky(A), 0.0
    except LinAlgError:
        pass
    scale = float(np.mean(np.abs(A.diagonal()))) or 1.0
    eye = np.eye(A.shape[0])
    for k in range(max_tries):
        jitter = 1e-10 * scale * 10.0**k
        try:
            return np.linalg.cholesky(A + jitter * eye), jitter
        except LinAlgError:
            continue
    w, V = np.linalg.eigh(A)
    floor = 1e-8 * (float(np.max(np.abs(w))) or 1.0)
    A_pd = (V * np.maximum(w, floor)) @ V.T
    return np.linalg.cholesky(0.5 * (A_pd + A_pd.T) + floor * eye), np.nan


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
