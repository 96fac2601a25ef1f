"""How far F-KAMH's feature covariance can be truncated: its rank, the proposal, the ESS.

Usage::

    python -m benchmarks.research.fkamh_rank --part spectrum
    python -m benchmarks.research.fkamh_rank --part mehler [--dims 2,4,8,10,16,32]
    python -m benchmarks.research.fkamh_rank --part suite [--models eight-schools-nc,logistic,...]
                                    [--seeds 1,2,3] [--tolerances 0,0.03,0.1]

``FastKameleonStep`` proposes with ``(R J)^T (R J)``, ``R^T R`` the leading eigenpairs of the
feature covariance ``C`` that hold all but ``trace_tolerance`` of its trace (issue 15: a
proposal then costs ``O(r D d)`` instead of ``O(D^2 d)``).  The step samples in whitened
coordinates, so every part measures there:

* ``spectrum``: the rank ``r`` at tolerances 0.1 %, 1 %, 3 % and 10 % for ``C`` of 5000
  draws of N(0, I), of a standardised banana and of a standardised Student t(3), with the
  default number of features and the median-heuristic bandwidth, for d = 2 ... 100;
* ``mehler``: why the spectrum decays slowly: the share of the trace held by each
  polynomial degree (:func:`mehler_degree_shares`, Mehler's formula for the Gaussian kernel
  under a Gaussian), the rank of the exact (centred) kernel matrix of 2000 draws of
  N(0, I) at 3 %, the ``d (d + 3) / 2`` polynomials of degree 1 and 2, the F-KAMH rank at
  3 % (as ``spectrum``) and the ratio of the two Gram products' multiply-adds;
* ``suite``: ``pm.sample`` defaults (tune 1000, draws 1000, 4 chains) on suite models, one
  run per seed and tolerance: min bulk ESS and max R-hat
  (:func:`benchmarks.suite.variants.compare_variants`).

The results are on ``docs/benchmarks/fkamh_rank.md``.  Its ``distortion`` part (F-KAMH's
proposal against KAMH's per tolerance) was dropped when the script moved here: its table
names the commit that still has it, and ``tests/test_fast_kameleon.py`` measures the same
distortion in raw coordinates.
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from pymc_kameleon import FastKameleonStep
from pymc_kameleon.adaptation.local_gaussian import default_n_features
from pymc_kameleon.math.kernels import median_heuristic
from pymc_kameleon.math.rff import RandomFourierFeatures

__all__ = ["kernel_matrix_rank", "main", "mehler_degree_shares", "spectrum_ranks"]

TOLERANCES = (1e-3, 1e-2, 3e-2, 1e-1)


def _standardise(X: np.ndarray) -> np.ndarray:
    return (X - X.mean(axis=0)) / X.std(axis=0)


def spectrum_ranks(X: np.ndarray, rng: np.random.Generator,
                   tolerances=TOLERANCES) -> list[int]:
    """Ranks of the feature covariance of ``X`` that leave each tolerance of its trace out."""
    d = X.shape[1]
    s = median_heuristic(X[:1000])
    rff = RandomFourierFeatures.draw(d, default_n_features(d), s, rng, "sincos", "halton")
    w = np.sort(np.linalg.eigvalsh(np.cov(rff.features(X).T)))[::-1]
    tail = 1.0 - np.cumsum(w) / w.sum()
    return [int(np.argmax(tail <= t)) + 1 for t in tolerances]


def _spectrum(dims) -> None:
    rng = np.random.default_rng(0)
    print("| d | D | N(0, I) | banana b = 0.1, standardised | t(3), standardised |")
    print("|---|---|---|---|---|")
    for d in dims:
        X = rng.normal(size=(5000, d))
        banana = X.copy()
        banana[:, 1] = X[:, 1] + 10.0 * (X[:, 0] ** 2 - 1.0) / np.sqrt(2.0)
        t3 = rng.standard_t(3, size=(5000, d))
        cells = [", ".join(map(str, spectrum_ranks(_standardise(Y), rng)))
                 for Y in (X, banana, t3)]
        print(f"| {d} | {default_n_features(d)} | " + " | ".join(cells) + " |", flush=True)
    print(f"\nranks at tolerances {', '.join(f'{t:g}' for t in TOLERANCES)} of the trace")


def mehler_degree_shares(d: int, s2: float, sigma2: float = 1.0,
                         max_degree: int = 12) -> np.ndarray:
    """Shares of the trace of the centred Gaussian-kernel operator held by the polynomial
    degrees ``1 .. max_degree``, under the measure ``N(0, sigma2 I_d)``.

    For ``k(x, y) = exp(-|x - y|^2 / (2 s2))`` the eigenfunctions are products of Hermite
    functions; those of total degree ``K`` are ``C(d + K - 1, K)`` and share the eigenvalue
    ``prop. B^K``, ``B = b / (a + b + c)`` with ``a = 1 / (4 sigma2)``, ``b = 1 / (2 s2)``,
    ``c = sqrt(a^2 + 2 a b)`` (Mehler's formula).  Degree 0, the constant, is what centring
    (the feature mean) removes.  At the median-heuristic bandwidth of a standard normal,
    ``s2 ~ 2 d``, so ``B ~ 1 / (2 (d + 1))`` and degree ``K`` holds a share that tends to
    ``(1/2)^K / K!`` normalised, whatever ``d``: 77 % in degree 1, 19 % in degree 2.

    References
    ----------
    .. [1] Rasmussen, C. E., Williams, C. K. I. (2006). Gaussian Processes for Machine
       Learning, Section 4.3.1 (eigenfunctions of the squared exponential kernel).

    Examples
    --------
    >>> shares = mehler_degree_shares(10, 2.0 * 10)
    >>> [round(float(x), 2) for x in shares[:3]]
    [0.77, 0.19, 0.04]
    """
    a, b = 1.0 / (4.0 * sigma2), 1.0 / (2.0 * s2)
    B = b / (a + b + np.sqrt(a * a + 2.0 * a * b))
    degrees = np.arange(1, max_degree + 1)
    log_mult = np.array([math.lgamma(d + k) - math.lgamma(k + 1) - math.lgamma(d)
                         for k in degrees])  # log C(d + K - 1, K)
    w = np.exp(log_mult + degrees * np.log(B))
    return w / w.sum()


def kernel_matrix_rank(X: np.ndarray, tolerance: float) -> int:
    """Rank of the centred Gaussian-kernel matrix of ``X`` (median-heuristic bandwidth, the
    exact kernel: no features) that leaves ``tolerance`` of its trace out."""
    s = median_heuristic(X)
    n = X.shape[0]
    sq = np.sum(X * X, axis=1)
    K = np.exp(-np.maximum(sq[:, None] + sq[None, :] - 2.0 * X @ X.T, 0.0) / (2.0 * s * s))
    K -= K.mean(axis=0)
    K -= K.mean(axis=1, keepdims=True)
    w = np.sort(np.linalg.eigvalsh(K))[::-1]
    w = w[w > 0]
    tail = 1.0 - np.cumsum(w) / w.sum()
    return int(np.argmax(tail <= tolerance)) + 1 if n else 0


def _mehler(dims, n: int = 2000, tolerance: float = 0.03, n_history: int = 1000) -> None:
    rng = np.random.default_rng(0)
    print("| d | s^2 / d | trace share, degree 1 / 1-2 (Mehler) | d (d + 3) / 2 | rank at 3 %: "
          "exact kernel | rank at 3 %: F-KAMH features (D) | F-KAMH / KAMH multiply-adds |")
    print("|---|---|---|---|---|---|---|")
    for d in dims:
        X = rng.normal(size=(n, d))
        s = median_heuristic(X[:1000])
        shares = mehler_degree_shares(d, s * s)
        exact = kernel_matrix_rank(X, tolerance)
        D = default_n_features(d)
        (r,) = spectrum_ranks(rng.normal(size=(5000, d)), rng, (tolerance,))
        pairs = d * (d + 1) / 2
        ratio = ((D / 2) * d * r + r * pairs) / (n_history * (pairs + 2 * d))
        print(f"| {d} | {s * s / d:.2f} | {shares[0]:.2f} / {shares[0] + shares[1]:.3f} | "
              f"{d * (d + 3) // 2} | {exact} | {r} ({D}) | {ratio:.1f} |", flush=True)
    print(f"\nexact kernel: {n} draws of N(0, I); multiply-adds of the proposal products: "
          f"F-KAMH (D / 2) d r + r d (d + 1) / 2, KAMH n (d (d + 1) / 2 + 2 d) with "
          f"n = {n_history} (and n exponentials)")


def _suite(models, seeds, tolerances) -> None:
    from ..suite.variants import compare_variants

    compare_variants(models, seeds, {f"tol {t:g}": (lambda t=t: FastKameleonStep(
        trace_tolerance=t)) for t in tolerances})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("spectrum", "mehler", "suite"),
                        required=True)
    parser.add_argument("--dims", default="2,8,10,32,100")
    parser.add_argument("--models", default="eight-schools-nc,logistic,poisson,scales,"
                                            "banana-moderate,banana-strong")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--tolerances", default="0,0.03,0.1")
    args = parser.parse_args(argv)
    if args.part == "spectrum":
        _spectrum([int(d) for d in args.dims.split(",")])
        return
    if args.part == "mehler":
        _mehler([int(d) for d in args.dims.split(",")])
        return
    tolerances = [float(t) for t in args.tolerances.split(",")]
    _suite(args.models.split(","), [int(s) for s in args.seeds.split(",")], tolerances)


if __name__ == "__main__":
    main()
