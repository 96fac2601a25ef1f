"""KernelHMCStep: gradient-free kernel Hamiltonian Monte Carlo (KMC lite and finite)."""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from threadpoolctl import threadpool_limits

from ..adaptation import AnchoredStepSize, GeometricSchedule, check_robbins_monro
from ..math.ard import search_lengths
from ..math.hmc import default_max_jump, hamiltonian_accept_prob, jumps_too_far, kinetic_energy
from ..math.kernels import check_bandwidth, distinct_rows, median_heuristic
from ..math.online import Reservoir
from ..math.rff import RandomFourierFeatures
from ..math.score_matching import FiniteScoreEstimator, LiteScoreEstimator, cross_validate
from ..validation import check_integral
from .base import BaseKernelStep, ChainState, Proposal

__all__ = ["KernelHMCStep", "Surrogate"]

_SURROGATE_CODES = {"lite": 1, "finite": 2}
# bandwidth grids, in multiples of the median heuristic
_BANDWIDTH_FACTORS = {
    "lite": 2.0 ** np.arange(0.0, 2.25, 0.5),  # lite: narrow bumps confine the chain
    "finite": 2.0 ** np.arange(-1.0, 2.25, 0.5),
}
_LAMBDA_EXPONENTS = np.arange(-5.0, 2.0)  # 10^k times the natural scale of lambda
_RANDOM_WALK_ACCEPT = 0.234  # target of the step size before the first surrogate fit
_FINITE_BATCH = 10  # new points per rank-(batch * d) Cholesky update of the finite surrogate
_MIN_DISTINCT = 20  # distinct history points needed before fitting (5 folds of >= 4)
# step-size band around the noise-free anchor: random-walk phase (no surrogate, fixed anchor
# at the optimal random-walk scale of the whitened posterior, 2.38 / sqrt(d), and the band of
# the warm-up's walk) and trajectories (anchor adapted on the surrogate's energy error)
_RANDOM_WALK_BAND = (0.02, 20.0)
# The centre of the bandwidth search is at least this fraction of sqrt(2 d), the median
# pairwise distance of a standard Gaussian sample (the whitened posterior): a history that
# narrow (a pseudo-marginal chain stuck at a lucky estimate) does not describe the posterior.
_MIN_BANDWIDTH = 0.25
_SURROGATE_BAND = (0.1, 2.0)
_MIN_CHECKED = 50  # tuning iterations a refit's candidate runs before it may take over
_REVIEW_RATIO = 0.5  # a surrogate in use below this fraction of the walk's ESJD is dropped
_CV_NEIGHBOURS = 2  # later cross-validations search +-2 grid bandwidths around the last best
# Per-coordinate lengths (finite surrogate) by default up to this dimension: every
# cross-validation searches them again (about 4 d configurations, a cost growing like d^2),
# which above it cost wall time without a gain in ESS (docs/algorithms/kernel_hmc.md,
# "Per-coordinate lengths").
_ARD_MAX_DIM = 16


@dataclass(frozen=True, eq=False)  # compared by identity: it holds arrays and estimators
class Surrogate:
    """A proposal of the kernel phase: a fitted score surrogate and its step size, or the
    random walk (``estimator`` None) and its own.  The same value serves as the surrogate in
    use, the refit on trial and the random walk kept as the fallback; the step size and a
    finite surrogate keep adapting in place while tuning."""

    scaler: AnchoredStepSize
    estimator: LiteScoreEstimator | FiniteScoreEstimator | None = None
    bandwidth: float = float("nan")
    lam: float = float("nan")
    lengths: np.ndarray | None = None  # relative per-coordinate lengths (finite, ARD)


@dataclass
class Tally:
    """The tuning iterations one surrogate proposed: its ESJD since the last restart and the
    acceptances of the current draw (for its step size)."""

    n: int = 0
    jump: float = 0.0  # sum of accept_prob * |q* - q|^2
    accepts: list = field(default_factory=list)  # acceptance probabilities of a draw
    anchor_accepts: list = field(default_factory=list)  # surrogate acceptances of a draw

    @property
    def esjd(self) -> float:
        """Expected squared jump distance per iteration (Rao-Blackwellised)."""
        return self.jump / self.n

    def restart(self) -> None:
        """Count the ESJD from here on (a trial or review starts)."""
        self.n, self.jump = 0, 0.0


@dataclass
class Trial:
    """A refit on trial against the surrogate in use, until checked against the target."""

    surrogate: Surrogate
    tally: Tally = field(default_factory=Tally)
    warmed: bool = False  # whether its step size's warm-up (first _MIN_CHECKED) is over


@dataclass
class KernelHMCAdaptState:
    current: Surrogate  # in use: reported, and frozen by stop_tuning
    reservoir: Reservoir
    tally: Tally = field(default_factory=Tally)  # of the surrogate in use, since the last
    # refit, take-over or review
    trial: Trial | None = None
    fallback: Surrogate | None = None  # the random walk the surrogate in use replaced,
    fallback_esjd: float = float("nan")  # and its ESJD then
    t: int = 0
    next_fit: int = 1
    next_cv: int = 1
    cv_lengths: np.ndarray | None = None  # of the last cross-validation (its next start)
    cv_index: int | None = None  # grid index of the last cross-validated bandwidth
    base_features: RandomFourierFeatures | None = None
    pending: list = field(default_factory=list)  # finite: points not yet in the surrogate
    surrogate_accept: float | None = None  # last proposal's acceptance on the surrogate
    last_jump: float = 0.0  # |q* - q|^2 of the last proposal
    by_candidate: bool = False  # whether the trial's surrogate made the last proposal

    def proposer(self) -> tuple[Surrogate, Tally]:
        """The surrogate that makes (made) the current proposal and its tally."""
        if self.by_candidate:
            return self.trial.surrogate, self.trial.tally
        return self.current, self.tally


class KernelHMCStep(BaseKernelStep):
    r"""Kernel Hamiltonian Monte Carlo: HMC whose gradient comes from a kernel surrogate.

    A surrogate log density ``f`` is fitted to the chain history by score matching, and
    Hamiltonian trajectories follow ``grad f`` instead of the (unavailable) gradient of the
    target.  Only the accept step touches the model, once per iteration, with the true log
    density and the kinetic energy:

    .. math:: A = \min\{1, \exp(\log\pi(q^*) - \log\pi(q) - |p^*|^2/2 + |p|^2/2)\}.

    The leapfrog map is reversible and volume preserving for any gradient field of ``q``,
    so the chain is exact whatever the surrogate; its quality only affects acceptance.  The
    current log density is stored, so likelihood estimators (pseudo-marginal MCMC) keep the
    chain exact.

    Two surrogates: ``"lite"``, kernel functions centred on a subsample of the history,
    refitted at scheduled iterations; ``"finite"``, random Fourier features learned online
    from every tuning point.  While PyMC tunes, the step starts as a random walk, fits the
    surrogate, cross-validates its hyperparameters, puts each refit on trial against the
    sampler in use and adapts the step size; ``stop_tuning()`` freezes all of it.  After
    tuning a fraction ``random_walk_fraction`` of the iterations stay random-walk steps.
    The schedule, the trials, the noise rules and the costs are on the algorithm's page,
    ``docs/algorithms/kernel_hmc.md``.

    Parameters
    ----------
    vars : list of PyMC variables, optional
        Continuous variables to sample jointly (default: all continuous ones).
    surrogate : {"finite", "lite"}, default "finite"
        Finite learns from every tuning point, online; lite is the safer choice when the
        start is far from the posterior mass (give it a longer tuning).
    n_history : int, default 1000
        Size of the history reservoir (the lite basis and the cross-validation data).
    n_features : int, default 200
        Random Fourier features of the finite surrogate.
    n_leapfrog : tuple of int, default (10, 50)
        Inclusive range of the number of leapfrog steps ``L``.
    step_size : float, default 0.1
        Initial step size of the random-walk phase (adapted while tuning; re-initialised on
        the surrogate at each fit).
    step_size_jitter : float, default 0.5
        Relative half-width of the uniform step-size randomisation, in ``[0, 1)``.
    target_accept : float, default 0.65
        Target acceptance probability of the step-size recursion.
    bandwidth, lam : float, optional
        Fix the surrogate's kernel bandwidth ``s`` (``k = exp(-|x-y|^2 / (2 s^2))``; the
        thesis' ``sigma`` is ``2 s^2``) and/or its regularisation; the other is
        cross-validated.
    n_cv : int, default 300
        Maximum number of points used for cross-validation.
    adapt_step_size : bool, default True
        Adapt the step size while tuning.
    adapt_exponent : float, default 0.6
        Robbins-Monro gain exponent.
    schedule : GeometricSchedule, optional
        Tuning iterations at which the lite surrogate is refitted (and the hyperparameters
        may be cross-validated).
    ard : bool, optional
        Per-coordinate kernel lengths chosen by cross-validation (finite surrogate only).
        Default: on for the finite surrogate when ``2 <= d <= 16`` and no ``bandwidth`` is
        given.  The ``bandwidth`` stat is then the overall scale.
    random_walk_fraction : float, default 0.1
        Probability, per iteration after tuning, of a random-walk iteration (when a
        surrogate is in use).  0 switches the mixture off.
    max_jump : float, optional
        A trajectory that ends farther than this from its start, in posterior sds (the
        warm-up's whitened coordinates), is rejected without evaluating the log density
        (stat ``n_diverged``); default ``10 (1 + sqrt(d))``, ``inf`` evaluates every one.
    n_steps, warmup_draws, laplace, on_error
        See :class:`~pymc_kameleon.steps.base.BaseKernelStep`.  A given ``n_steps`` is used
        as is; the default per phase is on the algorithm's page.
    model, rng, initial_point, compile_kwargs, blocked
        As for every PyMC step method.

    References
    ----------
    .. [1] Strathmann, H., Sejdinovic, D., Livingstone, S., Szabo, Z., Gretton, A. (2015).
       Gradient-free Hamiltonian Monte Carlo with efficient kernel exponential families.
       NIPS.
    .. [2] Strathmann, H. (2018). Kernel methods for Monte Carlo. PhD thesis, UCL, Ch. 4.

    Examples
    --------
    >>> import pymc as pm
    >>> from pymc_kameleon import KernelHMCStep
    >>> with pm.Model():
    ...     x = pm.Normal("x", 0.0, 1.0, shape=2)
    ...     step = KernelHMCStep(surrogate="lite", n_leapfrog=(5, 10), warmup_draws=100)
    ...     idata = pm.sample(draws=200, tune=600, chains=1, step=step, random_seed=1,
    ...                       progressbar=False, compute_convergence_checks=False)
    >>> int(idata.sample_stats["surrogate"][0, -1])  # 1: the lite surrogate is in use
    1
    """

    name = "kernel_hmc"
    stats_dtypes_shapes = {
        **BaseKernelStep.stats_dtypes_shapes,
        "step_size": (np.float64, []),
        "n_leapfrog": (np.int64, []),
        "bandwidth": (np.float64, []),
        "kernel_sigma": (np.float64, []),
        "lambda": (np.float64, []),
        "surrogate": (np.int64, []),
        "n_diverged": (np.int64, []),
    }
    _progress_columns = (("accept", "Accept"), ("step_size", "Step size"))

    def __init__(
        self,
        vars=None,
        *,
        surrogate: Literal["lite", "finite"] = "finite",
        n_history: int = 1000,
        n_features: int = 200,
        n_leapfrog: tuple[int, int] = (10, 50),
        step_size: float = 0.1,
        step_size_jitter: float = 0.5,
        target_accept: float = 0.65,
        bandwidth: float | None = None,
        lam: float | None = None,
        n_cv: int = 300,
        adapt_step_size: bool = True,
        adapt_exponent: float = 0.6,
        schedule: GeometricSchedule | None = None,
        ard: bool | None = None,
        random_walk_fraction: float = 0.1,
        max_jump: float | None = None,
        **kwargs,
    ):
        if surrogate not in _SURROGATE_CODES:
            raise ValueError(f"unknown surrogate {surrogate!r}; use 'lite' or 'finite'")
        if ard and surrogate != "finite":
            raise ValueError("ard=True needs surrogate='finite' (the lite surrogate's kernel "
                             "is isotropic)")
        if ard and bandwidth is not None:
            raise ValueError("ard=True chooses per-coordinate bandwidths; a fixed bandwidth "
                             "is isotropic (give one or the other)")
        lo, hi = (int(v) for v in n_leapfrog)
        if not 1 <= lo <= hi:
            raise ValueError(f"n_leapfrog must be a range (low, high) with 1 <= low <= high, "
                             f"got {n_leapfrog!r}")
        n_history, n_features, n_cv = (
            check_integral(name, value, minimum=10)
            for name, value in (("n_history", n_history), ("n_features", n_features),
                                ("n_cv", n_cv)))
        check_robbins_monro(initial=step_size, target=target_accept, exponent=adapt_exponent,
                            names=("step_size", "target_accept", "adapt_exponent"))
        self.fixed_bandwidth = check_bandwidth(bandwidth)
        if lam is not None and not (np.isfinite(lam) and lam >= 0):
            raise ValueError(f"lam must be a non-negative number, got {lam!r}")
        if not 0 <= step_size_jitter < 1:
            raise ValueError(f"step_size_jitter must lie in [0, 1), got {step_size_jitter!r}")
        if not 0 <= random_walk_fraction <= 1:
            raise ValueError(f"random_walk_fraction must lie in [0, 1], "
                             f"got {random_walk_fraction!r}")
        self.surrogate = surrogate
        self.n_history = int(n_history)
        self.n_features = int(n_features)
        self.n_leapfrog = (lo, hi)
        self.step_size = float(step_size)
        self.step_size_jitter = float(step_size_jitter)
        self.target_accept = float(target_accept)
        self.fixed_lam = None if lam is None else float(lam)
        self.n_cv = int(n_cv)
        self.adapt_step_size = bool(adapt_step_size)
        self.adapt_exponent = float(adapt_exponent)
        self.schedule = schedule or GeometricSchedule(first=200, ratio=1.5, max_gap=100)
        self.ard = None if ard is None else bool(ard)
        if max_jump is not None and not max_jump > 0:
            raise ValueError(f"max_jump must be a positive number (inf: no bound), "
                             f"got {max_jump!r}")
        self.random_walk_fraction = float(random_walk_fraction)
        self._n_diverged = 0  # trajectories of the current draw rejected unevaluated
        super().__init__(vars, **kwargs)
        self.max_jump = default_max_jump(self.dim) if max_jump is None else float(max_jump)

    @property
    def _ard(self) -> bool:
        """Whether cross-validation also chooses per-coordinate kernel lengths."""
        if self.ard is not None:
            return self.ard
        return (self.surrogate == "finite" and self.fixed_bandwidth is None
                and 2 <= self.dim <= _ARD_MAX_DIM)  # in 1-d a length is the bandwidth

    @property
    def current_surrogate(self) -> Surrogate:
        """The surrogate in use (``estimator`` None while the step is the random walk): the
        one reported in the stats, and frozen by ``stop_tuning()``."""
        return self._adapt.current

    @property
    def surrogate_on_trial(self) -> Surrogate | None:
        """A refit on trial against the surrogate in use while tuning, else None."""
        trial = self._adapt.trial
        return None if trial is None else trial.surrogate

    def _default_n_steps(self) -> int:
        # Iterations per draw (docs/algorithms/kernel_hmc.md, "Iterations per draw"):
        # max(2, d) in the warm-up, whose draws are discarded (the base's floor of 5 only
        # adds evaluations there); ceil(sqrt(d)) in the kernel phase of tuning, random walk
        # or not (a trajectory moves further per evaluation, and a trial's step size needs
        # many updates); after tuning ceil(sqrt(d)) with a surrogate, else the random
        # walk's count.  Constant after stop_tuning (surrogate frozen).
        if self._warm.phase == "warmup":
            return max(2, self.dim) if self.tune else super()._default_n_steps()
        if not self.tune and self._adapt.current.estimator is None:
            return super()._default_n_steps()
        return max(1, int(np.ceil(np.sqrt(self.dim))))

    def _initial_adapt_state(self) -> KernelHMCAdaptState:
        walk = AnchoredStepSize(self.step_size, _RANDOM_WALK_ACCEPT, self.adapt_exponent,
                                *_RANDOM_WALK_BAND, anchor0=self._walk.scale0)
        return KernelHMCAdaptState(  # random-walk phase: tuned like a random walk
            current=Surrogate(walk),
            reservoir=Reservoir(self.n_history, self.dim),
            next_fit=self.schedule.first,
            next_cv=self.schedule.first,
        )

    # ------------------------------------------------------------------ proposal
    def _propose(self, state: ChainState) -> tuple[Proposal, dict[str, Any]]:
        a = self._adapt
        if (not self.tune and a.current.estimator is not None and a.fallback is not None
                and self.random_walk_fraction > 0
                and self.rng.random() < self.random_walk_fraction):
            # after tuning, a fixed fraction of the iterations are the tuned random walk (a
            # mixture of two exact kernels): where the surrogate is wrong (the tails, which
            # the history never covered) every trajectory may be rejected, and only the
            # walk gets the chain out
            q0 = np.asarray(state.position, dtype=float)
            step = a.fallback.scaler.value * self.rng.standard_normal(self.dim)
            return Proposal(q0 + step, 0.0), {"n_leapfrog": 1}
        # while tuning, a refit on trial proposes every other iteration (a mixture of two
        # exact kernels); after tuning only the surrogate in use is left
        a.by_candidate = bool(self.tune and a.trial is not None and not a.by_candidate)
        k, _ = a.proposer()
        lo, hi = self.n_leapfrog
        n_steps = int(self.rng.integers(lo, hi + 1))
        jitter = self.step_size_jitter
        u = float(self.rng.uniform(1.0 - jitter, 1.0 + jitter))
        eps = k.scaler.value * u
        p0 = self.rng.standard_normal(self.dim)
        q0 = np.asarray(state.position, dtype=float)
        if k.estimator is None:  # no surrogate yet: one zero-gradient step, a random walk
            n_steps = 1
            q1, p1 = q0 + eps * p0, p0
        else:
            with np.errstate(all="ignore"):
                q1, p1 = k.estimator.leapfrog(q0, p0, eps, n_steps)
        log_correction = kinetic_energy(p0) - kinetic_energy(p1)
        if self.tune:
            a.surrogate_accept = self._anchor_accept(k, q0, p0, q1, p1, u, n_steps)
        # diverged (non-finite, or a surrogate extrapolating far outside its history): reject
        # unevaluated, exact since both rules are symmetric in q0 and q1 (math.hmc)
        if (not (np.all(np.isfinite(q1)) and np.isfinite(log_correction))
                or jumps_too_far(q0, q1, self.max_jump)):
            q1, log_correction = state.position, -np.inf
            self._n_diverged += 1
        a.last_jump = float(np.sum((q1 - q0) ** 2))
        return Proposal(q1, log_correction), {"n_leapfrog": n_steps}

    def _fill_stats(self, info: dict[str, Any]) -> dict[str, Any]:
        n, self._n_diverged = self._n_diverged, 0
        return super()._fill_stats({**info, "n_diverged": n})

    def _tuning_stats(self) -> dict[str, Any]:
        k = self._adapt.current
        return {
            "step_size": k.scaler.value,
            "bandwidth": k.bandwidth,
            "kernel_sigma": 2.0 * k.bandwidth**2,
            "lambda": k.lam,
            "surrogate": 0 if k.estimator is None else _SURROGATE_CODES[self.surrogate],
        }

    def _anchor_accept(self, k: Surrogate, q0, p0, q1, p1, u: float, n_steps: int) -> float | None:
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

    # ------------------------------------------------------------------ adaptation
    def _adapt_step(self, new_state: ChainState, accept_prob: float) -> None:
        a = self._adapt
        a.t += 1
        _, tally = a.proposer()
        tally.n += 1
        tally.jump += float(np.nan_to_num(accept_prob)) * a.last_jump
        tally.accepts.append(accept_prob)
        if a.surrogate_accept is not None:
            tally.anchor_accepts.append(a.surrogate_accept)
        x = np.asarray(new_state.position, dtype=float)
        a.reservoir.add(x, self.rng)
        if self.surrogate == "finite" and (a.current.estimator is not None
                                           or a.trial is not None):
            a.pending.append(x)
            if len(a.pending) >= _FINITE_BATCH:
                self._flush_pending()

    def _begin_tuning_draw(self, mean_accept: float) -> None:
        a = self._adapt
        self._update_step_sizes()
        self._judge()
        # a refit waits until the one on trial is settled
        if a.t >= a.next_fit and a.trial is None and not self._too_late_to_refit():
            tune_hyper = a.t >= a.next_cv
            # finite learns online in between (but not after going back to the random walk)
            if tune_hyper or self.surrogate == "lite" or a.current.estimator is None:
                self._fit(tune_hyper)
            if tune_hyper:
                a.next_cv = 2 * a.t
            a.next_fit = self.schedule.next_after(a.t)

    def _update_step_sizes(self) -> None:
        """One Robbins-Monro update of the step size of the surrogate in use and of the one
        on trial, each on the acceptances of the iterations it proposed in the last draw."""
        a = self._adapt
        proposers = [(a.current, a.tally)]
        if a.trial is not None:
            proposers.append((a.trial.surrogate, a.trial.tally))
        for k, tally in proposers:
            if self.adapt_step_size and tally.accepts:
                anchor = float(np.mean(tally.anchor_accepts)) if tally.anchor_accepts else None
                k.scaler.update(float(np.mean(tally.accepts)), anchor,
                                target=self._step_target(k))
            tally.accepts, tally.anchor_accepts = [], []

    def _judge(self) -> None:
        """Settle a trial that has run its course, or review the surrogate in use.

        A refit's first ``_MIN_CHECKED`` iterations warm up its step size (which starts from
        a guess on the surrogate alone); the trial, for both, counts from there.  After
        ``_MIN_CHECKED`` more the refit takes over if :meth:`_beats_current`; otherwise it is
        dropped and the surrogate in use is reviewed on the same iterations
        (:meth:`_review`).  Without a trial the surrogate in use is reviewed every
        ``_MIN_CHECKED`` of its own iterations.
        """
        a, trial = self._adapt, self._adapt.trial
        if trial is not None and not trial.warmed and trial.tally.n >= _MIN_CHECKED:
            trial.warmed = True
            trial.tally.restart()
            a.tally.restart()
        if trial is not None and trial.warmed and trial.tally.n >= _MIN_CHECKED:
            if self._beats_current(trial):
                self._take_over(trial)
                return
            a.trial = None
            if a.fallback is not None and a.tally.n > 0:
                self._review()
        elif trial is None and a.fallback is not None and a.tally.n >= _MIN_CHECKED:
            self._review()

    def _step_target(self, k: Surrogate) -> float:
        """Acceptance target of the step size against the real (possibly noisy) target."""
        if k.estimator is None:  # random-walk phase: the warm-up walk's noise rule
            return self._accept_target(k.scaler.target)
        return self._warm.walk.noise.scaled(k.scaler.target)

    def _floored(self, k: Surrogate) -> bool:
        """Whether the step size of ``k`` (on trial or in use) sits on the floor of its band
        while adapted: it did not reach the (noise-lowered) target even at a tenth of the
        surrogate's own scale, so the surrogate's trajectories disagree with the target, and
        rare long accepted jumps would flatter its ESJD."""
        return self.adapt_step_size and k.scaler.at_floor

    def _beats_current(self, trial: Trial) -> bool:
        """Whether a refit checked on ``_MIN_CHECKED`` iterations moved the chain at least as
        far (expected squared jump distance per iteration, Rao-Blackwellised over the
        acceptance) as the surrogate in use over the same period, off the floor of its
        band.  A surrogate too poor to beat the random walk (e.g. in high dimension) never
        takes over."""
        a = self._adapt
        return not self._floored(trial.surrogate) and (a.tally.n == 0 or
                                                       trial.tally.esjd >= a.tally.esjd)

    def _take_over(self, trial: Trial) -> None:
        """The refit becomes the surrogate in use; a random walk it replaces is kept as the
        fallback, with its ESJD, for :meth:`_review`."""
        a = self._adapt
        if isinstance(trial.surrogate.estimator, FiniteScoreEstimator):
            self._flush_pending()
        if a.current.estimator is None:
            a.fallback = a.current
            a.fallback_esjd = trial.tally.esjd if a.tally.n == 0 else a.tally.esjd
        a.current = trial.surrogate
        a.tally.restart()  # the new surrogate in use is reviewed on its own iterations
        a.trial = None

    def _review(self) -> None:
        """The surrogate in use stays under review while tuning: over its iterations during
        a trial (without one, over its last ``_MIN_CHECKED`` iterations) its ESJD must stay
        at least ``_REVIEW_RATIO`` times the random walk's, as measured when the walk was
        replaced, and its step size off the floor of its band (:meth:`_floored`); otherwise
        the step goes back to the fallback random walk and its step size (the next refit
        starts a new trial).  A short trial can be flattered by a few long accepted jumps
        while the new step size is still settling; the review catches such a surrogate
        afterwards (``docs/algorithms/kernel_hmc.md``, "Review")."""
        a = self._adapt
        if self._floored(a.current) or a.tally.esjd < _REVIEW_RATIO * a.fallback_esjd:
            if self.surrogate == "finite":
                a.pending = []  # only surrogates learn online
            a.current, a.fallback, a.fallback_esjd = a.fallback, None, float("nan")
        a.tally.restart()  # the next review looks at fresh iterations

    def _too_late_to_refit(self) -> bool:
        """Whether tuning ends before a refit could be checked (known with PyMC >= 6)."""
        if not self._chain_tune:
            return False
        remaining = (self._chain_tune - self._warm.draw) * self.n_steps
        # the candidate proposes every other iteration, warm-up and checked iterations
        return remaining < 4 * _MIN_CHECKED

    def _flush_pending(self) -> None:
        a = self._adapt
        if a.pending:
            points = np.array(a.pending)
            for k in (a.current, a.trial and a.trial.surrogate):
                if k is not None and isinstance(k.estimator, FiniteScoreEstimator):
                    k.estimator.update(points)
            a.pending = []

    def _on_stop_tuning(self) -> None:
        # No refit and no update here: the frozen surrogate and step size are the ones in
        # use, reported by the last tuning draw (points still pending are dropped).  A
        # refit still on trial is dropped: it has not been checked against the target.
        a = self._adapt
        a.trial = None
        a.pending = []
        if self._warm.phase == "kernel" and a.current.estimator is None:
            # the user asked for kernel HMC and gets a random walk: say so
            warnings.warn(
                f"KernelHMCStep{self.var_names}: no score-matching surrogate beat the random "
                "walk while tuning, so the chain samples as the preconditioned random walk "
                f"({self.n_steps} iterations per draw).  Tune longer, or choose "
                "RandomWalkStep or KameleonStep for this posterior (docs/choosing.md).",
                UserWarning, stacklevel=3)

    def _fit(self, tune_hyper: bool) -> None:
        """Fit the surrogate on the reservoir subsample.

        With ``tune_hyper`` (and always at the first fit) the bandwidth and ``lambda`` are
        cross-validated first and the step size is re-initialised on the new surrogate.
        """
        a = self._adapt
        X = a.reservoir.points
        s_med = median_heuristic(X)
        if distinct_rows(X).shape[0] < _MIN_DISTINCT or s_med <= 0:
            return  # degenerate history: keep the random walk until it spreads out
        s_med = max(s_med, self._min_bandwidth())
        if self.surrogate == "finite" and a.base_features is None:
            a.base_features = RandomFourierFeatures.draw(
                self.dim, self.n_features, 1.0, self.rng, "phase"
            )
        s, lam, lengths = self.fixed_bandwidth, self.fixed_lam, a.current.lengths
        tune_hyper = tune_hyper or a.current.estimator is None
        # (with ard the bandwidth is never fixed: s is None and the lengths are searched too)
        if (s is None or lam is None) and tune_hyper:
            with threadpool_limits(limits=1):  # small dense algebra: threads only contend
                s, lam, lengths = self._cross_validate(s_med)
        s = s if s is not None else a.current.bandwidth
        lam = lam if lam is not None else a.current.lam
        if self.surrogate == "lite":
            estimator = LiteScoreEstimator(s, lam)
        else:
            self._flush_pending()
            basis = a.base_features.with_lengths(lengths).with_bandwidth(s)
            estimator = FiniteScoreEstimator(basis, lam)
        with np.errstate(all="ignore"), threadpool_limits(limits=1):
            estimator.fit(X)
        scaler = copy.deepcopy(a.current.scaler)
        if (self.adapt_step_size and tune_hyper) or a.current.estimator is None:
            # restart from the surrogate's own scale
            eps = self._surrogate_step_size(estimator, X, a.current.scaler.value)
            scaler = AnchoredStepSize(eps, self.target_accept, self.adapt_exponent,
                                      *_SURROGATE_BAND)
        # on trial against the surrogate in use, measured over the same iterations
        a.trial = Trial(Surrogate(scaler, estimator, float(s), float(lam), lengths))
        a.tally.restart()

    def _surrogate_step_size(self, estimator, X: np.ndarray, eps: float) -> float:
        """Step size at which trajectories on the *surrogate* Hamiltonian ``-f(q) + |p|^2/2``
        from history points are accepted with probability about ``target_accept``.

        Uses no target evaluation.  Doubles or halves ``eps`` (at most 10 times) and returns
        the largest tried value whose surrogate acceptance reaches the target.
        """
        starts = X[self.rng.choice(X.shape[0], size=min(20, X.shape[0]), replace=False)]
        momenta = self.rng.standard_normal(starts.shape)
        n_steps = int(round(np.mean(self.n_leapfrog)))

        def surrogate_accept(step: float) -> float:
            total = 0.0
            with np.errstate(all="ignore"):
                for q0, p0 in zip(starts, momenta, strict=True):
                    q1, p1 = estimator.leapfrog(q0, p0, step, n_steps)
                    total += hamiltonian_accept_prob(estimator.log_density, q0, p0, q1, p1)
            return total / starts.shape[0]

        if surrogate_accept(eps) >= self.target_accept:
            for _ in range(10):
                if surrogate_accept(2.0 * eps) < self.target_accept:
                    break
                eps *= 2.0
            return eps
        for _ in range(10):
            eps *= 0.5
            if surrogate_accept(eps) >= self.target_accept:
                break
        return eps

    def _min_bandwidth(self) -> float:
        """Floor of the centre of the bandwidth search (see ``_MIN_BANDWIDTH``)."""
        return _MIN_BANDWIDTH * float(np.sqrt(2.0 * self.dim))

    def _cross_validate(self, s_med: float) -> tuple[float, float, np.ndarray | None]:
        # Blocked cross-validation on distinct points in chain order: with random folds, the
        # copies (rejections) and neighbours of a held-out point of an autocorrelated chain
        # are in the training folds, which rewards over-fitting.
        X = distinct_rows(self._adapt.reservoir.points_in_order)
        if X.shape[0] > self.n_cv:
            X = X[np.sort(self.rng.choice(X.shape[0], self.n_cv, replace=False))]
        s_ref = self.fixed_bandwidth or s_med
        factors = _BANDWIDTH_FACTORS[self.surrogate]
        window = np.arange(factors.size)  # first time the whole grid, then around the last best
        if self._adapt.cv_index is not None:
            i = self._adapt.cv_index
            window = window[max(i - _CV_NEIGHBOURS, 0) : i + _CV_NEIGHBOURS + 1]
        bandwidths = ([self.fixed_bandwidth] if self.fixed_bandwidth is not None
                      else s_med * factors[window])
        lam_scale = s_ref**2 if self.surrogate == "lite" else s_ref**-2
        lams = ([self.fixed_lam] if self.fixed_lam is not None
                else lam_scale * 10.0**_LAMBDA_EXPONENTS)
        a = self._adapt
        if self._ard:  # bandwidth, lambda and per-coordinate lengths, from the last lengths
            # two sweeps from isotropic lengths, then one from the last lengths
            res = search_lengths(X, a.base_features, bandwidths, lams, lengths=a.cv_lengths,
                                 n_sweeps=2 if a.cv_lengths is None else 1,
                                 min_bandwidth=factors[0] * self._min_bandwidth())
            a.cv_lengths = res.lengths
            a.cv_index = int(np.argmin(np.abs(np.log(s_med * factors / res.bandwidth))))
            return res.bandwidth, res.lam, res.lengths
        if self.surrogate == "lite":
            make = LiteScoreEstimator
        else:
            base = a.base_features

            def make(s, lam):
                return FiniteScoreEstimator(base.with_bandwidth(s), lam)

        with np.errstate(all="ignore"):
            result = cross_validate(X, bandwidths, lams, make, n_folds=5, shuffle=False)
        if self.fixed_bandwidth is None:
            best = int(np.argmin(np.min(result.losses, axis=1)))
            a.cv_index = int(window[best])
        return result.best_bandwidth, result.best_lam, None
