"""The kernel protocol: what every sampler of the package is to the step base.

A step runs a sequence of kernels: the warm-up (:class:`.WarmupKernel`), then the sampler's
own (KAMH, F-KAMH, kernel HMC), or the warm-up alone, kept to the end (the random walk).
Each kernel is a frozen configuration whose functions act on one chain's state, as in
BlackJAX's ``mcmc/`` and ``adaptation/``:

* ``init(dim, walk_scale, kernel_draws)``: a fresh state when the kernel takes over
  (``walk_scale``: ``2.38 / sqrt(d)``; ``kernel_draws``: the kernel's tuning draws, None if
  unknown).  The warm-up's state is made by the chain's start instead.
* ``step(state, chain, mh, tune)``: one iteration from ``chain`` (:class:`ChainState`),
  returning an :class:`Iteration`.  The kernel proposes; the step's :class:`Metropolis`
  evaluates and decides, so that every kernel keeps the exactness rules (one evaluation at
  the proposal, the stored current value, the full ratio).
* ``update(state, it, x, rng)``: after each tuning iteration (``x``: the chain's point in
  model coordinates).
* ``update_draw(state, ctx)``: at each tuning draw boundary (:class:`DrawContext`); returns a
  :class:`DrawInfo`, whose ``done`` hands the chain to the next kernel.
* ``n_steps(state, dim, tune)``: iterations per draw (constant within a draw, and after
  tuning).
* ``stats(state, tune)``: the draw's stats, called once at its end (it closes the draw's
  tallies).
* ``final(state, rng)``: freeze the kernel (tuning ends, or the next kernel takes over).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import numpy as np

from .warmup import NoiseCeiling

__all__ = ["MIN_STEPS", "ChainState", "DrawContext", "DrawInfo", "Iteration", "Kernel",
           "Metropolis", "Proposal", "default_n_steps", "rejected_outright"]

_sum = np.add.reduce  # one ufunc call: the cheapest finiteness test of a vector

# Fewest iterations per draw by default: PyMC's loop, the stored value's key and the stats
# cost a draw as much as a few iterations, and with five the suite's small models meet its
# criteria at the same ESS per evaluation and more ESS per second than with max(2, d)
# (docs/benchmarks/suite.md, "At least five iterations per draw").
MIN_STEPS = 5


def default_n_steps(dim: int) -> int:
    """The default iterations per draw, ``max(5, d)``."""
    return max(MIN_STEPS, dim)


@dataclass
class ChainState:
    """Where the chain is, in the sampler's (whitened) coordinates, and its stored value."""

    position: np.ndarray
    logp: float


@dataclass(frozen=True)
class Proposal:
    """A proposed position and the log correction of the acceptance ratio.

    ``log_correction`` is ``log q(x | x*) - log q(x* | x)`` for a Metropolis-Hastings
    proposal, or ``K(p) - K(p*)`` for a Hamiltonian one; the step accepts with probability
    ``min(1, exp(logp(x*) - logp(x) + log_correction))``.  ``-inf`` rejects the proposal
    without evaluating it (a diverged trajectory).
    """

    position: np.ndarray
    log_correction: float


def rejected_outright(proposal: Proposal) -> bool:
    """Whether ``proposal`` is rejected without an evaluation: a ``-inf`` correction (a
    diverged trajectory) or a non-finite position (the sum is non-finite when an entry is;
    also when finite entries near 1e308 overflow it, a region no target holds)."""
    return proposal.log_correction == -math.inf or not math.isfinite(_sum(proposal.position))


class Iteration(NamedTuple):
    """What one iteration of a kernel did."""

    state: ChainState  # the chain after the decision
    accept_prob: float  # the Metropolis-Hastings acceptance probability
    accepted: bool  # whether the chain moved
    n_evals: int  # log-density evaluations spent
    adapts: bool = True  # whether the acceptance counts toward the scale's adaptation
    probe: bool = False  # the current point proposed again, to measure estimator noise


class DrawInfo(NamedTuple):
    """What a kernel's ``update_draw`` did."""

    new_window: bool  # the whitening map changed (the warm-up's windows)
    done: bool  # the kernel is done: the next one takes over from this draw


class DrawContext(NamedTuple):
    """What a kernel learns at a tuning draw boundary (passed, never read back)."""

    x: np.ndarray  # the chain's point, model coordinates
    logp: float  # its stored log density
    draw: int  # tuning draws done
    warmup_length: int  # draws of the warm-up
    accepts: list  # acceptance probabilities of the last draw that adapt (no probes)
    tune: int | None  # tuning draws of the chain, None if unknown
    iterations_left: int | None  # tuning iterations left at the current count, or None
    noise: NoiseCeiling  # the acceptance ceiling of a noisy log density
    rng: np.random.Generator
    max_target: float = 1.0  # a cap on scales' acceptance targets (a surrogate screen's)

    def target(self, target: float) -> float:
        """A scale's acceptance target: ``target`` lowered under estimator noise
        (:meth:`.NoiseCeiling.target`) and capped at :attr:`max_target`."""
        return min(self.noise.target(target), self.max_target)


class Metropolis(Protocol):
    """The step's Metropolis-Hastings decisions, in whitened coordinates."""

    rng: np.random.Generator

    def step(self, state: ChainState, proposal: Proposal, adapts: bool = True,
             probe: bool = False) -> Iteration:
        """One evaluation at the proposal and the full ratio (none if it is non-finite or
        its correction is ``-inf``)."""

    def to_x(self, position: np.ndarray) -> np.ndarray:
        """The model-space point of a whitened ``position`` (no evaluation)."""

    def evaluate(self, position: np.ndarray) -> tuple[ChainState, np.ndarray]:
        """One evaluation: the state at ``position`` and its model-space point."""

    def decide(self, state: ChainState, new: ChainState, x_new: np.ndarray,
               log_accept: float) -> tuple[ChainState, float, bool]:
        """Accept ``new`` with probability ``min(1, exp(log_accept))``."""


class Kernel(Protocol):
    """A sampler's kernel and its adaptation (see the module docstring)."""

    def init(self, dim: int, walk_scale: float, kernel_draws: int | None = None) -> Any: ...

    def step(self, state: Any, chain: ChainState, mh: Metropolis, tune: bool) -> Iteration: ...

    def update(self, state: Any, it: Iteration, x: np.ndarray,
               rng: np.random.Generator) -> None: ...

    def update_draw(self, state: Any, ctx: DrawContext) -> DrawInfo: ...

    def n_steps(self, state: Any, dim: int, tune: bool) -> int: ...

    def stats(self, state: Any, tune: bool) -> dict[str, Any]: ...

    def final(self, state: Any, rng: np.random.Generator | None = None) -> Any: ...
