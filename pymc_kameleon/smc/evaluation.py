"""One SMC chain's evaluations: the batches, their count, the budget and failed values.

Every evaluation of a chain goes through :class:`Evaluations`: one batch of points per call,
mapped over the user's executor by :class:`~pymc_kameleon.parallel.BatchEvaluator` (the seeds of
likelihood estimators drawn here, in the chain's process, so the draws do not depend on the
workers).  It counts every evaluation (the prior draws, the stages, recycling), knows what
is left of ``max_evals``, and applies the failure policy of the steps (docs/robustness.md):
an exception of the log density raises :class:`~pymc_kameleon.LogDensityError` naming the
point (``on_error="raise"``) or, like NaN, is log density ``-inf`` (a rejection, or zero
weight), counted per stage and reported once per chain
(:class:`~pymc_kameleon.failures.Failures`, the steps' counting).
"""

from __future__ import annotations

import warnings

import numpy as np

from ..failures import Failure, Failures, check_on_error, format_point

__all__ = ["Evaluations", "vectorised_logp"]


class Evaluations:
    """The evaluations of one chain.

    Parameters
    ----------
    evaluator : BatchEvaluator
        Maps the prior and likelihood terms over a batch (on the executor).
    max_evals : int, optional
        The chain's budget.
    on_error : {"raise", "reject"}, default "raise"
        What an exception of the log density does.
    point : ModelPoint, optional
        Names a point in the model's variables in messages (else the raveled values).
    """

    def __init__(self, evaluator, max_evals: int | None = None, on_error: str = "raise",
                 point=None):
        self.evaluator = evaluator
        self.max_evals = max_evals
        self.on_error = check_on_error(on_error)
        self.point = point
        self.total = 0  # the chain's evaluations
        self.running = 0  # those of the batch under way done so far (the progress bar's)
        self.stage = 0  # since the last stage's stats (the first stage: the prior draws too)
        self.failed = Failures()  # the chain's NaN values and exceptions
        self.budget_warned = self.failures_reported = False

    @property
    def live(self) -> int:
        """The chain's evaluations so far, those of the batch under way included."""
        return self.total + self.running

    def _done(self, n: int) -> None:
        self.running += n

    def left(self) -> float:
        """Evaluations left in the budget (infinite without one)."""
        return np.inf if self.max_evals is None else self.max_evals - self.total

    def raw(self, X: np.ndarray, rng: np.random.Generator,
            what: str = "a starting particle") -> tuple[np.ndarray, np.ndarray]:
        """The prior and likelihood terms at the rows of ``X``, one batch; a point that
        raised is ``-inf`` with ``on_error="reject"`` (counted), else the error."""
        seeds = rng.integers(2**63, size=len(X)) if self.evaluator.has_estimators else None
        try:
            values, failures = self.evaluator.evaluate(X, seeds, stop=self.on_error == "raise",
                                                       done=self._done)
        finally:
            self.running = 0
        self.total += len(X)
        self.stage += len(X)
        if failures and self.on_error == "raise":
            self._raise(X, failures[0], what)
        for failure in failures:
            self.failed.add(self._model(X[failure.row]), failure)
            values[failure.row] = -np.inf
        return values[:, 0], values[:, 1]

    def __call__(self, X: np.ndarray, rng: np.random.Generator,
                 beta: float) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`raw`, NaN turned into ``-inf`` (:meth:`reject_nan`)."""
        return self.reject_nan(X, *self.raw(X, rng, f"a proposal at beta={beta:.4g}"))

    def reject_nan(self, X: np.ndarray, prior: np.ndarray,
                   lik: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """NaN prior or likelihood terms become ``-inf``, counted."""
        bad = np.isnan(prior) | np.isnan(lik)
        for x in X[bad]:
            self.failed.add(self._model(x))
        return np.where(bad, -np.inf, prior), np.where(bad, -np.inf, lik)

    def _model(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(x, dtype=float) if self.point is None else self.point.ravel(x)

    def _info(self):
        return None if self.point is None else self.point.info

    def _raise(self, X: np.ndarray, failure: Failure, what: str):
        from ..steps.evaluations import LogDensityError

        x = self._model(X[failure.row])
        where = f" in {failure.op}," if failure.op else ""
        raise LogDensityError(
            f"KameleonSMC: the log density raised at {what} of this chain,{where} at the "
            f"point {format_point(x, self._info())}; the model's exception is the cause, "
            "above.  Pass on_error='reject' to pm.sample_smc (with kernel=KameleonSMC) to "
            "count such failures as zero density (this changes the target: "
            "docs/robustness.md).") from failure.cause()

    def report(self) -> None:
        """Warn, once per chain, of its NaN values and rejected exceptions."""
        failed = self.failed
        if not failed.total or self.failures_reported:
            return
        self.failures_reported = True
        warnings.warn(
            f"KameleonSMC: the log density gave {failed.what()} in this chain.  Each "
            "counts as log density -inf (zero density), so the particles sample the "
            "posterior restricted to where the log density is finite, not the model's "
            "posterior (return -inf where the density is zero).  "
            f"{failed.where(self._info())} Counts per stage: sample stats n_nan and "
            "n_errors.", RuntimeWarning, stacklevel=3)

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

    def stage_counts(self) -> dict[str, int]:
        """Evaluations, NaN values and rejected exceptions since the last call (a stage's
        stats ``n_evals``, ``n_nan`` and ``n_errors``)."""
        out = {"n_evals": self.stage, **self.failed.since("stage")}
        self.stage = 0
        self.failed.mark("stage")
        return out


def vectorised_logp(model, variables, compile_kwargs=None, prior_only: bool = False):
    """The prior and likelihood terms of a whole batch in one compiled call, or ``None``
    (``prior_only``: the prior term alone, a column).

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
    terms = [model.varlogp] if prior_only else [model.varlogp, model.datalogp]
    outs, vec = join_nonshared_inputs(point=point, outputs=terms,
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
