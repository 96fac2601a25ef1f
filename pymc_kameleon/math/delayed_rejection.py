"""Delayed rejection: the second-stage acceptance probability of a two-stage Metropolis step.

After a first-stage proposal ``y1 ~ q1(x, .)`` is rejected, a second proposal
``y2 ~ q2(x, y1, .)`` is accepted with probability ``min(1, r2)``,

.. math::

    r_2 = \\frac{\\pi(y_2)\\, q_1(y_2 \\to y_1)\\, [1 - \\alpha_1(y_2, y_1)]\\,
                 q_2(y_2, y_1 \\to x)}
                {\\pi(x)\\, q_1(x \\to y_1)\\, [1 - \\alpha_1(x, y_1)]\\,
                 q_2(x, y_1 \\to y_2)},
    \\qquad \\alpha_1(a, b) = \\min\\left(1, \\frac{\\pi(b)\\, q_1(b \\to a)}
                                             {\\pi(a)\\, q_1(a \\to b)}\\right),

which makes the two-stage kernel reversible with respect to ``pi`` (Tierney and Mira, 1999):
the reverse path ``y2 -> y1 (rejected) -> x`` is weighed against the forward one.

Likelihood estimators (pseudo-marginal MCMC): ``pi(x)`` is the *stored* estimate of the
current point and ``pi(y1)`` the estimate computed at the first stage, reused in
``alpha_1(y2, y1)``.  On the extended space of parameters and estimator randomness the
reverse path proposes the same ``(y1, w1)``, whose estimator density cancels between the
numerator and denominator, so the kernel is exact for the pseudo-marginal target; a fresh
estimate at ``y1`` in the second stage would not be.

Everything is in log space and handles ``-inf`` log densities (a point outside the support
is a rejection, and ``1 - alpha_1 = 1`` there).

References
----------
- Tierney, L., Mira, A. (1999). Some adaptive Monte Carlo methods for Bayesian inference.
  Statistics in Medicine 18, 2507-2515.
- Green, P. J., Mira, A. (2001). Delayed rejection in reversible jump Metropolis-Hastings.
  Biometrika 88(4), 1035-1053.
- Haario, H., Laine, M., Mira, A., Saksman, E. (2006). DRAM: efficient adaptive MCMC.
  Statistics and Computing 16, 339-354.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["gaussian_log_density", "log_one_minus_accept", "second_stage_log_ratio"]

_LOG_2PI = math.log(2.0 * math.pi)
_LOG_HALF = math.log(0.5)


def log_one_minus_accept(log_ratio: float) -> float:
    """``log(1 - min(1, exp(log_ratio)))``: the log probability that a stage rejects.

    Parameters
    ----------
    log_ratio : float
        Log of the Metropolis-Hastings ratio (``-inf`` allowed: rejection is certain).

    Returns
    -------
    float
        ``-inf`` when ``log_ratio >= 0`` (the stage always accepts), else
        ``log(-expm1(log_ratio))``, computed without cancellation near 0 and near ``-inf``.
    """
    if log_ratio >= 0.0:
        return -math.inf
    if log_ratio < _LOG_HALF:
        return math.log1p(-math.exp(log_ratio))
    return math.log(-math.expm1(log_ratio))


def second_stage_log_ratio(logp_x: float, logp_y1: float, logp_y2: float,
                           log_q1_y2_y1: float, log_q1_x_y1: float,
                           log_q1_y1_y2: float | None = None,
                           log_q1_y1_x: float | None = None,
                           log_q2_ratio: float = 0.0) -> float:
    """``log r2`` of delayed rejection's second stage (accept with ``min(1, r2)``).

    Parameters
    ----------
    logp_x : float
        Stored log density of the current point ``x`` (finite).
    logp_y1 : float
        Log density of the rejected first-stage proposal ``y1``, as computed there.
    logp_y2 : float
        Log density of the second-stage proposal ``y2``.
    log_q1_y2_y1, log_q1_x_y1 : float
        First-stage proposal log densities ``log q1(y2 -> y1)`` and ``log q1(x -> y1)``
        (only their difference matters: constants cancel).
    log_q1_y1_y2, log_q1_y1_x : float, optional
        The reverse first-stage densities ``log q1(y1 -> y2)`` and ``log q1(y1 -> x)``
        in ``alpha_1(y2, y1)`` and ``alpha_1(x, y1)``; default: ``log_q1_y2_y1`` and
        ``log_q1_x_y1`` (a symmetric ``q1``, whose ratios in ``alpha_1`` are 1).
    log_q2_ratio : float, default 0
        ``log q2(y2, y1 -> x) - log q2(x, y1 -> y2)``; 0 when the second stage is a
        symmetric proposal centred at the current point (it ignores ``y1``).

    Returns
    -------
    float
        ``log r2``; ``-inf`` when ``y2`` is outside the support, when ``alpha_1(y2, y1)
        = 1`` (the reverse path could not have rejected ``y1``), or when
        ``alpha_1(x, y1) = 1`` (the first stage cannot have rejected: no second stage).

    Examples
    --------
    A symmetric first stage ``N(x, 1)`` on ``pi = N(0, 1)`` from ``x = 0``: ``y1 = 2``
    was rejected, ``y2 = 0.3`` is proposed.

    >>> import numpy as np
    >>> lp = lambda z: -0.5 * z * z
    >>> lq = lambda a, b: -0.5 * (b - a) ** 2
    >>> r = second_stage_log_ratio(lp(0.0), lp(2.0), lp(0.3), lq(0.3, 2.0), lq(0.0, 2.0))
    >>> a1 = lambda a, b: min(1.0, np.exp(lp(b) - lp(a)))
    >>> direct = (np.exp(lp(0.3) + lq(0.3, 2.0)) * (1 - a1(0.3, 2.0))
    ...           / (np.exp(lp(0.0) + lq(0.0, 2.0)) * (1 - a1(0.0, 2.0))))
    >>> bool(np.isclose(np.exp(r), direct))
    True
    """
    if logp_y2 == -math.inf:
        return -math.inf
    if log_q1_y1_y2 is None:
        log_q1_y1_y2 = log_q1_y2_y1
    if log_q1_y1_x is None:
        log_q1_y1_x = log_q1_x_y1
    reject_x = log_one_minus_accept(logp_y1 - logp_x + log_q1_y1_x - log_q1_x_y1)
    if reject_x == -math.inf:
        return -math.inf
    reject_y2 = log_one_minus_accept(logp_y1 - logp_y2 + log_q1_y1_y2 - log_q1_y2_y1)
    return (logp_y2 - logp_x + log_q1_y2_y1 - log_q1_x_y1 + reject_y2 - reject_x
            + log_q2_ratio)


def gaussian_log_density(frm: np.ndarray, to: np.ndarray, scale: float) -> float:
    """``log N(to; frm, scale^2 I)``, the isotropic Gaussian proposal density.

    Parameters
    ----------
    frm, to : ndarray, shape (d,)
        Centre and point.
    scale : float
        Standard deviation of every coordinate.

    Returns
    -------
    float
    """
    diff = np.asarray(to, dtype=float) - np.asarray(frm, dtype=float)
    d = diff.size
    return float(-0.5 * (diff @ diff) / scale**2 - d * math.log(scale) - 0.5 * d * _LOG_2PI)
