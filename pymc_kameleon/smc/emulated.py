"""What a KameleonSMC chain returns besides its particles: the emulator mode, recycling.

**The emulator mode.**
With ``pm.sample_smc(kernel=KameleonSMC, emulator=True)`` each of PyMC's stages is one
round of :class:`~pymc_kameleon.emulator.EmulatorRun` (the mode search and first design,
a design batch, or a correction round), each with at most one batch of true evaluations on
the executor.  ``beta`` shows the run's progress and reaches 1 with the last round; the
particles are then draws resampled from the correction's weighted sample, and the log
evidence is the correction's.  Where the emulator does not pay the run falls back, with a
warning, to the stages on the true density from fresh prior draws (the design's
evaluations stay counted), and returns its draws recycled from every stage's evaluations,
topped up until they are worth their number as the correction's are.

**Recycling** (:func:`take_recycled`): after the last stage the chain returns ``recycle``
draws resampled from every stage's evaluated independent proposals, topped up by
importance-sampling rounds (:func:`pymc_kameleon.particles.recycling.recycle`), with a
warning where they are worth fewer independent draws than their number.
"""

from __future__ import annotations

import warnings

import numpy as np
from pymc.blocking import DictToArrayBijection
from pymc.pytensorf import floatX

from ..emulator import EmulatorProblem, EmulatorRun, EmulatorSettings
from ..math.draw_worth import resample_draws
from ..particles.recycling import TOP_UP_ROUNDS, RecycledPool, recycle

__all__ = ["EMULATOR_PHASES", "EMULATOR_STATS", "FALLBACK_WORTH", "EmulatorMode", "PHASES",
           "point_values", "take_recycled", "warn_worth"]

#: The emulator's phases, as the per-stage stat ``emulator_phase`` numbers them.
PHASES = ("start", "design", "correction", "done", "fallback")
#: What the progress bar says a chain does in each phase's round.
EMULATOR_PHASES = {"start": "mode search", "design": "design", "correction": "correction"}
#: The per-stage stats of the emulator mode (name: dtype, shape); ``budget_spent`` is 0 or
#: 1, as netCDF stores no booleans.
EMULATOR_STATS = {"emulator_phase": (int, []), "kish_ess": (float, []),
                  "weakest_ess": (float, []), "pareto_k": (float, []),
                  "emulator_error": (float, []), "design_edge": (float, []),
                  "past_edge": (float, []), "n_design": (int, []),
                  "budget_spent": (int, [])}


#: What the recycled pool of a run that fell back must be worth, in draws: resampling the
#: draws from a pool worth twice their number leaves them worth about their number
#: (docs/smc.md, "What a run costs").  The last stage ends once the pool is worth this.
FALLBACK_WORTH = 2.0


def warn_worth(what: str, n: int, ess: float, stat: str, kish: bool = True) -> None:
    """Warn that ``n`` equally weighted draws are worth only ``ess`` independent ones:
    Kish's ESS (copies of a draw then sit together), or else the sample's worth on its
    weakest coordinate, where ArviZ may count more than that."""
    measure, then = ((f"Kish's ESS; stat {stat}", "copies of a draw are kept next to each "
                      "other, so that ArviZ's ESS counts them about once") if kish else
                     (f"on the coordinate it is worth least on, by the delta method; Kish's "
                      f"ESS: stat {stat}", "ArviZ's ESS of that coordinate may count more"))
    warnings.warn(
        f"KameleonSMC{what}: the {n} returned draws are resampled from an importance sample "
        f"worth about {ess:.0f} independent draws ({measure}); {then}.", RuntimeWarning,
        stacklevel=5)


def take_recycled(kernel) -> None:
    """The chain's recycled draws after its last stage (the particles where no weight is
    finite): ``recycle`` of them, or, after the emulator's fallback without ``recycle``,
    ``draws`` of them with the pool topped up until it is worth as many."""
    k, o = kernel, kernel.options
    if o.recycle is None:  # the emulator's fallback
        size, target, what = k.draws, k.recycle_target, "(emulator=...)"
        extra = int(min(TOP_UP_ROUNDS * k.draws, k.evaluations.left()))
    else:
        size, target, what = o.recycle, None, "(recycle=...)"
        extra = int(min(o.recycle, k.evaluations.left()))
    out = recycle(k.pool, k.proposal, extra, k.draws, size,
                  lambda X: k.evaluations(X, k.rng, k.beta), k.rng, floatX, o, target)
    if out is None:
        return
    k.recycled_ess, k.log_evidence_recycled = out.ess, out.log_evidence
    k.worth = out.ess  # what the warning below and the run's summary say
    k.tempered_posterior, k.prior_logp, k.likelihood_logp = out.X, out.prior, out.lik
    k.tempered_posterior_logp = k.prior_logp + k.likelihood_logp
    if out.ess < size:
        warn_worth(what, size, out.ess, "recycled_ess")


def point_values(fn, X: np.ndarray) -> np.ndarray:
    """``fn`` (PyMC's compiled prior, one point a call) at every row of ``X``."""
    return np.array([float(fn(x)) for x in X])


class EmulatorMode:
    """The emulator rounds of one chain of ``kernel`` (a :class:`~.kernel.KameleonSMC`)."""

    def __init__(self, kernel, settings: EmulatorSettings):
        self.kernel = kernel
        dim = kernel.tempered_posterior.shape[1]
        problem = EmulatorProblem(
            log_prior=lambda X: point_values(kernel.prior_logp_func, X),
            evaluate=lambda X: kernel.evaluations(floatX(X), kernel.rng, 1.0),
            prior_draws=self.prior_draws, dim=dim)
        left = kernel.evaluations.left()
        self.run = EmulatorRun(problem, settings, kernel.draws, kernel.rng, budget=left)
        need = self.run.start_cost() + kernel.draws
        if left < need:
            raise ValueError(
                f"KameleonSMC(emulator=...): max_evals={kernel.evaluations.max_evals} cannot "
                f"pay for the mode search and first design (about {need - kernel.draws} "
                f"evaluations in {dim} dimensions) and a correction of one evaluation per "
                f"draw: give at least {need}, or fewer draws")

    def prior_draws(self, n: int) -> np.ndarray:
        """``n`` prior draws as rows (PyMC's own draws, ``ordered`` variables sorted)."""
        k, rows = self.kernel, []
        while sum(len(r) for r in rows) < n:
            init = k.initialize_population()
            rows.append(np.array([DictToArrayBijection.map(
                {v.name: init[v.name][i] for v in k.variables}).data
                for i in range(k.draws)], dtype=float))
        return np.concatenate(rows)[:n]

    def round(self) -> bool:
        """One round; False once the run fell back (the kernel then runs its stages)."""
        run, k = self.run, self.kernel
        run.step()
        if run.phase == "fallback":
            warnings.warn(
                f"KameleonSMC(emulator=...): {run.reason}; the run falls back to the stages "
                "on the true density and returns draws recycled from every stage's "
                "evaluations (its evaluations so far stay counted).", RuntimeWarning,
                stacklevel=4)
            return False
        if run.phase == "done":
            self._output()
        else:  # progress: a round of the design or correction, never 1 before the end
            k.beta = min(0.99, 1.0 - 1.0 / (1.0 + 0.2 * run.rounds))
        return True

    def _output(self) -> None:
        """The draws resampled from the weighted sample, and its log evidence; a warning
        where they are worth fewer than their number."""
        run, k = self.run, self.kernel
        X, prior, lik, log_w = run.correction.weighted()
        kish, khat, log_evidence = run.summary
        # copies together where the sample is worth fewer draws than asked, no draw worth
        # much more than one otherwise: ArviZ's count then follows the draws' worth
        # (docs/benchmarks/emulator.md, "emulator-honest-draws", "emulator-capped-draws")
        idx = resample_draws(X, log_w, k.draws, k.rng)
        k.tempered_posterior = floatX(X[idx])
        k.prior_logp, k.likelihood_logp = prior[idx], lik[idx]
        k.tempered_posterior_logp = k.prior_logp + k.likelihood_logp
        k.log_marginal_likelihood, k.beta = log_evidence, 1.0
        k.worth = run.worth  # what the warning below and the run's summary say
        # the check for mass past the sample's edge (a curved ridge's arms) did not run
        unchecked = np.isfinite(run.settings.edge_weight) and np.isnan(run.past_edge)
        if run.budget_spent:
            unreliable = (f"; Pareto k-hat {khat:.2f} > {run.settings.max_khat:g}: the "
                          "weights are unreliable, the draws and the evidence may be wrong"
                          if not khat <= run.settings.max_khat else "")
            unreliable += "; the check for mass past its edge did not run" if unchecked else ""
            if run.past_edge > run.settings.edge_weight:  # flagged, no budget to act on it
                unreliable += (f"; a point just past its edge outweighs it by "
                               f"{run.past_edge:.1f} nats (stat past_edge): the draws "
                               "likely miss mass there, as on a curved ridge's arms")
            warnings.warn(
                f"KameleonSMC(emulator=...): the evaluation budget max_evals="
                f"{k.evaluations.max_evals} ended the correction after "
                f"{run.correction.pool.size} evaluations, its weighted sample worth about "
                f"{run.worth:.0f} independent draws where "
                f"{run.settings.target_ess * k.draws:.0f} were sought{unreliable}.  Raise "
                "max_evals, or ask for fewer draws.", RuntimeWarning, stacklevel=4)
        elif unchecked:
            warnings.warn(
                "KameleonSMC(emulator=...): the check for mass past the weighted sample's "
                "edge did not run (max_evals left fewer evaluations than its batch, or the "
                "sample is a point or two): on a curved posterior the draws may miss mass "
                "there.  Raise max_evals.", RuntimeWarning, stacklevel=4)
        if run.worth < k.draws:
            warn_worth("(emulator=...)", k.draws, run.worth, "kish_ess", kish <= run.worth)

    def fall_back(self) -> None:
        """Restart the chain from fresh prior draws, evaluated truly, at ``beta = 0``; its
        stages' evaluations are recycled into the draws (docs/benchmarks/emulator.md,
        "emulator-fallback-recycled")."""
        k = self.kernel
        if k.pool is None:
            k.pool, k.recycle_target = RecycledPool(), FALLBACK_WORTH * k.draws
        k.tempered_posterior = floatX(self.prior_draws(k.draws))
        k.prior_logp, k.likelihood_logp = k.evaluations(k.tempered_posterior, k.rng, 0.0)
        k.beta = 0.0
        k.update_beta_and_weights()

    def stats(self) -> dict:
        run = self.run
        kish, khat, _ = run.summary
        return {"emulator_phase": PHASES.index(run.phase), "kish_ess": kish,
                "weakest_ess": run.worth, "pareto_k": khat, "emulator_error": run.error,
                "design_edge": run.edge,
                "past_edge": run.past_edge,
                "n_design": 0 if not run.X else int(sum(len(x) for x in run.X)),
                "budget_spent": run.budget_spent}
