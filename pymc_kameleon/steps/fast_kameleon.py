"""FastKameleonStep: F-KAMH, MCMC Kameleon with random Fourier features."""

from __future__ import annotations

from typing import Literal

import numpy as np

from ..adaptation import GeometricSchedule
from ..adaptation.fast_kameleon import (
    TRACE_TOLERANCE,
    FastKameleonAdaptation,
    FastKameleonAdaptState,
    default_n_features,
)
from .local_gaussian import LocalGaussianStep

__all__ = ["FastKameleonAdaptState", "FastKameleonStep", "default_n_features"]


class FastKameleonStep(LocalGaussianStep):
    r"""F-KAMH: MCMC Kameleon with random Fourier features and whole-history covariance.

    The kernel embedding of KAMH is replaced by ``D`` random Fourier features
    ``phi: R^d -> R^D`` of the Gaussian kernel, whose mean and covariance ``C`` over the
    *whole* chain history are kept by Welford updates.  The proposal is

    .. math:: q(\cdot \mid y) = N\big(y,\ \gamma^2 I + \eta^2 J(y)^\top C\, J(y)\big),
       \qquad J(y) = \partial \phi / \partial x \,\big|_{x=y}\ (D \times d),

    and the Metropolis-Hastings ratio uses the reverse density with ``J(x*)``.

    While PyMC tunes, the feature moments, the bandwidth, ``eta^2`` and ``gamma`` adapt;
    ``stop_tuning()`` freezes them.  The low-rank factor of ``C`` the ratio shares, the
    schedule and the costs: ``docs/algorithms/fkamh.md``.

    Parameters
    ----------
    vars : list of PyMC variables, optional
        Continuous variables to sample jointly (default: all continuous ones).
    n_features : int, optional
        Number of random Fourier features ``D``; default :func:`default_n_features`:
        ``50 d`` clipped to ``[200, 500]``.  Too few features give too wide proposals.
    trace_tolerance : float, default 0.03
        Share of the trace of ``C`` its factor may discard; ``0`` keeps the numerical rank.
    embedding : {"sincos", "phase"}, default "sincos"
        ``sqrt(2/D) [sin(w.x), cos(w.x)]`` pairs, or ``sqrt(2/D) cos(w.x + b)``.
    frequencies : {"halton", "orthogonal", "gaussian"}, default "halton"
        How the frequencies are drawn: scrambled Halton [4]_, orthogonal [5]_ or independent
        [3]_ (:func:`~pymc_kameleon.math.rff.standard_frequencies`).
    gamma : float or sequence of float, optional
        Standard deviation of the isotropic exploration term, in whitened units; default:
        chosen by trials while tuning, as for :class:`~pymc_kameleon.KameleonStep`.
    eta2 : float, optional
        Initial ``eta^2``; default ``(2.38^2 / (2 d)) * 4 s^4``.
    bandwidth : float, optional
        Fixed kernel bandwidth; default: median heuristic, refreshed during tuning.
    n_bandwidth : int, default 1000
        Size of the reservoir subsample used for the median heuristic.
    target_accept, adapt_scale, adapt_exponent
        As for :class:`~pymc_kameleon.KameleonStep`.
    schedule : GeometricSchedule, optional
        Tuning iterations at which the bandwidth is refreshed.
    adaptation_class : type, default FastKameleonAdaptation
        The kernel built from the parameters above (a subclass changes a rule, e.g.
        ``bandwidth_tolerance``).
    n_steps, max_work_factor, warmup_draws, tune_draws, laplace, on_error, callback, logp_wrapper
        See :class:`~pymc_kameleon.steps.base.BaseKernelStep`.
    model, rng, initial_point, compile_kwargs, blocked
        As for every PyMC step method.

    References
    ----------
    .. [1] Sejdinovic, D., Strathmann, H., Lomeli Garcia, M., Andrieu, C., Gretton, A. (2014).
       Kernel Adaptive Metropolis-Hastings. ICML.
    .. [2] Kotlicki, A. (2015). Fast Kernel Adaptive Metropolis-Hastings Algorithm. MSc
       dissertation, University of Oxford, Chapter 4 (proposal, Eq. 4.5; running covariance
       estimators, Section 4.1).
    .. [3] Rahimi, A., Recht, B. (2007). Random features for large-scale kernel machines.
       NIPS.
    .. [4] Avron, H., Sindhwani, V., Yang, J., Mahoney, M. W. (2016). Quasi-Monte Carlo
       feature maps for shift-invariant kernels. JMLR 17(120).
    .. [5] Yu, F. X., Suresh, A. T., Choromanski, K., Holtmann-Rice, D., Kumar, S. (2016).
       Orthogonal random features. NIPS.
    """

    name = "fast_kameleon"
    stats_dtypes_shapes = {
        **LocalGaussianStep.stats_dtypes_shapes,
        "n_features": (np.int64, []),
        "n_history": (np.int64, []),
        "feature_rank": (np.int64, []),
    }

    def __init__(
        self,
        vars=None,
        *,
        n_features: int | None = None,
        embedding: Literal["sincos", "phase"] = "sincos",
        frequencies: Literal["gaussian", "orthogonal", "halton"] = "halton",
        eta2: float | None = None,
        n_bandwidth: int = 1000,
        schedule: GeometricSchedule | None = None,
        trace_tolerance: float = TRACE_TOLERANCE,
        adaptation_class: type[FastKameleonAdaptation] = FastKameleonAdaptation,
        **kwargs,
    ):
        # gamma, bandwidth, target_accept, adapt_scale, adapt_exponent: LocalGaussianStep
        super().__init__(
            vars, adaptation_class=adaptation_class,
            kernel_kwargs=dict(n_features=n_features, embedding=embedding,
                               frequencies=frequencies, eta2=eta2, n_bandwidth=n_bandwidth,
                               schedule=schedule, trace_tolerance=trace_tolerance),
            **kwargs)

    embedding = property(lambda self: self.adaptation.embedding)
    frequencies = property(lambda self: self.adaptation.frequencies)
    n_bandwidth = property(lambda self: self.adaptation.n_bandwidth)
    trace_tolerance = property(lambda self: self.adaptation.trace_tolerance)
    bandwidth_tolerance = property(lambda self: self.adaptation.bandwidth_tolerance)

    @property
    def n_features(self) -> int:
        """Number of random Fourier features ``D``."""
        return self.adaptation.features_for(self.dim)
