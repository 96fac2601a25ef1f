"""A pharmacokinetic ODE: one oral dose, first-order absorption, Michaelis-Menten elimination.

:func:`pk_model` solves the ODE with ``odeint`` inside an Op without gradient (a black box);
:func:`pk_model_differentiable`, the same posterior for the NUTS reference, solves it by
fixed-step RK4 together with its forward sensitivities.
"""

from __future__ import annotations

import math
import warnings

import numba
import numpy as np
import pymc as pm
import pytensor.tensor as pt
from pytensor.gradient import grad_not_implemented
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op
from scipy.integrate import odeint

__all__ = [
    "PKOp",
    "PKSensitivityOp",
    "PK_CONC",
    "PK_DOSE",
    "PK_RK4_STEPS",
    "PK_SEED",
    "PK_TIMES",
    "PK_TRUE",
    "PK_VOLUME",
    "pk_model",
    "pk_model_differentiable",
    "pk_simulate",
    "solve_pk",
    "solve_pk_sensitivities",
]

#: One oral dose (mg) into a fixed volume of distribution (L): the plasma concentration
#: obeys ``dC/dt = ka (PK_DOSE / PK_VOLUME) exp(-ka t) - Vm C / (Km + C)``, ``C(0) = 0``
#: (the gut compartment's first-order absorption solved in closed form).
PK_DOSE, PK_VOLUME = 100.0, 10.0
#: The twelve sampling times (h) after the dose.
PK_TIMES = np.array([0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 10.0, 12.0, 16.0])
#: The true ``(ka [1/h], Vm [mg/L/h], Km [mg/L], sigma)`` the data were simulated with: the
#: peak concentration (about 6 mg/L) stays far below Km, so the data pin Vm / Km (the
#: linear clearance, 0.3 / h) and Km only weakly from below.
PK_TRUE = np.array([1.0, 9.0, 30.0, 0.1])
#: Concentrations (mg/L) at :data:`PK_TIMES`: the solution at :data:`PK_TRUE` times
#: ``exp(N(0, 0.1))`` noise, ``np.random.default_rng(20261126)``, rounded to 4 digits
#: (``pk_simulate()`` recomputes them; a test checks it).
PK_CONC = np.array([2.0533, 3.5618, 5.9711, 7.0671, 5.4263, 5.6507, 5.567, 3.0747, 1.3684,
                    1.022, 0.4786, 0.1412])
PK_SEED = 20261126
#: Tolerances of the black box's ``odeint``: it and the reference's RK4 agree to ~1e-9
#: relative, their log densities to ~1e-6 (tests/test_suite_models.py).
_PK_TOL = {"rtol": 1e-10, "atol": 1e-14, "mxstep": 20000}


def _pk_rhs(c: np.ndarray, t: float, ka: float, vm: float, km: float) -> list[float]:
    conc = float(c[0])
    return [ka * PK_DOSE / PK_VOLUME * math.exp(-ka * t) - vm * conc / (km + conc)]


def _pk_odeint(rhs, y0: np.ndarray, log_theta: np.ndarray) -> np.ndarray | None:
    times = np.concatenate([[0.0], PK_TIMES])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sol, info = odeint(rhs, y0, times, args=tuple(float(v) for v in np.exp(log_theta)),
                           full_output=True, **_PK_TOL)
    if info["message"] != "Integration successful." or not np.all(np.isfinite(sol)):
        return None
    return sol[1:]


def solve_pk(log_theta: np.ndarray) -> np.ndarray:
    """Concentrations at :data:`PK_TIMES` from ``log (ka, Vm, Km)``; ``+inf`` where the
    solver fails or the right-hand side is undefined.

    ``Km`` underflows to 0 below ``log Km = -745``, where ``Vm C / (Km + C)`` at ``C(0) = 0``
    is 0 / 0 (pm.Slice on pk stopped there).  ``+inf`` makes the log likelihood ``-inf``:
    zero density, as for :func:`solve_hare_lynx`, which every sampler rejects (pm.Slice
    accepts a NaN: its comparisons with NaN are false).  Measured in
    docs/benchmarks/suite.md, "pm.sample_smc on hare-lynx and gp-poisson".
    """
    try:
        sol = _pk_odeint(_pk_rhs, np.zeros(1), log_theta)
    except ArithmeticError:  # ZeroDivisionError, OverflowError in the right-hand side
        sol = None
    return np.full(PK_TIMES.size, np.inf) if sol is None else np.maximum(sol[:, 0], 1e-300)


#: Steps of the reference's RK4 per quarter hour (every sampling time is a multiple of it).
PK_RK4_STEPS = 40


@numba.njit(cache=True)
def _pk_sens_rhs(t, c, s_ka, s_vm, s_km, ka, vm, km):
    """``C' = f`` and the forward sensitivities ``S_j = dC / dlog(theta_j)``,
    ``theta = (ka, Vm, Km)``: ``S' = (df/dC) S + df/dlog(theta)``."""
    denom = km + c
    source = ka * PK_DOSE / PK_VOLUME * math.exp(-ka * t)
    dfdc = -vm * km / denom**2
    return (source - vm * c / denom, dfdc * s_ka + source * (1.0 - ka * t),
            dfdc * s_vm - vm * c / denom, dfdc * s_km + vm * c * km / denom**2)


@numba.njit(cache=True)
def _pk_rk4(theta, times, steps_per_quarter):
    ka, vm, km = theta[0], theta[1], theta[2]
    h = 0.25 / steps_per_quarter
    y0 = y1 = y2 = y3 = 0.0
    out = np.empty((times.size, 4))
    step = 0
    for i in range(times.size):
        n_to = int(round(times[i] / h))
        while step < n_to:
            t = step * h
            a0, a1, a2, a3 = _pk_sens_rhs(t, y0, y1, y2, y3, ka, vm, km)
            b0, b1, b2, b3 = _pk_sens_rhs(t + 0.5 * h, y0 + 0.5 * h * a0, y1 + 0.5 * h * a1,
                                          y2 + 0.5 * h * a2, y3 + 0.5 * h * a3, ka, vm, km)
            c0, c1, c2, c3 = _pk_sens_rhs(t + 0.5 * h, y0 + 0.5 * h * b0, y1 + 0.5 * h * b1,
                                          y2 + 0.5 * h * b2, y3 + 0.5 * h * b3, ka, vm, km)
            d0, d1, d2, d3 = _pk_sens_rhs(t + h, y0 + h * c0, y1 + h * c1, y2 + h * c2,
                                          y3 + h * c3, ka, vm, km)
            y0 += h / 6.0 * (a0 + 2.0 * b0 + 2.0 * c0 + d0)
            y1 += h / 6.0 * (a1 + 2.0 * b1 + 2.0 * c1 + d1)
            y2 += h / 6.0 * (a2 + 2.0 * b2 + 2.0 * c2 + d2)
            y3 += h / 6.0 * (a3 + 2.0 * b3 + 2.0 * c3 + d3)
            step += 1
        out[i, 0], out[i, 1], out[i, 2], out[i, 3] = y0, y1, y2, y3
    return out


def solve_pk_sensitivities(log_theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Concentrations ``(12,)`` and their Jacobian ``(12, 3)`` in ``log (ka, Vm, Km)`` by
    fixed-step RK4 (:data:`PK_RK4_STEPS`) of the ODE and its sensitivity equations.

    An explicit Runge-Kutta method applied to the augmented system gives the exact
    derivative of its own solution, so NUTS sees a consistent gradient.
    """
    sol = _pk_rk4(np.exp(np.asarray(log_theta, dtype=float)), PK_TIMES, PK_RK4_STEPS)
    if not np.all(np.isfinite(sol)):
        return np.full(PK_TIMES.size, np.nan), np.full((PK_TIMES.size, 3), np.nan)
    return np.maximum(sol[:, 0], 1e-300), sol[:, 1:]


def pk_simulate() -> np.ndarray:
    """The data of :data:`.PK_CONC`, recomputed from :data:`PK_TRUE` and :data:`PK_SEED`."""
    clean = solve_pk(np.log(PK_TRUE[:3]))
    noise = np.random.default_rng(PK_SEED).normal(0.0, PK_TRUE[3], PK_TIMES.size)
    return np.round(clean * np.exp(noise), 4)


class PKOp(Op):
    """``log (ka, Vm, Km) -> concentrations (12,)`` by ``odeint``; no gradient."""

    __props__ = ()

    def make_node(self, log_theta) -> Apply:
        return Apply(self, [pt.as_tensor_variable(log_theta)], [pt.dvector()])

    def perform(self, node, inputs, output_storage) -> None:
        output_storage[0][0] = solve_pk(inputs[0])

    def grad(self, inputs, output_gradients):
        return [grad_not_implemented(self, 0, inputs[0], "odeint black box: no gradient")]


class PKSensitivityOp(Op):
    """``log (ka, Vm, Km) -> (concentrations (12,), Jacobian (12, 3))`` from one solve of
    the forward sensitivity equations; the gradient of the concentrations is ``J^T g``."""

    __props__ = ()

    def make_node(self, log_theta) -> Apply:
        return Apply(self, [pt.as_tensor_variable(log_theta)], [pt.dvector(), pt.dmatrix()])

    def perform(self, node, inputs, output_storage) -> None:
        conc, jac = solve_pk_sensitivities(inputs[0])
        output_storage[0][0], output_storage[1][0] = conc, jac

    def grad(self, inputs, output_gradients):
        from pytensor.gradient import DisconnectedType

        g_conc, g_jac = output_gradients
        if not isinstance(g_jac.type, DisconnectedType):
            raise NotImplementedError("second derivatives of the PK solution")
        _, jac = self(inputs[0])  # merged with the forward node: one solve
        return [pt.dot(g_conc, jac)]

    def connection_pattern(self, node):
        return [[True, True]]


_PK_PRIOR = {"log_ka": (0.0, 1.0), "log_Vm": (np.log(10.0), 1.5),
             "log_Km": (np.log(10.0), 1.5), "log_sigma": (np.log(0.1), 0.5)}


def _pk(differentiable: bool) -> pm.Model:
    with pm.Model() as model:
        params = {name: pm.Normal(name, mu, sd) for name, (mu, sd) in _PK_PRIOR.items()}
        log_theta = pt.stack([params["log_ka"], params["log_Vm"], params["log_Km"]])
        conc = PKSensitivityOp()(log_theta)[0] if differentiable else PKOp()(log_theta)
        pm.Normal("log_conc", mu=pt.log(conc), sigma=pt.exp(params["log_sigma"]),
                  observed=np.log(PK_CONC))
    return model


def pk_model() -> pm.Model:
    """One-compartment PK with first-order absorption and Michaelis-Menten elimination,
    fitted to :data:`.PK_CONC` (d = 4, everything on the log scale, black-box ``odeint``).

    ``log ka ~ N(0, 1)``, ``log Vm, log Km ~ N(log 10, 1.5)``, ``log sigma ~ N(log 0.1,
    0.5)``; ``log C_obs ~ N(log C(t), sigma)``.  The concentrations stay below Km, so the
    posterior runs out along a long arm where Km and Vm grow together at fixed Vm / Km and
    bends where the elimination's saturation starts to show.
    """
    return _pk(differentiable=False)


def pk_model_differentiable() -> pm.Model:
    """The same posterior with the ODE's gradient from forward sensitivities (for NUTS)."""
    return _pk(differentiable=True)
