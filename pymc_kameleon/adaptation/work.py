"""Iterations per draw chosen per posterior while tuning (pure NumPy/ArviZ, no PyMC).

NUTS adapts its trajectory length to the posterior; a Metropolis-Hastings step with a fixed
number of iterations per draw carries too little per draw on a posterior whose chain mixes
slowly, and then R-hat and ESS miss their marks by chance (docs/tuning.md, "Work per draw").
:class:`WorkPerDraw` records the chain's whitened position after each draw of a window late in
tuning, when the sampler's own adaptation has settled, estimates the integrated
autocorrelation time per draw there (the worst coordinate, from ArviZ's bulk ESS; the
smaller of the window's two halves, so that a transient does not count), and scales
the iterations per draw so that it falls to :attr:`target_tau`: never down, at most
:attr:`max_factor` times.  The factor is set once, at a draw boundary before tuning ends, and
is frozen afterwards.

References
----------
- Hoffman, M. D., Gelman, A. (2014). The No-U-Turn sampler. JMLR 15 (adapting the work per
  draw to the posterior).
- Vehtari, A., Gelman, A., Simpson, D., Carpenter, B., Buerkner, P.-C. (2021).
  Rank-normalization, folding, and localization: an improved R-hat. Bayesian Analysis
  16(2) (bulk ESS).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import arviz as az
import numpy as np

from ..validation import check_at_least

__all__ = ["WorkPerDraw"]

#: Fewest draws in the measurement window (two halves of 50): an autocorrelation time
#: estimated from fewer is too noisy to act on.
MIN_WINDOW = 100
#: Most draws in the measurement window.
MAX_WINDOW = 200
#: Default bound on the factor: 4 x the default work per draw.
MAX_FACTOR = 4.0


@dataclass
class WorkPerDraw:
    """The factor on a step's iterations per draw, measured over draws ``[start, decide)``.

    Parameters
    ----------
    start, decide : int
        Tuning draws (1-based, as the step counts them) that open and close the window.
    target_tau : float
        Autocorrelation time per draw to reach: 3 gives a bulk ESS of about a third of the
        draws (1300 of pm.sample's 4 x 1000).
    max_factor : float
        Bound on the factor (the work per draw at most this many times the default).

    Examples
    --------
    A chain whose draws are an AR(1) with coefficient 0.8 (autocorrelation time 9) gets
    three times the iterations:

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> work = WorkPerDraw(start=1, decide=201)
    >>> x = np.zeros(2)
    >>> for draw in range(1, 201):
    ...     x = 0.8 * x + 0.6 * rng.standard_normal(2)
    ...     work.update(draw, x)
    >>> 2.0 < work.final() <= 4.0
    True
    >>> work.bound_reached
    False
    """

    start: int
    decide: int
    target_tau: float = 3.0
    max_factor: float = MAX_FACTOR
    positions: list = field(default_factory=list)
    tau: float = float("nan")
    #: The factor the autocorrelation asked for (``tau / target``, before the bound).
    asked: float = float("nan")

    @classmethod
    def schedule(cls, tune: int | None, begin: int,
                 max_factor: float = MAX_FACTOR) -> WorkPerDraw | None:
        """The window for ``tune`` tuning draws whose sampler runs from draw ``begin``: the
        last ``MAX_WINDOW`` draws of the second half of ``[begin, decide)``, where
        ``decide`` leaves a tenth of tuning (at least 50 draws) to adapt at the new work.
        None when tuning is unknown or too short for a window of ``MIN_WINDOW`` draws.
        ``max_factor`` bounds the factor (at least 1: the work never falls below the
        default)."""
        max_factor = check_at_least("max_factor", max_factor, 1.0)
        if not tune:
            return None
        decide = tune - max(50, tune // 10)
        start = max(begin + (decide - begin) // 2, decide - MAX_WINDOW)
        if decide - start < MIN_WINDOW:
            return None
        return cls(start=start, decide=decide, max_factor=max_factor)

    def update(self, draw: int, position: np.ndarray) -> None:
        """Record the (whitened) position at the end of tuning draw ``draw``."""
        if self.start <= draw < self.decide:
            self.positions.append(np.array(position, dtype=float))

    def final(self, target_tau: float | None = None) -> float:
        """The factor: ``tau / target_tau`` clipped to ``[1, max_factor]`` (1 without data;
        ``target_tau``: this decision's target instead of :attr:`target_tau`).

        ``tau`` is the smaller of the two halves' estimates, so that a transient in one
        half (an adaptation that recovers) does not multiply the work of the whole run.
        """
        if len(self.positions) < MIN_WINDOW:
            return 1.0
        x = np.asarray(self.positions)
        if not np.all(np.isfinite(x)):
            return 1.0
        half = x.shape[0] // 2
        self.tau = min(_worst_tau(x[:half]), _worst_tau(x[half:]))
        target = self.target_tau if target_tau is None else target_tau
        self.asked = self.tau / target
        return float(np.clip(self.asked, 1.0, self.max_factor))

    @property
    def bound_reached(self) -> bool:
        """Whether :meth:`final` asked for more than :attr:`max_factor`: the draws will
        mix more slowly than :attr:`target_tau` (a stuck chain included)."""
        return bool(self.asked > self.max_factor)


def _worst_tau(x: np.ndarray) -> float:
    """Autocorrelation time of the worst coordinate of draws ``x`` (draw, coordinate), from
    ArviZ's bulk ESS; infinite when a coordinate never moved (the chain is stuck)."""
    if np.any(np.ptp(x, axis=0) == 0):
        return math.inf
    worst = min(float(az.ess(x[None, :, i])) for i in range(x.shape[1]))
    return x.shape[0] / worst if worst > 0 and math.isfinite(worst) else math.inf
