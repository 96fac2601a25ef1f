"""The columns a step adds to PyMC's progress bar.

A step lists its columns as ``(stat name, header)`` pairs; PyMC asks the step class for the
columns and their initial text (:func:`progressbar_config`) and for a function that turns a
draw's stats into the cells' text (:func:`progress_update`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from rich.progress import TextColumn
from rich.table import Column

from ..compat import StepHooks

__all__ = ["ProgressColumns", "progress_text", "progress_update", "progressbar_config"]

Columns = Sequence[tuple[str, str]]


def progressbar_config(columns: Columns, n_chains: int = 1) -> tuple[list, dict]:
    """The progress bar's rich columns and their initial cells, as PyMC asks a step class
    for them (:class:`~pymc_kameleon.compat.StepHooks`)."""
    out = [TextColumn(f"{{task.fields[{stat}]}}", table_column=Column(header, ratio=1))
           for stat, header in columns]
    stats = {stat: [progress_text(stat, 0.0, False)] * n_chains for stat, _ in columns}
    return out, stats


def progress_update(columns: Columns) -> Callable[[dict], dict[str, str]]:
    """PyMC's progress bar update function: a draw's stats to the cells' text."""
    keys = [stat for stat, _ in columns]

    def update_stats(step_stats):
        tune = bool(step_stats.get("tune", False))
        return {key: progress_text(key, step_stats[key], tune) for key in keys}

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

    @classmethod
    def progress_update_functions(cls) -> tuple[Callable[[dict], dict[str, str]]]:
        """The function from a draw's stats to the cells' text, in a tuple."""
        return (progress_update(cls.progress_columns),)
