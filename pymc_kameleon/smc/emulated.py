"""KameleonSMC's emulator mode: PyMC's stages become the emulator's rounds.

With ``pm.sample_smc(kernel=KameleonSMC, emulator=True)`` each of PyMC's stages is one
round of :class:`~pymc_kameleon.emulator.EmulatorRun` (the mode search and first design,
a design batch, or a correction round), each with at most one batch of true evaluations on
the executor.  ``beta`` shows the run's progress and reaches 1 with the last round; the
particles are then draws resampled from the correction's weighted sample, and the log
evidence is the correction's.  Where the emulator does not pay the run falls back, with a
warning, to the stages on the true density from fresh prior draws (the design's
evaluations stay counted).
"""

from __future__ import annotations

import warnings

import numpy as np
from pymc.blocking import DictToArrayBijection
from pymc.pytensorf import floatX

from ..emulator import EmulatorProblem, EmulatorRun, EmulatorSettings
from ..math.importance import resample_indices

__all__ = ["EMULATOR_STATS", "EmulatorMode", "PHASES"]

#: The emulator's phases, as the per-stage stat ``emulator_phase`` numbers them.
PHASES = ("start", "design", "correction", "done", "fallback")
#: The per-stage stats of the emulator mode (name: dtype, shape).
EMULATOR_STATS = {"emulator_phase": (int, []), "kish_ess": (float, []),
                  "pareto_k": (float, []), "emulator_error": (float, []),
                  "n_design": (int, [])}


def _point_values(fn, X: np.ndarray) -> np.ndarray:
    return np.array([float(fn(x)) for x in X])


class EmulatorMode:
    """The emulator rounds of one chain of ``kernel`` (a :class:`~.kernel.KameleonSMC`)."""

    def __init__(self, kernel, settings: EmulatorSettings):
        self.kernel = kernel
        dim = kernel.tempered_posterior.shape[1]
        problem = EmulatorProblem(
            log_prior=lambda X: _point_values(kernel.prior_logp_func, X),
            evaluate=lambda X: kernel.evaluations(floatX(X), kernel.rng, 1.0),
            prior_draws=self.prior_draws, dim=dim)
        self.run = EmulatorRun(problem, settings, kernel.draws, kernel.rng)

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
                "on the true density (its evaluations so far stay counted).", RuntimeWarning,
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
        idx = resample_indices(log_w, k.draws, k.rng)
        k.tempered_posterior = floatX(X[idx])
        k.prior_logp, k.likelihood_logp = prior[idx], lik[idx]
        k.tempered_posterior_logp = k.prior_logp + k.likelihood_logp
        k.log_marginal_likelihood, k.beta = log_evidence, 1.0
        if kish < k.draws:
            warnings.warn(
                f"KameleonSMC(emulator=...): the {k.draws} returned draws are resampled from "
                f"an importance sample worth about {kish:.0f} independent draws (Kish's ESS; "
                "stat kish_ess); ArviZ's ESS of them overstates it.", RuntimeWarning,
                stacklevel=4)

    def stats(self) -> dict:
        run = self.run
        kish, khat, _ = run.summary
        error = np.nan if run.emulator is None or run.emulator.gp is None else (
            run.emulator.held_out_error())
        return {"emulator_phase": PHASES.index(run.phase), "kish_ess": kish,
                "pareto_k": khat, "emulator_error": error,
                "n_design": 0 if not run.X else int(sum(len(x) for x in run.X))}
