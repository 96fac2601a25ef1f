"""KameleonSMC against PyMC's IMH and MH SMC kernels on targets with known answers.

Every run is one ``pm.sample_smc(chains=C, cores=1)`` call per kernel, target and seed.
Evaluations are counted per chain as particles x (1 + MH steps over all stages): every
kernel evaluates the prior and the likelihood once per particle and MH step (PyMC's IMH and
MH report ``n_steps`` one higher than the steps they ran; this script subtracts it).

Targets (log evidence known exactly: the models are built so the posterior is the
normalised target, see :func:`benchmarks.models.gaussian_mixture_model`):

* ``mixture``: two isotropic Gaussians at ``(+-4, 0, ..., 0)`` in ``d = 4``, weights 0.3/0.7;
* ``banana``: the 8-d twisted banana ``B(0.1, 100)`` bridged from ``N(0, 50^2 I)``;
* ``flower``: the 2-d flower ``F(10, 6, 6, 1)`` bridged from ``N(0, 20^2 I)``;
* ``lotka-volterra``: the black-box ODE model of :mod:`pymc_kameleon.models.ode` (known
  initial states; no exact answer: R-hat across chains and the kernels' evidences agree);
* ``hare-lynx``: the suite's predator-prey fit with unknown initial states, which has a
  spurious local mode; ``mode_dist`` is the largest relative distance of a chain's mean
  rates from the global mode (the Stan case study's posterior means).

Usage::

    python -m benchmarks.smc --targets mixture banana --draws 1000 --chains 2 --seeds 1 2 3

prints one table row per target, kernel and seed (``--kameleon-kwargs '{"n_clusters": 1}'``
passes settings to KameleonSMC), and saves a plot under
``benchmarks/results/`` (git-ignored).  Results: ``docs/benchmarks/smc.md``.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from pathlib import Path

import arviz as az
import numpy as np
import pymc as pm
from pymc.smc.kernels import IMH, MH

from pymc_kameleon import KameleonSMC
from pymc_kameleon.compat import group_dataset
from pymc_kameleon.models import banana_model
from pymc_kameleon.models.targets import banana_coverage_error

from .models import flower_model, gaussian_mixture_model
from .targets import flower_log_normaliser

logging.getLogger("pymc").setLevel(logging.ERROR)
RESULTS = Path(__file__).parent / "results"


def _with_step_count(kernel: type, offset: int) -> type:
    """``kernel`` with a per-stage stat ``mh_steps`` (the MH steps the stage ran)."""

    class Counted(kernel):
        stats_dtypes_shapes = {**kernel.stats_dtypes_shapes, "mh_steps": (int, [])}

        def sample_stats(self):
            return {**super().sample_stats(), "mh_steps": self.n_steps - offset}

    Counted.__name__ = kernel.__name__
    return Counted


KERNELS = {
    "KameleonSMC": _with_step_count(KameleonSMC, 0),
    "IMH": _with_step_count(IMH, 1),
    "MH": _with_step_count(MH, 1),
}


def mixture_target(dim: int = 4):
    means = np.zeros((2, dim))
    means[:, 0] = [-4.0, 4.0]
    model = gaussian_mixture_model(means, [1.0, 1.0], [0.3, 0.7], prior_sd=20.0)
    mean = np.zeros(dim)
    mean[0] = 0.7 * 4 - 0.3 * 4
    sd = np.ones(dim)
    sd[0] = np.sqrt(1 + 16 - mean[0] ** 2)
    return model, {"mean": mean, "sd": sd, "log_z": 0.0, "mode_weight": 0.3}


def banana_target(dim: int = 8):
    model = banana_model(dim=dim, b=0.1, v=100.0, prior_sd=50.0)
    sd = np.ones(dim)
    sd[0], sd[1] = 10.0, np.sqrt(1 + 0.01 * 2 * 100.0**2)
    return model, {"mean": np.zeros(dim), "sd": sd, "log_z": 0.0, "banana": (0.1, 100.0)}


def flower_target():
    model = flower_model(dim=2, prior_sd=20.0)
    return model, {"log_z": flower_log_normaliser()}


def lotka_volterra_target():
    from pymc_kameleon.models import lotka_volterra_model

    return lotka_volterra_model(), {}


def hare_lynx_target():
    from benchmarks.suite.hard_models import HARE_LYNX_START, hare_lynx_model

    return hare_lynx_model(), {"global_mode": HARE_LYNX_START["rates"]}


TARGETS = {"mixture": mixture_target, "banana": banana_target, "flower": flower_target,
           "lotka-volterra": lotka_volterra_target, "hare-lynx": hare_lynx_target}


def per_chain(values: np.ndarray, chains: int) -> list[np.ndarray]:
    """A per-stage stat of ``pm.sample_smc`` as one float array per chain.  PyMC stores it
    as a numeric or an object array (chains with different numbers of stages) and, on
    PyMC 6 with one chain, with the stages on the chain axis."""
    if chains == 1:
        return [np.asarray(np.ravel(values), dtype=float)]
    rows = np.asarray(values, dtype=object).reshape(chains, -1)
    return [np.concatenate([np.ravel(np.asarray(e, dtype=float)) for e in row]) for row in rows]


def run_one(target: str, kernel: str, draws: int, chains: int, seed: int,
            kernel_kwargs: dict | None = None) -> dict:
    model, truth = TARGETS[target]()
    t0 = time.perf_counter()
    with model:
        idata = pm.sample_smc(draws, kernel=KERNELS[kernel], chains=chains, cores=1,
                              progressbar=False, random_seed=seed,
                              compute_convergence_checks=False, **(kernel_kwargs or {}))
    wall = time.perf_counter() - t0
    post = group_dataset(idata, "posterior")
    stats = group_dataset(idata, "sample_stats")
    x = post["x"].values if "x" in post else None  # (chain, draw, d)
    lml = np.array([c[-1] for c in per_chain(stats["log_marginal_likelihood"].values, chains)])
    steps = np.array([c.sum() for c in per_chain(stats["mh_steps"].values, chains)])
    row = {
        "target": target, "kernel": kernel, "seed": seed, "draws": draws, "chains": chains,
        "evals_per_chain": float(np.mean(draws * (1 + steps))),
        "wall_s": wall,
        "rhat": float(max(az.rhat(post)[v].max() for v in post.data_vars)),
        "log_z": float(np.mean(lml)),
        "log_z_err": float(np.sqrt(np.mean((lml - truth.get("log_z", np.nan)) ** 2))),
    }
    if "mean" in truth:
        row["mean_err"] = float(np.mean(np.abs(x.mean(1) - truth["mean"]) / truth["sd"]))
        row["sd_err"] = float(np.mean(np.abs(x.std(1) / truth["sd"] - 1)))
    if "mode_weight" in truth:
        row["weight_err"] = float(np.mean(np.abs((x[..., 0] < 0).mean(1) - truth["mode_weight"])))
    if "global_mode" in truth:  # largest relative distance of a chain's mean rates from it
        rates = post["rates"].values.mean(1)
        row["mode_dist"] = float(np.max(np.abs(rates / truth["global_mode"] - 1)))
    if "banana" in truth:
        row["coverage_err"] = float(np.mean([banana_coverage_error(c, *truth["banana"])
                                             for c in x]))
    return row


COLUMNS = ["target", "kernel", "seed", "evals_per_chain", "wall_s", "rhat", "mean_err",
           "sd_err", "weight_err", "coverage_err", "mode_dist", "log_z", "log_z_err"]


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.0f}" if abs(v) >= 1000 else f"{v:.3f}"
    return str(v)


def print_table(rows: list[dict]) -> None:
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + "---|" * len(COLUMNS))
    for r in rows:
        print("| " + " | ".join(_fmt(r.get(c, "")) for c in COLUMNS) + " |", flush=True)


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    targets = sorted({r["target"] for r in rows})
    fig, axes = plt.subplots(1, len(targets), figsize=(4 * len(targets), 3.2), squeeze=False)
    for ax, t in zip(axes[0], targets, strict=True):
        for k in KERNELS:
            sel = [r for r in rows if r["target"] == t and r["kernel"] == k]
            if sel:
                ax.scatter([r["evals_per_chain"] for r in sel], [r["log_z_err"] for r in sel],
                           label=k)
        ax.set(title=t, xlabel="log-density evaluations per chain",
               ylabel="RMS log-evidence error (nats)", xscale="log")
        ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--targets", nargs="+", default=["mixture", "banana"],
                        choices=sorted(TARGETS))
    parser.add_argument("--kernels", nargs="+", default=list(KERNELS), choices=list(KERNELS))
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--chains", type=int, default=2)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--plot", type=Path, default=RESULTS / "smc.png")
    parser.add_argument("--kameleon-kwargs", type=json.loads, default={},
                        help='settings of KameleonSMC as JSON, e.g. \'{"global_weight": 0}\'')
    args = parser.parse_args(argv)
    rows = []
    for t in args.targets:
        for k in args.kernels:
            for s in args.seeds:
                kw = args.kameleon_kwargs if k == "KameleonSMC" else {}
                rows.append(run_one(t, k, args.draws, args.chains, s, kw))
                print(rows[-1], flush=True)
    print_table(rows)
    plot(rows, args.plot)
    return rows


if __name__ == "__main__":
    main()
