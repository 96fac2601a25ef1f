"""The standard library's ``concurrent.futures`` internals the package reads (by name, here
only; tests/test_compat_internals.py checks them)."""

from __future__ import annotations

from typing import Any

__all__ = ["executor_max_workers"]


def executor_max_workers(executor: Any) -> int | None:
    """The number of workers of a ``concurrent.futures`` pool, or ``None`` if it has none.

    Reads CPython's internals: ``ThreadPoolExecutor`` and ``ProcessPoolExecutor`` keep the
    number in the private attribute ``_max_workers`` (as in CPython 3.11 and 3.12) and have
    no public accessor.  Other executors, e.g. a Dask client's ``get_executor()``, give
    ``None``.

    Parameters
    ----------
    executor : concurrent.futures.Executor

    Returns
    -------
    int or None
    """
    return getattr(executor, "_max_workers", None)
