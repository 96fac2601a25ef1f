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

Chains in this process (``cores=1``, the way to use an ``executor``) are read directly.
Chains in PyMC's worker processes (``cores > 1``) post the same to a
:class:`~pymc_kameleon.smc.mailbox.Mailbox`: the kernel's board, pickled for them, names
its file, which the main process makes once the bar is drawn (so ``progressbar=False``
makes none); each chain's process looks for it at its start, phase changes and stage ends,
then posts its phase, start and end as they happen and its evaluations every quarter of a
second.  Each redraw reads their records.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable

from ..compat.smc import worker_chain
from .mailbox import ChainPost, Mailbox

__all__ = ["ChainCell", "ProgressBoard"]


class ChainCell:
    """One chain's live state on the progress bar.

    Attributes
    ----------
    phase : str
        What the chain is doing (``"stages"``, ``"recycling"``, the emulator's round,
        ``"done"``); ``"-"`` before it starts (here or, posted, in its own process).
    started, ended : float or None
        ``time.monotonic()`` at the chain's start and end in this process.
    post : ChainPost or None
        In a chain's own process with ``cores > 1``: what it posts to the bar's process,
        once the mailbox is there (until then :attr:`post_to`: its file and the chain).
    """

    def __init__(self, board: ProgressBoard | None, index: int = 0):
        # weakly: no cycle with the board, whose mailbox file goes as soon as the run does
        self._board = None if board is None else weakref.ref(board)
        self.index = index
        self.count: Callable[[], int] | None = None
        self._phase = "-"
        self.started: float | None = None
        self.ended: float | None = None
        self._wall: list[float | None] = [None, None]  # time.time() at start and end
        self.post: ChainPost | None = None
        self.post_to: tuple[str, int] | None = None

    @property
    def board(self) -> ProgressBoard | None:
        """The board of the bar the cell is on (None: a chain not on this process's bar,
        nothing shown)."""
        return None if self._board is None else self._board()

    @property
    def phase(self) -> str:
        posted = self._posted()
        return self._phase if posted is None else posted[1]

    @phase.setter
    def phase(self, phase: str) -> None:
        self._phase = phase
        self._post("post_phase", phase)

    def start(self, count: Callable[[], int], phase: str = "stages") -> None:
        """The chain starts here; ``count()`` gives its evaluations so far."""
        self.count, self._phase, self.started, self.ended = count, phase, time.monotonic(), None
        self._wall = [time.time(), None]
        self._post(None)

    def stage_ended(self) -> None:
        """A stage (or an emulator's round) ended: its evaluations posted, if posting."""
        self._post("post_evals")

    def end(self) -> None:
        """The chain's last stage (and recycling) is done."""
        if self.ended is None:
            self.ended, self._wall[1] = time.monotonic(), time.time()
        self._phase = "done"
        self._post("end", self._wall[1])

    @property
    def evals(self) -> str:
        """The chain's evaluations so far, as the bar shows them (``-`` before its start)."""
        if self.count is not None:
            return f"{self.count():,}"
        posted = self._posted()
        return "-" if posted is None else f"{posted[0]:,}"

    @property
    def local(self) -> bool:
        """Whether the board's chains run in this process (one of them started here)."""
        return self.board is not None and self.board.started > 0

    @property
    def live(self) -> bool:
        """Whether the bar shows the chain's own state: it runs here, or in one of PyMC's
        chain processes, which post it."""
        return self.local or (self.board is not None and self.board.path is not None)

    def clock(self) -> tuple[float | None, float | None]:
        """The chain's start and end (None: not yet) in this process's
        ``time.monotonic()``, also for a chain posting from another process."""
        posted = None if self.count is not None else self._posted()
        if posted is None:
            return self.started, self.ended
        shift = time.monotonic() - time.time()  # the processes share the wall clock only
        return posted[2] + shift, (posted[3] + shift if posted[3] else None)

    def drawn(self) -> None:
        """The bar is drawn: the chains in PyMC's processes may post to it
        (:meth:`ProgressBoard.drawn`)."""
        if self.board is not None:
            self.board.drawn()

    def _posted(self) -> tuple[int, str, float, float] | None:
        # a chain not started here shows its record where its process posts one
        if self.count is not None or self.board is None or self.board.mailbox is None:
            return None
        try:
            return self.board.mailbox.read(self.index)
        except (OSError, ValueError):
            return None

    def _post(self, what: str | None, *args) -> None:
        # a failed post ends the posting, never the chain (its draws do not depend on it)
        try:
            if self.post is None and self.post_to is not None:
                self._open_post()  # posts the chain's state so far
            elif self.post is not None and what is not None:
                getattr(self.post, what)(*args)
        except Exception:
            self.post = self.post_to = None

    def _open_post(self) -> None:
        path, chain = self.post_to
        mailbox = Mailbox.open(path)
        if mailbox is None or self.count is None:  # not made yet: looked for again later
            return
        self.post_to = None
        if chain < len(mailbox):
            self.post = ChainPost(mailbox, chain, self.count)
            self.post.start(self._phase, self._wall[0], self._wall[1])

    def __format__(self, spec: str) -> str:  # a plain "{task.fields[...]}" shows the count
        return format(self.evals, spec)

    def __str__(self) -> str:
        return self.evals

    def __reduce__(self):  # a cell never travels with the kernel: a detached one
        return ChainCell, (None,)


def _posting_board(path: str) -> ProgressBoard:
    board = ProgressBoard(0)
    board.post_to = path
    return board


class ProgressBoard:
    """The cells of a run's ``n_chains`` chains; chains started in this process take them
    in order (``pm.sample_smc`` runs them one after the other, chain 0 first).

    Pickled (``pm.sample_smc(cores > 1)`` sends the kernel to PyMC's chain processes), the
    board names a :class:`~pymc_kameleon.smc.mailbox.Mailbox` file (:attr:`path`), which
    it makes once its bar is drawn; its copy there posts the process's chain to it
    (:attr:`post_to`).
    """

    def __init__(self, n_chains: int):
        self.cells: list[ChainCell] = []
        self.started = 0
        self.path: str | None = None  # the mailbox's file, named when pickled
        self.mailbox: Mailbox | None = None  # made there when the bar is drawn
        self.post_to: str | None = None  # in a chain's process: the mailbox's file
        self._made = False
        self.set_chains(n_chains)

    def set_chains(self, n_chains: int) -> None:
        """One empty cell per chain (cell ``k`` reads chain ``k``'s record, if posted)."""
        self.cells = [ChainCell(self, k) for k in range(int(n_chains))]
        self.started = 0

    def begin_chain(self, count: Callable[[], int], phase: str = "stages") -> ChainCell:
        """The next chain's cell, started (a detached one once every cell is taken); in a
        chain's process, a detached cell that posts the chain."""
        if self.post_to is not None:
            return self._begin_posting(count, phase)
        if self.started >= len(self.cells):
            return ChainCell(None)
        cell = self.cells[self.started]
        self.started += 1
        cell.start(count, phase)
        return cell

    def _begin_posting(self, count: Callable[[], int], phase: str) -> ChainCell:
        # one chain per PyMC process; a process that is not PyMC's chain k posts nothing
        path, self.post_to = self.post_to, None
        cell = ChainCell(None)
        chain = worker_chain()
        if chain is not None:
            cell.post_to = (path, chain)
        cell.start(count, phase)
        return cell

    def drawn(self) -> None:
        """The bar is drawn (``progressbar=True``): make the mailbox that the chains'
        processes look for, once, if the board was pickled for them."""
        if self.path is not None and not self._made and self.cells:
            self._made = True
            self.mailbox = Mailbox.create(self.path, len(self.cells))

    def __reduce__(self):
        # the copy names the file only: nothing is made before the bar is drawn
        if self.post_to is not None:  # a copy of a copy posts nothing
            return ProgressBoard, (0,)
        if self.path is None:
            self.path = Mailbox.new_path()
        return _posting_board, (self.path,)
