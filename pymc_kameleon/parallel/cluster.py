"""The Dask side of :func:`pymc_kameleon.distributed.sample` that is not about chains.

Importing Dask's ``distributed`` with a clear error when it is missing, the embedded
``LocalCluster`` (started and closed), the warning about workers with several threads, and
a context manager that quiets a logger for a while.
"""

from __future__ import annotations

import contextlib
import logging
import os
import warnings
from collections.abc import Iterator, Mapping
from typing import Any

__all__: list[str] = []

#: What to install when Dask is missing.
_EXTRA = 'pip install "dask[distributed]" (or pip install ".[distributed]" from a clone)'


def _import_distributed():
    try:
        import distributed
    except ImportError as err:
        raise ImportError(
            "pymc_kameleon.distributed needs Dask's 'distributed' package; install it with "
            f"{_EXTRA}"
        ) from err
    return distributed

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
