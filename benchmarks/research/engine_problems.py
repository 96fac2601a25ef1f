"""Targets for the emulator's engine (free of PyMC) in the research scripts: a normalised
log density as the posterior under an isotropic Gaussian prior."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pymc_kameleon.emulator import EmulatorProblem


def normal_log_prior(X: np.ndarray, sd: float) -> np.ndarray:
    """The ``N(0, sd^2 I)`` log density at each row of ``X``."""
    X = np.atleast_2d(X)
    return -0.5 * np.sum((X / sd) ** 2, axis=1) - X.shape[1] * np.log(sd * np.sqrt(2 * np.pi))


def under_normal_prior(log_target: Callable[[np.ndarray], np.ndarray], dim: int, sd: float,
                       rng: np.random.Generator) -> EmulatorProblem:
    """``log_target`` (normalised, rows in) as the posterior under a ``N(0, sd^2 I)`` prior:
    its density over the prior is the likelihood, prior draws come from ``rng``."""
    def log_prior(X):
        return normal_log_prior(X, sd)

    def terms(X):
        prior = log_prior(X)
        return prior, log_target(np.atleast_2d(X)) - prior

    return EmulatorProblem(log_prior, terms, lambda n: rng.normal(0, sd, (n, dim)), dim)
