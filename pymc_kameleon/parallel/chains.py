"""One chain of :func:`pymc_kameleon.distributed.sample`: the task that runs on a worker.

:func:`_run_chain` builds the model and the step from their factories and runs
``pm.sample(chains=1)``, one chain at a time per worker process (``pm.sample`` changes
process-wide state); its result is a :class:`_ChainResult`, with the warnings recorded as
plain data (:class:`_Warning`) to be issued again in the driver.  A failure is raised as
:class:`ChainError`; a chain whose run has ended stops itself from its ``pm.sample``
callback (:func:`_chain_callback`).  The design is described in
:mod:`pymc_kameleon.distributed`.
"""

from __future__ import annotations

import importlib
import logging
import os
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .cluster import _quiet_logger
from .plugin import _COMPILEDIR_ENV
from .progress import _PROGRESS_INTERVAL, _PROGRESS_TOPIC

__all__ = ["ChainError"]

# the logger of pymc_kameleon.distributed, the public module: the name users configure
_log = logging.getLogger("pymc_kameleon.distributed")

# One chain at a time per worker process: pm.sample changes process-wide state (see
# pymc_kameleon.distributed).
_CHAIN_LOCK = threading.Lock()


class ChainError(RuntimeError):
    """A chain of :func:`sample` failed: its factory or ``pm.sample`` raised, or it was lost.

    Parameters
    ----------
    chain : int
        Index of the chain (``0 .. chains-1``).
    stage : str
        What the task was doing: ``"loading its factories in the worker ..."`` (they could
        not be unpickled there), ``"building the model"``, ``"building the step"``,
        ``"sampling"`` or ``"running on a Dask worker"`` (lost, cancelled or killed).
    detail : str
        The original error, ``"TypeName: message"``.
    remote_traceback : str, optional
        Its traceback, formatted in the worker.

    Examples
    --------
    >>> err = ChainError(2, "building the model", "FileNotFoundError: data.csv")
    >>> str(err)
    'chain 2 failed while building the model: FileNotFoundError: data.csv'
    >>> err.chain
    2
    """

    def __init__(self, chain: int, stage: str, detail: str, remote_traceback: str = ""):
        super().__init__(chain, stage, detail, remote_traceback)
        self.chain = chain
        self.stage = stage
        self.detail = detail
        self.remote_traceback = remote_traceback

    def __str__(self) -> str:
        text = f"chain {self.chain} failed while {self.stage}: {self.detail}"
        if self.remote_traceback:
            text += f"\n\nTraceback in the worker:\n{self.remote_traceback.rstrip()}"
        return text


@dataclass
class _ChainResult:
    chain: int
    data: Any
    worker: str | None
    pid: int
    compiledir: str
    private_compiledir: bool
    seconds: float
    model_vars: tuple[tuple[str, ...], tuple[str, ...]]
    warnings: tuple[_Warning, ...] = ()


@dataclass(frozen=True)
class _Warning:
    """A warning issued in a chain's task, as plain data (its class by name: a class the
    driver cannot import must not make the result fail to unpickle)."""

    message: str
    module: str
    qualname: str
    filename: str
    lineno: int

    @classmethod
    def of(cls, record: warnings.WarningMessage) -> _Warning:
        category = record.category
        return cls(str(record.message), category.__module__, category.__qualname__,
                   str(record.filename), int(record.lineno))

    def category(self) -> type[Warning]:
        try:
            obj: Any = importlib.import_module(self.module)
            for part in self.qualname.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError):
            return UserWarning
        return obj if isinstance(obj, type) and issubclass(obj, Warning) else UserWarning


def _reissue_warnings(results: Sequence[_ChainResult]) -> None:
    """Issue the chains' warnings in the caller, where its warning filters apply (in a
    worker process they would only reach the worker's log); each distinct one once."""
    registry: dict = {}
    for result in results:
        for w in result.warnings:
            warnings.warn_explicit(w.message, w.category(), w.filename, w.lineno,
                                   registry=registry)


def _run_chain(payload: bytes, chain: int, seed: np.random.Generator,
               run_id: str | None) -> _ChainResult:
    """One chain: build the model and the step, run ``pm.sample(chains=1)`` (in a worker).

    ``payload`` is the cloudpickled ``(model_factory, step_factory, pm_sample_kwargs)``;
    ``run_id`` names the run's progress messages and its ``distributed.Event`` (``None``:
    neither, e.g. outside a worker).
    """
    import pickle

    import pymc as pm
    import pytensor

    worker = _current_worker()
    # one chain at a time per process: recording its warnings (global state) must not mix
    # two chains; they are issued again in the caller
    with (_CHAIN_LOCK, _quiet_logger("pymc"), warnings.catch_warnings(record=True) as caught):
        warnings.simplefilter("always")
        start = time.perf_counter()
        try:
            model_factory, step_factory, sample_kwargs = pickle.loads(payload)
        except Exception as err:
            raise _chain_error(chain, "loading its factories in the worker (the worker must "
                               "be able to import the modules that define them)", err) from err
        try:
            model = model_factory()
        except Exception as err:
            raise _chain_error(chain, "building the model", err) from err
        if not isinstance(model, pm.Model):
            raise ChainError(chain, "building the model",
                             f"model_factory returned {type(model).__name__}, not a pymc.Model")
        try:
            with model:
                step = step_factory()
        except Exception as err:
            raise _chain_error(chain, "building the step", err) from err

        kwargs = dict(sample_kwargs)
        total = int(kwargs.get("tune", 1000)) + int(kwargs.get("draws", 1000))
        callback = _chain_callback(worker if run_id else None, run_id, chain, total,
                                   kwargs.pop("callback", None))
        try:
            with model:
                data = pm.sample(
                    chains=1, cores=1, step=step, random_seed=seed, progressbar=False,
                    compute_convergence_checks=False, callback=callback, **kwargs,
                )
        except Exception as err:
            raise _chain_error(chain, "sampling", err) from err
        base = os.path.realpath(str(pytensor.config.base_compiledir))
        marker = os.environ.get(_COMPILEDIR_ENV)
        model_vars = (tuple(rv.name for rv in model.free_RVs),
                      tuple(rv.name for rv in model.deterministics))
        return _ChainResult(
            chain=chain, data=data, worker=getattr(worker, "address", None), pid=os.getpid(),
            compiledir=str(pytensor.config.compiledir),
            private_compiledir=marker is not None and os.path.realpath(marker) == base,
            seconds=time.perf_counter() - start, model_vars=model_vars,
            warnings=tuple(_Warning.of(w) for w in caught),
        )


def _chain_error(chain: int, stage: str, err: BaseException) -> ChainError:
    detail = f"{type(err).__name__}: {err}"
    return ChainError(chain, stage, detail, "".join(traceback.format_exception(err)))


def _current_worker() -> Any:
    try:
        from distributed import get_worker

        return get_worker()
    except (ImportError, ValueError):  # not running in a Dask worker
        return None


class _ChainCancelled(Exception):
    """Raised inside a task whose run has ended (an error elsewhere, ``KeyboardInterrupt``)."""


def _chain_callback(
    worker: Any, run_id: str | None, chain: int, total: int, user_callback: Any
) -> Callable[..., None] | None:
    """``pm.sample`` callback: the user's, then (throttled) progress and cancellation.

    Dask cannot stop a running task, so a chain stops itself: a few times a second it asks
    the scheduler whether the run's ``distributed.Event`` is still set, and raises if not.
    """
    if worker is None and user_callback is None:
        return None
    wanted = None
    if worker is not None:
        from distributed import Event

        wanted = Event(f"pymc-kameleon-run-{run_id}")
    last = [-np.inf]

    def callback(trace, draw):
        if user_callback is not None:
            user_callback(trace=trace, draw=draw)
        if wanted is None:
            return
        done = int(draw.draw_idx) + 1
        now = time.monotonic()
        if done == 1 or done >= total or now - last[0] >= _PROGRESS_INTERVAL:
            last[0] = now
            if not wanted.is_set():
                raise _ChainCancelled(f"chain {chain} was cancelled")
            worker.log_event(_PROGRESS_TOPIC, {"run": run_id, "chain": chain, "done": done,
                                               "evals": _draw_evals(draw.stats),
                                               "worker": worker.address})

    return callback


def _draw_evals(stats: Any) -> int | None:
    """The chain's evaluations so far: the stat ``n_evals_total`` summed over this package's
    steps (``pm.sample`` gives a draw's stats as one dict per step); None without them."""
    counts = [s["n_evals_total"] for s in (stats if isinstance(stats, list) else [stats])
              if isinstance(s, dict) and "n_evals_total" in s]
    return int(np.sum(counts)) if counts else None


def _log_compiledirs(results: Sequence[_ChainResult]) -> None:
    for r in results:
        _log.debug("chain %d: worker %s (pid %d), %.1f s, PyTensor compiledir %s", r.chain,
                   r.worker, r.pid, r.seconds, r.compiledir)
    shared = [r.chain for r in results if not r.private_compiledir]
    if shared:
        _log.info(
            "chains %s ran in worker processes that had imported PyTensor before "
            "pymc_kameleon could give them their own compilation directory; they used "
            "PyTensor's default one (see the pymc_kameleon.distributed documentation)", shared,
        )
