"""What ``KameleonSMC`` shows on ``pm.sample_smc``'s progress bar while a chain runs.

PyMC updates the SMC progress bar once per stage, with the stage's inverse temperature
(the bar reaches its end when the last stage *starts*); the evaluations of a stage, the
recycling after the last one and the emulator's rounds happen in between.  So the kernel
puts one live :class:`ChainCell` per chain into the bar's fields (:class:`ProgressBoard`,
made when PyMC asks for the columns): rich redraws the bar several times a second from its
own thread, and each redraw reads the cells' evaluations (counted as each point is done,
:attr:`~pymc_kameleon.smc.evaluation.Evaluations.live`), what the chain is doing, and the
chain's own start and end, which set its ``Elapsed``
(:class:`~pymc_kameleon.compat.smc.ChainColumn`).

Chains in this process (``cores=1``, the way to use an ``executor``) are shown live;
chains in PyMC's worker processes (``cores > 1``) show ``-`` and PyMC's clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["ChainCell", "ProgressBoard"]


class ChainCell:
    """One chain's live state on the progress bar.

    Attributes
    ----------
    phase : str
        What the chain is doing (``"stages"``, ``"recycling"``, the emulator's round,
        ``"done"``); ``"-"`` before it starts here.
    started, ended : float or None
        ``time.monotonic()`` at the chain's start and end in this process.
    """

    def __init__(self, board: ProgressBoard | None):
        self.board = board  # None: a chain not on this process's bar (nothing shown)
        self.count: Callable[[], int] | None = None
        self.phase = "-"
        self.started: float | None = None
        self.ended: float | None = None

    def start(self, count: Callable[[], int], phase: str = "stages") -> None:
        """The chain starts here; ``count()`` gives its evaluations so far."""
        self.count, self.phase, self.started, self.ended = count, phase, time.monotonic(), None

    def end(self) -> None:
        """The chain's last stage (and recycling) is done."""
        if self.ended is None:
            self.ended = time.monotonic()
        self.phase = "done"

    @property
    def evals(self) -> str:
        """The chain's evaluations so far, as the bar shows them (``-`` before its start)."""
        return "-" if self.count is None else f"{self.count():,}"

    @property
    def local(self) -> bool:
        """Whether the board's chains run in this process (one of them started here)."""
        return self.board is not None and self.board.started > 0

    def __format__(self, spec: str) -> str:  # a plain "{task.fields[...]}" shows the count
        return format(self.evals, spec)

    def __str__(self) -> str:
        return self.evals

    def __reduce__(self):  # a cell never travels with the kernel: a detached one
        return ChainCell, (None,)


def _no_board():
    return None


class ProgressBoard:
    """The cells of a run's ``n_chains`` chains; chains started in this process take them
    in order (``pm.sample_smc`` runs them one after the other, chain 0 first)."""

    def __init__(self, n_chains: int):
        self.cells = [ChainCell(self) for _ in range(int(n_chains))]
        self.started = 0

    def begin_chain(self, count: Callable[[], int], phase: str = "stages") -> ChainCell:
        """The next chain's cell, started (a detached one once every cell is taken)."""
        if self.started >= len(self.cells):
            return ChainCell(None)
        cell = self.cells[self.started]
        self.started += 1
        cell.start(count, phase)
        return cell

    def __reduce__(self):  # the board stays in the process that draws the bar
        return _no_board, ()
