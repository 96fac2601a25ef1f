"""Schedules of the expensive adaptation events (pure Python).

:class:`GeometricSchedule` gives the iterations at which a history subsample is refreshed,
a bandwidth re-estimated or hyperparameters cross-validated: geometrically spaced, with
capped gaps, and only while PyMC tunes.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GeometricSchedule"]


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
