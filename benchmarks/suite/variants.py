"""Compare variants of one step (e.g. one argument at several values) on suite models.

Every variant runs with ``pm.sample``'s defaults (tune 1000, draws 1000, 4 chains) through
:func:`~benchmarks.suite.runner.run_one`, one run per model, seed and variant; a markdown
table of min bulk ESS, ESS per 1000 log-density evaluations and max R-hat per run is printed
and the suite's criteria (✓, or the letters of the failing ones, as in the suite's tables)
per run is printed as the runs finish, with the wall time of the run (step construction and
``pm.sample``, chains one after the other) and its evaluations (thousands, every chain), and
the sum of the ESS and the number of runs that meet all four criteria per variant at the end,
then, per model and variant, the ESS from the spread of every chain's mean over the seeds
(each chain an independent run; min and median over the scalars, per run of ``chains``
chains, and per 1000 evaluations).
A step that reports the surrogate screen's stats adds the share of chains screening after
tuning and the first-stage acceptance (``screen active, stage 1``).  Used by
:mod:`benchmarks.research.fkamh_rank`, :mod:`benchmarks.research.kamh_gamma`,
:mod:`benchmarks.research.iterations_per_draw` and :mod:`benchmarks.research.screen_suite`.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..common import SamplerSpec, quiet_pymc
from .metrics import spread_ess
from .models import MODELS
from .reference import load_reference
from .report import failed_letters
from .runner import SAMPLERS, run_one

__all__ = ["compare_variants"]


def compare_variants(models: list[str], seeds: list[int],
                     variants: dict[str, Callable[[], object] | str], tune: int = 1000,
                     draws: int = 1000, chains: int = 4) -> dict[str, float]:
    """Print one table row per model and seed, one cell per variant; return the ESS sums.

    ``variants`` maps a label to a step factory (called inside the model context) or to the
    name of one of the suite's samplers (e.g. ``"metropolis"``).  ``tune``, ``draws`` and
    ``chains`` are ``pm.sample``'s defaults unless given (smaller ones for tests).
    """
    quiet_pymc()
    keys = {}
    for label, factory in variants.items():
        if isinstance(factory, str):
            keys[label] = factory
            continue
        key = f"variant: {label}"
        SAMPLERS[key] = SamplerSpec(key, label, factory, ours=True)
        keys[label] = key
    print("| model | seed | "
          + " | ".join(f"{label}: ESS, per 1k evals (R-hat) wall s criteria; evals; worst sd "
                       "ratio, mean error (sds)"
                       for label in variants) + " |")
    print("|---|---|" + "---|" * len(variants))
    totals = dict.fromkeys(variants, 0.0)
    passed = dict.fromkeys(variants, 0)
    spread = {(name, label): [] for name in models for label in variants}
    ref_sds = {}
    for name in models:
        spec, ref = MODELS[name], load_reference(name)
        ref_sds[name] = ref.sd
        for seed in seeds:
            cells = []
            for label, key in keys.items():
                run = run_one(spec, key, ref, tune, draws, chains, seed)
                if run.error:
                    cells.append(f"error: {run.error[:40]}")
                    continue
                spread[name, label].append(run)
                acc = run.accuracy
                totals[label] += acc["min_ess_bulk"]
                passed[label] += bool(acc["all_ok"])
                cell = (f"{acc['min_ess_bulk']:.0f}, {run.ess_per_1k_evals:.2f} "
                        f"({acc['max_rhat']:.3f}) {run.wall:.1f} {failed_letters(run)}; "
                        f"{run.evals / 1000:.1f}k; sd ratio {acc['sd_ratio']:.2f}, "
                        f"mean err {acc['mean_err']:.2f}")
                if run.emulator_warned is not None:
                    cell += "; warned" if run.emulator_warned else "; no warning"
                if run.screen_active is not None:
                    cell += (f"; screen active {run.screen_active:.2f}, "
                             f"stage 1 {run.screen_stage1:.2f}")
                cells.append(cell)
            print(f"| {name} | {seed} | " + " | ".join(cells) + " |", flush=True)
    print("| sum of min bulk ESS | | " + " | ".join(f"{totals[k]:.0f}" for k in variants) + " |")
    runs = len(models) * len(seeds)
    print("| runs meeting all four criteria | | "
          + " | ".join(f"{passed[k]} of {runs}" for k in variants) + " |")
    print_spread(spread, chains, ref_sds)
    return totals


def print_spread(spread: dict, chains: int, ref_sds: dict) -> None:
    """The table of ESS from the spread of the chains' means (``spread``: (model, label) ->
    the runs; ``ref_sds``: model -> the reference sds), per run of ``chains`` chains: min
    and median over the scalars, and the minimum per 1000 evaluations."""
    print("\n| model | variant | chains | spread ESS per run: min, median | min per 1k evals |")
    print("|---|---|---|---|---|")
    for (name, label), runs in spread.items():
        means = np.concatenate([np.asarray(r.chain_means) for r in runs]) if runs else []
        if len(means) < 2:
            continue
        ess = chains * spread_ess(means, ref_sds[name])
        evals = np.mean([r.evals for r in runs])
        print(f"| {name} | {label} | {len(means)} | {np.min(ess):.0f}, {np.median(ess):.0f} "
              f"| {1000 * np.min(ess) / evals:.1f} |", flush=True)
