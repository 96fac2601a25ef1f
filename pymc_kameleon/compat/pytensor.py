"""What differs between PyTensor 2 (PyMC 5) and PyTensor 3 (PyMC 6).

* the recommended compile mode of a step's log density (:func:`default_compile_kwargs`,
  :func:`logp_compile_kwargs`): PyTensor 3 compiles with Numba by default, PyTensor 2 with
  its C backend; ``docs/benchmarks/logp_backend.md`` has the measurements behind the choice;
* how an Op's gradient is defined (:data:`PYTENSOR_HAS_PULLBACK`);
* where an Op keeps its inner graphs (:func:`inner_graphs`);
* the arguments that rebuild an ``as_op`` Op (:func:`from_function_op_args`).
"""

from __future__ import annotations

from typing import Any

import pytensor
from pytensor.graph.op import Op

from .versions import PYTENSOR_VERSION

__all__ = ["PYTENSOR_HAS_PULLBACK", "default_compile_kwargs", "from_function_op_args",
           "inner_graphs", "logp_compile_kwargs"]

#: PyTensor >= 3 asks Ops for ``pullback`` and deprecates ``grad``/``L_op``.
PYTENSOR_HAS_PULLBACK = hasattr(Op, "pullback")


# ----------------------------------------------------------------------------- compilation
def default_compile_kwargs() -> dict[str, Any]:
    """Recommended compile options for a step's log density, when the user gives none.

    On PyTensor 3 with a C compiler, and no mode or linker chosen in PyTensor's
    configuration, this asks for the C virtual machine (``mode="CVM"``) instead of PyTensor
    3's default, Numba: a step calls its compiled log density once per iteration, where the
    backends cost about the same next to the step's own work, so the time to the first
    result decides, and Numba compiles the graph again in every chain process, likelihood
    estimators most of all (measurements: ``docs/benchmarks/logp_backend.md``).  Everywhere
    else (PyTensor 2, whose default already is the C VM; no C compiler; a mode set through
    ``PYTENSOR_FLAGS`` or ``pytensor.config``) PyTensor's own default is kept.

    Returns
    -------
    dict
        Keyword arguments for :func:`pymc.pytensorf.compile` (possibly empty).

    References
    ----------
    .. [1] PyTensor documentation, "Configuration": ``mode``, ``linker`` and ``cxx``.

    Examples
    --------
    >>> kwargs = default_compile_kwargs()
    >>> set(kwargs) <= {"mode"}
    True
    """
    if PYTENSOR_VERSION[0] < 3:
        return {}
    config = pytensor.config
    user_chose = str(config.mode) != "Mode" or config.linker != "auto"
    if user_chose or not config.cxx:
        return {}
    return {"mode": "CVM"}


def logp_compile_kwargs(compile_kwargs: dict[str, Any] | None = None) -> dict[str, Any]:
    """:func:`default_compile_kwargs` updated with the user's ``compile_kwargs``.

    A ``mode`` given by the user (e.g. ``{"mode": "NUMBA"}``) always wins.

    Parameters
    ----------
    compile_kwargs : dict, optional
        The ``compile_kwargs`` a step method received.

    Returns
    -------
    dict
        A new dict; the argument is not modified.

    Examples
    --------
    >>> logp_compile_kwargs({"mode": "NUMBA"})["mode"]
    'NUMBA'
    """
    return {**default_compile_kwargs(), **(compile_kwargs or {})}


# ----------------------------------------------------------------------------- graphs
def inner_graphs(op) -> list:
    """The inner function graphs of an Op (``OpFromGraph``, ``Scan``, ...), in a fixed order.

    PyTensor 3 lists them in the Op's ``inner_graphs`` (a dict by name); PyTensor 2's Ops
    with one inner graph keep it as ``fgraph``.

    Parameters
    ----------
    op : pytensor.graph.op.Op

    Returns
    -------
    list of FunctionGraph
        Empty for an Op without an inner graph.

    Examples
    --------
    >>> import pytensor.tensor as pt
    >>> from pytensor.compile.builders import OpFromGraph
    >>> y = pt.dscalar("y")
    >>> len(inner_graphs(OpFromGraph([y], [2.0 * y])))
    1
    >>> inner_graphs(pt.exp(y).owner.op)
    []
    """
    graphs = getattr(op, "inner_graphs", None)  # PyTensor >= 3: {name: fgraph}
    if isinstance(graphs, dict):
        return [graphs[k] for k in sorted(graphs)]
    if getattr(op, "fgraph", None) is not None:  # PyTensor 2
        return [op.fgraph]
    return []


# ----------------------------------------------------------------------------- internals
# PyTensor's private attributes, each read by one named function, so that a release that
# changes them breaks one place (tests/test_compat_internals.py checks them).
def from_function_op_args(op: Op) -> tuple[Any, ...]:
    """The arguments ``(fn, itypes, otypes, infer_shape)`` that rebuild an ``as_op`` Op.

    ``FromFunctionOp(*from_function_op_args(op))`` is equal to ``op`` (such Ops compare by
    their function).  PyTensor pickles the Op by reference to its function's module-level
    name, which a worker process cannot import for a script's ``__main__``;
    :func:`pymc_kameleon.parallel.pickling.dumps` rebuilds it from these arguments instead,
    with the function sent by value.

    Reads PyTensor's internals: the name-mangled private attributes ``__fn`` and
    ``__infer_shape`` of ``pytensor.compile.ops.FromFunctionOp``, as in PyTensor 2.38 (PyMC 5)
    and 3.3 (PyMC 6), whose constructor is ``FromFunctionOp(fn, itypes, otypes,
    infer_shape)``; PyTensor has no public accessor for them.

    Parameters
    ----------
    op : pytensor.compile.ops.FromFunctionOp
        An Op made by ``pytensor.compile.ops.as_op`` (or ``wrap_py``).

    Returns
    -------
    tuple
        ``(fn, itypes, otypes, infer_shape)``, the constructor's arguments.
    """
    attrs = vars(op)
    return (attrs["_FromFunctionOp__fn"], op.itypes, op.otypes,
            attrs["_FromFunctionOp__infer_shape"])
