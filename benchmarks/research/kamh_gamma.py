"""Why KAMH mixes slower than the whitened random walk on near-Gaussian posteriors: gamma.

Usage::

    python -m benchmarks.research.kamh_gamma --part geometry
    python -m benchmarks.research.kamh_gamma --part suite [--step kamh] [--gammas auto,0.1,0.7]
                                    [--relative] [--models eight-schools-nc,logistic,...]
                                    [--seeds 1,2]
    python -m benchmarks.research.kamh_gamma --part paper --target banana-strong [--chains 2]
                                    [--out DIR] [--tune N --draws N]

* ``geometry``: KAMH's adaptive part ``G(y) = M H M^T`` on 1000 draws of N(0, I_d) (what the
  history looks like in whitened coordinates when the posterior is near Gaussian), at points
  ``y`` of squared radius ``d/2``, ``d`` and ``3d/2``: the variance of ``G`` in the radial
  direction ``y / |y|`` over the mean tangential one, and ``trace(G) / d``, medians over 20
  directions.  A ratio below 1 means the proposal moves the chain outward and inward less
  than sideways, although the radius is what a random walk mixes slowest;
* ``suite``: ``KameleonStep(gamma=g)`` (or ``FastKameleonStep``) with ``pm.sample``'s defaults
  on suite models (:func:`benchmarks.suite.variants.compare_variants`); with ``--relative``
  the values are multiples of the random-walk scale, ``gamma = g * 2.38 / sqrt(d)``;
  ``auto`` is the default, ``gamma`` chosen by trials while tuning;
* ``paper``: KAMH and F-KAMH with the default (trials) and with ``gamma=0.1`` on one of the
  papers' 8-d targets at the paper's budget (:func:`benchmarks.synthetic.run_benchmark`,
  the target's tune and draws, chains one after the other); the table goes to
  ``--out`` (default ``benchmarks/results/gamma_paper``, not kept in git) as ``<target>.md``.

The results are on ``docs/benchmarks/kamh_gamma.md``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from pymc_kameleon import FastKameleonStep, KameleonStep
from pymc_kameleon.math.kamh import kamh_gram
from pymc_kameleon.math.kernels import median_heuristic

__all__ = ["main", "radial_share"]


def radial_share(Z: np.ndarray, y: np.ndarray, bandwidth: float) -> tuple[float, float]:
    """Radial over mean tangential variance of KAMH's ``G(y)``, and ``trace(G) / d``."""
    d = y.size
    G = kamh_gram(y, Z, bandwidth)
    u = y / np.linalg.norm(y)
    radial = float(u @ G @ u)
    tangential = (float(np.trace(G)) - radial) / (d - 1)
    return radial / tangential, float(np.trace(G)) / d


def _geometry(dims) -> None:
    rng = np.random.default_rng(0)
    print("| d | bandwidth | radial / tangential at \\|y\\|² = d/2, d, 3d/2 "
          "| trace(G)/d at the same radii |")
    print("|---|---|---|---|")
    for d in dims:
        Z = rng.normal(size=(1000, d))
        s = median_heuristic(Z)
        ratios, scales = [], []
        for r2 in (0.5 * d, d, 1.5 * d):
            pairs = []
            for _ in range(20):
                u = rng.normal(size=d)
                pairs.append(radial_share(Z, np.sqrt(r2) * u / np.linalg.norm(u), s))
            ratios.append(np.median([p[0] for p in pairs]))
            scales.append(np.median([p[1] for p in pairs]))
        print(f"| {d} | {s:.2f} | " + ", ".join(f"{r:.2f}" for r in ratios) + " | "
              + ", ".join(f"{v:.3g}" for v in scales) + " |", flush=True)


def _paper(target: str, chains: int, out: Path, tune: int | None = None,
           draws: int | None = None) -> None:
    from ..common import SAMPLERS, TARGETS, SamplerSpec
    from ..synthetic import run_benchmark

    variants = {"kamh-g01": ("KameleonStep, gamma 0.1", KameleonStep),
                "fkamh-g01": ("FastKameleonStep, gamma 0.1", FastKameleonStep)}
    for key, (label, cls) in variants.items():  # chains run in this process (jobs=1)
        SAMPLERS[key] = SamplerSpec(key, label, lambda cls=cls: cls(gamma=0.1), ours=True)
    t = TARGETS[target]
    run_benchmark(t, tune or t.tune, draws or t.draws, chains, out,
                  samplers=["kamh", "kamh-g01", "fkamh", "fkamh-g01"], jobs=1, seed=1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=("geometry", "suite", "paper"), required=True)
    parser.add_argument("--dims", default="2,10,30")
    parser.add_argument("--step", choices=("kamh", "fkamh"), default="kamh")
    parser.add_argument("--gammas", default="0.1,0.3,0.7")
    parser.add_argument("--relative", action="store_true",
                        help="gammas in units of the random-walk scale 2.38 / sqrt(d)")
    parser.add_argument("--models", default="eight-schools-nc,logistic,poisson,scales,"
                                            "banana-moderate,banana-strong")
    parser.add_argument("--seeds", default="1,2")
    parser.add_argument("--target", default="banana-strong")
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--tune", type=int, help="override the paper's burn-in (paper part)")
    parser.add_argument("--draws", type=int, help="override the paper's draws (paper part)")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/gamma_paper"))
    args = parser.parse_args(argv)
    if args.part == "geometry":
        _geometry([int(d) for d in args.dims.split(",")])
        return
    if args.part == "paper":
        _paper(args.target, args.chains, args.out, args.tune, args.draws)
        return
    from ..common import model_dim
    from ..suite.variants import compare_variants

    cls = KameleonStep if args.step == "kamh" else FastKameleonStep

    def factory(g: float | None):
        if g is None:
            return lambda: cls()
        if not args.relative:
            return lambda: cls(gamma=g)

        def make():  # the dimension of the model being sampled
            return cls(gamma=g * 2.38 / np.sqrt(model_dim()))
        return make

    unit = " x 2.38/sqrt(d)" if args.relative else ""
    gammas = [None if g == "auto" else float(g) for g in args.gammas.split(",")]
    compare_variants(args.models.split(","), [int(s) for s in args.seeds.split(",")],
                     {"gamma auto" if g is None else f"gamma {g:g}{unit}": factory(g)
                      for g in gammas})


if __name__ == "__main__":
    main()
