"""KAMH's kernel: ``G(y) = M_{z,y} H M_{z,y}^T`` on a reservoir subsample ``z`` of the history.

:class:`KameleonAdaptation` is a :class:`~.local_gaussian_base.LocalGaussianAdaptation`
whose adaptive part is the Gram of a (uniform or tail-weighted) reservoir of the chain's
tuning positions; :class:`KameleonAdaptState` is one chain's state of it.  The rules are
described in :mod:`.local_gaussian`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..math.kamh import kamh_gram_t, natural_nu2_scale
from ..math.kernels import distinct_rows, median_heuristic
from ..math.online import Reservoir, WeightedReservoir
from ..validation import check_integral
from .local_gaussian_base import LocalGaussianAdaptation, LocalGaussianAdaptState
from .schedule import GeometricSchedule
from .selection import TrialSelection

__all__ = ["KameleonAdaptState", "KameleonAdaptation"]

# distinct subsample points the median heuristic of KAMH uses: its pairwise distances cost
# O(n^2) at every refresh (every 100 tuning iterations); docs/benchmarks/numerics.md
_BANDWIDTH_POINTS = 500


@dataclass
class KameleonAdaptState(LocalGaussianAdaptState):
    """KAMH's state: the history reservoir and the subsample in use."""

    reservoir: Reservoir | WeightedReservoir | None = None
    Zt: np.ndarray | None = None  # the subsample in use, transposed (d, n), C-contiguous:
    # the layout of the compiled Gram


class KameleonAdaptation(LocalGaussianAdaptation):
    """KAMH's kernel: ``G(y) = M_{z,y} H M_{z,y}^T`` on a reservoir subsample ``z``.

    Parameters
    ----------
    n_history : int
        Size of the history subsample.
    tail_weight : float
        ``beta >= 0`` of the weighted reservoir (0: uniform).
    **kwargs
        Those of :class:`LocalGaussianAdaptation` (``nu2`` is its ``scale``).
    """

    def __init__(self, *, n_history: int = 1000, nu2: float | None = None,
                 subsample_schedule: GeometricSchedule | None = None,
                 tail_weight: float = 0.0, **kwargs):
        self.n_history = check_integral("n_history", n_history, minimum=2)
        self.tail_weight = float(tail_weight)
        if isinstance(tail_weight, bool) or not (np.isfinite(self.tail_weight)
                                                 and self.tail_weight >= 0.0):
            raise ValueError(f"tail_weight must be a finite number >= 0, got {tail_weight!r}")
        super().__init__(
            scale=nu2,
            schedule=subsample_schedule or GeometricSchedule(first=50, ratio=1.5, max_gap=100),
            **kwargs,
        )

    def new_state(self, dim: int, gammas: TrialSelection) -> KameleonAdaptState:
        kind = WeightedReservoir if self.tail_weight else Reservoir
        return KameleonAdaptState(gammas=gammas, zero_gram=np.zeros((dim, dim)),
                                  next_refresh=self.schedule.first,
                                  reservoir=kind(self.n_history, dim))

    def extra_stats(self, state: KameleonAdaptState, tune: bool) -> dict[str, Any]:
        return {"n_history": 0 if state.Zt is None else state.Zt.shape[1]}

    def record(self, state: KameleonAdaptState, x: np.ndarray, logp: float,
               rng: np.random.Generator) -> None:
        if self.tail_weight:
            state.reservoir.add(x, -self.tail_weight * logp, rng)
        else:
            state.reservoir.add(x, rng)

    def refresh(self, state: KameleonAdaptState, rng: np.random.Generator) -> None:
        a = state
        Z = a.reservoir.points
        s = self.fixed_bandwidth or median_heuristic(Z, max_points=_BANDWIDTH_POINTS)
        # a positive median heuristic has seen two distinct points; a fixed bandwidth has not
        if s <= 0 or (self.fixed_bandwidth and len(distinct_rows(Z)) < 2):
            return  # degenerate history: stay a random walk until it spreads out
        a.Zt = np.ascontiguousarray(Z.T)
        a.bandwidth = s
        self.activate(a)

    def natural_scale(self, state: KameleonAdaptState) -> float:
        return natural_nu2_scale(state.bandwidth, state.Zt.shape[1])

    def gram(self, state: KameleonAdaptState, y: np.ndarray, rng: np.random.Generator,
             tune: bool) -> np.ndarray:
        return kamh_gram_t(y, state.Zt, state.bandwidth)
