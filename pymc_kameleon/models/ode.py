"""A black-box ODE model: Lotka-Volterra solved by SciPy's ``odeint`` inside an Op.

The Op has no gradient (as when a user wraps a legacy simulator), so NUTS cannot run on the
model and PyMC assigns gradient-free steps.  One evaluation solves the ODE on a grid of 21
times, which makes this one of the suite's *expensive* models (cost per evaluation in
``docs/benchmarks/suite.md``): the log-density evaluation, not the sampler's bookkeeping,
dominates the cost.
"""

from __future__ import annotations

import warnings
from functools import lru_cache

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.gradient import grad_not_implemented
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from scipy.integrate import odeint

__all__ = [
    "LV_TIMES",
    "LV_TRUE",
    "LV_Y0",
    "LotkaVolterraOp",
    "lotka_volterra_data",
    "lotka_volterra_model",
    "lotka_volterra_rhs",
    "solve_lotka_volterra",
]

#: Observation times (the first one is the fixed initial condition, not observed).
LV_TIMES = np.linspace(0.0, 20.0, 21)
#: Initial prey and predator populations (known).
LV_Y0 = np.array([33.0, 6.0])
#: Parameters the data are simulated with: alpha, beta, gamma, delta.
LV_TRUE = np.array([0.55, 0.028, 0.84, 0.026])
#: Standard deviation of the log-normal observation noise of the simulated data.
LV_NOISE = 0.2


def lotka_volterra_rhs(y: np.ndarray, t: float, alpha: float, beta: float, gamma: float,
                       delta: float) -> list[float]:
    """Lotka-Volterra's ``dy/dt`` for ``y = (prey, predators)``, in ``odeint``'s signature."""
    prey, pred = y
    return [alpha * prey - beta * prey * pred, delta * prey * pred - gamma * pred]


def solve_lotka_volterra(theta: np.ndarray) -> np.ndarray:
    """Populations at :data:`LV_TIMES[1:]`, shape ``(20, 2)``; NaN where ``odeint`` fails."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sol, info = odeint(lotka_volterra_rhs, LV_Y0, LV_TIMES, args=tuple(float(v) for v in theta),
                           rtol=1e-6, atol=1e-8, mxstep=5000, full_output=True)
    sol = sol[1:]
    if info["message"] != "Integration successful." or not np.all(np.isfinite(sol)):
        return np.full((LV_TIMES.size - 1, 2), np.nan)
    return np.maximum(sol, 1e-10)


class LotkaVolterraOp(Op):
    """``theta = (alpha, beta, gamma, delta) -> populations (20, 2)``; no gradient.

    Examples
    --------
    >>> import pytensor
    >>> theta = pt.dvector("theta")
    >>> f = pytensor.function([theta], LotkaVolterraOp()(theta))
    >>> f(LV_TRUE).shape
    (20, 2)
    """

    __props__ = ()

    def make_node(self, theta) -> Apply:
        theta = pt.as_tensor_variable(theta)
        if theta.ndim != 1:
            raise ValueError("LotkaVolterraOp takes a vector of 4 parameters")
        return Apply(self, [theta], [pt.dmatrix()])

    def perform(self, node, inputs, output_storage) -> None:
        output_storage[0][0] = solve_lotka_volterra(inputs[0])

    def grad(self, inputs, output_gradients):
        return [grad_not_implemented(self, 0, inputs[0], "odeint black box: no gradient")]


@lru_cache(maxsize=1)
def lotka_volterra_data() -> np.ndarray:
    """Simulated noisy populations at :data:`LV_TIMES[1:]` (fixed seed), shape ``(20, 2)``."""
    rng = np.random.default_rng(19260101)
    clean = solve_lotka_volterra(LV_TRUE)
    return clean * np.exp(rng.normal(0.0, LV_NOISE, size=clean.shape))


def lotka_volterra_model() -> pm.Model:
    """Lotka-Volterra posterior with log-normal noise; 5 positive parameters.

    ``alpha, gamma ~ LogNormal(log 0.7, 0.5)``, ``beta, delta ~ LogNormal(log 0.03, 0.5)``,
    ``sigma ~ HalfNormal(0.5)``; ``log y_t ~ N(log u_t(theta), sigma)`` for both species.
    """
    data = lotka_volterra_data()
    with pm.Model() as model:
        alpha = pm.LogNormal("alpha", np.log(0.7), 0.5)
        beta = pm.LogNormal("beta", np.log(0.03), 0.5)
        gamma = pm.LogNormal("gamma", np.log(0.7), 0.5)
        delta = pm.LogNormal("delta", np.log(0.03), 0.5)
        sigma = pm.HalfNormal("sigma", 0.5)
        solution = LotkaVolterraOp()(pt.stack([alpha, beta, gamma, delta]))
        pm.Normal("log_obs", mu=pt.log(solution), sigma=sigma, observed=np.log(data))
    return model
