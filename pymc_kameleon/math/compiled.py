"""Compiled (Numba) RFF, HMC and linear-algebra kernels of the samplers' iterations.

Every function here has a pure NumPy reference elsewhere in :mod:`pymc_kameleon.math`, which
stays the definition and the test oracle (``tests/test_compiled.py`` checks agreement to
``1e-10``).  The compiled KAMH Gram lives with its reference in :mod:`pymc_kameleon.math.kamh`
(:func:`~pymc_kameleon.math.kamh.kamh_gram_t`).

==========================  ====================================================================
compiled                    reference
==========================  ====================================================================
:func:`rff_lowrank_gram_t`  :func:`pymc_kameleon.math.rff.lowrank_gram` (frequencies transposed)
:func:`rff_full_gram`       :func:`pymc_kameleon.math.rff.full_gram`
:func:`rff_leapfrog`        :func:`pymc_kameleon.math.hmc.leapfrog` with the KMC finite gradient
:func:`cholesky_update`     :func:`pymc_kameleon.math.linalg.cholesky_update`
:func:`gaussian_factor`     :func:`pymc_kameleon.math.linalg.gaussian_factor`
:func:`gaussian_logpdf`     :meth:`pymc_kameleon.math.linalg.MultivariateNormal.logpdf`
==========================  ====================================================================

Without Numba (not installed, or ``PYMC_KAMELEON_NO_NUMBA=1`` in the environment:
:data:`~pymc_kameleon.math.jit.HAVE_NUMBA` is False) the names of this module *are* the
references, so importing and sampling work everywhere; only the cost per iteration differs.
The decorators and the compile cache are those of :mod:`pymc_kameleon.math.jit`.
"""

from __future__ import annotations

import math

import numpy as np

from . import linalg as _linalg_ref
from . import rff as _rff_ref
from .jit import HAVE_NUMBA, jit, jit_reduce, row_gram

__all__ = [
    "HAVE_NUMBA",
    "cholesky_update",
    "gaussian_factor",
    "gaussian_logpdf",
    "rff_full_gram",
    "rff_leapfrog",
    "rff_lowrank_gram_t",
]

_LOG_2PI = math.log(2.0 * math.pi)


def _rff_lowrank_gram_t(y, omega_t, phase, root, sincos):
    """``(R J)^T (R J)`` with ``J = diag(phi'(y)) Omega``, the frequencies stored as rows of
    ``omega_t = Omega.T`` (``(d, n_freq)``, C-contiguous).

    ``root`` is ``R`` (shape ``(r, D)``).  For the sine/cosine pairs the two columns of ``R``
    that share a frequency are combined first (``Rc``, ``(r, n_freq)``), which halves the
    work.  ``(R J)^T = Omega^T Rc^T`` is then made of dot products along the frequencies, every
    operand a contiguous row: four rows of ``Rc`` against two rows of ``omega_t`` at a time,
    eight accumulators that vectorise (for the thin products of small ``d`` a general matrix
    product spends more on its set-up than on the arithmetic; timings:
    ``docs/benchmarks/fkamh_rank.md``, "The proposal product compiled for thin shapes").
    """
    d, m = omega_t.shape
    r = root.shape[0]
    c = math.sqrt(2.0 / root.shape[1])
    a = phase.copy()
    for i in range(d):
        yi = y[i]
        for j in range(m):
            a[j] += omega_t[i, j] * yi
    Rc = np.empty((r, m))
    if sincos:
        cos_a = np.empty(m)
        sin_a = np.empty(m)
        for j in range(m):
            cos_a[j] = c * math.cos(a[j])
            sin_a[j] = c * math.sin(a[j])
        for k in range(r):
            for j in range(m):
                Rc[k, j] = root[k, j] * cos_a[j] - root[k, m + j] * sin_a[j]
    else:
        dphi = np.empty(m)
        for j in range(m):
            dphi[j] = -c * math.sin(a[j])
        for k in range(r):
            for j in range(m):
                Rc[k, j] = root[k, j] * dphi[j]
    Bt = np.empty((d, r))  # (R J)^T
    k4 = r - r % 4
    i2 = d - d % 2
    for k in range(0, k4, 4):
        r0, r1, r2, r3 = Rc[k], Rc[k + 1], Rc[k + 2], Rc[k + 3]
        for i in range(0, i2, 2):
            o0, o1 = omega_t[i], omega_t[i + 1]
            s00 = s01 = s10 = s11 = s20 = s21 = s30 = s31 = 0.0
            for j in range(m):
                b0 = o0[j]
                b1 = o1[j]
                s00 += r0[j] * b0
                s01 += r0[j] * b1
                s10 += r1[j] * b0
                s11 += r1[j] * b1
                s20 += r2[j] * b0
                s21 += r2[j] * b1
                s30 += r3[j] * b0
                s31 += r3[j] * b1
            Bt[i, k], Bt[i, k + 1], Bt[i, k + 2], Bt[i, k + 3] = s00, s10, s20, s30
            Bt[i + 1, k], Bt[i + 1, k + 1], Bt[i + 1, k + 2], Bt[i + 1, k + 3] = s01, s11, s21, s31
        for i in range(i2, d):  # the last row of an odd d
            o0 = omega_t[i]
            s00 = s10 = s20 = s30 = 0.0
            for j in range(m):
                s00 += r0[j] * o0[j]
                s10 += r1[j] * o0[j]
                s20 += r2[j] * o0[j]
                s30 += r3[j] * o0[j]
            Bt[i, k], Bt[i, k + 1], Bt[i, k + 2], Bt[i, k + 3] = s00, s10, s20, s30
    for k in range(k4, r):  # the last r % 4 rows of Rc
        r0 = Rc[k]
        for i in range(d):
            o0 = omega_t[i]
            s00 = 0.0
            for j in range(m):
                s00 += r0[j] * o0[j]
            Bt[i, k] = s00
    return row_gram(Bt, 1.0)


def _rff_grad_into(q, omega_t, phase, theta, sincos, a, g):
    """``g = J(q)^T theta``, the gradient of the surrogate ``theta . phi(q)``, into ``g``
    (``a``: workspace of the ``n_freq`` angles); ``O(n_freq d)``."""
    d, m = omega_t.shape
    c = math.sqrt(2.0 / theta.shape[0])
    for j in range(m):
        a[j] = phase[j]
    for i in range(d):
        qi = q[i]
        for j in range(m):
            a[j] += omega_t[i, j] * qi
    if sincos:  # d/dx [sin, cos](w.x) = [cos, -sin](w.x) w
        for j in range(m):
            a[j] = c * (theta[j] * math.cos(a[j]) - theta[m + j] * math.sin(a[j]))
    else:  # d/dx cos(w.x + b) = -sin(w.x + b) w
        for j in range(m):
            a[j] = -c * theta[j] * math.sin(a[j])
    for i in range(d):
        total = 0.0
        for j in range(m):
            total += a[j] * omega_t[i, j]
        g[i] = total


def _rff_leapfrog(q, p, omega_t, phase, theta, sincos, step, n_steps):
    """:func:`~pymc_kameleon.math.hmc.leapfrog` with the gradient of the finite kernel
    surrogate ``theta . phi`` (KMC finite), ``step`` an array of shape ``(d,)``.  The same
    operations in the same order as the reference; new arrays are returned."""
    d, m = omega_t.shape
    q = q.copy()
    p = p.copy()
    if n_steps == 0:
        return q, p
    a = np.empty(m)
    g = np.empty(d)
    _rff_grad_into(q, omega_t, phase, theta, sincos, a, g)
    for i in range(d):
        p[i] = p[i] + 0.5 * step[i] * g[i]
    for k in range(n_steps):
        for i in range(d):
            q[i] = q[i] + step[i] * p[i]
        _rff_grad_into(q, omega_t, phase, theta, sincos, a, g)
        for i in range(d):
            eps = step[i] if k < n_steps - 1 else 0.5 * step[i]
            p[i] = p[i] + eps * g[i]
    return q, p


def _cholesky_update(L, V):
    """:func:`linalg.cholesky_update` (the same reflections in the same order) with the
    products as loops along the contiguous rows of ``V``; ``L`` and ``V`` updated in place."""
    m, r = V.shape
    v = np.empty(r)
    for k in range(m):
        nv2 = 0.0
        for j in range(r):
            v[j] = V[k, j]
            nv2 += v[j] * v[j]
        if nv2 == 0.0:
            continue
        a = L[k, k]
        h0 = -nv2 / (a + math.sqrt(a * a + nv2))  # = a - r without cancellation (a > 0)
        beta = 2.0 / (h0 * h0 + nv2)
        for i in range(k, m):
            w = L[i, k] * h0
            for j in range(r):
                w += V[i, j] * v[j]
            w *= beta
            L[i, k] -= w * h0
            for j in range(r):
                V[i, j] -= w * v[j]


def _rff_full_gram(y, omega, phase, cov, sincos):
    """``J^T C J = Omega^T (S^T C S) Omega`` with ``J = S Omega`` (``S`` has one nonzero per
    feature row): the symmetric ``D x D`` covariance is first folded to ``(n_freq, n_freq)``,
    one triangle of it, which for the sine/cosine pairs does an eighth of the ``O(D^2 d)``
    work of ``J^T (C J)``.  ``C`` must be symmetric (as ``OnlineMeanCov.cov`` is).
    """
    m = omega.shape[0]
    c = math.sqrt(2.0 / cov.shape[0])
    a = omega @ y
    G = np.empty((m, m))
    if sincos:
        cos_a = c * np.cos(a)
        sin_a = c * np.sin(a)
        for j in range(m):
            for k in range(j, m):
                g = (cos_a[j] * (cov[j, k] * cos_a[k] - cov[j, m + k] * sin_a[k])
                     - sin_a[j] * (cov[m + j, k] * cos_a[k] - cov[m + j, m + k] * sin_a[k]))
                G[j, k] = g
                G[k, j] = g
    else:
        dphi = -c * np.sin(a + phase)
        for j in range(m):
            for k in range(j, m):
                g = dphi[j] * cov[j, k] * dphi[k]
                G[j, k] = g
                G[k, j] = g
    return omega.T @ (G @ omega)


def _gaussian_factor(G, gamma2, scale):
    """Lower Cholesky factor of ``gamma2 I + scale (G + G^T) / 2``; ``ok`` is False when the
    matrix is not numerically positive definite or not finite (the caller then falls back to
    :func:`~pymc_kameleon.math.linalg.safe_cholesky`).  The entries ``gamma2 + scale * G``
    are those of :func:`~pymc_kameleon.math.kamh.proposal_covariance`, formed in the loop
    to save an array per call."""
    d = G.shape[0]
    A = np.empty((d, d))
    for i in range(d):
        for j in range(i + 1):
            diag = gamma2 if i == j else 0.0
            A[i, j] = 0.5 * ((diag + scale * G[i, j]) + (diag + scale * G[j, i]))
    L = np.zeros((d, d))
    half_logdet = 0.0
    for i in range(d):
        for j in range(i + 1):
            s = A[i, j]
            for k in range(j):
                s -= L[i, k] * L[j, k]
            if i == j:
                if not (s > 0.0 and s < np.inf):
                    return L, 0.0, False
                L[i, i] = math.sqrt(s)
                half_logdet += math.log(L[i, i])
            else:
                L[i, j] = s / L[j, j]
    return L, half_logdet, True


def _gaussian_logpdf(x, mean, L, half_logdet):
    """``log N(x | mean, L L^T)`` by forward substitution."""
    d = x.shape[0]
    z = np.empty(d)
    quad = 0.0
    for i in range(d):
        s = x[i] - mean[i]
        for k in range(i):
            s -= L[i, k] * z[k]
        z[i] = s / L[i, i]
        quad += z[i] * z[i]
    return -0.5 * quad - half_logdet - 0.5 * d * _LOG_2PI


def _rff_leapfrog_ref(q, p, omega_t, phase, theta, sincos, step, n_steps):
    """The reference :func:`hmc.leapfrog` with the surrogate's gradient ``J(q)^T theta``."""
    from .hmc import leapfrog

    features = _rff_ref.RandomFourierFeatures(omega_t.T, phase, 1.0,
                                              "sincos" if sincos else "phase")
    return leapfrog(q, p, lambda x: features.jacobian(x).T @ theta, step, n_steps)


def _rff_lowrank_gram_t_ref(y, omega_t, phase, root, sincos):
    """The reference :func:`rff.lowrank_gram` with the compiled version's argument layout."""
    return _rff_ref.lowrank_gram(y, omega_t.T, phase, root, sincos)


if HAVE_NUMBA:
    rff_lowrank_gram_t = jit_reduce(_rff_lowrank_gram_t)
    _rff_grad_into = jit_reduce(_rff_grad_into)  # called by the compiled leapfrog
    rff_leapfrog = jit(_rff_leapfrog)
    rff_full_gram = jit(_rff_full_gram)
    cholesky_update = jit_reduce(_cholesky_update)
    gaussian_factor = jit(_gaussian_factor)
    gaussian_logpdf = jit(_gaussian_logpdf)
else:  # pragma: no cover - exercised with PYMC_KAMELEON_NO_NUMBA=1
    rff_lowrank_gram_t = _rff_lowrank_gram_t_ref
    rff_leapfrog = _rff_leapfrog_ref
    rff_full_gram = _rff_ref.full_gram
    cholesky_update = _linalg_ref.cholesky_update
    gaussian_factor = _linalg_ref.gaussian_factor
    gaussian_logpdf = _linalg_ref.gaussian_logpdf
