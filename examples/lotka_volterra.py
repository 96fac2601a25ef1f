"""Quick-start demo: a black-box ODE model, KernelHMCStep in place of pm.Metropolis.

Run:  python examples/lotka_volterra.py [--step KernelHMCStep] [--seed 1]

The model (:func:`pymc_kameleon.models.lotka_volterra_model`) fits the Lotka-Volterra
predator-prey equations, solved by SciPy's ``odeint`` inside a PyTensor Op without a gradient,
to 20 noisy observations of both species: 5 positive parameters with strongly correlated
posteriors.  NUTS cannot run on it.  Our step and ``pm.Metropolis`` are each run with
``pm.sample``'s defaults (tune=1000, draws=1000, PyMC's convergence checks) and 4 chains
(``chains=4``; PyMC runs as many at once as it has cores, up to 4, so two at a time on a
2-core machine); only the step changes.  The demo prints, for each, the
wall time (tuning included), the largest R-hat, the smallest bulk ESS, ESS per second and
ArviZ's summary; PyMC's progress bar and its convergence warnings appear on the way.  ESS
per log-density evaluation, for every sampler and more models:
``python -m benchmarks.suite`` (docs/benchmarks/suite.md).
"""

from __future__ import annotations

import argparse
import time

import arviz as az
import numpy as np
import pymc as pm
import pytensor

import pymc_kameleon
from pymc_kameleon.compat import as_dataset, group_dataset, max_rhat, summary_table
from pymc_kameleon.models import lotka_volterra_model


def run(step_name: str, seed: int) -> None:
    """``pm.sample`` with its defaults and the given step; print the diagnostics."""
    model = lotka_volterra_model()
    make_step = pm.Metropolis if step_name == "pm.Metropolis" else getattr(pymc_kameleon,
                                                                           step_name)
    start = time.perf_counter()
    with model:
        # PyMC's progress bar, as users see it: live in a terminal; when the output is
        # captured (CI logs), rich draws it once when sampling ends instead of every refresh
        idata = pm.sample(step=make_step(), chains=4, random_seed=seed)
    seconds = time.perf_counter() - start
    r_hat = max_rhat(idata)  # ArviZ 0.x (InferenceData) and 1.x (DataTree) alike
    ess = float(as_dataset(az.ess(group_dataset(idata))).to_array().min())
    print(f"\n=== {step_name}: {seconds:.0f} s, max R-hat {r_hat:.3f}, "
          f"min bulk ESS {ess:.0f} of 4000, {ess / seconds:.1f} ESS/s ===")
    print(summary_table(idata).to_string(float_format=lambda v: f"{v:.4g}"))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--step", default="KernelHMCStep",
                        choices=["KernelHMCStep", "KameleonStep", "FastKameleonStep",
                                 "RandomWalkStep"])
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    print(f"PyMC {pm.__version__}, PyTensor {pytensor.__version__}, NumPy {np.__version__}")
    for name in (args.step, "pm.Metropolis"):
        run(name, args.seed)


if __name__ == "__main__":
    main()
