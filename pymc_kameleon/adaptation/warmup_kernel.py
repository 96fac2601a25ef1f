"""The warm-up as a kernel: a preconditioned random walk that learns where the posterior is.

Every step of the package begins with this kernel, and :class:`~pymc_kameleon.RandomWalkStep`
keeps it to the end.  It proposes ``u* = u + scale * eps`` in whitened coordinates
``u = L^{-1} (x - m)``, a symmetric proposal (the log correction of the Metropolis-Hastings
ratio is 0), and adapts while PyMC tunes:

* ``scale`` follows a Robbins-Monro recursion toward the acceptance target, batched per
  draw (lowered to half the ceiling a noisy log density allows, :class:`.NoiseCeiling`);
* location ``m`` and shape ``L`` are learned in growing windows (:func:`.window_ends`), each
  window's covariance regularised toward the last map (:func:`.regularised_covariance`) or
  toward a Laplace start's Gaussian (:meth:`WarmupKernel.start_at`); the first window drops
  the climb from the initial point (:func:`.climb_end`), and a warm-up kept for the whole
  tuning phase ends its last window a tenth of tuning before the end, merged with the one
  before it (:func:`.tuning_window_ends`);
* with a noisy log density, one iteration in ``PROBE_EVERY`` proposes the current point
  again, to measure that ceiling.

As :class:`~pymc_kameleon.RandomWalkStep`'s sampler it may also mix in a smaller scale or
add a delayed-rejection second stage (``docs/algorithms/random_walk.md``).

It follows the kernel protocol of :mod:`.kernel` (BlackJAX's window adaptation is the
model): a frozen configuration (:class:`WarmupKernel`) whose small functions act on one
chain's :class:`WarmupState` -- :meth:`~WarmupKernel.init`, :meth:`~WarmupKernel.step`
(propose, then the step's Metropolis-Hastings decision), :meth:`~WarmupKernel.update` after
each tuning iteration, :meth:`~WarmupKernel.update_draw` at each draw boundary (its
:class:`~.kernel.DrawInfo` says when a window closed and when the warm-up is over) and
:meth:`~WarmupKernel.final`.  The kernel knows nothing of PyMC or of the sampler that takes
over.

References
----------
The windows and their shrinkage: see :mod:`.warmup`.

- Roberts, G. O., Rosenthal, J. S. (2001). Optimal scaling for various Metropolis-Hastings
  algorithms. Statistical Science 16(4) (scale ``2.38 / sqrt(d)``, acceptance targets).
- Cabezas, A., et al. (2024). BlackJAX: composable Bayesian inference in JAX.
  arXiv:2402.10797 (the init / update / final structure).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..math.delayed_rejection import gaussian_log_density, second_stage_log_ratio
from .kernel import (
    ChainState,
    DrawContext,
    DrawInfo,
    Iteration,
    Metropolis,
    Proposal,
    default_n_steps,
)
from .robbins_monro import RobbinsMonro
from .warmup import (
    CLIMB_STARTS,
    AffineMap,
    NoiseCeiling,
    WindowMoments,
    climb_end,
    final_window_end,
    regularised_covariance,
    tuning_window_ends,
    window_ends,
)

__all__ = ["PROBE_EVERY", "WarmupKernel", "WarmupState", "random_walk_target"]

#: With a noisy log density, one warm-up iteration in ten proposes the current point again.
PROBE_EVERY = 10


def random_walk_target(dim: int) -> float:
    """Acceptance target of a random walk in ``dim`` dimensions: 0.44 in 1-d, 0.234 as
    ``d`` grows (Roberts and Rosenthal, 2001), interpolated as ``0.234 + 0.206 / d``."""
    return 0.234 + 0.206 / max(int(dim), 1)


@dataclass
class WarmupState:
    """One chain's warm-up: the map, the walk's scale and the window being learned."""

    precond: AffineMap  # x = m + L u, the map the chain is whitened by
    rw: RobbinsMonro  # the walk's scale
    window: WindowMoments | None  # moments of the open window (None: nothing more to learn)
    noise: NoiseCeiling = field(default_factory=NoiseCeiling)
    window_index: int = 0
    prior_cov: np.ndarray | None = None  # what a window's covariance is shrunk toward
    prior_n: float = 0.0  # its weight, in pseudo-samples
    laplace: bool = False  # whether the prior is the Laplace start's Gaussian
    # the first window: its moments from later starts (draw, moments) and the log density
    # after each of its draws, to drop the climb from the initial point
    climb: list = field(default_factory=list)
    logps: list = field(default_factory=list)
    noisy: bool = False  # a likelihood estimator: probe the noise while tuning
    iteration: int = 0  # tuning iterations done
    dr_counts: list = field(default_factory=lambda: [0, 0])  # second stages, accepted (draw)


@dataclass(frozen=True)
class WarmupKernel:
    """The warm-up's configuration and its functions on a :class:`WarmupState`.

    Parameters
    ----------
    dim : int
        Dimension ``d`` of the block.
    target : float
        Acceptance target of the scale (default :func:`random_walk_target`).
    exponent : float
        ``c`` of the Robbins-Monro gains ``t^-c``.
    adapt : bool
        Learn scale and windows (False: the walk keeps its initial scale and shape).
    scale : float, optional
        Initial scale (default ``2.38 / sqrt(d)``).
    cov : array, optional
        Initial shape ``L L^T`` (default identity).
    to_the_end : bool
        Adapt for the whole tuning phase and never hand over (the random-walk step): windows
        :func:`.tuning_window_ends`; otherwise the warm-up is over at the end of its last
        window.
    delayed_rejection : float, optional
        Factor in ``(0, 1)`` of a second, smaller proposal after a rejection (Tierney-Mira).
    scale_mixture : tuple of float, optional
        ``(p, f)``: with probability ``p`` propose with the scale ``f scale`` (no adaptation
        on those iterations).
    tuning_min_steps : int
        Fewest iterations per draw while tuning (after tuning: 5).

    Examples
    --------
    A chain on ``N(0, 4 I)`` in 2-d, driven for 41 draws of 20 iterations with a
    warm-up of 40 draws: the map learns the scale of the target.

    >>> import numpy as np
    >>> rng = np.random.default_rng(1)
    >>> kernel = WarmupKernel(dim=2, target=random_walk_target(2))
    >>> state, x = kernel.init(), np.zeros(2)
    >>> logp = lambda x: -0.125 * x @ x
    >>> accepts = []
    >>> for draw in range(41):
    ...     info = kernel.update_draw_at(state, x, draw, length=40, accepts=accepts)
    ...     accepts = []
    ...     for _ in range(20):
    ...         x_new = state.precond.to_x(kernel.propose(state, state.precond.to_u(x), rng))
    ...         a = min(1.0, np.exp(logp(x_new) - logp(x)))
    ...         moved = rng.random() < a
    ...         x = x_new if moved else x
    ...         accepts.append(a)
    ...         kernel.record(state, x, a, moved)
    >>> info.done, bool(1.0 < np.sqrt(np.diag(state.precond.cov)).mean() < 4.0)
    (True, True)
    """

    dim: int
    target: float
    exponent: float = 0.6
    adapt: bool = True
    scale: float | None = None
    cov: np.ndarray | None = None
    to_the_end: bool = False
    delayed_rejection: float | None = None
    scale_mixture: tuple[float, float] | None = None
    tuning_min_steps: int = 5

    @property
    def scale0(self) -> float:
        """Optimal random-walk scale on a standard Gaussian (whitened units)."""
        return 2.38 / np.sqrt(self.dim)

    def init(self) -> WarmupState:
        """A fresh warm-up: the given (or identity) shape, the initial scale."""
        if self.cov is None:
            precond = AffineMap.identity(self.dim)
        else:
            precond = AffineMap.from_cov(np.zeros(self.dim), self.cov)
        s0 = self.scale0
        rw = RobbinsMonro(self.scale or s0, self.target, self.exponent,
                          lower=1e-4 * s0, upper=100 * s0)
        return WarmupState(precond, rw, WindowMoments(self.dim))

    def start_at(self, state: WarmupState, mean: np.ndarray, cov: np.ndarray) -> None:
        """Start from a Laplace approximation ``N(mean, cov)``: its map, and its covariance
        as the prior of the first window (worth ``20 d`` pseudo-samples)."""
        state.precond = AffineMap.from_cov(mean, cov)
        state.prior_cov, state.prior_n, state.laplace = state.precond.cov, 20.0 * self.dim, True

    @staticmethod
    def probe(iteration: int, noisy: bool) -> bool:
        """Whether tuning iteration ``iteration`` (0-based) proposes the current point."""
        return noisy and iteration % PROBE_EVERY == PROBE_EVERY - 1

    def propose(self, state: WarmupState, u: np.ndarray, rng: np.random.Generator,
                probe: bool = False, factor: float = 1.0) -> np.ndarray:
        """The proposed whitened position: ``u + factor * scale * eps``, or ``u`` itself for
        a probe (``factor`` < 1: a smaller proposal, e.g. delayed rejection's second stage).

        Symmetric: the log correction of the Metropolis-Hastings ratio,
        ``log q(u | u*) - log q(u* | u)``, is 0 (also in ``x``: the map's Jacobian cancels).
        """
        if probe:
            return u.copy()
        return u + (factor * state.rw.value) * rng.standard_normal(self.dim)

    def record(self, state: WarmupState, x: np.ndarray, accept_prob: float, moved: bool,
               probe: bool = False) -> None:
        """Record one tuning iteration: the chain's position ``x`` (model coordinates) after
        the decision, in the window; a probe's acceptance in the noise ceiling."""
        state.iteration += 1
        if probe:
            state.noise.add(accept_prob)
        if state.window is not None:
            state.window.add(x, moved)
        for _, later in state.climb:
            later.add(x, moved)

    def window_ends(self, length: int, tune: int | None = None,
                    draw: int = 0) -> tuple[int, ...]:
        """The draws at which windows end: :func:`.window_ends` of the warm-up's ``length``,
        or with ``to_the_end`` :func:`.tuning_window_ends` (``tune`` tuning draws, None if
        unknown: doubling windows past ``draw``)."""
        if not self.to_the_end:
            return window_ends(length)
        return tuning_window_ends(length, tune, upto=draw)

    def update_draw_at(self, state: WarmupState, x: np.ndarray, draw: int, length: int,
                       accepts: list | None = None, tune: int | None = None,
                       logp: float | None = None, max_target: float = 1.0) -> DrawInfo:
        """At the start of tuning draw ``draw + 1`` (``draw`` done, ``length`` in the
        warm-up, ``tune`` in tuning if known): the scale from the last draw's acceptance
        probabilities ``accepts`` (probes excluded), and at a window's end a new map from
        the window.  ``logp``, the log density at ``x``, tells the first window where the
        climb from the initial point ended (without it the whole window is kept);
        ``max_target`` caps the acceptance target (a surrogate screen's move rate)."""
        if not self.adapt:
            return DrawInfo(False, not self.to_the_end and draw >= length)
        target = min(state.noise.target(state.rw.target), max_target)
        if accepts:
            state.rw.update(float(np.mean(accepts)), target=target)
        ends = self.window_ends(length, tune, draw)
        if state.window_index == 0 and logp is not None and draw <= ends[0]:
            self._follow_climb(state, draw, ends[0], logp)
        if draw not in ends:
            return DrawInfo(False, False)
        # a tuning phase's last window (tuning_window_ends) merges with the one before it,
        # which stays open; its map changes little, so the scale keeps its tuned value
        # (docs/tuning.md, measured on docs/benchmarks/suite.md)
        whole_tuning = self.to_the_end and tune is not None
        merged = (whole_tuning and len(ends) > 1
                  and ends[-1] == final_window_end(tune) > window_ends(length)[-1])
        self._close_window(state, x, keep_window=merged and draw == ends[-2],
                           keep_scale=merged and draw == ends[-1])
        if whole_tuning and draw == ends[-1]:
            state.window = None  # the last window: from here on only the scale adapts
        return DrawInfo(True, not self.to_the_end and draw >= length)

    @staticmethod
    def _follow_climb(state: WarmupState, draw: int, first_end: int, logp: float) -> None:
        """Within the first window: record the log density after ``draw`` and open the
        moments of a later start at the fractions :data:`.CLIMB_STARTS` of the window."""
        if draw > 0:
            state.logps.append(float(logp))
        if draw < first_end and any(draw == int(round(f * first_end)) for f in CLIMB_STARTS[1:]):
            state.climb.append((draw, WindowMoments(state.precond.mean.size)))

    def _drop_climb(self, state: WarmupState) -> None:
        """At the first window's end: keep its moments from the latest start at or before
        the end of the climb (:func:`.climb_end`; docs/tuning.md, "Windows")."""
        if state.logps:
            cut = climb_end(state.logps)
            for start, later in state.climb:
                if start <= cut and later.count > 1:
                    state.window = later
        state.climb, state.logps = [], []

    def _close_window(self, state: WarmupState, x: np.ndarray, keep_window: bool = False,
                      keep_scale: bool = False) -> None:
        """The window's covariance, shrunk toward the prior, becomes the map; the scale
        restarts at ``2.38 / sqrt(d)`` within ``[0.02, 20]`` times it (``keep_window``: the
        window stays open for the next one to merge with; ``keep_scale``: the scale
        restarts from its tuned value)."""
        d = self.dim
        s0 = self.scale0
        if state.window_index == 0:
            self._drop_climb(state)
        ratio = state.rw.value / s0
        if state.laplace and state.window_index == 0 and not 0.2 < ratio < 5.0:
            state.laplace, state.prior_cov = False, None  # the Laplace scale disagrees
        if state.prior_cov is None or not state.laplace:
            state.prior_cov, state.prior_n = ratio**2 * state.precond.cov, 2.0 * d
        n_eff = state.window.n_moves / 2.0
        cov = regularised_covariance(state.window.cov, n_eff, state.prior_cov, state.prior_n)
        mean = state.window.mean if state.window.count else x
        state.precond = AffineMap.from_cov(mean, cov)
        if not keep_window:
            state.window = WindowMoments(d)
        state.window_index += 1
        state.rw = RobbinsMonro(state.rw.value if keep_scale else s0, state.rw.target,
                                state.rw.exponent, lower=0.02 * s0, upper=20 * s0)

    def final(self, state: WarmupState, rng: np.random.Generator | None = None) -> AffineMap:
        """End the warm-up: nothing more is learned (the open window is dropped); return
        the map the chain keeps (the scale stays in ``state.rw``)."""
        state.window = None
        return state.precond

    # ------------------------------------------------------------------ the kernel protocol
    def step(self, state: WarmupState, chain: ChainState, mh: Metropolis,
             tune: bool) -> Iteration:
        """One iteration: a probe while tuning a noisy chain (:meth:`probe`), else the walk,
        with the scale mixture or the delayed-rejection second stage if configured."""
        probe = tune and self.probe(state.iteration, state.noisy)
        if probe or (self.delayed_rejection is None and self.scale_mixture is None):
            return mh.step(chain, Proposal(self.propose(state, chain.position, mh.rng, probe),
                                           0.0), not probe, probe)
        if self.scale_mixture is not None:
            prob, factor = self.scale_mixture
            small = mh.rng.random() < prob
            position = self.propose(state, chain.position, mh.rng,
                                    factor=factor if small else 1.0)
            return mh.step(chain, Proposal(position, 0.0), not small)  # adapts at full size
        return self._delayed_rejection(state, chain, mh)

    def _delayed_rejection(self, state: WarmupState, chain: ChainState,
                           mh: Metropolis) -> Iteration:
        """Two-stage delayed rejection from ``chain``; the first stage's acceptance
        probability is returned (the scale adapts on it)."""
        u, scale = chain.position, state.rw.value
        first, x1 = mh.evaluate(self.propose(state, u, mh.rng))
        new, accept_prob, moved = mh.decide(chain, first, x1, first.logp - chain.logp)
        if moved or accept_prob >= 1.0:
            return Iteration(new, accept_prob, moved, 1)
        second, x2 = mh.evaluate(self.propose(state, u, mh.rng, factor=self.delayed_rejection))
        log_r = second_stage_log_ratio(
            chain.logp, first.logp, second.logp,
            gaussian_log_density(second.position, first.position, scale),
            gaussian_log_density(u, first.position, scale))
        new, _, moved = mh.decide(chain, second, x2, log_r)
        state.dr_counts[0] += 1
        state.dr_counts[1] += moved
        return Iteration(new, accept_prob, moved, 2)

    def update(self, state: WarmupState, it: Iteration, x: np.ndarray,
               rng: np.random.Generator | None = None) -> None:
        """After a tuning iteration: :meth:`record` it."""
        self.record(state, x, it.accept_prob, it.accepted, it.probe)

    def update_draw(self, state: WarmupState, ctx: DrawContext) -> DrawInfo:
        """At a tuning draw boundary: :meth:`update_draw_at` with the context's values."""
        return self.update_draw_at(state, ctx.x, ctx.draw, ctx.warmup_length, ctx.accepts,
                                   ctx.tune, ctx.logp, ctx.max_target)

    def n_steps(self, state: WarmupState | None, dim: int, tune: bool) -> int:
        """Iterations per draw: ``max(tuning_min_steps, d)`` while tuning, else
        ``max(5, d)``."""
        return max(self.tuning_min_steps, dim) if tune else default_n_steps(dim)

    def stats(self, state: WarmupState, tune: bool) -> dict:
        """The scale and the draw's delayed-rejection second stages (proposed, accepted)."""
        (proposed, accepted), state.dr_counts = state.dr_counts, [0, 0]
        return {"scaling": state.rw.value, "dr_proposals": proposed, "dr_accepted": accepted}
