"""Progress of the chains of :func:`pymc_kameleon.distributed.sample`, drawn in the driver.

The tasks log progress messages on one scheduler event topic (:data:`_PROGRESS_TOPIC`, at
most every :data:`_PROGRESS_INTERVAL` seconds per chain); :class:`_Progress` subscribes to
it and draws rich progress bars, like ``pm.sample``, with each chain's log-density
evaluations so far (the stat ``n_evals_total`` of this package's steps).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

__all__: list[str] = []

#: Scheduler event topic of the chains' progress messages (one topic: its log is bounded).
_PROGRESS_TOPIC = "pymc-kameleon-progress"
#: Seconds between two progress messages (and cancellation checks) of one chain.
_PROGRESS_INTERVAL = 0.2


class _Progress:
    """Progress bars in the driver, fed by the workers' events (rich, like ``pm.sample``).

    ``mode`` is ``pm.sample``'s ``progressbar``: false for none, ``"combined"`` or
    ``"combined+stats"`` for one bar over all draws, anything else true for one per chain.
    Rich redraws the bars in its own thread; the events update them from the client's
    event-loop thread.
    """

    def __init__(self, chains: int, tune: int, draws: int, mode: Any, run_id: str):
        self.total = tune + draws
        self.done = [0] * chains
        self.evals: list[int | None] = [None] * chains  # what this package's steps report
        self.run_id = run_id
        self._lock = threading.Lock()
        self._bar = None
        if not mode:
            return
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._combined = isinstance(mode, str) and mode.startswith("combined")
        self._bar = Progress(
            TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
            TimeElapsedColumn(), TimeRemainingColumn(), TextColumn("{task.fields[evals]}"),
            TextColumn("{task.fields[where]}"),
        )
        if self._combined:
            self._tasks = [self._bar.add_task(f"{chains} chains", total=chains * self.total,
                                              where="", evals="")]
        else:
            self._tasks = [self._bar.add_task(f"Chain {i}", total=self.total, where="queued",
                                              evals="") for i in range(chains)]
        self._bar.start()

    def handle_event(self, event: tuple[float, Mapping[str, Any]]) -> None:
        """Subscriber of the progress topic (runs in the client's event-loop thread)."""
        _, msg = event
        if msg.get("run") != self.run_id:
            return  # another run's message on the shared topic
        chain = int(msg["chain"])
        with self._lock:
            if 0 <= chain < len(self.done) and self.done[chain] < self.total:
                self.done[chain] = int(msg["done"])  # a re-run task starts again from 0
                if msg.get("evals") is not None:
                    self.evals[chain] = int(msg["evals"])
                self._update(chain, str(msg.get("worker", "")))

    def finish(self, chain: int) -> None:
        with self._lock:
            self.done[chain] = self.total
            self._update(chain, "done")

    def _update(self, chain: int, where: str) -> None:
        if self._bar is None:
            return
        if self._combined:
            self._bar.update(self._tasks[0], completed=sum(self.done),
                             evals=_evals_text([e for e in self.evals if e is not None]))
        else:
            self._bar.update(self._tasks[chain], completed=self.done[chain], where=where,
                             evals=_evals_text([] if self.evals[chain] is None
                                               else [self.evals[chain]]))

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def _evals_text(counts: list[int]) -> str:
    """The bar's evaluations field: their sum, or nothing for steps that do not count."""
    return f"{sum(counts):,} evals" if counts else ""
