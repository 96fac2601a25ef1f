"""One SMC chain's evaluations: the batches, their count, the budget and failed values.

Every evaluation of a chain goes through :class:`Evaluations`: one batch of points per call,
mapped over the user's executor by :class:`~pymc_kameleon.parallel.BatchEvaluator` (the seeds of
likelihood estimators drawn here, in the chain's process, so the draws do not depend on the
workers).  It counts every evaluation (the prior draws, the stages, recycling), knows what
is left of ``max_evals``, and turns a NaN into ``-inf`` (a rejection, or zero weight),
counted and reported once per chain, as the steps do (docs/robustness.md).
"""

from __future__ import annotations

import warnings

import numpy as np

__all__ = ["Evaluations", "vectorised_logp"]


class Evaluations:
    """The evaluations of one chain.

    Parameters
    ----------
    evaluator : BatchEvaluator
        Maps the prior and likelihood terms over a batch (on the executor).
    max_evals : int, optional
        The chain's budget.
    """

    def __init__(self, evaluator, max_evals: int | None = None):
        self.evaluator = evaluator
        self.max_evals = max_evals
        self.total = 0  # the chain's evaluations
        self.running = 0  # those of the batch under way done so far (the progress bar's)
        self.stage = 0  # since the last stage's stats (the first stage: the prior draws too)
        self.n_nan = 0  # NaN values since the last stage's stats
        self.nan_warned = False
        self.budget_warned = False

    @property
    def live(self) -> int:
        """The chain's evaluations so far, those of the batch under way included."""
        return self.total + self.running

    def _done(self, n: int) -> None:
        self.running += n

    def left(self) -> float:
        """Evaluations left in the budget (infinite without one)."""
        return np.inf if self.max_evals is None else self.max_evals - self.total

    def raw(self, X: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """The prior and likelihood terms at the rows of ``X``, one batch."""
        seeds = rng.integers(2**63, size=len(X)) if self.evaluator.has_estimators else None
        try:
            values = self.evaluator(X, seeds, done=self._done)
        finally:
            self.running = 0
        self.total += len(X)
        self.stage += len(X)
        return values[:, 0], values[:, 1]

    def __call__(self, X: np.ndarray, rng: np.random.Generator,
                 beta: float) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`raw`, NaN turned into ``-inf`` (:meth:`reject_nan`)."""
        return self.reject_nan(X, *self.raw(X, rng), beta, "proposals")

    def reject_nan(self, X: np.ndarray, prior: np.ndarray, lik: np.ndarray, beta: float,
                   what: str) -> tuple[np.ndarray, np.ndarray]:
        """NaN prior or likelihood terms become ``-inf``, counted and reported once."""
        bad = np.isnan(prior) | np.isnan(lik)
        if bad.any():
            self.n_nan += int(bad.sum())
            if not self.nan_warned:
                self.nan_warned = True
                warnings.warn(
                    f"KameleonSMC: the log density gave NaN at {int(bad.sum())} of "
                    f"{len(X)} {what} (beta={beta:.3g}; the first at {X[bad][0]!r}). "
                    "Each counts as log density -inf, so the particles sample the posterior "
                    "restricted to where the log density is finite (return -inf where the "
                    "density is zero).  Counts per stage: sample stat n_nan.",
                    RuntimeWarning, stacklevel=4)
        return np.where(bad, -np.inf, prior), np.where(bad, -np.inf, lik)

    def straight_to_posterior(self, lik: np.ndarray, beta: float) -> tuple[np.ndarray, float]:
        """The importance weights from ``beta`` straight to 1 and the log evidence's
        increment, once the budget cannot pay for another stage (warned once)."""
        from scipy.special import logsumexp

        log_w_un = (1.0 - beta) * lik
        log_w = log_w_un - logsumexp(log_w_un)
        weights = np.exp(log_w) / np.exp(log_w).sum()
        if not self.budget_warned:
            self.budget_warned = True
            warnings.warn(
                f"KameleonSMC: the evaluation budget max_evals={self.max_evals} is spent at "
                f"beta={beta:.3g}; the last stage reweights the particles straight to the "
                f"posterior (importance ESS {1 / np.sum(weights**2):.0f} of {len(lik)}) "
                "without moving them. The draws and the evidence are then rough: raise "
                "max_evals, or use fewer draws.", RuntimeWarning, stacklevel=3)
        return weights, float(logsumexp(log_w_un) - np.log(len(lik)))

    def stage_counts(self) -> tuple[int, int]:
        """Evaluations and NaN values since the last call (a stage's stats)."""
        out = (self.stage, self.n_nan)
        self.stage = self.n_nan = 0
        return out


def vectorised_logp(model, variables, compile_kwargs=None):
    """The prior and likelihood terms of a whole batch in one compiled call, or ``None``.

    Built with PyTensor's ``vectorize_graph`` where the log density is PyTensor throughout;
    ``None`` for discrete variables, likelihood estimators and black-box Ops (``as_op``,
    custom Ops), which are evaluated point by point, on the executor if there is one.
    """
    import pytensor.tensor as pt
    from pymc.pytensorf import compile as compile_fn
    from pymc.pytensorf import join_nonshared_inputs, make_shared_replacements
    from pymc.vartypes import discrete_types
    from pytensor.compile.ops import FromFunctionOp
    from pytensor.graph.replace import vectorize_graph
    from pytensor.tensor.blockwise import Blockwise

    try:
        from pytensor.graph.traversal import applys_between
    except ImportError:  # PyTensor < 2.32
        from pytensor.graph.basic import applys_between

    if any(v.dtype in discrete_types for v in variables):
        return None
    point = model.initial_point()
    shared = make_shared_replacements(point, variables, model)
    outs, vec = join_nonshared_inputs(point=point, outputs=[model.varlogp, model.datalogp],
                                      inputs=variables, shared_inputs=shared)
    try:
        mat = pt.matrix("particles", dtype=vec.dtype)
        batched = vectorize_graph(outs, {vec: mat})
    except Exception:  # an Op PyTensor cannot vectorise
        return None
    for node in applys_between([mat], batched):
        op = node.op.core_op if isinstance(node.op, Blockwise) else node.op
        if isinstance(op, FromFunctionOp) or not type(op).__module__.startswith(
                ("pytensor.", "pymc.")):
            return None  # a user's Op: one call per point, as it was written
    kwargs = {**(compile_kwargs or {}), "on_unused_input": "ignore"}
    return compile_fn([mat], pt.stack(batched, axis=1), **kwargs)
