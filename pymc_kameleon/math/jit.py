"""The Numba set-up of the compiled kernels: one switch, two decorators, one shared helper.

:mod:`pymc_kameleon.math.kamh` (the KAMH Gram) and :mod:`pymc_kameleon.math.compiled` (the
RFF, HMC and linear-algebra kernels) compile their per-iteration numerics with the
decorators here.  Without Numba (not installed, or ``PYMC_KAMELEON_NO_NUMBA=1`` in the
environment) :data:`HAVE_NUMBA` is False and those modules bind their public names to the
NumPy references instead, so importing and sampling work everywhere; only the cost per
iteration differs.  Functions are compiled on first call and cached on disk
(``cache=True``), so the compile time is paid once per machine, not per process.

References
----------
- Lam, S. K., Pitrou, A., Seibert, S. (2015). Numba: a LLVM-based Python JIT compiler.
  LLVM-HPC workshop.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np

__all__ = ["HAVE_NUMBA", "jit", "jit_reduce", "row_gram"]

try:  # pragma: no branch
    if os.environ.get("PYMC_KAMELEON_NO_NUMBA"):
        raise ImportError("disabled by PYMC_KAMELEON_NO_NUMBA")
    from numba import njit as _njit

    HAVE_NUMBA = True
except ImportError:  # pragma: no cover - exercised with PYMC_KAMELEON_NO_NUMBA=1
    HAVE_NUMBA = False


def _as_python(kernel: Callable) -> Callable:
    """Without Numba a kernel stays Python (its module binds the NumPy reference instead)."""
    return kernel


if HAVE_NUMBA:
    #: Compile a kernel: IEEE arithmetic in the order written.
    jit = _njit(cache=True, nogil=True, error_model="numpy")
    #: Compile a kernel whose reductions may be reassociated, so that the loops over the
    #: history vectorise; no "finite math only" flags, so NaN and infinity propagate as in
    #: the references.
    jit_reduce = _njit(cache=True, nogil=True, error_model="numpy",
                       fastmath={"reassoc", "contract"})
else:  # pragma: no cover - exercised with PYMC_KAMELEON_NO_NUMBA=1
    jit = jit_reduce = _as_python


def _row_gram(A, scale):
    """``scale * A A^T`` for ``A`` of shape ``(d, n)``, C-contiguous: the ``d (d + 1) / 2``
    entries of the symmetric result as contiguous dot products of the rows of ``A``."""
    d, n = A.shape
    G = np.empty((d, d))
    for j in range(d):
        for k in range(j, d):
            total = 0.0
            for i in range(n):
                total += A[j, i] * A[k, i]
            G[j, k] = scale * total
            G[k, j] = scale * total
    return G


#: :func:`_row_gram` compiled, called by the compiled KAMH and F-KAMH Grams
#: (:func:`~pymc_kameleon.math.kamh.kamh_gram_t`,
#: :func:`~pymc_kameleon.math.compiled.rff_lowrank_gram_t`).
row_gram = jit_reduce(_row_gram)
