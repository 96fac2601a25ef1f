"""Per-group pass rates of the tests' group design (docs/benchmarks/test_calibration.md).

It runs the tests' own checks and broken variants, so it lives with them; run it as a
script from the repository root (its folder, ``tests/``, is then on the import path)::

    python tests/calibration.py gauss --chains 40 --seed 100
    python tests/calibration.py banana --variants kamh-0.1 kamh-default --seeds 1 2
    python tests/calibration.py noise --chains 8 --seed 1

``gauss``: every step of the contract tests on their correlated 2-d Gaussian, each chain
checked as ``test_gaussian_moments`` checks it.  ``banana``: 16-chain runs of the banana
tests' steps and broken variants, each 4-chain group checked as the test checks it.
``noise``: kernel HMC (lite, finite) and its noise-blind variant at log-noise sd 2, each
chain checked as ``test_large_noise_does_not_collapse_the_step_size`` checks it.
"""

from __future__ import annotations

import argparse
import os
import time
from functools import partial

# Single-threaded BLAS, set before NumPy is imported: with chains in processes on 2 cores,
# multi-threaded BLAS on the steps' small matrices is 10-100x slower (as in the benchmarks).
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import numpy as np  # noqa: E402
from checks import (  # noqa: E402
    BANANA_CHAINS,
    GAUSS_COV,
    SAMPLERS,
    banana_groups_passing,
    sample,
)
from test_fast_kameleon import ForwardCovarianceReused  # noqa: E402
from test_kameleon import NoHastingsCorrection, TemperedKameleon  # noqa: E402
from test_kernel_hmc import NoKineticEnergy  # noqa: E402
from test_kernel_hmc_noise import (  # noqa: E402
    NoiseBlind,
    collapse_chain_passes,
    run_collapse_chains,
)
from test_step_contract import gaussian_chain_checks, gaussian_checks_pass  # noqa: E402

from pymc_kameleon import FastKameleonStep, KameleonStep, KernelHMCStep  # noqa: E402
from pymc_kameleon.models import banana_model  # noqa: E402
from pymc_kameleon.models.synthetic import gaussian_model  # noqa: E402

#: name: (step factory, banana (dim, b), draws, tune, max coverage error, max R-hat)
BANANA_VARIANTS = {
    "kamh-0.1": (partial(KameleonStep, gamma=0.1), (2, 0.1), 8000, 2000, 0.05, 1.1),
    "kamh-default": (KameleonStep, (2, 0.1), 8000, 2000, 0.05, 1.2),
    "kamh-0.1-no-hastings": (partial(NoHastingsCorrection, gamma=0.1), (2, 0.1), 8000, 2000,
                             0.05, 1.1),
    "kamh-default-no-hastings": (NoHastingsCorrection, (2, 0.1), 8000, 2000, 0.05, 1.2),
    "kamh-default-tempered": (TemperedKameleon, (2, 0.1), 8000, 2000, 0.05, 1.2),
    "fkamh-2d": (partial(FastKameleonStep, gamma=0.1), (2, 0.1), 8000, 2000, 0.05, 1.15),
    "fkamh-2d-forward-cov": (partial(ForwardCovarianceReused, gamma=0.1), (2, 0.1), 8000,
                             2000, 0.05, 1.15),
    "fkamh-8d": (partial(FastKameleonStep, gamma=0.1), (8, 0.03), 8000, 3000, 0.06, np.inf),
    "fkamh-8d-forward-cov": (partial(ForwardCovarianceReused, gamma=0.1), (8, 0.03), 8000,
                             3000, 0.06, np.inf),
    "khmc-finite": (KernelHMCStep, (2, 0.03), 4000, 1000, 0.06, 1.1),
    "khmc-no-kinetic": (NoKineticEnergy, (2, 0.03), 4000, 1000, 0.06, 1.1),
}


def gauss(chains: int, seed: int) -> None:
    """Each step's chains on the contract tests' Gaussian, checked one by one."""
    model = gaussian_model(GAUSS_COV)
    print("| step | chains passing | smallest KS p-value | KS p < 0.05 | largest moment z |")
    print("| --- | --- | --- | --- | --- |")
    for name, sampler in SAMPLERS.items():
        start = time.perf_counter()
        x = sample(model, sampler, draws=2000, tune=1000, chains=chains,
                   seed=seed).posterior.x.values
        z, p = np.array([gaussian_chain_checks(c) for c in x]).T
        passing = sum(gaussian_checks_pass(zc, pc) for zc, pc in zip(z, p, strict=True))
        print(f"| {name} | {passing} of {chains} | {p.min():.2g} | {(p < 0.05).sum()} of "
              f"{chains} | {z.max():.2f} | ({time.perf_counter() - start:.0f} s)", flush=True)


def banana(variants: list[str], seeds: list[int]) -> None:
    """16-chain runs of the banana tests' variants; each 4-chain group as the test checks it."""
    for name in variants:
        step, (dim, b), draws, tune, max_error, max_rhat = BANANA_VARIANTS[name]
        model = banana_model(dim=dim, b=b, v=100.0)
        for seed in seeds:
            idata = sample(model, step, draws=draws, tune=tune, chains=BANANA_CHAINS,
                           cores=2, seed=seed)
            passing, groups = banana_groups_passing(idata, b, 100.0, max_error, max_rhat)
            shown = " ".join(f"({e:.3f}, {r:.3f})" for e, r in groups)
            print(f"{name} seed {seed}: {passing} of 4 groups pass; (error, R-hat) {shown}",
                  flush=True)


def noise(chains: int, seed: int) -> None:
    """Kernel HMC's chains at log-noise sd 2, each checked as the collapse test checks it."""
    for step in (KernelHMCStep, NoiseBlind):
        for surrogate in ("lite", "finite"):
            checks = run_collapse_chains(step, surrogate, chains, seed)
            passing = sum(collapse_chain_passes(c) for c in checks)
            shown = " ".join(f"({m:.3f}, {j:.3f}, {e:.0f})" for m, j, e in checks)
            print(f"{step.__name__}({surrogate}) seed {seed}: {passing} of {chains} chains "
                  f"pass; (median eps, mean squared jump, ESS) {shown}", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=["gauss", "banana", "noise"])
    parser.add_argument("--chains", type=int, default=40)
    parser.add_argument("--seed", type=int, default=100)
    parser.add_argument("--variants", nargs="+", default=list(BANANA_VARIANTS),
                        choices=list(BANANA_VARIANTS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2])
    args = parser.parse_args(argv)
    if args.part == "gauss":
        gauss(args.chains, args.seed)
    elif args.part == "noise":
        noise(args.chains, args.seed)
    else:
        banana(args.variants, args.seeds)


if __name__ == "__main__":
    main()
