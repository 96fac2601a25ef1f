"""Adaptation rules of the step methods, free of PyMC (pure Python/NumPy).

* :class:`RobbinsMonro`: stochastic-approximation scaling toward a target acceptance rate.
* :class:`GeometricSchedule`: when the expensive adaptation events happen.

All of them run only while PyMC tunes and are frozen by ``stop_tuning()``.
"""

from .robbins_monro import RobbinsMonro
from .schedule import GeometricSchedule

__all__ = ["GeometricSchedule", "RobbinsMonro"]
