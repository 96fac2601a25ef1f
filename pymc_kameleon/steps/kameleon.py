"""KameleonStep: Kernel Adaptive Metropolis-Hastings (MCMC Kameleon) for PyMC."""

from __future__ import annotations

import numpy as np

from ..adaptation import GeometricSchedule
from ..adaptation.kameleon import KameleonAdaptation, KameleonAdaptState
from .local_gaussian import LocalGaussianStep

__all__ = ["KameleonAdaptState", "KameleonStep"]


class KameleonStep(LocalGaussianStep):
    r"""MCMC Kameleon: Metropolis-Hastings with a kernel-adaptive Gaussian proposal.

    The proposal at the current point ``y`` is

    .. math:: q_z(\cdot \mid y) = N(y,\ \gamma^2 I + \nu^2 M_{z,y} H M_{z,y}^\top),
       \qquad M_{z,y} = \tfrac{2}{s^2}\,[k(y, z_i)(z_i - y)]_{i=1}^n,

    with a Gaussian kernel of bandwidth ``s`` on a random subsample ``z`` of the chain
    history and the centring matrix ``H``.  It follows the local, non-linear shape of the
    target and falls back to ``N(y, gamma^2 I)`` far from the history.  Only the model's log
    density is used (never its gradient), once per iteration, and the value at the current
    point is stored, so likelihood *estimators* (pseudo-marginal MCMC) give exact chains.

    While PyMC tunes, a reservoir subsample of the history, the bandwidth, ``nu^2`` and
    ``gamma`` adapt; ``stop_tuning()`` freezes them, so the draws come from one fixed
    Metropolis-Hastings kernel.  The schedule, the trials and the fallbacks are on the
    algorithm's page, ``docs/algorithms/kamh.md``.

    Parameters
    ----------
    vars : list of PyMC variables, optional
        Continuous variables to sample jointly (default: all continuous ones).
    n_history : int, default 1000
        Size ``n`` of the history subsample (the paper's value).
    gamma : float or sequence of float, optional
        Standard deviation of the isotropic exploration term, in the whitened coordinates
        of the warm-up.  A number fixes it.  Default: the best of
        ``(0.1, 0.3, 1.0) * 2.38 / sqrt(d)`` (a sequence: of its values) by trials over the
        first quarter of the tuning draws
        (:class:`~pymc_kameleon.adaptation.TrialSelection`); the stat ``gamma`` reports
        the value in use.
    nu2 : float, optional
        Initial ``nu^2``.  Default: ``(2.38^2 / (2 d)) s^4 / n``, which makes the adaptive
        part about the optimal random-walk covariance on a Gaussian target.
    bandwidth : float, optional
        Fixed Gaussian kernel bandwidth ``s``; default: median heuristic (median pairwise
        distance of the distinct subsample points), recomputed at each refresh.
    target_accept : float, default 0.234
        Target acceptance probability of the Robbins-Monro recursion.
    adapt_scale : bool, default True
        Adapt ``nu^2`` during tuning.
    adapt_exponent : float, default 0.6
        ``c`` of the Robbins-Monro gains ``t^-c``, in ``(0.5, 1]``.
    subsample_schedule : GeometricSchedule, optional
        Iterations (counted from the start of tuning) at which the subsample is refreshed.
    tail_weight : float, default 0
        ``beta >= 0``: the history subsample keeps each tuning position with weight
        ``p(x)^-beta`` instead of uniformly, so that rarely visited regions (a funnel's
        neck, a curved tail) hold more of its points; ``beta = 1`` spreads them evenly.
    adaptation_class : type, default KameleonAdaptation
        The kernel built from the parameters above (a subclass changes a rule).
    n_steps, max_work_factor, warmup_draws, tune_draws, laplace, on_error, callback, logp_wrapper
        See :class:`~pymc_kameleon.steps.base.BaseKernelStep`.
    model, rng, initial_point, compile_kwargs, blocked
        As for every PyMC step method.

    References
    ----------
    .. [1] Sejdinovic, D., Strathmann, H., Lomeli Garcia, M., Andrieu, C., Gretton, A. (2014).
       Kernel Adaptive Metropolis-Hastings. ICML. arXiv:1307.5302.
    """

    name = "kameleon"
    stats_dtypes_shapes = {
        **LocalGaussianStep.stats_dtypes_shapes,
        "n_history": (np.int64, []),
    }

    def __init__(
        self,
        vars=None,
        *,
        n_history: int = 1000,
        nu2: float | None = None,
        subsample_schedule: GeometricSchedule | None = None,
        tail_weight: float = 0.0,
        adaptation_class: type[KameleonAdaptation] = KameleonAdaptation,
        **kwargs,
    ):
        # gamma, bandwidth, target_accept, adapt_scale, adapt_exponent: LocalGaussianStep
        super().__init__(
            vars, adaptation_class=adaptation_class,
            kernel_kwargs=dict(n_history=n_history, nu2=nu2, tail_weight=tail_weight,
                               subsample_schedule=subsample_schedule),
            **kwargs)

    n_history = property(lambda self: self.adaptation.n_history)
    tail_weight = property(lambda self: self.adaptation.tail_weight)
