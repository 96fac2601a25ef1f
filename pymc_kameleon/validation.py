"""Validation of user arguments shared by every step and model factory (no PyMC import).

One rule for every integral argument (``n_steps``, ``warmup_draws``, ``n_history``,
``n_features``, ...): an integer-valued number, ``bool`` refused (``True`` is ``1`` to
Python, but never what a user means by a count), NaN and infinity refused with a message
naming the argument instead of ``int()``'s "cannot convert float NaN to integer".
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = ["check_above", "check_at_least", "check_flag", "check_fraction", "check_integral",
           "check_positive"]


def check_integral(name: str, value, minimum: int = 1) -> int:
    """``value`` as an ``int``, or an error naming the argument ``name``.

    Parameters
    ----------
    name : str
        The argument's name, as the user wrote it.
    value : int-like
        An integral number (``int``, NumPy integer, or a float with an integer value such
        as ``10.0``).
    minimum : int, default 1
        Smallest allowed value.

    Returns
    -------
    int

    Raises
    ------
    TypeError
        ``value`` is a ``bool`` or not a real number (e.g. a string or ``None``).
    ValueError
        ``value`` is NaN, infinite, not integer-valued, or below ``minimum``.

    Examples
    --------
    >>> check_integral("n_steps", 10.0)
    10
    >>> check_integral("n_steps", True)
    Traceback (most recent call last):
    ...
    TypeError: n_steps must be an integer >= 1, got True (a bool)
    """
    want = f"{name} must be an integer >= {minimum}"
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{want}, got {value!r} (a bool)")
    if not isinstance(value, numbers.Real):
        raise TypeError(f"{want}, got {value!r} of type {type(value).__name__}")
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"{want}, got {value!r}")
    if int(value) != value:
        raise ValueError(f"{want}, got {value!r} (not a whole number)")
    if value < minimum:
        raise ValueError(f"{want}, got {value!r}")
    return int(value)


def check_positive(name: str, value: float) -> float:
    """``value`` as a positive finite ``float``, or an error naming the argument ``name``.

    Examples
    --------
    >>> check_positive("s", 2)
    2.0
    """
    value = float(value)
    if not (np.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive finite number, got {value}")
    return value


def check_at_least(name: str, value, minimum: float) -> float:
    """``value`` as a ``float`` of at least ``minimum``, or a ``ValueError`` naming the
    argument ``name`` (a ``bool``, a non-number and NaN included).

    Examples
    --------
    >>> check_at_least("max_work_factor", 8, 1.0)
    8.0
    """
    if not (_is_real(value) and value >= minimum):
        raise ValueError(f"{name} must be a number of at least {minimum:g}, got {value!r}")
    return float(value)


def check_above(name: str, value, bound: float) -> float:
    """``value`` as a ``float`` strictly above ``bound`` (infinity allowed), or a
    ``ValueError`` naming the argument ``name`` (a ``bool``, a non-number and NaN included).

    Examples
    --------
    >>> check_above("widen", 1.2, 0.0)
    1.2
    """
    if not (_is_real(value) and value > bound):
        raise ValueError(f"{name} must be a number above {bound:g}, got {value!r}")
    return float(value)


def check_fraction(name: str, value) -> float:
    """``value`` as a ``float`` between 0 and 1 (both included), or a ``ValueError``
    naming the argument ``name``.

    Examples
    --------
    >>> check_fraction("weight", 0.8)
    0.8
    """
    if not (_is_real(value) and 0.0 <= value <= 1.0):
        raise ValueError(f"{name} must be a number between 0 and 1, got {value!r}")
    return float(value)


def check_flag(name: str, value) -> bool:
    """``value`` if it is ``True`` or ``False``, else a ``TypeError`` naming ``name``
    (``1`` or ``"yes"`` are not read as a switch)."""
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return value


def _is_real(value) -> bool:
    """A real number that is not a ``bool`` (NaN included: the callers' comparisons fail)."""
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
