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

The code.  This module is the driver; the task that runs one chain is in
:mod:`pymc_kameleon.parallel.chains`, the embedded cluster in
:mod:`~pymc_kameleon.parallel.cluster`, the compilation-directory plugin in
:mod:`~pymc_kameleon.parallel.plugin`, the progress bars in
:mod:`~pymc_kameleon.parallel.progress` and the merging in
:mod:`~pymc_kameleon.parallel.merge`.

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
import logging
import os
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .parallel.chains import ChainError, _log_compiledirs, _reissue_warnings, _run_chain
from .parallel.cluster import (
    _close_local_cluster,
    _import_distributed,
    _n_cpus,
    _start_local_cluster,
    _warn_multithreaded,
)
from .parallel.merge import _convergence_checks, _merge_chains
from .parallel.pickling import dumps
from .parallel.plugin import _PLUGIN_NAME, register_compiledir_plugin
from .parallel.progress import _PROGRESS_TOPIC, _Progress

__all__ = ["ChainError", "sample"]

_log = logging.getLogger(__name__)

#: pm.sample keywords that the tasks set themselves or whose result cannot be merged.
_TASK_KWARGS = ("cores", "step", "model", "trace")


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
