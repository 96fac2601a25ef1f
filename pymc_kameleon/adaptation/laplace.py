"""A gradient-free Laplace start for the warm-up (pure NumPy/SciPy, no PyMC).

The mode is found by a quasi-Newton optimiser (L-BFGS-B on finite-difference gradients) and
the covariance is the inverse of a central finite-difference Hessian of ``-log p`` there.
The warm-up starts its tuning chain at the mode with this covariance as first proposal
shape, and shrinks later window estimates toward it.  It costs ``O(d^2)`` log-density
evaluations once.

The Gaussian is used only if it describes the target around the mode: the log importance
weights ``log p(x) - log q(x)`` of draws ``x`` from it must have a standard deviation of at
most ``sqrt(d)``, i.e. at most 1 per coordinate (the variances of independent coordinates
add up: a Gaussian that is good in each of 80 coordinates, e.g. of a Dirichlet posterior,
still has an sd of about 5).  On a hierarchical model the joint mode lies in the neck of
the funnel (small group scale, group effects pulled together), far from the posterior mass;
a chain started there with the neck's covariance does not get out within pm.sample's
tuning.

It must not be used with likelihood estimators (finite differences of a noisy function are
meaningless); the step checks that the log density is deterministic.

The finite-difference Hessian and the checks that a point is a usable maximum are in
:mod:`.laplace_hessian`; this module is the import path of both.

References
----------
- Nocedal, J., Wright, S. J. (2006). Numerical Optimization, 2nd ed., Springer:
  Section 7.2 (L-BFGS) and Section 8.1 (finite-difference derivatives and Hessians).
- Byrd, R. H., Lu, P., Nocedal, J., Zhu, C. (1995). A limited memory algorithm for
  bound constrained optimization. SIAM Journal on Scientific Computing 16(5).
- Owen, A. B. (2013). Monte Carlo theory, methods and examples, Chapter 9.3
  (importance sampling diagnostics: effective sample size of the weights).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize
from scipy.special import logsumexp

from ..math.linalg import safe_cholesky
from .laplace_hessian import (
    _BIG,
    _curvature_probe,
    _inverse_hessian,
    _rise,
    finite_difference_hessian,
    one_by_one,
)

__all__ = ["LaplaceStart", "climb", "finite_difference_hessian", "laplace_mismatch",
           "laplace_start"]

# the Gaussian must describe the target: sd of the log importance weights of _CHECK_DRAWS
# draws at most _MISMATCH sqrt(d), about 1 per coordinate; the suite's GLMs stay far below,
# modes in a funnel's neck far above (docs/tuning.md, "Laplace start")
_MISMATCH = 1.0
_CHECK_DRAWS = 50
_CHECK_SEED = 20151209  # the check's draws are fixed: the chain's generator is not touched
# a mode whose Gaussian holds less than e^-_MASS_MARGIN of the mass that an estimate of the
# normalising constant shows (importance sampling from the prior: it overestimates by t
# nats with probability at most e^-t) holds none of the posterior: the neck of a centred
# funnel, where the density grows without bound (docs/tuning.md, "Laplace start")
_MASS_MARGIN = 10.0


@dataclass
class LaplaceStart:
    """Result of :func:`laplace_start`."""

    mode: np.ndarray
    logp: float
    cov: np.ndarray | None  # None when the Hessian was unusable
    n_evals: int
    degenerate: str = ""  # why a found mode was not used (a spike, see laplace_start)
    mismatch: float = float("nan")  # sd of the log importance weights of the Gaussian
    start: int = 0  # the start the mode was found from (0: x0, k: starts[k - 1])
    log_mass: float = float("nan")  # log of the mass near the mode (see laplace_start)
    # the inverse Hessian at the mode also where it does not describe the target (a
    # mismatch, too little mass): an emulator's mean function still starts from it
    hessian_cov: np.ndarray | None = None


def laplace_mismatch(
    logp: Callable[[np.ndarray], float], mode: np.ndarray, cov: np.ndarray,
    n_draws: int = _CHECK_DRAWS, rng: np.random.Generator | None = None,
) -> float:
    """Standard deviation of the log importance weights ``log p(x) - log q(x)`` of ``n_draws``
    draws ``x`` from the Gaussian ``q = N(mode, cov)`` (``inf`` if a draw has no finite log
    density).  ``logp`` may be unnormalised: a constant does not change the spread.  0 when
    ``p`` is that Gaussian (up to a constant); ``e^{-s^2}`` is about the
    importance-sampling effective sample size per draw when the weights are log-normal.

    The draws come from ``rng`` (default: a fixed seed, so that the result is a function of
    the arguments alone).

    Examples
    --------
    >>> import numpy as np
    >>> cov = np.array([[2.0, 0.3], [0.3, 0.5]])
    >>> P = np.linalg.inv(cov)
    >>> gauss = lambda x: 7.0 - 0.5 * x @ P @ x
    >>> float(round(laplace_mismatch(gauss, np.zeros(2), cov), 12))
    0.0
    >>> laplace_mismatch(gauss, np.zeros(2), 0.25 * cov) > 1.0  # too narrow
    True
    """
    return _spread(_log_weights(logp, mode, cov, n_draws, rng)[0])


def _spread(w: np.ndarray) -> float:
    """Standard deviation of log importance weights (``inf`` if one is not finite)."""
    return float(np.std(w)) if np.all(np.isfinite(w)) else float("inf")


def _log_weights(logp: Callable[[np.ndarray], float], mode: np.ndarray, cov: np.ndarray,
                 n_draws: int = _CHECK_DRAWS, rng: np.random.Generator | None = None,
                 rows: Callable[[np.ndarray], np.ndarray] | None = None,
                 ) -> tuple[np.ndarray, float]:
    """``log p(x) - log q(x)`` of ``n_draws`` draws from ``q = N(mode, cov)`` (``-inf`` where
    ``p`` is not finite) and ``log det(2 pi cov) / 2``, which they omit.  ``rows``
    evaluates ``logp`` at the rows of an array (the draws as one batch; default a loop)."""
    rng = np.random.default_rng(_CHECK_SEED) if rng is None else rng
    chol = safe_cholesky(np.asarray(cov, dtype=float))[0]
    z = rng.standard_normal((int(n_draws), mode.size))
    with np.errstate(all="ignore"):
        rows = one_by_one(logp) if rows is None else rows
        lp = np.asarray(rows(np.array([mode + chol @ zi for zi in z])), dtype=float)
    lp = np.where(np.isfinite(lp), lp, -np.inf)
    half_logdet = float(np.sum(np.log(np.abs(np.diag(chol))))) + 0.5 * mode.size * np.log(
        2.0 * np.pi)
    return lp + 0.5 * np.sum(z**2, axis=1), half_logdet


def laplace_start(
    logp: Callable[[np.ndarray], float], x0: np.ndarray, max_evals: int,
    starts: Sequence[np.ndarray] = (), log_evidence: float = -np.inf,
    logp_rows: Callable[[np.ndarray], np.ndarray] | None = None, check: bool = True,
    follow_ridges: bool = False,
) -> LaplaceStart:
    """Mode and inverse finite-difference Hessian of ``logp`` (``cov`` None if unusable).

    The optimiser runs from ``x0`` and from each of ``starts`` (dispersed points, e.g. prior
    draws): one optimisation from a single point can end in a local mode that holds no
    posterior mass, as in ODE fits (docs/tuning.md, "Laplace start").  The modes
    are tried by decreasing log density and the first usable one is kept; ``start`` says
    which point it came from (0: ``x0``, ``k``: ``starts[k - 1]``).

    A "mode" where some marginal standard deviation is below ``1e-10 (1 + |mode_i|)`` is a
    spike of a density that grows without bound (a centred hierarchical model's funnel as
    its scale goes to 0) or a numerical cliff: it is not usable, and ``degenerate`` says
    where, so that the caller does not start a chain there with a covariance that cannot
    move it.  Nor is a mode whose Gaussian does not describe the target around it:
    :func:`laplace_mismatch` above ``sqrt(d)`` (``mismatch`` holds it; 50 evaluations).
    Nor is a mode whose Gaussian holds less than ``e^-10`` of ``exp(log_evidence)``: the
    mass near it, ``log_mass``, is the larger of the Laplace approximation's
    ``log p(mode) + log det(2 pi cov) / 2`` and the importance-sampling estimate from the
    mismatch's draws.  In a centred funnel's neck the density grows without bound, and the
    optimiser stops at a point that looks like a mode but holds almost no mass.  When no
    mode is usable, ``cov`` is None and the result describes the best mode found.

    Parameters
    ----------
    logp : callable
        Deterministic log density of a 1-d array (``-inf`` outside the support).
    x0 : array
        Starting point; must have a finite log density.
    max_evals : int
        Budget of log-density evaluations of the optimiser, per start (each Hessian adds
        ``2 d^2``).
    starts : sequence of arrays, optional
        Further starting points; those without a finite log density are skipped.
    log_evidence : float, optional
        An estimate of ``log`` of the integral of ``exp(logp)`` that errs low, e.g. by
        importance sampling from the prior (default: none, every mode holds enough mass).
    logp_rows : callable, optional
        The same log density at the rows of a 2-d array (one batch, e.g. on an executor's
        workers).  Then every set of points that does not depend on another's values is
        one call: the optimiser's value and forward-difference gradient (``d + 1``
        points, the steps SciPy's own differences take, so the optimiser's path is the
        same), the curvature probe, the Hessian (``2 d^2`` points), each Newton
        gradient and the mismatch draws.  The result equals the one-point path's up to
        rounding, at the same number of evaluations.
    check : bool, default True
        Whether to check that the Gaussian describes the target (the mismatch and the
        mass near the mode, 50 evaluations per mode).  ``False``: ``cov`` is the inverse
        Hessian wherever it is usable (``mismatch`` and ``log_mass`` NaN), for a caller
        that uses that covariance either way (an emulator's mean function).
    follow_ridges : bool, default False
        Where the Hessian at the optimiser's end is indefinite (no maximum: a narrow ridge
        the optimiser could not follow), climb once more in the coordinates that Hessian
        whitens (:func:`_whitened_climb`, up to ``35 (d + 1)`` evaluations).  Off for the
        steps' warm-up, which walks off a ridge while it tunes, and where a funnel's neck
        makes this climb run deeper into the neck.

    Examples
    --------
    >>> import numpy as np
    >>> cov = np.array([[1.0, 0.9], [0.9, 1.0]]) * 1e-4
    >>> P = np.linalg.inv(cov)
    >>> res = laplace_start(lambda x: -0.5 * (x - 3) @ P @ (x - 3), np.zeros(2), 2000)
    >>> bool(np.allclose(res.mode, 3.0, atol=1e-3)), bool(np.allclose(res.cov, cov, rtol=1e-2))
    (True, True)

    Two modes, the one near ``x0`` lower: a dispersed start finds the higher one.

    >>> bimodal = lambda x: np.logaddexp(-0.5 * np.sum((x + 4) ** 2) - 3.0,
    ...                                  -0.5 * np.sum((x - 4) ** 2))
    >>> laplace_start(bimodal, np.full(2, -3.0), 500).mode.round(2)
    array([-4., -4.])
    >>> res = laplace_start(bimodal, np.full(2, -3.0), 500, starts=[np.full(2, 2.0)])
    >>> res.mode.round(2), res.start
    (array([4., 4.]), 1)
    """
    neg, rows, count = _objective(logp, logp_rows)

    # finite differences at the edge of the support overflow by design: no warnings leak
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        found = []  # (-log density, start index, mode)
        for index, point in enumerate([x0, *starts]):
            point = np.asarray(point, dtype=float)
            mode, f_mode = _optimise(neg, point, max_evals,
                                     None if logp_rows is None else rows)
            if f_mode < _BIG:
                found.append((f_mode, index, mode))
        if not found:
            return LaplaceStart(mode=np.asarray(x0, float), logp=-np.inf, cov=None,
                                n_evals=count[0])
        found.sort(key=lambda item: item[0])
        first, tried, lowest = None, [], np.inf
        for f_mode, index, mode in found:
            if f_mode > lowest:  # far below the best mode that may hold mass: it holds none
                break
            if any(np.allclose(mode, other, rtol=1e-4, atol=1e-6) for other in tried):
                continue  # the same mode from another start
            tried.append(mode)
            res = _gaussian_at(neg, mode, f_mode, log_evidence, rows, check, follow_ridges)
            res.start = index
            if first is None:
                first = res
            if lowest == np.inf and not _massless(res.log_mass, log_evidence):
                lowest = f_mode + _mode_margin(np.size(x0))
            if res.cov is not None:
                res.n_evals = count[0]
                return res
        first.n_evals = count[0]
        return first


def _massless(log_mass: float, log_evidence: float) -> bool:
    """Whether a mode's Gaussian holds less than ``e^-_MASS_MARGIN`` of the mass."""
    return log_mass < log_evidence - _MASS_MARGIN


def _mode_margin(dim: int) -> float:
    """How far (in log density) below the best point found a mode may lie and still be
    used: the posterior's mass lies about ``d / 2`` below its mode, give or take
    ``sqrt(d / 2)``; a mode further down holds no mass next to the best one."""
    return dim / 2.0 + 3.0 * np.sqrt(dim / 2.0)


def climb(logp: Callable[[np.ndarray], float], x0: np.ndarray, max_evals: int,
          logp_rows: Callable[[np.ndarray], np.ndarray] | None = None,
          ) -> tuple[np.ndarray, float]:
    """At most about ``max_evals`` evaluations of L-BFGS-B from ``x0`` (finite-difference
    gradients) up ``logp``: the highest point reached and its log density (``logp_rows``
    as for :func:`laplace_start`: each value and its gradient one batch)."""
    neg, rows, _ = _objective(logp, logp_rows)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        point, f = _optimise(neg, np.asarray(x0, dtype=float), max_evals,
                             None if logp_rows is None else rows)
    return point, (-f if f < _BIG else -np.inf)


def _objective(logp: Callable[[np.ndarray], float],
               logp_rows: Callable[[np.ndarray], np.ndarray] | None):
    """``-log p`` at a point and at the rows of an array (``_BIG`` where not finite), one
    batch per call where ``logp_rows`` is given, and the count of evaluations."""
    count = [0]

    def neg(x: np.ndarray) -> float:
        if logp_rows is not None:
            return float(rows(np.asarray(x, dtype=float)[None, :])[0])
        count[0] += 1
        value = -float(logp(x))
        return value if np.isfinite(value) else _BIG

    def rows(X: np.ndarray) -> np.ndarray:  # -log p at the rows of X, one batch
        if logp_rows is None:
            return one_by_one(neg)(X)
        count[0] += len(X)
        values = -np.asarray(logp_rows(X), dtype=float).reshape(len(X))
        return np.where(np.isfinite(values), values, _BIG)

    return neg, rows, count


def _optimise(neg: Callable[[np.ndarray], float], x0: np.ndarray, max_evals: int,
              rows: Callable[[np.ndarray], np.ndarray] | None = None,
              ) -> tuple[np.ndarray, float]:
    """L-BFGS-B from ``x0`` on finite-difference gradients: the point and its ``-log p``
    (``x0`` itself when the optimiser fails or ends higher).  With ``rows`` (``neg`` at
    the rows of an array) each value and its gradient are one batch (:func:`_value_and_slope`)."""
    f0 = neg(x0)
    if f0 >= _BIG:
        return x0, f0
    maxfun = max(int(max_evals), 10)
    try:
        if rows is None:
            res = minimize(neg, x0, method="L-BFGS-B", options={"maxfun": maxfun})
        else:  # SciPy counts each of these calls once; its own differences count d + 1
            res = minimize(_value_and_slope(rows), x0, jac=True, method="L-BFGS-B",
                           options={"maxfun": maxfun // (x0.size + 1)})
    except (ValueError, FloatingPointError, np.linalg.LinAlgError):
        return x0, f0
    mode = np.asarray(res.x, dtype=float)
    f_mode = neg(mode)
    if not (f_mode <= f0 and f_mode < _BIG):
        return x0, f0
    return mode, f_mode


def _whitened_climb(neg: Callable[[np.ndarray], float],
                    rows: Callable[[np.ndarray], np.ndarray], x: np.ndarray, f_x: float,
                    cov: np.ndarray) -> tuple[np.ndarray, float]:
    """L-BFGS-B from ``x`` in the coordinates ``z`` of ``x + L z`` (``L L^T = cov``), at
    most ``_CLIMB (d + 1)`` evaluations: the point and its ``-log p``.

    An optimiser on finite differences stops on a narrow ridge (an intercept and a slope of
    correlation -0.9999) where a Hessian with a non-positive curvature shows that the point
    is no maximum; in the coordinates that Hessian whitens, the ridge is a slope it follows
    (docs/benchmarks/emulator.md, "emulator-ridge")."""
    L, _ = safe_cholesky(cov)
    z, f_z = _optimise(lambda v: neg(x + L @ v), np.zeros(x.size), _CLIMB * (x.size + 1),
                       lambda Z: rows(x + Z @ L.T))
    return x + L @ z, f_z


# the evaluations per dimension (and one) of a climb whitened by the Hessian
_CLIMB = 35

# SciPy's L-BFGS-B differences: absolute steps of 1e-8 (its ``eps``), a relative step
# where that one vanishes in rounding (scipy.optimize._numdiff.approx_derivative)
_FD_STEP = 1e-8
_FD_REL = np.sqrt(np.finfo(float).eps)


def _value_and_slope(rows: Callable[[np.ndarray], np.ndarray]):
    """``x -> (f(x), forward-difference gradient)`` from one call of ``rows`` at ``x`` and
    ``x + h_i e_i``, with the steps and arithmetic of SciPy's L-BFGS-B without ``jac``
    (so that the optimiser takes the same path, in ``d + 1``-point batches)."""

    def fun(x: np.ndarray) -> tuple[float, np.ndarray]:
        x = np.asarray(x, dtype=float)
        sign = (x >= 0).astype(float) * 2 - 1
        h = np.full(x.size, _FD_STEP)
        h = np.where((x + h) - x == 0, _FD_REL * sign * np.maximum(1.0, np.abs(x)), h)
        shifted = np.repeat(x[None, :], x.size, axis=0)
        shifted[np.arange(x.size), np.arange(x.size)] = x + h
        values = rows(np.concatenate([x[None, :], shifted]))
        return float(values[0]), (values[1:] - values[0]) / ((x + h) - x)

    return fun


def _gaussian_at(neg: Callable[[np.ndarray], float], mode: np.ndarray, f_mode: float,
                 log_evidence: float = -np.inf,
                 rows: Callable[[np.ndarray], np.ndarray] | None = None,
                 check: bool = True, follow_ridges: bool = False) -> LaplaceStart:
    """The Laplace approximation at an optimiser's ``mode`` (``cov`` None if unusable);
    ``rows``: ``neg`` at the rows of an array (one batch; default a loop); ``check``:
    whether to check the Gaussian against the target, ``follow_ridges`` whether to climb
    on from a saddle (:func:`laplace_start`)."""
    rows = one_by_one(neg) if rows is None else rows
    d = mode.size
    rounds, climbed = 0, False
    while rounds < 3:  # the Hessian again where Newton steps moved the mode
        cov, steps, spike, rise, saddle = _inverse_hessian(neg, mode, f_mode, rows)
        if cov is None or spike:
            return LaplaceStart(mode=mode, logp=-f_mode, cov=None, n_evals=0,
                                degenerate=spike)
        if saddle and follow_ridges and not climbed:  # no maximum: climb, whitened
            climbed = True
            point, f_point = _whitened_climb(neg, rows, mode, f_mode, cov)
            if f_point < f_mode:  # the Hessian again at the higher point
                mode, f_mode = point, f_point
                continue
        rounds += 1
        moved = False
        for _ in range(3):  # badly scaled targets: L-BFGS stops early; finish with Newton
            E = np.eye(d) * steps[:, None]  # the up and down points of each coordinate
            values = rows(np.stack([mode + E, mode - E], axis=1).reshape(2 * d, d))
            grad = (values[0::2] - values[1::2]) / (2 * steps)
            candidate = mode - cov @ grad
            f_new = neg(candidate)
            if not f_new < f_mode:
                break
            mode, f_mode, moved = candidate, f_new, True
        if not moved:
            break
    if moved:  # the last Newton steps moved the mode after its slopes were measured
        rise = _rise(mode, *_curvature_probe(neg, mode, f_mode, rows)[1:])
    if rise:
        return LaplaceStart(mode=mode, logp=-f_mode, cov=None, n_evals=0, degenerate=rise)

    if not check:
        return LaplaceStart(mode=mode, logp=-f_mode, n_evals=0, cov=cov, hessian_cov=cov)

    def pos(X: np.ndarray) -> np.ndarray:
        values = rows(X)
        return np.where(values < _BIG, -values, -np.inf)

    w, half_logdet = _log_weights(None, mode, cov, rows=pos)
    mismatch = _spread(w)
    log_mass = half_logdet + max(-f_mode, float(logsumexp(w) - np.log(w.size)))
    res = LaplaceStart(mode=mode, logp=-f_mode, n_evals=0, mismatch=mismatch,
                       log_mass=log_mass,
                       cov=cov if mismatch <= _MISMATCH * np.sqrt(mode.size) else None,
                       hessian_cov=cov)
    if _massless(log_mass, log_evidence):
        res.cov = None
        res.degenerate = (f"the Gaussian at the mode holds about e^{log_mass - log_evidence:.0f} "
                          "of the target's mass")
    return res
