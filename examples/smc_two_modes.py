"""Two modes and a model evidence: ``pm.sample_smc(kernel=KameleonSMC)`` against MCMC.

Run:  python examples/smc_two_modes.py [--draws 1000] [--chains 4] [--seed 1] [--out DIR]

The model has a posterior with two modes of equal mass: ``x ~ N(0, 3^2)``, one observation
``y = 4`` of ``N(x^2, 1)``, so ``x`` is near -2 or +2.  Its evidence ``p(y)`` is a 1-d
integral, computed here by quadrature.  The script runs

* ``pm.sample_smc`` with ``KameleonSMC``: tempering from the prior, the particles reach both
  modes and keep their weights; each chain also estimates the log evidence;
* ``pm.sample`` with ``KameleonStep``: each chain stays in the mode it starts in, so the
  weights it reports depend on where the chains started (no MCMC step crosses between
  modes this far apart).

It prints the share of draws in the mode ``x > 0`` (truth 0.5) and the log evidence
against the quadrature, and saves ``smc_two_modes.png``: the exact density and each
sampler's histogram.  See docs/smc.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pymc as pm  # noqa: E402
from scipy import integrate, stats  # noqa: E402

from pymc_kameleon import KameleonSMC, KameleonStep  # noqa: E402

PRIOR_SD, Y, NOISE_SD = 3.0, 4.0, 1.0


def model() -> pm.Model:
    with pm.Model() as m:
        x = pm.Normal("x", 0.0, PRIOR_SD)
        pm.Normal("y", x**2, NOISE_SD, observed=Y)
    return m


def joint(x: np.ndarray) -> np.ndarray:
    """Prior times likelihood: the unnormalised posterior density."""
    return stats.norm.pdf(x, 0.0, PRIOR_SD) * stats.norm.pdf(Y, x**2, NOISE_SD)


def main(argv: list[str] | None = None) -> dict[str, float]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("."))
    args = parser.parse_args(argv)

    evidence, _ = integrate.quad(joint, -12.0, 12.0, points=[-2.0, 2.0])
    with model():
        smc = pm.sample_smc(args.draws, kernel=KameleonSMC, chains=args.chains, cores=1,
                            random_seed=args.seed, progressbar=False)
        mcmc = pm.sample(draws=args.draws, chains=args.chains, cores=1, step=KameleonStep(),
                         random_seed=args.seed, progressbar=False,
                         compute_convergence_checks=False)
    x_smc = np.asarray(smc.posterior["x"]).reshape(args.chains, -1)
    x_mcmc = np.asarray(mcmc.posterior["x"]).reshape(args.chains, -1)
    # per chain, its last stage's value (earlier stages, and stages past its end, are NaN)
    log_z = [float(a[np.isfinite(a)][-1]) for a in (
        np.asarray(v, dtype=float).ravel()
        for v in np.asarray(smc.sample_stats["log_marginal_likelihood"]))]

    print("share of draws with x > 0 (truth 0.5), per chain:")
    print("  KameleonSMC:  " + " ".join(f"{s:.2f}" for s in (x_smc > 0).mean(axis=1)))
    print("  KameleonStep: " + " ".join(f"{s:.2f}" for s in (x_mcmc > 0).mean(axis=1)))
    print(f"log evidence: quadrature {np.log(evidence):.3f}; KameleonSMC per chain "
          + " ".join(f"{v:.3f}" for v in log_z))

    grid = np.linspace(-4.0, 4.0, 400)
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2), sharey=True)
    for ax, x, name in ((axes[0], x_smc, "pm.sample_smc(kernel=KameleonSMC)"),
                        (axes[1], x_mcmc, "pm.sample(step=KameleonStep())")):
        for chain in x:
            ax.hist(chain, bins=60, range=(-4, 4), density=True, histtype="step")
        ax.plot(grid, joint(grid) / evidence, "k", lw=1.5, label="exact")
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("x (one line per chain)")
    axes[0].legend()
    fig.tight_layout()
    args.out.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out / "smc_two_modes.png", dpi=100)
    return {"share_smc": float((x_smc > 0).mean()), "log_z_error":
            float(np.mean(log_z) - np.log(evidence))}


if __name__ == "__main__":
    main()
