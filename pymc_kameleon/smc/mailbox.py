"""A small file shared by the process that draws the SMC progress bar and PyMC's chain
processes (``pm.sample_smc(cores > 1)``), where each chain posts what its bar shows.

PyMC's chain processes send the main process only each stage's beta, so each one writes
its chain's record of a :class:`Mailbox` instead: evaluations so far, phase, and the
chain's start and end.  The mailbox is a numpy memmap on a temporary file, the same with
every start method (fork, spawn, forkserver) and with no shared-memory segment to track.
Times are wall-clock (``time.time()``): each process has its own monotonic clock.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
import uuid
import weakref
from collections.abc import Callable

import numpy as np

__all__ = ["POST_EVERY", "RECORD", "ChainPost", "Mailbox"]

#: One chain's record; a time of 0 means "not yet" (``time.time()`` is never 0).
RECORD = np.dtype([("evals", "<i8"), ("phase", "S16"), ("started", "<f8"), ("ended", "<f8")])
#: Seconds between two posts of a running chain's evaluations (rich redraws the bar about
#: ten times a second; a post costs microseconds).
POST_EVERY = 0.25


def _remove(path: str) -> None:
    # the file may be gone already (a temp-dir cleaner) or, on Windows, still mapped
    with contextlib.suppress(OSError):
        os.remove(path)


class Mailbox:
    """The records of ``n_chains`` chains in the file at ``path``.

    Parameters
    ----------
    path : str
        The file.
    records : numpy.memmap
        Its ``n_chains`` records (dtype :data:`RECORD`).
    """

    def __init__(self, path: str, records: np.ndarray):
        self.path, self.records = path, records

    @classmethod
    def create(cls, path: str, n_chains: int) -> Mailbox | None:
        """A new mailbox at ``path``, every record empty (None where it cannot be made);
        its file is deleted when it is collected."""
        try:  # sized and zeroed under another name first: a reader never sees it half made
            fd, draft = tempfile.mkstemp(prefix="pymc-kameleon-bar-", suffix=".part",
                                         dir=os.path.dirname(path))
            os.close(fd)
            records = np.memmap(draft, dtype=RECORD, mode="w+", shape=(max(n_chains, 1),))
            records.flush()
            os.replace(draft, path)
        except (OSError, ValueError):
            return None
        box = cls(path, records)
        weakref.finalize(box, _remove, path)
        return box

    @staticmethod
    def new_path() -> str:
        """A path for a mailbox, in the temporary directory (nothing is made there)."""
        return os.path.join(tempfile.gettempdir(), f"pymc-kameleon-bar-{uuid.uuid4().hex}.bin")

    @classmethod
    def open(cls, path: str) -> Mailbox | None:
        """The mailbox at ``path``, to write into (None where it is gone or malformed)."""
        try:
            return cls(path, np.memmap(path, dtype=RECORD, mode="r+"))
        except (OSError, ValueError):
            return None

    def __len__(self) -> int:
        return len(self.records)

    def read(self, chain: int) -> tuple[int, str, float, float] | None:
        """Chain ``chain``'s evaluations, phase, start and end (end 0: running), or None
        before it starts."""
        if not 0 <= chain < len(self.records):
            return None
        started = float(self.records["started"][chain])
        if started == 0:
            return None
        phase = bytes(self.records["phase"][chain]).decode("utf-8", "replace")
        return (int(self.records["evals"][chain]), phase, started,
                float(self.records["ended"][chain]))


class ChainPost:
    """What a chain in a worker process posts to its record of a mailbox: its phase, its
    start and end, and its evaluations every :data:`POST_EVERY` seconds from a daemon
    thread while it runs (the count is read, never changed: the draws are the same).

    Parameters
    ----------
    mailbox : Mailbox
        The run's mailbox.
    chain : int
        The chain's record.
    count : callable
        ``count()``: the chain's evaluations so far.
    """

    def __init__(self, mailbox: Mailbox, chain: int, count: Callable[[], int],
                 every: float = POST_EVERY):
        self.records, self.chain, self.count = mailbox.records, chain, count
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(every,), daemon=True,
                                        name=f"pymc-kameleon-bar-{chain}")

    def start(self, phase: str, started: float, ended: float | None = None) -> None:
        """Post the chain's phase, start (``time.time()``) and end if it has ended; then,
        while it runs, its evaluations."""
        self.post_phase(phase)
        self.records["ended"][self.chain] = ended or 0.0
        self.records["started"][self.chain] = started  # last: the record is live
        if ended is None:
            self._thread.start()

    def post_evals(self) -> None:
        """Post the evaluations so far."""
        self.records["evals"][self.chain] = self.count()

    def post_phase(self, phase: str) -> None:
        """Post the phase (cut to the record's 16 bytes) and the evaluations so far."""
        self.records["phase"][self.chain] = phase.encode("utf-8")[:RECORD["phase"].itemsize]
        self.post_evals()

    def end(self, ended: float) -> None:
        """The chain is done: the thread stops; the last count, ``"done"`` and the end."""
        self._stop.set()
        self.post_phase("done")
        self.records["ended"][self.chain] = ended

    def _run(self, every: float) -> None:
        while not self._stop.wait(every):
            try:
                self.post_evals()
            except Exception:  # the bar must never stop a chain: the count stays as it was
                return
