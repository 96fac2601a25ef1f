"""Delayed acceptance: screen a proposal with a cheap surrogate before evaluating the model.

With a surrogate log density ``log s`` (any function finite wherever the target is positive,
e.g. a model fitted while tuning and then frozen), one Metropolis-Hastings iteration from
``x`` proposes ``y ~ q(. | x)`` and

* stage 1 passes ``y`` with probability ``min(1, r1)``,
  ``log r1 = log s(y) - log s(x) + log q(x | y) - log q(y | x)``; a stage-1 rejection costs
  no evaluation of the target;
* stage 2 evaluates ``log p(y)`` and accepts with ``min(1, r2)``,
  ``log r2 = log p(y) - log p(x) + log s(x) - log s(y)``.

The product of the two acceptance probabilities satisfies detailed balance for ``p``
whatever ``s`` is (Christen and Fox 2005, Theorem 1): ``s`` only decides how many
evaluations are spent.  Pseudo-marginal (a likelihood estimate in ``log p``): ``log p(x)`` in
stage 2 is the estimate stored with the state, never re-estimated (Sherlock, Golightly and
Henderson 2017); the chain is then exact on the extended space of parameters and estimator
randomness, as for the one-stage pseudo-marginal kernel.

Everything is in log space.  A non-finite ``log p(y)`` or ``log s(y)`` is a rejection at that
stage (NaN counts as ``-inf``); the current point's values must be finite.

References
----------
- Christen, J. A., Fox, C. (2005). Markov chain Monte Carlo using an approximation.
  Journal of Computational and Graphical Statistics 14(4), 795-810.
- Sherlock, C., Golightly, A., Henderson, D. A. (2017). Adaptive, delayed-acceptance MCMC
  for targets with expensive likelihoods. Journal of Computational and Graphical
  Statistics 26(2), 434-444.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

__all__ = ["DAWalkResult", "delayed_acceptance_walk", "stage1_log_ratio", "stage2_log_ratio"]


def _log_ratio(new: float | np.ndarray,
               ratio: Callable[[np.ndarray], np.ndarray]) -> float | np.ndarray:
    """``ratio(new)`` with ``new``, the proposal's log density, rejecting where it fails:
    ``-inf`` wherever ``new`` is ``-inf`` or NaN (both stages' rule); a float for scalars."""
    new = np.asarray(new, dtype=float)
    new = np.where(np.isnan(new), -np.inf, new)
    with np.errstate(invalid="ignore"):
        out = ratio(new)
    out = np.where(np.isneginf(new), -np.inf, out)
    return float(out) if out.ndim == 0 else out


def stage1_log_ratio(log_s_x, log_s_y, log_q_x_given_y=0.0, log_q_y_given_x=0.0):
    """``log r1 = log s(y) - log s(x) + log q(x | y) - log q(y | x)`` (pass with ``min(1, r1)``).

    Parameters
    ----------
    log_s_x, log_s_y : float or ndarray
        Surrogate log densities at the current point and at the proposal (broadcast).
    log_q_x_given_y, log_q_y_given_x : float or ndarray, default 0
        Log proposal densities of the reverse and forward moves (0 for a symmetric proposal).

    Returns
    -------
    float or ndarray
        ``-inf`` where ``log s(y)`` is ``-inf`` or NaN.
    """
    return _log_ratio(log_s_y, lambda s_y: s_y - np.asarray(log_s_x, dtype=float) + (
        np.asarray(log_q_x_given_y, dtype=float) - np.asarray(log_q_y_given_x, dtype=float)))


def stage2_log_ratio(logp_x, logp_y, log_s_x, log_s_y):
    """``log r2 = log p(y) - log p(x) + log s(x) - log s(y)`` (accept with ``min(1, r2)``).

    The proposal densities cancel: stage 1 already holds them.

    Parameters
    ----------
    logp_x : float or ndarray
        Log target at the current point: the value stored with the state (for a likelihood
        estimator the estimate made when the point was accepted, never a fresh one).
    logp_y : float or ndarray
        Log target (or its estimate) at the proposal, evaluated once.
    log_s_x, log_s_y : float or ndarray
        The surrogate's log densities used in stage 1.

    Returns
    -------
    float or ndarray
        ``-inf`` where ``log p(y)`` is ``-inf`` or NaN.
    """
    return _log_ratio(logp_y, lambda p_y: (
        p_y - np.asarray(logp_x, dtype=float)
        + np.asarray(log_s_x, dtype=float) - np.asarray(log_s_y, dtype=float)))


@dataclass
class DAWalkResult:
    """Output of :func:`delayed_acceptance_walk`.

    Attributes
    ----------
    samples : ndarray, shape (chains, n_iter, d)
        The chains' states after every iteration.
    logp : ndarray, shape (chains,)
        The stored log target of the last states.
    n_evals : ndarray, shape (chains,)
        Target evaluations per chain (one per stage-2 proposal).
    stage1_accept : float
        Fraction of proposals that passed stage 1.
    stage2_accept : float
        Fraction of stage-2 proposals accepted (NaN if none reached stage 2).
    """

    samples: np.ndarray
    logp: np.ndarray
    n_evals: np.ndarray
    stage1_accept: float
    stage2_accept: float

    @property
    def evals_per_iteration(self) -> float:
        """Target evaluations per iteration, averaged over chains."""
        return float(self.n_evals.mean() / self.samples.shape[1])

    @property
    def evals_saved(self) -> float:
        """Fraction of iterations that spent no evaluation (stage-1 rejections)."""
        return 1.0 - self.evals_per_iteration


def delayed_acceptance_walk(
    logp: Callable[[np.ndarray], float],
    log_surrogate: Callable[[np.ndarray], np.ndarray],
    x0: np.ndarray,
    chol: np.ndarray,
    n_iter: int,
    rng: np.random.Generator,
    logp0: np.ndarray | None = None,
) -> DAWalkResult:
    """Delayed-acceptance random walks ``y = x + chol @ e``, ``e ~ N(0, I)``, several chains.

    The reference kernel of this module: a symmetric proposal (``log q`` terms vanish), the
    surrogate evaluated for every chain's proposal in one batch, the target only for the
    proposals that pass stage 1, one call each.  The surrogate at the current point is
    stored with the state (it is frozen), like the target's value.

    Parameters
    ----------
    logp : callable
        ``logp(x)`` for one point ``x`` of shape ``(d,)``: the log target or an estimate of
        it (an estimate is made once per point and stored).
    log_surrogate : callable
        ``log_surrogate(X)`` for rows ``X`` of shape ``(n, d)``, returning ``(n,)``.
    x0 : ndarray, shape (chains, d)
        Starting points (finite target and surrogate there).
    chol : ndarray, shape (d, d)
        The proposal's scale: ``chol @ chol.T`` is its covariance.
    n_iter : int
        Iterations per chain.
    rng : numpy.random.Generator
        All randomness: per iteration one ``(chains, d)`` normal block, then two
        ``(chains,)`` uniform blocks.
    logp0 : ndarray, shape (chains,), optional
        Stored log target at ``x0`` (evaluated, and counted, if not given).

    Returns
    -------
    DAWalkResult
    """
    x = np.array(x0, dtype=float, ndmin=2)
    chains, d = x.shape
    n_evals = np.zeros(chains, dtype=int)
    if logp0 is None:
        lp = np.array([logp(xi) for xi in x], dtype=float)
        n_evals += 1
    else:
        lp = np.array(logp0, dtype=float).reshape(chains)
    ls = np.asarray(log_surrogate(x), dtype=float).reshape(chains)
    if not (np.all(np.isfinite(lp)) and np.all(np.isfinite(ls))):
        raise ValueError("the target and the surrogate must be finite at the starting points")
    out = np.empty((chains, n_iter, d))
    passed = accepted = 0
    for t in range(n_iter):
        y = x + rng.standard_normal((chains, d)) @ chol.T
        u1, u2 = rng.random(chains), rng.random(chains)
        ls_y = np.asarray(log_surrogate(y), dtype=float).reshape(chains)
        stage2 = np.log(u1) < stage1_log_ratio(ls, ls_y)
        for i in np.flatnonzero(stage2):
            lp_y = float(logp(y[i]))
            n_evals[i] += 1
            if np.log(u2[i]) < stage2_log_ratio(lp[i], lp_y, ls[i], ls_y[i]):
                x[i], lp[i], ls[i] = y[i], lp_y, ls_y[i]
                accepted += 1
        passed += int(stage2.sum())
        out[:, t] = x
    total = chains * n_iter
    return DAWalkResult(out, lp, n_evals, passed / total,
                        accepted / passed if passed else float("nan"))
