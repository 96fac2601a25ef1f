"""The banana, flower and mixture targets: log densities, exact samplers, coverage checks.

Pure NumPy / SciPy (no PyMC).  :func:`banana_coverage_error` checks a sampler's draws against
the exact answer, as in the experiments of Sejdinovic et al. (2014, Section 5.2); the PyMC model
of the target is :func:`pymc_kameleon.models.banana_model`.  The flower target (used by the
benchmarks and tests; its PyMC model is :func:`pymc_kameleon.models.synthetic.flower_model`)
has no closed-form regions: :func:`quantile_coverage_error` compares draws with a large
exact sample of :func:`flower_sample` instead.  :func:`mixture_logp`, a normalised mixture
of isotropic Gaussians, has separated modes with known weights (its PyMC model is
:func:`pymc_kameleon.models.synthetic.gaussian_mixture_model`).

Banana ``B(b, v)`` (Haario et al., 1999), ``d >= 2``::

    B(y; b, v) = N(y1; 0, v) N(y2; b (y1^2 - v), 1) prod_{j>=3} N(yj; 0, 1).

The map ``z = (y1 / sqrt(v), y2 - b (y1^2 - v), y3, ..., yd)`` sends ``B(b, v)`` to
``N(0, I_d)``, so ``|z|^2 ~ chi2_d`` and the probability of the region ``|z|^2 <= chi2_d.ppf(q)``
is exactly ``q``.  :func:`banana_coverage_error` compares the fraction of draws in these regions
with ``q`` for ``q = 0.1, ..., 0.9``.

Flower ``F(r0, A, w, s)``, ``d >= 2``, unnormalised::

    F(x) = exp(-(r - r0 - A cos(w atan2(x2, x1)))^2 / (2 s^2)) prod_{j>=3} N(xj; 0, 1),

with ``r = sqrt(x1^2 + x2^2)`` (the paper prints the exponent without the square; the square is
meant).  ``A = 0`` is a ring of radius ``r0``.  Its mean is zero by symmetry when ``A = 0`` or
``w`` is an integer with ``|w| >= 2`` (rotations by ``2 pi / w``); the normalising constant has
no closed form (:func:`flower_log_normaliser` computes it by one-dimensional quadrature).
:func:`flower_sample` draws exact i.i.d. samples, so the generic
:func:`quantile_coverage_error` against a large exact sample plays the role of the banana's
closed-form metric (:func:`pymc_kameleon.models.targets.banana_coverage_error`).

All functions take the draws as an array of shape ``(..., d)`` (e.g. ``(n, d)``, or
``(chains, draws, d)`` as stored by ArviZ); log densities are vectorised over the leading axes.

* :mod:`.banana`: the banana's density, exact sampler and exact coverage;
* :mod:`.flower`: the flower's density, normalising constant and exact sampler;
* :mod:`.mixture`: a mixture of isotropic Gaussians (separated modes, known weights);
* :mod:`.coverage`: what both share: the levels :data:`.QUANTILE_LEVELS`,
  :func:`squared_norm` and the sample-based :func:`quantile_coverage_error`.

Every name is importable from ``pymc_kameleon.models.targets`` itself.

References
----------
- Haario, Saksman, Tamminen (1999). Adaptive proposal distribution for random walk
  Metropolis algorithm. Computational Statistics 14(3), 375-395.
- Sejdinovic, Strathmann, Lomeli, Andrieu, Gretton (2014). Kernel adaptive
  Metropolis-Hastings. ICML 2014, Section 5.2.
"""

# LOG_2PI, RNGLike and _sample_radius stay importable from here, as before the split, though
# not in __all__: the model factories use the constant, tests/test_targets.py the sampler
from .banana import (
    banana_coverage,
    banana_coverage_error,
    banana_logp,
    banana_sample,
    banana_to_standard,
)
from .coverage import LOG_2PI as LOG_2PI
from .coverage import QUANTILE_LEVELS, quantile_coverage, quantile_coverage_error, squared_norm
from .coverage import RNGLike as RNGLike
from .flower import _sample_radius as _sample_radius
from .flower import flower_log_normaliser, flower_logp, flower_sample
from .mixture import mixture_logp, mixture_parts

__all__ = [
    "QUANTILE_LEVELS",
    "banana_coverage",
    "banana_coverage_error",
    "banana_logp",
    "banana_sample",
    "banana_to_standard",
    "flower_log_normaliser",
    "flower_logp",
    "flower_sample",
    "mixture_logp",
    "mixture_parts",
    "quantile_coverage",
    "quantile_coverage_error",
    "squared_norm",
]

