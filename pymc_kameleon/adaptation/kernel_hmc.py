"""Kernel HMC's kernel: trajectories on a score surrogate, and the adaptation that fits it.

:class:`KernelHMCAdaptation` takes over from the warm-up (:mod:`.warmup_kernel`) in
whitened coordinates.  It proposes a Hamiltonian trajectory on the gradient of a surrogate
log density fitted to the chain history by score matching (before the first fit: one
zero-gradient step, a random walk), and while PyMC tunes it fits the surrogate,
cross-validates its hyperparameters, puts each refit on trial against the surrogate in use,
reviews the one in use against the random walk it replaced, and adapts the step sizes.

The interface is the warm-up's (BlackJAX's ``adaptation/`` as the model): a frozen
configuration whose functions act on one chain's :class:`KernelHMCAdaptState` --
:meth:`~KernelHMCAdaptation.init`, :meth:`~KernelHMCAdaptation.propose` (state in,
:class:`HMCProposal` out), :meth:`~KernelHMCAdaptation.update` after each
Metropolis-Hastings decision, :meth:`~KernelHMCAdaptation.update_draw` at each tuning draw
boundary and :meth:`~KernelHMCAdaptation.final` when tuning ends.  It knows nothing of
PyMC: the random generator, the noise ceiling and the tuning iterations left are
arguments.  The rules and their reasons are on ``docs/algorithms/kernel_hmc.md``.

This module is the one import path of kernel HMC's kernel: one chain's state is in
:mod:`.kernel_hmc_state`, the adaptation rules (fits, cross-validation, trials and
reviews; the base class :class:`~.kernel_hmc_rules.KernelHMCRules`) in :mod:`.kernel_hmc_rules`.

References
----------
- Strathmann, H., Sejdinovic, D., Livingstone, S., Szabo, Z., Gretton, A. (2015).
  Gradient-free Hamiltonian Monte Carlo with efficient kernel exponential families. NIPS.
- Strathmann, H. (2018). Kernel methods for Monte Carlo. PhD thesis, UCL, Ch. 4.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from ..math.hmc import default_max_jump, hamiltonian_accept_prob, jumps_too_far, kinetic_energy
from ..math.kernels import check_bandwidth
from ..math.online import Reservoir
from ..validation import check_fraction, check_integral
from .kernel import (
    ChainState,
    DrawContext,
    DrawInfo,
    Iteration,
    Metropolis,
    Proposal,
    default_n_steps,
)
from .kernel_hmc_rules import _MIN_CHECKED, KernelHMCRules
from .kernel_hmc_state import HMCProposal, KernelHMCAdaptState, Surrogate, Tally, Trial
from .robbins_monro import check_robbins_monro
from .schedule import GeometricSchedule
from .step_size import AnchoredStepSize
from .warmup import NoiseCeiling

__all__ = ["HMCProposal", "KernelHMCAdaptState", "KernelHMCAdaptation", "Surrogate", "Tally",
           "Trial"]

#: Codes of the ``surrogate`` stat (0: the random walk).
SURROGATE_CODES = {"lite": 1, "finite": 2}
_RANDOM_WALK_ACCEPT = 0.234  # target of the step size before the first surrogate fit
_FINITE_BATCH = 10  # new points per rank-(batch * d) Cholesky update of the finite surrogate
# step-size band around the noise-free anchor of the random-walk phase (no surrogate, fixed
# anchor at the optimal random-walk scale of the whitened posterior, 2.38 / sqrt(d), and the
# band of the warm-up's walk); the trajectories' band is in .kernel_hmc_rules
_RANDOM_WALK_BAND = (0.02, 20.0)
# The centre of the bandwidth search is at least this fraction of sqrt(2 d), the median
# pairwise distance of a standard Gaussian sample (the whitened posterior): a history that
# narrow (a pseudo-marginal chain stuck at a lucky estimate) does not describe the posterior.
_MIN_BANDWIDTH = 0.25
# Per-coordinate lengths (finite surrogate) by default up to this dimension: every
# cross-validation searches them again (about 4 d configurations, a cost growing like d^2),
# which above it cost wall time without a gain in ESS (docs/algorithms/kernel_hmc.md,
# "Per-coordinate lengths").
_ARD_MAX_DIM = 16


@dataclass(frozen=True)
class KernelHMCAdaptation(KernelHMCRules):
    """Kernel HMC's configuration and its functions on a :class:`KernelHMCAdaptState`.

    The parameters are those of :class:`~pymc_kameleon.KernelHMCStep` (validated here),
    which builds one and delegates its proposal and adaptation to it.  A subclass passed
    as ``KernelHMCStep(adaptation_class=...)`` changes a rule, e.g. a deliberately broken
    variant in a test; the adaptation rules are inherited from
    :class:`~pymc_kameleon.adaptation.kernel_hmc_rules.KernelHMCRules`.

    Parameters
    ----------
    surrogate : {"finite", "lite"}
        Random Fourier features learned online, or kernel functions on the history.
    n_history, n_features, n_cv : int
        Reservoir size, random features, points of a cross-validation.
    n_leapfrog : tuple of int
        Inclusive range of the leapfrog steps.
    step_size, step_size_jitter, target_accept : float
        Initial step size of the random-walk phase, relative half-width of its uniform
        jitter, acceptance target.
    bandwidth, lam : float, optional
        Fixed kernel bandwidth and regularisation (None: cross-validated).
    adapt_step_size : bool
        Adapt the step sizes while tuning.
    adapt_exponent : float
        Robbins-Monro gain exponent.
    schedule : GeometricSchedule, optional
        Tuning iterations of the refits.
    ard : bool, optional
        Per-coordinate lengths (None: :meth:`uses_ard`'s default).
    random_walk_fraction : float
        Share of random-walk iterations after tuning.
    max_jump : float, optional
        Bound of a trajectory's length in whitened units (None: :meth:`jump_bound`).
    """

    surrogate: Literal["lite", "finite"] = "finite"
    n_history: int = 1000
    n_features: int = 200
    n_leapfrog: tuple[int, int] = (10, 50)
    step_size: float = 0.1
    step_size_jitter: float = 0.5
    target_accept: float = 0.65
    bandwidth: float | None = None
    lam: float | None = None
    n_cv: int = 300
    adapt_step_size: bool = True
    adapt_exponent: float = 0.6
    schedule: GeometricSchedule | None = None
    ard: bool | None = None
    random_walk_fraction: float = 0.1
    max_jump: float | None = None

    def __post_init__(self) -> None:
        if self.surrogate not in SURROGATE_CODES:
            raise ValueError(f"unknown surrogate {self.surrogate!r}; use 'lite' or 'finite'")
        if self.ard and self.surrogate != "finite":
            raise ValueError("ard=True needs surrogate='finite' (the lite surrogate's kernel "
                             "is isotropic)")
        if self.ard and self.bandwidth is not None:
            raise ValueError("ard=True chooses per-coordinate bandwidths; a fixed bandwidth "
                             "is isotropic (give one or the other)")
        lo, hi = (int(v) for v in self.n_leapfrog)
        if not 1 <= lo <= hi:
            raise ValueError(f"n_leapfrog must be a range (low, high) with 1 <= low <= high, "
                             f"got {self.n_leapfrog!r}")
        counts = {name: check_integral(name, getattr(self, name), minimum=10)
                  for name in ("n_history", "n_features", "n_cv")}
        check_robbins_monro(initial=self.step_size, target=self.target_accept,
                            exponent=self.adapt_exponent,
                            names=("step_size", "target_accept", "adapt_exponent"))
        lam = self.lam
        if lam is not None and not (np.isfinite(lam) and lam >= 0):
            raise ValueError(f"lam must be a non-negative number, got {lam!r}")
        if not 0 <= self.step_size_jitter < 1:
            raise ValueError(f"step_size_jitter must lie in [0, 1), "
                             f"got {self.step_size_jitter!r}")
        check_fraction("random_walk_fraction", self.random_walk_fraction)
        if self.max_jump is not None and not self.max_jump > 0:
            raise ValueError(f"max_jump must be a positive number (inf: no bound), "
                             f"got {self.max_jump!r}")
        # frozen: each value is set once here, validated and of its documented type
        def set_(name: str, value) -> None:
            object.__setattr__(self, name, value)

        for name, value in counts.items():
            set_(name, int(value))
        for name in ("step_size", "step_size_jitter", "target_accept", "adapt_exponent",
                     "random_walk_fraction"):
            set_(name, float(getattr(self, name)))
        set_("n_leapfrog", (lo, hi))
        set_("bandwidth", check_bandwidth(self.bandwidth))
        set_("lam", None if lam is None else float(lam))
        set_("adapt_step_size", bool(self.adapt_step_size))
        set_("schedule", self.schedule or GeometricSchedule(first=200, ratio=1.5, max_gap=100))
        set_("ard", None if self.ard is None else bool(self.ard))
        set_("max_jump", None if self.max_jump is None else float(self.max_jump))

    # ------------------------------------------------------------------ configuration
    def uses_ard(self, dim: int) -> bool:
        """Whether cross-validation also chooses per-coordinate kernel lengths: ``ard`` if
        given, else for the finite surrogate without a fixed bandwidth in 2-16 dimensions
        (in 1-d a length is the bandwidth)."""
        if self.ard is not None:
            return self.ard
        return self.surrogate == "finite" and self.bandwidth is None and 2 <= dim <= _ARD_MAX_DIM

    def jump_bound(self, dim: int) -> float:
        """``max_jump``, by default ``10 (1 + sqrt(d))`` whitened units."""
        return default_max_jump(dim) if self.max_jump is None else self.max_jump

    def min_bandwidth(self, dim: int) -> float:
        """Floor of the centre of the bandwidth search, ``0.25 sqrt(2 d)``: a narrower
        history (a noisy chain stuck at a lucky estimate) does not describe the posterior."""
        return _MIN_BANDWIDTH * float(np.sqrt(2.0 * dim))

    def step_target(self, k: Surrogate, noise: NoiseCeiling) -> float:
        """Acceptance target of the step size of ``k`` against the real (possibly noisy)
        target: the random walk's capped at half the noise ceiling, a trajectory's scaled
        by it (:class:`~pymc_kameleon.adaptation.warmup.NoiseCeiling`)."""
        if k.estimator is None:
            return noise.target(k.scaler.target)
        return noise.scaled(k.scaler.target)

    def stats(self, state: KernelHMCAdaptState, tune: bool) -> dict[str, float | int]:
        """The draw's stats: the surrogate in use (constant within a draw), the last
        proposal's leapfrog steps and the draw's diverged trajectories."""
        n, state.n_diverged, k = state.n_diverged, 0, state.current
        return {
            "n_leapfrog": state.n_leapfrog,
            "n_diverged": n,
            "step_size": k.scaler.value,
            "bandwidth": k.bandwidth,
            "kernel_sigma": 2.0 * k.bandwidth**2,
            "lambda": k.lam,
            "surrogate": 0 if k.estimator is None else SURROGATE_CODES[self.surrogate],
        }

    @staticmethod
    def n_steps(state: KernelHMCAdaptState, dim: int, tune: bool) -> int:
        """Iterations per draw: ``ceil(sqrt(d))`` (a trajectory moves further per
        evaluation, and a trial's step size needs many updates), after tuning without a
        surrogate the random walk's ``max(5, d)`` (docs/algorithms/kernel_hmc.md,
        "Iterations per draw")."""
        if not tune and state.current.estimator is None:
            return default_n_steps(dim)
        return max(1, int(np.ceil(np.sqrt(dim))))

    # ------------------------------------------------------------------ kernel
    def init(self, dim: int, walk_scale: float,
             kernel_draws: int | None = None) -> KernelHMCAdaptState:
        """A fresh kernel phase in ``dim`` dimensions: the random walk with step size
        ``step_size``, its band anchored at ``walk_scale`` (the warm-up's optimal scale),
        an empty history."""
        walk = AnchoredStepSize(self.step_size, _RANDOM_WALK_ACCEPT, self.adapt_exponent,
                                *_RANDOM_WALK_BAND, anchor0=walk_scale)
        return KernelHMCAdaptState(current=Surrogate(walk),
                                   reservoir=Reservoir(self.n_history, dim),
                                   next_fit=self.schedule.first, next_cv=self.schedule.first)

    def propose(self, state: KernelHMCAdaptState, q0: np.ndarray, rng: np.random.Generator,
                tune: bool) -> HMCProposal:
        """A proposal from whitened ``q0``.

        While tuning, a refit on trial proposes every other iteration; after tuning a
        fraction ``random_walk_fraction`` of the iterations are the tuned random walk (when
        a surrogate replaced it), the rest the surrogate's trajectories.  Each is an exact
        kernel, so their mixture is.  A trajectory ending non-finite or farther than
        :meth:`jump_bound` is rejected unevaluated (symmetric in ``q0`` and ``q*``).
        """
        if (not tune and state.current.estimator is not None and state.fallback is not None
                and self.random_walk_fraction > 0 and rng.random() < self.random_walk_fraction):
            step = state.fallback.scaler.value * rng.standard_normal(state.dim)
            return HMCProposal(q0 + step, 0.0, 1, False)
        state.by_candidate = bool(tune and state.trial is not None and not state.by_candidate)
        k, _ = state.proposer()
        lo, hi = self.n_leapfrog
        n_steps = int(rng.integers(lo, hi + 1))
        jitter = self.step_size_jitter
        u = float(rng.uniform(1.0 - jitter, 1.0 + jitter))
        eps = k.scaler.value * u
        p0 = rng.standard_normal(state.dim)
        if k.estimator is None:  # no surrogate yet: one zero-gradient step, a random walk
            n_steps = 1
            q1, p1 = q0 + eps * p0, p0
        else:
            with np.errstate(all="ignore"):
                q1, p1 = k.estimator.leapfrog(q0, p0, eps, n_steps)
        log_correction = kinetic_energy(p0) - kinetic_energy(p1)
        if tune:
            state.surrogate_accept = self._anchor_accept(k, q0, p0, q1, p1, u, n_steps)
        diverged = (not (np.all(np.isfinite(q1)) and np.isfinite(log_correction))
                    or jumps_too_far(q0, q1, self.jump_bound(state.dim)))
        if diverged:
            q1, log_correction = q0, -np.inf
        state.last_jump = float(np.sum((q1 - q0) ** 2))
        return HMCProposal(q1, log_correction, n_steps, bool(diverged))

    @staticmethod
    def _anchor_accept(k: Surrogate, q0, p0, q1, p1, u: float, n_steps: int) -> float | None:
        """Acceptance on the surrogate Hamiltonian of a trajectory with the anchor's step size
        (same start, momentum, jitter and ``L``): the noise-free statistic of the step-size
        rule.  Reuses the proposed trajectory when the step size equals the anchor; otherwise
        costs ``L + 1`` surrogate gradients and no target evaluation."""
        if k.estimator is None:
            return None
        if abs(k.scaler.log_value - k.scaler.log_anchor) > 1e-12:
            with np.errstate(all="ignore"):
                q1, p1 = k.estimator.leapfrog(q0, p0, k.scaler.anchor * u, n_steps)
        return hamiltonian_accept_prob(k.estimator.log_density, q0, p0,
                                       np.asarray(q1, dtype=float), p1)

    def step(self, state: KernelHMCAdaptState, chain: ChainState, mh: Metropolis,
             tune: bool) -> Iteration:
        """One iteration with :meth:`propose` (a diverged trajectory is not evaluated)."""
        p = self.propose(state, np.asarray(chain.position, dtype=float), mh.rng, tune)
        state.n_diverged += p.diverged
        state.n_leapfrog = p.n_leapfrog
        return mh.step(chain, Proposal(p.position, p.log_correction))

    def update(self, state: KernelHMCAdaptState, it: Iteration, x: np.ndarray,
               rng: np.random.Generator) -> None:
        """Record one tuning iteration: the proposer's jump and acceptance, the chain's
        whitened position after the decision in the history."""
        accept_prob, x = it.accept_prob, it.state.position
        state.t += 1
        _, tally = state.proposer()
        tally.n += 1
        tally.jump += float(np.nan_to_num(accept_prob)) * state.last_jump
        tally.accepts.append(accept_prob)
        if state.surrogate_accept is not None:
            tally.anchor_accepts.append(state.surrogate_accept)
        x = np.asarray(x, dtype=float)
        state.reservoir.add(x, rng)
        if self.surrogate == "finite" and (state.current.estimator is not None
                                           or state.trial is not None):
            state.pending.append(x)
            if len(state.pending) >= _FINITE_BATCH:
                self._flush_pending(state)

    def update_draw(self, state: KernelHMCAdaptState, ctx: DrawContext) -> DrawInfo:
        """At a tuning draw boundary: update the step sizes on the last draw's acceptances
        (targets lowered by the noise ceiling), settle a trial or review the surrogate in
        use, and refit when the schedule says so -- unless the tuning iterations left are
        too few to check the refit."""
        rng, remaining = ctx.rng, ctx.iterations_left
        self._update_step_sizes(state, ctx.noise)
        self._judge(state)
        # a refit waits until the one on trial is settled; the candidate proposes every
        # other iteration, warm-up and checked iterations
        too_late = remaining is not None and remaining < 4 * _MIN_CHECKED
        if state.t >= state.next_fit and state.trial is None and not too_late:
            tune_hyper = state.t >= state.next_cv
            # finite learns online in between (but not after going back to the random walk)
            if tune_hyper or self.surrogate == "lite" or state.current.estimator is None:
                self.fit(state, tune_hyper, rng)
            if tune_hyper:
                state.next_cv = 2 * state.t
            state.next_fit = self.schedule.next_after(state.t)
        return DrawInfo(False, False)

    def final(self, state: KernelHMCAdaptState,
              rng: np.random.Generator | None = None) -> Surrogate:
        """End tuning: a refit still on trial is dropped (it was not checked against the
        target) and so are points not yet learned; return the surrogate kept, the one the
        last tuning draw reported."""
        state.trial = None
        state.pending = []
        return state.current
