"""The ceiling of a random walk against ``pm.Metropolis`` in ESS per evaluation, low d.

Usage::

    python -m benchmarks.research.rw_ceiling [--dims 2,3,4] [--chains 64] [--evals 20000]

On a standard Gaussian ``N(0, I_d)`` (what a posterior looks like to our steps after the
warm-up's whitening when it is close to Gaussian), ESS per log-density evaluation of

* the best joint random walk ``x* = x + s e``, ``e ~ N(0, I_d)``, over a grid of ``s``
  around ``2.38 / sqrt(d)`` (one evaluation per iteration, like our steps), and
* the best one-coordinate-at-a-time random walk (Metropolis within Gibbs, what
  ``pm.Metropolis`` does for scalar variables), over a grid of ``s`` around 2.4,

both from ``--chains`` independent chains started at the target (min over coordinates of
ArviZ's bulk ESS of the pooled chains).  ``pm.Metropolis`` also evaluates the density at
the current point of every update (2 evaluations per coordinate update, see the suite page),
so the ratio of our ESS per evaluation to its own on such a posterior is at most twice the
ratio printed here.  Kernel proposals reduce to this random walk on near-Gaussian targets.

The results are on ``docs/benchmarks/suite.md``.
"""

from __future__ import annotations

import argparse

import numpy as np

__all__ = ["joint_walk", "main", "one_coordinate_walk"]


def _ess_per_eval(samples: np.ndarray, evals: int) -> float:
    """Min over coordinates of the bulk ESS of ``samples`` (chains, draws, d) per evaluation."""
    import arviz as az

    chains = samples.shape[0]
    ess = min(float(az.ess(samples[:, :, j])) for j in range(samples.shape[2]))
    return ess / (chains * evals)


def joint_walk(d: int, scale: float, chains: int, evals: int,
               rng: np.random.Generator) -> float:
    """ESS per evaluation of the joint random walk with step ``scale`` on ``N(0, I_d)``."""
    x = rng.standard_normal((chains, d))
    logp = -0.5 * np.einsum("ij,ij->i", x, x)
    out = np.empty((chains, evals, d))
    for t in range(evals):
        y = x + scale * rng.standard_normal((chains, d))
        logp_y = -0.5 * np.einsum("ij,ij->i", y, y)
        accept = np.log(rng.random(chains)) < logp_y - logp
        x[accept], logp[accept] = y[accept], logp_y[accept]
        out[:, t] = x
    return _ess_per_eval(out, evals)


def one_coordinate_walk(d: int, scale: float, chains: int, evals: int,
                        rng: np.random.Generator) -> float:
    """ESS per evaluation of coordinate-wise random-walk updates (``evals // d`` sweeps)."""
    sweeps = evals // d
    x = rng.standard_normal((chains, d))
    out = np.empty((chains, sweeps, d))
    for t in range(sweeps):
        for j in range(d):
            y = x[:, j] + scale * rng.standard_normal(chains)
            accept = np.log(rng.random(chains)) < -0.5 * (y * y - x[:, j] ** 2)
            x[accept, j] = y[accept]
        out[:, t] = x
    return _ess_per_eval(out, sweeps * d)


def main(argv: list[str] | None = None) -> list[tuple[int, float, float]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", default="2,3,4")
    parser.add_argument("--chains", type=int, default=64)
    parser.add_argument("--evals", type=int, default=20000, help="evaluations per chain")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    print("| d | joint walk: ESS per evaluation (best s) | one coordinate at a time (best s) "
          "| ratio | ours ÷ pm.Metropolis, both at their best scale (2 evaluations per "
          "update) |")
    print("|---|---|---|---|---|")
    rows = []
    for d in (int(v) for v in args.dims.split(",")):
        base = 2.38 / np.sqrt(d)
        joint = max((joint_walk(d, f * base, args.chains, args.evals, rng), f * base)
                    for f in (0.6, 0.8, 1.0, 1.2))
        coord = max((one_coordinate_walk(d, s, args.chains, args.evals, rng), s)
                    for s in (2.0, 2.4, 2.8))
        ratio = joint[0] / coord[0]
        rows.append((d, joint[0], coord[0]))
        print(f"| {d} | {joint[0]:.4f} ({joint[1]:.2f}) | {coord[0]:.4f} ({coord[1]:.1f}) "
              f"| {ratio:.2f} | {2 * ratio:.2f} |", flush=True)
    return rows


if __name__ == "__main__":
    main()
