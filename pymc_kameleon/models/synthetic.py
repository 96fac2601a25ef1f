"""Synthetic targets with known answers, and honest log-density evaluation counts.

The models the tests and the benchmarks share; users may sample them too.

* :func:`flower_model`: the flower target of :mod:`pymc_kameleon.models.targets` as one
  ``pm.Flat`` vector and a PyTensor ``pm.Potential`` (so NUTS runs on it too), like
  :func:`pymc_kameleon.models.banana_model`, whose prior option (``prior_sd``, for SMC) it
  shares.
* :func:`gaussian_model`, :func:`gaussian_mixture_model`: Gaussian targets with known
  moments and, for the mixture, a known log evidence (0).
* :class:`NumpyLogp` and :func:`counted_model`: a NumPy log density wrapped as a PyTensor
  ``Op`` without gradient, in a model whose evaluations an
  :class:`~pymc_kameleon.models.counting.EvalCounter` counts, to compare samplers by the
  number of target evaluations they spend and to check the one-evaluation-per-iteration
  contract (users read the steps' ``n_evals`` stat instead).

References
----------
- Sejdinovic, Strathmann, Lomeli, Andrieu, Gretton (2014). Kernel adaptive
  Metropolis-Hastings. ICML 2014, Section 5.2.
- Strathmann, H. (2018). Kernel methods for Monte Carlo. PhD thesis, UCL, Section 5.3.2.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pymc as pm
import pytensor.tensor as pt
from numpy.typing import ArrayLike
from pytensor.gradient import grad_not_implemented
from pytensor.graph.basic import Apply
from pytensor.graph.op import Op

from ..validation import check_integral, check_positive
from .counting import EvalCounter, add_counter

# the banana model's prior option and argument checks, shared so that both targets agree
from .factories import vector_variable
from .targets import LOG_2PI, mixture_parts

__all__ = [
    "NumpyLogp",
    "counted_model",
    "flower_model",
    "gaussian_mixture_model",
    "gaussian_model",
]


def flower_model(
    dim: int = 8,
    r0: float = 10.0,
    A: float = 6.0,
    w: float = 6.0,
    s: float = 1.0,
    name: str = "x",
    prior_sd: float | None = None,
) -> pm.Model:
    """PyMC model of the flower target ``F(r0, A, w, s)`` (Sejdinovic et al., 2014).

    One variable ``name`` of shape ``(dim,)``: a ``pm.Flat`` and the unnormalised flower log
    density of :func:`pymc_kameleon.models.targets.flower_logp` (same constant) as a
    ``pm.Potential`` named ``f"{name}_logp"``.  The initial value lies on the tip of the petal
    at angle 0, ``x = (max(r0 + A, s), 0, ..., 0)``: at ``x1 = x2 = 0`` the density is finite
    but the gradient of the radius is not (NUTS would fail there).

    Parameters
    ----------
    dim : int
        Dimension ``d >= 2``.
    r0, A, w, s : float
        Radius, amplitude, frequency and width (paper: ``F(10, 6, 6, 1)``).
    name : str
        Name of the vector variable.
    prior_sd : float, optional
        For SMC: ``x ~ N(0, prior_sd^2 I)`` instead of ``pm.Flat`` and the potential minus
        that log prior; the log evidence is then
        :func:`pymc_kameleon.models.targets.flower_log_normaliser`.

    Returns
    -------
    pymc.Model

    References
    ----------
    .. [1] Sejdinovic, D., Strathmann, H., Lomeli Garcia, M., Andrieu, C., Gretton, A.
       (2014). Kernel Adaptive Metropolis-Hastings. ICML, Section 5.2.

    Examples
    --------
    >>> from pymc_kameleon.models.targets import flower_logp
    >>> model = flower_model(dim=4)
    >>> model.initial_point()["x"]
    array([16.,  0.,  0.,  0.])
    >>> point = {"x": np.array([3.0, -8.0, 0.1, 1.0])}
    >>> bool(np.isclose(model.compile_logp()(point), flower_logp(point["x"])))
    True
    """
    dim = check_integral("dim", dim, minimum=2)
    s = check_positive("s", s)
    r0, A, w = float(r0), float(A), float(w)
    initval = np.zeros(dim)
    initval[0] = max(r0 + A, s)
    with pm.Model() as model:
        x, log_prior = vector_variable(name, dim, initval, prior_sd)
        radius = pt.sqrt(x[0] ** 2 + x[1] ** 2)
        angle = pt.arctan2(x[1], x[0])
        dev = radius - r0 - A * pt.cos(w * angle)
        rest = pt.sum(x[2:] ** 2)
        const = -0.5 * (dim - 2) * LOG_2PI
        pm.Potential(f"{name}_logp", -0.5 * dev**2 / s**2 - 0.5 * rest + const - log_prior)
    return model


def gaussian_mixture_model(
    means: ArrayLike, sds: ArrayLike, weights: ArrayLike, prior_sd: float = 20.0,
    name: str = "x",
) -> pm.Model:
    """PyMC model whose posterior is a normalised mixture of isotropic Gaussians.

    ``x ~ N(0, prior_sd^2 I)`` and a potential ``log sum_k w_k N(x; m_k, s_k^2 I)`` minus that
    log prior, so the posterior is exactly the mixture (mode weights ``w_k``) and the log
    evidence (log marginal likelihood) is exactly 0: a multimodal target with known answers
    for SMC.

    Parameters
    ----------
    means : array_like, shape (K, d)
        Component means.
    sds : array_like, shape (K,)
        Component standard deviations.
    weights : array_like, shape (K,)
        Mixture weights (normalised here).
    prior_sd : float
        Standard deviation of the prior SMC starts from.
    name : str
        Name of the vector variable.

    Returns
    -------
    pymc.Model

    Examples
    --------
    >>> from scipy.stats import multivariate_normal
    >>> model = gaussian_mixture_model([[-3.0, 0.0], [3.0, 0.0]], [1.0, 1.0], [0.3, 0.7])
    >>> logp = model.compile_logp(sum=True)
    >>> x = np.array([1.0, 0.5])
    >>> mix = 0.3 * multivariate_normal([-3, 0]).pdf(x) + 0.7 * multivariate_normal([3, 0]).pdf(x)
    >>> bool(np.isclose(logp({"x": x}), np.log(mix)))
    True
    """
    means, sds, log_w = mixture_parts(means, sds, weights)
    dim = means.shape[1]
    with pm.Model() as model:
        x, log_prior = vector_variable(name, dim, np.zeros(dim), prior_sd)
        sq = pt.sum((x[None, :] - means) ** 2, axis=1)
        pm.Potential(f"{name}_logp", pt.logsumexp(log_w - 0.5 * sq / sds**2) - log_prior)
    return model


def gaussian_model(cov: ArrayLike, mean: ArrayLike | None = None, name: str = "x") -> pm.Model:
    """PyMC model with one multivariate normal variable ``N(mean, cov)``.

    Parameters
    ----------
    cov : array_like, shape (d, d)
        Symmetric positive definite covariance.
    mean : array_like, shape (d,), optional
        Mean (default zero); it is also the initial value.
    name : str
        Name of the variable.

    Returns
    -------
    pymc.Model

    References
    ----------
    .. [1] Roberts, G. O., Gelman, A., Gilks, W. R. (1997). Weak convergence and optimal
       scaling of random walk Metropolis algorithms. Annals of Applied Probability 7(1),
       110-120 (Gaussian targets, on which the acceptance rate 0.234 is optimal).

    Examples
    --------
    >>> model = gaussian_model(np.diag([1.0, 4.0]), mean=[1.0, 2.0])
    >>> model.initial_point()["x"]
    array([1., 2.])
    >>> value = model.compile_logp()({"x": np.array([1.0, 2.0])})
    >>> bool(np.isclose(value, -np.log(2 * np.pi * 2.0)))  # 1 / sqrt(det(2 pi cov))
    True
    """
    cov = np.asarray(cov, dtype=float)
    if cov.ndim != 2 or cov.shape[0] != cov.shape[1]:
        raise ValueError(f"cov must be a square matrix, got shape {cov.shape}")
    if not np.allclose(cov, cov.T):
        raise ValueError("cov must be symmetric")
    try:
        np.linalg.cholesky(cov)
    except np.linalg.LinAlgError as err:
        raise ValueError("cov must be positive definite") from err
    d = cov.shape[0]
    mean = np.zeros(d) if mean is None else np.asarray(mean, dtype=float)
    if mean.shape != (d,):
        raise ValueError(f"mean must have shape ({d},), got {mean.shape}")
    with pm.Model() as model:
        pm.MvNormal(name, mu=mean, cov=cov, shape=(d,), initval=mean.copy())
    return model


class NumpyLogp(Op):
    """PyTensor ``Op`` computing ``fn(x)`` for a vector ``x``: a NumPy log density in a model.

    ``fn`` maps a 1-d float array to a float; it receives a copy of the input, so it may
    modify it.  The ``Op`` has no gradient (gradient-based samplers are not assigned to it).
    Unlike PyTensor's ``as_op`` it pickles with ``cloudpickle`` whatever ``fn`` is (a lambda,
    a ``functools.partial``), so its models run with ``cores > 1``.  Count its evaluations
    with :func:`pymc_kameleon.models.counting.add_counter` (:func:`counted_model` does).

    Parameters
    ----------
    fn : callable
        ``fn(x: np.ndarray) -> float``.
    name : str, optional
        Used in printed graphs.

    Examples
    --------
    >>> import pytensor
    >>> op = NumpyLogp(lambda x: -0.5 * float(x @ x))
    >>> x = pt.dvector("x")
    >>> f = pytensor.function([x], op(x))
    >>> float(f(np.ones(3)))
    -1.5
    """

    def __init__(self, fn: Callable[[np.ndarray], float], name: str | None = None):
        self.fn = fn
        self.name = name if name is not None else getattr(fn, "__name__", "logp")

    def __str__(self) -> str:
        return f"NumpyLogp{{{self.name}}}"

    def make_node(self, x) -> Apply:
        x = pt.as_tensor_variable(x)
        if x.ndim != 1:
            raise ValueError(f"NumpyLogp takes a vector, got a {x.ndim}-d input")
        return Apply(self, [x], [pt.dscalar()])

    def perform(self, node, inputs, output_storage) -> None:
        value = self.fn(np.array(inputs[0], dtype=float, copy=True))
        output_storage[0][0] = np.asarray(value, dtype="float64").reshape(())

    def grad(self, inputs, output_gradients):
        comment = f"NumpyLogp {self.name!r} wraps a NumPy function and has no gradient"
        return [grad_not_implemented(self, 0, inputs[0], comment)]


def counted_model(
    logp_fn: Callable[[np.ndarray], float],
    dim: int,
    initval: ArrayLike | None = None,
    name: str = "x",
) -> tuple[pm.Model, EvalCounter]:
    """PyMC model with log density ``logp_fn`` whose evaluations are counted.

    Builds a ``pm.Flat`` vector ``name`` of shape ``(dim,)`` and the potential
    ``pm.Potential(f"{name}_logp", NumpyLogp(logp_fn)(x))``, and the evaluation counter of
    :func:`pymc_kameleon.models.counting.add_counter`.  Reset ``op.count = 0`` right before the
    run you measure (PyMC evaluates the density while setting up, e.g. to check the initial
    point) and sample with ``cores=1``.

    Parameters
    ----------
    logp_fn : callable
        ``logp_fn(x: np.ndarray of shape (dim,)) -> float``, e.g.
        ``functools.partial(pymc_kameleon.models.targets.banana_logp, b=0.1)``.
    dim : int
        Dimension of the variable.
    initval : array_like, shape (dim,), optional
        Initial value (default zeros); ``logp_fn`` must be finite there.
    name : str
        Name of the vector variable.

    Returns
    -------
    model : pymc.Model
        The model.
    op : pymc_kameleon.models.counting.EvalCounter
        Its counter (``op.count``).

    References
    ----------
    .. [1] Strathmann, H. (2018). Kernel methods for Monte Carlo. PhD thesis, UCL,
       Section 5.3.2 (samplers compared at equal numbers of likelihood evaluations).

    Examples
    --------
    >>> from functools import partial
    >>> from pymc_kameleon.models.targets import banana_logp
    >>> model, op = counted_model(partial(banana_logp, b=0.1), dim=2)
    >>> logp = model.compile_logp()
    >>> op.count = 0
    >>> values = [logp({"x": np.array([0.0, float(k)])}) for k in range(5)]
    >>> op.count
    5
    """
    dim = int(dim)
    if dim < 1:
        raise ValueError(f"dim must be a positive integer, got {dim}")
    init = np.zeros(dim) if initval is None else np.asarray(initval, dtype=float)
    if init.shape != (dim,):
        raise ValueError(f"initval must have shape ({dim},), got {init.shape}")
    with pm.Model() as model:
        x = pm.Flat(name, shape=(dim,), initval=init.copy())
        pm.Potential(f"{name}_logp", NumpyLogp(logp_fn)(x))
    return model, add_counter(model)
