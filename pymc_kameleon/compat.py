"""The few places where PyMC 5 / PyTensor 2 / ArviZ 0.x and PyMC 6 / PyTensor 3 / ArviZ 1 differ.

pymc-kameleon supports both PyMC majors from one code base; everything that depends on the
installed versions is here (and, for likelihood-estimator Ops in compiled graphs, in
:mod:`pymc_kameleon.pseudo_marginal`):

* the recommended compile mode of a step's log density (:func:`default_compile_kwargs`,
  :func:`logp_compile_kwargs`): PyTensor 3 compiles with Numba by default, PyTensor 2 with
  its C backend; ``docs/benchmarks/logp_backend.md`` has the measurements behind the choice;
* how a chain hands a step its generator (:func:`start_chain`): ``step.set_rng(rng)`` in
  PyMC 5, ``step.setup_chain(rng, tune, draws)`` in PyMC 6;
* ArviZ results (:func:`as_dataset`, :func:`group_dataset`, :func:`max_rhat`,
  :func:`summary_table`): ``pm.sample`` returns an ``arviz.InferenceData`` of
  :class:`xarray.Dataset` groups with ArviZ 0.x and an :class:`xarray.DataTree` with ArviZ 1,
  whose diagnostics also return ``DataTree`` objects and whose summaries have other columns.

References
----------
- PyMC 6 migration notes and ``pymc.step_methods.compound.BlockedStep.setup_chain``.
- ArviZ 1.0: "InferenceData is replaced by xarray.DataTree" (ArviZ documentation).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import arviz as az
import numpy as np
import pymc as pm
import pytensor
import xarray as xr
from pytensor.graph.op import Op

__all__ = [
    "ARVIZ_VERSION",
    "PYMC_VERSION",
    "PYTENSOR_HAS_PULLBACK",
    "PYTENSOR_VERSION",
    "SUMMARY_COLUMNS",
    "as_dataset",
    "caller_tuning_draws",
    "default_compile_kwargs",
    "group_dataset",
    "logp_compile_kwargs",
    "max_rhat",
    "receiving_parallel_draw",
    "start_chain",
    "summary_table",
]


def _version(text: str) -> tuple[int, int]:
    """``(major, minor)`` of a version string such as ``"6.4.0"`` or ``"3.3.7+4.g1a2b"``."""
    match = re.match(r"(\d+)\.(\d+)", text)
    if match is None:
        raise ValueError(f"cannot parse the version {text!r}")
    return int(match.group(1)), int(match.group(2))


#: ``(major, minor)`` of the installed PyMC, PyTensor and ArviZ.
PYMC_VERSION = _version(pm.__version__)
PYTENSOR_VERSION = _version(pytensor.__version__)
ARVIZ_VERSION = _version(az.__version__)
#: PyTensor >= 3 asks Ops for ``pullback`` and deprecates ``grad``/``L_op``.
PYTENSOR_HAS_PULLBACK = hasattr(Op, "pullback")

#: Columns of :func:`summary_table`: the ones both ArviZ majors compute, in a fixed order.
SUMMARY_COLUMNS = ("mean", "sd", "mcse_mean", "mcse_sd", "ess_bulk", "ess_tail", "r_hat")


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


# ----------------------------------------------------------------------------- step methods
def start_chain(step, rng, tune: int = 0, draws: int = 0) -> None:
    """Prepare ``step`` for a new chain with generator ``rng``, as ``pm.sample`` does.

    For scripts that drive ``step.step(point)`` by hand.  PyMC 6 calls
    ``step.setup_chain(rng, tune, draws)`` once per chain; PyMC 5 called
    ``step.set_rng(rng)``.

    Parameters
    ----------
    step : pymc.step_methods.compound.BlockedStep or CompoundStep
    rng : int or numpy.random.Generator
    tune, draws : int
        Tuning and draw iterations of the chain (used by PyMC 6 only).

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> with pm.Model():
    ...     x = pm.Normal("x")
    ...     step = pm.Metropolis()
    >>> start_chain(step, np.random.default_rng(1))
    """
    # by version, not by ``hasattr``: a step class may define ``setup_chain`` for PyMC 6
    # while running on PyMC 5, whose base classes have no ``setup_chain`` to delegate to
    if PYMC_VERSION[0] >= 6:
        step.setup_chain(rng, tune, draws)
    else:
        step.set_rng(rng)


#: PyMC 5's per-chain sampling loops and where each keeps the number of tuning draws.
_PYMC5_LOOPS = {("pymc.sampling.mcmc", "_iter_sample"): lambda f: f.f_locals.get("tune"),
                ("pymc.sampling.parallel", "_start_loop"):
                    lambda f: getattr(f.f_locals.get("self"), "_tune", None)}


def caller_tuning_draws() -> int | None:
    """The number of tuning draws of the PyMC 5 chain that is calling the step, else None.

    PyMC 6 hands a step its ``tune`` (``setup_chain``); PyMC 5 does not, and a warm-up that
    assumed ``pm.sample``'s default (1000) never handed over to the sampler at ``tune <=
    500`` (docs/tuning.md).  PyMC 5 is frozen, so its two chain loops (sequential and
    parallel) are read from the call stack here; None when neither is on it (a step driven
    by hand, another sampler).

    Returns
    -------
    int or None
        The calling chain's ``tune`` on PyMC 5; None on PyMC 6 or outside PyMC 5's loops.
    """
    if PYMC_VERSION[0] >= 6:
        return None
    frame = caller_frame(lambda f: (f.f_globals.get("__name__"), f.f_code.co_name)
                         in _PYMC5_LOOPS)
    if frame is None:
        return None
    tune = _PYMC5_LOOPS[(frame.f_globals.get("__name__"), frame.f_code.co_name)](frame)
    return int(tune) if isinstance(tune, int | np.integer) else None


def receiving_parallel_draw() -> bool:
    """Whether PyMC's parallel sampler (``pm.sample(cores>1)``) is receiving a message from
    a chain's process on the call stack, in the main process.

    A bad starting point is found by the step, at the chain's first draw, in the chain's
    process; PyMC wraps every error a chain process sends in ``ParallelSamplingError``.
    ``pm.sample`` checks the starting points in the main process only for its own NUTS
    initialisation, and calls no method of a step passed as ``step=`` with the chains'
    starting points before the chain processes start.  So
    :class:`~pymc_kameleon.steps.evaluations.StartError` raises itself, as a
    ``SamplingError``, while this is true: when PyMC unpickles it in
    ``ProcessAdapter.recv_draw`` (PyMC 5 and 6), where PyMC would raise the wrapper, the
    message has been read in full and PyMC's context managers end the chains as for any
    error.  Read from the call stack because PyMC has no public hook there.
    """
    return caller_frame(lambda f: f.f_globals.get("__name__") == "pymc.sampling.parallel"
                        and f.f_code.co_name == "recv_draw") is not None


def caller_chain() -> str:
    """``chain N`` when PyMC's sampling loop is on the call stack, else empty.

    PyMC does not tell a step its chain number; ``pm.sample``'s per-chain loop holds it in
    a local variable ``chain`` (one process) or in its worker's ``chain`` attribute (several
    processes), in PyMC 5 and 6; read here only to name the chain in messages.
    """
    def chain_of(f):
        return f.f_locals.get("chain", getattr(f.f_locals.get("self"), "chain", None))

    frame = caller_frame(lambda f: f.f_globals.get("__name__", "").startswith("pymc.sampling")
                         and isinstance(chain_of(f), int | np.integer))
    return "" if frame is None else f"chain {int(chain_of(frame))}"


def caller_frame(match: Callable[[FrameType], bool]) -> FrameType | None:
    """The innermost frame on the caller's call stack for which ``match`` is true, else None
    (the one walk of the stack behind the PyMC internals read in this module)."""
    frame = sys._getframe(1)
    while frame is not None:
        if match(frame):
            return frame
        frame = frame.f_back
    return None


# ----------------------------------------------------------------------------- ArviZ
def as_dataset(obj) -> xr.Dataset:
    """An :class:`xarray.Dataset` from a Dataset or from a ``DataTree`` node (ArviZ 1).

    ArviZ 1's diagnostics (``az.rhat``, ``az.ess``) and the groups of ``pm.sample``'s result
    are ``DataTree`` nodes, which lack ``to_array`` and multi-variable selection
    (``node[["a", "b"]]``); their datasets have both.  The examples use it so that they run
    on both ArviZ majors.

    Parameters
    ----------
    obj : xarray.Dataset or xarray.DataTree
        E.g. ``az.ess(idata)`` or a group of ``pm.sample``'s result.

    Returns
    -------
    xarray.Dataset
        ``obj`` itself if it is a Dataset, else the node's dataset.

    Examples
    --------
    >>> import xarray as xr
    >>> as_dataset(xr.Dataset({"a": 1.0}))["a"].item()
    1.0
    """
    if isinstance(obj, xr.Dataset):
        return obj
    if hasattr(obj, "to_dataset"):
        return obj.to_dataset()
    raise TypeError(f"expected an xarray Dataset or DataTree, got {type(obj).__name__}")


def group_dataset(idata, group: str = "posterior") -> xr.Dataset:
    """Group ``group`` of ``pm.sample``'s result as an :class:`xarray.Dataset`.

    Works for an ``arviz.InferenceData`` (ArviZ 0.x) and an :class:`xarray.DataTree`
    (ArviZ 1), so ``group_dataset(idata, "sample_stats")[["accept", "lp"]]`` works on both.

    Parameters
    ----------
    idata : arviz.InferenceData or xarray.DataTree
    group : str
        ``"posterior"``, ``"sample_stats"``, ``"warmup_sample_stats"``, ...

    Returns
    -------
    xarray.Dataset
    """
    return as_dataset(idata[group])


def max_rhat(idata, var_names: list[str] | None = None) -> float:
    """Largest rank-normalised split R-hat over the posterior variables ``var_names`` (all).

    Parameters
    ----------
    idata : arviz.InferenceData, xarray.DataTree or xarray.Dataset
        A result of ``pm.sample`` or a posterior dataset.
    var_names : list of str, optional

    Returns
    -------
    float
        The largest R-hat over all variables and their elements.

    References
    ----------
    .. [1] Vehtari, A., Gelman, A., Simpson, D., Carpenter, B., Bürkner, P.-C. (2021).
       Rank-normalization, folding, and localization: an improved R-hat for assessing
       convergence of MCMC. Bayesian Analysis 16(2).
    """
    post = idata if isinstance(idata, xr.Dataset) else group_dataset(idata, "posterior")
    if var_names is not None:
        post = post[list(var_names)]
    rhat = as_dataset(az.rhat(post))
    return float(max(float(np.max(rhat[name].values)) for name in rhat.data_vars))


def summary_table(idata, **kwargs):
    """``az.summary`` with the columns both ArviZ majors compute (:data:`SUMMARY_COLUMNS`).

    ArviZ 0.x adds a 94% HDI, ArviZ 1 an 89% equal-tailed interval and orders the columns
    differently; the common ones keep printed summaries and tables alike across versions.

    Parameters
    ----------
    idata : arviz.InferenceData, xarray.DataTree or xarray.Dataset
    **kwargs
        Passed to :func:`arviz.summary` (e.g. ``var_names``).

    Returns
    -------
    pandas.DataFrame
    """
    table = az.summary(idata, **kwargs)
    return table[[c for c in SUMMARY_COLUMNS if c in table.columns]]


# ----------------------------------------------------------------------------- internals
# Other libraries' private attributes, each read by one named function here, so that a
# release that changes them breaks one place (tests/test_compat_internals.py checks them).
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


# ----------------------------------------------------------------------------- ArviZ PSIS
def pareto_khat(log_w: np.ndarray) -> float:
    """Pareto's k-hat of importance weights (Vehtari et al. 2024) from ArviZ's PSIS:
    ``arviz.psislw`` takes the log weights on ArviZ 0.x, ``arviz_stats``' array interface
    their negatives on ArviZ 1.x (the log-likelihood convention of LOO)."""
    log_w = np.asarray(log_w, dtype=float)
    if ARVIZ_VERSION[0] < 1:
        import arviz as az

        return float(az.psislw(log_w.copy())[1])
    from arviz_stats.base import array_stats

    return float(array_stats.psislw(-log_w)[1])
