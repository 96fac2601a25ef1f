"""Kernel adaptive SMC (KASMC): a KAMH mutation kernel for ``pm.sample_smc``.

``pm.sample_smc(kernel=KameleonSMC)`` keeps PyMC's adaptive tempering, systematic
resampling and log marginal likelihood estimate, and replaces only the mutation: at each
stage every particle runs exact Metropolis-Hastings steps for the tempered posterior with
a mixture of the KAMH proposal and an independent Gaussian-mixture proposal, both built
from the stage's particle system (see ``docs/smc.md``).

The parts, each a module a reader can change on its own: :mod:`.kernel` (PyMC's hooks),
:mod:`.options`, :mod:`.prior` (the start), :mod:`.evaluation` (batches, counts, budget),
:mod:`.report` (warnings, progress bar, settings), :mod:`.emulated` (the emulator mode
and recycled draws), with PyMC's internals in :mod:`pymc_kameleon.compat.smc`;
the population moves, free of PyMC, are :mod:`pymc_kameleon.particles` (the stage's
proposal and move, the stage rules, take-last and waste-free stages, recycling).

References
----------
- Strathmann, H. (2018). Kernel methods for Monte Carlo. PhD thesis, UCL, Section 5.2.1.
- Schuster, Strathmann, Paige, Sejdinovic (2017). Kernel Sequential Monte Carlo.
  ECML-PKDD.
- Sejdinovic, Strathmann, Lomeli Garcia, Andrieu, Gretton (2014). Kernel Adaptive
  Metropolis-Hastings. ICML.
"""

from ..compat.smc import attach_result_group, rectangular_stats
from ..particles.proposal import MixtureMove, StageProposal
from ..particles.rules import Decorrelated, Levelled, Refreshed, StageRules, StepRecord
from .evaluation import vectorised_logp
from .kernel import KameleonSMC
from .options import SMCOptions
from .prior import check_proper_priors
from .weighted import take_pending

# pm.sample_smc's result gets the chains' weighted samples (group "weighted_sample")
attach_result_group("weighted_sample", take_pending)
# and stats that save to netCDF also where its chains ran different numbers of stages
rectangular_stats(lambda attrs: "n_evals_total" in attrs)  # KameleonSMC's settings

__all__ = ["Decorrelated", "KameleonSMC", "Levelled", "MixtureMove", "Refreshed", "SMCOptions",
           "StageProposal", "StageRules", "StepRecord", "check_proper_priors",
           "vectorised_logp"]
