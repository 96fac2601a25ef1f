"""Kernel-adaptive, gradient-free MCMC step methods for PyMC.

>>> import pymc_kameleon
>>> sorted(n for n in pymc_kameleon.__all__ if n.endswith("Step"))
['FastKameleonStep', 'KameleonStep', 'KernelHMCStep', 'RandomWalkStep']
"""

from .fast_kameleon import FastKameleonStep
from .kameleon import KameleonStep
from .kernel_hmc import KernelHMCStep
from .pseudo_marginal import PseudoMarginalWarning, pseudo_marginal_potential
from .random_walk import RandomWalkStep

__all__ = [
    "FastKameleonStep",
    "KameleonStep",
    "KernelHMCStep",
    "PseudoMarginalWarning",
    "RandomWalkStep",
    "pseudo_marginal_potential",
]
__version__ = "0.1.0.dev0"
