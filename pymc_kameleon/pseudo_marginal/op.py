"""The PyTensor Op that calls a likelihood estimator, and its conversion for Numba.

On the C and Python virtual machines the Op runs through ``Op.make_thunk``; the Numba backend
never calls ``make_thunk`` and converts each node with ``numba_funcify``, for which this
module registers a conversion that calls the Op's ``perform`` in Numba's object mode.  JAX,
PyTorch and MLX cannot run a Python Op at all.

References
----------
- Andrieu, Roberts (2009). The pseudo-marginal approach for efficient Monte Carlo
  computations. Annals of Statistics 37(2).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytensor.tensor as pt
from pytensor.gradient import grad_not_implemented
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op

from ..compat import PYTENSOR_HAS_PULLBACK
from .compiling import _warn_if_inexact_step

__all__ = ["LikelihoodEstimatorOp"]


class LikelihoodEstimatorOp(Op):
    """PyTensor Op that calls ``estimator(*param_values, rng)`` and sums the result.

    The Op owns a :class:`numpy.random.Generator`; the step methods of this package replace
    it per chain (see :func:`reseed_estimators`), so runs are reproducible from
    ``pm.sample(random_seed=...)`` and different chains get different randomness.  It has no
    gradient and is never constant-folded (every evaluation is a new estimate).  A NaN
    estimate is returned as ``-inf`` (a rejected proposal).  Usually built by
    :func:`~pymc_kameleon.pseudo_marginal_potential` rather than directly.

    It runs on PyTensor's C and Python virtual machines and on its Numba backend (in object
    mode); on every one of them the compiled function calls :meth:`perform` of this very
    instance, so replacing :attr:`rng` after compilation takes effect.

    Parameters
    ----------
    estimator : callable
        ``estimator(*param_values, rng) -> float or array``, the log of a non-negative
        unbiased likelihood estimate; array outputs are summed.
    name : str
        Shown in printed graphs and in warnings.
    seed : int or numpy.random.Generator, optional
        Seed of the Op's own generator.

    References
    ----------
    .. [1] Andrieu, C., Roberts, G. O. (2009). The pseudo-marginal approach for efficient
       Monte Carlo computations. Annals of Statistics 37(2).

    Examples
    --------
    Every evaluation is a new, independent estimate, even at the same point:

    >>> import numpy as np, pytensor, pytensor.tensor as pt
    >>> def noisy_loglik(x, rng):  # log-normal noise with E[exp(noise)] = 1
    ...     return -0.5 * x**2 + rng.normal() - 0.5
    >>> op = LikelihoodEstimatorOp(noisy_loglik, "lik", seed=0)
    >>> x = pt.dscalar("x")
    >>> f = pytensor.function([x], op(x))
    >>> bool(f(1.0) != f(1.0))
    True
    """

    def __init__(self, estimator: Callable[..., Any], name: str, seed=None):
        self.estimator = estimator
        self.name = name
        self.rng = np.random.default_rng(seed)
        self.copied = False  # unpickled or copied (its graph was checked where compiled)
        _register_numba_conversion()

    def __setstate__(self, state: dict[str, Any]) -> None:
        # unpickled in a worker process (or copied): make sure Numba can convert it there too
        self.__dict__.update(state)
        self.copied = True
        _register_numba_conversion()

    def __str__(self) -> str:
        return f"LikelihoodEstimator{{{self.name}}}"

    def make_node(self, *inputs):
        inputs = [pt.as_tensor_variable(x) for x in inputs]
        return Apply(self, inputs, [pt.dscalar()])

    def perform(self, node, inputs, output_storage):
        with np.errstate(all="ignore"):
            value = float(np.sum(self.estimator(*inputs, self.rng)))
        # NaN is passed on (not turned into -inf): the package's steps reject, count and
        # report it, since a NaN probability that depends on the point changes the target
        output_storage[0][0] = np.asarray(value)

    def do_constant_folding(self, fgraph, node) -> bool:
        """Never: folding would freeze one estimate (drawn at compile time) into the graph."""
        return False

    def _no_gradient(self, inputs):
        comment = (
            f"The pseudo-marginal likelihood {self.name!r} is an estimator and has no "
            "gradient: sample it with a gradient-free step such as KameleonStep, "
            "FastKameleonStep or KernelHMCStep."
        )
        return [grad_not_implemented(self, i, x, comment) for i, x in enumerate(inputs)]

    if PYTENSOR_HAS_PULLBACK:  # PyTensor >= 3 deprecates grad/L_op in favour of pullback

        def pullback(self, inputs, outputs, cotangents):
            """No gradient: every input gets a ``NullType`` explaining why."""
            return self._no_gradient(inputs)

    else:

        def grad(self, inputs, output_gradients):
            """No gradient: every input gets a ``NullType`` explaining why."""
            return self._no_gradient(inputs)

    def make_thunk(self, node, storage_map, compute_map, no_recycling, impl=None):
        # the C and Python virtual machines (not Numba: see _numba_funcify_estimator)
        _warn_if_inexact_step(self)
        return super().make_thunk(node, storage_map, compute_map, no_recycling, impl=impl)


# ----------------------------------------------------------------------------- Numba backend
_NUMBA_REGISTERED = False


def _register_numba_conversion() -> None:
    """Register :func:`_numba_funcify_estimator` with PyTensor's Numba backend, once.

    Called when the first estimator Op is built (or unpickled), so that importing this
    package does not import Numba.  Without Numba there is nothing to register.
    """
    global _NUMBA_REGISTERED
    if _NUMBA_REGISTERED:
        return
    _NUMBA_REGISTERED = True
    try:
        from pytensor.link.numba.dispatch.basic import numba_funcify
    except ImportError:  # Numba is optional in PyTensor 2
        return
    numba_funcify.register(LikelihoodEstimatorOp)(_numba_funcify_estimator)


def _numba_funcify_estimator(op: LikelihoodEstimatorOp, node=None, **kwargs):
    """Numba conversion of an estimator node: ``op.perform`` in Numba's object mode.

    The returned jitted function calls back into Python for every evaluation and refers to
    ``op`` itself (not a copy), so a generator assigned to ``op.rng`` after compilation is
    used.  PyTensor caches a compiled graph on disk only when every node has a cache key;
    this conversion is registered without one, so graphs with an estimator are never taken
    from the cache (a cached function would refer to another process's Op).  Unlike
    PyTensor's generic fallback for Python Ops it does not warn about object mode (that is
    the only way to run a Python estimator) but issues the :class:`PseudoMarginalWarning`
    check, since ``make_thunk`` is never called on this backend.

    References
    ----------
    .. [1] Numba documentation, "Callback into the Python Interpreter from within JIT'ed
       code" (``numba.objmode``).
    """
    import numba

    _warn_if_inexact_step(op)
    out = node.outputs[0]
    out_type = numba.types.Array(numba.from_dtype(np.dtype(out.dtype)), out.ndim, "A")

    def estimate(inputs):
        storage: list[list[Any]] = [[None]]
        op.perform(node, list(inputs), storage)
        return storage[0][0]

    @numba.njit
    def estimator_in_object_mode(*inputs):
        with numba.objmode(value=out_type):
            value = estimate(inputs)
        return value

    return estimator_in_object_mode
