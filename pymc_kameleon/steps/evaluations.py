"""Failed log-density evaluations: NaN values and exceptions, counted and reported.

A NaN log density (e.g. an ODE solver that fails in part of the space) and, with
``on_error="reject"``, an exception raised by the log density (e.g. a likelihood estimator
that fails now and then) are rejections of the proposal, as a value of ``-inf`` is.  Unlike
``-inf`` they are not silent: they change the target (see ``docs/robustness.md``), so each
chain counts them (the sample stats ``n_nan`` and ``n_errors``) and reports once, through
PyMC's ``warning`` sample stat, how many there were and where.  A log density that is not
finite at a chain's starting point stops sampling with :class:`StartError`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from pymc.exceptions import SamplingError
from pymc.stats.convergence import SamplerWarning, WarningType

__all__ = ["ON_ERROR", "FailedEvaluations", "LogDensityError", "StartError", "check_on_error"]

#: What a step does when the log density raises (the ``on_error`` argument).
ON_ERROR = ("raise", "reject")


class LogDensityError(SamplingError):
    """The model's log density raised during sampling (``on_error="raise"``).

    The message names the chain's draw and the point; the user's exception is the
    ``__cause__`` (as PyTensor re-raised it: same type, message extended with the Op).
    A subclass of PyMC's :class:`~pymc.exceptions.SamplingError`.
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


def check_on_error(value: str) -> str:
    """``value`` if it is one of :data:`ON_ERROR`, else a ``ValueError`` naming it."""
    if value not in ON_ERROR:
        raise ValueError(f"on_error must be one of {ON_ERROR}, got {value!r}")
    return value


@dataclass
class FailedEvaluations:
    """Per-chain count of NaN values and exceptions, with where they happened.

    ``lo``/``hi`` is the box (per raveled coordinate, model space) of the failed points,
    ``first`` the first of them; ``draw`` counts the chain's draws so far.
    """

    n_nan: int = 0
    n_errors: int = 0
    first: np.ndarray | None = None
    lo: np.ndarray | None = None
    hi: np.ndarray | None = None
    first_error: str = ""
    draw: int = 0
    reported: bool = False
    at_draw_start: tuple[int, int] = field(default=(0, 0))

    @property
    def total(self) -> int:
        return self.n_nan + self.n_errors

    def add(self, x: np.ndarray, error: BaseException | None = None) -> None:
        """Record one failed evaluation at ``x`` (an exception if ``error`` is given)."""
        x = np.array(x, dtype=float)
        if error is None:
            self.n_nan += 1
        else:
            self.n_errors += 1
            if not self.first_error:
                self.first_error = f"{type(error).__name__}: {error}".split("\n")[0][:300]
        if self.first is None:
            self.first, self.lo, self.hi = x, x.copy(), x.copy()
        else:
            np.minimum(self.lo, x, out=self.lo)
            np.maximum(self.hi, x, out=self.hi)

    def begin_draw(self) -> None:
        self.at_draw_start = (self.n_nan, self.n_errors)

    def draw_stats(self) -> dict[str, int]:
        """Counts of the draw that ends now (everything since :meth:`begin_draw`)."""
        n_nan, n_errors = self.at_draw_start
        self.draw += 1
        return {"n_nan": self.n_nan - n_nan, "n_errors": self.n_errors - n_errors}

    def warning(self, step: str, info, n_draws: int | None) -> SamplerWarning | None:
        """The chain's one report, or ``None``: at the chain's last draw when PyMC says
        how many draws there are (``n_draws``, PyMC >= 6), else at the first draw with a
        failure (PyMC 5 does not tell a step when the chain ends)."""
        if self.reported or not self.total:
            return None
        if n_draws is not None and self.draw < n_draws:
            return None
        self.reported = True
        what = []
        if self.n_nan:
            what.append(f"NaN at {self.n_nan} evaluation{'s' * (self.n_nan > 1)}")
        if self.n_errors:
            what.append(f"an exception at {self.n_errors} evaluation"
                        f"{'s' * (self.n_errors > 1)} (on_error='reject'; the first: "
                        f"{self.first_error})")
        so_far = "in this chain" if n_draws is not None else (
            f"by draw {self.draw - 1} of this chain (later ones are only counted)")
        message = (
            f"{step}: the log density gave {' and '.join(what)} {so_far}. "
            "Each was a rejected proposal, so the chain samples the posterior restricted "
            "to where the log density is finite, not the model's posterior (return -inf "
            "where the density is zero).  Failed points: first at "
            f"{_format(self.first, info)}, all within {_format_box(self.lo, self.hi, info)}. "
            "Counts per draw: sample stats n_nan and n_errors."
        )
        return SamplerWarning(WarningType.BAD_PARAMS, message, "warn",
                              extra={"n_nan": self.n_nan, "n_errors": self.n_errors,
                                     "first": self.first, "lo": self.lo, "hi": self.hi})

    def error(self, step: str, x: np.ndarray, info, tune: bool) -> str:
        """Message of the :class:`LogDensityError` for a failure at ``x`` now."""
        phase = "tuning" if tune else "after tuning"
        return (f"{step}: the log density raised at draw {self.draw} ({phase}, counting "
                "from 0 with the tuning draws) of this chain, at the point "
                f"{_format(x, info)}.  Pass on_error='reject' to the step to count such "
                "failures as rejected proposals (this changes the target: "
                "docs/robustness.md).")


def _split(x: np.ndarray, info) -> dict[str, np.ndarray]:
    out, start = {}, 0
    for name, shape, size, _dtype in info:
        out[name] = x[start:start + int(size)].reshape(shape)
        start += int(size)
    return out


def _text(a: np.ndarray) -> str:
    return np.array2string(np.asarray(a), precision=4, threshold=8, separator=", ")


def _format(x: np.ndarray, info) -> str:
    if info is None:
        return _text(x)
    return "{" + ", ".join(f"{k}: {_text(v)}" for k, v in _split(x, info).items()) + "}"


def _format_box(lo: np.ndarray, hi: np.ndarray, info) -> str:
    if info is None:
        return f"[{_text(lo)}, {_text(hi)}]"
    lo_, hi_ = _split(lo, info), _split(hi, info)
    return "{" + ", ".join(f"{k}: [{_text(lo_[k])}, {_text(hi_[k])}]" for k in lo_) + "}"
