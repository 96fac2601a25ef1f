"""Run the chains of ``pm.sample`` on a Dask cluster, one chain per task.

:func:`sample` sends every chain to a Dask worker as one task.  The task builds the model from
a picklable *factory* (a top-level function or a :func:`functools.partial`), builds the step
method, and runs ``pm.sample(chains=1, cores=1, ...)``; the driver merges the per-chain
results into one ``InferenceData`` (ArviZ 0.x) or ``DataTree`` (ArviZ 1.x) with chains
``0 .. n-1``, as ``pm.sample`` returns them.  Install the optional dependency with
``pip install "pymc-kameleon[distributed]"``; the rest of the package never imports Dask.

Why factories.  The model and the compiled step never cross the network: models built with
``pytensor.compile.ops.as_op`` or holding NumPy estimators do not have to pickle, and every
worker compiles its own functions.

Same seeds, same draws.  ``pm.sample(chains=n, random_seed=S)`` spawns one
:class:`numpy.random.Generator` per chain, ``get_random_generator(S).spawn(n)``, and uses
chain ``i``'s generator for its initial point and its step (``step.set_rng`` in PyMC 5,
``step.setup_chain`` in PyMC 6).  The driver derives the seed sequence of each chain's
*parent* (the root seed sequence with ``i`` children already spawned) and the task passes a
generator built on it as the ``random_seed`` of ``pm.sample(chains=1)``, whose single
spawned child is then exactly chain ``i``'s generator.  So chain ``i`` is drawn bit for bit
as by ``pm.sample(chains=n, cores=1, random_seed=S)`` with the same step method, for every
step method whose randomness comes from the generator that ``pm.sample`` gives it (all steps
of this package, including their reseeding of pseudo-marginal estimators).  With
``random_seed=None`` the driver draws fresh entropy once, so a re-run task (after a worker
died) repeats the same draws.

PyTensor compilation directory.  PyTensor is not thread-safe when it compiles, and its
compilation directory is shared by every process of a user by default (``~/.pytensor``, often
on a network file system on clusters, where its file lock is unreliable).  PyTensor reads
``base_compiledir`` once, when it is imported, so the directory cannot be chosen per task
inside a worker process that has already imported PyTensor (creating a process per chain
instead would recompile every function for every chain).  The choice made here is one
directory per worker *process*, set before that process imports PyTensor:

* :func:`sample` registers a worker plugin (pickled by value, so loading it imports neither
  PyTensor nor this package) that sets ``base_compiledir`` in ``PYTENSOR_FLAGS`` when the
  worker starts, and on every worker that joins or is restarted later.  For the embedded
  cluster the directory is ``<your base_compiledir>/pymc-kameleon-dask/worker-<name>``: one
  per worker, and the next run finds its compiled modules there (compiling the C code of a
  model from scratch can take tens of seconds).  For a cluster you pass in, it is
  ``<Dask scratch space>/pymc-kameleon-pytensor/worker-<name>``, next to the worker's
  ``local_directory`` (node-local where Dask's ``temporary-directory`` or the workers'
  ``local_directory`` say so), unless the workers' ``PYTENSOR_FLAGS`` already set
  ``base_compiledir`` (e.g. in the job script), which is then left alone.
  ``sample(..., compiledir=ROOT)`` makes worker ``name`` use ``ROOT/worker-<name>`` instead.
* Chains in one worker process run one at a time (a process-wide lock), so workers with
  several threads are safe, if not useful: use one thread per worker process.
* The plugin cannot act in a worker process that imported PyTensor before it started, e.g.
  because ``multiprocessing`` ("spawn") re-imported a main script that imports PyMC at the
  top.  Such workers keep the directory PyTensor already chose (by default shared through
  PyTensor's file lock, as the processes of ``pm.sample(cores=n)`` share it, which is safe on
  a local disk); the driver logs which chains ran like that.

Faults.  A worker that dies mid-chain is handled by Dask's scheduler, which re-runs the task
on another worker (up to ``distributed.scheduler.allowed-failures`` times, 3 by default); the
seed is fixed in the driver, so the re-run gives the same draws.  An exception in a factory
or in ``pm.sample`` is not retried (it would fail again): it is raised as :class:`ChainError`
naming the chain, the stage and the original error with its traceback from the worker.
``KeyboardInterrupt`` cancels the submitted tasks and shuts the embedded cluster down; a
running chain notices within a fraction of a second that its task was cancelled and stops
(Dask itself cannot stop a running task).

References
----------
- Rocklin, M. (2015). Dask: parallel computation with blocked algorithms and task
  scheduling. Proceedings of the 14th Python in Science Conference.
- Vehtari, A., Gelman, A., Simpson, D., Carpenter, B., Bürkner, P.-C. (2021).
  Rank-normalization, folding, and localization: an improved R-hat for assessing
  convergence of MCMC. Bayesian Analysis 16(2) (why several independent chains).
"""

from __future__ import annotations

import contextlib
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

__all__ = ["ChainError", "sample"]

_log = logging.getLogger(__name__)

#: What to install when Dask is missing.
_EXTRA = 'pip install "pymc-kameleon[distributed]"'
#: Name of the worker plugin that chooses the PyTensor compilation directory.
_PLUGIN_NAME = "pymc-kameleon-pytensor-compiledir"
#: Environment variable in which the plugin records the directory it chose.
_COMPILEDIR_ENV = "PYMC_KAMELEON_COMPILEDIR"
#: Seconds between two progress messages of one chain.
_PROGRESS_INTERVAL = 0.2

# One chain at a time per worker process: PyTensor compilation is not thread-safe.
_CHAIN_LOCK = threading.Lock()

# pm.sample keywords that make no sense here, with the reason.
_REJECTED_KWARGS = {
    "cores": "the number of chains that run at once is the number of Dask worker threads; "
    "for the embedded cluster pass cluster_kwargs={'n_workers': ...}",
    "step": "pass a step_factory instead (a callable building the step inside the model)",
    "model": "pass a model_factory instead (a picklable callable returning the model)",
    "mp_ctx": "chains run in Dask worker processes, not in multiprocessing children",
    "nuts_sampler": "only PyMC's own samplers run in the tasks",
}


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
    chains: int | None = 4,
    client: Any = None,
    cluster_kwargs: Mapping[str, Any] | None = None,
    compiledir: str | os.PathLike | None = None,
    **pm_sample_kwargs: Any,
) -> Any:
    """Sample ``chains`` chains of ``pm.sample`` on Dask, one chain per task.

    Each task builds the model with ``model_factory()``, the step with ``step_factory()``
    inside the model's context, and runs ``pm.sample(chains=1, cores=1, ...)`` with the
    generator that ``pm.sample(chains=chains, random_seed=...)`` would give that chain (see
    the module documentation).  The results are merged into one object with chains
    ``0 .. chains-1``: every group that ``pm.sample`` returns (posterior, sample_stats, the
    warm-up groups with ``discard_tuned_samples=False``, observed data, ...) is kept.

    Parameters
    ----------
    model_factory : callable
        ``model_factory() -> pymc.Model``.  Must pickle (cloudpickle): a top-level function or
        a :func:`functools.partial` of one is safest.  Called once per chain, in the worker.
    step_factory : callable
        ``step_factory() -> step`` (a step method or a list of them), called inside the
        model's context, e.g. the class ``RandomWalkStep`` itself or
        ``functools.partial(KameleonStep, n_history=500)``.
    chains : int, default 4
        Number of chains (tasks); ``None`` is the default, as with ``pm.sample``.
    client : distributed.Client, optional
        A client of the cluster to use (``Client("tcp://host:8786")``, a ``dask-jobqueue``
        cluster's client, ...); it is left open.  By default an embedded
        ``distributed.LocalCluster`` is started (worker processes, one thread each, one
        worker per core but no more than ``chains``) and closed afterwards.
    cluster_kwargs : mapping, optional
        Keyword arguments for the embedded ``LocalCluster`` (e.g. ``{"n_workers": 2}``);
        ignored when ``client`` is given.
    compiledir : str or path, optional
        Root of the workers' PyTensor compilation directories, as seen by the workers
        (``~`` and ``$VARIABLES`` are expanded there, e.g. ``"$TMPDIR/pytensor"``): worker
        ``name`` uses ``<compiledir>/worker-<name>``.  By default the embedded cluster uses
        ``<base_compiledir>/pymc-kameleon-dask`` and a cluster you pass in the directory
        ``pymc-kameleon-pytensor`` of the workers' Dask scratch space, unless their
        ``PYTENSOR_FLAGS`` already set ``base_compiledir``.
        Applies to worker processes that have not imported PyTensor yet (see the module
        documentation).
    **pm_sample_kwargs
        Passed to ``pm.sample`` in every task: ``draws``, ``tune``, ``random_seed``,
        ``initvals`` (one dict, or a sequence of one per chain), ``discard_tuned_samples``,
        ``idata_kwargs``, ``callback`` (runs in the worker), ...  ``progressbar`` is drawn
        by the driver: ``False`` for none, ``"combined"`` (or ``"combined+stats"``) for one
        bar of all draws, anything else true for one bar per chain.
        ``compute_convergence_checks`` runs once, on the merged result.  ``cores``, ``step``,
        ``model``, ``mp_ctx``, ``nuts_sampler``, a ``trace`` backend and
        ``return_inferencedata=False`` are not supported.

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
    chains = _check_chains(chains)
    _check_factory(model_factory, "model_factory")
    _check_factory(step_factory, "step_factory")
    kwargs = dict(pm_sample_kwargs)
    _check_kwargs(kwargs)

    random_seed = kwargs.pop("random_seed", None)
    initvals = _initvals_per_chain(kwargs.pop("initvals", None), chains)
    progressbar = kwargs.pop("progressbar", True)
    kwargs.pop("progressbar_theme", None)
    convergence_checks = kwargs.pop("compute_convergence_checks", True)
    quiet = bool(kwargs.get("quiet", False))
    if quiet:
        progressbar = False
    tune = int(kwargs.get("tune", 1000))
    draws = int(kwargs.get("draws", 1000))
    _check_picklable(kwargs, "pm_sample_kwargs")
    seeds = _chain_seeds(random_seed, chains)

    owns_cluster = client is None
    cluster = None
    if owns_cluster:
        n_workers = min(chains, _cpu_count())
        cluster, client = _start_local_cluster(n_workers, cluster_kwargs)
    elif getattr(client, "asynchronous", False):
        raise TypeError("sample() needs a synchronous distributed.Client")

    topic = f"pymc-kameleon-progress-{uuid.uuid4().hex}" if progressbar else None
    progress = None
    futures: list[Any] = []
    try:
        progress = _Progress(chains, tune, draws, progressbar)
        if compiledir is None and owns_cluster:
            compiledir = _embedded_compiledir_root()
        _register_compiledir_plugin(client, None if compiledir is None else os.fspath(compiledir))
        if topic is not None:
            client.subscribe_topic(topic, progress.handle_event)
        if not quiet:
            _log.info("Dask sampling (%d chains on %d workers)", chains, _n_workers(client))
        t_start = time.perf_counter()
        run_id = uuid.uuid4().hex[:8]
        for chain in range(chains):
            task_kwargs = dict(kwargs)
            if initvals[chain] is not None:
                task_kwargs["initvals"] = initvals[chain]
            payload = _dumps((model_factory, step_factory, task_kwargs), "the task")
            futures.append(client.submit(
                _run_chain, payload, chain, seeds[chain], topic,
                key=f"pymc-kameleon-chain-{chain}-{run_id}", pure=False,
            ))
        results = _gather(distributed, futures, progress)
        sampling_time = time.perf_counter() - t_start
    except BaseException:
        pending = [f for f in futures if not f.done()]
        if pending:
            with contextlib.suppress(Exception):
                client.cancel(pending, force=True)
        raise
    finally:
        if progress is not None:
            progress.close()
        if topic is not None and progress is not None:
            with contextlib.suppress(Exception):
                client.unsubscribe_topic(topic)
        if owns_cluster:
            _close_local_cluster(cluster, client)

    _log_compiledirs(results)
    _reissue_warnings(results)
    merged = _merge_chains([r.data for r in results], sampling_time)
    if not quiet:
        _log.info("Sampling %d chains for %d tune and %d draw iterations on Dask took %.0f "
                  "seconds.", chains, tune, draws, sampling_time)
        if convergence_checks:
            _convergence_checks(merged, results[0].model_vars)
    return merged


def _import_distributed():
    try:
        import distributed
    except ImportError as err:
        raise ImportError(
            "pymc_kameleon.distributed needs Dask's 'distributed' package; install it with "
            f"{_EXTRA}"
        ) from err
    return distributed


def _check_chains(chains: int | None) -> int:
    if chains is None:  # as pm.sample: the default
        return 4
    try:
        ok = not isinstance(chains, bool) and int(chains) == chains and chains >= 1
    except (TypeError, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"chains must be a positive integer, got {chains!r}")
    return int(chains)


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
    _check_picklable(factory, name)


def _check_picklable(obj: Any, name: str) -> None:
    _dumps(obj, name)


def _dumps(obj: Any, name: str) -> bytes:
    """cloudpickle ``obj`` into one bytes object, with a clear error if it cannot be.

    The tasks receive their factories and keyword arguments as such bytes and unpickle them
    themselves: NumPy arrays then come back as fresh, aligned copies.  (Dask's own
    serialisation may hand arrays over as views of its message buffers, which can be
    unaligned, and PyTensor refuses unaligned constants.)
    """
    import cloudpickle

    try:
        return cloudpickle.dumps(obj)
    except Exception as err:
        raise TypeError(
            f"{name} cannot be pickled, so it cannot be sent to the Dask workers "
            f"({type(err).__name__}: {err}).  Use a top-level function or a "
            "functools.partial of one, and build the model (and anything unpicklable, "
            "such as as_op Ops, open files or locks) inside it."
        ) from err


def _check_kwargs(kwargs: dict[str, Any]) -> None:
    for key, reason in _REJECTED_KWARGS.items():
        if key in kwargs and not (key == "nuts_sampler" and kwargs[key] == "pymc"):
            raise TypeError(f"sample() does not take {key!r}: {reason}")
    if kwargs.get("trace") is not None:
        raise TypeError("sample() does not take a trace backend: each chain returns its own "
                        "result, merged in the driver")
    if not kwargs.get("return_inferencedata", True):
        raise TypeError("sample() returns the merged InferenceData/DataTree; "
                        "return_inferencedata=False is not supported")


def _initvals_per_chain(initvals: Any, chains: int) -> list[Any]:
    if initvals is None or isinstance(initvals, Mapping):
        return [initvals] * chains
    if isinstance(initvals, Sequence) and not isinstance(initvals, str):
        if len(initvals) != chains:
            raise ValueError(f"initvals has {len(initvals)} entries for {chains} chains")
        return list(initvals)
    raise TypeError("initvals must be a dict or a sequence of one dict (or None) per chain")


def _cpu_count() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _n_workers(client: Any) -> int:
    try:
        return len(client.scheduler_info().get("workers", {}))
    except Exception:  # pragma: no cover - purely informative
        return 0


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


# ------------------------------------------------------------------------ seeds per chain
@dataclass(frozen=True)
class _ChainSeed:
    """The seed sequence whose first spawned child is one chain's generator (plain data)."""

    bit_generator: str
    entropy: Any
    spawn_key: tuple[int, ...]
    pool_size: int
    n_children_spawned: int

    def generator(self) -> np.random.Generator:
        seq = np.random.SeedSequence(
            self.entropy, spawn_key=self.spawn_key, pool_size=self.pool_size,
            n_children_spawned=self.n_children_spawned,
        )
        return np.random.Generator(getattr(np.random, self.bit_generator)(seq))


def _chain_seeds(random_seed: Any, chains: int) -> list[_ChainSeed]:
    """Per chain, the parent seed of what ``pm.sample(chains=chains)`` would spawn for it.

    ``pm.sample`` spawns ``get_random_generator(random_seed).spawn(chains)``: child ``i``
    is built on ``root_seq.spawn(...)[i]``, i.e. the child of the root seed sequence after
    ``i`` earlier children.  ``pm.sample(chains=1, random_seed=parent_i)`` spawns that same
    child.
    """
    from pymc.util import get_random_generator

    if isinstance(random_seed, int | np.integer) and random_seed == -1:
        raise ValueError(
            "Setting random_seed = -1 is not allowed. Pass `None` to not specify a seed."
        )
    if isinstance(random_seed, tuple | list):
        warnings.warn(
            "A list or tuple of random_seed no longer specifies the specific random_seed of "
            "each chain. Use a single seed instead.", UserWarning, stacklevel=3,
        )
    root = get_random_generator(random_seed)
    bit_generator = root.bit_generator
    seq = getattr(bit_generator, "seed_seq", None) or getattr(bit_generator, "_seed_seq", None)
    if not isinstance(seq, np.random.SeedSequence):
        raise ValueError("random_seed must give a generator with a numpy SeedSequence "
                         "(an int, None, a SeedSequence or a Generator seeded from one)")
    return [
        _ChainSeed(type(bit_generator).__name__, seq.entropy, tuple(seq.spawn_key),
                   seq.pool_size, seq.n_children_spawned + i)
        for i in range(chains)
    ]


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


def _run_chain(payload: bytes, chain: int, seed: _ChainSeed, topic: str | None) -> _ChainResult:
    """One chain: build the model and the step, run ``pm.sample(chains=1)`` (in a worker).

    ``payload`` is the cloudpickled ``(model_factory, step_factory, pm_sample_kwargs)``.
    """
    import pickle

    import pymc as pm
    import pytensor

    worker = _current_worker()
    # one chain at a time per process (_CHAIN_LOCK), so recording its warnings (global
    # state) does not mix two chains; they are issued again in the caller
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
        callback = _chain_callback(worker, topic, chain, total, kwargs.pop("callback", None))
        try:
            with model:
                data = pm.sample(
                    chains=1, cores=1, step=step, random_seed=seed.generator(),
                    progressbar=False, compute_convergence_checks=False, callback=callback,
                    **kwargs,
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
    """Raised inside a task whose future was cancelled (e.g. after ``KeyboardInterrupt``)."""


def _current_key() -> Any:
    try:
        from distributed.worker import thread_state

        return getattr(thread_state, "key", None)
    except ImportError:  # pragma: no cover - only called in a worker
        return None


def _is_cancelled(worker: Any, key: Any) -> bool:
    """Has the scheduler cancelled this running task (best effort; False if unknown)?"""
    tasks = getattr(getattr(worker, "state", None), "tasks", None)
    if tasks is None or key is None:
        return False
    ts = tasks.get(key)
    return ts is None or ts.state == "cancelled"


def _chain_callback(
    worker: Any, topic: str | None, chain: int, total: int, user_callback: Any
) -> Callable[..., None] | None:
    """``pm.sample`` callback: the user's, then (throttled) progress and cancellation.

    Dask cannot stop a running task, so a cancelled chain stops itself: a few times a second
    it checks whether its task is still wanted, and raises if not, freeing its worker.
    """
    if worker is None and user_callback is None:
        return None
    key = _current_key()
    last = [-np.inf]

    def callback(trace, draw):
        if user_callback is not None:
            user_callback(trace=trace, draw=draw)
        if worker is None:
            return
        done = int(draw.draw_idx) + 1
        now = time.monotonic()
        if done == 1 or done >= total or now - last[0] >= _PROGRESS_INTERVAL:
            last[0] = now
            if _is_cancelled(worker, key):
                raise _ChainCancelled(f"chain {chain} was cancelled")
            if topic is not None:
                worker.log_event(topic, {"chain": chain, "done": done,
                                         "worker": worker.address})

    return callback


# ------------------------------------------------------------------- compilation directory
def _embedded_compiledir_root() -> str:
    import pytensor

    return os.path.join(str(pytensor.config.base_compiledir), "pymc-kameleon-dask")


def _compiledir_plugin(root: str | None) -> Any:
    """A worker plugin that gives each worker process its own PyTensor ``base_compiledir``.

    The class is defined here, inside a function, so that (cloud)pickle sends it by value:
    loading it in a worker imports neither this package nor PyTensor, which must not be
    imported before ``PYTENSOR_FLAGS`` is set.
    """
    from distributed.diagnostics.plugin import WorkerPlugin

    class PyTensorCompiledir(WorkerPlugin):
        name = _PLUGIN_NAME

        def __init__(self, root, env_name):
            self.root = root
            self.env_name = env_name

        def setup(self, worker):
            import os
            import re
            import sys

            if "pytensor" in sys.modules:
                return  # too late: PyTensor has read its flags
            items = [s for s in os.environ.get("PYTENSOR_FLAGS", "").split(",") if s.strip()]
            keys = {s.split("=", 1)[0].strip() for s in items}
            if self.root is None:
                if keys & {"base_compiledir", "compiledir"}:
                    return  # the cluster's own choice (e.g. set in the job script)
                # Dask's scratch space (node-local if configured so), next to the worker's
                # own directory, which Dask deletes while PyTensor still uses it at exit.
                root = os.path.join(os.path.dirname(os.path.abspath(worker.local_directory)),
                                    "pymc-kameleon-pytensor")
            else:
                root = os.path.expanduser(os.path.expandvars(self.root))
            name = re.sub(r"[^A-Za-z0-9_.-]", "_", str(worker.name))
            path = os.path.join(root, f"worker-{name}")
            if "," in path:
                return  # cannot be written into PYTENSOR_FLAGS
            items = [s for s in items
                     if s.split("=", 1)[0].strip() not in ("base_compiledir", "compiledir")]
            os.environ["PYTENSOR_FLAGS"] = ",".join([*items, f"base_compiledir={path}"])
            os.environ[self.env_name] = path

    return PyTensorCompiledir(root, _COMPILEDIR_ENV)


def _register_compiledir_plugin(client: Any, root: str | None) -> None:
    plugin = _compiledir_plugin(root)
    if hasattr(client, "register_plugin"):
        client.register_plugin(plugin, name=_PLUGIN_NAME)
    else:  # distributed < 2023.9
        client.register_worker_plugin(plugin, name=_PLUGIN_NAME)


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


# ----------------------------------------------------------------------- waiting, progress
def _wait_some(futures: Sequence[Any], timeout: float) -> list[Any]:
    """The futures among ``futures`` that are done, waiting at most ``timeout`` seconds.

    Polls ``Future.done()`` (``distributed.wait`` would need a default client, and the
    embedded client is deliberately not made the default).
    """
    deadline = time.monotonic() + timeout
    while True:
        done = [f for f in futures if f.done()]
        if done or time.monotonic() >= deadline:
            return done
        time.sleep(0.02)


def _gather(distributed: Any, futures: Sequence[Any], progress: _Progress) -> list[Any]:
    """Wait for every chain, raising the first failure as :class:`ChainError`."""
    chain_of = {f.key: i for i, f in enumerate(futures)}
    results: list[Any] = [None] * len(futures)
    pending = list(futures)
    while pending:
        done = _wait_some(pending, 0.25)
        for future in done:
            chain = chain_of[future.key]
            if future.status == "finished":
                results[chain] = future.result()
                progress.finish(chain)
            else:
                _raise_chain_failure(distributed, future, chain)
        finished = {f.key for f in done}
        pending = [f for f in pending if f.key not in finished]
        progress.refresh()
    return results


def _raise_chain_failure(distributed: Any, future: Any, chain: int) -> None:
    if future.status == "cancelled":
        raise ChainError(chain, "running on a Dask worker", "its task was cancelled")
    exc = future.exception()
    if isinstance(exc, ChainError):
        raise exc
    killed = getattr(distributed, "KilledWorker", None)
    if killed is not None and isinstance(exc, killed):
        raise ChainError(
            chain, "running on a Dask worker",
            f"the workers running it died too often ({exc}); raise the Dask setting "
            "distributed.scheduler.allowed-failures if workers are expected to be lost",
        ) from exc
    raise ChainError(chain, "running on a Dask worker", f"{type(exc).__name__}: {exc}") from exc


class _Progress:
    """Progress bars in the driver, fed by the workers' events (rich, like ``pm.sample``).

    ``mode`` is ``pm.sample``'s ``progressbar``: false for none, ``"combined"`` or
    ``"combined+stats"`` for one bar over all draws, anything else true for one per chain.
    """

    def __init__(self, chains: int, tune: int, draws: int, mode: Any):
        self.total = tune + draws
        self.done = [0] * chains
        self.where: list[str] = [""] * chains
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
        with self._lock:
            chain = int(msg["chain"])
            if 0 <= chain < len(self.done) and self.done[chain] < self.total:
                self.done[chain] = int(msg["done"])  # a re-run task starts again from 0
                self.where[chain] = str(msg.get("worker", ""))

    def finish(self, chain: int) -> None:
        with self._lock:
            self.done[chain] = self.total
            self.where[chain] = "done"

    def refresh(self) -> None:
        if self._bar is None:
            return
        with self._lock:
            done, where = list(self.done), list(self.where)
        if self._combined:
            self._bar.update(self._tasks[0], completed=sum(done))
        else:
            for task, n, w in zip(self._tasks, done, where, strict=True):
                self._bar.update(task, completed=n, where=w)

    def close(self) -> None:
        if self._bar is not None:
            self.refresh()
            self._bar.stop()
            self._bar = None


# ------------------------------------------------------------------------------- merging
def _merge_chains(parts: Sequence[Any], sampling_time: float | None = None) -> Any:
    """Concatenate one-chain results (InferenceData or DataTree) into chains 0..n-1."""
    first = parts[0]
    if _is_datatree(first):
        import xarray as xr

        nodes = {}
        for node in first.subtree:
            path = node.path
            datasets = [_node_dataset(p[path] if path != "/" else p) for p in parts]
            nodes[path] = _concat_chains(datasets, sampling_time)
        tree = xr.DataTree.from_dict(nodes)
        return tree
    import arviz as az

    groups = {name: _concat_chains([p[name] for p in parts], sampling_time)
              for name in first.groups()}
    attrs = dict(getattr(first, "attrs", None) or {}) or None
    return az.InferenceData(attrs=attrs, **groups)


def _is_datatree(obj: Any) -> bool:
    return type(obj).__name__ == "DataTree" and hasattr(obj, "subtree")


def _node_dataset(node: Any) -> Any:
    try:
        return node.to_dataset(inherit=False)
    except TypeError:  # xarray before the inherit keyword
        return node.to_dataset()


def _concat_chains(datasets: Sequence[Any], sampling_time: float | None) -> Any:
    import xarray as xr

    first = datasets[0]
    if "chain" in first.dims:
        renumbered = [ds.assign_coords(chain=np.array([i])) for i, ds in enumerate(datasets)]
        merged = xr.concat(renumbered, dim="chain", data_vars="minimal", coords="minimal",
                           compat="override", join="outer", combine_attrs="override")
    else:
        merged = first.copy()
    merged.attrs = dict(first.attrs)
    if sampling_time is not None and "sampling_time" in merged.attrs:
        merged.attrs["sampling_time"] = float(sampling_time)
    return merged


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
