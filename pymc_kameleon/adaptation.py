"""Adaptation rules shared by the step methods (pure Python/NumPy).

* :class:`RobbinsMonro`: stochastic-approximation scaling toward a target acceptance rate,
  ``log scale <- log scale + zeta_t (alpha_t - alpha*)``, ``zeta_t = t^-c``.
* :class:`GeometricSchedule`: the iterations at which expensive adaptation happens
  (refreshing a history subsample, re-estimating a bandwidth, cross-validation).

In the step methods both run only while PyMC tunes; ``stop_tuning()`` freezes them, so the
draws after tuning come from a fixed, valid Metropolis-Hastings kernel.

References
----------
- Andrieu, Thoms (2008). A tutorial on adaptive MCMC. Statistics and Computing 18,
  Algorithm 4.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["GeometricSchedule", "RobbinsMonro"]

_LOG_BOUND = 60.0  # keeps exp(log_value) finite whatever the acceptance history


@dataclass
class RobbinsMonro:
    """Robbins-Monro recursion on the log of a positive scale.

    Parameters
    ----------
    initial : float
        Starting value of the scale (> 0).
    target : float
        Target acceptance probability ``alpha*``.
    exponent : float
        ``c`` in ``zeta_t = t^-c``; must lie in ``(0.5, 1]`` so that the gains sum to infinity
        while their squares do not.

    References
    ----------
    .. [1] Robbins, H., Monro, S. (1951). A stochastic approximation method. Annals of
       Mathematical Statistics 22(3), 400-407.
    .. [2] Andrieu, C., Thoms, J. (2008). A tutorial on adaptive MCMC. Statistics and
       Computing 18(4), 343-373, Algorithm 4.

    Examples
    --------
    >>> rm = RobbinsMonro(initial=1.0, target=0.234)
    >>> rm.update(1.0)  # accepted with probability 1: scale grows
    >>> rm.value > 1.0
    True
    """

    initial: float
    target: float
    exponent: float = 0.6
    t: int = 0
    log_value: float = field(init=False)

    def __post_init__(self) -> None:
        if not self.initial > 0 or not np.isfinite(self.initial):
            raise ValueError(f"RobbinsMonro: initial scale must be positive, got {self.initial}")
        if not 0.0 < self.target < 1.0:
            raise ValueError(f"target acceptance must lie in (0, 1), got {self.target}")
        if not 0.5 < self.exponent <= 1.0:
            raise ValueError(f"RobbinsMonro exponent must lie in (0.5, 1], got {self.exponent}")
        self.log_value = float(np.log(self.initial))

    @property
    def value(self) -> float:
        return float(np.exp(self.log_value))

    def update(self, accept_prob: float) -> None:
        """One recursion step with the acceptance probability of the last proposal."""
        self.t += 1
        gain = self.t ** (-self.exponent)
        step = gain * (float(np.nan_to_num(accept_prob)) - self.target)
        self.log_value = float(np.clip(self.log_value + step, -_LOG_BOUND, _LOG_BOUND))


@dataclass(frozen=True)
class GeometricSchedule:
    """Adaptation events at ``first``, then geometrically spaced, with capped gaps.

    The event after iteration ``t >= first`` is ``t + clip(round((ratio - 1) t), 1, max_gap)``.

    Parameters
    ----------
    first : int
        First event (iteration count, 1-based).
    ratio : float
        Growth of the spacing (``2`` doubles the iteration count between events).
    max_gap : int or None
        Largest number of iterations between two events.

    References
    ----------
    .. [1] Sejdinovic, D., Strathmann, H., Lomeli Garcia, M., Andrieu, C., Gretton, A.
       (2014). Kernel Adaptive Metropolis-Hastings. ICML, Section 4 (subsample updates with
       probabilities ``p_t -> 0``; here deterministic and only while tuning).
    .. [2] Andrieu, C., Thoms, J. (2008). A tutorial on adaptive MCMC. Statistics and
       Computing 18(4), 343-373.

    Examples
    --------
    >>> sched = GeometricSchedule(first=50, ratio=2.0, max_gap=200)
    >>> events, t = [], sched.first
    >>> while t < 1000:
    ...     events.append(t)
    ...     t = sched.next_after(t)
    >>> events
    [50, 100, 200, 400, 600, 800]
    """

    first: int = 50
    ratio: float = 2.0
    max_gap: int | None = None

    def __post_init__(self) -> None:
        if self.first < 1:
            raise ValueError("GeometricSchedule.first must be >= 1")
        if self.ratio < 1.0:
            raise ValueError("GeometricSchedule.ratio must be >= 1")

    def next_after(self, t: int) -> int:
        """The first event strictly after iteration ``t``."""
        if t < self.first:
            return self.first
        gap = int(round((self.ratio - 1.0) * t))
        if self.max_gap is not None:
            gap = min(gap, self.max_gap)
        return t + max(gap, 1)
