"""What the banana and the flower targets share, and the sample-based coverage metric.

The draws' shapes, the quantile levels :data:`.QUANTILE_LEVELS`, the statistic
:func:`squared_norm`, and :func:`quantile_coverage_error`, which compares draws with a large
exact sample for a target without closed-form quantile regions (the flower).

References
----------
- Sejdinovic, Strathmann, Lomeli, Andrieu, Gretton (2014). Kernel adaptive
  Metropolis-Hastings. ICML 2014, Section 5.2.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from ...validation import check_integral

__all__ = ["QUANTILE_LEVELS", "quantile_coverage", "quantile_coverage_error", "squared_norm"]

#: The quantile levels of the paper's coverage metric: 0.1, 0.2, ..., 0.9.
QUANTILE_LEVELS: tuple[float, ...] = tuple(np.arange(1, 10) / 10)

#: ``log(2 pi)``, the constant of Gaussian log densities (shared with the model factories).
LOG_2PI = float(np.log(2.0 * np.pi))

RNGLike = np.random.Generator | int | None


def _points(X: ArrayLike, min_dim: int = 2) -> np.ndarray:
    """``X`` as a float array of shape ``(..., d)`` with ``d >= min_dim``."""
    X = np.asarray(X, dtype=float)
    if X.ndim == 0 or X.shape[-1] < min_dim:
        raise ValueError(f"expected points of dimension >= {min_dim} on the last axis: {X.shape}")
    return X


def _draws(X: ArrayLike, min_dim: int = 1) -> np.ndarray:
    """Draws as a 2-d array ``(n, d)``; leading axes (chains, draws) are flattened."""
    X = np.asarray(X, dtype=float)
    if X.ndim < 2:
        raise ValueError(f"expected draws of shape (n, d) or (..., n, d), got {X.shape}")
    if X.shape[-1] < min_dim:
        raise ValueError(f"expected dimension >= {min_dim} on the last axis, got {X.shape}")
    return X.reshape(-1, X.shape[-1])


def _levels(quantiles: ArrayLike) -> np.ndarray:
    q = np.atleast_1d(np.asarray(quantiles, dtype=float))
    if q.ndim != 1 or np.any((q <= 0) | (q >= 1)):
        raise ValueError("quantile levels must be a 1-d sequence of numbers in (0, 1)")
    return q


def _check_dim(dim: int) -> int:
    return check_integral("dim", dim, minimum=2)


def _scalar_or_array(out: np.ndarray) -> float | np.ndarray:
    return float(out) if out.ndim == 0 else out


def squared_norm(X: ArrayLike) -> np.ndarray:
    """Squared Euclidean norm of each row, the statistic of the quantile-coverage metrics.

    Parameters
    ----------
    X : array_like, shape (..., d)
        Points.

    Returns
    -------
    ndarray, shape ``X.shape[:-1]``

    References
    ----------
    .. [1] Sejdinovic, D., Strathmann, H., Lomeli Garcia, M., Andrieu, C., Gretton, A.
       (2014). Kernel Adaptive Metropolis-Hastings. ICML, Section 5.2 (quantile regions
       of the radius).

    Examples
    --------
    >>> squared_norm([[3.0, 4.0], [1.0, 0.0]])
    array([25.,  1.])
    """
    X = np.asarray(X, dtype=float)
    return np.sum(X * X, axis=-1)


def quantile_coverage(
    X: ArrayLike,
    reference: ArrayLike,
    quantiles: ArrayLike = QUANTILE_LEVELS,
    statistic: Callable[[np.ndarray], np.ndarray] | None = None,
) -> np.ndarray:
    """Coverage of a reference sample's quantiles of a scalar statistic by the draws ``X``.

    For each level ``q``: ``t_q`` is the empirical ``q``-quantile of ``statistic(reference)``
    and the result is the fraction of ``statistic(X) <= t_q``.  With an exact reference sample
    (e.g. from :func:`flower_sample`) this is a sample-based version of
    :func:`~pymc_kameleon.models.targets.banana_coverage`.

    Parameters
    ----------
    X : array_like, shape (n, d) or (..., n, d)
        Draws to assess (leading axes pooled).  A 1-d array is taken as ``n`` scalar draws.
    reference : array_like, shape (m, d) or (..., m, d)
        Draws from the target (exact i.i.d. preferably, and large: its own Monte Carlo error,
        about ``sqrt(q (1 - q) / m)`` per level, adds to that of ``X``).
    quantiles : sequence of float
        Levels in (0, 1); default ``0.1, ..., 0.9``.
    statistic : callable, optional
        Maps an ``(n, d)`` array to ``n`` scalars; default
        :func:`~pymc_kameleon.models.targets.squared_norm` (a radius, which is sensitive to
        both scale and shape errors of radially structured targets).

    Returns
    -------
    ndarray, shape (len(quantiles),)

    References
    ----------
    .. [1] Sejdinovic, D., Strathmann, H., Lomeli Garcia, M., Andrieu, C., Gretton, A.
       (2014). Kernel Adaptive Metropolis-Hastings. ICML, Section 5.2 and Figure 5.

    Examples
    --------
    >>> from pymc_kameleon.models.targets import flower_sample
    >>> ref = flower_sample(20000, dim=2, rng=0)
    >>> X = flower_sample(20000, dim=2, rng=1)
    >>> cov = quantile_coverage(X, ref, quantiles=[0.25, 0.75])
    >>> bool(np.all(np.abs(cov - [0.25, 0.75]) < 0.02))
    True
    """
    q = _levels(quantiles)
    stat = squared_norm if statistic is None else statistic

    def values(Y: ArrayLike) -> np.ndarray:
        Y = np.asarray(Y, dtype=float)
        Y = Y.reshape(-1, 1) if Y.ndim == 1 else _draws(Y)
        out = np.asarray(stat(Y), dtype=float).reshape(-1)
        if out.size != Y.shape[0]:
            raise ValueError("statistic must return one scalar per row")
        return out

    thresholds = np.quantile(values(reference), q)
    return np.mean(values(X)[:, None] <= thresholds[None, :], axis=0)


def quantile_coverage_error(
    X: ArrayLike,
    reference: ArrayLike,
    quantiles: ArrayLike = QUANTILE_LEVELS,
    statistic: Callable[[np.ndarray], np.ndarray] | None = None,
) -> float:
    """Mean absolute deviation of :func:`quantile_coverage` from the levels.

    The sample-based analogue of :func:`~pymc_kameleon.models.targets.banana_coverage_error`,
    for targets without closed-form quantile regions (the flower).

    Parameters
    ----------
    X, reference, quantiles, statistic
        As for :func:`quantile_coverage`.

    Returns
    -------
    float

    References
    ----------
    .. [1] Sejdinovic, D., Strathmann, H., Lomeli Garcia, M., Andrieu, C., Gretton, A.
       (2014). Kernel Adaptive Metropolis-Hastings. ICML, Section 5.2 and Figure 5.

    Examples
    --------
    >>> from pymc_kameleon.models.targets import flower_sample
    >>> ref = flower_sample(20000, dim=8, rng=0)
    >>> quantile_coverage_error(flower_sample(20000, dim=8, rng=1), ref) < 0.01
    True
    >>> quantile_coverage_error(1.1 * flower_sample(20000, dim=8, rng=1), ref) > 0.1
    True
    """
    q = _levels(quantiles)
    return float(np.mean(np.abs(quantile_coverage(X, reference, q, statistic) - q)))
