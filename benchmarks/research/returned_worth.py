"""What KameleonSMC's returned draws are worth: ArviZ's ESS of one chain against the spread.

Usage::

    python -m benchmarks.research.returned_worth --model pk --seeds 1 2 3 4 --chains 6 \
        --kameleon '{"emulator": true}' [--json out.json]
    python -m benchmarks.research.returned_worth --tables out.json more.json

Runs ``pm.sample_smc(kernel=KameleonSMC, ...)`` as :func:`benchmarks.smc_compare.run_smc`
does (``--draws`` particles, ``--chains`` chains a seed, every chain an independent run)
and pools the chains of all seeds.  Per coordinate: the mean over chains of ArviZ's bulk
ESS of each chain's returned draws alone, the ESS per chain from the spread of the chains'
means (the reference variance over the variance of the chain means) with its 90 %
interval (the variance of ``n`` means has ``n - 1`` degrees of freedom: chi-square), and
their ratio with the interval; also the same ratio for ArviZ's ``mean`` ESS (of the raw
draws, where the bulk ESS is of their ranks), the ESS from the chain means' errors against
the reference means (``n`` degrees of freedom; it includes a bias common to every chain)
and the mean Kish ESS of the chains' importance samples.  ``--tables`` pools the chains of
earlier ``--json`` files and prints the table without running.  Results:
``docs/benchmarks/emulator.md``.
"""

from __future__ import annotations

import argparse
import json
import warnings
from types import SimpleNamespace

import arviz as az
import numpy as np
from scipy import stats

from pymc_kameleon.math.draw_worth import coordinate_worth
from pymc_kameleon.math.importance import resample_indices

from ..common import quiet_pymc
from ..smc_compare import Reference, _run
from ..suite.metrics import spread_ess
from ..suite.models import free_var_labels

__all__ = ["PoolRecorder", "arviz_ess_per_chain", "main", "noise_per_draw", "pool_stats",
           "worth_table"]


def pool_stats(X: np.ndarray, log_w: np.ndarray) -> dict:
    """A weighted sample's self-normalised mean, its variance and the ESS of its mean from
    the delta method, ``var_w / sum_i w_i^2 (x_i - mean)^2`` (normalised ``w``), per
    coordinate: what one run can see of its own error before resampling."""
    w = np.exp(log_w - np.max(log_w))
    w /= w.sum()
    mean = w @ X
    var = w @ (X - mean) ** 2
    return {"mean": mean.tolist(), "var": var.tolist(),
            "ess": coordinate_worth(X, log_w).tolist()}


def resampling_noise(X: np.ndarray, log_w: np.ndarray, size: int, reps: int = 40,
                     seed: int = 0) -> dict:
    """The variance that resampling ``size`` draws adds to a weighted sample's mean, per
    coordinate and in units of the pool's variance per draw (so ``1 / size`` would count
    every draw as independent), along the points' Hilbert curve (the returned draws) and
    in a random order (before): what the curve saves, paired on the same pool."""
    rng = np.random.default_rng(seed)
    pool = pool_stats(X, log_w)
    return {name: noise_per_draw(X, pool, size, lambda points=points: resample_indices(
                log_w, size, rng, adjacent=True, points=points), reps).tolist()
            for name, points in (("curve", X), ("random", None))}


def noise_per_draw(X: np.ndarray, pool: dict, size: int, indices, reps: int) -> np.ndarray:
    """The variance that ``reps`` resamplings (``indices()``, ``size`` indices each) add to
    the mean of the weighted sample ``X`` (its :func:`pool_stats` ``pool``), per coordinate,
    in units of the sample's variance per draw."""
    mean, var = np.array(pool["mean"]), np.maximum(np.array(pool["var"]), 1e-300)
    dev = [X[indices()].mean(axis=0) - mean for _ in range(reps)]
    return np.mean(np.square(dev), axis=0) / var * size


class PoolRecorder:
    """While active, :func:`pool_stats` of every weighted pool that a chain resamples its
    returned draws from (``resample_draws`` in the emulator's output and in ``recycle``),
    in the sampler's unconstrained coordinates, in call order, with the noise of
    resampling it along its curve and in random order (:func:`resampling_noise`)."""

    def __init__(self):
        self.records: list[dict] = []

    def __enter__(self) -> PoolRecorder:
        from pymc_kameleon.math import draw_worth
        from pymc_kameleon.particles import recycling
        from pymc_kameleon.smc import emulated

        self._saved = [(recycling, "resample_draws", recycling.resample_draws),
                       (emulated, "resample_draws", emulated.resample_draws)]

        def resample(X, log_w, size, rng, **kw):
            X, log_w = np.asarray(X, float), np.asarray(log_w, float)
            self.records.append(pool_stats(X, log_w))
            self.records[-1]["noise"] = resampling_noise(X, log_w, size)
            self.records[-1]["size"] = size
            return draw_worth.resample_draws(X, log_w, size, rng, **kw)

        recycling.resample_draws = emulated.resample_draws = resample
        return self

    def __exit__(self, *exc) -> None:
        for owner, name, value in self._saved:
            setattr(owner, name, value)


def arviz_ess_per_chain(X: np.ndarray, method: str = "bulk") -> np.ndarray:
    """ArviZ's ESS (``method``) of each chain's draws alone: ``X`` (chains, draws, k) ->
    (chains, k)."""
    return np.array([az.ess(az.convert_to_dataset(x[None]), method=method)["x"].values
                     for x in X])


def worth_table(means: np.ndarray, arviz_ess: np.ndarray, ref_mean: np.ndarray,
                ref_sd: np.ndarray, level: float = 0.90,
                arviz_mean_ess: np.ndarray | None = None) -> list[dict]:
    """Per coordinate: ArviZ's mean ESS per chain, the spread ESS with its ``level``
    interval, their ratio with its interval and the ESS from the errors against the
    reference means.  ``means`` and ``arviz_ess`` are (chains, k)."""
    n = len(means)
    spread = spread_ess(means, ref_sd)
    lo_q, hi_q = stats.chi2.ppf([(1 - level) / 2, (1 + level) / 2], n - 1) / (n - 1)
    error = ref_sd**2 / np.mean((means - ref_mean) ** 2, axis=0)
    out = []
    for j in range(means.shape[1]):
        ratio = arviz_ess[:, j].mean() / spread[j]
        # the true ESS is spread * s^2 / sigma^2 with s^2 / sigma^2 ~ chi2_{n-1} / (n - 1)
        out.append({"arviz": float(arviz_ess[:, j].mean()),
                    "arviz_range": (float(arviz_ess[:, j].min()), float(arviz_ess[:, j].max())),
                    "spread": float(spread[j]),
                    "spread_interval": (float(spread[j] * lo_q), float(spread[j] * hi_q)),
                    "ratio": float(ratio), "ratio_interval": (float(ratio / hi_q),
                                                              float(ratio / lo_q)),
                    "error_ess": float(error[j]),
                    "mean_ratio": (np.nan if arviz_mean_ess is None else
                                   float(arviz_mean_ess[:, j].mean() / spread[j]))})
    return out


def print_table(result: dict, ref: Reference, labels: list[str]) -> list[dict]:
    """The table of :func:`worth_table` for the pooled chains of ``result`` (as written to
    ``--json``), in Markdown."""
    means = np.array(result["means"])
    mean_ess = np.array(result["arviz_mean_ess"]) if "arviz_mean_ess" in result else None
    table = worth_table(means, np.array(result["arviz_ess"]), ref.mean, ref.sd,
                        arviz_mean_ess=mean_ess)
    print(f"{len(means)} chains; Kish per chain {np.nanmean(result['kish']):.0f}; "
          f"evaluations per chain {np.mean(result['evals']):.0f}")
    print("| coordinate | ArviZ bulk ESS per chain (mean, range) | spread ESS (90 %) "
          "| ratio (90 %) | ArviZ mean-ESS ratio | ESS from errors |")
    print("|---|---|---|---|---|---|")
    for name, t in zip(labels, table, strict=True):
        print(f"| {name} | {t['arviz']:.0f} ({t['arviz_range'][0]:.0f}-"
              f"{t['arviz_range'][1]:.0f}) | {t['spread']:.0f} ({t['spread_interval'][0]:.0f}-"
              f"{t['spread_interval'][1]:.0f}) | {t['ratio']:.2f} ({t['ratio_interval'][0]:.2f}"
              f"-{t['ratio_interval'][1]:.2f}) | {t['mean_ratio']:.2f} | {t['error_ess']:.0f} |")
    return table


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="pk")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4])
    parser.add_argument("--chains", type=int, default=6, help="SMC chains per seed")
    parser.add_argument("--draws", type=int, default=1000, help="SMC particles")
    parser.add_argument("--kameleon", default='{"emulator": true}')
    parser.add_argument("--json", help="write the chains' means and ESS here after each seed")
    parser.add_argument("--pool", action="store_true",
                        help="also record each chain's weighted pool before resampling")
    parser.add_argument("--tables", nargs="+", metavar="JSON",
                        help="no runs: pool the chains of these --json files (one model)")
    args = parser.parse_args(argv)
    quiet_pymc()
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    if args.tables:
        parts = [json.load(open(path)) for path in args.tables]
        result = {key: sum((p[key] for p in parts), []) for key in
                  ("seeds", "means", "arviz_ess", "kish", "evals")}
        if all("arviz_mean_ess" in p for p in parts):
            result["arviz_mean_ess"] = sum((p["arviz_mean_ess"] for p in parts), [])
        ref = Reference(parts[0]["model"])
        return {**result, "table": print_table(result, ref, free_var_labels(ref.model)[1])}
    ref = Reference(args.model)
    run_args = SimpleNamespace(draws=args.draws, chains=args.chains, kameleon=args.kameleon,
                               budget=0)
    means, ess, mean_ess, kish, evals = [], [], [], [], []
    recorder = PoolRecorder()
    for seed in args.seeds:
        if args.pool:
            with recorder:
                r = _run("kameleon", args.model, ref, seed, run_args)
        else:
            r = _run("kameleon", args.model, ref, seed, run_args)
        X = r["draws"].reshape(args.chains, -1, r["draws"].shape[-1])  # (chains, draws, k)
        means.append(X.mean(axis=1))
        ess.append(arviz_ess_per_chain(X))
        mean_ess.append(arviz_ess_per_chain(X, "mean"))
        kish += r["kish_chains"]
        evals.append(r["evals"])
        print(f"seed {seed}: {X.shape[1]} draws a chain, {r['evals']:.0f} evaluations a "
              f"chain, Kish per chain {np.round(r['kish_chains']).tolist()}, ArviZ per "
              f"chain (min over coordinates) {np.round(ess[-1].min(axis=1)).tolist()}",
              flush=True)
        result = {"model": args.model, "settings": args.kameleon, "seeds": args.seeds,
                  "means": np.concatenate(means).tolist(),
                  "arviz_ess": np.concatenate(ess).tolist(),
                  "arviz_mean_ess": np.concatenate(mean_ess).tolist(), "kish": kish,
                  "evals": evals, "pools": recorder.records}
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)
    table = print_table(result, ref, free_var_labels(ref.model)[1])
    if recorder.records:
        print_pools(recorder.records)
    return {**result, "table": table}


def print_pools(records: list[dict]) -> None:
    """The weighted pools before resampling: the mean over chains of the delta method's
    ESS of a pool's mean, against the ESS from the spread of the pools' means (the pools'
    mean variance over the variance of their means; unconstrained coordinates)."""
    means = np.array([r["mean"] for r in records])
    var = np.array([r["var"] for r in records]).mean(axis=0)
    inside = np.array([r["ess"] for r in records]).mean(axis=0)
    spread = var / means.var(axis=0, ddof=1)
    print(f"weighted pools of {len(records)} chains (unconstrained coordinates):")
    noise = {k: np.array([r["noise"][k] for r in records if "noise" in r]).mean(axis=0)
             for k in ("curve", "random")} if all("noise" in r for r in records) else None
    size = records[0].get("size", 1000)
    for j in range(means.shape[1]):
        line = (f"  {j}: delta-method ESS {inside[j]:.0f}, spread ESS {spread[j]:.0f}, "
                f"ratio {inside[j] / spread[j]:.2f}")
        if noise is not None:  # the returned draws' worth: 1 / (1 / pool's + noise / size)
            worth = {k: 1 / (1 / spread[j] + noise[k][j] / size) for k in noise}
            line += (f"; resampling noise per draw: curve {noise['curve'][j]:.2f}, random "
                     f"{noise['random'][j]:.2f}; draws worth: curve {worth['curve']:.0f}, "
                     f"random {worth['random']:.0f}")
        print(line)


if __name__ == "__main__":
    main()
