"""RandomWalkStep: exact (pseudo-marginal) random-walk Metropolis with Robbins-Monro scaling."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..adaptation import RobbinsMonro
from ..math.linalg import safe_cholesky
from .base import BaseKernelStep, ChainState, Proposal

__all__ = ["RandomWalkStep"]


@dataclass
class RandomWalkAdaptState:
    scaler: RobbinsMonro
    t: int = 0  # tuning iterations seen


class RandomWalkStep(BaseKernelStep):
    r"""Random-walk Metropolis ``x* = y + scale * L eps`` that stores the current log density.

    The baseline the kernel samplers are compared with (the papers' "standard Metropolis"),
    and an *exact* sampler for likelihood estimators: unlike ``pm.Metropolis``, it evaluates
    the model once per iteration, at the proposal, and keeps the current value
    (pseudo-marginal MCMC).  ``scale`` follows a Robbins-Monro recursion toward
    ``target_accept`` while PyMC tunes and is frozen afterwards.

    Parameters
    ----------
    vars : list of PyMC variables, optional
        Continuous variables to sample jointly (default: all continuous ones).
    scale : float, optional
        Initial scale; default ``2.38 / sqrt(d)``.
    cov : array, optional
        Shape ``L L^T`` of the proposal covariance (default identity).
    target_accept : float, default 0.234
    adapt_scale : bool, default True
    adapt_exponent : float, default 0.6
    model, rng, initial_point, compile_kwargs, blocked
        As for every PyMC step method.

    References
    ----------
    .. [1] Andrieu, C., Roberts, G. O. (2009). The pseudo-marginal approach for efficient
       Monte Carlo computations. Annals of Statistics 37(2).
    .. [2] Gelman, A., Roberts, G. O., Gilks, W. R. (1996). Efficient Metropolis jumping
       rules. Bayesian Statistics 5.

    Examples
    --------
    >>> import pymc as pm
    >>> from pymc_kameleon import RandomWalkStep
    >>> with pm.Model():
    ...     x = pm.Normal("x", 0.0, 1.0, shape=3)
    ...     idata = pm.sample(draws=300, tune=300, chains=1, step=RandomWalkStep(),
    ...                       random_seed=1, progressbar=False, compute_convergence_checks=False)
    >>> 0.1 < float(idata.sample_stats["accepted"].mean()) < 0.5
    True
    """

    name = "random_walk"
    stats_dtypes_shapes = {**BaseKernelStep.stats_dtypes_shapes, "scaling": (np.float64, [])}
    _progress_columns = (("accept", "Accept"), ("scaling", "Scaling"))

    def __init__(
        self,
        vars=None,
        *,
        scale: float | None = None,
        cov: np.ndarray | None = None,
        target_accept: float = 0.234,
        adapt_scale: bool = True,
        adapt_exponent: float = 0.6,
        model=None,
        rng=None,
        initial_point=None,
        compile_kwargs=None,
        blocked: bool = True,
    ):
        if scale is not None:
            RobbinsMonro(scale, target_accept, adapt_exponent)  # validates all three
        self.initial_scale = scale
        self.target_accept = float(target_accept)
        self.adapt_scale = bool(adapt_scale)
        self.adapt_exponent = float(adapt_exponent)
        super().__init__(vars, model=model, rng=rng, initial_point=initial_point,
                         compile_kwargs=compile_kwargs, blocked=blocked)
        if cov is None:
            self._chol = np.eye(self.dim)
        else:
            cov = np.asarray(cov, dtype=float)
            if cov.shape != (self.dim, self.dim):
                raise ValueError(f"cov must have shape ({self.dim}, {self.dim}), got {cov.shape}")
            self._chol = safe_cholesky(cov)[0]

    def _initial_adapt_state(self) -> RandomWalkAdaptState:
        scale = self.initial_scale or 2.38 / np.sqrt(self.dim)
        return RandomWalkAdaptState(RobbinsMonro(scale, self.target_accept, self.adapt_exponent))

    def _propose(self, state: ChainState) -> tuple[Proposal, dict[str, Any]]:
        scale = self._adapt.scaler.value
        step = scale * (self._chol @ self.rng.standard_normal(self.dim))
        return Proposal(self._to_model_dtype(state.position + step), 0.0), {"scaling": scale}

    def _adapt_step(self, new_state: ChainState, accept_prob: float) -> None:
        self._adapt.t += 1
        if self.adapt_scale:
            self._adapt.scaler.update(accept_prob)
