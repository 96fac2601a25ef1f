"""A step's emulator (``emulator=True``): built at the chain's first tuning draw, then used.

:class:`StepEmulator` is the step layer of :mod:`pymc_kameleon.adaptation.independence`:
it gives the engine (:class:`~pymc_kameleon.emulator.EmulatorRun`) the block's prior (free)
and the step's log density (every call a counted true evaluation), runs the run's start
and design rounds at the chain's first tuning draw, fits the independence proposal ``g`` to
the emulator's posterior, and measures it in a short trial on the true density.  Each draw
then gets an :class:`EmulatorDraw`: the kernels' moves on the emulator while tuning, the
mixture of independence and local moves after (with ``delayed=True`` each screened by the
emulator first: delayed acceptance).  Where the emulator does not pay (the run falls back,
or the trial finds independence moves rarely accepted) the chain tunes and samples as
without it, from the trial's point, with one warning per step and the stat
``emulator_phase``.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..adaptation.independence import (
    EmulatedMetropolis,
    EmulatorMoves,
    IndependenceProposal,
    independence_step,
    moves_pay,
    stage1_pass_rate,
    steps_for_acceptance,
    steps_for_screen,
    trial_acceptance,
)
from ..adaptation.kernel import ChainState, Iteration, Metropolis
from ..adaptation.screen import DelayedMetropolis
from ..compat.arviz import MAX_KHAT, pareto_khat
from ..emulator import EmulatorProblem, EmulatorRun
from ..emulator.surrogate import LogDensityEmulator
from .start import ChainStart, _prior_point_fn

__all__ = ["EMULATOR_OFF", "EMULATOR_PHASES", "EmulatorDraw", "EmulatorState",
           "StepEmulator", "run_warnings"]

#: The chain's use of the emulator, as the stat ``emulator_phase`` numbers it: none (off, or
#: not built yet), moves on the emulator while tuning, independence moves after tuning, or
#: fallen back to the step without it.
EMULATOR_PHASES = ("off", "tuning", "sampling", "fallback")

#: The emulator's stats of a draw without it.
EMULATOR_OFF = {"emulator_active": False, "emulator_phase": 0,
                "accept_independent": math.nan, "accept_local": math.nan,
                "independence_khat": math.nan, "emulator_stage1": math.nan,
                "trial_accept": math.nan, "accept_estimate": math.nan}

#: Pareto's k-hat of the independence proposals' weights ``p / g``: estimated once a chain
#: has made ``KHAT_MIN`` of them, again after every ``KHAT_EVERY`` more; above ``MAX_KHAT``
#: ``g``'s tails are too thin for importance sampling to be reliable (Vehtari et al.), and
#: an exact chain then corrects them only by long stays that a short run may not make
#: (docs/benchmarks/emulator.md, "emulator-khat").
KHAT_MIN, KHAT_EVERY = 100, 50
#: A chain whose independence moves after tuning were accepted less often than this sits
#: where its emulator's posterior is not (the build measured at least ``min_accept``,
#: :func:`~pymc_kameleon.adaptation.independence.moves_pay`); the run warns.
MIN_RUN_ACCEPT = 0.1
#: Free draws of ``g`` on the emulator behind the trial's control variate
#: (:func:`~pymc_kameleon.adaptation.independence.trial_acceptance`).
TRIAL_FREE_DRAWS = 2000


@dataclass
class EmulatorState:
    """One chain's emulator (kept in its record)."""

    phase: str = "off"
    # the run's emulator, its rounds and held-out error (the run itself holds the
    # problem's functions, which the step's saved state need not pickle)
    emulator: LogDensityEmulator | None = None
    rounds: int = 0
    error: float = math.nan
    g: IndependenceProposal | None = None
    trial_accept: float = math.nan  # the trial's mean acceptance of independence moves
    # the moves' acceptance at stationarity, from the trial's evaluations with the
    # emulator as control variate: it sets the iterations per draw
    accept_estimate: float = math.nan
    pass_rate: float = math.nan  # the screen's own acceptance of g (its stage 1)
    # log p(y) - log g(y) of every truly evaluated independence proposal (the trial's too),
    # and their Pareto k-hat (NaN below KHAT_MIN proposals) at khat_n of them
    log_weights: list = field(default_factory=list)
    khat: float = math.nan
    khat_n: int = 0
    n_steps: int = 1  # iterations per draw after tuning
    emulated: bool = False  # the record's stored value is the emulator's (while tuning)
    reason: str = ""  # why the chain samples without the emulator


class EmulatorDraw:
    """One draw's moves: ``mh`` for the kernel, and the independence moves after tuning."""

    def __init__(self, state: EmulatorState, mh: Metropolis, weight: float, evals: int,
                 record: Any):
        self.state, self.mh, self.weight, self.evals = state, mh, weight, evals
        self.record = record
        self.free = state.phase == "tuning"  # the kernels' moves cost no true evaluation
        self.accepts: tuple[list, list] = ([], [])  # independence, local
        self.screen: DelayedMetropolis | None = None  # after tuning with delayed=True

    @property
    def n_steps(self) -> int | None:
        """Iterations of the draw after tuning (None: the chain's own count)."""
        return self.state.n_steps if self.state.phase == "sampling" else None

    def step(self, kernel, kstate, state: ChainState, tune: bool,
             rng: np.random.Generator) -> Iteration:
        """One iteration: after tuning an independence move with probability ``weight`` (a
        coin that does not look at the state: the mixture of the two kernels is exact),
        else the kernel's own move, both through the screen when there is one; moves on
        the emulator count no evaluation."""
        w = self.record
        independent = self.state.phase == "sampling" and rng.random() < self.weight
        if independent:
            it, _ = independence_step(self.mh, state, w.x, self.state.g, w.precond.to_u,
                                      self.state.log_weights, self.screen)
        else:
            it = kernel.step(kstate, state, self.screen or self.mh, tune)
        self.accepts[0 if independent else 1].append(it.accept_prob)
        return it._replace(n_evals=0) if self.free else it

    def stats(self) -> dict:
        ind, loc, st = *self.accepts, self.state
        tally = self.screen.tally if self.screen is not None else None
        n = len(st.log_weights)
        if st.phase == "sampling" and n >= KHAT_MIN and n - st.khat_n >= KHAT_EVERY:
            st.khat, st.khat_n = pareto_khat(np.asarray(st.log_weights)), n
        return {"emulator_active": st.phase in ("tuning", "sampling"),
                "emulator_phase": EMULATOR_PHASES.index(st.phase),
                "accept_independent": float(np.mean(ind)) if ind else math.nan,
                "accept_local": float(np.mean(loc)) if loc else math.nan,
                "independence_khat": st.khat,
                "emulator_stage1": (tally.passed / tally.screened if tally and tally.screened
                                    else math.nan),
                "trial_accept": st.trial_accept, "accept_estimate": st.accept_estimate}


class StepEmulator:
    """The emulator of one step (its chains' :class:`EmulatorState` live in their records).

    Parameters
    ----------
    moves : EmulatorMoves
        The settings.
    start : ChainStart
        The step's start: its model and block (prior draws, the raveling).
    density : LogDensity
        The step's log density (counted true evaluations).
    dim : int
        The block's dimension.
    """

    def __init__(self, moves: EmulatorMoves, start: ChainStart, density, dim: int):
        self.moves, self.start, self.density, self.dim = moves, start, density, dim
        self.warned = False  # one warning per step, not per chain or draw
        self._prior = None

    # ------------------------------------------------------------------ the problem
    def _log_prior(self):
        if self._prior is None:
            from ..smc.evaluation import vectorised_logp

            model = self.start.model
            fn = vectorised_logp(model, self.start.vars, {"mode": "FAST_COMPILE"},
                                 prior_only=True)
            if fn is None:
                raise ValueError("the prior's log density cannot be compiled for a batch")
            self._prior = lambda X: np.asarray(fn(np.asarray(X, dtype=self.density.dtype)),
                                               dtype=float)[:, 0]
        return self._prior

    def problem(self, rng: np.random.Generator, count: list) -> EmulatorProblem:
        """The engine's problem; ``count[0]`` counts the true evaluations."""
        model, ravel = self.start.model, self.start.ravel
        if {v.name for v in self.start.vars} != {v.name for v in model.value_vars}:
            raise ValueError("the step's block is not the whole model (the emulator needs "
                             "the prior of every variable)")
        log_prior, draw = self._log_prior(), _prior_point_fn(model)
        search = self.density.searching()  # failures are -inf, not errors

        def evaluate(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            logp = np.array([search(self.density.round(x)) for x in X])
            count[0] += len(X)
            prior = log_prior(X)
            return prior, np.where(np.isfinite(logp), logp - prior, -np.inf)

        def prior_draws(n: int) -> np.ndarray:
            return np.array([ravel(draw(int(s))) for s in rng.integers(2**31, size=n)])

        prior_draws(1)  # a prior that cannot be drawn from raises here
        return EmulatorProblem(log_prior, evaluate, prior_draws, self.dim)

    # ------------------------------------------------------------------ a draw
    def draw(self, record, mh: Metropolis, tune: bool, warmup, rng: np.random.Generator,
             name: str) -> EmulatorDraw:
        """The draw's moves; the emulator is built at the chain's first tuning draw, and
        the stored value evaluated truly at the first draw after tuning on the emulator."""
        st, evals = record.emulator, 0
        if st is None:
            st = record.emulator = EmulatorState()
            if tune:
                evals = self._build(record, mh, warmup, rng, name)
        if st.phase == "tuning" and not tune:
            st.phase = "sampling"
        if st.phase == "sampling" and st.emulated:  # end on a truly evaluated point
            with np.errstate(all="ignore"):
                record.logp = self.density(record.x)
            st.emulated, evals = False, evals + 1
        if st.phase == "tuning":
            emulated = EmulatedMetropolis(mh, st.emulator)
            if not st.emulated:
                record.logp, st.emulated = emulated.value(record.x), True
            mh = emulated
        out = EmulatorDraw(st, mh, self.moves.weight, evals, record)
        if st.phase == "sampling" and self.moves.delayed:
            out.screen = DelayedMetropolis(mh, st.emulator)
        return out

    def _build(self, record, mh: Metropolis, warmup, rng: np.random.Generator,
               name: str) -> int:
        """The run's start and design, ``g`` and the trial; the true evaluations spent."""
        st, moves, count = record.emulator, self.moves, [0]
        try:
            problem = self.problem(rng, count)
        except Exception as exc:  # no prior to draw from, a block, a prior Op
            self._fall_back(st, f"{exc}", name)
            return count[0]
        run = EmulatorRun(problem, moves.settings, moves.posterior_draws, rng)
        while run.phase in ("start", "design"):  # each round one batch of evaluations
            run.step()
        st.emulator, st.rounds, st.error = run.emulator, run.rounds, run.error
        if run.phase == "fallback":
            self._fall_back(st, run.reason, name)
            if run.emulator is not None:  # start where the search found the mode
                mode = run.emulator.modes[0]
                self._move_to_best(record, run, warmup, mode.cov)
            return count[0]
        st.g = IndependenceProposal.fit(run.posterior, rng, moves.settings)
        self._move_to_best(record, run, warmup,
                            np.atleast_2d(np.cov(run.posterior, rowvar=False)))
        # the trial: true independence moves from the best design point
        state = ChainState(record.precond.to_u(record.x), record.logp)
        accepts, proposals = [], []
        for _ in range(moves.n_trial(self.dim)):
            it, _ = independence_step(mh, state, record.x, st.g, record.precond.to_u,
                                      st.log_weights, proposals=proposals)
            state, evals = it.state, it.n_evals
            count[0] += evals
            accepts.append(it.accept_prob)
        st.trial_accept = float(np.mean(accepts))
        st.accept_estimate = self._accept_estimate(st, proposals, rng)
        if not moves_pay(st.trial_accept, st.accept_estimate, moves.min_accept,
                         record.noisy):
            self._fall_back(st, f"a trial of {len(accepts)} independence proposals on the "
                            f"true density accepted {st.trial_accept:.2f} of them "
                            f"(estimated at stationarity: {st.accept_estimate:.2f}; "
                            f"min_accept={moves.min_accept:g})", name)
        else:
            st.phase = "tuning"
            st.n_steps = steps_for_acceptance(st.trial_accept, st.accept_estimate, self.dim,
                                              record.noisy)
            if moves.delayed:  # the screen's saved evaluations buy iterations (free)
                st.pass_rate = stage1_pass_rate(st.g, st.emulator, run.posterior, rng)
                st.n_steps = steps_for_screen(st.n_steps, st.pass_rate, moves.weight)
        return count[0]

    @staticmethod
    def _accept_estimate(st: EmulatorState, proposals: list,
                         rng: np.random.Generator) -> float:
        """The independence moves' acceptance from the trial's proposals ``(y, log p(y) -
        log g(y))`` with the emulator as control variate on ``TRIAL_FREE_DRAWS`` free
        draws of ``g`` (NaN where it cannot be had)."""
        if len(proposals) < 2:
            return math.nan
        Y = np.array([y for y, _ in proposals])
        free = st.g.sample_rows(TRIAL_FREE_DRAWS, rng)
        with np.errstate(all="ignore"):
            log_w_emulator = st.emulator(Y) - st.g.logpdf(Y)
            log_w_free = st.emulator(free) - st.g.logpdf(free)
        return trial_acceptance(np.array([w for _, w in proposals]), log_w_emulator,
                                log_w_free)

    def _move_to_best(self, record, run: EmulatorRun, warmup, cov: np.ndarray) -> None:
        """The chain to the best design point (its true value stored), the warm-up's map
        from ``cov`` there."""
        X, logp = run.points()
        logp = np.where(np.isfinite(logp), logp, -np.inf)
        i = int(np.argmax(logp))
        if logp[i] >= record.logp:
            record.x, record.logp, record.key = self.density.round(X[i]), float(logp[i]), b""
        warmup.start_at(record.walk, record.x, cov)

    def _fall_back(self, st: EmulatorState, reason: str, name: str) -> None:
        st.phase, st.reason = "fallback", reason
        if not self.warned:
            self.warned = True
            warnings.warn(f"{name}(emulator=...): {reason}; the chain tunes and samples "
                          "without the emulator (its evaluations so far stay counted).",
                          RuntimeWarning, stacklevel=5)


def run_warnings(sample_stats) -> list[str]:
    """What a finished run of steps with ``emulator=`` must tell its user (empty if none).

    Read from the run's ``sample_stats`` (draws after tuning, ``emulator_phase`` 2): chains
    whose independence proposal covers the tails thinly (last ``independence_khat`` above
    ``MAX_KHAT``), and chains whose independence moves were accepted less often than
    ``MIN_RUN_ACCEPT``.  Both chains are exact, but neither is shown right by R-hat or ESS.
    """
    if "independence_khat" not in sample_stats.data_vars:
        return []
    phase = np.asarray(sample_stats["emulator_phase"].values)
    khat = np.asarray(sample_stats["independence_khat"].values, dtype=float)
    accept = np.asarray(sample_stats["accept_independent"].values, dtype=float)
    thin, rare = [], []
    for c in range(phase.shape[0]):
        on = phase[c] == EMULATOR_PHASES.index("sampling")
        if not on.any():
            continue
        k = khat[c][on][-1]
        if k > MAX_KHAT:
            thin.append(f"{c} ({k:.2f})")
        a = accept[c][on]
        if np.isfinite(a).any() and np.nanmean(a) < MIN_RUN_ACCEPT:
            rare.append(f"{c} ({np.nanmean(a):.0%})")
    out = []
    if thin:
        out.append(
            f"emulator=...: in chain(s) {', '.join(thin)} the independence proposal covers "
            f"the posterior's tails thinly (Pareto k-hat of p / g above {MAX_KHAT}; stat "
            "independence_khat).  The chains are exact, but a run this long may visit "
            "those tails too rarely, and in long stays: sds and extreme quantiles may come "
            "out too short or too long.  Run longer (more draws, or more iterations per "
            "draw than the stat n_steps shows: n_steps=2 or more), or compare with a run "
            "without the emulator.")
    if rare:
        out.append(
            f"emulator=...: in chain(s) {', '.join(rare)} independence moves were accepted "
            f"less than {MIN_RUN_ACCEPT:.0%} of the time after tuning (stat "
            "accept_independent): the chain samples where its emulator's posterior is "
            "not.  Compare the chains, or sample without the emulator.")
    return out
