"""``python -m benchmarks.suite.cost FILE...``: ESS per evaluation and wall time over seeds.

Reads the ``--json`` files of ``python -m benchmarks.suite`` (``{"runs": [...]}``) and the
JSON lines of ``python -m benchmarks.research.local_scale --json`` (its ``default`` variant is
RandomWalkStep), and prints one markdown row per model and sampler: the seeds run, how many
runs meet all four criteria, min bulk ESS per 1000 log-density evaluations and wall time
(median and range over the seeds) and the median evaluations per run.  Where several files
hold the same (model, sampler, seed), the later file on the command line wins.  The
results are on ``docs/benchmarks/suite.md``, "ESS per evaluation and wall time".
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from .runner import SAMPLERS

__all__ = ["check_one_budget", "load_runs", "main", "rows"]

#: ``local_scale`` names its runs by variant; its default is RandomWalkStep.
ALIASES = {"local-scale: default": "rw"}


def load_runs(paths: list[str]) -> dict[tuple[str, str, int], dict]:
    """Runs with a measurement (no error) keyed by (model, sampler key, seed); a
    ``ValueError`` if they do not share one budget (tune, draws, chains), whose ESS and
    evaluations would not compare."""
    runs: dict[tuple[str, str, int], dict] = {}
    for path in paths:
        text = Path(path).read_text()
        try:
            records = json.loads(text)["runs"]
        except (json.JSONDecodeError, TypeError, KeyError):
            records = [json.loads(line) for line in text.splitlines() if line.strip()]
        for r in records:
            key = ALIASES.get(r["sampler"], r["sampler"])
            if key in SAMPLERS and r.get("accuracy"):
                runs[(r["model"], key, int(r["seed"]))] = r
    return check_one_budget(runs)


def check_one_budget(runs: dict) -> dict:
    """``runs`` unchanged; a ``ValueError`` if they do not share one budget (tune, draws,
    chains), whose ESS and evaluations would not compare."""
    budgets = {(r["tune"], r["draws"], r["chains"]) for r in runs.values()}
    if len(budgets) > 1:
        raise ValueError(f"runs of different budgets (tune, draws, chains): {sorted(budgets)}")
    return runs


def _median_range(values: list[float], fmt: str) -> str:
    mid = format(statistics.median(values), fmt)
    if len(values) == 1:
        return mid
    return f"{mid} [{format(min(values), fmt)}, {format(max(values), fmt)}]"


def rows(runs: dict[tuple[str, str, int], dict]) -> list[str]:
    """The table: models in the order first seen, samplers in the suite's order."""
    models = list(dict.fromkeys(model for model, _, _ in runs))
    out = ["| model | sampler | seeds | runs meeting all four | ESS per 1k evals, median "
           "[range] | evaluations per run, median | wall (s), median [range] |",
           "|---|---|---|---|---|---|---|"]
    for model in models:
        for key, spec in SAMPLERS.items():
            found = [runs[k] for k in sorted(runs) if k[:2] == (model, key)]
            if not found:
                continue
            passing = sum(bool(r["accuracy"]["all_ok"]) for r in found)
            out.append(
                f"| {model} | {spec.label} | {','.join(str(r['seed']) for r in found)} | "
                f"{passing} of {len(found)} | "
                f"{_median_range([r['ess_per_1k_evals'] for r in found], '.1f')} | "
                f"{statistics.median(r['evals'] for r in found) / 1e3:.0f}k | "
                f"{_median_range([r['wall'] for r in found], '.0f')} |")
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.suite.cost",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", help="--json outputs of the suite / local_scale")
    print("\n".join(rows(load_runs(parser.parse_args(argv).files))))


if __name__ == "__main__":
    main()
