"""KameleonSMC against PyMC's IMH and MH SMC kernels on targets with known answers.

Every run is one ``pm.sample_smc(chains=C, cores=1)`` call per kernel, target and seed.
Evaluations are counted per chain as particles x (1 + MH steps over all stages): every
kernel evaluates the prior and the likelihood once per particle and MH step (PyMC's IMH and
MH report ``n_steps`` one higher than the steps they ran; this script subtracts it).

Targets (log evidence known exactly: the models are built so the posterior is the
normalised target, see :func:`pymc_kameleon.models.synthetic.gaussian_mixture_model`):

* ``mixture``: two isotropic Gaussians at ``(+-4, 0, ..., 0)`` in ``d = 4``, weights 0.3/0.7;
* ``banana``: the 8-d twisted banana ``B(0.1, 100)`` bridged from ``N(0, 50^2 I)``;
* ``flower``: the 2-d flower ``F(10, 6, 6, 1)`` bridged from ``N(0, 20^2 I)`` (evidence by
  quadrature, sds from exact draws; ``weight_err`` is the largest error of a petal's share,
  1/6 each);
* ``lotka-volterra``: the black-box ODE model of :mod:`pymc_kameleon.models.ode` (known
  initial states; no exact answer: R-hat across chains and the kernels' evidences agree);
* ``hare-lynx``: the suite's predator-prey fit with unknown initial states, which has a
  spurious local mode; ``mode_dist`` is the largest relative distance of a chain's mean
  rates from the global mode (the Stan case study's posterior means); the evidence
  against the importance-sampling reference of :mod:`benchmarks.smc_reference`;
* ``gp-glass``: pseudo-marginal GP classification on a fixed random subset of
  ``GLASS_SUBSET`` rows of UCI Glass (``GLASS_IMPORTANCE`` importance draws per likelihood
  estimate); evidence, mean and sd against that reference.

Usage::

    python -m benchmarks.smc --targets mixture banana --draws 1000 --chains 2 --seeds 1 2 3

prints one table row per target, kernel and seed (``--kameleon-kwargs '{"n_clusters": 1}'``
passes settings to KameleonSMC), and saves a plot under
``benchmarks/results/`` (git-ignored); ``--replot OUT...`` plots the rows printed in saved
outputs instead.  Results: ``docs/benchmarks/smc.md``.
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
from pymc_kameleon.compat import smc_stat_per_chain as per_chain
from pymc_kameleon.models import banana_model
from pymc_kameleon.models.synthetic import flower_model, gaussian_mixture_model
from pymc_kameleon.models.targets import banana_coverage_error, flower_log_normaliser

logging.getLogger("pymc").setLevel(logging.ERROR)
RESULTS = Path(__file__).parent / "results"
#: long reference runs of targets without a closed form (benchmarks/smc_reference.py)
SMC_REFERENCES = (json.loads(p.read_text()) if (p := Path(__file__).parent / "data"
                  / "smc_references.json").is_file() else {})


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
    from pymc_kameleon.models.targets import flower_sample

    model = flower_model(dim=2, prior_sd=20.0)
    # mean 0 and equal sds by the six-fold symmetry; the sd from 10^6 exact draws (se 1e-3)
    sd = float(np.sqrt(np.mean(flower_sample(10**6, dim=2, rng=np.random.default_rng(0)) ** 2)))
    return model, {"log_z": flower_log_normaliser(), "mean": np.zeros(2), "sd": np.full(2, sd),
                   "petals": 6}


#: GP-Glass for SMC: a fixed random subset of the data (the full 214 rows cost 60 ms per
#: likelihood estimate, too slow for SMC runs of a few minutes; docs/benchmarks/smc.md)
GLASS_SUBSET, GLASS_IMPORTANCE = 60, 100


def gp_glass_target():
    from pymc_kameleon.models import gp_classification_model
    from pymc_kameleon.models.gpc import load_glass

    from .suite.models import glass_path

    path = glass_path()  # the suite's lookup: $PYMC_KAMELEON_GLASS, else ../shared/data
    if path is None:
        raise FileNotFoundError("glass.data not found: set PYMC_KAMELEON_GLASS to its path")
    X, y = load_glass(path)
    rows = np.random.default_rng(0).permutation(len(y))[:GLASS_SUBSET]
    model = gp_classification_model(X[rows], y[rows], n_importance=GLASS_IMPORTANCE, seed=0)
    ref = SMC_REFERENCES.get("gp-glass", {})
    truth = {k: np.asarray(ref[k]) for k in ("mean", "sd") if k in ref}
    return model, {**truth, "log_z": ref.get("log_z", np.nan), "var": "theta"}


def lotka_volterra_target():
    from pymc_kameleon.models import lotka_volterra_model

    return lotka_volterra_model(), {}


def hare_lynx_target():
    from pymc_kameleon.models.hard import HARE_LYNX_START, hare_lynx_model

    return hare_lynx_model(), {"global_mode": HARE_LYNX_START["rates"],
                               "log_z": SMC_REFERENCES.get("hare-lynx", {}).get("log_z", np.nan)}


def _suite_target(name: str):
    """A suite model (reference means and sds in the suite's files) with its evidence
    reference from ``benchmarks/data/smc_references.json`` where one was computed."""
    from .suite.models import MODELS

    return lambda: (MODELS[name].factory(),
                    {"log_z": SMC_REFERENCES.get(name, {}).get("log_z", np.nan)})


TARGETS = {"mixture": mixture_target, "banana": banana_target, "flower": flower_target,
           "lotka-volterra": lotka_volterra_target, "hare-lynx": hare_lynx_target,
           "gp-glass": gp_glass_target, "pk": _suite_target("pk"),
           "eight-schools-nc": _suite_target("eight-schools-nc")}


def run_one(target: str, kernel: str, draws: int, chains: int, seed: int,
            kernel_kwargs: dict | None = None, save: Path | None = None) -> dict:
    """One ``pm.sample_smc`` call: the printed row; with ``save`` also the posterior
    particles (one ``.npz`` array per variable, shape ``(chain, draw, ...)``)."""
    model, truth = TARGETS[target]()
    t0 = time.perf_counter()
    with model:
        idata = pm.sample_smc(draws, kernel=KERNELS[kernel], chains=chains, cores=1,
                              progressbar=False, random_seed=seed,
                              compute_convergence_checks=False, **(kernel_kwargs or {}))
    wall = time.perf_counter() - t0
    post = group_dataset(idata, "posterior")
    if save is not None:
        save.mkdir(parents=True, exist_ok=True)
        np.savez(save / f"{target}-{kernel}-s{seed}-{draws}x{chains}.npz",
                 **{v: post[v].values for v in post.data_vars})
    stats = group_dataset(idata, "sample_stats")
    name = truth.get("var", "x")
    x = post[name].values if name in post else None  # (chain, draw, d)
    rhat = az.rhat(post)
    stages = stats.attrs.get("chain_stages")  # KameleonSMC's chains of unequal length
    lml = np.array([c[-1] for c in per_chain(stats["log_marginal_likelihood"].values, chains,
                                             stages)])
    steps_per_stage = per_chain(stats["mh_steps"].values, chains, stages)
    steps = np.array([c.sum() for c in steps_per_stage])
    acc_name = next(n for n in ("accept_rate", "mean_accept_rate") if n in stats)
    row = {
        "target": target, "kernel": kernel, "seed": seed, "draws": draws, "chains": chains,
        "evals_per_chain": float(np.mean(draws * (1 + steps))),
        "wall_s": wall,
        "rhat": float(max(rhat[v].max() for v in post.data_vars)),
        "rhat_vars": {v: np.round(np.ravel(rhat[v].values), 3).tolist()
                      for v in post.data_vars},
        "log_z": float(np.mean(lml)),
        "log_z_err": float(np.sqrt(np.mean((lml - truth.get("log_z", np.nan)) ** 2))),
        "stages": float(np.mean([len(c) for c in steps_per_stage])),
        # first chain, per stage: MH steps and mean acceptance (where they are spent)
        "steps_chain0": steps_per_stage[0].astype(int).tolist(),
        "accept_chain0": np.round(per_chain(stats[acc_name].values, chains, stages)[0],
                                  2).tolist(),
    }
    if "accept_independent" in stats:
        row["accept_independent_chain0"] = np.round(
            per_chain(stats["accept_independent"].values, chains, stages)[0], 2).tolist()
    if "mean" in truth:
        row["mean_err"] = float(np.mean(np.abs(x.mean(1) - truth["mean"]) / truth["sd"]))
        row["sd_err"] = float(np.mean(np.abs(x.std(1) / truth["sd"] - 1)))
    if "mode_weight" in truth:
        row["weight_err"] = float(np.mean(np.abs((x[..., 0] < 0).mean(1) - truth["mode_weight"])))
    if "petals" in truth:  # the flower: largest |share of a petal - 1/6| (petal k at k 60 deg)
        k = truth["petals"]
        petal = np.round(np.arctan2(x[..., 1], x[..., 0]) * k / (2 * np.pi)).astype(int) % k
        shares = np.stack([(petal == j).mean(1) for j in range(k)], axis=1)
        row["weight_err"] = float(np.mean(np.max(np.abs(shares - 1 / k), axis=1)))
    if "global_mode" in truth:  # largest relative distance of a chain's mean rates from it
        rates = post["rates"].values.mean(1)
        row["mode_dist"] = float(np.max(np.abs(rates / truth["global_mode"] - 1)))
    if "banana" in truth:
        row["coverage_err"] = float(np.mean([banana_coverage_error(c, *truth["banana"])
                                             for c in x]))
    return row


COLUMNS = ["target", "kernel", "seed", "evals_per_chain", "stages", "wall_s", "rhat", "mean_err",
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


#: error columns plotted per target (the first one present of each tuple)
PLOT_ERRORS = [("mean_err",), ("sd_err",), ("weight_err", "coverage_err"), ("log_z_err",)]
LABELS = {"mean_err": "mean error (sds)", "sd_err": "|sd / true sd - 1|",
          "weight_err": "mode weight error", "coverage_err": "coverage error",
          "log_z_err": "RMS log-evidence error (nats)"}


def plot(rows: list[dict], path: Path) -> None:
    """One row of panels per target: each error against evaluations per chain, one point per
    seed and particle count, one marker per kernel."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    targets = list(dict.fromkeys(r["target"] for r in rows))
    fig, axes = plt.subplots(len(targets), len(PLOT_ERRORS), squeeze=False,
                             figsize=(3.2 * len(PLOT_ERRORS), 2.6 * len(targets)))
    for ax_row, t in zip(axes, targets, strict=True):
        sel_t = [r for r in rows if r["target"] == t]
        for ax, names in zip(ax_row, PLOT_ERRORS, strict=True):
            col = next((n for n in names if any(n in r for r in sel_t)), None)
            if col is None:
                ax.axis("off")
                continue
            for k, marker in zip(KERNELS, "os^", strict=True):
                sel = [r for r in sel_t if r["kernel"] == k and col in r]
                if sel:
                    ax.scatter([r["evals_per_chain"] / 1e3 for r in sel], [r[col] for r in sel],
                               marker=marker, label=k, alpha=0.8)
            ax.set(title=f"{t}: {LABELS[col]}", ylim=(0, None))
            ax.set_xlabel("evaluations per chain (thousands)", fontsize=8)
            ax.title.set_fontsize(9)
        ax_row[0].legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


def rows_from_logs(paths: list[Path]) -> list[dict]:
    """The rows this script printed (one dict per line) in saved outputs."""
    import ast

    return [ast.literal_eval(line) for p in paths for line in p.read_text().splitlines()
            if line.startswith("{'target'")]


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
    parser.add_argument("--save", type=Path,
                        help="save each run's posterior particles (.npz) in this directory")
    parser.add_argument("--replot", type=Path, nargs="+",
                        help="only plot the rows printed in these saved outputs")
    args = parser.parse_args(argv)
    if args.replot:
        rows = rows_from_logs(args.replot)
        plot(rows, args.plot)
        return rows
    rows = []
    for t in args.targets:
        for k in args.kernels:
            for s in args.seeds:
                kw = args.kameleon_kwargs if k == "KameleonSMC" else {}
                rows.append(run_one(t, k, args.draws, args.chains, s, kw, args.save))
                print(rows[-1], flush=True)
    print_table(rows)
    plot(rows, args.plot)
    return rows


if __name__ == "__main__":
    main()
