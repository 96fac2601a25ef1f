"""``python -m benchmarks.suite.compare --before FILE... --after FILE...``: two code versions.

Reads the ``--json`` files of ``python -m benchmarks.suite`` for the same models, samplers
and seeds run at two commits, and prints which (model, sampler, seed) runs meet all four
criteria before and after: a markdown row per model with a cell per sampler (one
``before → after`` per seed), the counts per sampler, and every run that met the criteria
before and misses them after.  A run that ended in an error (a timeout, a crash) misses
them.  ``--mean-tol`` and ``--sd-tol`` re-judge the recorded worst mean error and sd ratio
(the suite's flags use 0.1 and 0.1; issue 42 judged with 0.15 and 0.15).  The results are
on ``docs/benchmarks/suite.md``, "The whole suite before and after issue 42".
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from .cost import check_one_budget
from .metrics import ESS_MIN, MEAN_TOL, RHAT_MAX, SD_TOL
from .runner import SAMPLERS

__all__ = ["cell", "load", "main", "report"]

Key = tuple[str, str, int]


def load(paths: list[str]) -> dict[Key, dict]:
    """Every run, errors included, keyed by (model, sampler key, seed); the later file wins.
    A ``ValueError`` if the runs do not share one budget (tune, draws, chains)."""
    runs: dict[Key, dict] = {}
    for path in paths:
        for r in json.loads(Path(path).read_text())["runs"]:
            if not r.get("skipped"):
                runs[(r["model"], r["sampler"], int(r["seed"]))] = r
    return check_one_budget(runs)


def cell(run: dict | None, mean_tol: float = MEAN_TOL, sd_tol: float = SD_TOL) -> str:
    """``"ok"``, the letters of the failing criteria (R, E, M, S), ``"error"`` or ``"-"``
    (not run)."""
    if run is None:
        return "-"
    acc = run.get("accuracy")
    if run.get("error") or not acc:
        return "error"
    failed = "".join(letter for letter, ok in (
        ("R", acc["max_rhat"] <= RHAT_MAX), ("E", acc["min_ess_bulk"] >= ESS_MIN),
        ("M", acc["mean_err"] <= mean_tol), ("S", abs(acc["sd_ratio"] - 1.0) <= sd_tol))
        if not ok)
    return failed or "ok"


def report(before: dict[Key, dict], after: dict[Key, dict], mean_tol: float = MEAN_TOL,
           sd_tol: float = SD_TOL) -> list[str]:
    """The markdown lines: a row per model, a cell per sampler holding ``before → after``
    for each seed in order (``; ``-separated), the counts, the regressions.  Only (model,
    sampler, seed) present in both are compared."""
    common = sorted(set(before) & set(after))
    seeds = sorted({k[2] for k in common})
    models = list(dict.fromkeys(k[0] for k in after if k in before))  # the suite's order
    keys = [k for k in SAMPLERS if any(c[1] == k for c in common)]
    judge = {k: (cell(before[k], mean_tol, sd_tol), cell(after[k], mean_tol, sd_tol))
             for k in common}
    labels = " | ".join(SAMPLERS[k].label for k in keys)
    out = [f"| model | {labels} |", "|---|" + "---|" * len(keys)]
    for model in models:
        cells = ["; ".join(" → ".join(judge[(model, key, s)]) for s in seeds
                           if (model, key, s) in judge) or "-" for key in keys]
        out.append(f"| {model} | {' | '.join(cells)} |")
    out += ["", "| sampler | runs | meet all four before | after | passed before, miss after |",
            "|---|---|---|---|---|"]
    total = [0, 0, 0, 0]
    for key in keys:
        mine = [j for k, j in judge.items() if k[1] == key]
        counts = (len(mine), sum(b == "ok" for b, _ in mine), sum(a == "ok" for _, a in mine),
                  sum(b == "ok" != a for b, a in mine))
        total = [t + c for t, c in zip(total, counts, strict=True)]
        out.append(f"| {SAMPLERS[key].label} | " + " | ".join(map(str, counts)) + " |")
    out.append("| all | " + " | ".join(map(str, total)) + " |")
    lost = [f"- {m}, {SAMPLERS[k].label}, seed {s}: {judge[(m, k, s)][1]}"
            for m, k, s in common if judge[(m, k, s)][0] == "ok" != judge[(m, k, s)][1]]
    out += ["", "Runs that met all four before and miss them after:"] + (lost or ["- none"])
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.suite.compare",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--before", nargs="+", required=True, help="--json files, old code")
    parser.add_argument("--after", nargs="+", required=True, help="--json files, new code")
    parser.add_argument("--mean-tol", type=float, default=MEAN_TOL,
                        help="max |mean - ref| / ref sd (default: the suite's)")
    parser.add_argument("--sd-tol", type=float, default=SD_TOL,
                        help="max |sd / ref sd - 1| (default: the suite's)")
    args = parser.parse_args(argv)
    print("\n".join(report(load(args.before), load(args.after), args.mean_tol, args.sd_tol)))


if __name__ == "__main__":
    main()
