"""A mixture of isotropic Gaussians: a target with separated modes and known weights.

``p(x) = sum_k w_k N(x; m_k, s_k^2 I)``, normalised (pure NumPy).  Its PyMC model, with the
same density as posterior and a log evidence of exactly 0, is
:func:`pymc_kameleon.models.synthetic.gaussian_mixture_model`; the engine-level tests and
benchmarks of the emulator use this density directly.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy.special import logsumexp

from .coverage import LOG_2PI

__all__ = ["mixture_logp", "mixture_parts"]


def mixture_parts(means: ArrayLike, sds: ArrayLike,
                  weights: ArrayLike) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The components checked: means ``(K, d)``, sds ``(K,)`` and each component's log
    weight with its normalising constant, ``log w_k - d (log(2 pi) / 2 + log s_k)``.

    Raises
    ------
    ValueError
        Unless there are K means, K positive sds and K positive weights.
    """
    means = np.atleast_2d(np.asarray(means, dtype=float))
    sds = np.asarray(sds, dtype=float).reshape(-1)
    weights = np.asarray(weights, dtype=float).reshape(-1)
    K, dim = means.shape
    if sds.shape != (K,) or weights.shape != (K,) or np.any(sds <= 0) or np.any(weights <= 0):
        raise ValueError("need K means, K positive sds and K positive weights")
    return means, sds, np.log(weights / weights.sum()) - dim * (0.5 * LOG_2PI + np.log(sds))


def mixture_logp(X: ArrayLike, means: ArrayLike, sds: ArrayLike,
                 weights: ArrayLike) -> np.ndarray:
    """The mixture's normalised log density at the rows of ``X`` (shape ``(..., d)``).

    Parameters
    ----------
    X : array_like, shape (..., d)
        Points.
    means, sds, weights : array_like
        The components' means ``(K, d)``, standard deviations ``(K,)`` and weights
        ``(K,)`` (normalised here).

    Examples
    --------
    >>> from scipy.stats import multivariate_normal
    >>> x = np.array([1.0, 0.5])
    >>> mix = 0.3 * multivariate_normal([-3, 0]).pdf(x) + 0.7 * multivariate_normal([3, 0]).pdf(x)
    >>> lp = mixture_logp(x, [[-3.0, 0.0], [3.0, 0.0]], [1.0, 1.0], [0.3, 0.7])
    >>> bool(np.isclose(lp, np.log(mix)))
    True
    """
    means, sds, log_w = mixture_parts(means, sds, weights)
    X = np.asarray(X, dtype=float)
    sq = np.sum((X[..., None, :] - means) ** 2, axis=-1)  # (..., K)
    return logsumexp(log_w - 0.5 * sq / sds**2, axis=-1)
