"""Small test targets modelled on PyMC's own step-method test models (``tests/models.py`` in
PyMC's repository; the installed ``pymc.testing`` has none), plus two hard targets of the
contract.  Each builder returns ``(model, truth)`` where ``truth`` maps a variable name to
the exact posterior ``(mean, variance)`` arrays (shape of the variable).
"""

from __future__ import annotations

import numpy as np
import pymc as pm

#: upper-triangular factor of the precision of PyMC's ``mv_simple`` (precision ``P P^T``)
_MV_SIMPLE_P = np.array([[2.0, 0.0, 0.0], [0.05, 0.1, 0.0], [1.0, -0.05, 5.5]])
_MV_SIMPLE_MU = np.array([-0.1, 0.5, 1.1])


def mv_simple_cov() -> np.ndarray:
    """Covariance of ``mv_simple``: sds 0.57, 10.0, 0.18; condition number 3.1e3."""
    return np.linalg.inv(_MV_SIMPLE_P @ _MV_SIMPLE_P.T)


def simple_model():
    """Two iid N(-2.1, 1/1.3) (PyMC's ``simple_model``)."""
    mu, tau = -2.1, 1.3
    with pm.Model() as model:
        pm.Normal("x", mu, tau=tau, size=2, initval=np.array([0.1, 0.1]))
    return model, {"x": (np.full(2, mu), np.full(2, 1.0 / tau))}


def multidimensional_model():
    """A (3, 2) array of iid N(-2.1, 1/1.3) (PyMC's ``multidimensional_model``)."""
    mu, tau = -2.1, 1.3
    with pm.Model() as model:
        pm.Normal("x", mu, tau=tau, size=(3, 2), initval=0.1 * np.ones((3, 2)))
    return model, {"x": (np.full((3, 2), mu), np.full((3, 2), 1.0 / tau))}


def simple_2model_continuous():
    """A normal and two Beta(1, 1) (logit transform) (PyMC's ``simple_2model_continuous``)."""
    mu, tau = -2.1, 1.3
    with pm.Model() as model:
        pm.Normal("x", mu, tau=tau, initval=0.1)
        pm.Beta("y", alpha=1, beta=1, size=2)
    return model, {"x": (np.array(mu), np.array(1.0 / tau)),
                   "y": (np.full(2, 0.5), np.full(2, 1.0 / 12.0))}


def non_normal():
    """Two Beta(3, 3) *without* transform: proposals outside (0, 1) have zero density."""
    with pm.Model() as model:
        pm.Beta("x", 3, 3, size=2, default_transform=None)
    return model, {"x": (np.full(2, 0.5), np.full(2, 9.0 / (36.0 * 7.0)))}


def mv_simple():
    """PyMC's ``mv_simple``: 3-d Gaussian, sds differing 55x, condition number 3.1e3."""
    with pm.Model() as model:
        pm.MvNormal("x", _MV_SIMPLE_MU, tau=_MV_SIMPLE_P @ _MV_SIMPLE_P.T,
                    initval=np.array([0.1, 1.0, 0.8]))
    return model, {"x": (_MV_SIMPLE_MU.copy(), np.diag(mv_simple_cov()).copy())}


def batched_dirichlet(rows: int = 8, k: int = 11, n: int = 40, seed: int = 2024):
    """``rows`` Dirichlet(1) rows with Multinomial counts: ``rows * (k - 1)`` = 80 free
    coordinates (stick-breaking/simplex transform); posterior Dirichlet(1 + counts) per row."""
    rng = np.random.default_rng(seed)
    counts = np.stack([rng.multinomial(n, p) for p in rng.dirichlet(np.ones(k), size=rows)])
    with pm.Model() as model:
        p = pm.Dirichlet("p", a=np.ones((rows, k)))
        pm.Multinomial("y", n=n, p=p, observed=counts)
    a = 1.0 + counts
    a0 = a.sum(axis=1, keepdims=True)
    return model, {"p": (a / a0, a * (a0 - a) / (a0**2 * (a0 + 1.0)))}


SMALL_MODELS = {
    "simple_model": simple_model,
    "multidimensional_model": multidimensional_model,
    "simple_2model_continuous": simple_2model_continuous,
    "non_normal": non_normal,
}
