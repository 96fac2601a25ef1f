"""Emulator moves of a step: free moves on the emulator while tuning, independence moves after.

With ``emulator=True`` a step builds an emulator of the log density at its first tuning
draw (:class:`~pymc_kameleon.emulator.EmulatorRun`: prior draws, the mode search, the design
rounds) and fits a defensive mixture ``g`` to the emulator's posterior
(:func:`~pymc_kameleon.emulator.correction.correction_proposal`).  Then:

* while tuning, the kernels move on the emulator's log density (:class:`EmulatedMetropolis`,
  no true evaluation): tuning draws are discarded, so the kernels only need to arrive tuned;
* after tuning, each iteration is, with probability ``weight``, an independence proposal
  ``y ~ g`` accepted with ``log p(y) - log p(x) + log g(x) - log g(y)``
  (:func:`independence_step`), otherwise the kernel's own local move.  Both are
  Metropolis-Hastings kernels reversible with respect to the target, and the choice between
  them does not depend on the state, so their mixture leaves the target invariant; nothing
  adapts after tuning and the current value is the stored one (a likelihood estimate stays
  with its point), so the chain is exact also for a pseudo-marginal log density.
* with ``delayed=True`` the frozen emulator screens both moves after tuning
  as the first stage of delayed acceptance (:class:`~.screen.DelayedMetropolis`): a
  proposal it rejects costs no evaluation, one it passes is evaluated and corrected by
  ``p / emulator``, so the chain stays exact whatever the emulator is.  ``g`` is fitted to
  draws of the emulator's posterior and accepted against it only about half the time, so
  the screen saves about half the evaluations; the chain spends them on more iterations
  per draw (:func:`steps_for_screen`).

This module is free of PyMC; :mod:`pymc_kameleon.steps.emulated` drives it for a step.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..emulator import EmulatorSettings
from ..emulator.correction import DefensiveMixture, correction_proposal
from ..math.delayed_acceptance import stage1_log_ratio
from ..math.whitening import AffineMap
from ..validation import check_flag, check_fraction, check_integral
from .kernel import MIN_STEPS, ChainState, Iteration, Metropolis, Proposal, rejected_outright
from .screen import DelayedMetropolis

__all__ = ["STEP_DEFAULTS", "EmulatorMoves", "EmulatedMetropolis", "IndependenceProposal",
           "independence_log_ratio", "independence_step", "pair_acceptance",
           "moves_pay", "stage1_pass_rate", "steps_for_acceptance", "steps_for_screen",
           "trial_acceptance"]


#: The steps' values of the settings left at None (:class:`EmulatorMoves`, "settings").
STEP_DEFAULTS = {"search_starts": 4, "defensive_weight": 0.3, "defensive_scale": 4.0,
                 "defensive_df": 3.0}


@dataclass(frozen=True)
class EmulatorMoves:
    """How a step uses the emulator (``emulator=`` of every step).

    Parameters
    ----------
    settings : EmulatorSettings
        The emulator's run (design, held-out error rule, ``max_dim``) and the shape of
        ``g``.  Its fields left at None take the steps' values (:data:`STEP_DEFAULTS`),
        which differ from the engine's in two ways.  ``search_starts=4``: every chain
        climbs briefly from its own four best prior draws (four chains from sixteen) and
        finishes the highest climb of each of up to two basins, so ``g`` covers both
        modes of a two-mode posterior (one mode per chain left the chains disagreeing on
        the modes' weights).  A heavier defensive component (``defensive_weight=0.3,
        defensive_scale=4, defensive_df=3``): an independence chain that enters a tail
        ``g`` covers thinly stays there for about ``p / g`` iterations, and on a curved
        arm the engine's lighter component let chains stick (R-hat 1.06) where this one
        costs a tenth of the acceptance (``docs/benchmarks/emulator.md``).
    weight : float
        Probability of an independence proposal at each iteration after tuning; the
        rest are the step's own local moves.  Default 1 (independence moves only): at one
        iteration per draw the independence move is the one that mixes: a local move in
        its place (one in five at 0.8) cost a tenth to a quarter of the ESS on a
        long-tailed posterior, whose runs then missed by their sds or R-hat more often
        (``docs/benchmarks/emulator.md``, "emulator-steps-independence-only").
    trial : int, optional
        True independence proposals of the trial that decides whether the moves pay
        (default ``max(30, 5 d)``), made once the emulator is built.
    min_accept : float
        The independence moves' acceptance below which the chain samples without the
        emulator: when the trial's own acceptance and its estimate at stationarity are
        both below it (the trial's alone for a likelihood estimator; :func:`moves_pay`).
    posterior_draws : int
        Draws of the emulator's posterior (its tempering) that the mixture is fitted to.
    delayed : bool
        After tuning, screen every move with the emulator first (delayed acceptance) and
        take as many more iterations per draw as the screen saves evaluations.  Exact,
        and about 1.5 times the ESS per evaluation in the bulk, but a chain visits regions
        where the emulator is too low rarely and stays long, so tails can come out short
        or a chain stick (docs/benchmarks/emulator.md, "emulator-steps-delayed"); off by
        default.

    Raises
    ------
    ValueError, TypeError
        ``weight`` or ``min_accept`` outside 0-1, ``trial`` or ``posterior_draws`` not a
        whole number of at least 2, ``settings`` not :class:`EmulatorSettings`.
    """

    settings: EmulatorSettings = field(default_factory=EmulatorSettings)
    weight: float = 1.0
    trial: int | None = None
    min_accept: float = 0.2
    posterior_draws: int = 1000
    delayed: bool = False

    def __post_init__(self) -> None:  # frozen: the settings completed once, here
        if not isinstance(self.settings, EmulatorSettings):
            raise TypeError(f"settings must be EmulatorSettings, not {self.settings!r}")
        object.__setattr__(self, "settings", self.settings.completed(STEP_DEFAULTS))
        check_fraction("weight", self.weight)
        check_fraction("min_accept", self.min_accept)
        if self.trial is not None:
            object.__setattr__(self, "trial", check_integral("trial", self.trial, 2))
        object.__setattr__(self, "posterior_draws",
                           check_integral("posterior_draws", self.posterior_draws, 2))
        check_flag("delayed", self.delayed)

    @classmethod
    def of(cls, emulator: bool | EmulatorSettings | EmulatorMoves) -> EmulatorMoves | None:
        """The moves a step's ``emulator=`` argument asks for (None: off)."""
        if isinstance(emulator, EmulatorMoves):
            return emulator
        if isinstance(emulator, EmulatorSettings):
            return cls(emulator)
        if emulator is True:
            return cls()
        if emulator is False or emulator is None:
            return None
        raise TypeError(f"emulator must be a bool, EmulatorSettings or EmulatorMoves, "
                        f"not {type(emulator).__name__}")

    def n_trial(self, dim: int) -> int:
        return int(self.trial) if self.trial is not None else max(30, 5 * dim)


@dataclass(frozen=True)
class IndependenceProposal:
    """The frozen independence proposal ``g``: a defensive mixture in whitened coordinates
    ``u = L^-1 (x - m)`` of ``whitening``; densities and draws in model coordinates."""

    whitening: AffineMap
    mixture: DefensiveMixture

    @classmethod
    def fit(cls, X: np.ndarray, rng: np.random.Generator,
            settings: EmulatorSettings) -> IndependenceProposal:
        """``g`` fitted to draws ``X`` (rows) of the emulator's posterior, as the engine's
        correction fits its first proposal (widened, with a heavy-tailed component)."""
        return cls(*correction_proposal(np.asarray(X, dtype=float), rng, settings))

    def logpdf(self, X: np.ndarray) -> np.ndarray:
        """``log g`` at rows ``X`` (model coordinates; the map's Jacobian included)."""
        U = self.whitening.rows_to_u(np.atleast_2d(X))
        return self.mixture.logpdf(U) - self.whitening.log_det

    def sample(self, rng: np.random.Generator) -> np.ndarray:
        """One draw of ``g`` (model coordinates)."""
        return self.whitening.rows_to_x(self.mixture.sample(1, rng))[0]

    def sample_rows(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` draws of ``g`` (rows, model coordinates)."""
        return self.whitening.rows_to_x(self.mixture.sample(n, rng))


def independence_log_ratio(logp_new: float, logp_cur: float, logg_new: float,
                           logg_cur: float) -> float:
    """The log Metropolis-Hastings ratio of an independence proposal:
    ``log p(y) - log p(x) + log g(x) - log g(y)``."""
    return logp_new - logp_cur + logg_cur - logg_new


def independence_step(mh: Metropolis, state: ChainState, x: np.ndarray,
                      g: IndependenceProposal,
                      to_u: Callable[[np.ndarray], np.ndarray],
                      log_weights: list | None = None,
                      screen: DelayedMetropolis | None = None,
                      proposals: list | None = None) -> tuple[Iteration, np.ndarray]:
    """One independence move from ``state`` (model point ``x``, its stored value in
    ``state.logp``; ``to_u``: model point to the kernels' whitened position): one
    evaluation at ``y ~ g``; the iteration and the chain's point afterwards.  A list
    ``log_weights`` gets the importance weight ``log p(y) - log g(y)`` of a finite
    ``log p(y)`` (its Pareto k-hat says how well ``g`` covers the tails); a list
    ``proposals`` gets ``(y, log p(y) - log g(y))`` of every evaluated proposal, failed
    ones (``-inf``) included (:func:`trial_acceptance` reads them; without the screen).

    With ``screen`` (wrapping ``mh``) the move is its delayed acceptance with the
    correction ``log g(x) - log g(y)``: a proposal stage 1 rejects costs no evaluation and
    adds no weight.  The weights are then those of the proposals the screen passed; it
    drops mostly low ones, so the largest weights, which k-hat's Pareto fit reads, are
    kept."""
    position = to_u(g.sample(mh.rng))
    if not math.isfinite(np.add.reduce(position)):
        return Iteration(state, 0.0, False, 0), x
    if screen is not None:
        y = mh.to_x(position)
        logg_new = float(g.logpdf(y)[0])
        it = screen.step(state, Proposal(position, float(g.logpdf(x)[0]) - logg_new))
        if (it.n_evals and log_weights is not None
                and math.isfinite(screen.last_logp - logg_new)):
            log_weights.append(screen.last_logp - logg_new)
        return it, (y if it.accepted else x)
    new, x_new = mh.evaluate(position)
    logg_new = float(g.logpdf(x_new)[0])
    log_w = new.logp - logg_new
    if log_weights is not None and math.isfinite(log_w):
        log_weights.append(log_w)
    if proposals is not None:
        proposals.append((x_new, -math.inf if math.isnan(log_w) else log_w))
    log_r = independence_log_ratio(new.logp, state.logp, logg_new, float(g.logpdf(x)[0]))
    moved, accept_prob, accepted = mh.decide(state, new, x_new, log_r)
    return Iteration(moved, accept_prob, accepted, 1), (x_new if accepted else x)


def stage1_pass_rate(g: IndependenceProposal, log_density: Callable[[np.ndarray], np.ndarray],
                     X: np.ndarray, rng: np.random.Generator, n: int = 2000) -> float:
    """The emulator's own acceptance of independence proposals from ``g``: the mean of
    ``min(1, e(y) g(x) / (e(x) g(y)))`` over ``n`` pairs, ``x`` drawn from the rows ``X``
    (draws of the emulator's posterior ``e``), ``y ~ g``.  It is the fraction of
    independence moves that pass the screen once the chain samples ``e``'s posterior
    (no true evaluation)."""
    Xs = np.asarray(X, dtype=float)[rng.integers(len(X), size=n)]
    Y = g.sample_rows(n, rng)
    with np.errstate(invalid="ignore", over="ignore"):
        log_r = stage1_log_ratio(log_density(Xs), log_density(Y), g.logpdf(Xs), g.logpdf(Y))
    log_r = np.where(np.isnan(log_r), -np.inf, log_r)
    return float(np.mean(np.exp(np.minimum(log_r, 0.0))))


def pair_acceptance(log_w: np.ndarray) -> float:
    """The acceptance of independence moves at stationarity, ``E min(1, w(y) / w(x))``
    (``x ~ p``, ``y ~ g``, ``w = p / g``), from ``n`` draws of ``g`` with log weights
    ``log_w``: every ordered pair ``(i, j)``, ``i != j``, with ``x`` the draw ``i``
    self-normalised, which is ``sum_{i != j} min(w_i, w_j) / ((n - 1) sum_i w_i)``;
    exact in ``O(n log n)`` by sorting.  A ``-inf`` (failed evaluation) is a weight 0;
    NaN if fewer than two draws or no finite weight."""
    lw = np.sort(np.where(np.isnan(log_w), -np.inf, np.asarray(log_w, dtype=float)))
    n = len(lw)
    if n < 2 or not np.isfinite(lw[-1]):
        return math.nan
    w = np.exp(lw - lw[-1])
    # the k-th smallest weight is the smaller of its pair with each of the n - 1 - k larger
    pairs = 2.0 * float(np.dot(w, np.arange(n - 1, -1, -1.0)))
    return min(1.0, pairs / ((n - 1) * float(np.sum(w))))


def trial_acceptance(log_w: np.ndarray, log_w_emulator: np.ndarray,
                     log_w_free: np.ndarray) -> float:
    """The independence moves' acceptance on the true density, with the emulator as a
    control variate: the emulator's own acceptance from many free draws of ``g``
    (``log_w_free = log e - log g`` there) plus the difference, on the trial's truly
    evaluated draws, between the true (``log_w``) and the emulator's (``log_w_emulator``)
    acceptance, clipped to [0, 1].  Where the emulator is close the difference is small
    and varies little, so the estimate's sd is several times smaller than the trial's
    own (docs/benchmarks/emulator.md, "emulator-steps-trial-cv")."""
    true, emulated = pair_acceptance(log_w), pair_acceptance(log_w_emulator)
    free = pair_acceptance(log_w_free)
    if not (math.isfinite(free) and math.isfinite(emulated)):
        return true
    return float(np.clip(free + true - emulated, 0.0, 1.0))


def moves_pay(trial: float, estimate: float, min_accept: float, noisy: bool = False) -> bool:
    """Whether the independence moves pay: the trial's own acceptance or its estimate at
    stationarity (:func:`trial_acceptance`) at least ``min_accept``; for a likelihood
    estimator (``noisy``) the trial's alone.

    Either alone misleads on a deterministic density: the trial's chain starts at the best
    design point, where the acceptance is lowest, and its few dozen proposals measure it
    with an sd of 0.06-0.08 (0.14 where the estimate was 0.38); the estimate is three
    times as precise where the emulator predicts the weights, and collapses where it is
    far off in a region ``g`` proposes (0.01 where the trial accepted 0.53).  An
    estimator's noise is not in the emulator, and the estimate from a few dozen noisy
    weights comes out high (docs/benchmarks/emulator.md, "emulator-steps-fallback-estimate").
    """
    if noisy:
        return bool(trial >= min_accept)
    return bool(trial >= min_accept or estimate >= min_accept)


#: The acceptances from which a chain makes one iteration per draw: the estimate at
#: stationarity (:func:`trial_acceptance`), and for a likelihood estimator also the
#: trial's own (see :func:`moves_pay`).  The estimate's bound sits above ``lkj``'s
#: 0.35-0.40, where one iteration per draw fell short of ESS (docs/benchmarks/emulator.md,
#: "emulator-steps-trial-cv", "emulator-steps-fallback-estimate").
TRIAL_ONE_STEP, ESTIMATE_ONE_STEP = 0.4, 0.43


def steps_for_acceptance(trial: float, estimate: float, dim: int,
                         noisy: bool = False) -> int:
    """Iterations per draw after tuning: ``ESTIMATE_ONE_STEP / estimate`` rounded up (one
    at the bound), at most the kernels' default ``max(5, d)``; where the estimate is NaN,
    or for a likelihood estimator (``noisy``), the larger of that and
    ``TRIAL_ONE_STEP / trial`` (a NaN estimate left out).  One iteration per draw keeps a
    run of ``pm.sample``'s 1000 draws per chain near one evaluation per draw; more
    iterations (``n_steps=``) raise the ESS per run, and per evaluation where the build's
    evaluations weigh (measured on docs/benchmarks/emulator.md, "emulator-steps-losses")."""
    most = max(MIN_STEPS, dim)
    with_trial = noisy or not math.isfinite(estimate)
    if (with_trial and not trial > 0) or estimate == 0:
        return most
    steps = TRIAL_ONE_STEP / trial if with_trial else 0.0
    if estimate > 0:
        steps = max(steps, ESTIMATE_ONE_STEP / estimate)
    return int(min(most, max(1, math.ceil(steps - 1e-9))))


#: The screen's largest factor on the iterations per draw (the surrogate screen's too).
MAX_SCREEN_FACTOR = 4.0


def steps_for_screen(steps: int, pass_rate: float, weight: float) -> int:
    """Iterations per draw with the emulator's screen: ``steps`` (the rule without it)
    times the iterations one evaluation buys, ``1 / (weight pass_rate + 1 - weight)``
    (independence moves pass at ``pass_rate``; local moves are counted as evaluated, an
    upper bound), rounded, at most ``MAX_SCREEN_FACTOR`` times ``steps``.  A draw so costs
    about the evaluations it costs without the screen, and gains the ESS of the extra
    iterations in the bulk (docs/benchmarks/emulator.md, "emulator-steps-delayed")."""
    if not 0.0 <= pass_rate <= 1.0:  # NaN: nothing known, nothing gained
        return steps
    factor = 1.0 / max(weight * pass_rate + 1.0 - weight, 1.0 / MAX_SCREEN_FACTOR)
    return max(steps, round(steps * factor))


class EmulatedMetropolis:
    """The step's :class:`~.kernel.Metropolis` with the emulator in place of the log density:
    no true evaluation (``n_evals`` 0); the chain's record holds emulated values until the
    step evaluates its point again.

    Parameters
    ----------
    mh : Metropolis
        The step's decisions (its record and generator).
    log_density : callable
        The emulator: rows in model coordinates to log densities.
    """

    def __init__(self, mh: Metropolis, log_density: Callable[[np.ndarray], np.ndarray]):
        self.mh, self.log_density = mh, log_density

    @property
    def rng(self) -> np.random.Generator:
        return self.mh.rng

    def to_x(self, position: np.ndarray) -> np.ndarray:
        return self.mh.to_x(position)

    def value(self, x: np.ndarray) -> float:
        """The emulated log density at model point ``x``."""
        v = float(self.log_density(np.asarray(x, dtype=float)[None, :])[0])
        return v if math.isfinite(v) else -math.inf

    def evaluate(self, position: np.ndarray) -> tuple[ChainState, np.ndarray]:
        x = self.mh.to_x(position)
        return ChainState(position, self.value(x)), x

    def decide(self, state: ChainState, new: ChainState, x_new: np.ndarray,
               log_accept: float) -> tuple[ChainState, float, bool]:
        return self.mh.decide(state, new, x_new, log_accept)

    def step(self, state: ChainState, proposal: Proposal, adapts: bool = True,
             probe: bool = False) -> Iteration:
        if rejected_outright(proposal):
            return Iteration(state, 0.0, False, 0, adapts, probe)
        new, x_new = self.evaluate(proposal.position)
        moved, accept_prob, accepted = self.decide(
            state, new, x_new, new.logp - state.logp + proposal.log_correction)
        return Iteration(moved, accept_prob, accepted, 0, adapts, probe)
