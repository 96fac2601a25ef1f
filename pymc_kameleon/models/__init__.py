"""Models and targets: PyMC model factories, synthetic targets, GP classification.

* :mod:`pymc_kameleon.models.factories` (re-exported here): PyMC models of the synthetic
  targets, a counting Op for honest log-density evaluation counts, the pseudo-marginal GP
  classification model.
* :mod:`pymc_kameleon.models.targets`: banana and flower log densities with exact samplers
  and checks (pure NumPy/SciPy).
* :mod:`pymc_kameleon.models.gpc`: GP classification on UCI Glass (pure NumPy/SciPy).
* :mod:`pymc_kameleon.models.ode`: a black-box ODE model (Lotka-Volterra solved by SciPy's
  ``odeint`` inside an Op without gradient).
"""

from .factories import (
    CountingLogp,
    banana_model,
    counted_model,
    flower_model,
    gaussian_mixture_model,
    gaussian_model,
    gp_classification_model,
)
from .ode import lotka_volterra_model

__all__ = [
    "CountingLogp",
    "banana_model",
    "counted_model",
    "flower_model",
    "gaussian_mixture_model",
    "gaussian_model",
    "gp_classification_model",
    "lotka_volterra_model",
]
