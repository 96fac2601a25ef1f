"""Quick-start demo: the strongly twisted 2-d banana with KameleonStep vs PyMC Metropolis.

Run:  python examples/banana.py [--draws 4000] [--tune 2000] [--seed 1]

The banana B(b=0.1, v=100) has an exact check: z = (y1 / 10, y2 - 0.1 (y1^2 - 100)) is
standard normal, so |z|^2 follows a chi-square law with 2 degrees of freedom.  The table
reports ArviZ's summary and the quantile coverage error of |z|^2 (0 is perfect).
"""

from __future__ import annotations

import argparse
import time

import pymc as pm

from pymc_kameleon import KameleonStep
from pymc_kameleon.compat import summary_table
from pymc_kameleon.models import banana_model
from pymc_kameleon.models.targets import banana_coverage_error


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=4000)
    parser.add_argument("--tune", type=int, default=2000)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)

    model = banana_model(dim=2, b=0.1, v=100.0)
    steps = {
        "KameleonStep": lambda: KameleonStep(),
        "pm.Metropolis": pm.Metropolis,
    }
    for name, make_step in steps.items():
        with model:
            start = time.perf_counter()
            idata = pm.sample(
                draws=args.draws,
                tune=args.tune,
                chains=args.chains,
                cores=1,
                step=make_step(),
                random_seed=args.seed,
                progressbar=False,
                compute_convergence_checks=False,
            )
            seconds = time.perf_counter() - start
        x = idata.posterior["x"].values
        error = banana_coverage_error(x.reshape(-1, 2), b=0.1, v=100.0)
        print(f"\n=== {name}: {seconds:.1f} s, acceptance "
              f"{float(idata.sample_stats['accepted'].mean()):.2f}, "
              f"quantile coverage error {error:.3f} ===")
        print(summary_table(idata).to_string())


if __name__ == "__main__":
    main()
