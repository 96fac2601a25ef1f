"""Failed log-density evaluations: NaN values and exceptions, counted and reported.

A NaN log density (e.g. an ODE solver that fails in part of the space) and, with
``on_error="reject"``, an exception raised by the log density (e.g. a likelihood estimator
that fails now and then) are rejections of the proposal, as a value of ``-inf`` is.  Unlike
``-inf`` they are not silent: they change the target (see ``docs/robustness.md``), so each
chain counts them (the sample stats ``n_nan`` and ``n_errors``) and reports once, through
PyMC's ``warning`` sample stat, how many there were and where.  A log density that is not
finite at a chain's starting point stops sampling with :class:`StartError`.  The counting
is :class:`pymc_kameleon.failures.Failures`, shared with ``KameleonSMC``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pymc.exceptions import SamplingError
from pymc.stats.convergence import SamplerWarning, WarningType

from ..failures import ON_ERROR, Failures, check_on_error, format_point

__all__ = ["ON_ERROR", "FailedEvaluations", "LogDensityError", "StartError", "check_on_error"]


class LogDensityError(SamplingError):
    """The model's log density raised during sampling (``on_error="raise"``), in a step of
    ``pm.sample`` or in :class:`~pymc_kameleon.KameleonSMC`.

    The message names where (the chain's draw, or the SMC stage) and the point; the user's
    exception, as their code raised it, is the ``__cause__`` (raised in a worker process,
    its traceback is the ``__cause__``'s own ``__cause__``).  A subclass of PyMC's
    :class:`~pymc.exceptions.SamplingError`.
    """


class StartError(SamplingError):
    """The model's log density is not finite at a chain's starting point.

    Raised at the first draw of the chain, with PyMC's message (the starting values and
    the terms of the log density that are not finite).  A subclass of PyMC's
    :class:`~pymc.exceptions.SamplingError`.  With ``pm.sample(cores=2)`` it is raised in
    the chain's process, and PyMC raises its ``ParallelSamplingError`` ("Chain N failed
    with: ...") from it, as for every ``SamplingError`` of a chain (``pm.NUTS``' included):
    the ``__cause__`` is this error, whose own ``__cause__`` holds the chain process's
    traceback.
    """

    @classmethod
    def at_start(cls, step: str, message: str) -> StartError:
        """The error of ``step`` (its name and variables)."""
        return cls(f"{message}\n{step}: at the start of the chain.")


@dataclass
class FailedEvaluations(Failures):
    """A chain's :class:`~pymc_kameleon.failures.Failures`, counted per draw and reported
    once per chain; ``draw`` counts the chain's draws so far."""

    draw: int = 0
    reported: bool = False

    def begin_draw(self) -> None:
        self.mark("draw")

    def draw_stats(self) -> dict[str, int]:
        """Counts of the draw that ends now (everything since :meth:`begin_draw`)."""
        self.draw += 1
        return self.since("draw")

    def warning(self, step: str, info, n_draws: int | None) -> SamplerWarning | None:
        """The chain's one report, or ``None``: at the chain's last draw when PyMC says
        how many draws there are (``n_draws``, PyMC >= 6), else at the first draw with a
        failure (PyMC 5 does not tell a step when the chain ends)."""
        if self.reported or not self.total:
            return None
        if n_draws is not None and self.draw < n_draws:
            return None
        self.reported = True
        so_far = "in this chain" if n_draws is not None else (
            f"by draw {self.draw - 1} of this chain (later ones are only counted)")
        message = (
            f"{step}: the log density gave {self.what()} {so_far}. "
            "Each was a rejected proposal, so the chain samples the posterior restricted "
            "to where the log density is finite, not the model's posterior (return -inf "
            f"where the density is zero).  {self.where(info)} "
            "Counts per draw: sample stats n_nan and n_errors."
        )
        return SamplerWarning(WarningType.BAD_PARAMS, message, "warn",
                              extra={"n_nan": self.n_nan, "n_errors": self.n_errors,
                                     "first": self.first, "lo": self.lo, "hi": self.hi})

    def error(self, step: str, x: np.ndarray, info, tune: bool, op: str = "") -> str:
        """Message of the :class:`LogDensityError` for a failure at ``x`` now."""
        phase = "tuning" if tune else "after tuning"
        return (f"{step}: the log density raised at draw {self.draw} ({phase}, counting "
                f"from 0 with the tuning draws) of this chain,{_in(op)} at the point "
                f"{format_point(x, info)}.  Pass on_error='reject' to the step to count such "
                "failures as rejected proposals (this changes the target: "
                "docs/robustness.md).")


def _in(op: str) -> str:
    return f" in {op}," if op else ""
