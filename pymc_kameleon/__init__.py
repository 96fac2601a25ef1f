"""Kernel-adaptive, gradient-free MCMC step methods for PyMC.

>>> import pymc_kameleon
>>> sorted(n for n in pymc_kameleon.__all__ if n.endswith("Step"))
['KameleonStep']
"""

from .kameleon import KameleonStep
from .pseudo_marginal import PseudoMarginalWarning, pseudo_marginal_potential

__all__ = ["KameleonStep", "PseudoMarginalWarning", "pseudo_marginal_potential"]
__version__ = "0.1.0.dev0"
