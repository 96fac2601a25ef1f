"""The SMC progress bar with ``cores > 1``: each chain's process posts its evaluations,
phase and clock to a mailbox file (:mod:`pymc_kameleon.smc.mailbox`) that the main
process's cells read at every redraw."""

from __future__ import annotations

import gc
import multiprocessing
import os
import pickle
import threading
import time
import warnings

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from checks import WATCHED_BOARD, WatchedSMC, wrap_py
from rich.progress import Progress

from pymc_kameleon.compat import group_dataset
from pymc_kameleon.compat.smc import set_chain_clock, worker_chain
from pymc_kameleon.smc.mailbox import POST_EVERY, Mailbox
from pymc_kameleon.smc.progress import ProgressBoard

N_POSTED = 600  # the evaluations of the chain in the spawned process
SLEEP = 1e-3  # seconds per evaluation of the cores=2 run's model
RECYCLE = 1200  # its evaluations after the last stage: one phase of over a second


def _posting_chain(payload: bytes, sleep: float) -> None:
    """A chain's process: the board as PyMC's chain process gets it (pickled with the
    kernel), counting ``N_POSTED`` evaluations: stages of 50, then one long phase (only
    the posting thread shows its count move)."""
    board = pickle.loads(payload)
    done = [0]
    cell = board.begin_chain(lambda: done[0], "stages")
    for i in range(N_POSTED):
        if i == N_POSTED // 2:
            cell.phase = "recycling"
        elif i < N_POSTED // 2 and i % 50 == 0:
            cell.stage_ended()
        done[0] += 1
        time.sleep(sleep)
    cell.end()


def test_a_mailbox_round_trip_across_a_spawned_process():
    board = ProgressBoard(3)
    payload = pickle.dumps(board)  # names the mailbox's file, makes nothing
    assert board.path is not None and not os.path.exists(board.path)
    process = multiprocessing.get_context("spawn").Process(
        target=_posting_chain, args=(payload, 10 * POST_EVERY / N_POSTED),
        name="smc_worker_chain_1")
    t0 = time.time()
    process.start()
    board.drawn()  # the bar's first redraw makes the file
    box, path = board.mailbox, board.path
    assert box is not None and os.path.exists(path) and len(box) == 3
    seen = []
    while process.is_alive():
        seen.append(box.read(1))
        time.sleep(0.01)
    process.join()
    assert process.exitcode == 0
    evals, phase, started, ended = box.read(1)
    assert (evals, phase) == (N_POSTED, "done") and t0 < started < ended < time.time()
    running = [s for s in seen if s is not None and s[1] != "done"]
    counts = [s[0] for s in running]
    assert {s[1] for s in running} == {"stages", "recycling"}
    assert np.all(np.diff(counts) >= 0) and len(set(counts)) >= 6  # posted while it ran
    assert len({s[0] for s in running if s[1] == "recycling"}) >= 3  # by the thread
    assert box.read(0) is None and box.read(2) is None and box.read(3) is None
    # the main process's cells: chain 1's record, its clock in this process's monotonic one
    cell = board.cells[1]
    assert (cell.evals, cell.phase, f"{cell}") == (f"{N_POSTED:,}", "done", f"{N_POSTED:,}")
    shift = time.monotonic() - time.time()
    assert cell.clock() == pytest.approx((started + shift, ended + shift), abs=0.01)
    assert board.cells[0].evals == "-" and board.cells[0].clock() == (None, None)
    assert board.cells[0].live and not board.cells[0].local
    # the file goes with the main process's mailbox
    del board, cell, box
    gc.collect()
    assert not os.path.exists(path) and Mailbox.open(path) is None


@pytest.fixture
def chain_process(monkeypatch):
    """This process, named as PyMC names its SMC chain 0's (restored after the test)."""
    monkeypatch.setattr(multiprocessing.current_process(), "name", "smc_worker_chain_0")


def test_a_chain_posts_once_the_bar_is_drawn(chain_process):
    """Until the bar's process makes the mailbox, a chain's process posts nothing and
    starts no thread; it looks again at each phase change and stage end."""
    board = ProgressBoard(1)
    copy = pickle.loads(pickle.dumps(board))
    threads, done = threading.active_count(), [4]
    cell = copy.begin_chain(lambda: done[0], "stages")
    cell.stage_ended()
    assert cell.post is None and threading.active_count() == threads
    board.drawn()
    done[0] = 9
    cell.stage_ended()
    assert cell.post is not None and threading.active_count() == threads + 1
    assert board.cells[0].evals == "9" and board.cells[0].phase == "stages"
    done[0] = 11
    cell.end()
    assert board.cells[0].evals == "11" and board.cells[0].phase == "done"
    cell.post._thread.join(2 * POST_EVERY)
    assert threading.active_count() == threads
    # a chain that ends before the bar is drawn posts its end at once
    late = ProgressBoard(1)
    cell = pickle.loads(pickle.dumps(late)).begin_chain(lambda: 3, "stages")
    cell.end()
    late.drawn()
    cell.end()  # (PyMC's last stage; here: the end again, its time unchanged)
    assert late.cells[0].evals == "3" and late.cells[0].clock()[1] is not None


@pytest.mark.parametrize("name", ["Process-7", "gone"])
def test_a_process_posts_nothing_where_it_cannot(name, chain_process, monkeypatch):
    """A process that is not one of PyMC's chains, or whose mailbox is gone, posts
    nothing and starts no thread; its chain runs as usual."""
    board = ProgressBoard(1)
    copy = pickle.loads(pickle.dumps(board))
    board.drawn()
    if name == "gone":
        board.mailbox = None
        gc.collect()
    else:
        monkeypatch.setattr(multiprocessing.current_process(), "name", name)
    threads = threading.active_count()
    cell = copy.begin_chain(lambda: 3, "stages")
    cell.phase = "recycling"
    cell.end()
    assert cell.post is None and threading.active_count() == threads
    assert (cell.evals, cell.phase) == ("3", "done")
    if board.mailbox is not None:
        assert board.mailbox.read(0) is None


def test_without_a_pickle_or_a_drawn_bar_no_mailbox():
    board = ProgressBoard(2)
    board.drawn()  # cores=1: never pickled, so no file
    assert board.path is None and board.mailbox is None and worker_chain() is None
    pickle.dumps(board)
    assert board.mailbox is None and not os.path.exists(board.path)  # named only


# ------------------------------------------------------------------ pm.sample_smc(cores=2)


def _shown(cell) -> tuple[int | None, str, tuple]:
    return (None if cell.evals == "-" else int(cell.evals.replace(",", "")), cell.phase,
            cell.clock())


def _sample(model, progressbar: bool, seen: list | None = None):
    """A two-chain run in two processes; ``seen``: what the bar's cells show, polled."""
    stop = threading.Event()

    def poll():
        while not stop.wait(0.02):
            if WATCHED_BOARD and WATCHED_BOARD[0].cells:
                seen.append([_shown(cell) for cell in WATCHED_BOARD[0].cells])

    WATCHED_BOARD.clear()
    poller = threading.Thread(target=poll, daemon=True)
    if seen is not None:
        poller.start()
    try:
        with model, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return pm.sample_smc(200, kernel=WatchedSMC, chains=2, cores=2, random_seed=5,
                                 recycle=RECYCLE, progressbar=progressbar,
                                 compute_convergence_checks=False)
    finally:
        stop.set()
        if seen is not None:
            poller.join()


@wrap_py(itypes=[pt.dvector], otypes=[pt.dscalar])
def _slow_loglik(x):
    time.sleep(SLEEP)  # a chain runs long enough to be seen, however fast the machine
    return np.array(-0.5 * np.sum((x - 0.5) ** 2 / 0.25))


@pytest.fixture(scope="module")
def slow_model():
    """A 2-d Normal whose evaluations take at least ``SLEEP`` seconds each (the Op travels
    to the chain processes by reference to this module)."""
    with pm.Model() as model:
        x = pm.Normal("x", 0.0, 2.0, shape=2)
        pm.Potential("lik", _slow_loglik(x))
    return model


def test_with_two_cores_the_bar_shows_each_chain_live(slow_model):
    """Each chain's cell in the main process shows the evaluations of the chain in its
    process while it runs (also within the recycling, one long phase), its phase up to
    ``done``, and its own clock; the draws and stats are those of a run without the bar
    (which makes no mailbox)."""
    seen: list = []
    m0 = time.monotonic()
    idata = _sample(slow_model, True, seen)
    m1 = time.monotonic()
    board = WATCHED_BOARD[0]
    n_evals = group_dataset(idata, "sample_stats")["n_evals"].values  # chain, stage
    per_chain = np.nansum(n_evals.reshape(2, -1), axis=1).astype(int)
    progress = Progress(disable=True)
    for _ in range(2):
        progress.add_task("chain", total=1.0)
    for chain, task in zip(range(2), progress.tasks, strict=True):
        shown = [s[chain] for s in seen]
        counts = [n for n, phase, _ in shown if n is not None]
        assert np.all(np.diff(counts) >= 0) and counts[-1] == per_chain[chain]
        for phase in ("stages", "recycling"):  # the count moved while the chain ran
            running = {n for n, p, _ in shown if n is not None and p == phase}
            assert len(running) >= 3, (phase, running)
        assert shown[-1][1] == "done" and board.cells[chain].phase == "done"
        started, ended = board.cells[chain].clock()
        assert m0 - 0.01 < started < ended < m1 + 0.01
        assert all(s[2][0] == pytest.approx(started, abs=0.01) for s in shown
                   if s[2][0] is not None)  # one start, read at every redraw
        set_chain_clock(task, board.cells[chain])
        assert task.finished and task.finished_time == pytest.approx(ended - started)
        assert not board.cells[chain].local and board.cells[chain].live
    path = board.mailbox.path
    assert os.path.exists(path)
    del board  # the run's board gone (no cycle holds it): its file goes at once
    WATCHED_BOARD.clear()
    assert not os.path.exists(path)

    quiet = _sample(slow_model, False)  # no bar: no mailbox, the same draws and stats
    assert WATCHED_BOARD[0].mailbox is None and not os.path.exists(WATCHED_BOARD[0].path)
    assert WATCHED_BOARD[0].cells[0].evals == "-"
    for group in ("posterior", "sample_stats"):
        ours, theirs = group_dataset(idata, group), group_dataset(quiet, group)
        for name in ours.data_vars:
            np.testing.assert_array_equal(np.asarray(ours[name].values, dtype=float),
                                          np.asarray(theirs[name].values, dtype=float), name)
