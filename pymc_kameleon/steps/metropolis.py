"""The step's Metropolis-Hastings decisions: the one place a kernel's proposal meets the model.

:class:`StepMetropolis` implements the :class:`~pymc_kameleon.adaptation.kernel.Metropolis`
protocol for a step: it maps whitened positions through the chain's map, evaluates the log
density (:class:`~.density.LogDensity`: float32 rounding, failures) and accepts or rejects,
keeping the chain's model-space point and *stored* log density in its record.  The rules
(``docs/pseudo_marginal.md``, "Why the stored estimate matters"; failures:
``docs/robustness.md``): one evaluation per decision, at the proposal (none for a non-finite
proposal or a ``-inf`` correction, e.g. a diverged trajectory); the current value is never
re-estimated; a non-finite value at the proposal is a rejection.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..adaptation.kernel import ChainState, Iteration, Proposal, rejected_outright
from .density import LogDensity
from .records import ChainRecord

__all__ = ["StepMetropolis"]


class StepMetropolis:
    """Metropolis-Hastings decisions on one chain's record.

    Parameters
    ----------
    density : LogDensity
        The evaluated log density.
    """

    def __init__(self, density: LogDensity):
        self.density = density
        self.record: ChainRecord | None = None  # the chain's: set by the step each draw
        self.rng: np.random.Generator | None = None  # the step's: set each draw
        self.last: tuple = (None, math.nan)  # the last evaluated (point, logp)
        self.observer: Callable[[np.ndarray, float], Any] | None = None  # sees each one

    def to_x(self, position: np.ndarray) -> np.ndarray:
        """The model-space point of a whitened ``position`` (no evaluation)."""
        return self.record.precond.to_x(position)

    def step(self, state: ChainState, proposal: Proposal, adapts: bool = True,
             probe: bool = False) -> Iteration:
        """One decision on ``proposal``, with one evaluation unless it is rejected outright."""
        if rejected_outright(proposal):  # e.g. a diverged trajectory: no evaluation
            return Iteration(state, 0.0, False, 0, adapts, probe)
        new, x_new = self.evaluate(proposal.position)
        state, accept_prob, accepted = self.decide(
            state, new, x_new, new.logp - state.logp + proposal.log_correction)
        return Iteration(state, accept_prob, accepted, 1, adapts, probe)

    def evaluate(self, position: np.ndarray) -> tuple[ChainState, np.ndarray]:
        """The log density at the whitened ``position`` (one evaluation): the state there
        and its model-space point (float32 variables rounded as PyMC stores them)."""
        precond, density = self.record.precond, self.density
        x_new = density.round(precond.to_x(position))
        u_new = precond.to_u(x_new) if density.float32 else position
        logp = density.unchecked(x_new)  # the step ignores FP warnings for the whole draw
        self.last = (x_new, logp)
        if self.observer is not None:
            self.observer(x_new, logp)
        return ChainState(u_new, logp), x_new

    def decide(self, state: ChainState, new: ChainState, x_new: np.ndarray,
               log_accept: float) -> tuple[ChainState, float, bool]:
        """Accept ``new`` with probability ``min(1, exp(log_accept))`` (never a point
        outside the support); the chain's state, the probability, whether it moved."""
        if not math.isfinite(new.logp) or math.isnan(log_accept):
            log_accept = -math.inf
        accept_prob = float(np.exp(min(log_accept, 0.0)))
        u = self.rng.random()  # the same stream as uniform(), a quarter of its cost
        if (math.log(u) if u > 0.0 else -math.inf) < log_accept:
            w = self.record
            w.x, w.logp = x_new, new.logp
            return new, accept_prob, True
        return state, accept_prob, False
