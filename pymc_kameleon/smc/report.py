"""What KameleonSMC tells the user: warnings on the last stage, the progress bar's
columns, and the settings PyMC saves as attributes of ``sample_stats``."""

from __future__ import annotations

import warnings

import numpy as np

from ..particles.mutation import StageResult

__all__ = ["STATS", "progressbar_config", "progressbar_update", "settings", "stage_stats",
           "warn_final_stage"]

#: The per-stage stats (name: dtype, shape).
STATS: dict[str, tuple[type, list]] = {
    name: (int if name in ("n_steps", "n_nan", "n_errors", "n_evals") else float, [])
    for name in ("log_marginal_likelihood", "beta", "accept_rate", "n_steps", "nu2",
                 "bandwidth", "accept_local", "accept_independent", "n_nan", "n_errors",
                 "refreshed", "n_evals", "unique", "drift", "recycled_ess",
                 "log_evidence_recycled")}


def stage_stats(kernel) -> dict:
    """The stats of the stage just ended (the first stage's evaluations count the prior
    draws too)."""
    stage, proposal = kernel.stage, kernel.proposal  # None in the emulator's rounds
    counts = kernel.evaluations.stage_counts()  # n_evals, n_nan, n_errors
    acc, acc_local, acc_ind = (np.nan,) * 3 if stage is None else stage.acceptance()

    def of(obj, name):
        return np.nan if obj is None else getattr(obj, name)

    return {
        "log_marginal_likelihood": (kernel.log_marginal_likelihood if kernel.beta == 1
                                    else np.nan),
        "beta": kernel.beta, "accept_rate": acc, "n_steps": kernel.n_steps,
        "nu2": of(proposal, "nu2"), "bandwidth": of(proposal, "bandwidth"),
        "accept_local": acc_local, "accept_independent": acc_ind, **counts,
        "refreshed": of(stage, "refreshed"),
        "unique": of(stage, "unique"), "drift": of(stage, "drift"),
        "recycled_ess": kernel.recycled_ess,
        "log_evidence_recycled": kernel.log_evidence_recycled,
    }


def warn_final_stage(stage: StageResult, recycling: bool) -> None:
    """Warn where the last stage's particles are not yet, or no longer, a fair sample."""
    if stage.drift > 3:
        warnings.warn(
            f"KameleonSMC: the particles were still moving toward the posterior when the "
            f"last stage ended: their mean log density rose by {stage.drift:.1f} standard "
            f"errors after the first of its {stage.n_steps} MH steps. The draws are not yet "
            "from the posterior (typical of strongly correlated posteriors): give every "
            "stage more MH steps (min_steps=25) and check R-hat across chains.",
            RuntimeWarning, stacklevel=4)
    if not recycling and stage.unique < 0.5:
        warnings.warn(
            f"KameleonSMC: only {stage.unique:.0%} of the final particles are distinct "
            f"after {stage.n_steps} MH steps (acceptance {stage.acceptance()[0]:.2g}): the "
            "particle system has collapsed and its draws understate the posterior's "
            "spread. Raise max_steps or draws, or check the model.",
            RuntimeWarning, stacklevel=4)


def progressbar_config(n_chains: int = 1):
    """PyMC's SMC progress bar columns, plus the chain's evaluations so far."""
    from rich.progress import TextColumn
    from rich.table import Column

    columns = [
        TextColumn("{task.fields[beta]:.4f}", table_column=Column("Beta", ratio=1)),
        TextColumn("{task.fields[evals]}", table_column=Column("Evals", ratio=1)),
    ]
    return columns, {"beta": [0.0] * n_chains, "evals": ["-"] * n_chains}


def progressbar_update(kernel):
    """The progress bar's update: the evaluations are known where the chain runs in this
    process (``cores=1``, the way to use an executor); chains in PyMC's worker processes
    show "-"."""

    def update_stats(stats):
        ev = kernel.evaluations
        return {"beta": stats.get("beta", 0.0), "evals": "-" if ev is None else f"{ev.total:,}"}

    return update_stats


def settings(kernel) -> dict:
    """The run's settings (NaN, not None, so that InferenceData saves to netCDF)."""
    o = kernel.options
    return {
        "_n_draws": kernel.draws,
        "threshold": kernel.threshold,
        "_n_tune": kernel.n_steps,
        "correlation_threshold": o.correlation_threshold,
        "gamma": o.gamma,
        "n_subsample": o.n_subsample,
        "max_steps": o.max_steps,
        "independent_weight": o.independent_weight,
        "refresh_fraction": np.nan if o.refresh_fraction is None else o.refresh_fraction,
        "max_evals": np.nan if o.max_evals is None else o.max_evals,
        "waste_free": o.chain_length(kernel.draws, kernel.tempered_posterior.shape[1]) or 0,
        "recycle": 0 if o.recycle is None else o.recycle,
        "executor": "none" if kernel.executor is None else type(kernel.executor).__name__,
        "on_error": o.on_error,
    }
