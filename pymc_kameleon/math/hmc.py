"""Leapfrog integration of Hamiltonian dynamics with a user-supplied gradient.

The Hamiltonian is ``H(q, p) = -log pi(q) + |p|^2 / 2`` (identity mass matrix).  Kernel HMC
passes the gradient of a score-matching surrogate of ``log pi`` (see
:mod:`pymc_kameleon.math.score_matching`); the leapfrog map is volume preserving and
reversible for *any* gradient field that is a function of ``q`` alone, so the Metropolis
correction with the true ``log pi`` keeps the chain exact.

References
----------
- Neal (2011). MCMC using Hamiltonian dynamics. Handbook of Markov Chain Monte Carlo,
  Ch. 5.
- Strathmann (2018). Kernel methods for Monte Carlo. PhD thesis, Sections 4.1 and 4.3.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["default_max_jump", "hamiltonian_accept_prob", "jumps_too_far", "kinetic_energy",
           "leapfrog"]


def kinetic_energy(p: np.ndarray) -> float:
    """``|p|^2 / 2``, the kinetic energy for an identity mass matrix.

    Parameters
    ----------
    p : array_like, shape (d,)
        Momentum.

    Returns
    -------
    float

    References
    ----------
    .. [1] Neal, R. M. (2011). MCMC using Hamiltonian dynamics. Handbook of Markov Chain
       Monte Carlo, Chapter 5.

    Examples
    --------
    >>> import numpy as np
    >>> kinetic_energy(np.array([3.0, 4.0]))
    12.5
    """
    p = np.asarray(p, dtype=float)
    return float(0.5 * (p @ p))


def leapfrog(
    q: np.ndarray,
    p: np.ndarray,
    grad_logp: Callable[[np.ndarray], np.ndarray],
    step_size: float,
    n_steps: int,
) -> tuple[np.ndarray, np.ndarray]:
    """``n_steps`` leapfrog steps for ``H(q, p) = -log pi(q) + |p|^2 / 2``.

    Half a momentum step, then alternating full position and momentum steps, and a final
    half momentum step; ``grad_logp`` is called ``n_steps + 1`` times.  The inputs are not
    modified.  Non-finite gradients propagate into the result (the caller's Metropolis step
    then rejects).

    Parameters
    ----------
    q, p : ndarray, shape (d,)
        Start position and momentum.
    grad_logp : callable
        ``grad_logp(q)`` returns the gradient of the (surrogate) log density, shape ``(d,)``.
    step_size : float
        Step size ``eps`` (an array of shape ``(d,)`` also works, as a diagonal scaling).
    n_steps : int
        Number of steps ``L >= 0``; ``0`` returns copies of the inputs.

    Returns
    -------
    q_new, p_new : ndarray, shape (d,)

    References
    ----------
    .. [1] Neal, R. M. (2011). MCMC using Hamiltonian dynamics. Handbook of Markov Chain
       Monte Carlo, Chapter 5, Section 5.2.3.
    .. [2] Strathmann, H. (2018). Kernel methods for Monte Carlo. PhD thesis, UCL,
       Section 4.1 (kernel induced Hamiltonian flow).

    Examples
    --------
    A standard normal: the exact flow rotates ``(q, p)``; energy is nearly conserved.

    >>> import numpy as np
    >>> q, p = np.array([1.0]), np.array([0.0])
    >>> q1, p1 = leapfrog(q, p, lambda x: -x, step_size=0.01, n_steps=157)  # t ~ pi / 2
    >>> bool(abs(q1[0]) < 0.01 and abs(p1[0] + 1.0) < 0.01)
    True
    """
    if n_steps < 0:
        raise ValueError(f"n_steps must be >= 0, got {n_steps}")
    q = np.array(q, dtype=float)
    p = np.array(p, dtype=float)
    if n_steps == 0:
        return q, p
    eps = step_size
    p = p + 0.5 * eps * np.asarray(grad_logp(q))
    for i in range(n_steps):
        q = q + eps * p
        g = np.asarray(grad_logp(q))
        p = p + (eps if i < n_steps - 1 else 0.5 * eps) * g
    return q, p


def hamiltonian_accept_prob(
    log_density: Callable[[np.ndarray], float],
    q0: np.ndarray,
    p0: np.ndarray,
    q1: np.ndarray,
    p1: np.ndarray,
) -> float:
    """``min(1, exp(-(H(q1, p1) - H(q0, p0))))`` for ``H(q, p) = -log_density(q) + |p|^2 / 2``.

    With the surrogate's log density this is the acceptance probability kernel HMC would have
    if the surrogate were the target: it measures the integrator's energy error, is free of
    likelihood-estimator noise and costs no target evaluation.  Non-finite energies give 0.

    Parameters
    ----------
    log_density : callable
        ``log_density(q)`` returns a float (e.g. a surrogate's ``log_density``).
    q0, p0, q1, p1 : ndarray, shape (d,)
        Start and end of the trajectory.

    Returns
    -------
    float

    References
    ----------
    .. [1] Neal, R. M. (2011). MCMC using Hamiltonian dynamics. Handbook of Markov Chain
       Monte Carlo, Chapter 5, Section 5.3.3.
    .. [2] Strathmann, H. (2018). Kernel methods for Monte Carlo. PhD thesis, UCL,
       Section 4.1.

    Examples
    --------
    >>> import numpy as np
    >>> f = lambda q: -0.5 * float(q @ q)
    >>> q0, p0 = np.array([1.0]), np.array([0.0])
    >>> q1, p1 = leapfrog(q0, p0, lambda q: -q, step_size=0.1, n_steps=10)
    >>> hamiltonian_accept_prob(f, q0, p0, q1, p1) > 0.99
    True
    """
    with np.errstate(all="ignore"):
        log_a = (float(log_density(q1)) - float(log_density(q0))
                 + kinetic_energy(p0) - kinetic_energy(p1))
    return float(np.exp(min(log_a, 0.0))) if np.isfinite(log_a) else 0.0


def default_max_jump(dim: int) -> float:
    """``10 (1 + sqrt(d))``: the longest jump, in whitened posterior sds, that kernel HMC
    evaluates.

    On the whitened posterior (about a standard Gaussian) an exact Hamiltonian trajectory
    stays in the energy level set of its start, of diameter about ``2 sqrt(2 d)``; the bound
    is 3.5 times that plus 10.  Trajectories of a surrogate extrapolating outside its
    history go far beyond it (docs/algorithms/kernel_hmc.md, "Trajectories that leave the
    posterior").

    Parameters
    ----------
    dim : int
        Dimension ``d`` of the sampled space.

    Returns
    -------
    float

    Examples
    --------
    >>> default_max_jump(4)
    30.0
    """
    return 10.0 * (1.0 + float(np.sqrt(dim)))


def jumps_too_far(q0: np.ndarray, q1: np.ndarray, max_jump: float) -> bool:
    """Whether ``|q1 - q0| > max_jump`` (Euclidean; False if the distance is NaN).

    Rejecting such a proposal without evaluating the target keeps a Metropolis-Hastings
    kernel exact: the rule is symmetric in the two points, so it multiplies both sides of
    detailed balance by the same indicator (for a Hamiltonian proposal the involution
    ``(q0, p0) -> (q1, -p1)`` maps a pair to one at the same distance).

    Parameters
    ----------
    q0, q1 : ndarray, shape (d,)
        Start and end of a proposal (whitened coordinates).
    max_jump : float
        The bound (``inf`` never rejects).

    Returns
    -------
    bool

    References
    ----------
    .. [1] Hastings, W. K. (1970). Monte Carlo sampling methods using Markov chains and
       their applications. Biometrika 57(1), 97-109 (the acceptance ``s(x, y) / (1 +
       t(x, y))`` is exact for any symmetric ``s``; the indicator times Metropolis' ``s``
       is one).

    Examples
    --------
    >>> import numpy as np
    >>> jumps_too_far(np.zeros(2), np.array([3.0, 4.0]), 4.9), jumps_too_far(
    ...     np.zeros(2), np.array([3.0, 4.0]), 5.0)
    (True, False)
    """
    diff = np.asarray(q1, dtype=float) - np.asarray(q0, dtype=float)
    return bool(float(diff @ diff) > max_jump * max_jump)
