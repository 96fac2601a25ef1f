"""Does a KameleonSMC stage keep exact draws exact?  Its mixture fitted to the other half.

Usage::

    python -m benchmarks.research.stage_invariance [--dims 4 10 14] [--particles 1000 2000]
        [--stages 1] [--reps 60] [--weight 1.0]

Draws ``n`` exact draws of ``N(0, I_d)``, then ``--stages`` rounds of: fit a stage's
proposal (:meth:`pymc_kameleon.particles.proposal.StageProposal.fit`, the package's
defaults), one MH move of every particle (``independent_weight=--weight``).  A move that
leaves the target invariant keeps the particles' mean ``|x|^2`` at ``d`` and the share
beyond the chi-square 95 % point at 0.05.  Per dimension and particle number, over
``--reps`` repetitions: the change of the mean ``|x|^2`` (with its standard error) and of
that tail share, for the stage as built (each half moved by the mixture fitted to the other
half) and for one mixture fitted to every particle it moves (``StageProposal.refit``, the
construction before).  Results: ``docs/benchmarks/smc.md``, "smc-cross-fitted".
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import stats

from pymc_kameleon.particles.proposal import Chains, MixtureMove, StageProposal
from pymc_kameleon.smc import SMCOptions

__all__ = ["drift", "main"]


def drift(d: int, n: int, stages: int, weight: float, fit_to_self: bool,
          rng: np.random.Generator) -> tuple[float, float]:
    """The change of the mean ``|x|^2`` and of the share beyond the chi-square 95 % point
    after ``stages`` rounds of (fit, one move) from ``n`` exact draws."""
    X = rng.standard_normal((n, d))
    r2, edge = np.sum(X**2, axis=1), stats.chi2(d).ppf(0.95)
    before = r2.mean(), np.mean(r2 > edge)
    logp = -0.5 * r2
    options = SMCOptions(independent_weight=weight)
    for _ in range(stages):
        p = StageProposal.fit(X, 0.0, rng, options)
        if fit_to_self:
            p = p.refit(X, rng, options)
        chains = Chains.start(X.copy(), logp.copy(), logp.copy(), np.zeros(n), p)
        MixtureMove()(chains, p, 1.0,
                      lambda Y: (-0.5 * np.sum(Y**2, axis=1), np.zeros(len(Y))), rng, np.asarray)
        X, logp = chains.X, chains.logp
    r2 = np.sum(X**2, axis=1)
    return r2.mean() - before[0], np.mean(r2 > edge) - before[1]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dims", type=int, nargs="+", default=[4, 10, 14])
    parser.add_argument("--particles", type=int, nargs="+", default=[1000, 2000])
    parser.add_argument("--stages", type=int, default=1)
    parser.add_argument("--reps", type=int, default=60)
    parser.add_argument("--weight", type=float, default=1.0)
    args = parser.parse_args(argv)
    print("| d | particles | mixture fitted to | change of mean abs(x)^2 (se) "
          "| change of share beyond chi2 95 % |")
    print("|---|---|---|---|---|")
    for d in args.dims:
        for n in args.particles:
            for fit_to_self, label in ((False, "the other half"), (True, "every particle")):
                rng = np.random.default_rng(0)
                r = np.array([drift(d, n, args.stages, args.weight, fit_to_self, rng)
                              for _ in range(args.reps)])
                se = r[:, 0].std(ddof=1) / np.sqrt(len(r))
                print(f"| {d} | {n} | {label} | {r[:, 0].mean():+.3f} ({se:.3f}) "
                      f"| {r[:, 1].mean():+.4f} |", flush=True)


if __name__ == "__main__":
    main()
