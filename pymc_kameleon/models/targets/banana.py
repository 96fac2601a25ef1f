"""The banana target ``B(b, v)``: log density, exact sampler and exact quantile coverage.

The banana of Haario et al. (1999), with the quantile metric of Sejdinovic et al. (2014,
Section 5.2) computed from its exact quantile regions.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from ...validation import check_positive
from .coverage import (
    LOG_2PI,
    QUANTILE_LEVELS,
    RNGLike,
    _check_dim,
    _draws,
    _levels,
    _points,
    _scalar_or_array,
    squared_norm,
)

__all__ = [
    "banana_coverage",
    "banana_coverage_error",
    "banana_logp",
    "banana_sample",
    "banana_to_standard",
]


def banana_logp(X: ArrayLike, b: float = 0.1, v: float = 100.0) -> float | np.ndarray:
    """Normalised log density of the banana target ``B(b, v)`` (Haario et al., 1999).

    Parameters
    ----------
    X : array_like, shape (..., d)
        Points, ``d >= 2``.  Vectorised over the leading axes.
    b : float
        Twist (``0.03`` moderate, ``0.1`` strong in Sejdinovic et al., 2014).
    v : float
        Variance of the first coordinate (``100`` in the paper).

    Returns
    -------
    float or ndarray of shape ``X.shape[:-1]``
        ``log N(y1; 0, v) + log N(y2; b (y1^2 - v), 1) + sum_{j>=3} log N(yj; 0, 1)``.

    References
    ----------
    .. [1] Haario, H., Saksman, E., Tamminen, J. (1999). Adaptive proposal distribution for
       random walk Metropolis algorithm. Computational Statistics 14(3), 375-395.
    .. [2] Sejdinovic, D., Strathmann, H., Lomeli Garcia, M., Andrieu, C., Gretton, A.
       (2014). Kernel Adaptive Metropolis-Hastings. ICML, Section 5.2.

    Examples
    --------
    At ``y1 = 0`` the conditional mean of ``y2`` is ``b (0 - v) = -10``:

    >>> bool(np.isclose(banana_logp([0.0, -10.0]), -np.log(2 * np.pi * 10.0)))
    True
    >>> banana_logp(np.zeros((3, 8))).shape
    (3,)
    """
    v = check_positive("v", v)
    X = _points(X)
    d = X.shape[-1]
    y1, y2 = X[..., 0], X[..., 1]
    twist = y2 - b * (y1 * y1 - v)
    rest = np.sum(X[..., 2:] ** 2, axis=-1)
    out = -0.5 * (y1 * y1 / v + twist * twist + rest) - 0.5 * d * LOG_2PI - 0.5 * np.log(v)
    return _scalar_or_array(np.asarray(out))


def banana_sample(
    n: int, dim: int = 2, b: float = 0.1, v: float = 100.0, rng: RNGLike = None
) -> np.ndarray:
    """Exact i.i.d. draws from the banana target ``B(b, v)``.

    Draws ``z ~ N(0, I)`` and applies the inverse of :func:`banana_to_standard`:
    ``y1 = sqrt(v) z1``, ``y2 = z2 + b (y1^2 - v)``, ``yj = zj`` for ``j >= 3``.

    Parameters
    ----------
    n : int
        Number of draws.
    dim : int
        Dimension ``d >= 2``.
    b, v : float
        Target parameters (see :func:`banana_logp`).
    rng : numpy.random.Generator, int or None
        Random generator or seed.

    Returns
    -------
    ndarray, shape (n, dim)

    References
    ----------
    .. [1] Haario, H., Saksman, E., Tamminen, J. (1999). Adaptive proposal distribution for
       random walk Metropolis algorithm. Computational Statistics 14(3), 375-395.

    Examples
    --------
    >>> Y = banana_sample(1000, dim=8, b=0.03, v=100.0, rng=0)
    >>> Y.shape
    (1000, 8)
    """
    dim = _check_dim(dim)
    v = check_positive("v", v)
    rng = np.random.default_rng(rng)
    Y = rng.standard_normal((int(n), dim))
    Y[:, 0] *= np.sqrt(v)
    Y[:, 1] += b * (Y[:, 0] ** 2 - v)
    return Y


def banana_to_standard(X: ArrayLike, b: float = 0.1, v: float = 100.0) -> np.ndarray:
    """Map banana points to standard normal ones: ``z = (y1/sqrt(v), y2 - b(y1^2 - v), y3, ...)``.

    If ``Y ~ B(b, v)`` then ``Z ~ N(0, I_d)``.

    Parameters
    ----------
    X : array_like, shape (..., d)
    b, v : float

    Returns
    -------
    ndarray, same shape as ``X``

    References
    ----------
    .. [1] Haario, H., Saksman, E., Tamminen, J. (1999). Adaptive proposal distribution for
       random walk Metropolis algorithm. Computational Statistics 14(3), 375-395.

    Examples
    --------
    >>> banana_to_standard([[10.0, 0.0, 1.0]], b=0.1, v=100.0)
    array([[1., 0., 1.]])
    """
    v = check_positive("v", v)
    Z = np.array(_points(X), dtype=float, copy=True)
    y1 = Z[..., 0].copy()
    Z[..., 0] = y1 / np.sqrt(v)
    Z[..., 1] = Z[..., 1] - b * (y1 * y1 - v)
    return Z


def banana_coverage(
    X: ArrayLike,
    b: float = 0.1,
    v: float = 100.0,
    quantiles: ArrayLike = QUANTILE_LEVELS,
) -> np.ndarray:
    """Empirical coverage of the exact banana quantile regions.

    For each level ``q`` the exact region ``{y : |z(y)|^2 <= chi2_d.ppf(q)}`` (with ``z`` from
    :func:`banana_to_standard`) has probability ``q`` under ``B(b, v)``; the function returns the
    fraction of the draws that fall in it.

    Parameters
    ----------
    X : array_like, shape (n, d) or (..., n, d)
        Draws (leading axes such as chains are pooled).
    b, v : float
        Target parameters.
    quantiles : sequence of float
        Levels in (0, 1); default ``0.1, ..., 0.9``.

    Returns
    -------
    ndarray, shape (len(quantiles),)

    References
    ----------
    .. [1] Sejdinovic, D., Strathmann, H., Lomeli Garcia, M., Andrieu, C., Gretton, A.
       (2014). Kernel Adaptive Metropolis-Hastings. ICML, Section 5.2 and Figure 5.

    Examples
    --------
    >>> Y = banana_sample(20000, dim=8, b=0.1, rng=1)
    >>> cov = banana_coverage(Y, b=0.1, quantiles=[0.5, 0.9])
    >>> bool(np.all(np.abs(cov - [0.5, 0.9]) < 0.02))
    True
    """
    q = _levels(quantiles)
    Z = banana_to_standard(_draws(X, min_dim=2), b=b, v=v)
    radius2 = squared_norm(Z)
    thresholds = stats.chi2.ppf(q, df=Z.shape[-1])
    return np.mean(radius2[:, None] <= thresholds[None, :], axis=0)


def banana_coverage_error(
    X: ArrayLike,
    b: float = 0.1,
    v: float = 100.0,
    quantiles: ArrayLike = QUANTILE_LEVELS,
) -> float:
    """Mean absolute deviation of :func:`banana_coverage` from the levels.

    This is the quantile metric of Sejdinovic et al. (2014, Figure 5), averaged over the
    levels.  For ``n`` exact i.i.d. draws it is of order ``0.3 / sqrt(n)`` (it is not zero:
    Monte Carlo error); for MCMC output it grows with the autocorrelation of the chain.

    Parameters
    ----------
    X : array_like, shape (n, d) or (..., n, d)
    b, v : float
    quantiles : sequence of float

    Returns
    -------
    float

    References
    ----------
    .. [1] Sejdinovic, D., Strathmann, H., Lomeli Garcia, M., Andrieu, C., Gretton, A.
       (2014). Kernel Adaptive Metropolis-Hastings. ICML, Section 5.2 and Figure 5.

    Examples
    --------
    >>> Y = banana_sample(20000, dim=8, b=0.1, rng=2)
    >>> banana_coverage_error(Y, b=0.1) < 0.01
    True
    >>> banana_coverage_error(1.5 * Y, b=0.1) > 0.1   # wrong scale
    True
    """
    q = _levels(quantiles)
    return float(np.mean(np.abs(banana_coverage(X, b=b, v=v, quantiles=q) - q)))
