"""Emulator-guided sampling, free of PyMC: an exact answer in a few thousand evaluations.

An *emulator* is a regression of the log density on the evaluated points
(:mod:`.surrogate`).  It decides where to evaluate (:mod:`.design`); true evaluations
decide the answer (:mod:`.correction`, adaptive importance sampling on the true density).
:class:`~.engine.EmulatorRun` runs the rounds and falls back where the emulator does not
pay.  ``KameleonSMC(emulator=True)`` is its PyMC front end (``docs/emulator.md``).
"""

from .engine import EmulatorProblem, EmulatorRun, EmulatorSettings

__all__ = ["EmulatorProblem", "EmulatorRun", "EmulatorSettings"]
