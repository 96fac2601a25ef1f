"""Honest log-density evaluation counts for any PyMC model, for every sampler.

:func:`add_counter` adds to a model a potential ``pm.Potential(COUNTER_NAME, op(x))`` whose
:class:`EvalCounter` Op returns ``0.0`` and increments :attr:`EvalCounter.count` each time a
compiled graph containing the model's log density runs.  The potential does not change the
density; its gradient is zero, so NUTS runs on the counted model too (one count per
logp-and-gradient evaluation).

Why this is honest:

* the Op's input ``x`` is the concatenation of *all* free variables, so every compiled log
  density depends on it through the variables it samples: the node is never constant-folded;
* two log densities in one graph at different points (``logp(x*) - logp(x)`` in PyMC
  Metropolis' ``delta_logp``) have different inputs, so PyTensor never merges the two
  applications and both are counted, which is what one such call costs.  (With only one
  variable as input, a step updating *another* variable would compute ``op(a) - op(a)``
  with ``a`` shared: merged and counted once, or simplified away.  Hence all of them.)
* the count is checked against a direct count in ``tests/test_suite_models.py``.

Counts accumulate in the calling process only: sample with ``cores=1`` (the suite runs its 4
chains one after the other in one process), or give :func:`add_counter` a ``path``: every
evaluation, in any process of this machine (``pm.sample(cores=2)``'s chain processes), then
appends one byte to that file, and the count is the file's size (:class:`FileEvalCounter`).
"""

from __future__ import annotations

import os

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op

__all__ = ["COUNTER_NAME", "EvalCounter", "FileEvalCounter", "add_counter", "find_counter"]

#: Name of the counting potential added by :func:`add_counter`.
COUNTER_NAME = "_logp_evals"


class EvalCounter(Op):
    """Op of a vector returning ``0.0`` that counts how often it is computed.

    Attributes
    ----------
    count : int
        Number of evaluations since construction or the last :meth:`reset`.

    Examples
    --------
    >>> import pytensor
    >>> op = EvalCounter()
    >>> x = pt.dvector("x")
    >>> f = pytensor.function([x], x.sum() + op(x))
    >>> [float(f([1.0, 1.0])) for _ in range(3)], op.count
    ([2.0, 2.0, 2.0], 3)
    """

    def __init__(self) -> None:
        self.count = 0

    def __str__(self) -> str:
        return "EvalCounter"

    def reset(self) -> None:
        """Set :attr:`count` to zero."""
        self.count = 0

    def make_node(self, x) -> Apply:
        x = pt.as_tensor_variable(x)
        if x.ndim != 1:
            raise ValueError(f"EvalCounter takes a vector, got a {x.ndim}-d input")
        return Apply(self, [x], [pt.dscalar()])

    def perform(self, node, inputs, output_storage) -> None:
        self.count += 1
        output_storage[0][0] = np.zeros((), dtype="float64")

    def grad(self, inputs, output_gradients):
        return [pt.zeros_like(inputs[0], dtype="float64")]

    def pullback(self, inputs, outputs, output_gradients):
        """The zero gradient under the name PyTensor 3 uses (``grad`` is deprecated there)."""
        return self.grad(inputs, output_gradients)


class FileEvalCounter(EvalCounter):
    """:class:`EvalCounter` whose count is kept in a file, so that it adds up the
    evaluations of every process (each appends one byte per evaluation; appends of one byte
    are atomic).

    Parameters
    ----------
    path : str or os.PathLike
        The file (created empty, or emptied).

    Examples
    --------
    >>> import pytensor, tempfile
    >>> op = FileEvalCounter(tempfile.mkdtemp() + "/count")
    >>> x = pt.dvector("x")
    >>> f = pytensor.function([x], op(x))
    >>> _ = f([1.0]), f([2.0])
    >>> op.count
    2
    """

    def __init__(self, path) -> None:
        self.path = os.fspath(path)
        self.reset()

    @property
    def count(self) -> int:
        """Evaluations since construction or the last :meth:`reset`, in every process."""
        return os.path.getsize(self.path)

    def reset(self) -> None:
        """Empty the file."""
        with open(self.path, "wb"):
            pass

    def perform(self, node, inputs, output_storage) -> None:
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, b".")
        finally:
            os.close(fd)
        output_storage[0][0] = np.zeros((), dtype="float64")


def add_counter(model: pm.Model, path=None) -> EvalCounter:
    """Add the counting potential to ``model`` (in place) and return its counter.

    Parameters
    ----------
    model : pymc.Model
        A model with at least one free variable and no counter yet.
    path : str or os.PathLike, optional
        Count in this file, across processes (:class:`FileEvalCounter`).

    Returns
    -------
    EvalCounter
        Reset it right before the run to measure, read it right after.

    Examples
    --------
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu", 0.0, 1.0, shape=2)
    >>> counter = add_counter(model)
    >>> logp = model.compile_logp()
    >>> counter.reset()
    >>> _ = [logp({"mu": np.zeros(2)}) for _ in range(4)]
    >>> counter.count
    4
    """
    if not model.free_RVs:
        raise ValueError("the model has no free variable to attach the counter to")
    if COUNTER_NAME in model.named_vars:
        raise ValueError("the model already has an evaluation counter")
    op = EvalCounter() if path is None else FileEvalCounter(path)
    x = pt.concatenate([pt.cast(rv, "float64").flatten() for rv in model.free_RVs])
    with model:
        pm.Potential(COUNTER_NAME, op(x))
    return op


def find_counter(model: pm.Model) -> EvalCounter:
    """The :class:`EvalCounter` added to ``model`` by :func:`add_counter`."""
    stack, seen = [model.named_vars[COUNTER_NAME]], set()
    while stack:
        var = stack.pop()
        if id(var) in seen or var.owner is None:
            continue
        seen.add(id(var))
        if isinstance(var.owner.op, EvalCounter):
            return var.owner.op
        stack.extend(var.owner.inputs)
    raise LookupError("no EvalCounter in the model")
