"""Bit-identity check of every step's and KameleonSMC's draws across a refactoring.

Runs each step through ``pm.sample`` and KameleonSMC (its default stages, waste-free,
``recycle``, an executor) through ``pm.sample_smc`` at a fixed seed on two small models (a
correlated Gaussian, and a scale-location model with a log-transformed scale) and prints one
SHA-256 per sampler and model of the posterior arrays and one of the sample stats.  ``--save FILE``
writes the hashes, ``--check FILE`` compares against a saved file and exits non-zero on any
difference.  Hashes depend on the installed PyMC/PyTensor/NumPy, so keep one file per
environment; each environment must stay equal to itself.

    python -m benchmarks.draw_identity --save /tmp/identity-py311.json
    python -m benchmarks.draw_identity --check /tmp/identity-py311.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import sys
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pymc as pm

from pymc_kameleon import (
    FastKameleonStep,
    KameleonSMC,
    KameleonStep,
    KernelHMCStep,
    RandomWalkStep,
)
from pymc_kameleon.adaptation import GeometricSchedule
from pymc_kameleon.compat import group_dataset

SEED = 1234
TUNE = 300
DRAWS = 100


def gaussian_model() -> pm.Model:
    """A correlated 3-d Gaussian."""
    cov = np.array([[1.0, 0.8, 0.0], [0.8, 1.0, 0.3], [0.0, 0.3, 2.0]])
    with pm.Model() as model:
        pm.MvNormal("x", mu=np.zeros(3), cov=cov)
    return model


def scale_model() -> pm.Model:
    """Normal observations with unknown location and a log-transformed scale."""
    y = np.random.default_rng(0).normal(1.0, 2.0, size=20)
    with pm.Model() as model:
        mu = pm.Normal("mu", 0.0, 5.0)
        sigma = pm.HalfNormal("sigma", 3.0)
        pm.Normal("y", mu, sigma, observed=y)
    return model


MODELS: dict[str, Callable[[], pm.Model]] = {"gaussian": gaussian_model, "scale": scale_model}


def _khmc_schedule() -> GeometricSchedule:
    # first fit inside the short tuning, so the kernel phase runs
    return GeometricSchedule(first=100, ratio=1.5, max_gap=100)


def _told(cls, **kwargs):
    """``cls(**kwargs)``, told the tuning length where the step takes ``tune_draws`` (PyMC 5
    does not tell a step; revisions before ``tune_draws`` read it from PyMC's loop), so that
    a revision with and one without it plan the same tuning."""
    try:
        return cls(**kwargs, tune_draws=TUNE)
    except TypeError:  # a revision before tune_draws
        return cls(**kwargs)


STEPS: dict[str, Callable[[], object]] = {
    "kamh": lambda: _told(KameleonStep),
    "fkamh": lambda: _told(FastKameleonStep),
    "khmc_finite": lambda: _told(KernelHMCStep, schedule=_khmc_schedule()),
    "khmc_lite": lambda: _told(KernelHMCStep, surrogate="lite", schedule=_khmc_schedule()),
    "rw": lambda: _told(RandomWalkStep),
}


SMC_DRAWS = 400
SMC: dict[str, dict] = {
    "smc": {},
    "smc_waste_free": {"waste_free": True},
    "smc_recycle": {"recycle": 600},
    "smc_budget": {"max_evals": 4000},
}


def _digest(dataset) -> str:
    """SHA-256 of every variable of ``dataset``, in name order, values and dtypes."""
    h = hashlib.sha256()
    for name in sorted(dataset.data_vars):
        values = np.ascontiguousarray(dataset[name].values)
        h.update(name.encode())
        h.update(str(values.dtype).encode())
        h.update(str(values.shape).encode())
        # SMC's per-stage stats are object arrays (a list per chain): their bytes are
        # pointers, so hash their values' text
        h.update(repr(values.tolist()).encode() if values.dtype == object else values.tobytes())
    return h.hexdigest()


def run_all() -> dict[str, dict[str, str]]:
    """The posterior and sample-stats hashes of every step on every model."""
    out: dict[str, dict[str, str]] = {}
    for model_name, build in MODELS.items():
        for step_name, make in STEPS.items():
            with build(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                idata = pm.sample(
                    tune=TUNE, draws=DRAWS, chains=2, cores=1, step=make(),
                    random_seed=SEED, progressbar=False, compute_convergence_checks=False,
                )
            key = f"{model_name}/{step_name}"
            out[key] = {
                "posterior": _digest(group_dataset(idata, "posterior")),
                "sample_stats": _digest(group_dataset(idata, "sample_stats")),
            }
            print(key, out[key]["posterior"][:16], out[key]["sample_stats"][:16], flush=True)
        for smc_name, kwargs in {**SMC, "smc_executor": None}.items():
            executor = ThreadPoolExecutor(2) if kwargs is None else None
            with build(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                idata = pm.sample_smc(
                    draws=SMC_DRAWS, chains=2, cores=1, kernel=KameleonSMC,
                    random_seed=SEED, progressbar=False, compute_convergence_checks=False,
                    **(kwargs if executor is None else {"executor": executor}))
            if executor is not None:
                executor.shutdown()
            key = f"{model_name}/{smc_name}"
            out[key] = {
                "posterior": _digest(group_dataset(idata, "posterior")),
                "sample_stats": _digest(group_dataset(idata, "sample_stats")),
            }
            print(key, out[key]["posterior"][:16], out[key]["sample_stats"][:16], flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--save", help="write the hashes to this JSON file")
    group.add_argument("--check", help="compare the hashes with this JSON file")
    args = parser.parse_args(argv)
    logging.getLogger("pymc").setLevel(logging.ERROR)
    hashes = run_all()
    if args.save:
        with open(args.save, "w") as f:
            json.dump(hashes, f, indent=1, sort_keys=True)
    if args.check:
        with open(args.check) as f:
            saved = json.load(f)
        bad = sorted(k for k in saved.keys() | hashes.keys() if saved.get(k) != hashes.get(k))
        for key in bad:
            print(f"DIFFERENT: {key}")
        print("identity check:", "FAILED" if bad else f"OK ({len(hashes)} runs)")
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
