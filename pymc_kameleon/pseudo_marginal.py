"""Pseudo-marginal likelihoods: a user's likelihood *estimator* as a PyMC potential.

A pseudo-marginal Metropolis-Hastings chain that replaces the likelihood by a non-negative
unbiased estimate targets the exact posterior, provided the estimate at the current point
is *stored* and reused until a proposal is accepted (Andrieu and Roberts, 2009).  The step
methods of this package do exactly that.  PyMC's Metropolis, DEMetropolisZ and Slice
re-evaluate the current point every iteration ("Monte Carlo within Metropolis"), which is
biased; :func:`~pymc_kameleon.pseudo_marginal_potential` warns when such a step is built for
a model that contains an estimator.

The estimator is a Python :class:`LikelihoodEstimatorOp`.  Every PyTensor backend that can
run it calls the ``perform`` method of the *same* Op instance that is in the graph, so its
generator can be replaced after compilation (:func:`reseed_estimators`), saved and restored
(:func:`estimator_states`, :func:`set_estimator_states`), also inside inner graphs
(``OpFromGraph``, ``Scan``, ``Blockwise``; :func:`find_estimators`):

* the C virtual machine (``mode="CVM"``, PyTensor 2's default; PyTensor 2.31, the release
  pip gives Python 3.10, calls it ``"FAST_RUN"``) and the Python one
  (``"FAST_COMPILE"``) build one thunk per node through ``Op.make_thunk``, which runs
  ``perform``;
* the Numba backend (PyTensor 3's default) compiles the whole graph into one function and
  never calls ``make_thunk``; it converts each node with ``numba_funcify``, for which this
  module registers a conversion that calls ``perform`` in Numba's object mode (never cached,
  since it refers to the Op instance);
* JAX, PyTorch and MLX cannot run a Python Op at all.

The :class:`PseudoMarginalWarning` is issued from both conversion hooks, unless the graph is
compiled for a sampler that stores the current estimate (:func:`compiling_for`).

References
----------
- Andrieu, Roberts (2009). The pseudo-marginal approach for efficient Monte Carlo
  computations. Annals of Statistics 37(2).
- Filippone, Girolami (2014). Pseudo-marginal Bayesian inference for Gaussian processes.
  IEEE TPAMI 36(11).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.gradient import grad_not_implemented
from pytensor.graph.basic import Apply
from pytensor.graph.op import HasInnerGraph, Op

from .compat import PYTENSOR_HAS_PULLBACK, inner_graphs

__all__ = [
    "LikelihoodEstimatorOp",
    "PseudoMarginalWarning",
    "compiling_for",
    "estimator_states",
    "find_estimators",
    "pseudo_marginal_potential",
    "reseed_estimators",
    "set_estimator_states",
]


class PseudoMarginalWarning(UserWarning):
    """A likelihood estimator may be used by a step method that is not exact for it.

    Issued when a log density that contains a
    :func:`~pymc_kameleon.pseudo_marginal_potential` is compiled other than for a sampler
    that stores the current estimate (:func:`compiling_for`): by a step method that
    re-evaluates the log density at the current point every iteration (PyMC's
    ``Metropolis``, ``DEMetropolisZ``, ``Slice``, ...), whose chain re-estimates the current
    likelihood ("Monte Carlo within Metropolis") and does not target the exact posterior, or
    for another use (``model.compile_logp()``, PyMC's SMC kernels), where it does no harm.
    The step methods of this package never trigger it.  Turn it into an error with
    ``warnings.simplefilter("error", PseudoMarginalWarning)``.

    Parameters
    ----------
    *args
        The message, as for every :class:`Warning`.

    References
    ----------
    .. [1] Andrieu, C., Roberts, G. O. (2009). The pseudo-marginal approach for efficient
       Monte Carlo computations. Annals of Statistics 37(2), 697-725 (Section 2.2 and
       Table 1 compare it with Monte Carlo within Metropolis).

    Examples
    --------
    >>> import warnings
    >>> import pymc as pm
    >>> from pymc_kameleon import PseudoMarginalWarning, pseudo_marginal_potential
    >>> def noisy_loglik(mu, rng):
    ...     return -0.5 * mu**2 + 0.3 * rng.normal() - 0.045
    >>> with pm.Model():
    ...     mu = pm.Normal("mu")
    ...     lik = pseudo_marginal_potential("lik", noisy_loglik, mu)
    ...     with warnings.catch_warnings(record=True) as caught:
    ...         warnings.simplefilter("always")
    ...         step = pm.Metropolis()
    >>> any(issubclass(w.category, PseudoMarginalWarning) for w in caught)
    True
    """


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


#: The sampler a log density is being compiled for (:func:`compiling_for`), else None.
_COMPILING_FOR: ContextVar[Any] = ContextVar("pymc_kameleon_compiling_for", default=None)


@contextmanager
def compiling_for(sampler) -> Iterator[None]:
    """Compile, inside the block, log densities for ``sampler``.

    A :class:`LikelihoodEstimatorOp` compiled inside the block issues no
    :class:`PseudoMarginalWarning` if ``sampler`` stores the current estimate (its attribute
    ``exact_for_pseudo_marginal`` is true), and names ``sampler`` in the warning otherwise.
    The step methods of this package compile their log density inside it; compiled outside
    it (PyMC's steps cannot say what they are), an estimator warns.  The state is a context
    variable, so threads compiling at the same time do not see each other's.

    Parameters
    ----------
    sampler : object
        The step method (or other sampler) the compiled functions are for.

    Examples
    --------
    >>> import warnings
    >>> import pymc as pm
    >>> class StoresEstimates:
    ...     exact_for_pseudo_marginal = True
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu")
    ...     lik = pseudo_marginal_potential("lik", lambda mu, rng: rng.normal() - 0.5, mu)
    >>> with warnings.catch_warnings(), compiling_for(StoresEstimates()):
    ...     warnings.simplefilter("error", PseudoMarginalWarning)
    ...     logp = model.compile_logp()
    """
    token = _COMPILING_FOR.set(sampler)
    try:
        yield
    finally:
        _COMPILING_FOR.reset(token)


def _warn_if_inexact_step(op: LikelihoodEstimatorOp) -> None:
    """Warn unless ``op`` is compiled for a sampler that stores the current estimate."""
    if op.copied:  # a pickled or copied graph: checked where it was compiled first
        return
    sampler = _COMPILING_FOR.get()
    if getattr(sampler, "exact_for_pseudo_marginal", False):
        return
    advice = ("Use KameleonStep, FastKameleonStep, KernelHMCStep or RandomWalkStep, which "
              "store the current estimate")
    if sampler is None:  # PyMC's steps, but also model.compile_logp() or PyMC's SMC
        message = (
            f"The likelihood estimator {op.name!r} is compiled other than for a sampler that "
            "stores the current estimate. A step method that re-evaluates the log density "
            "at the current point every iteration (PyMC's Metropolis, DEMetropolisZ and "
            "Slice do) re-estimates the likelihood there (Monte Carlo within Metropolis), "
            f"and its chain does NOT target the exact posterior. {advice} (compiled for "
            "another use, e.g. model.compile_logp() or PyMC's SMC, it does no harm).")
    else:
        message = (
            f"{type(sampler).__name__} re-evaluates the log density at the current point "
            f"every iteration, so the likelihood estimator {op.name!r} is re-estimated "
            "there (Monte Carlo within Metropolis) and the chain does NOT target the exact "
            f"posterior. {advice}.")
    warnings.warn(
        message,
        PseudoMarginalWarning,
        stacklevel=2,
    )


def pseudo_marginal_potential(
    name: str,
    estimator: Callable[..., Any],
    *params,
    seed=None,
    model: pm.Model | None = None,
):
    """Add a likelihood *estimator* to a PyMC model as a potential.

    Parameters
    ----------
    name : str
        Name of the potential.
    estimator : callable
        ``estimator(*param_values, rng) -> float or array``: the log of a non-negative,
        unbiased estimate of the likelihood at the given parameter values (NumPy arrays, on
        the constrained scale as the user defined them).  Array outputs are summed.  ``rng``
        is a :class:`numpy.random.Generator`; use it for *all* randomness.  ``-inf`` (an
        estimate of zero) is a rejected proposal; so is NaN, but the steps of this package
        also count it (sample stat ``n_nan``) and report it, as they do an exception with
        ``on_error="reject"`` (see ``docs/robustness.md`` for what either does to
        exactness).
    *params : PyMC variables or tensors
        The parameters passed to the estimator.
    seed : int, optional
        Seed of the estimator's generator before a step method of this package reseeds it
        from ``pm.sample(random_seed=...)`` (it matters only when evaluating the model
        outside such a step).
    model : pymc.Model, optional
        Taken from the context if not given.

    Returns
    -------
    TensorVariable
        The potential.

    Notes
    -----
    The potential has no gradient, so NUTS cannot be used.  PyMC's Metropolis, DEMetropolisZ
    and Slice re-estimate the current point and are therefore biased for such a model; a
    :class:`~pymc_kameleon.PseudoMarginalWarning` is issued when one of them is built for it.

    References
    ----------
    .. [1] Andrieu, C., Roberts, G. O. (2009). The pseudo-marginal approach for efficient
       Monte Carlo computations. Annals of Statistics 37(2), 697-725.
    .. [2] Filippone, M., Girolami, M. (2014). Pseudo-marginal Bayesian inference for
       Gaussian processes. IEEE TPAMI 36(11), 2214-2226.

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> def noisy_loglik(mu, rng):  # log of an unbiased estimate of N(1.0 | mu, 1)
    ...     noise = rng.normal(0.0, 0.5)
    ...     return -0.5 * (1.0 - mu) ** 2 - 0.5 * np.log(2 * np.pi) + noise - 0.125
    >>> with pm.Model() as model:
    ...     mu = pm.Normal("mu", 0.0, 1.0)
    ...     loglik = pseudo_marginal_potential("loglik", noisy_loglik, mu, seed=1)
    >>> float(model.compile_logp()({"mu": 0.0})) < 0
    True
    """
    model = pm.modelcontext(model)
    op = LikelihoodEstimatorOp(estimator, name, seed=seed)
    return pm.Potential(name, op(*params), model=model)


# ----------------------------------------------------------------------------- compiled graphs
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
