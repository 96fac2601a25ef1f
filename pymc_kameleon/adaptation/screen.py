"""The surrogate screen: delayed acceptance around any step's Metropolis-Hastings decision.

A chain's evaluated points and their log densities are a regression data set: a kernel ridge
regression of the values (:class:`~pymc_kameleon.math.surrogate_regression.KernelRidgeSurrogate`)
is a cheap log-density surrogate ``s``.  :class:`ScreenedMetropolis` wraps the step's
:class:`~.kernel.Metropolis` and runs the two-stage delayed acceptance of Christen and Fox
(2005) with it (formulas: :mod:`pymc_kameleon.math.delayed_acceptance`): a proposal that
``s`` rejects costs no evaluation, one that passes is evaluated once and corrected exactly.

The surrogate's life, one chain (:class:`SurrogateScreen`, a frozen configuration, acting on
a :class:`ScreenState`):

* ``update(state, x, logp)``: every evaluated point, in model coordinates, so that a new
  whitening map of the step does not invalidate the data; the newest ``max_points`` are kept.
* ``update_draw(state)``: at a tuning draw boundary, once ``refit_points`` new points have
  arrived (early on, as many as the last fit had: the screen learns sooner), the current
  surrogate is scored on them (held out: none was fitted), then refitted on all kept
  points.  The screen is active while that held-out score (the spread of
  ``log p - s`` over the plausible new points) is at most ``max_error``; once on, it stays
  on while the score is at most ``keep_error``, so that a score near the threshold does not
  switch the step's proposals back and forth (exactness does not depend on the score).
* ``final(state)``: tuning ends: nothing is learned afterwards, so the sampling phase is one
  time-homogeneous kernel whose invariant law is the target.

A proposal the surrogate rejects costs nothing, so while the screen is active the step may
propose further and take more iterations per draw: the scales adapt toward the move rate
``move_rate`` instead of the random walk's 0.234 (:meth:`SurrogateScreen.target`), and a
draw takes up to ``max_steps_factor`` times the iterations, as many as keep its evaluations
at the unscreened count (:meth:`SurrogateScreen.steps_factor`), and late in tuning the work
per draw aims at the autocorrelation time ``target_tau`` per draw
(:meth:`SurrogateScreen.work_target`; all measured on docs/benchmarks/surrogate_screen.md).

The references (Christen and Fox 2005; Sherlock, Golightly and Henderson 2017 for a likelihood
estimator) are those of :mod:`pymc_kameleon.math.delayed_acceptance`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from scipy.linalg import solve_triangular

from ..math.delayed_acceptance import stage1_log_ratio, stage2_log_ratio
from ..math.linalg import safe_cholesky
from ..math.surrogate_regression import KernelRidgeSurrogate
from ..validation import check_at_least
from .kernel import ChainState, Iteration, Metropolis, Proposal, rejected_outright

__all__ = ["DelayedMetropolis", "ScreenDraw", "ScreenState", "ScreenTally", "ScreenedMetropolis",
           "SurrogateScreen"]


@dataclass
class ScreenTally:
    """One draw's screened iterations (closed by :meth:`SurrogateScreen.stats`)."""

    screened: int = 0  # iterations that went through stage 1
    passed: int = 0  # ... and passed it (one evaluation each)
    accepted: int = 0  # ... and were accepted by stage 2


@dataclass
class ScreenState:
    """One chain's surrogate screen (made by :meth:`SurrogateScreen.init`).

    Attributes
    ----------
    points, values : ndarray
        Ring buffer of evaluated points (model coordinates) and their log densities.
    n_seen : int
        Points ever recorded (the buffer holds the newest ``min(n_seen, len(points))``).
    n_new : int
        Points recorded since the last fit (held out from it).
    surrogate : KernelRidgeSurrogate or None
        The fitted regression, in the coordinates ``L^-1 (x - mean)`` of the fit.
    mean, whiten : ndarray or None
        The fit's whitening ``L^-1 (x - mean)``: the kept points' mean and the inverse of the
        Cholesky factor ``L`` of their covariance (one product per surrogate value).
    version : int
        Fits so far (a cached surrogate value is valid for one version).
    active : bool
        Whether :class:`ScreenedMetropolis` screens (else it passes through).
    error : float
        The last held-out score (NaN before the second fit).
    frozen : bool
        Set by :meth:`SurrogateScreen.final`: nothing is learned any more.
    screened, passed : int
        Screened iterations and stage-1 passes since the last fit (closed draws only).
    steps_factor : float
        The factor on the iterations per draw (:meth:`SurrogateScreen.steps_factor`).
    """

    points: np.ndarray
    values: np.ndarray
    n_seen: int = 0
    n_new: int = 0
    surrogate: KernelRidgeSurrogate | None = None
    mean: np.ndarray | None = None
    whiten: np.ndarray | None = None
    version: int = 0
    active: bool = False
    error: float = math.nan
    frozen: bool = False
    tally: ScreenTally = field(default_factory=ScreenTally)
    screened: int = 0
    passed: int = 0
    steps_factor: float = 1.0

    @property
    def dim(self) -> int:
        return int(self.points.shape[1])

    def kept(self) -> tuple[np.ndarray, np.ndarray]:
        """The kept points and values, oldest first."""
        n, cap = min(self.n_seen, len(self.values)), len(self.values)
        order = (np.arange(self.n_seen - n, self.n_seen)) % cap
        return self.points[order], self.values[order]


class ScreenDraw(NamedTuple):
    """What :meth:`SurrogateScreen.update_draw` did."""

    refitted: bool
    active: bool
    error: float  # the held-out score of the surrogate just replaced (NaN if none)


@dataclass(frozen=True)
class SurrogateScreen:
    """Configuration of the surrogate screen (see the module docstring).

    Parameters
    ----------
    max_points : int
        Newest evaluated points kept and fitted (the fit costs ``O(max_points^3)`` per
        candidate bandwidth, each surrogate value ``O(max_points d)``).
    min_points : int, optional
        Points before the first fit; default ``max(50, 10 d)``.
    refit_points : int, optional
        New points between fits; default ``max(min_points, max_points // 4)``.  Until
        then, a fit waits for as many new points as the last one had (at least
        ``min_points``), so that early fits come sooner.
    max_error : float
        Largest held-out standard deviation of ``log p - s`` (nats) at which the screen is
        active: with independent errors of sd ``sigma`` the second stage's log ratio has sd
        ``sqrt(2) sigma``, and ``sigma = 1`` keeps its acceptance near 0.7.
    keep_error : float, optional
        Largest held-out score at which an active screen stays active; default
        ``2 max_error``.
    floor_gap : float, optional
        Values more than this below the kept maximum are raised to it before the fit, and
        held-out points below it are not scored (a chain never goes there); default
        ``d + 10``.
    min_holdout : int
        Fewest plausible held-out points for a score; with fewer the screen keeps its state.
    move_rate : float
        While the screen is active, the largest acceptance target of a step's scale: the
        rate at which the chain moves (both stages passed).  A stage-1 rejection costs no
        evaluation, so a larger proposal that moves less often pays.
    max_steps_factor : float
        While the screen is active, the iterations per draw grow by the screened
        iterations per evaluation, at most this factor (at least 1).
    target_tau : float
        While the screen is active, the autocorrelation time per draw that the work per
        draw aims at (:class:`~.work.WorkPerDraw`; unscreened 3): screened iterations are
        cheap, so a chain that still mixes slowly per draw gets more of them.
    """

    max_points: int = 1000
    min_points: int | None = None
    refit_points: int | None = None
    max_error: float = 1.0
    keep_error: float | None = None
    floor_gap: float | None = None
    min_holdout: int = 20
    move_rate: float = 0.1
    max_steps_factor: float = 4.0
    target_tau: float = 1.5

    def __post_init__(self) -> None:
        if not 0.0 < self.move_rate < 1.0:
            raise ValueError(f"move_rate must lie in (0, 1), got {self.move_rate!r}")
        if not self.target_tau > 0.0:
            raise ValueError(f"target_tau must be positive, got {self.target_tau!r}")
        check_at_least("max_steps_factor", self.max_steps_factor, 1.0)

    def _min_points(self, dim: int) -> int:
        return self.min_points if self.min_points is not None else max(50, 10 * dim)

    def _refit_points(self, dim: int) -> int:
        if self.refit_points is not None:
            return self.refit_points
        return max(self._min_points(dim), self.max_points // 4)

    def _floor_gap(self, dim: int) -> float:
        return self.floor_gap if self.floor_gap is not None else dim + 10.0

    def init(self, dim: int) -> ScreenState:
        """An empty, inactive screen for a ``dim``-dimensional chain."""
        return ScreenState(np.zeros((self.max_points, dim)), np.zeros(self.max_points))

    def update(self, state: ScreenState, x: np.ndarray, logp: float) -> None:
        """Record one evaluated point ``x`` (model coordinates) and its log density (no-op
        once frozen)."""
        if state.frozen:
            return
        i = state.n_seen % self.max_points
        state.points[i] = x
        state.values[i] = logp
        state.n_seen += 1
        state.n_new += 1

    def log_density(self, state: ScreenState, X: np.ndarray) -> np.ndarray:
        """The surrogate at rows ``X`` (model coordinates), returning ``(n,)``."""
        return state.surrogate.log_density((np.atleast_2d(X) - state.mean) @ state.whiten.T)

    def update_draw(self, state: ScreenState) -> ScreenDraw:
        """At a tuning draw boundary: the factor on the iterations per draw; score and refit
        when enough new points arrived."""
        dim = state.dim
        if not state.frozen:
            state.steps_factor = self._steps_factor(state)
        fitted = min(state.n_seen - state.n_new, self.max_points)  # points of the last fit
        due = min(self._refit_points(dim), max(self._min_points(dim), fitted))
        if (state.frozen or state.n_new < due
                or min(state.n_seen, self.max_points) < self._min_points(dim)):
            return ScreenDraw(False, state.active, math.nan)
        X, y = state.kept()
        ok = np.isfinite(y) & np.all(np.isfinite(X), axis=1)
        X, y = X[ok], y[ok]
        if len(y) < self._min_points(dim):
            return ScreenDraw(False, state.active, math.nan)
        gap = self._floor_gap(dim)
        error = math.nan
        if state.surrogate is not None:
            new = ok[len(ok) - min(state.n_new, len(ok)):]  # the held-out tail, kept-ordered
            n_new = int(new.sum())
            Xh, yh = X[len(y) - n_new:], y[len(y) - n_new:]
            plausible = yh >= y.max() - gap
            if plausible.sum() >= self.min_holdout:
                resid = yh[plausible] - self.log_density(state, Xh[plausible])
                error = float(np.std(resid, ddof=1))
                # a constant offset cancels in both stages' ratios: only the spread matters
                keep = self.keep_error if self.keep_error is not None else 2 * self.max_error
                state.active = bool(error <= (keep if state.active else self.max_error))
                state.error = error
        mean = X.mean(axis=0)
        chol, _ = safe_cholesky(np.atleast_2d(np.cov(X, rowvar=False)))
        whiten = solve_triangular(chol, np.eye(dim), lower=True)
        state.surrogate = KernelRidgeSurrogate.fit((X - mean) @ whiten.T, y, floor_gap=gap)
        state.mean, state.whiten = mean, whiten
        state.version += 1
        state.n_new = 0
        state.screened = state.passed = 0  # the new surrogate passes at its own rate
        return ScreenDraw(True, state.active, error)

    def target(self, state: ScreenState, target: float) -> float:
        """A scale's acceptance target: ``target``, capped at :attr:`move_rate` while the
        screen is active."""
        return min(target, self.move_rate) if state.active else target

    def work_target(self, state: ScreenState, target_tau: float) -> float:
        """The work per draw's autocorrelation target: :attr:`target_tau` while the
        screen is active, else ``target_tau``."""
        return min(target_tau, self.target_tau) if state.active else target_tau

    def steps_factor(self, state: ScreenState) -> float:
        """The factor on the iterations per draw (1 while inactive): set at each tuning
        draw boundary, frozen with the screen."""
        return state.steps_factor if state.active else 1.0

    def _steps_factor(self, state: ScreenState) -> float:
        """Screened iterations per evaluation since the last fit, within
        ``[1, max_steps_factor]``; the last factor until ``min_holdout`` passes are seen."""
        if not state.active:
            return 1.0
        if state.passed < self.min_holdout:
            return state.steps_factor
        return float(min(max(state.screened / state.passed, 1.0), self.max_steps_factor))

    def final(self, state: ScreenState) -> ScreenState:
        """Freeze the screen (tuning ends): it keeps its surrogate and whether it screens."""
        state.frozen = True
        return state

    def stats(self, state: ScreenState) -> dict[str, float | int | bool]:
        """The draw's stats, closing its tallies: whether the screen is active, the fraction
        of screened iterations that passed stage 1 and of those that stage 2 accepted (NaN
        when none), and the evaluations saved (stage-1 rejections)."""
        t = state.tally
        if not state.frozen:
            state.screened += t.screened
            state.passed += t.passed
        out = {
            "screen_active": state.active,
            "screen_stage1": t.passed / t.screened if t.screened else math.nan,
            "screen_stage2": t.accepted / t.passed if t.passed else math.nan,
            "evals_saved": t.screened - t.passed,
        }
        state.tally = ScreenTally()
        return out


class DelayedMetropolis:
    """The step's :class:`~.kernel.Metropolis` with a surrogate in front of it: the
    two-stage delayed acceptance of Christen and Fox (2005).

    One iteration from ``x`` (whitened ``u``) to the proposal ``y`` with log correction
    ``c`` is

    * stage 1, no evaluation: pass with ``min(1, exp(s(y) - s(x) + c))``;
    * stage 2, one evaluation (the wrapped ``evaluate``): accept with ``min(1, exp(r2))``,
      ``r2 = log p(y) - log p(x) - (s(y) - s(x))``, by the wrapped ``decide``.

    Why ``c`` appears in stage 1 only: with ``a1 = min(1, s(y) q(x|y) / (s(x) q(y|x)))`` and
    ``a2 = min(1, p(y) s(x) / (p(x) s(y)))``, the flow
    ``p(x) q(y|x) a1 a2 = min(s(x) q(y|x), s(y) q(x|y)) min(p(x) / s(x), p(y) / s(y))``
    is symmetric in ``x`` and ``y`` (Christen and Fox 2005, Theorem 1); for a Hamiltonian
    proposal ``c = K(p) - K(p*)`` plays the part of ``log q(x|y) - log q(y|x)`` and the
    same product is symmetric under the momentum flip, and for an independence proposal
    ``g`` it is ``log g(x) - log g(y)``.  ``s`` is a function of the model point, and a
    whitening map is affine, so its constant Jacobian cancels in both ratios.
    ``log p(x)`` is the value stored with the chain, never recomputed: with a likelihood
    estimator the chain is the pseudo-marginal one on the extended space (Sherlock,
    Golightly and Henderson 2017).  A probe, a proposal the step rejects without
    evaluating, or a current point where ``s`` is not finite goes to the wrapped step
    unchanged.

    ``accept_prob`` of the returned :class:`~.kernel.Iteration` is stage 2's probability
    after a pass and 0 after a stage-1 rejection: its expectation given the proposal is
    ``a1 a2``, the probability that the chain moves, which is what a scale adaptation
    toward a move rate measures (stage 1's alone would adapt to the surrogate, stage 2's
    alone to its error, neither to the chain).

    Parameters
    ----------
    mh : Metropolis
        The step's decisions (its ``rng`` draws stage 1's uniform too).
    log_s : callable
        The surrogate: rows of model points to log densities (a frozen function).
    """

    def __init__(self, mh: Metropolis, log_s) -> None:
        self.mh, self._log_s = mh, log_s
        self._tally = ScreenTally()
        self._cached: tuple[int, np.ndarray, float] | None = None  # (version, u, s(x))
        self.last_logp = math.nan  # the target's value at the last evaluated proposal

    @property
    def active(self) -> bool:
        """Whether stage 1 screens (else the wrapped step's iteration)."""
        return True

    @property
    def version(self) -> int:
        """Changes whenever ``s`` does (a cached value is valid for one version)."""
        return 0

    @property
    def tally(self) -> ScreenTally:
        """The screened, passed and accepted iterations so far."""
        return self._tally

    def log_surrogate(self, X: np.ndarray) -> np.ndarray:
        """``s`` at rows ``X`` (model coordinates), returning ``(n,)``."""
        return np.atleast_1d(np.asarray(self._log_s(np.atleast_2d(X)), dtype=float))

    @property
    def rng(self) -> np.random.Generator:
        return self.mh.rng

    def to_x(self, position: np.ndarray) -> np.ndarray:
        return self.mh.to_x(position)

    def evaluate(self, position: np.ndarray) -> tuple[ChainState, np.ndarray]:
        return self.mh.evaluate(position)

    def decide(self, state: ChainState, new: ChainState, x_new: np.ndarray,
               log_accept: float) -> tuple[ChainState, float, bool]:
        return self.mh.decide(state, new, x_new, log_accept)

    def _surrogate_at(self, position: np.ndarray) -> float:
        """``s`` at the chain's whitened ``position``, computed once per position and fit."""
        c = self._cached
        if c is not None and c[0] == self.version and np.array_equal(c[1], position):
            return c[2]
        value = float(self.log_surrogate(self.to_x(position))[0])
        self._cached = (self.version, np.array(position, copy=True), value)
        return value

    def step(self, state: ChainState, proposal: Proposal, adapts: bool = True,
             probe: bool = False) -> Iteration:
        """One iteration: delayed acceptance while active, else the wrapped step's."""
        if not self.active or probe or rejected_outright(proposal):
            return self.mh.step(state, proposal, adapts, probe)
        s_x = self._surrogate_at(state.position)
        if not math.isfinite(s_x):  # the current point must be finite for the ratios
            return self.mh.step(state, proposal, adapts, probe)
        s_y = float(self.log_surrogate(self.to_x(proposal.position))[0])
        tally = self.tally
        tally.screened += 1
        log_r1 = stage1_log_ratio(s_x, s_y, proposal.log_correction)
        u = self.rng.random()
        if not (math.log(u) if u > 0.0 else -math.inf) < log_r1:
            return Iteration(state, 0.0, False, 0, adapts, probe)
        tally.passed += 1
        new, x_new = self.mh.evaluate(proposal.position)
        self.last_logp = new.logp
        log_r2 = stage2_log_ratio(state.logp, new.logp, s_x, s_y)
        moved_to, accept_prob, accepted = self.mh.decide(state, new, x_new, log_r2)
        if accepted:
            tally.accepted += 1
            # the surrogate at the new position: s(y) unless evaluating rounded the position
            if np.array_equal(moved_to.position, proposal.position):
                self._cached = (self.version, np.array(moved_to.position, copy=True), s_y)
        return Iteration(moved_to, accept_prob, accepted, 1, adapts, probe)


class ScreenedMetropolis(DelayedMetropolis):
    """:class:`DelayedMetropolis` with a chain's learned surrogate screen: it screens while
    the screen is active (and passes through otherwise); a refit changes ``s``.

    Parameters
    ----------
    mh : Metropolis
        The step's decisions (its ``rng`` draws stage 1's uniform too).
    screen : SurrogateScreen
    state : ScreenState
        The chain's screen; the caller feeds it every evaluated point (``screen.update``).
    """

    def __init__(self, mh: Metropolis, screen: SurrogateScreen, state: ScreenState) -> None:
        super().__init__(mh, lambda X: screen.log_density(state, X))
        self.screen = screen
        self.state = state

    @property
    def active(self) -> bool:
        return self.state.active

    @property
    def version(self) -> int:
        return self.state.version

    @property
    def tally(self) -> ScreenTally:
        return self.state.tally  # replaced at every draw's stats
