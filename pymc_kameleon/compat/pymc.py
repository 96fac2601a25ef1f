"""What differs between PyMC 5 and PyMC 6 for a step method.

* how a chain hands a step its generator (:func:`start_chain`): ``step.set_rng(rng)`` in
  PyMC 5, ``step.setup_chain(rng, tune, draws)`` in PyMC 6;
* what PyMC's sampling loops hold that a step is not told (:func:`caller_tuning_draws`,
  :func:`caller_chain`, :func:`receiving_parallel_draw`), read from the call stack.

References
----------
- PyMC 6 migration notes and ``pymc.step_methods.compound.BlockedStep.setup_chain``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType

import numpy as np

from .versions import PYMC_VERSION

__all__ = ["caller_chain", "caller_frame", "caller_tuning_draws", "receiving_parallel_draw",
           "start_chain"]


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
