"""The emulator's run, round by round: search, design, correction, or a fallback.

:class:`EmulatorRun` needs only batch functions (free of PyMC): the prior's log density
(free), the true log density's prior and likelihood terms (each call one batch of true
evaluations), and prior draws.  Each call of :meth:`EmulatorRun.step` is one round, with at
most one batch of true evaluations apart from the mode search:

1. *start*: prior draws and the multi-start Laplace search for the mode
   (:func:`~pymc_kameleon.adaptation.laplace.laplace_start`), then the first design;
2. *design*: fit the emulator, sample its posterior by tempered SMC from the prior (free),
   evaluate a batch where the emulator is probable and uncertain; until the emulator's
   posterior moves less than ``settle`` sds between rounds and at most ``max_edge`` of it
   lies past the design's edge, where the emulator's sd is above a nat;
3. *correction*: adaptive importance-sampling rounds on the true density
   (:mod:`.correction`) until Pareto's k-hat is at most ``max_khat`` and the weighted
   sample is worth ``target_ess`` times the draws asked for on every coordinate (Kish's
   ESS and the delta method's per coordinate, whichever is less), within
   ``max_extra_rounds``; a heavy point behind a valley from every known mode leads to a
   climb, and a new mode found there restarts the correction; before it ends, a batch
   just past the weighted sample's edge checks that no point there would outweigh it
   (``past_edge``), else the design resumes with its probable points among its own.

With a ``budget`` of true evaluations the design ends where one more batch would eat into
what the planned correction needs, the correction's rounds are sized to fit what is left,
and the run ends (``budget_spent``) once the rest cannot pay a quarter of a round.

It falls back (``phase == "fallback"``, with the reason) where the emulator does not pay:
above ``max_dim`` dimensions, without a usable mode, or when the correction's weights stay
unreliable.  ``docs/emulator.md`` has the algorithm and its exactness argument.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..adaptation.laplace import climb, laplace_start
from ..adaptation.laplace_searches import laplace_searches
from ..math.draw_worth import coordinate_worth
from ..particles.recycling import RecycledPool
from ..particles.tempering import FreeEvaluations, temper
from .correction import Correction, correction_proposal
from .design import batch, carry_on, edge_directions, initial_design
from .settings import ENGINE_DEFAULTS, EmulatorSettings
from .surrogate import LogDensityEmulator, Mode

__all__ = ["EmulatorProblem", "EmulatorRun", "EmulatorSettings"]

#: The check past the weighted sample's edge (:meth:`EmulatorRun._misses_past_edge`): of
#: ``EDGE_SAMPLE`` draws resampled from it, the farthest ``EDGE_FAR`` are carried on
#: ``EDGE_STEP`` whitened units, the farther half of them also half and one unit (160
#: points, one batch); the ``EDGE_PATHS`` heaviest are then followed ``EDGE_CHASE`` units
#: further, each step the heaviest of ``EDGE_TRIES`` (340 evaluations).  The half and one
#: unit steps alone missed the arms of a 4-d banana in two runs of twelve; followed
#: outward, the arms' weights mostly grow to 2-9 nats above the sample's, a log scale's
#: tail's to at most 1.4 (docs/benchmarks/emulator.md, "emulator-past-edge-chase").
EDGE_SAMPLE, EDGE_FAR, EDGE_STEP = 400, 0.2, 2.0
EDGE_PATHS, EDGE_CHASE, EDGE_TRIES = 5, 4, 9
#: A point past the edge counts only where its log density is above this weighted quantile
#: of the sample's: a curved tail's heavy points lie 8-9 nats below a posterior's top, an
#: arm's as high as the sample's own draws (docs/benchmarks/emulator.md, as above).
EDGE_PROBABLE = 0.01
#: The design's own points past the edge count too, this many nats lighter: a resumed
#: design's points in a curved ridge's arm outweighed the sample by 1-13 nats where the
#: check's points did not, a plain Gaussian's and a log scale's by at most 0.6
#: (docs/benchmarks/emulator.md, "emulator-past-edge-design").
EDGE_DESIGN_MARGIN = 1.0


@dataclass
class EmulatorProblem:
    """What the run evaluates: ``log_prior(X)`` (free), ``evaluate(X)`` the prior and
    likelihood terms of a batch of true evaluations, ``prior_draws(n)``, the dimension."""

    log_prior: Callable[[np.ndarray], np.ndarray]
    evaluate: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
    prior_draws: Callable[[int], np.ndarray]
    dim: int


@dataclass
class EmulatorRun:
    """One emulator run (see the module's description); call :meth:`step` until
    :attr:`phase` is ``"done"`` or ``"fallback"``."""

    problem: EmulatorProblem
    settings: EmulatorSettings
    draws: int
    rng: np.random.Generator
    budget: float = np.inf  # true evaluations the run may spend
    phase: str = "start"
    reason: str = ""  # why the run fell back
    rounds: int = 0
    X: list = field(default_factory=list)  # every truly evaluated point, with its terms
    prior: list = field(default_factory=list)
    lik: list = field(default_factory=list)
    emulator: LogDensityEmulator | None = None
    posterior: np.ndarray | None = None  # draws of the emulator's posterior
    correction: Correction = field(default_factory=lambda: new_correction())
    summary: tuple = (np.nan, np.nan, np.nan)  # Kish's ESS, k-hat, log evidence
    worth: float = np.nan  # the weighted sample's worth on its weakest coordinate
    moved: tuple = (np.inf, np.inf)  # the emulator posterior's last two moves, in sds
    error: float = np.nan  # the last fit's held-out error near the mode, in nats
    edge: float = np.nan  # share of the emulator's posterior where its sd is above a nat
    past_edge: float = np.nan  # the last check past the sample's edge (_misses_past_edge)
    planned: int = 0  # correction rounds left before the weights are judged
    per_round: int = 0  # true evaluations of a correction round
    next_round: int = 0  # of the next one where less is missing (0: per_round)
    extra: int = 0  # correction rounds added
    spent: int = 0  # true evaluations so far, the mode search's too
    budget_spent: bool = False  # the run ended because the budget could not pay a round
    restarts: int = 0  # corrections handed back to the design
    climbs: int = 0  # climbs from the correction's points towards an unseen mode
    late_modes: list = field(default_factory=list)  # modes those climbs found
    design_rounds: int = 0  # rounds of the design since it (re)started
    probing: bool = False  # the design settled once and probes the tails (tail_probe)
    # the tempering on the emulator starts every round from the same prior draws with the
    # same random numbers, so that its posterior moves between rounds with the emulator,
    # not with Monte Carlo noise (the design's stopping rule compares them)
    start: np.ndarray | None = None
    seed: int = 0
    tempered_at: np.ndarray | None = None  # the emulator at the draws when they were made

    def __post_init__(self) -> None:
        self.settings = self.settings.completed(ENGINE_DEFAULTS)

    # ------------------------------------------------------------------ helpers
    def _n(self, value: int | None, per_dim: int) -> int:
        return int(value) if value is not None else per_dim * self.problem.dim

    def _terms(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The prior and likelihood terms of one batch of true evaluations."""
        self.spent += len(X)
        prior, lik = self.problem.evaluate(X)
        return np.atleast_1d(np.asarray(prior, float)), np.atleast_1d(np.asarray(lik, float))

    def _logp_rows(self, X: np.ndarray) -> np.ndarray:
        """The true log density of one batch, counted but not kept as design points."""
        prior, lik = self._terms(X)
        return prior + lik

    def _evaluate(self, X: np.ndarray) -> None:
        """One batch of true evaluations, kept as design points."""
        self._keep(X, *self._terms(X))

    def _keep(self, X: np.ndarray, prior: np.ndarray, lik: np.ndarray) -> None:
        """Rows ``X`` and their prior and likelihood terms become design points."""
        self.X.append(np.asarray(X, dtype=float))
        self.prior.append(prior)
        self.lik.append(lik)

    def left(self) -> float:
        """True evaluations left in the budget."""
        return self.budget - self.spent

    def start_cost(self) -> int:
        """About the most that the mode search and the first design spend: the least
        budget that leaves the correction one evaluation per draw is this plus the draws."""
        d, s = self.problem.dim, self.settings
        climbs = s.search_starts * (s.search_climb * (d + 1) + 6)  # with _rises_to's 5
        return int(self._n(s.n_initial, 10) + climbs + s.search_keep * 35 * (d + 1))

    def correction_total(self) -> float:
        """True evaluations the planned correction rounds take together."""
        return self.settings.correction_size or 1.25 * self.draws

    def edge_cost(self) -> int:
        """True evaluations of the batch past the weighted sample's edge (0: no check)."""
        if not np.isfinite(self.settings.edge_weight):
            return 0
        far = int(EDGE_FAR * EDGE_SAMPLE)
        return far + 2 * (far // 2) + EDGE_PATHS * EDGE_CHASE * EDGE_TRIES

    def points(self) -> tuple[np.ndarray, np.ndarray]:
        """Every design point and its true log density."""
        return np.concatenate(self.X), np.concatenate(self.prior) + np.concatenate(self.lik)

    def _fit(self) -> None:
        X, logp = self.points()
        old = None if self.posterior is None else self.emulator(self.posterior)
        self.emulator.fit(X, logp, self.rng)
        self.error = self.emulator.held_out_error()
        if old is not None:  # the last posterior's draws reweighted to the new emulator
            new = self.emulator(self.posterior)
            self.moved = (self.moved[1], _moved(self.posterior, new - old))
            # with keep_draws the draws stand until the emulator's posterior has moved by
            # `settle` since they were made: the tempering is most of the run's CPU
            # (docs/benchmarks/emulator.md, "emulator-keep-draws")
            if (self.settings.keep_draws
                    and _moved(self.posterior, new - self.tempered_at) < self.settings.settle):
                return
        emulated = FreeEvaluations(self.problem.log_prior, self.emulator)
        if self.start is None:
            self.start, self.seed = self.problem.prior_draws(self.draws), int(
                self.rng.integers(2**63))
        self.posterior = temper(self.start, emulated, np.random.default_rng(self.seed),
                                self.settings)
        if self.settings.keep_draws:
            self.tempered_at = self.emulator(self.posterior)

    def _fall_back(self, reason: str) -> None:
        self.phase, self.reason = "fallback", reason

    # ------------------------------------------------------------------ rounds
    def step(self) -> None:
        """One round."""
        self.rounds += 1
        getattr(self, f"_{self.phase}")()

    def _start(self) -> None:
        d, s = self.problem.dim, self.settings
        if d > s.max_dim:
            return self._fall_back(f"dimension {d} > max_dim={s.max_dim}")
        # one batch of prior draws, the first design's share of them; the search starts
        # from the best few (one optimisation from one point can end in a spurious mode)
        self._evaluate(self.problem.prior_draws(max(self._n(s.n_initial, 10) // 2, 2)))
        X, logp = self.points()
        order = np.argsort(-np.where(np.isfinite(logp), logp, -np.inf))
        if not np.isfinite(logp[order[0]]):
            return self._fall_back("no prior draw has a finite log density")
        modes = self._modes([X[i] for i in order[:s.search_starts] if np.isfinite(logp[i])])
        if not modes:  # a Gaussian that does not describe the target still serves as
            return self._fall_back("the mode search found no usable mode")  # a mean
        self.emulator = LogDensityEmulator(modes, s.window, s.mean_df)
        self._evaluate(initial_design(modes, self.problem.prior_draws,
                                      self._n(s.n_initial, 10) - len(X), self.rng,
                                      prior_share=0.0))
        self._fit()
        self.phase = "design"

    def _modes(self, starts: list[np.ndarray], known: tuple[Mode, ...] = ()) -> list[Mode]:
        """The distinct modes found from ``starts`` (short climbs from each; at most
        ``search_keep`` finished, highest first, none that ended in a mode found or
        ``known``: within its Laplace typical set or, by :func:`_rises_to`, below it on
        the same slope), ``known`` ones included, best first: those whose mass may matter
        (within ``d / 2 + 3 sqrt(d / 2) + 10`` nats of the best)."""
        d, s = self.problem.dim, self.settings
        margin = d / 2 + 3 * np.sqrt(d / 2) + 10

        logp_rows = self._logp_rows  # the search's points are not fitted: they crowd the mode
        climbed = laplace_searches(logp_rows, starts, s.search_climb * (d + 1), search=climb)
        found: list[Mode] = sorted(known, key=lambda m: -m.logp)
        finished = 0
        for x0, value in sorted(climbed, key=lambda c: -c[1]):
            if finished >= s.search_keep or (found and value < found[0].logp - margin):
                break
            if any(_within(m, x0)[0] or _rises_to(m, x0, value, logp_rows) for m in found):
                continue  # this climb ended in a mode already found
            finished += 1
            # no check of the Gaussian against the target (50 evaluations): the mean
            # function uses it either way; its batches go to the executor
            res = laplace_start(lambda x: logp_rows(x[None, :])[0], x0, 35 * (d + 1),
                                logp_rows=logp_rows, check=False, follow_ridges=True)
            cov = res.hessian_cov
            if cov is None or not np.isfinite(res.logp):
                continue
            if any(np.allclose(res.mode, m.mean, rtol=1e-3, atol=1e-4) for m in found):
                continue
            found.append(Mode(np.asarray(res.mode, float), np.asarray(cov, float),
                              float(res.logp)))
            found.sort(key=lambda m: -m.logp)
        return [m for m in found if m.logp >= found[0].logp - margin] if found else []

    def _design(self) -> None:
        s = self.settings
        optimism = max(s.design_optimism, s.tail_probe if self.probing else 0.0)
        candidates = self.posterior
        if s.design_optimism > 0:  # candidates where g, not only the emulator, goes
            # (not for tail_probe: see its description)
            whitening, g = correction_proposal(self.posterior, self.rng, s)
            candidates = np.concatenate(
                [candidates, whitening.rows_to_x(g.sample(len(self.posterior), self.rng))])
        self._evaluate(batch(self.emulator, candidates, self._n(s.batch, 3), optimism))
        self._fit()
        self.design_rounds += 1
        # past the design's edge the emulator is its mean function, unsure by a nat or more
        self.edge = float(np.mean(self.emulator.predict(self.posterior)[1] > 1.0))
        if self.design_rounds >= s.min_rounds and not self.error <= s.max_error:
            return self._fall_back(
                f"the emulator predicts held-out evaluations badly (error {self.error:.2g} nats "
                f"near the mode, max_error={s.max_error:g})")
        settled = (max(self.moved) < s.settle and self.design_rounds >= s.min_rounds
                   and self.edge <= s.max_edge)
        if settled and s.tail_probe > 0 and not self.probing:
            self.probing, settled = True, False  # the tails' round(s) follow
        # the budget keeps what the planned correction needs: no batch eats into it
        total = self.correction_total()
        short = self.left() < total + self._n(s.batch, 3)
        if settled or self.design_rounds >= s.max_rounds or short:
            self.phase = "correction"
            self.planned = s.correction_rounds
            self.per_round = max(1, int(np.ceil(
                max(min(total, self.left()), 1) / s.correction_rounds)))

    def _correction(self) -> None:
        s, d = self.settings, self.problem.dim
        # the next proposal: fitted to the weighted sample once it holds enough distinct
        # weight (a fit to a few points is too narrow), else to the emulator's posterior;
        # the last round's summary describes the pool
        kish = self.summary[0] if self.correction.pool.size else 0.0
        fit_to = (self.correction.resampled(self.draws, self.rng) if kish >= 10 * d
                  else self.posterior)
        for m in self.late_modes:  # modes the search missed: a share of the fit each
            fit_to = np.concatenate([fit_to, m.whitening.rows_to_x(
                self.rng.standard_normal((len(fit_to) // (1 + len(self.late_modes)), d)))])
        n = int(min(self.next_round or self.per_round, self.left()))
        if n < 1:  # the mode search and design spent the budget
            return self._fall_back(f"the budget of {self.budget:.0f} evaluations is spent "
                                   "before the correction")
        self.correction.round(fit_to, n, self._terms, self.rng, s)
        self.planned, self.next_round = self.planned - 1, 0
        self.summary = kish, khat, _ = self.correction.summary()
        if self._unseen_mode():  # the rounds so far missed it: a new correction covers it
            self._pool_to_design()
            self.planned, self.summary = s.correction_rounds, (np.nan, np.nan, np.nan)
            return None
        # the budget cannot pay another round of a useful size: the run ends here, what
        # the weights are worth is reported (k-hat, the worth), never a silent answer
        spent = self.left() < np.ceil(self.per_round / 4)
        if kish < 2 * d and not spent:  # the proposal missed where the posterior is
            return self._restart_design(kish, khat)
        # a coordinate the proposals reach poorly (a curved tail) is worth less than
        # Kish's ESS says, and its returned draws would claim more than that
        # (docs/benchmarks/emulator.md, "emulator-weakest-coordinate")
        X, _, _, log_w = self.correction.weighted()
        self.worth = min(kish, float(np.min(coordinate_worth(X, log_w))))
        if self.planned > 0 and not spent:
            return
        reliable = khat <= s.max_khat and kish >= s.min_ess * self.draws
        enough = self.worth >= s.target_ess * self.draws
        if reliable and (enough or self.extra >= s.max_extra_rounds):
            # not where the budget cut the rounds short (their warning says the check did
            # not run): their proposals lag the tails, and on the PK ODE fit the check
            # flagged most such chains with right answers (docs/benchmarks/emulator.md,
            # "emulator-past-edge-shapes")
            if self._misses_past_edge():
                return self._restart_design(kish, khat, "a point past the weighted "
                                            f"sample's edge outweighs it by "
                                            f"{self.past_edge:.1f} nats")
            self.phase = "done"
        elif spent:
            self.phase, self.budget_spent = "done", True
        elif self.extra < s.max_extra_rounds:  # short of reliable weights or of the worth
            self.planned, self.extra = 1, self.extra + 1
            if reliable:  # short of the worth only: as many points as that asks for (the
                # worth grows about with the pool), at least a quarter of a round
                missing = s.target_ess * self.draws / max(self.worth, 1.0) - 1.0
                self.next_round = int(np.clip(np.ceil(missing * self.correction.pool.size),
                                              np.ceil(self.per_round / 4), self.per_round))
        else:
            self._restart_design(kish, khat)

    def _misses_past_edge(self) -> bool:
        """Whether a point past the weighted sample's edge both outweighs the sample and is
        as probable as its draws: its weight under the last round's proposal more than
        ``edge_weight`` nats above every weight of that round (``past_edge``, the largest
        such excess, -inf where no point is probable enough), its log density above the
        sample's ``EDGE_PROBABLE`` quantile.  The points (see ``EDGE_SAMPLE``) go on along
        the direction each far draw lies from its neighbours
        (:func:`~.design.edge_directions`), then the heaviest are followed outward
        (:func:`~.design.carry_on`); the design's points farther out than the nearest far
        draw count too, ``EDGE_DESIGN_MARGIN`` nats lighter.  Along a curved ridge the
        proposals end short of its arms while k-hat and Kish's ESS look sound
        (docs/benchmarks/emulator.md, "emulator-past-edge").  The probable points become
        design points (used if the design resumes); skipped where the budget cannot pay
        them."""
        s, pool = self.settings, self.correction.pool
        self.past_edge = np.nan  # until it runs: an earlier check's value is not this one's
        if not self.edge_cost() or self.left() < self.edge_cost():
            return False
        X, prior, lik, log_w = pool.weighted()
        try:
            whitening, U, away = edge_directions(
                self.correction.resampled(EDGE_SAMPLE, self.rng), EDGE_FAR)
        except (ValueError, np.linalg.LinAlgError):  # the sample is a point or two
            return False
        floor = _quantile(prior + lik, log_w, EDGE_PROBABLE)
        last = slice(len(X) - pool.stages[-1][2], len(X))  # the last round's points
        top = np.max(self._log_weight(X[last], (prior + lik)[last]))
        D, log_p = self.points()  # the design's points farther out than the nearest far draw
        past = np.sum(whitening.rows_to_u(D) ** 2, axis=1) > np.min(np.sum(U**2, axis=1))
        excess = [np.where(past & (log_p > floor),
                           self._log_weight(D, log_p) - top - EDGE_DESIGN_MARGIN, -np.inf)]

        def weigh(V):  # one batch: each point's excess, -inf where it is not probable
            Y = whitening.rows_to_x(V)
            prior, lik = self._terms(Y)
            log_p = prior + lik
            probable = log_p > floor
            # only these join the design: fitted to the tail's points too, the process
            # put spurious peaks past the sample, which a resumed design chased until it
            # fell back (docs/benchmarks/emulator.md, "emulator-past-edge-restart")
            self._keep(Y[probable], prior[probable], lik[probable])
            weights = self._log_weight(Y, log_p)
            excess.append(np.where(probable, weights - top, -np.inf))
            return weights

        tenth = slice(len(U) // 2)  # (farthest first) also just past the edge
        ahead = U + EDGE_STEP * away
        w = weigh(np.concatenate([ahead, U[tenth] + 0.5 * away[tenth],
                                  U[tenth] + away[tenth]]))
        heavy = np.argsort(-np.where(np.isnan(w[:len(U)]), -np.inf, w[:len(U)]))[:EDGE_PATHS]
        carry_on(ahead[heavy], away[heavy], weigh, self.rng, EDGE_CHASE, EDGE_TRIES)
        self.past_edge = float(np.max(np.concatenate(excess)))
        return self.past_edge > s.edge_weight

    def _log_weight(self, Y: np.ndarray, log_p: np.ndarray) -> np.ndarray:
        """Log weights of rows ``Y`` of true log density ``log_p`` under the last round's
        proposal (-inf where ``log_p`` is not finite)."""
        return np.where(np.isfinite(log_p), log_p - self.correction.pool.stage_log_density(Y),
                        -np.inf)

    def _unseen_mode(self) -> bool:
        """Whether the last round's heaviest point outside every mode's Laplace typical set
        lies in a basin of its own (:func:`_rises_to` finds a valley towards every mode, 5
        evaluations each) where a climb finds a mode that matters, at most
        ``search_keep`` climbs a run; the next proposals then cover it.  A chain whose
        search missed a mode otherwise returns that mode's weight far off, with weights
        that look sound (docs/benchmarks/emulator.md, "emulator-unseen-mode")."""
        s, pool = self.settings, self.correction.pool
        if self.climbs >= s.search_keep or self.left() < self.correction_total():
            return False  # (nor when the budget could not pay a new correction)
        X, _, _, log_w = pool.weighted()
        last = slice(len(X) - len(pool.X[-1]), len(X))
        modes = [*self.emulator.modes, *self.late_modes]
        outside = ~np.any([_within(m, X[last]) for m in modes], axis=0)
        w = np.exp(log_w[last] - np.max(log_w))
        w = np.where(outside & np.isfinite(w), w, 0.0) / np.sum(np.exp(log_w - np.max(log_w)))
        if not np.max(w, initial=0.0) >= 1e-3:  # no point that holds a share of the mass
            return False
        i = int(np.argmax(w))
        x, value = X[last][i], float(pool.prior[-1][i] + pool.lik[-1][i])
        if any(_rises_to(m, x, value, self._logp_rows) for m in modes):
            return False
        self.climbs += 1
        found = self._modes([x], tuple(modes))
        new = [m for m in found if not any(m is k for k in modes)]
        self.late_modes += new
        return bool(new)

    def _restart_design(self, kish: float, khat: float, why: str = "") -> None:
        """Hand the correction's true evaluations to the design and resume it; fall back
        once ``max_restarts`` corrections failed (``why``: what failed, if not the
        weights' k-hat or Kish's ESS)."""
        if self.left() < self.draws:  # the stages could not pay even their prior draws
            self.phase, self.budget_spent = "done", True
            return None
        if self.restarts >= self.settings.max_restarts:
            return self._fall_back(
                f"the importance weights stay unreliable ({why or f'Pareto k-hat {khat:.2f}'}"
                f", Kish ESS {kish:.0f} of {self.draws} draws)")
        self.restarts += 1
        self._resume_design()

    def _pool_to_design(self) -> None:
        """The correction's true evaluations become design points, at most ``handover`` of
        them (the heaviest half: where the emulator rated the posterior lowest; the rest at
        random); a new correction.  A process on all of thousands of points costs minutes
        a design round (docs/benchmarks/emulator.md, "emulator-handover")."""
        X, prior, lik, log_w = self.correction.weighted()
        keep = self._n(self.settings.handover, 30)
        if len(X) > keep:
            heavy = np.argsort(-np.where(np.isfinite(log_w), log_w, -np.inf))[:keep // 2]
            rest = np.setdiff1d(np.arange(len(X)), heavy)
            pick = np.concatenate([heavy, self.rng.choice(rest, keep - len(heavy),
                                                          replace=False)])
            X, prior, lik = X[pick], prior[pick], lik[pick]
        self._keep(X, prior, lik)
        self.correction, self.extra = new_correction(), 0

    def _resume_design(self) -> None:
        """The design again, the correction's true evaluations among its points."""
        self._pool_to_design()
        self.phase = "design"
        self.design_rounds, self.probing = 0, False
        self.moved = (np.inf, np.inf)
        self._fit()


def _within(mode: Mode, X: np.ndarray) -> np.ndarray:
    """Whether each row of ``X`` (or the point ``X``) lies where ``mode``'s Laplace
    quadratic has fallen by less than ``d / 2 + 3 sqrt(d / 2)`` (the mode's own mass lies
    there): a climb ending there ended in that mode."""
    d = len(mode.mean)
    U = mode.whitening.rows_to_u(np.atleast_2d(np.asarray(X, float)))
    return 0.5 * np.sum(U**2, axis=1) <= d / 2 + 3 * np.sqrt(d / 2)


def _rises_to(mode: Mode, x: np.ndarray, value: float,
              logp_rows: Callable[[np.ndarray], np.ndarray], n: int = 5) -> bool:
    """Whether the log density on the straight line from ``x`` (its value ``value``) to
    ``mode`` stays at or above ``value`` at ``n`` interior points (one batch): no valley
    between, so a climb that ended at ``x`` (a curved ridge's slow arm, outside the
    mode's Laplace typical set) would finish in ``mode``.  Finishing it cost about
    ``40 (d + 1)`` evaluations to find the mode again (docs/benchmarks/emulator.md,
    "emulator-search-same-slope")."""
    t = np.arange(1, n + 1)[:, None] / (n + 1)
    x = np.asarray(x, dtype=float)
    values = np.asarray(logp_rows(x + t * (mode.mean - x)), dtype=float)
    return bool(np.all(values >= value))  # NaN, -inf (a failed evaluation): a valley


def _quantile(values: np.ndarray, log_w: np.ndarray, q: float) -> float:
    """The ``q`` quantile of ``values`` weighted by ``exp(log_w)`` (non-finite weights and
    values count as none and as lowest)."""
    w = np.exp(log_w - np.max(log_w))
    w = np.where(np.isfinite(w), w, 0.0)
    values = np.where(np.isfinite(values), values, -np.inf)
    order = np.argsort(values)
    cdf = np.cumsum(w[order])
    return float(values[order][min(np.searchsorted(cdf, q * cdf[-1]), len(cdf) - 1)])


def new_correction() -> Correction:
    """An empty correction.  Each round's points weigh by their own proposal's density:
    later rounds' proposals are fitted to earlier rounds' weighted points, and the
    deterministic-mixture weights of those points then come out short in the tails
    (``docs/benchmarks/emulator.md``)."""
    return Correction(RecycledPool(own_stage=True))


def _moved(X: np.ndarray, log_ratio: np.ndarray) -> float:
    """The largest change of a mean or sd, in sds, when draws ``X`` of one emulator's
    posterior are reweighted to another's (``log_ratio``: the log ratio of the two
    emulators at them): a change of the emulator, free of the samples' Monte Carlo noise."""
    w = np.exp(log_ratio - np.max(log_ratio))
    w /= w.sum()
    mean, sd = X.mean(0), np.maximum(X.std(0), 1e-300)
    new_mean = w @ X
    new_sd = np.sqrt(w @ (X - new_mean) ** 2)
    return float(max(np.max(np.abs(new_mean - mean) / sd), np.max(np.abs(new_sd - sd) / sd)))
