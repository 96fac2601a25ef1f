"""The estimator Ops of a compiled function: found, reseeded, their generators saved.

Every PyTensor backend that runs an estimator calls the ``perform`` method of the *same* Op
instance that is in the graph, also inside ``OpFromGraph``, ``Scan`` and ``Blockwise``, so
its generator can be replaced after compilation, saved and restored.

References
----------
- Andrieu, Roberts (2009). The pseudo-marginal approach for efficient Monte Carlo
  computations. Annals of Statistics 37(2).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from pytensor.graph.op import HasInnerGraph

from ..compat import inner_graphs
from .op import LikelihoodEstimatorOp

__all__ = ["estimator_states", "find_estimators", "reseed_estimators", "set_estimator_states"]


def _outer_graph(fn):
    """The function graph of a compiled function (or of PyMC's ``PointFunc`` wrapper)."""
    if hasattr(fn, "maker"):  # pytensor.compile.function.types.Function
        return fn.maker.fgraph
    if hasattr(fn, "f") and hasattr(fn.f, "maker"):  # e.g. model.compile_logp()
        return fn.f.maker.fgraph
    if hasattr(fn, "toposort"):  # a FunctionGraph
        return fn
    raise TypeError(
        f"expected a compiled PyTensor function or a FunctionGraph, got {type(fn).__name__}"
    )


def _walk(graph) -> Iterator[LikelihoodEstimatorOp]:
    for node in graph.toposort():
        yield from _walk_op(node.op)


def _walk_op(op) -> Iterator[LikelihoodEstimatorOp]:
    if isinstance(op, LikelihoodEstimatorOp):
        yield op
    elif isinstance(op, HasInnerGraph):
        for inner in inner_graphs(op):
            yield from _walk(inner)
    core = getattr(op, "core_op", None)  # Blockwise: the Op applied to each batch element
    if core is not None:
        yield from _walk_op(core)


def find_estimators(fn) -> list[LikelihoodEstimatorOp]:
    """Every :class:`LikelihoodEstimatorOp` a compiled function evaluates, each once.

    Looks through the compiled graph and, recursively, the inner graphs of ``OpFromGraph``,
    ``Scan`` (any Op with an inner graph) and the core Op of ``Blockwise``.  These are the
    Op instances whose ``perform`` the compiled function calls on every backend (C or
    Python virtual machine, Numba), so changing their generators takes effect without
    recompiling.  The order is deterministic (topological, depth-first into inner graphs,
    first occurrence kept), so a generator seeded from it gives reproducible runs.

    Parameters
    ----------
    fn : pytensor.compile.function.types.Function, FunctionGraph or PyMC PointFunc
        E.g. the log density a step compiled, or ``model.compile_logp()``.

    Returns
    -------
    list of LikelihoodEstimatorOp

    References
    ----------
    .. [1] Andrieu, C., Roberts, G. O. (2009). The pseudo-marginal approach for efficient
       Monte Carlo computations. Annals of Statistics 37(2).

    Examples
    --------
    >>> import pytensor, pytensor.tensor as pt
    >>> from pytensor.compile.builders import OpFromGraph
    >>> op = LikelihoodEstimatorOp(lambda x, rng: rng.normal() - 0.5, "lik")
    >>> y = pt.dscalar("y")
    >>> wrapped = OpFromGraph([y], [2.0 * op(y)])
    >>> x = pt.dscalar("x")
    >>> f = pytensor.function([x], wrapped(x) + 1.0)
    >>> find_estimators(f) == [op]
    True
    """
    seen: dict[int, LikelihoodEstimatorOp] = {}
    for op in _walk(_outer_graph(fn)):
        seen.setdefault(id(op), op)
    return list(seen.values())


def reseed_estimators(fn, rng: np.random.Generator) -> int:
    """Give every estimator Op of a compiled function a generator drawn from ``rng``.

    Called with the chain's generator when a chain starts, it makes the likelihood estimates
    of a chain reproducible from ``pm.sample(random_seed=...)`` and different between
    chains.  The step methods of this package call it when PyMC starts a chain
    (``set_rng`` in PyMC 5, ``setup_chain`` in PyMC 6).  Estimators
    inside ``OpFromGraph``, ``Scan`` and ``Blockwise`` are included (:func:`find_estimators`).

    Parameters
    ----------
    fn : pytensor.compile.function.types.Function, FunctionGraph or PyMC PointFunc
        A compiled function (e.g. ``model.compile_logp()``).
    rng : numpy.random.Generator
        Source of the new seeds: one ``rng.integers(2**63)`` per Op, in the order of
        :func:`find_estimators`.

    Returns
    -------
    int
        The number of :class:`LikelihoodEstimatorOp` instances reseeded.

    References
    ----------
    .. [1] Andrieu, C., Roberts, G. O. (2009). The pseudo-marginal approach for efficient
       Monte Carlo computations. Annals of Statistics 37(2).

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> from pymc_kameleon import pseudo_marginal_potential
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu")
    ...     lik = pseudo_marginal_potential("lik", lambda mu, rng: rng.normal() - 0.5, mu)
    >>> logp = model.compile_logp()
    >>> reseed_estimators(logp, np.random.default_rng(1))
    1
    >>> a = logp({"mu": 0.0})
    >>> _ = reseed_estimators(logp, np.random.default_rng(1))
    >>> bool(logp({"mu": 0.0}) == a)
    True
    """
    ops = find_estimators(fn)
    for op in ops:
        op.rng = np.random.default_rng(rng.integers(2**63))
    return len(ops)


def estimator_states(fn) -> list[dict[str, Any]]:
    """The generator states of the estimator Ops of a compiled function, for saving.

    One ``rng.bit_generator.state`` dict (copied) per Op, in the order of
    :func:`find_estimators`; plain Python data that pickles.  Together with the rest of a
    step's state it makes a resumed chain bit-reproducible (see
    :func:`set_estimator_states`).

    Parameters
    ----------
    fn : pytensor.compile.function.types.Function, FunctionGraph or PyMC PointFunc

    Returns
    -------
    list of dict

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> from pymc_kameleon import pseudo_marginal_potential
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu")
    ...     lik = pseudo_marginal_potential("lik", lambda mu, rng: rng.normal() - 0.5, mu)
    >>> logp = model.compile_logp()
    >>> saved = estimator_states(logp)
    >>> a = [logp({"mu": 0.0}) for _ in range(3)]
    >>> set_estimator_states(logp, saved)
    >>> [logp({"mu": 0.0}) for _ in range(3)] == a
    True
    """
    return [_copy_state(op.rng.bit_generator.state) for op in find_estimators(fn)]


def set_estimator_states(fn, states: Sequence[dict[str, Any]]) -> None:
    """Restore generator states saved by :func:`estimator_states`.

    Parameters
    ----------
    fn : pytensor.compile.function.types.Function, FunctionGraph or PyMC PointFunc
        The same function (or one compiled from the same model, in another process).
    states : sequence of dict
        As returned by :func:`estimator_states`.

    Raises
    ------
    ValueError
        If the number of states differs from the number of estimator Ops.
    """
    ops = find_estimators(fn)
    if len(states) != len(ops):
        raise ValueError(
            f"got {len(states)} estimator generator states for {len(ops)} estimator Op(s)"
        )
    for op, state in zip(ops, states, strict=True):
        state = _copy_state(state)
        bit_generator = getattr(np.random, state["bit_generator"])()
        bit_generator.state = state
        op.rng = np.random.Generator(bit_generator)


def _copy_state(state: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of a bit generator state (nested dicts of ints, strings and arrays)."""
    copied: dict[str, Any] = {}
    for key, value in state.items():
        if isinstance(value, dict):
            value = _copy_state(value)
        elif isinstance(value, np.ndarray):
            value = value.copy()
        copied[key] = value
    return copied
