"""Models users sample: the banana target, GP classification, a black-box ODE.

* :func:`banana_model` and :mod:`pymc_kameleon.models.targets`: the banana target with its
  exact sampler and a check of a sampler's draws against the exact answer
  (:func:`~pymc_kameleon.models.targets.banana_coverage_error`), as in the examples and the
  algorithm pages.
* :func:`gp_classification_model` and :mod:`pymc_kameleon.models.gpc`: pseudo-marginal GP
  classification on UCI Glass (:doc:`/pseudo_marginal`).
* :func:`lotka_volterra_model` (:mod:`pymc_kameleon.models.ode`): a black-box ODE model,
  Lotka-Volterra solved by SciPy's ``odeint`` inside an Op without gradient
  (:doc:`/examples/black_box_ode`).
* :func:`add_counter` (:mod:`pymc_kameleon.models.counting`): a potential that counts a
  model's log-density evaluations, to check a sampler's bill independently.

The models the tests and benchmarks share are modules of their own, not imported here:

* :mod:`pymc_kameleon.models.synthetic`: the flower's model, Gaussians, a Gaussian mixture
  with known evidence, and a NumPy log density in a model that counts its evaluations;
* the real models of the benchmark suite: :mod:`pymc_kameleon.models.classic` (eight
  schools, radon, regressions, a funnel), :mod:`pymc_kameleon.models.features` (PyMC's
  transforms, imputation, censoring, mixtures, a latent time series) and
  :mod:`pymc_kameleon.models.hard` (ODEs, latent Gaussian processes, near-collinear
  regressions), with their data in :mod:`pymc_kameleon.models.data`.
"""

from .counting import add_counter, find_counter
from .factories import banana_model, gp_classification_model
from .ode import lotka_volterra_model

__all__ = ["add_counter", "banana_model", "find_counter", "gp_classification_model",
           "lotka_volterra_model"]
