"""KernelHMCStep: gradient-free kernel Hamiltonian Monte Carlo (KMC lite and finite)."""

from __future__ import annotations

import warnings
from typing import Literal

import numpy as np

from ..adaptation import GeometricSchedule
from ..adaptation.kernel_hmc import KernelHMCAdaptation, Surrogate
from .base import BaseKernelStep

__all__ = ["KernelHMCStep", "Surrogate"]


class KernelHMCStep(BaseKernelStep):
    r"""Kernel Hamiltonian Monte Carlo: HMC whose gradient comes from a kernel surrogate.

    A surrogate log density ``f`` is fitted to the chain history by score matching, and
    Hamiltonian trajectories follow ``grad f`` instead of the (unavailable) gradient of the
    target.  Only the accept step touches the model, once per iteration, with the true log
    density and the kinetic energy:

    .. math:: A = \min\{1, \exp(\log\pi(q^*) - \log\pi(q) - |p^*|^2/2 + |p|^2/2)\}.

    The leapfrog map is reversible and volume preserving for any gradient field, so the
    chain is exact whatever the surrogate (estimated likelihoods included); its quality
    only affects acceptance.  While PyMC tunes, the step starts as a random walk, then fits,
    cross-validates, tries out and reviews surrogates and adapts the step size
    (:class:`~pymc_kameleon.adaptation.kernel_hmc.KernelHMCAdaptation`); ``stop_tuning()``
    freezes all of it.  How and why: ``docs/algorithms/kernel_hmc.md``.

    Parameters
    ----------
    vars : list of PyMC variables, optional
        Continuous variables to sample jointly (default: all continuous ones).
    surrogate : {"finite", "lite"}, default "finite"
        Random Fourier features learned online from every tuning point, or kernel functions
        on the history refitted on a schedule (safer from a start far from the mass).
    n_history, n_features, n_cv : int, default 1000, 200, 300
        History reservoir size, random features (finite), cross-validation points.
    n_leapfrog : tuple of int, default (10, 50)
        Inclusive range of the number of leapfrog steps ``L``.
    step_size, step_size_jitter, target_accept : float, default 0.1, 0.5, 0.65
        Initial step size, relative half-width of its uniform jitter (in ``[0, 1)``) and
        acceptance target of its adaptation.
    bandwidth, lam : float, optional
        Fix the kernel bandwidth ``s`` (``k = exp(-|x-y|^2 / (2 s^2))``) and/or the
        regularisation; the other is cross-validated.
    adapt_step_size, adapt_exponent : bool, float, default True, 0.6
        Adapt the step size while tuning; Robbins-Monro gain exponent.
    schedule : GeometricSchedule, optional
        Tuning iterations of the refits (and cross-validations).
    ard : bool, optional
        Per-coordinate kernel lengths (finite only; default on when ``2 <= d <= 16`` and no
        ``bandwidth`` is given).
    random_walk_fraction : float, default 0.1
        Share of random-walk iterations after tuning (0: none).
    max_jump : float, optional
        Trajectories ending farther than this (whitened sds) are rejected unevaluated
        (stat ``n_diverged``); default ``10 (1 + sqrt(d))``, ``inf``: no bound.
    adaptation_class : type, default KernelHMCAdaptation
        The kernel built from the parameters above (a subclass changes a rule).
    n_steps, max_work_factor, warmup_draws, tune_draws, laplace, on_error, callback, logp_wrapper
        See :class:`~pymc_kameleon.steps.base.BaseKernelStep`.
    model, rng, initial_point, compile_kwargs, blocked
        As for every PyMC step method.

    References
    ----------
    .. [1] Strathmann, H., Sejdinovic, D., Livingstone, S., Szabo, Z., Gretton, A. (2015).
       Gradient-free Hamiltonian Monte Carlo with efficient kernel exponential families.
       NIPS.
    .. [2] Strathmann, H. (2018). Kernel methods for Monte Carlo. PhD thesis, UCL, Ch. 4.
    """

    name = "kernel_hmc"
    stats_dtypes_shapes = {
        **BaseKernelStep.stats_dtypes_shapes,
        "step_size": (np.float64, []),
        "n_leapfrog": (np.int64, []),
        "bandwidth": (np.float64, []),
        "kernel_sigma": (np.float64, []),
        "lambda": (np.float64, []),
        "surrogate": (np.int64, []),
        "n_diverged": (np.int64, []),
    }
    progress_columns = (("accept", "Accept"), ("step_size", "Step size"))

    def __init__(
        self,
        vars=None,
        *,
        surrogate: Literal["lite", "finite"] = "finite",
        n_history: int = 1000,
        n_features: int = 200,
        n_leapfrog: tuple[int, int] = (10, 50),
        step_size: float = 0.1,
        step_size_jitter: float = 0.5,
        target_accept: float = 0.65,
        bandwidth: float | None = None,
        lam: float | None = None,
        n_cv: int = 300,
        adapt_step_size: bool = True,
        adapt_exponent: float = 0.6,
        schedule: GeometricSchedule | None = None,
        ard: bool | None = None,
        random_walk_fraction: float = 0.1,
        max_jump: float | None = None,
        adaptation_class: type[KernelHMCAdaptation] = KernelHMCAdaptation,
        **kwargs,
    ):
        adaptation = adaptation_class(
            surrogate=surrogate, n_history=n_history, n_features=n_features,
            n_leapfrog=n_leapfrog, step_size=step_size, step_size_jitter=step_size_jitter,
            target_accept=target_accept, bandwidth=bandwidth, lam=lam, n_cv=n_cv,
            adapt_step_size=adapt_step_size, adapt_exponent=adapt_exponent,
            schedule=schedule, ard=ard, random_walk_fraction=random_walk_fraction,
            max_jump=max_jump)
        # the warm-up's draws are discarded: max(2, d) iterations per draw, not max(5, d)
        super().__init__(vars, adaptation=adaptation, warmup_options={"tuning_min_steps": 2},
                         **kwargs)

    @property
    def max_jump(self) -> float:
        """Longest trajectory evaluated, in whitened posterior sds."""
        return self.adaptation.jump_bound(self.dim)

    @property
    def current_surrogate(self) -> Surrogate:
        """The surrogate in use (``estimator`` None while the step is the random walk): the
        one reported in the stats, and frozen by ``stop_tuning()``."""
        return self.adaptation_state.current

    @property
    def surrogate_on_trial(self) -> Surrogate | None:
        """A refit on trial against the surrogate in use while tuning, else None."""
        trial = self.adaptation_state.trial
        return None if trial is None else trial.surrogate

    def stop_tuning(self) -> None:
        """End tuning; warn when no surrogate beat the random walk (the user asked for
        kernel HMC and gets a random walk)."""
        warn = self.tune and self.phase == "kernel"
        super().stop_tuning()
        if warn and self.current_surrogate.estimator is None:
            warnings.warn(
                f"KernelHMCStep{self.var_names}: no score-matching surrogate beat the random "
                "walk while tuning, so the chain samples as the preconditioned random walk "
                f"({self.n_steps} iterations per draw).  Tune longer, or choose "
                "RandomWalkStep or KameleonStep for this posterior (docs/choosing.md).",
                UserWarning, stacklevel=2)
