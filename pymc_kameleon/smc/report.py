"""What KameleonSMC tells the user: warnings on the last stage, the progress bar's
columns, the settings PyMC saves as attributes of ``sample_stats``, and the run's summary."""

from __future__ import annotations

import warnings

import numpy as np

from ..bill import SUMMARY_LOGGER, summary_line
from ..compat.smc import ChainColumn, worker_chain
from ..particles.mutation import StageResult
from ..run_settings import RunSettings
from .progress import ChainCell, ProgressBoard
from .weighted import PENDING, chain_weighted, combine_weighted, write_weighted

__all__ = ["STATS", "finish_run", "log_summary", "progressbar_config", "progressbar_update",
           "settings", "stage_stats", "warn_final_stage"]

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


def _drawn_evals(cell: ChainCell) -> str:
    # only a bar that is drawn makes the mailbox of PyMC's chain processes: none without it
    cell.drawn()
    return cell.evals


def progressbar_config(board: ProgressBoard):
    """PyMC's SMC progress bar columns, plus each chain's evaluations so far and what it is
    doing, read live from the chains' cells (:mod:`~pymc_kameleon.smc.progress`)."""
    from rich.progress import TextColumn
    from rich.table import Column

    columns = [
        TextColumn("{task.fields[beta]:.4f}", table_column=Column("Beta", ratio=1)),
        ChainColumn("chain", _drawn_evals, "Evals", clock=True),
        ChainColumn("chain", lambda cell: cell.phase, "Phase"),
    ]
    return columns, {"beta": [0.0] * len(board.cells), "chain": list(board.cells)}


def progressbar_update(kernel):
    """The progress bar's update at each stage: its beta (the chain's cell is live)."""

    def update_stats(stats):
        return {"beta": stats.get("beta", 0.0)}

    return update_stats


def log_summary(members, seconds: float) -> None:
    """The run's one-line summary (logger ``pymc_kameleon.summary``): its evaluations, wall
    time and, where the draws are resampled from an importance sample, what that sample is
    worth (the number the chain's warning gives: :func:`~.emulated.warn_worth`)."""
    members = sorted(members, key=lambda m: -1 if m.chain is None else m.chain)
    per_chain = [m.chain_evals for m in members]
    worth = [m.chain_worth for m in members]
    draws = sum(m.chain_draws for m in members)
    text = ""
    if worth and all(np.isfinite(w) for w in worth) and sum(worth) < draws:
        text = (f"the {draws:,} returned draws are resampled from importance samples worth "
                f"about {sum(worth):,.0f} independent draws")
    SUMMARY_LOGGER.info(summary_line("KameleonSMC", per_chain, seconds, text))


def finish_run(members, seconds: float) -> None:
    """Once every chain is done: the run's summary, and the chains' weighted samples kept
    for PyMC's result and written where ``weights_path`` says
    (:mod:`~pymc_kameleon.smc.weighted`)."""
    log_summary(members, seconds)
    out = combine_weighted([(m.chain, m.payload) for m in members])
    PENDING[:] = [] if out is None else [out]  # for PyMC's result (compat.smc)
    path = members[0].get("weights_path") if members else None
    if path:
        write_weighted(path, out)


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
        "weights_path": o.weights_path or "",
    }


class ChainReport:
    """What PyMC reads of a ``KameleonSMC`` chain besides its particles: the per-stage stats,
    the settings it saves as attributes, and the progress bar's live columns."""

    _board: ProgressBoard | None = None  # its cells made when PyMC asks for the columns
    _cell: ChainCell | None = None  # the chain's live cell (detached: not on this bar)
    _chains_ended = 0  # chains of this kernel that ended in this process

    def __init__(self, *args, **kwargs):
        # the board exists before PyMC pickles the kernel for its chain processes (before
        # it asks for the columns), so that its copy goes with them (to post their chains)
        self._board = ProgressBoard(0)
        super().__init__(*args, **kwargs)

    def sample_stats(self) -> dict:
        """Per stage; the first stage's evaluations count the prior draws too."""
        if self._cell is not None:  # posted from PyMC's chain process, if it posts
            self._cell.stage_ended()
        return stage_stats(self)

    def progress_config(self, n_chains: int = 1) -> tuple[list, dict]:
        """PyMC's columns, each chain's evaluations so far and what it is doing, read live
        (:mod:`~pymc_kameleon.smc.progress`), also from PyMC's chain processes."""
        if self._board is None:
            self._board = ProgressBoard(0)
        self._board.set_chains(n_chains)  # keeps the mailbox's path named when pickled
        return progressbar_config(self._board)

    def progress_update_functions(self) -> tuple:
        return (progressbar_update(self),)

    def show_chain(self, count, phase: str) -> None:
        """The chain starts on the progress bar: ``count()`` its evaluations so far."""
        self._cell = (self._board or ProgressBoard(0)).begin_chain(count, phase)

    def sample_settings(self) -> RunSettings:
        """Attributes of ``sample_stats``; ``n_evals_total``: every chain's evaluations;
        the run's summary is logged once PyMC has every chain's."""
        # PyMC's chain k runs in its own process (cores > 1), or chains run one after the
        # other in this one
        chain = worker_chain()
        if chain is None:
            chain, self._chains_ended = self._chains_ended, self._chains_ended + 1
        return RunSettings(self._run, self.evaluations.total, settings(self),
                           chain_draws=len(self.tempered_posterior),
                           chain_worth=self.worth, on_sampled=finish_run, chain=chain,
                           payload=chain_weighted(self))
