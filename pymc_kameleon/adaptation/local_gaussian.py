"""The kameleons' kernel: a position-dependent Gaussian proposal and its adaptation.

KAMH and F-KAMH propose ``x* ~ N(y, gamma^2 I + scale * G(y))``, where ``G(y)`` is a
positive semi-definite "adaptive part" learned from the chain history and ``scale`` is
``nu^2`` (KAMH) or ``eta^2`` (F-KAMH).  :class:`LocalGaussianAdaptation` holds what they
share, as a configuration whose functions act on one chain's state (the interface of
:mod:`.warmup_kernel` and :mod:`.kernel_hmc`; it knows nothing of PyMC: the random
generator, whether PyMC tunes and the acceptance target are arguments):

* :meth:`~LocalGaussianAdaptation.propose`: the draw and the full Metropolis-Hastings
  correction ``log q(y | x*) - log q(x* | y)``, the reverse density built at ``x*`` with
  the same history and scale; ``G`` and its factor are cached at the current point (after
  an accepted move the reverse proposal of the last iteration is the forward proposal of
  the next one), and the cache is emptied by adaptation;
* :meth:`~LocalGaussianAdaptation.update` every tuning iteration: the gamma trials' score
  and :meth:`~LocalGaussianAdaptation.record` of the new position in the history;
* :meth:`~LocalGaussianAdaptation.update_draw` at each tuning draw boundary: Robbins-Monro
  adaptation of ``scale`` toward the target acceptance (mean acceptance of the draw's
  iterations), the next gamma trial, and :meth:`~LocalGaussianAdaptation.refresh` after
  each event of the :class:`~pymc_kameleon.adaptation.GeometricSchedule` (never after
  tuning: the last tuned proposal is the one that samples).  When a refresh changes the
  natural scale of ``G`` (:func:`pymc_kameleon.math.kamh.natural_nu2_scale`), an adapted
  scale moves with it, keeping the tuned acceptance rate; a scale the user fixed
  (``adapt_scale=False``) never changes;
* the choice of ``gamma`` among a few candidates by trials while tuning
  (:class:`~pymc_kameleon.adaptation.TrialSelection`: round-robin blocks of draws, expected
  squared jump distance per iteration), each candidate with its own adapted scale; after
  the trials, a scale at its lower bound moves ``gamma`` to the next smaller candidate;
* :meth:`~LocalGaussianAdaptation.final` when tuning ends.

:class:`KameleonAdaptation` (KAMH: a reservoir subsample and its Gram) and
:class:`FastKameleonAdaptation` (F-KAMH: random Fourier features, their whole-history
moments and a low-rank factor of their covariance) supply ``G``.  Everything runs in the
whitened coordinates of the warm-up, so ``gamma`` is relative to the posterior scale.

This module is their one import path: the shared base is in :mod:`.local_gaussian_base`,
KAMH's kernel in :mod:`.kameleon` and F-KAMH's in :mod:`.fast_kameleon`.
"""

from .fast_kameleon import FastKameleonAdaptation, FastKameleonAdaptState, default_n_features
from .kameleon import KameleonAdaptation, KameleonAdaptState
from .local_gaussian_base import GAMMA_GRID, LocalGaussianAdaptation, LocalGaussianAdaptState

__all__ = ["GAMMA_GRID", "FastKameleonAdaptState", "FastKameleonAdaptation",
           "KameleonAdaptState", "KameleonAdaptation", "LocalGaussianAdaptState",
           "LocalGaussianAdaptation", "default_n_features"]
