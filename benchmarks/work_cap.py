"""The bound on the work per draw, and a longer tuning, on one suite model.

``python -m benchmarks.work_cap --model gp-pois-regr --steps rw,kamh,fkamh,khmc
--seeds 1,2,3 --caps 4,8,16 [--tune 1000] [--force] --json out.json``;
``python -m benchmarks.work_cap --report out.json...`` prints the markdown table;
``python -m benchmarks.work_cap --window-reading`` how the window reads long times;
``python -m benchmarks.work_cap --escalation 4 100`` what windows that escalate would reach.

Each run is the suite's (:func:`benchmarks.suite.runner.run_one`: ``pm.sample``'s defaults
otherwise, chains one after the other, every log-density evaluation counted) with
:class:`~pymc_kameleon.adaptation.work.WorkPerDraw`'s bound on the factor set to ``cap``
(the default is :data:`~pymc_kameleon.adaptation.work.MAX_FACTOR`) and ``tune`` tuning
draws (``--force``: every chain takes the bound as its factor, whatever its window read).
Per run: the four criteria (R-hat, bulk ESS, means, sds), min bulk ESS, the
evaluations, ESS per 1000 evaluations and the factor each chain chose (its ``tau`` too).
Results: docs/benchmarks/work_cap.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

import numpy as np

from pymc_kameleon.adaptation import work

from .suite.compare import cell
from .suite.models import MODELS
from .suite.reference import load_reference
from .suite.runner import run_one

__all__ = ["escalation", "main", "report", "work_cap"]

#: The issue's tolerances on means (reference sds) and sd ratios (the suite's are 0.1, 0.1).
ISSUE_TOL = (0.15, 0.15)
#: Table order of the samplers.
ORDER = ("rw", "kamh", "fkamh", "khmc", "nuts")


@contextlib.contextmanager
def work_cap(cap: float, chosen: list, force: bool = False):
    """Within the block, every step's work-per-draw window bounds its factor by ``cap``
    (``force``: the factor is ``cap`` whatever the window reads, i.e. a window that reads
    every long time right); each chain's ``(factor, tau)`` is appended to ``chosen``."""
    schedule, final = work.WorkPerDraw.__dict__["schedule"], work.WorkPerDraw.final

    def _final(self, target_tau=None):
        factor = final(self, target_tau)
        if force:
            factor = cap
        chosen.append((factor, self.tau))
        return factor

    def _schedule(tune, begin, max_factor=None):  # the step's own bound replaced by cap
        return schedule.__func__(work.WorkPerDraw, tune, begin, max_factor=cap)

    work.WorkPerDraw.schedule = _schedule
    work.WorkPerDraw.final = _final
    try:
        yield
    finally:
        work.WorkPerDraw.schedule, work.WorkPerDraw.final = schedule, final


def report(paths: list[Path]) -> list[str]:
    """The markdown lines: a row per run (sampler, bound, tuning, seed), then per sampler and
    setting how many seeds met all four criteria."""
    runs = [r for p in paths for r in json.loads(Path(p).read_text())["runs"]]
    runs.sort(key=lambda r: (ORDER.index(r["sampler"]) if r["sampler"] in ORDER else 99,
                             r["cap"], r.get("forced", False), r["tune"], r["seed"]))
    lines = ["| sampler | bound | tune | seed | criteria (suite / issue) | max R-hat | "
             "min bulk ESS | worst mean err (sd) | worst sd ratio | evals | ESS per 1k evals | "
             "factors |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        a, bound = r["accuracy"], _bound(r)
        if not a:
            lines.append(f"| {r['sampler']} | {bound} | {r['tune']} | {r['seed']} | "
                         f"error | | | | | | | {r['error']} |")
            continue
        factors = ", ".join(f"{f:.1f}" for f in r["factors"]) or "-"
        lines.append(
            f"| {r['sampler']} | {bound} | {r['tune']} | {r['seed']} | "
            f"{_mark(cell(r))} / {_mark(cell(r, *ISSUE_TOL))} | {a['max_rhat']:.3f} | "
            f"{a['min_ess_bulk']:.0f} | {a['mean_err']:.2f} ({a['worst_mean']}) | "
            f"{a['sd_ratio']:.2f} ({a['worst_sd']}) | {r['evals'] / 1e3:.0f}k | "
            f"{r['ess_per_1k_evals']:.2f} | {factors} |")
    lines += ["", "| sampler | bound | tune | seeds meeting the issue's criteria | mean evals | "
              "mean ESS per 1k evals |", "|---|---|---|---|---|---|"]
    groups: dict[tuple, list[dict]] = {}
    for r in runs:
        groups.setdefault((r["sampler"], _bound(r), r["tune"]), []).append(r)
    for (sampler, bound, tune), rs in groups.items():
        ok = [r["seed"] for r in rs if cell(r, *ISSUE_TOL) == "ok"]
        lines.append(f"| {sampler} | {bound} | {tune} | {len(ok)} of {len(rs)} "
                     f"({', '.join(map(str, ok)) or 'none'}) | "
                     f"{np.mean([r['evals'] for r in rs]) / 1e3:.0f}k | "
                     f"{np.mean([r['ess_per_1k_evals'] for r in rs]):.2f} |")
    return lines


def _bound(run: dict) -> str:
    return f"{run['cap']:g}" + (" (forced)" if run.get("forced") else "")


def _mark(letters: str) -> str:
    return "✓" if letters == "ok" else letters


def _read_ar1(rho: float, size: int, rng: np.random.Generator,
              x: np.ndarray) -> tuple[work.WorkPerDraw, np.ndarray]:
    """A window of ``size`` draws read by :class:`WorkPerDraw` (unbounded) on a chain from
    ``x`` whose first coordinate is an AR(1) with coefficient ``rho``, the second
    independent; the window after :meth:`~WorkPerDraw.final`, and the last draw."""
    window = work.WorkPerDraw(start=1, decide=size + 1, max_factor=np.inf)
    coef = np.array([rho, 0.0])
    for draw in range(1, size + 1):
        x = coef * x + np.sqrt(1 - coef**2) * rng.standard_normal(2)
        window.update(draw, x)
    window.final()
    return window, x


def _over_chains(rhos, seeds: int, one) -> list[tuple[float, list]]:
    """Per coefficient, ``one(rho, rng)`` on ``seeds`` chains seeded ``0, 1, ...``."""
    return [(rho, [one(rho, np.random.default_rng(seed)) for seed in range(seeds)])
            for rho in rhos]


def window_reading(rhos=(0.9, 0.95, 0.98, 0.995), seeds: int = 20) -> list[str]:
    """How the work-per-draw window reads long autocorrelation times: per AR(1) coefficient
    (and true time ``(1 + rho) / (1 - rho)``), the time ``WorkPerDraw`` measures over the
    default window of 200 draws (the smaller of its halves' readings) on ``seeds`` chains,
    the other coordinate independent."""
    lines = ["| AR(1) coefficient | true time | read: min | median | max |",
             "|---|---|---|---|---|"]
    for rho, read in _over_chains(rhos, seeds, lambda rho, rng: _read_ar1(
            rho, 200, rng, rng.standard_normal(2))[0].tau):
        lines.append(f"| {rho} | {(1 + rho) / (1 - rho):.0f} | {min(read):.1f} | "
                     f"{np.median(read):.1f} | {max(read):.1f} |")
    return lines


def escalation(windows: int = 4, size: int = 100, bound: float = 32.0,
               rhos=(0.5, 0.8, 0.9, 0.95, 0.98, 0.995), seeds: int = 40) -> list[str]:
    """A design check for a window that escalates: on AR(1) chains (per-draw coefficient
    ``rho ** factor`` at a factor), ``windows`` windows of ``size`` draws each read the
    time as :class:`WorkPerDraw` does and multiply the factor by ``max(1, tau / 3)``, up to
    ``bound``.  Per ``rho``: the factor needed (``tau / 3``, bounded) and the factors reached
    over ``seeds`` chains (min, median, max, the share at the bound)."""
    lines = ["| true time | factor needed | reached: min | median | max | at the bound |",
             "|---|---|---|---|---|---|"]

    def escalate(rho, rng):
        factor, x = 1.0, rng.standard_normal(2)
        for _ in range(windows):
            window, x = _read_ar1(rho**factor, size, rng, x)
            factor = float(np.clip(factor * max(1.0, window.asked), 1.0, bound))
        return factor

    for rho, reached in _over_chains(rhos, seeds, escalate):
        tau = (1 + rho) / (1 - rho)
        lines.append(f"| {tau:.0f} | {min(tau / 3, bound):.1f} | {min(reached):.1f} | "
                     f"{np.median(reached):.1f} | {max(reached):.1f} | "
                     f"{np.mean(np.array(reached) >= bound):.2f} |")
    return lines


def main(argv: list[str] | None = None) -> None:
    """Command line: one line of JSON per run on stdout, all of them in ``--json``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", type=Path, nargs="+", default=None,
                        help="print the table of these --json files instead of running")
    parser.add_argument("--model", default="gp-pois-regr")
    parser.add_argument("--steps", default="rw,kamh,fkamh,khmc")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--caps", default="4,8,16")
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--force", action="store_true",
                        help="every chain's factor is the bound, whatever its window reads")
    parser.add_argument("--window-reading", action="store_true",
                        help="print how the window reads AR(1) chains instead of running")
    parser.add_argument("--escalation", type=int, nargs=2, default=None,
                        metavar=("WINDOWS", "SIZE"),
                        help="print the escalating-window check instead of running")
    args = parser.parse_args(argv)
    if args.escalation:
        print("\n".join(escalation(*args.escalation)))
        return
    if args.report:
        print("\n".join(report(args.report)))
        return
    if args.window_reading:
        print("\n".join(window_reading()))
        return
    spec, ref = MODELS[args.model], load_reference(args.model)
    runs = []
    for cap in (float(c) for c in args.caps.split(",")):
        for sampler in args.steps.split(","):
            for seed in (int(s) for s in args.seeds.split(",")):
                chosen: list = []
                with work_cap(cap, chosen, args.force):
                    res = run_one(spec, sampler, ref, args.tune, args.draws, args.chains, seed)
                out = res.to_dict() | {"cap": cap, "forced": args.force,
                                       "criteria": cell(res.to_dict()),
                                       "factors": [c[0] for c in chosen],
                                       "taus": [c[1] for c in chosen]}
                runs.append(out)
                print(json.dumps({k: out[k] for k in (
                    "sampler", "seed", "cap", "tune", "criteria", "evals", "wall",
                    "ess_per_1k_evals", "factors", "accuracy", "error")}), flush=True)
                if args.json:
                    args.json.write_text(json.dumps({"command": " ".join(
                        ["python -m benchmarks.work_cap", *(sys.argv[1:] if argv is None
                                                            else argv)]), "runs": runs},
                        indent=1))


if __name__ == "__main__":
    main()
