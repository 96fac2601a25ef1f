"""Adaptation rules of the step methods, free of PyMC (pure Python/NumPy).

* :class:`RobbinsMonro`: stochastic-approximation scaling toward a target acceptance rate
  (its step :func:`log_scale_step` and argument check :func:`check_robbins_monro` are shared
  with :class:`AnchoredStepSize`).
* :class:`GeometricSchedule`: when the expensive adaptation events happen.
* :class:`TrialSelection`: one of a few candidate values, chosen by trials scored by the
  expected squared jump distance (e.g. the isotropic term ``gamma`` of the kameleons).
* :class:`AnchoredStepSize`: a step size checked against the target but kept near a
  noise-free anchor, so that an acceptance rate capped by likelihood-estimator noise cannot
  drive it to zero.
* :class:`KernelHMCAdaptation`: kernel HMC's kernel, its surrogates and their adaptation
  (:mod:`.kernel_hmc`).
* :class:`KameleonAdaptation`, :class:`FastKameleonAdaptation`: the local-Gaussian kernels
  of KAMH and F-KAMH and their adaptation (:mod:`.local_gaussian`).
* :class:`SurrogateScreen`: delayed acceptance in front of any kernel's decision
  (:mod:`.screen`); every kernel follows the protocol of :mod:`.kernel`.

The warm-up shared by every step is the kernel of :mod:`.warmup_kernel` (init / propose /
update / final on one chain's state); its numerics live in :mod:`.warmup` (whitening map,
windows, regularised covariances, the acceptance ceiling of a noisy log density) and
:mod:`.laplace` (the Laplace start and the importance-sampling check of its Gaussian).

All of them run only while PyMC tunes and are frozen by ``stop_tuning()``.
"""

from .fast_kameleon import FastKameleonAdaptation
from .kameleon import KameleonAdaptation
from .kernel_hmc import KernelHMCAdaptation
from .robbins_monro import RobbinsMonro, check_robbins_monro, log_scale_step
from .schedule import GeometricSchedule
from .screen import SurrogateScreen
from .selection import TrialSelection
from .step_size import AnchoredStepSize

__all__ = ["AnchoredStepSize", "FastKameleonAdaptation", "GeometricSchedule",
           "KameleonAdaptation", "KernelHMCAdaptation", "RobbinsMonro", "SurrogateScreen",
           "TrialSelection", "check_robbins_monro", "log_scale_step"]
