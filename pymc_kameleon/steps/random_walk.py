"""RandomWalkStep: exact (pseudo-marginal) preconditioned random-walk Metropolis."""

from __future__ import annotations

import numpy as np

from ..adaptation import check_robbins_monro
from ..adaptation.warmup import AffineMap
from .base import BaseKernelStep

__all__ = ["RandomWalkStep"]


class RandomWalkStep(BaseKernelStep):
    r"""Random-walk Metropolis ``x* = x + scale * L eps`` that stores the current log density.

    The baseline the kernel samplers are compared with (the papers' "standard Metropolis"),
    and an *exact* sampler for likelihood estimators: unlike ``pm.Metropolis``, it evaluates
    the model once per iteration, at the proposal, and keeps the current value
    (pseudo-marginal MCMC).

    It is the warm-up kernel of every step
    (:class:`~pymc_kameleon.adaptation.warmup_kernel.WarmupKernel`), kept to the end: ``L``
    and ``scale`` adapt for the whole tuning phase and are frozen when it ends
    (``docs/algorithms/random_walk.md``).

    Parameters
    ----------
    vars : list of PyMC variables, optional
        Continuous variables to sample jointly (default: all continuous ones).
    scale : float, optional
        Initial scale (in units of ``L``); default ``2.38 / sqrt(d)``.
    cov : array, optional
        Initial proposal shape ``L L^T``, a symmetric positive-definite ``(d, d)`` matrix
        (default identity; a given one replaces the Laplace start's covariance, unless
        ``laplace=True``).  With ``adapt_scale=False`` it is kept exactly, with ``scale``,
        for the whole run.
    target_accept : float, optional
        Default ``0.234 + 0.206 / d``: 0.44 in 1-d, 0.234 as ``d`` grows (Roberts and
        Rosenthal, 2001).
    adapt_scale : bool, default True
        Adapt ``scale`` and ``L`` during tuning.
    adapt_exponent : float, default 0.6
    delayed_rejection : float, optional
        Factor ``f`` in ``(0, 1)`` of a second, smaller proposal after a rejection
        (delayed rejection, [5]_ [6]_ [7]_; e.g. 0.2; default None: off), accepted with the
        Tierney-Mira probability; exact also for likelihood estimators.  The stats
        ``dr_proposals`` and ``dr_accepted`` count the second stages of each draw.
    scale_mixture : tuple of float, optional
        ``(p, f)``: with probability ``p`` an iteration proposes with the scale ``f scale``
        instead (a symmetric mixture of two Gaussians, plain Metropolis ratio, one
        evaluation; default None: off).  The scale adapts on the iterations with the full
        scale only.  Not together with ``delayed_rejection``.
    n_steps, max_work_factor, warmup_draws, tune_draws, laplace, on_error, callback, logp_wrapper
        See :class:`~pymc_kameleon.steps.base.BaseKernelStep`.
    model, rng, initial_point, compile_kwargs, blocked
        As for every PyMC step method.

    References
    ----------
    .. [1] Andrieu, C., Roberts, G. O. (2009). The pseudo-marginal approach for efficient
       Monte Carlo computations. Annals of Statistics 37(2).
    .. [2] Gelman, A., Roberts, G. O., Gilks, W. R. (1996). Efficient Metropolis jumping
       rules. Bayesian Statistics 5.
    .. [3] Haario, H., Saksman, E., Tamminen, J. (2001). An adaptive Metropolis algorithm.
       Bernoulli 7(2).
    .. [4] Roberts, G. O., Rosenthal, J. S. (2001). Optimal scaling for various
       Metropolis-Hastings algorithms. Statistical Science 16(4).
    .. [5] Tierney, L., Mira, A. (1999). Some adaptive Monte Carlo methods for Bayesian
       inference. Statistics in Medicine 18.
    .. [6] Green, P. J., Mira, A. (2001). Delayed rejection in reversible jump
       Metropolis-Hastings. Biometrika 88(4).
    .. [7] Haario, H., Laine, M., Mira, A., Saksman, E. (2006). DRAM: efficient adaptive
       MCMC. Statistics and Computing 16.
    """

    name = "random_walk"
    stats_dtypes_shapes = {**BaseKernelStep.stats_dtypes_shapes, "scaling": (np.float64, []),
                           "dr_proposals": (np.int64, []), "dr_accepted": (np.int64, [])}
    progress_columns = (("accept", "Accept"), ("scaling", "Scaling"))

    def __init__(
        self,
        vars=None,
        *,
        scale: float | None = None,
        cov: np.ndarray | None = None,
        target_accept: float | None = None,
        adapt_scale: bool = True,
        adapt_exponent: float = 0.6,
        delayed_rejection: float | None = None,
        scale_mixture: tuple[float, float] | None = None,
        **kwargs,
    ):
        if scale is not None and not (np.isfinite(scale) and scale > 0):
            raise ValueError(f"scale must be a positive number, got {scale!r}")
        self.delayed_rejection = _check_factor(delayed_rejection, "delayed_rejection")
        self.scale_mixture = None
        if scale_mixture is not None:
            if delayed_rejection is not None:
                raise ValueError("give delayed_rejection or scale_mixture, not both")
            prob, factor = scale_mixture
            if not 0.0 < prob < 1.0:
                raise ValueError(f"scale_mixture's probability must be in (0, 1), got {prob!r}")
            self.scale_mixture = (float(prob), _check_factor(factor, "scale_mixture's factor"))
        check_robbins_monro(target=target_accept, exponent=adapt_exponent)
        self.initial_scale = None if scale is None else float(scale)
        self.target_accept = None if target_accept is None else float(target_accept)
        self.adapt_scale = bool(adapt_scale)
        self.adapt_exponent = float(adapt_exponent)
        cov = None if cov is None else np.asarray(cov, dtype=float)
        options = {"scale": self.initial_scale, "cov": cov, "exponent": self.adapt_exponent,
                   "adapt": self.adapt_scale, "delayed_rejection": self.delayed_rejection,
                   "scale_mixture": self.scale_mixture}
        if self.target_accept is not None:
            options["target"] = self.target_accept
        super().__init__(vars, warmup_options=options, **kwargs)
        if cov is not None and cov.shape != (self.dim, self.dim):
            raise ValueError(f"cov must have shape ({self.dim}, {self.dim}), got {cov.shape}")
        if cov is not None:
            _check_covariance(cov)
            AffineMap.from_cov(np.zeros(self.dim), cov)



def _check_factor(factor: float | None, name: str) -> float | None:
    """``factor`` as a float in ``(0, 1)`` (None passes); ``ValueError`` otherwise."""
    if factor is None:
        return None
    if not 0.0 < factor < 1.0:
        raise ValueError(f"{name} must be a factor in (0, 1), got {factor!r}")
    return float(factor)


def _check_covariance(cov: np.ndarray) -> None:
    """``ValueError`` unless ``cov`` is a finite, symmetric, positive-definite matrix."""
    ok = bool(np.all(np.isfinite(cov))) and np.allclose(cov, cov.T, rtol=1e-10, atol=0.0)
    if ok:
        try:
            np.linalg.cholesky(cov)
        except np.linalg.LinAlgError:
            ok = False
    if not ok:
        raise ValueError(f"cov must be a finite, symmetric, positive-definite matrix, got "
                         f"{cov!r}")
