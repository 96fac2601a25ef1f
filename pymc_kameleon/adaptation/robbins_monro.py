"""Robbins-Monro scaling toward a target acceptance rate (pure Python/NumPy).

``log scale <- log scale + zeta_t (alpha_t - alpha*)``, ``zeta_t = t^-c``.  In the step
methods it runs only while PyMC tunes; ``stop_tuning()`` freezes it, so the draws after
tuning come from a fixed, valid Metropolis-Hastings kernel.

References
----------
- Andrieu, Thoms (2008). A tutorial on adaptive MCMC. Statistics and Computing 18,
  Algorithm 4.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["RobbinsMonro"]

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
