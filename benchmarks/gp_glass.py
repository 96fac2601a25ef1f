"""Pseudo-marginal GP classification on UCI Glass: the KAMH paper's experiment (Sec. 5.1).

Two stages:

    python -m benchmarks.gp_glass reference [--chains 4 --draws 30000 --tune 5000 --thin 50]
    python -m benchmarks.gp_glass compare   [--seeds 3 --draws 4000 --tune 1000]

``reference`` runs long exact pseudo-marginal random-walk chains (``RandomWalkStep``) and
caches the thinned draws with the command, date and runtime in
``benchmarks/data/gp_glass_reference.npz``.  ``compare`` runs each sampler with the same
iteration budget over several seeds and reports, as functions of the number of draws after
burn-in, ``||mean - mean_ref||`` and the MMD with kernel ``(1 + x.y)^3`` against the
reference (all mixed moments up to order 3), plus the share of wall time not spent in the
likelihood estimator.  PyMC's Metropolis is the Monte-Carlo-within-Metropolis contrast: it
re-estimates the current point and does not target the exact posterior; it also updates a
vector element by element (2 d estimates per iteration, reported in the table).
Outputs go to ``docs/benchmarks/gp_glass.md`` and ``docs/benchmarks/gp_glass.png``
(``--out DIR`` elsewhere; ``--reference FILE`` for another cache).
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse  # noqa: E402
import datetime  # noqa: E402
import logging  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import pymc as pm  # noqa: E402

from pymc_kameleon import (  # noqa: E402
    FastKameleonStep,
    KameleonStep,
    KernelHMCStep,
    RandomWalkStep,
)
from pymc_kameleon.models.gpc import GPClassificationLikelihood, load_glass  # noqa: E402
from pymc_kameleon.pseudo_marginal import pseudo_marginal_potential  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "benchmarks" / "data" / "gp_glass_reference.npz"
DOCS = ROOT / "docs" / "benchmarks"
SAMPLERS = {
    "KAMH": KameleonStep,
    "F-KAMH": FastKameleonStep,
    "KMC lite": lambda: KernelHMCStep(surrogate="lite"),
    "KMC finite": lambda: KernelHMCStep(surrogate="finite"),
    "RW (exact PM)": RandomWalkStep,
    "pm.Metropolis (MCWM)": pm.Metropolis,
}


class TimedEstimator:
    """Wraps a likelihood estimator and accumulates the time spent inside it."""

    def __init__(self, estimator):
        self.estimator = estimator
        self.seconds = 0.0
        self.calls = 0

    def __call__(self, *args):
        start = time.perf_counter()
        try:
            return self.estimator(*args)
        finally:
            self.seconds += time.perf_counter() - start
            self.calls += 1


def make_model(data: Path, n_importance: int):
    X, y = load_glass(data)
    timed = TimedEstimator(GPClassificationLikelihood(X, y, n_importance=n_importance))
    with pm.Model() as model:
        theta = pm.Normal("theta", 0.0, np.sqrt(5.0), shape=X.shape[1])
        pseudo_marginal_potential("log_likelihood", timed, theta, seed=0)
    return model, timed


def poly3_mmd2(X: np.ndarray, Y: np.ndarray) -> float:
    """Unbiased MMD^2 between samples X and Y with kernel (1 + x.y)^3."""
    kxx = (1.0 + X @ X.T) ** 3
    kyy = (1.0 + Y @ Y.T) ** 3
    kxy = (1.0 + X @ Y.T) ** 3
    n, m = len(X), len(Y)
    return float((kxx.sum() - np.trace(kxx)) / (n * (n - 1))
                 + (kyy.sum() - np.trace(kyy)) / (m * (m - 1)) - 2.0 * kxy.mean())


def run_reference(args) -> None:
    model, timed = make_model(args.data, args.n_importance)
    start = time.perf_counter()
    with model:
        idata = pm.sample(draws=args.draws, tune=args.tune, chains=args.chains, cores=2,
                          step=RandomWalkStep(), random_seed=args.seed, progressbar=False,
                          compute_convergence_checks=False)
    seconds = time.perf_counter() - start
    theta = idata.posterior["theta"].values[:, :: args.thin]
    path = args.reference
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(
        path, theta=theta, command=args.command, date=datetime.date.today().isoformat(),
        seconds=seconds, accept=float(idata.sample_stats["accepted"].mean()),
    )
    print(f"reference: {theta.shape[0]} chains x {theta.shape[1]} thinned draws in "
          f"{seconds:.0f} s -> {path} ({path.stat().st_size / 1e3:.0f} kB)")


def run_compare(args) -> None:
    ref = np.load(args.reference)
    ref_theta = ref["theta"].reshape(-1, ref["theta"].shape[-1])
    ref_mean = ref_theta.mean(axis=0)
    checkpoints = np.linspace(args.draws / 8, args.draws, 8).astype(int)
    rows, curves = [], {}
    for name, make_step in SAMPLERS.items():
        errs, mmds, shares, accepts, secs, calls = [], [], [], [], [], []
        for seed in range(args.seeds):
            model, timed = make_model(args.data, args.n_importance)
            with model:
                step = make_step()
                timed.seconds, timed.calls = 0.0, 0
                start = time.perf_counter()
                idata = pm.sample(draws=args.draws, tune=args.tune, chains=1, cores=1,
                                  step=step, random_seed=100 + seed, progressbar=False,
                                  compute_convergence_checks=False)
                seconds = time.perf_counter() - start
            theta = idata.posterior["theta"].values[0]
            errs.append([np.linalg.norm(theta[:c].mean(axis=0) - ref_mean) for c in checkpoints])
            mmds.append([poly3_mmd2(theta[:c:max(1, c // 500)], ref_theta)
                         for c in checkpoints])
            shares.append(1.0 - timed.seconds / seconds)
            accepts.append(float(idata.sample_stats["accepted"].mean()))
            secs.append(seconds)
            calls.append(timed.calls / (args.draws + args.tune))
            print(f"{name} seed {seed}: {seconds:.0f} s, ||mean - ref|| {errs[-1][-1]:.3f}, "
                  f"MMD^2 {mmds[-1][-1]:.3g}", flush=True)
        curves[name] = (np.array(errs), np.array(mmds))
        rows.append((name, np.mean(accepts), np.mean(errs, axis=0)[-1],
                     np.std(errs, axis=0)[-1], np.mean(mmds, axis=0)[-1],
                     np.std(mmds, axis=0)[-1], 100 * np.mean(shares), np.mean(secs),
                     np.mean(calls)))
    write_outputs(args, ref, rows, curves, checkpoints)


def write_outputs(args, ref, rows, curves, checkpoints) -> None:
    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    lines = [
        "# GP classification on UCI Glass (pseudo-marginal)",
        "",
        f"Command: `python -m benchmarks.gp_glass compare --seeds {args.seeds} "
        f"--draws {args.draws} --tune {args.tune}` ({datetime.date.today().isoformat()}); "
        f"one chain per seed, {args.n_importance} importance samples per estimate.",
        "",
        f"Reference: `{ref['command']}` ({ref['date']}, {float(ref['seconds']):.0f} s): "
        f"{ref['theta'].shape[0]} exact pseudo-marginal random-walk chains, "
        f"{ref['theta'].shape[1]} thinned draws each.",
        "",
        "| sampler | acceptance | ‖mean − ref‖ | MMD² (1+x·y)³ | % time outside the estimator "
        "| estimates / iteration | seconds |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, acc, err, err_sd, mmd, mmd_sd, share, secs, per_iter in rows:
        lines.append(f"| {name} | {acc:.2f} | {err:.3f} ± {err_sd:.3f} | {mmd:.3g} ± "
                     f"{mmd_sd:.2g} | {share:.1f} | {per_iter:.1f} | {secs:.0f} |")
    lines += ["", "Values after the last checkpoint, mean ± sd over seeds; curves in "
              "`gp_glass.png`."]
    (out / "gp_glass.md").write_text("\n".join(lines) + "\n")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for name, (errs, mmds) in curves.items():
        for ax, values in zip(axes, (errs, mmds), strict=True):
            mean, sd = values.mean(axis=0), values.std(axis=0)
            ax.plot(checkpoints, mean, marker="o", ms=3, label=name)
            ax.fill_between(checkpoints, mean - sd, mean + sd, alpha=0.15)
    axes[0].set_ylabel("‖mean − mean_ref‖")
    axes[1].set_ylabel("MMD² with (1 + x·y)³")
    axes[1].set_yscale("symlog", linthresh=1e2)
    for ax in axes:
        ax.set_xlabel("draws after burn-in")
    axes[0].legend(fontsize=8)
    fig.suptitle("GP classification on UCI Glass: distance to the reference posterior")
    fig.tight_layout()
    fig.savefig(out / "gp_glass.png", dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    logging.getLogger("pymc").setLevel(logging.ERROR)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stage", choices=["reference", "compare"])
    parser.add_argument("--data", type=Path,
                        default=ROOT.parent / "shared" / "data" / "glass.data")
    parser.add_argument("--n-importance", type=int, default=100)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--draws", type=int, default=None)
    parser.add_argument("--tune", type=int, default=None)
    parser.add_argument("--thin", type=int, default=50)
    parser.add_argument("--seed", type=int, default=2024)
    parser.add_argument("--out", type=Path, default=DOCS, help="where compare writes its outputs")
    parser.add_argument("--reference", type=Path, default=REFERENCE,
                        help="the cached reference sample (.npz)")
    args = parser.parse_args(argv)
    args.command = " ".join(["python -m benchmarks.gp_glass",
                             *(sys.argv[1:] if argv is None else argv)])
    if args.stage == "reference":
        args.draws, args.tune = args.draws or 30000, args.tune or 5000
        run_reference(args)
    else:
        args.draws, args.tune = args.draws or 4000, args.tune or 1000
        run_compare(args)


if __name__ == "__main__":
    main()
