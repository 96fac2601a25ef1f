"""Kernel-adaptive, gradient-free MCMC step methods for PyMC.

>>> import pymc_kameleon
>>> sorted(n for n in pymc_kameleon.__all__ if n.endswith("Step"))
['FastKameleonStep', 'KameleonStep', 'KernelHMCStep', 'RandomWalkStep']
"""

from .adaptation.independence import EmulatorMoves
from .bill import add_evaluations, evaluations, sample
from .bill import record_bill_in_attrs as _record_bill_in_attrs
from .emulator import EmulatorSettings
from .parallel import ExecutorError
from .pseudo_marginal import PseudoMarginalWarning, pseudo_marginal_potential
from .smc import KameleonSMC
from .steps import FastKameleonStep, KameleonStep, KernelHMCStep, RandomWalkStep
from .steps.base import StepInfo
from .steps.evaluations import LogDensityError, StartError

__all__ = [
    "EmulatorMoves",
    "EmulatorSettings",
    "ExecutorError",
    "FastKameleonStep",
    "KameleonSMC",
    "KameleonStep",
    "KernelHMCStep",
    "LogDensityError",
    "PseudoMarginalWarning",
    "RandomWalkStep",
    "StartError",
    "StepInfo",
    "add_evaluations",
    "evaluations",
    "pseudo_marginal_potential",
    "sample",
]
__version__ = "0.1.0.dev0"

# pm.sample's InferenceData gets the bill of our steps in sample_stats.attrs
_record_bill_in_attrs()
