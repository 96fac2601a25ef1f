"""Evaluate log densities at a batch of points, in process or on a user's executor.

A population sampler (:class:`~pymc_kameleon.KameleonSMC`) proposes a whole batch of points
at once; their evaluations are independent, so they can run on every core or on a cluster.
:class:`BatchEvaluator` maps compiled functions over the rows of a batch with any
:class:`concurrent.futures.Executor` (threads, a process pool, or Dask's
``Client.get_executor()``) and puts the results back by index.  Every random number is drawn
by the caller before the map (the seeds of the likelihood estimators too), so the values,
and the sampler's draws, do not depend on the number of workers or the order they finish in.

Workers get the compiled functions once: pickled (``as_op`` Ops defined in ``__main__``
by value) and cached per thread, so that no two threads share a compiled PyTensor function
(they are not thread-safe).  See ``docs/smc.md``.

An exception of the log density at a point comes back as a
:class:`~pymc_kameleon.failures.Failure` of that point (the caller decides what it does,
``on_error``); one of the executor itself (shut down, a worker process that died, a Dask
client that is gone) as an :class:`ExecutorError` that says what happened.
"""

from __future__ import annotations

import os
import pickle
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import replace

import numpy as np

from ..compat import executor_max_workers
from ..failures import Failure
from ..pseudo_marginal import find_estimators
from .pickling import dumps
from .plugin import register_compiledir_plugin

__all__ = ["BatchEvaluator", "ExecutorError"]

#: returned by a worker that has not got the functions yet (then they are sent once)
_MISSING = "pymc-kameleon: functions not cached in this worker"
#: compiled functions a worker thread keeps (the newest few runs' functions)
_CACHE_SIZE = 4
_local = threading.local()


class ExecutorError(RuntimeError):
    """The executor given to evaluate a batch could not run it (shut down, broken, gone).

    The message says what happened and what to do; the executor's own exception is the
    ``__cause__``.
    """

    @classmethod
    def of(cls, exc: Exception, executor) -> ExecutorError:
        """The error for ``exc``, raised by ``executor``'s ``submit`` or a future's
        ``result``."""
        from concurrent.futures import BrokenExecutor, CancelledError

        name = type(executor).__name__
        text = f"{type(exc).__name__}: {exc}"
        if isinstance(exc, BrokenExecutor):
            what = (f"a worker of the executor ({name}) died while evaluating the model "
                    f"({text}); the pool cannot be used any more.  A worker process dies "
                    "when the system kills it (often for lack of memory) or the model "
                    "crashes in compiled code: check the model in one process, give each "
                    "worker less to hold (fewer workers), and pass a new executor")
        elif isinstance(exc, RuntimeError) and "shutdown" in str(exc):
            what = (f"the executor passed to KameleonSMC ({name}) was shut down before "
                    f"sampling ended ({text}).  Keep it open until pm.sample_smc returns: "
                    "call pm.sample_smc inside the `with ...Executor() as executor:` block, "
                    "not after it ends, or create the executor without `with` and shut it "
                    "down after the call")
        elif type(executor).__module__.split(".")[0] == "distributed" or isinstance(
                exc, CancelledError):
            closed = getattr(executor, "status", None) in ("closing", "closed")
            what = (f"the Dask cluster behind the executor ({name}"
                    f"{', closed' if closed else ''}) could not run the batch ({text}).  "
                    "Keep the client open until pm.sample_smc returns (close it after the "
                    "call, e.g. a `with Client(...)` block around it), and check that the "
                    "scheduler and its workers are running and have what the model needs "
                    "(packages, files)")
        else:
            what = (f"the executor passed to KameleonSMC ({name}) could not evaluate a "
                    f"batch ({text}).  The model's own exceptions are reported as such "
                    "(on_error); this one came from the executor, e.g. a worker that cannot "
                    "load the model (a package or file missing there)")
        return cls(f"KameleonSMC: {what}.")


def _is_dask_client(obj) -> bool:
    return (type(obj).__module__.startswith("distributed")
            and callable(getattr(obj, "get_executor", None)))


class _Functions:
    """Compiled functions and the likelihood-estimator Ops inside them."""

    def __init__(self, funcs: Sequence[Callable]):
        self.funcs = list(funcs)
        self.estimators = [op for f in self.funcs for op in _estimators(f)]

    def __call__(self, X: np.ndarray, seeds: np.ndarray | None,
                 stop: bool = False, done: Callable[[int], None] | None = None
                 ) -> tuple[np.ndarray, list[Failure]]:
        """One row of values per point (NaN where it raised), and the points that raised;
        each point's estimators are seeded from its seed.  ``stop``: no point after the
        first that raised is evaluated; ``done(1)`` after each point."""
        out = np.full((len(X), len(self.funcs)), np.nan)
        failures = []
        for i, x in enumerate(X):
            if seeds is not None:
                self._seed(int(seeds[i]))
            try:
                for j, f in enumerate(self.funcs):
                    out[i, j] = np.asarray(f(x), dtype=float).sum()
            except Exception as exc:  # the model's: the caller applies on_error
                failures.append(Failure.of(i, exc))
                out[i] = np.nan
                if stop:
                    break
            finally:
                if done is not None:
                    done(1)
        return out, failures

    def _seed(self, seed: int) -> None:
        rng = np.random.default_rng(seed)
        for op in self.estimators:
            op.rng = np.random.default_rng(rng.integers(2**63))


def _estimators(f) -> list:
    try:
        return find_estimators(f)
    except TypeError:  # not a compiled PyTensor function: no estimator to seed
        return []


def _cached(key: str, payload: bytes | None) -> _Functions | None:
    cache = getattr(_local, "cache", None)
    if cache is None:
        cache = _local.cache = {}
    fns = cache.get(key)
    if fns is None and payload is not None:
        while len(cache) >= _CACHE_SIZE:
            cache.pop(next(iter(cache)))
        fns = cache[key] = _Functions(pickle.loads(payload))
    return fns


def _evaluate_chunk(key: str, payload: bytes | None, X: np.ndarray, seeds, stop: bool):
    """Worker task: the values at the rows of ``X`` and the failures (ready to travel to
    another process), or ``_MISSING`` without the functions."""
    fns = _cached(key, payload)
    if fns is None:
        return _MISSING
    # a fresh, aligned copy (Dask may hand arrays over as views of its buffers)
    values, failures = fns(np.array(X, dtype=float, copy=True), seeds, stop)
    return values, [f.portable() for f in failures]


class BatchEvaluator:
    """Map compiled log-density functions over the rows of a batch.

    Parameters
    ----------
    funcs : sequence of callables
        Functions of one raveled point (e.g. PyMC's compiled prior and likelihood terms);
        each returns a scalar.
    executor : concurrent.futures.Executor or dask.distributed.Client, optional
        Where to evaluate: ``None`` in this process, one point after the other; otherwise
        the batch is cut into about ``tasks_per_worker`` tasks per worker and submitted.  A
        Dask client runs them on its ``get_executor()``, each worker process compiling into
        its own PyTensor directory (as :func:`pymc_kameleon.distributed.sample`).
    tasks_per_worker : int, default 4
        Tasks per worker and batch: more balance the load of uneven evaluation times, fewer
        cost less overhead per task.
    batched : callable, optional
        The same values for a whole batch in one call (``X -> array (len(X), len(funcs))``),
        used in process when no estimator needs seeding: a vectorised PyTensor graph skips
        the per-call overhead of compiled functions.

    Notes
    -----
    ``seeds`` (one integer per point, drawn by the caller) reseed the likelihood estimators
    (:class:`~pymc_kameleon.pseudo_marginal.LikelihoodEstimatorOp`) before each point, so an
    estimate depends on its point's seed alone, wherever it is computed.
    """

    def __init__(self, funcs: Sequence[Callable], executor: Executor | None = None,
                 tasks_per_worker: int = 4, batched: Callable | None = None):
        self._workers = None
        if _is_dask_client(executor):
            try:  # as distributed.sample does: every worker process its own compiledir
                register_compiledir_plugin(executor, None)
                self._workers = sum(executor.nthreads().values())
            except Exception as exc:
                raise ExecutorError.of(exc, executor) from exc
            executor = executor.get_executor(pure=False)
        if executor is not None and not callable(getattr(executor, "submit", None)):
            raise TypeError(
                "executor must be a concurrent.futures.Executor (e.g. ThreadPoolExecutor, "
                "ProcessPoolExecutor or a Dask client's get_executor()), got "
                f"{type(executor).__name__}")
        self.local = _Functions(funcs)
        self.batched = batched
        self.executor = executor
        self.tasks_per_worker = int(tasks_per_worker)
        self._key = uuid.uuid4().hex
        self._payload: bytes | None = None

    @property
    def has_estimators(self) -> bool:
        """Whether the functions hold likelihood estimators (they need per-point seeds)."""
        return bool(self.local.estimators)

    def __call__(self, X: np.ndarray, seeds: np.ndarray | None = None,
                 done: Callable[[int], None] | None = None) -> np.ndarray:
        """Values of every function at every row of ``X``, shape ``(len(X), len(funcs))``;
        the first exception of the functions is raised (:meth:`evaluate` returns them)."""
        values, failures = self.evaluate(X, seeds, stop=True, done=done)
        if failures:
            raise failures[0].cause()
        return values

    def evaluate(self, X: np.ndarray, seeds: np.ndarray | None = None,
                 stop: bool = False, done: Callable[[int], None] | None = None
                 ) -> tuple[np.ndarray, list[Failure]]:
        """Values of every function at every row of ``X`` (NaN where they raised) and a
        :class:`~pymc_kameleon.failures.Failure` per row that raised, in row order.

        ``stop``: return at the first failure (the other rows are then not all evaluated).
        ``done(n)`` as each point (in process) or each task of ``n`` points (on the
        executor) is done, for a progress bar.  :class:`ExecutorError` where the executor
        cannot run the batch.
        """
        X = np.asarray(X)
        if self.executor is None or len(X) == 0:
            if self.batched is not None and seeds is None and len(X):
                try:
                    return np.asarray(self.batched(X), dtype=float).reshape(len(X), -1), []
                except Exception:  # which point raised: one at a time
                    pass
            return self.local(X, seeds, stop, done)
        bounds = np.linspace(0, len(X), min(len(X), self._n_tasks()) + 1).astype(int)
        parts = list(zip(bounds[:-1], bounds[1:], strict=True))
        results: list = [_MISSING] * len(parts)
        payload = None
        while True:
            todo = [i for i, r in enumerate(results) if isinstance(r, str)]
            if not todo:
                return np.concatenate([v for v, _ in results]), [
                    replace(f, row=f.row + a)
                    for (a, _), (_, fails) in zip(parts, results, strict=True) for f in fails]
            futures = {i: self._submit(_evaluate_chunk, self._key, payload, X[a:b],
                                       None if seeds is None else seeds[a:b], stop)
                       for i, (a, b) in ((i, parts[i]) for i in todo)}
            for i, fut in futures.items():
                results[i] = self._result(fut)
                if done is not None and not isinstance(results[i], str):
                    done(parts[i][1] - parts[i][0])
                if stop and not isinstance(results[i], str) and results[i][1]:
                    for rest in futures.values():  # the batch ends here
                        rest.cancel()
                    return np.full((len(X), len(self.local.funcs)), np.nan), [
                        replace(results[i][1][0], row=results[i][1][0].row + parts[i][0])]
            payload = self._dumps()  # a worker that lacked the functions gets them now

    def _submit(self, *args):
        try:
            return self.executor.submit(*args)
        except Exception as exc:
            raise ExecutorError.of(exc, self.executor) from exc

    def _result(self, future):
        try:
            return future.result()
        except Exception as exc:
            raise ExecutorError.of(exc, self.executor) from exc

    def _n_tasks(self) -> int:
        workers = (self._workers or executor_max_workers(self.executor)
                   or os.cpu_count() or 1)
        return max(1, self.tasks_per_worker * int(workers))

    def _dumps(self) -> bytes:
        if self._payload is None:
            self._payload = dumps(self.local.funcs)
        return self._payload
