"""Failed log-density evaluations, counted and described the same way by every sampler.

A NaN log density (an ODE solver that fails in part of the space) and, with
``on_error="reject"``, an exception the log density raised are rejections (zero density),
as ``-inf`` is; unlike ``-inf`` they are counted and reported (``docs/robustness.md``).
:class:`Failures` is the count, the first failed point and the box of them all, used by the
steps of ``pm.sample`` (:mod:`pymc_kameleon.steps.evaluations`) and by
:class:`~pymc_kameleon.KameleonSMC` (:mod:`pymc_kameleon.smc.evaluation`).
:class:`Failure` is one exception at one point, as a worker of an executor sends it back
(:mod:`pymc_kameleon.parallel.batch`).  Free of PyMC.
"""

from __future__ import annotations

import pickle
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = ["ON_ERROR", "Failure", "Failures", "RemoteTraceback", "check_on_error",
           "format_point", "user_exception"]

#: What a sampler does when the log density raises (the ``on_error`` argument).
ON_ERROR = ("raise", "reject")

#: Attributes PyTensor's ``raise_with_op`` adds to the exception of a failed Op.
_PYTENSOR_ATTRS = ("__op_instance__", "__thunk_trace__", "__applynode_index__")


def check_on_error(value: str) -> str:
    """``value`` if it is one of :data:`ON_ERROR`, else a ``ValueError`` naming it."""
    if value not in ON_ERROR:
        raise ValueError(f"on_error must be one of {ON_ERROR}, got {value!r}")
    return value


def user_exception(exc: BaseException) -> BaseException:
    """The exception the user's code raised inside a compiled PyTensor function.

    PyTensor re-raises it as a new exception of the same type whose message has the Op's
    details appended; printed, the user's traceback then appears twice.  The original is
    the new one's ``__context__`` and carries PyTensor's ``__op_instance__``.
    """
    original = exc.__context__
    if (original is not None and type(original) is type(exc)
            and hasattr(original, "__op_instance__")):
        return original
    return exc


class RemoteTraceback(Exception):
    """The traceback of an exception raised in a worker process, as text (the exception
    itself travels without it); the ``__cause__`` of that exception."""

    def __str__(self) -> str:
        return f"\n{self.args[0]}"


@dataclass
class Failure:
    """The exception ``error`` raised by the log density at row ``row`` of a batch.

    ``op`` names PyTensor's Op that raised; ``traceback`` is the user's traceback as text,
    set where the exception leaves its process (:meth:`portable`).
    """

    row: int
    error: BaseException
    op: str = ""
    traceback: str = ""

    @classmethod
    def of(cls, row: int, exc: BaseException) -> Failure:
        """The failure of ``exc`` (PyTensor's re-raised exception unwrapped)."""
        error = user_exception(exc)
        node = getattr(error, "__op_instance__", None)
        return cls(row, error, "" if node is None else str(node))

    def portable(self) -> Failure:
        """This failure as it can travel to another process: the traceback as text, the
        exception without PyTensor's attributes, or a ``RuntimeError`` with its text where
        it does not pickle."""
        error = self.error
        text = "".join(traceback.format_tb(error.__traceback__))
        for name in _PYTENSOR_ATTRS:
            error.__dict__.pop(name, None)
        try:
            pickle.dumps(error)
        except Exception:
            error = RuntimeError(f"{type(error).__module__}.{type(error).__qualname__}: "
                                 f"{error}")
        return Failure(self.row, error, self.op, text)

    def cause(self) -> BaseException:
        """The exception to chain a sampler's error to: its own traceback where it has one
        (raised in this process or a thread), else the worker's as its ``__cause__``."""
        error = self.error
        if error.__traceback__ is None and self.traceback and error.__cause__ is None:
            error.__cause__ = RemoteTraceback(
                "Traceback (most recent call last), in the executor's worker:\n"
                + self.traceback.rstrip("\n"))
        return error

    def summary(self) -> str:
        """``Type: first line of the message`` (at most 300 characters)."""
        return f"{type(self.error).__name__}: {self.error}".split("\n")[0][:300]


Info = Sequence[tuple]  # (name, shape, size[, dtype]) per variable, in raveled order


@dataclass
class Failures:
    """Count of NaN values and exceptions, with where they happened.

    ``first`` is the first failed point, ``lo``/``hi`` the box (per raveled coordinate) of
    all of them, in the space of the points given to :meth:`add`.
    """

    n_nan: int = 0
    n_errors: int = 0
    first: np.ndarray | None = None
    lo: np.ndarray | None = None
    hi: np.ndarray | None = None
    first_error: str = ""
    marks: dict = field(default_factory=dict)

    @property
    def total(self) -> int:
        return self.n_nan + self.n_errors

    def add(self, x: np.ndarray, error: BaseException | Failure | None = None) -> None:
        """Record one failed evaluation at ``x`` (an exception if ``error`` is given)."""
        x = np.array(x, dtype=float)
        if error is None:
            self.n_nan += 1
        else:
            self.n_errors += 1
            if not self.first_error:
                failure = error if isinstance(error, Failure) else Failure(0, error)
                self.first_error = failure.summary()
        if self.first is None:
            self.first, self.lo, self.hi = x, x.copy(), x.copy()
        else:
            np.minimum(self.lo, x, out=self.lo)
            np.maximum(self.hi, x, out=self.hi)

    def mark(self, key: str = "") -> None:
        """Remember the counts now; :meth:`since` gives what came after."""
        self.marks[key] = (self.n_nan, self.n_errors)

    def since(self, key: str = "") -> dict[str, int]:
        """``n_nan`` and ``n_errors`` since :meth:`mark` (from the start without one)."""
        n_nan, n_errors = self.marks.get(key, (0, 0))
        return {"n_nan": self.n_nan - n_nan, "n_errors": self.n_errors - n_errors}

    def what(self) -> str:
        """What failed: "NaN at 3 evaluations and an exception at 1 evaluation (...)"."""
        parts = []
        if self.n_nan:
            parts.append(f"NaN at {self.n_nan} evaluation{'s' * (self.n_nan > 1)}")
        if self.n_errors:
            parts.append(f"an exception at {self.n_errors} evaluation"
                         f"{'s' * (self.n_errors > 1)} (on_error='reject'; the first: "
                         f"{self.first_error})")
        return " and ".join(parts)

    def where(self, info: Info | None) -> str:
        """Where: the first failed point and the box of all of them."""
        return (f"Failed points: first at {format_point(self.first, info)}, all within "
                f"{_format_box(self.lo, self.hi, info)}.")


def _split(x: np.ndarray, info: Info) -> dict[str, np.ndarray]:
    out, start = {}, 0
    for name, shape, size, *_ in info:
        out[name] = x[start:start + int(size)].reshape(shape)
        start += int(size)
    return out


def _text(a: np.ndarray) -> str:
    return np.array2string(np.asarray(a), precision=4, threshold=8, separator=", ")


def format_point(x: np.ndarray, info: Info | None) -> str:
    """``{name: value, ...}`` of a raveled point (``info``: its layout), else the array."""
    if info is None:
        return _text(x)
    return "{" + ", ".join(f"{k}: {_text(v)}" for k, v in _split(x, info).items()) + "}"


def _format_box(lo: np.ndarray, hi: np.ndarray, info: Info | None) -> str:
    if info is None:
        return f"[{_text(lo)}, {_text(hi)}]"
    lo_, hi_ = _split(lo, info), _split(hi, info)
    return "{" + ", ".join(f"{k}: [{_text(lo_[k])}, {_text(hi_[k])}]" for k in lo_) + "}"
