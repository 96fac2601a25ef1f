"""Several Laplace searches whose batches of evaluations are merged into one per round.

:func:`laplace_searches` runs :func:`~.laplace.laplace_start` from each of several starts
(one search each, as the emulator's multi-start mode search does) so that, with a batch
log density on an executor, a round costs one batch for all searches instead of one per
search: each search runs in a thread of its own and blocks at every batch it asks for;
once every search still running waits, their points are evaluated as one batch, in the
order of the starts, by the calling thread.  Each search sees the values it would see
alone, so the results are those of the searches run one after the other; only the order
in which points are evaluated differs (the log density must be deterministic, as the
Laplace start needs anyway).
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Sequence

import numpy as np

from .laplace import LaplaceStart, laplace_start

__all__ = ["laplace_searches"]


class _Stopped(BaseException):  # noqa: N818 (not an error of the search: it is told to end)
    """Ends a search thread when the batch it waits for failed (the caller re-raises)."""


def laplace_searches(logp_rows: Callable[[np.ndarray], np.ndarray],
                     starts: Sequence[np.ndarray], max_evals: int,
                     check: bool = True, search: Callable | None = None) -> list:
    """:func:`~.laplace.laplace_start` from each start alone (``starts=()``), with every
    round's batches merged into one call of ``logp_rows``.

    Parameters
    ----------
    logp_rows : callable
        Deterministic log density at the rows of a 2-d array (one batch).
    starts : sequence of arrays
        One search from each.
    max_evals : int
        The optimiser's budget per search (as :func:`~.laplace.laplace_start`).
    check : bool, default True
        Whether each search checks its Gaussian against the target (as
        :func:`~.laplace.laplace_start`).
    search : callable, optional
        Another search, called as ``search(logp, x0, max_evals, logp_rows=...)`` (e.g.
        :func:`~.laplace.climb`); ``check`` then does not apply.

    Returns
    -------
    list of LaplaceStart (or of what ``search`` returns)
        One per start, in their order: equal to ``laplace_start(f, x0, max_evals,
        logp_rows=logp_rows, check=check)`` for each start ``x0`` (``n_evals`` each
        search's own).

    Examples
    --------
    >>> import numpy as np
    >>> calls = []
    >>> def rows(X):
    ...     calls.append(len(X))
    ...     return -0.5 * np.sum((X - 2.0) ** 2, axis=1)
    >>> res = laplace_searches(rows, [np.zeros(2), np.ones(2)], 300)
    >>> [r.mode.round(4).tolist() for r in res]
    [[2.0, 2.0], [2.0, 2.0]]
    >>> sum(r.n_evals for r in res) == sum(calls)
    True
    """
    n = len(starts)
    cond = threading.Condition()
    asked: dict[int, np.ndarray] = {}  # each waiting search's points
    answers: dict[int, np.ndarray | None] = {}  # their values (None: stop)
    live = set(range(n))
    results: list[LaplaceStart | None] = [None] * n
    errors: list[BaseException | None] = [None] * n

    def rows_of(k: int) -> Callable[[np.ndarray], np.ndarray]:
        def rows(X: np.ndarray) -> np.ndarray:
            with cond:
                asked[k] = np.asarray(X, dtype=float)
                cond.notify_all()
                cond.wait_for(lambda: k in answers)
                values = answers.pop(k)
            if values is None:
                raise _Stopped
            return values
        return rows

    def run(k: int) -> None:
        rows = rows_of(k)
        try:
            one = lambda x: rows(x[None, :])[0]  # noqa: E731
            results[k] = (laplace_start(one, starts[k], max_evals, logp_rows=rows, check=check)
                          if search is None else search(one, starts[k], max_evals,
                                                        logp_rows=rows))
        except _Stopped:
            pass
        except BaseException as exc:  # re-raised by the caller
            errors[k] = exc
        finally:
            with cond:
                live.discard(k)
                cond.notify_all()

    # laplace_start sets warning filters (process-wide) in each thread: the caller's are
    # restored once every search ended, whatever order the threads restored them in
    with warnings.catch_warnings():
        threads = [threading.Thread(target=run, args=(k,), daemon=True) for k in range(n)]
        for t in threads:
            t.start()
        try:
            while True:
                with cond:  # a round: every search still running waits for its values
                    cond.wait_for(lambda: all(k in asked for k in live))
                    if not live:
                        break
                    keys = sorted(asked)
                    batch = [asked.pop(k) for k in keys]
                values = np.asarray(logp_rows(np.concatenate(batch)), dtype=float)
                with cond:
                    for k, part in zip(keys, np.split(values, np.cumsum(
                            [len(b) for b in batch])[:-1]), strict=True):
                        answers[k] = part
                    cond.notify_all()
        except BaseException:
            with cond:  # end the searches: each stops at its next request
                for k in live:
                    answers[k] = None
                asked.clear()
                cond.notify_all()
            for t in threads:
                t.join()
            raise
        for t in threads:
            t.join()
    for exc in errors:
        if exc is not None:
            raise exc
    return results  # type: ignore[return-value]

