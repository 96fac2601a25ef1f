"""The predator-prey equations fitted to the Hudson's Bay Company hare and lynx pelts.

The Lotka-Volterra equations of :mod:`pymc_kameleon.models.ode` with unknown initial states,
solved by ``odeint`` inside an Op without gradient (a black box).

References
----------
- B. Carpenter, "Predator-prey population dynamics: the Lotka-Volterra model in Stan",
  Stan case study.
"""

from __future__ import annotations

import warnings

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.gradient import grad_not_implemented
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from scipy.integrate import odeint

from ..ode import lotka_volterra_rhs  # the same equations, initial state free

__all__ = ["HARE_LYNX", "HARE_LYNX_START", "HareLynxOp", "hare_lynx_model", "solve_hare_lynx"]

#: Hudson's Bay Company pelts (thousands), 1900-1920: year, hares, lynxes (public data, as
#: used in Carpenter's Stan case study "Predator-prey population dynamics").
HARE_LYNX = np.array([
    [1900, 30.0, 4.0], [1901, 47.2, 6.1], [1902, 70.2, 9.8], [1903, 77.4, 35.2],
    [1904, 36.3, 59.4], [1905, 20.6, 41.7], [1906, 18.1, 19.0], [1907, 21.4, 13.0],
    [1908, 22.0, 8.3], [1909, 25.4, 9.1], [1910, 27.1, 7.4], [1911, 40.3, 8.0],
    [1912, 57.0, 12.3], [1913, 76.6, 19.5], [1914, 52.3, 45.7], [1915, 19.5, 51.1],
    [1916, 11.2, 29.7], [1917, 7.6, 15.8], [1918, 14.6, 9.7], [1919, 16.2, 10.1],
    [1920, 24.7, 8.6],
])


def solve_hare_lynx(params: np.ndarray) -> np.ndarray:
    """Populations at the 21 years from ``(alpha, beta, gamma, delta, z0_prey, z0_pred)``,
    shape ``(21, 2)``; ``+inf`` where the solver fails.

    The solver fails on wild cycles whose predators crash below its absolute tolerance
    (2 of chain 4's 2000 prior draws in ``pm.sample_smc(random_seed=1)``).  ``+inf`` makes
    the log likelihood ``-inf`` there: zero density, the target the MCMC steps already had
    (they reject a NaN as they do ``-inf``), where a NaN stopped pm.sample_smc's tempering
    (docs/benchmarks/suite.md, "pm.sample_smc on hare-lynx and gp-poisson").
    """
    times = HARE_LYNX[:, 0] - HARE_LYNX[0, 0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sol, info = odeint(lotka_volterra_rhs, params[4:6], times,
                           args=tuple(float(v) for v in params[:4]),
                           rtol=1e-6, atol=1e-6, mxstep=5000, full_output=True)
    if info["message"] != "Integration successful." or not np.all(np.isfinite(sol)):
        return np.full((times.size, 2), np.inf)
    return np.maximum(sol, 1e-10)


class HareLynxOp(Op):
    """``(alpha, beta, gamma, delta, z0_prey, z0_pred) -> populations (21, 2)``; no gradient."""

    __props__ = ()

    def make_node(self, params) -> Apply:
        params = pt.as_tensor_variable(params)
        return Apply(self, [params], [pt.dmatrix()])

    def perform(self, node, inputs, output_storage) -> None:
        output_storage[0][0] = solve_hare_lynx(inputs[0])

    def grad(self, inputs, output_gradients):
        return [grad_not_implemented(self, 0, inputs[0], "odeint black box: no gradient")]


def hare_lynx_model() -> pm.Model:
    """Lotka-Volterra fitted to :data:`.HARE_LYNX` with unknown initial states (d = 8).

    Priors as in the Stan case study: ``alpha, gamma ~ N+(1, 0.5)``, ``beta, delta ~
    N+(0.05, 0.05)``, initial states ``~ LogNormal(log 10, 1)``, noise sds ``~
    LogNormal(-1, 1)``; ``log y_t ~ N(log z_t, sigma)`` per species, the first year
    included (it observes the initial state).
    """
    with pm.Model() as model:
        rates = pm.TruncatedNormal("rates", mu=[1.0, 0.05, 1.0, 0.05],
                                   sigma=[0.5, 0.05, 0.5, 0.05], lower=0.0, shape=4)
        z0 = pm.LogNormal("z0", np.log(10.0), 1.0, shape=2)
        sigma = pm.LogNormal("sigma", -1.0, 1.0, shape=2)
        z = HareLynxOp()(pt.concatenate([rates, z0]))
        pm.Normal("log_pelts", mu=pt.log(z), sigma=sigma, observed=np.log(HARE_LYNX[:, 1:]))
    return model


#: Where the hare-lynx reference chains start: the global mode's neighbourhood (the Stan
#: case study's posterior means), so that no reference chain sits in the local mode.
HARE_LYNX_START = {"rates": np.array([0.55, 0.028, 0.80, 0.024]),
                   "z0": np.array([33.9, 5.9]), "sigma": np.array([0.25, 0.25])}
