"""Run the chains of ``pm.sample`` on a Dask cluster, one chain per task.

:func:`sample` sends every chain to a Dask worker as one task.  The task builds the model from
a picklable *factory* (a top-level function or a :func:`functools.partial`), builds the step
method, and runs ``pm.sample(chains=1, cores=1, ...)``; the driver concatenates the one-chain
results along ``chain`` (``arviz.concat`` on ArviZ 0.x, ``xarray.concat`` of the ``DataTree``
on ArviZ 1.x) into what ``pm.sample`` returns.  Install the optional dependency with
``pip install ".[distributed]"`` from a clone; the rest of the package never imports Dask.
The user's guide is ``docs/distributed.md``; the overhead is measured in
``docs/benchmarks/distributed.md``.

Why factories.  The model and the compiled step never cross the network: models built with
``pytensor.compile.ops.as_op`` or holding NumPy estimators do not have to pickle, and every
worker compiles its own functions.

Same seeds, same draws.  ``pm.sample(chains=n, random_seed=S)`` runs chain ``i`` on child
``i`` of ``get_random_generator(S).spawn(n)``.  The driver hands task ``i`` a generator on the
root seed sequence with ``i`` children already spawned (``SeedSequence(...,
n_children_spawned=i)``), so the single child that ``pm.sample(chains=1)`` spawns from it is
chain ``i``'s: the draws equal ``pm.sample(chains=n, cores=1, random_seed=S)`` bit for bit,
for every step method whose randomness comes from the generator ``pm.sample`` gives it (all
steps of this package).  The seeds are fixed in the driver, so a task re-run after its worker
died repeats the same draws.

PyTensor compilation directory.  PyTensor reads ``base_compiledir`` once, at import, and its
default directory is shared by every process of a user (often on a network file system on
clusters, where its file lock is unreliable).  :func:`sample` registers a worker plugin,
pickled by value so that loading it imports neither PyTensor nor this package, which sets
``base_compiledir`` in ``PYTENSOR_FLAGS`` of every worker process that has not imported
PyTensor yet: one directory per worker.  The plugin is removed from the scheduler when
:func:`sample` returns, so workers that join a user's cluster later are left alone.

One chain at a time per worker process.  ``pm.sample`` changes process-wide state while it
compiles and runs (PyTensor's ``config.change_flags``, and the warnings that a task records
with :func:`warnings.catch_warnings`, which is not thread-safe), so chains in one process are
serialised by a lock; a worker with N threads runs one chain at a time and :func:`sample`
warns about it.

Faults.  Dask's scheduler re-runs the task of a worker that died (up to
``distributed.scheduler.allowed-failures`` times); the seed is fixed, so the draws are the
same.  An exception in a factory or in ``pm.sample`` is raised as :class:`ChainError` naming
the chain, the stage and the worker's traceback.  On an error or ``KeyboardInterrupt`` the
driver cancels the tasks and clears a :class:`distributed.Event` that the running chains check
a few times a second, so they stop (Dask cannot stop a running task).

References
----------
- Rocklin, M. (2015). Dask: parallel computation with blocked algorithms and task
  scheduling. Proceedings of the 14th Python in Science Conference.
- Vehtari, A., Gelman, A., Simpson, D., Carpenter, B., Bürkner, P.-C. (2021).
  Rank-normalization, folding, and localization: an improved R-hat for assessing
  convergence of MCMC. Bayesian Analysis 16(2) (why several independent chains).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import logging
import os
import threading
import time
import traceback
import uuid
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np

from .parallel.pickling import dumps
from .parallel.plugin import _COMPILEDIR_ENV, _PLUGIN_NAME, register_compiledir_plugin

__all__ = ["ChainError", "sample"]

_log = logging.getLogger(__name__)

#: What to install when Dask is missing.
_EXTRA = 'pip install "dask[distributed]" (or pip install ".[distributed]" from a clone)'
#: Scheduler event topic of the chains' progress messages (one topic: its log is bounded).
_PROGRESS_TOPIC = "pymc-kameleon-progress"
#: Seconds between two progress messages (and cancellation checks) of one chain.
_PROGRESS_INTERVAL = 0.2
#: pm.sample keywords that the tasks set themselves or whose result cannot be merged.
_TASK_KWARGS = ("cores", "step", "model", "trace")

# One chain at a time per worker process (see the module documentation).
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



# ------------------------------------------------------------------------------ the driver
def sample(
    model_factory: Callable[[], Any],
    step_factory: Callable[[], Any],
    *,
    chains: int | None = None,
    client: Any = None,
    cluster_kwargs: Mapping[str, Any] | None = None,
    compiledir: str | os.PathLike | None = None,
    **pm_sample_kwargs: Any,
) -> Any:
    """Sample ``chains`` chains of ``pm.sample`` on Dask, one chain per task.

    Each task builds the model with ``model_factory()``, the step with ``step_factory()``
    inside the model's context, and runs ``pm.sample(chains=1, cores=1, ...)`` with the
    generator that ``pm.sample(chains=chains, random_seed=...)`` would give that chain (see
    the module documentation).  The results are concatenated along ``chain``: every group
    that ``pm.sample`` returns (posterior, sample_stats, the warm-up groups with
    ``discard_tuned_samples=False``, observed data, ...) is kept.

    Parameters
    ----------
    model_factory : callable
        ``model_factory() -> pymc.Model``.  Must pickle (cloudpickle): a top-level function or
        a :func:`functools.partial` of one is safest.  Called once per chain, in the worker.
    step_factory : callable
        ``step_factory() -> step`` (a step method or a list of them), called inside the
        model's context, e.g. the class ``RandomWalkStep`` itself or
        ``functools.partial(KameleonStep, n_history=500)``.
    chains : int, optional
        Number of chains (tasks).  By default what ``pm.sample`` chooses:
        ``max(2, min(4, cpus))`` with PyMC's count of this machine's CPUs.
    client : distributed.Client, optional
        A client of the cluster to use (``Client("tcp://host:8786")``, a ``dask-jobqueue``
        cluster's client, ...); it is left open, and nothing of this run stays registered on
        its scheduler.  By default an embedded ``distributed.LocalCluster`` is started
        (worker processes, one thread each, one worker per core but no more than
        ``chains``) and closed afterwards.
    cluster_kwargs : mapping, optional
        Keyword arguments for the embedded ``LocalCluster`` (e.g. ``{"n_workers": 2}``);
        ignored when ``client`` is given.
    compiledir : str or path, optional
        Root of the workers' PyTensor compilation directories, as seen by the workers
        (``~`` and ``$VARIABLES`` are expanded there, e.g. ``"$TMPDIR/pytensor"``): worker
        ``name`` uses ``<compiledir>/worker-<name>``.  By default the embedded cluster uses
        ``<base_compiledir>/pymc-kameleon-dask`` and a cluster you pass in the directory
        ``pymc-kameleon-pytensor`` of the workers' Dask scratch space, unless their
        ``PYTENSOR_FLAGS`` already set ``base_compiledir``.  Applies to worker processes
        that have not imported PyTensor yet.
    **pm_sample_kwargs
        Passed to ``pm.sample`` in every task: ``draws``, ``tune``, ``random_seed``,
        ``initvals`` (one dict, or a sequence of one per chain), ``discard_tuned_samples``,
        ``idata_kwargs``, ``callback`` (runs in the worker), ...  ``progressbar`` is drawn
        by the driver: ``False`` for none, ``"combined"`` (or ``"combined+stats"``) for one
        bar of all draws, anything else true for one bar per chain.
        ``compute_convergence_checks`` runs once, on the merged result.  ``cores``, ``step``,
        ``model``, a ``trace`` backend and ``return_inferencedata=False`` are not supported.

    Returns
    -------
    arviz.InferenceData or xarray.DataTree
        What ``pm.sample`` returns with the installed PyMC; the ``sampling_time`` attribute
        is the wall time of the whole distributed run (submission to merged result).

    Raises
    ------
    ChainError
        A factory or ``pm.sample`` raised in a chain, or a chain's workers kept dying.
    TypeError
        A factory is not callable or cannot be pickled, or a keyword is not supported.
    ImportError
        Dask's ``distributed`` is not installed.

    Warns
    -----
    UserWarning
        A worker has several threads: it runs one chain at a time all the same.

    Notes
    -----
    The draws equal ``pm.sample(chains=chains, cores=1, random_seed=S)`` with the same step
    method, chain for chain and bit for bit, whatever the cluster, the order in which the
    chains run, and whether a task had to be re-run because its worker died.

    References
    ----------
    .. [1] Rocklin, M. (2015). Dask: parallel computation with blocked algorithms and task
       scheduling. Proceedings of the 14th Python in Science Conference, 130-136.

    Examples
    --------
    The model factory lives in an importable module (or the main script), e.g.:

    >>> import functools
    >>> from pymc_kameleon import RandomWalkStep
    >>> from pymc_kameleon.models import banana_model
    >>> model_factory = functools.partial(banana_model, dim=2, b=0.1)

    On this machine, with an embedded local cluster that is closed afterwards:

    >>> from pymc_kameleon.distributed import sample
    >>> idata = sample(model_factory, RandomWalkStep, chains=4,
    ...                draws=1000, random_seed=1)  # doctest: +SKIP

    On a cluster, e.g. SLURM through dask-jobqueue, or any running scheduler:

    >>> from dask.distributed import Client  # doctest: +SKIP
    >>> client = Client("tcp://scheduler-host:8786")  # doctest: +SKIP
    >>> idata = sample(model_factory, RandomWalkStep, chains=16, client=client,
    ...                draws=5000, random_seed=1)  # doctest: +SKIP
    """
    distributed = _import_distributed()
    # pm.sample's default (pymc.sampling.mcmc.sample, PyMC 5 and 6): cores=min(4, cpus)
    chains = max(2, min(4, os.cpu_count() or 1)) if chains is None else chains
    if isinstance(chains, bool) or not isinstance(chains, int | np.integer) or chains < 1:
        raise ValueError(f"chains must be a positive integer, got {chains!r}")
    chains = int(chains)
    for name, factory in (("model_factory", model_factory), ("step_factory", step_factory)):
        _check_factory(factory, name)
    kwargs = dict(pm_sample_kwargs)
    unsupported = [k for k in _TASK_KWARGS if kwargs.get(k) is not None]
    if unsupported or kwargs.get("return_inferencedata", True) is False:
        raise TypeError(
            f"sample() does not take {unsupported or 'return_inferencedata=False'}: pass the "
            "model and the step as factories; the cluster's workers decide how many chains "
            "run at once; each chain returns its own InferenceData/DataTree, merged here"
        )

    # the generators of the chains of pm.sample(chains=chains, random_seed=random_seed)
    from pymc.util import get_random_generator

    bit_generator = get_random_generator(kwargs.pop("random_seed", None)).bit_generator
    root = bit_generator.seed_seq
    seeds = [
        np.random.Generator(type(bit_generator)(np.random.SeedSequence(
            root.entropy, spawn_key=root.spawn_key, pool_size=root.pool_size,
            n_children_spawned=root.n_children_spawned + i)))
        for i in range(chains)
    ]
    initvals = kwargs.pop("initvals", None)
    if initvals is None or isinstance(initvals, Mapping):
        initvals = [initvals] * chains
    elif len(initvals) != chains:  # pm.sample's check, which its one-chain calls cannot make
        raise ValueError(f"initvals has {len(initvals)} entries for {chains} chains")
    progressbar = kwargs.pop("progressbar", True)
    progressbar = False if kwargs.get("quiet", False) else progressbar
    kwargs.pop("progressbar_theme", None)
    convergence_checks = kwargs.pop("compute_convergence_checks", True)
    tune, draws = int(kwargs.get("tune", 1000)), int(kwargs.get("draws", 1000))
    payloads = [_dumps((model_factory, step_factory, {**kwargs, "initvals": initvals[i]}),
                       "model_factory, step_factory or pm_sample_kwargs") for i in range(chains)]

    cluster = None
    if client is None:
        cluster, client = _start_local_cluster(min(chains, _n_cpus()), cluster_kwargs)
        if compiledir is None:
            import pytensor

            compiledir = os.path.join(str(pytensor.config.base_compiledir),
                                      "pymc-kameleon-dask")
    elif getattr(client, "asynchronous", False):
        raise TypeError("sample() needs a synchronous distributed.Client")

    run_id = uuid.uuid4().hex
    # set while the run is wanted; cleared (and so deleted on the scheduler) when it ends
    wanted = distributed.Event(f"pymc-kameleon-run-{run_id}", client=client)
    progress = _Progress(chains, tune, draws, progressbar, run_id)
    futures: list[Any] = []
    try:
        register_compiledir_plugin(client, None if compiledir is None else os.fspath(compiledir))
        _warn_multithreaded(client)
        if progressbar:
            client.subscribe_topic(_PROGRESS_TOPIC, progress.handle_event)
        wanted.set()
        t_start = time.perf_counter()
        futures = [client.submit(_run_chain, payloads[i], i, seeds[i], run_id, pure=False,
                                 key=f"pymc-kameleon-chain-{i}-{run_id}")
                   for i in range(chains)]
        chain_of = {f.key: i for i, f in enumerate(futures)}
        results: list[Any] = [None] * chains
        for future in distributed.as_completed(futures, loop=client.loop):
            chain = chain_of[future.key]
            results[chain] = _chain_result(distributed, future, chain)
            progress.finish(chain)
        sampling_time = time.perf_counter() - t_start
    except BaseException:
        with contextlib.suppress(Exception):
            client.cancel([f for f in futures if not f.done()], force=True)
        raise
    finally:
        progress.close()
        with contextlib.suppress(Exception):
            wanted.clear()
        if cluster is not None:
            _close_local_cluster(cluster, client)
        else:  # leave nothing registered on the user's scheduler
            with contextlib.suppress(Exception):
                client.unregister_worker_plugin(_PLUGIN_NAME)
            if progressbar:
                with contextlib.suppress(Exception):
                    client.unsubscribe_topic(_PROGRESS_TOPIC)

    _log_compiledirs(results)
    _reissue_warnings(results)
    merged = _merge_chains([r.data for r in results], sampling_time)
    if not kwargs.get("quiet", False):
        _log.info("Sampling %d chains for %d tune and %d draw iterations on Dask took %.0f "
                  "seconds.", chains, tune, draws, sampling_time)
        if convergence_checks:
            _convergence_checks(merged, results[0].model_vars)
    return merged


def _chain_result(distributed: Any, future: Any, chain: int) -> Any:
    """The result of a finished task, or its failure as :class:`ChainError`."""
    try:
        return future.result()
    except ChainError:
        raise
    except distributed.KilledWorker as err:
        raise ChainError(
            chain, "running on a Dask worker",
            f"the workers running it died too often ({err}); raise the Dask setting "
            "distributed.scheduler.allowed-failures if workers are expected to be lost",
        ) from err
    except (Exception, asyncio.CancelledError) as err:
        raise ChainError(chain, "running on a Dask worker",
                         f"{type(err).__name__}: {err}") from err


def _import_distributed():
    try:
        import distributed
    except ImportError as err:
        raise ImportError(
            "pymc_kameleon.distributed needs Dask's 'distributed' package; install it with "
            f"{_EXTRA}"
        ) from err
    return distributed


def _check_factory(factory: Any, name: str) -> None:
    import pymc as pm

    if isinstance(factory, pm.Model):
        raise TypeError(
            f"{name} must be a function that builds the model (e.g. a top-level function or "
            "a functools.partial), not a pymc.Model: each chain builds its own model in its "
            "worker"
        )
    if not callable(factory):
        raise TypeError(f"{name} must be callable, got {type(factory).__name__}")
    _dumps(factory, name)


def _dumps(obj: Any, name: str) -> bytes:
    """cloudpickle ``obj`` into one bytes object, with a clear error if it cannot be.

    The tasks receive their factories and keyword arguments as such bytes and unpickle them
    themselves: NumPy arrays then come back as fresh, aligned copies.  (Dask's own
    serialisation may hand arrays over as views of its message buffers, which can be
    unaligned, and PyTensor refuses unaligned constants.)
    """
    try:
        return dumps(obj)
    except Exception as err:
        raise TypeError(
            f"{name} cannot be pickled, so it cannot be sent to the Dask workers "
            f"({type(err).__name__}: {err}).  Use a top-level function or a "
            "functools.partial of one, and build the model (and anything unpicklable, "
            "such as as_op Ops, open files or locks) inside it."
        ) from err


def _n_cpus() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _warn_multithreaded(client: Any) -> None:
    threads = {addr: n for addr, n in client.nthreads().items() if n > 1}
    if threads:
        warnings.warn(
            f"{len(threads)} Dask worker(s) have several threads (e.g. {next(iter(threads))}: "
            f"{max(threads.values())}), but each worker process runs one chain at a time; "
            "start the workers with one thread each ('dask worker ADDRESS --nworkers N "
            "--nthreads 1') to run N chains per node (see docs/distributed.md)",
            UserWarning, stacklevel=3,
        )


def _start_local_cluster(n_workers: int, cluster_kwargs: Mapping[str, Any] | None):
    """Start the embedded cluster: worker processes, one thread each, on the loopback."""
    distributed = _import_distributed()
    options: dict[str, Any] = {
        "n_workers": n_workers,
        "threads_per_worker": 1,
        "processes": True,
        "host": "127.0.0.1",
        "dashboard_address": "127.0.0.1:0",
    }
    options.update(cluster_kwargs or {})
    cluster = distributed.LocalCluster(**options)
    try:
        client = distributed.Client(cluster, set_as_default=False)
    except BaseException:
        cluster.close()
        raise
    return cluster, client


def _close_local_cluster(cluster: Any, client: Any) -> None:
    """Close the embedded cluster.

    Worker processes that imported PyMC take a few seconds to exit, after which the nanny
    kills them with a warning ("Worker process still alive after 4.0 seconds, killing"):
    expected here, so that warning is not shown.
    """
    with _quiet_logger("distributed.nanny", logging.ERROR):
        for obj in (client, cluster):
            with contextlib.suppress(Exception):
                obj.close()


# --------------------------------------------------------------------------------- a task
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


@contextlib.contextmanager
def _quiet_logger(name: str, level: int = logging.WARNING) -> Iterator[None]:
    """Raise a logger's level for a while (e.g. a worker's one-chain ``pm.sample`` logs)."""
    logger = logging.getLogger(name)
    previous = logger.level
    logger.setLevel(max(previous, level))
    try:
        yield
    finally:
        logger.setLevel(previous)


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
                                               "worker": worker.address})

    return callback


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


# ----------------------------------------------------------------------------- progress
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
            TimeElapsedColumn(), TimeRemainingColumn(), TextColumn("{task.fields[where]}"),
        )
        if self._combined:
            self._tasks = [self._bar.add_task(f"{chains} chains", total=chains * self.total,
                                              where="")]
        else:
            self._tasks = [self._bar.add_task(f"Chain {i}", total=self.total, where="queued")
                           for i in range(chains)]
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
                self._update(chain, str(msg.get("worker", "")))

    def finish(self, chain: int) -> None:
        with self._lock:
            self.done[chain] = self.total
            self._update(chain, "done")

    def _update(self, chain: int, where: str) -> None:
        if self._bar is None:
            return
        if self._combined:
            self._bar.update(self._tasks[0], completed=sum(self.done))
        else:
            self._bar.update(self._tasks[chain], completed=self.done[chain], where=where)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


# ------------------------------------------------------------------------------- merging
def _merge_chains(parts: Sequence[Any], sampling_time: float | None = None) -> Any:
    """Concatenate one-chain results into chains ``0 .. n-1``, as ``pm.sample`` returns them.

    ArviZ 0.x: ``arviz.concat`` (groups without a ``chain`` dimension, such as
    ``observed_data``, are kept once).  ArviZ 1.x returns a :class:`xarray.DataTree`, which
    ``xarray.concat`` concatenates node by node.  Both give the groups of ``pm.sample(chains=n)``
    with the same values (``tests/test_distributed.py``).
    """
    import xarray as xr

    from pymc_kameleon.compat import ARVIZ_VERSION

    if ARVIZ_VERSION[0] >= 1:
        numbered = [xr.map_over_datasets(functools.partial(_number_chain, i), part)
                    for i, part in enumerate(parts)]
        merged = xr.concat(numbered, dim="chain", data_vars="minimal", coords="minimal",
                           compat="override", combine_attrs="override")
        groups = list(merged.subtree)
    else:
        import arviz as az

        merged = az.concat(*parts, dim="chain", reset_dim=True)
        groups = [merged[name] for name in merged.groups()]
    if sampling_time is not None:
        for ds in groups:
            if "sampling_time" in ds.attrs:
                ds.attrs["sampling_time"] = float(sampling_time)
    return merged


def _number_chain(chain: int, ds: Any) -> Any:
    return ds.assign_coords(chain=[chain]) if "chain" in ds.dims else ds


def _convergence_checks(data: Any, model_vars: tuple[tuple[str, ...], tuple[str, ...]]) -> None:
    """``pm.sample``'s convergence warnings, on the merged chains (logged, like PyMC)."""
    try:
        from pymc.stats.convergence import log_warnings, run_convergence_checks

        free, deterministic = model_vars
        model = SimpleNamespace(free_RVs=[SimpleNamespace(name=n) for n in free],
                                deterministics=[SimpleNamespace(name=n) for n in deterministic])
        log_warnings(run_convergence_checks(data, model))
    except Exception:  # pragma: no cover - diagnostics must never fail a finished run
        _log.debug("convergence checks failed", exc_info=True)
