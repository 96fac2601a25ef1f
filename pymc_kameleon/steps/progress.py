"""The columns a step adds to PyMC's progress bar.

A step lists its columns as ``(stat name, header)`` pairs; PyMC asks the step class for the
columns and their initial text (:func:`progressbar_config`) and the step for a function that
turns a draw's stats into the cells' text (:func:`progress_update`).  Every step also shows
the chain's log-density evaluations so far (:class:`EvaluationsColumn`): the sum over the
model's steps of this package, each reporting its own count under its own field.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from rich.progress import ProgressColumn, TextColumn
from rich.table import Column
from rich.text import Text

from ..compat import StepHooks

__all__ = ["EVALS_FIELD", "EvaluationsColumn", "ProgressColumns", "progress_text",
           "progress_update", "progressbar_config"]

Columns = Sequence[tuple[str, str]]

#: Prefix of the progress-bar fields holding a step's evaluations so far (one per step).
EVALS_FIELD = "n_evals_total@"


class EvaluationsColumn(ProgressColumn):
    """The chain's log-density evaluations so far: the sum of the fields named
    :data:`EVALS_FIELD` + a step's key, one per step of this package (a compound step of
    several shows their total; PyMC keeps one column per header).  ``-`` before the first
    draw."""

    def __init__(self, header: str = "Evals"):
        super().__init__(table_column=Column(header, ratio=1))

    def render(self, task) -> Text:
        counts = [v for k, v in task.fields.items() if k.startswith(EVALS_FIELD)]
        return Text("-" if not counts else f"{sum(counts):,}")


def progressbar_config(columns: Columns, n_chains: int = 1) -> tuple[list, dict]:
    """The progress bar's rich columns and their initial cells, as PyMC asks a step class
    for them (:class:`~pymc_kameleon.compat.StepHooks`); the evaluations column last."""
    out = [TextColumn(f"{{task.fields[{stat}]}}", table_column=Column(header, ratio=1))
           for stat, header in columns]
    stats = {stat: [progress_text(stat, 0.0, False)] * n_chains for stat, _ in columns}
    return [*out, EvaluationsColumn()], stats


def progress_update(columns: Columns, key: str = "") -> Callable[[dict], dict]:
    """PyMC's progress bar update function: a draw's stats to the cells' text, and the
    step's evaluations so far (the stat ``n_evals_total``) under ``EVALS_FIELD + key``."""
    keys = [stat for stat, _ in columns]
    evals = EVALS_FIELD + key

    def update_stats(step_stats):
        tune = bool(step_stats.get("tune", False))
        out: dict = {stat: progress_text(stat, step_stats[stat], tune) for stat in keys}
        if "n_evals_total" in step_stats:
            out[evals] = int(step_stats["n_evals_total"])
        return out

    return update_stats


def progress_text(stat: str, value: float, tune: bool) -> str:
    """A progress bar cell: a stat not defined yet (NaN, before the sampler's own kernel
    starts) reads ``warm-up`` while tuning and ``-`` otherwise, not ``nan``."""
    value = float(value)
    if math.isnan(value):
        return "warm-up" if tune else "-"
    return f"{value:0.2f}" if stat == "accept" else f"{value:0.3g}"


class ProgressColumns(StepHooks):
    """PyMC's progress-bar hooks of a step class, from its ``progress_columns``."""

    #: (stat name, progress bar header) pairs shown during sampling.
    progress_columns: tuple[tuple[str, str], ...] = (("accept", "Accept"),)

    @classmethod
    def progress_config(cls, n_chains: int = 1) -> tuple[list, dict]:
        """The progress bar's columns and their initial cells for ``n_chains`` chains."""
        return progressbar_config(cls.progress_columns, n_chains)

    def progress_update_functions(self) -> tuple[Callable[[dict], dict]]:
        """The function from a draw's stats to the cells' text, in a tuple (its
        evaluations field is this step's: the steps of one model add up)."""
        return (progress_update(self.progress_columns, f"{id(self):x}"),)
