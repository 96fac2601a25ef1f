"""The block's log density as a step evaluates it.

:class:`LogDensity` wraps the compiled log density (or the user's ``logp_wrapper`` around
it): it takes a point as PyMC stores it (the block's dtype, float32 variables rounded:
:meth:`LogDensity.round`) and applies the step's ``on_error`` to a failure: an exception
raises :class:`~.evaluations.LogDensityError` or is a rejection, NaN is a rejection; both
are counted in :class:`~.evaluations.FailedEvaluations` (see ``docs/robustness.md``), at
the point in the model's own variables (:class:`~pymc_kameleon.model_point.ModelPoint`).  The
Laplace start's optimiser evaluates the same function through :meth:`LogDensity.searching`,
where failures are ``-inf`` and not counted.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytensor
from pymc.blocking import RaveledVars
from pymc.pytensorf import compile as compile_pytensor
from pymc.pytensorf import join_nonshared_inputs, make_shared_replacements

from ..compat import logp_compile_kwargs
from ..failures import Failure
from ..model_point import ModelPoint
from .evaluations import FailedEvaluations, LogDensityError, check_on_error
from .start import searching

__all__ = ["LogDensity", "compile_block_logp"]


def compile_block_logp(model, vars, initial_point: dict,
                       compile_kwargs: dict | None) -> tuple[Any, dict, int]:
    """The model's log density as a function of the block's raveled values (the other
    variables shared), the shared replacements and the block's size."""
    shared = make_shared_replacements(initial_point, vars, model)
    [logp], raveled_input = join_nonshared_inputs(
        point=initial_point, outputs=[model.logp()], inputs=vars, shared_inputs=shared)
    fn = compile_pytensor([raveled_input], logp, **logp_compile_kwargs(compile_kwargs))
    fn.trust_input = True
    return fn, shared, int(sum(np.size(initial_point[v.name]) for v in vars))


class LogDensity:
    """The evaluated log density of a step's block, with its failure handling.

    Parameters
    ----------
    call : callable
        ``call(x)``: the log density (a 0-d array or a float) of the block's raveled values.
    on_error : {"raise", "reject"}
        What an exception raised by ``call`` does (the step's ``on_error``).
    name : str
        The step's name and variables, for messages.
    model : pymc.Model, optional
        Failed points are named in its variables (else in the block's value variables).
    """

    def __init__(self, call: Callable[[np.ndarray], Any], *, on_error: str = "raise",
                 name: str = "", model=None):
        self.call = call
        self.on_error = check_on_error(on_error)
        self.name = name
        self.model = model
        self.dtype = np.dtype(pytensor.config.floatX)  # the block's, from its first point
        self.float32: list[slice] | None = None  # the float32 variables, rounded on storing
        self.point: ModelPoint | None = None  # failed points in the model's variables
        self.failed = FailedEvaluations()  # the chain's failures
        self.tune = True  # whether the current draw tunes (for the error's message)

    def layout(self, q0: RaveledVars) -> None:
        """Take the block's dtype, layout and float32 variables from PyMC's point."""
        if self.float32 is None:
            self.float32 = _float32_slices(q0)
        if self.point is None and self.model is not None:
            self.point = ModelPoint(self.model, q0.point_map_info)
        self.dtype = q0.data.dtype

    @property
    def info(self):
        """The layout of the points :attr:`failed` holds (``None``: raveled values)."""
        return None if self.point is None else self.point.info

    def _model(self, x: np.ndarray) -> np.ndarray:
        return x if self.point is None else self.point.ravel(x)

    def begin_draw(self, tune: bool) -> None:
        """A draw starts: its failures are counted from here (``tune``: it tunes)."""
        self.tune = tune
        self.failed.begin_draw()

    def round(self, x: np.ndarray) -> np.ndarray:
        """The point PyMC will store: float32 variables rounded (mixed-precision blocks)."""
        if self.float32:
            x = x.copy()
            for sl in self.float32:
                x[sl] = x[sl].astype(np.float32)
        return x

    def __call__(self, x: np.ndarray) -> float:
        """The log density at ``x`` (``-inf`` where it is not finite or failed)."""
        with np.errstate(all="ignore"):
            return self.unchecked(x)

    def unchecked(self, x: np.ndarray) -> float:
        """:meth:`__call__` without its ``np.errstate`` (the caller holds one)."""
        try:
            value = float(self.call(np.asarray(x, dtype=self.dtype)))
        except Exception as exc:  # the user's code (an estimator, a solver) raised
            failure = Failure.of(0, exc)
            if self.on_error == "raise":
                raise LogDensityError(self.failed.error(
                    self.name, self._model(x), self.info, self.tune, failure.op)
                ) from failure.error
            self.failed.add(self._model(x), failure)
            return -math.inf
        if math.isnan(value):
            self.failed.add(self._model(x))
        return value if math.isfinite(value) else -math.inf

    def searching(self) -> Callable[[np.ndarray], float]:
        """The log density for the Laplace start's optimiser (:func:`~.start.searching`)."""
        return searching(self.call, self.dtype)


def _float32_slices(q0: RaveledVars) -> list[slice]:
    """Slices of the float32 variables in a raveled vector (rounded like PyMC stores them)."""
    slices, start = [], 0
    for _name, _shape, size, dtype in q0.point_map_info:
        if np.dtype(dtype) == np.float32:
            slices.append(slice(start, start + int(size)))
        start += int(size)
    return slices
