"""The PyMC step methods: one shared base and a thin module per sampler.

* :mod:`~pymc_kameleon.steps.base`: chain state and stored log density, propose ->
  Metropolis-Hastings -> adapt, stats, tuning, ``sampling_state``; the warm-up is the
  PyMC-free kernel of :mod:`~pymc_kameleon.adaptation.warmup_kernel`.
* :mod:`~pymc_kameleon.steps.start`: the first draw of a chain (noise check, Laplace start).
* :mod:`~pymc_kameleon.steps.density`, :mod:`~pymc_kameleon.steps.evaluations`: the
  evaluated log density and its failures; :mod:`~pymc_kameleon.steps.store`: the stored
  value shared between steps; :mod:`~pymc_kameleon.steps.records`: state, proposal,
  per-iteration info and stats; :mod:`~pymc_kameleon.steps.progress`: the progress bar.
* :mod:`~pymc_kameleon.steps.local_gaussian`: position-dependent Gaussian proposals (shared
  by KAMH and F-KAMH).
* :mod:`~pymc_kameleon.steps.kameleon`, :mod:`~pymc_kameleon.steps.fast_kameleon`,
  :mod:`~pymc_kameleon.steps.kernel_hmc`, :mod:`~pymc_kameleon.steps.random_walk`.
"""

from .fast_kameleon import FastKameleonStep
from .kameleon import KameleonStep
from .kernel_hmc import KernelHMCStep
from .random_walk import RandomWalkStep

__all__ = ["FastKameleonStep", "KameleonStep", "KernelHMCStep", "RandomWalkStep"]
