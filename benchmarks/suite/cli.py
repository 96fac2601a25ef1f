"""``python -m benchmarks.suite``: every sampler on every model, one table per model.

Usage::

    python -m benchmarks.suite [--models a,b] [--steps x,y] [--quick] [--tune N]
                               [--draws N] [--chains N] [--seed S] [--timeout SECONDS]
                               [--glass PATH] [--json FILE] [--markdown FILE]
                               [--reuse FILE]
    python -m benchmarks.suite --list     # the models, with the cost of one evaluation

Default budget: PyMC's defaults, ``tune=1000, draws=1000`` and 4 chains (run one after the
other in this process, ``cores=1``, so evaluations can be counted), every step built with
its defaults (``pm.sample(step=Step())``).  ``--quick``: 200 + 200 iterations and 2 chains
(smoke test; the criteria are meaningless there).  References are read from
``benchmarks/data/suite`` (made by ``python -m benchmarks.suite.reference``).  Prints the
tables (markdown) to stdout and progress to stderr; ``--json`` and ``--markdown`` also
write them to files (keep such outputs out of git).  The ``--json`` file is rewritten after
each model, its ``meta["finished"]`` false until the end: a run stopped midway keeps the
models it finished.  ``--reuse FILE`` adds the runs of an
earlier ``--json`` file for samplers not run now (same model, budget and seed), so PyMC's
samplers, which do not change with this package, need not be re-run after a change to ours.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
from pathlib import Path

from pymc_kameleon.models.gpc import GLASS_ENV_VAR

from .models import DEFAULT_GLASS, MODELS, set_glass_path
from .reference import REFERENCE_DIR, load_reference, versions
from .report import model_header, model_table, summary_tables
from .runner import DEFAULT_SAMPLERS, SAMPLERS, RunResult, run_one

__all__ = ["DEFAULT", "QUICK", "main"]

#: ``(tune, draws, chains)``.
DEFAULT = (1000, 1000, 4)
QUICK = (200, 200, 2)
#: Seconds per run on a cheap model when ``--timeout`` is not given: the slowest cheap run
#: measured took about 100 s (FastKameleonStep on gauss-50, quiet machine), but pm.Slice does
#: not finish on the latent random walk (``timeseries``) in 300 s.  Expensive models get no
#: default limit (pm.Slice on gp-glass took 51 min on a loaded machine).
CHEAP_TIMEOUT = 600.0


def run_timeout(spec, given: float | None) -> float | None:
    """The time limit of a run on ``spec``: ``--timeout`` if given, else
    :data:`CHEAP_TIMEOUT` for a cheap model and none for an expensive one."""
    if given is not None:
        return given
    return CHEAP_TIMEOUT if spec.cheap else None


def _split(value: str | None, known: dict, what: str, parser) -> list[str]:
    if value is None:
        return list(known)
    names = [v.strip() for v in value.split(",") if v.strip()]
    unknown = sorted(set(names) - set(known))
    if unknown:
        parser.error(f"unknown {what} {unknown}; choose from {list(known)}")
    return [k for k in known if k in names]


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:  # pragma: no cover
        return "n/a"


def parse_args(argv: list[str] | None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.suite",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--models", help=f"comma-separated, from {list(MODELS)}")
    parser.add_argument("--steps", "--samplers", dest="steps",
                        help=f"comma-separated, from {list(SAMPLERS)} (default: all but "
                             "khmc-lite)")
    parser.add_argument("--quick", action="store_true",
                        help=f"tiny budget: tune, draws, chains = {QUICK} (smoke test)")
    parser.add_argument("--tune", type=int, help=f"tuning iterations per chain ({DEFAULT[0]})")
    parser.add_argument("--draws", type=int, help=f"draws per chain ({DEFAULT[1]})")
    parser.add_argument("--chains", type=int, help=f"number of chains ({DEFAULT[2]})")
    parser.add_argument("--seed", type=int, default=1234, help="random_seed of pm.sample")
    parser.add_argument("--timeout", type=float,
                        help=f"seconds per run, recorded as an error (default: {CHEAP_TIMEOUT:.0f} "
                             "on cheap models, none on expensive ones)")
    parser.add_argument("--glass", type=Path,
                        help=f"glass.data for gp-glass (default: ${GLASS_ENV_VAR}, else "
                             f"{DEFAULT_GLASS}; skipped if absent)")
    parser.add_argument("--json", type=Path, help="also write every measurement to this file")
    parser.add_argument("--markdown", type=Path, help="also write the tables to this file")
    parser.add_argument("--reuse", type=Path,
                        help="earlier --json file: its runs of samplers not in --steps (same "
                             "model, budget and seed) join the tables")
    parser.add_argument("--references", type=Path, default=REFERENCE_DIR)
    parser.add_argument("--list", action="store_true",
                        help="list the models with the measured cost of one evaluation")
    args = parser.parse_args(argv)
    args.models = _split(args.models, MODELS, "models", parser)
    args.samplers = (list(DEFAULT_SAMPLERS) if args.steps is None
                     else _split(args.steps, SAMPLERS, "steps", parser))
    tune, draws, chains = QUICK if args.quick else DEFAULT
    args.tune = tune if args.tune is None else args.tune
    args.draws = draws if args.draws is None else args.draws
    args.chains = chains if args.chains is None else args.chains
    args.command = " ".join(["python -m benchmarks.suite",
                             *(sys.argv[1:] if argv is None else argv)])
    return args


def eval_cost(spec, repeats: int = 200) -> float:
    """Median µs of one compiled log-density evaluation at the initial point."""
    model = spec.factory()
    logp = model.compile_logp()
    point = model.initial_point()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        logp(point)
        times.append(time.perf_counter() - start)
    return 1e6 * float(sorted(times)[len(times) // 2])


def list_models(names: list[str]) -> None:
    """Print the model table of docs/benchmarks/suite.md (markdown)."""
    print("| model | d | cost | µs / evaluation | gradient | multimodal | hard by design "
          "| reference |\n|---|---|---|---|---|---|---|---|")
    for name in names:
        spec = MODELS[name]
        cost = f"{eval_cost(spec):.0f}" if spec.available() else "n/a (no data)"
        print(f"| {name} | {spec.dim} | {'cheap' if spec.cheap else 'expensive'} | {cost} | "
              f"{'yes' if spec.has_gradient else 'no'} | {'yes' if spec.multimodal else ''} | "
              f"{spec.hard} | {spec.reference}: {spec.reference_note} |", flush=True)


def reused_runs(path: Path | None, args) -> tuple[dict[str, list[RunResult]], str | None]:
    """Runs of ``path`` (an earlier ``--json``) to add, per model, and a line saying so.

    Only samplers not run now, and only runs with this run's budget and seed, are taken.
    """
    if path is None:
        return {}, None
    saved = json.loads(path.read_text())
    budget = (args.tune, args.draws, args.chains, args.seed)
    by_model: dict[str, list[RunResult]] = {}
    for data in saved["runs"]:
        run = RunResult.from_dict(data)
        if (run.sampler not in args.samplers and run.model in args.models
                and (run.tune, run.draws, run.chains, run.seed) == budget):
            by_model.setdefault(run.model, []).append(run)
    meta = saved.get("meta", {})
    note = (f"Runs of {sorted({r.sampler for rs in by_model.values() for r in rs})} reused from "
            f"`{path.name}` (`{meta.get('command', '?')}`, {meta.get('date', '?')}, "
            f"{meta.get('versions', '?')}); their wall times were measured then.")
    return by_model, note


def run_meta(args) -> dict:
    """The ``meta`` of a ``--json`` file: command, budget, seed, versions and machine."""
    return {"command": args.command,
            "date": datetime.datetime.now().isoformat(timespec="seconds"),
            "tune": args.tune, "draws": args.draws, "chains": args.chains, "cores": 1,
            "seed": args.seed, "versions": versions(), "machine": platform.platform(),
            "cpus": os.cpu_count(), "load_start": _load(), "finished": False}


def model_meta(spec, ref) -> dict:
    """A model's entry in the ``models`` of a ``--json`` file."""
    return {"dim": spec.dim, "cheap": spec.cheap, "multimodal": spec.multimodal,
            "has_gradient": spec.has_gradient, "hard": spec.hard,
            "pseudo_marginal": spec.pseudo_marginal, "reference": ref.meta}


def write_json(path: Path, meta: dict, models: dict, results: list[RunResult]) -> None:
    """Write the measurements so far (replacing the file whole: a reader never sees half)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(
        {"meta": meta, "models": models, "runs": [r.to_dict() for r in results]},
        indent=1, default=float))
    tmp.replace(path)


def main(argv: list[str] | None = None) -> list[RunResult]:
    """Run the suite; return the results (also printed and written to ``--out``)."""
    args = parse_args(argv)
    if args.glass is not None:
        set_glass_path(args.glass)
    if args.list:
        list_models(args.models)
        return []
    reused, reuse_note = reused_runs(args.reuse, args)
    meta = run_meta(args)
    print(f"# pymc-kameleon benchmark suite\n\n`{args.command}`: tune={args.tune}, "
          f"draws={args.draws}, chains={args.chains} (cores=1), seed={args.seed}; "
          f"{meta['date']}; {meta['versions']}\n", flush=True)
    if reuse_note:
        meta["reused"] = reuse_note
        print(reuse_note + "\n", flush=True)
    results: list[RunResult] = []
    sections, models_meta, specs = [], {}, []
    wall_start = time.perf_counter()
    for name in args.models:
        spec = MODELS[name]
        if not spec.available():
            print(f"### {name}: skipped (data not available)\n", flush=True)
            continue
        try:
            ref = load_reference(name, args.references)
        except FileNotFoundError:
            print(f"### {name}: skipped (no reference; run python -m benchmarks.suite."
                  f"reference --model {name})\n", flush=True)
            continue
        specs.append(spec)
        mine = []
        for sampler in args.samplers:
            run = run_one(spec, sampler, ref, args.tune, args.draws, args.chains, args.seed,
                          run_timeout(spec, args.timeout))
            mine.append(run)
            status = run.error or run.skipped or f"{run.wall:.1f} s"
            print(f"  [{name} / {sampler}: {status}]", file=sys.stderr, flush=True)
        mine += reused.get(name, [])
        results += mine
        section = model_header(spec, ref.meta) + "\n\n" + model_table(spec, mine)
        sections.append(section)
        models_meta[name] = model_meta(spec, ref)
        print(section + "\n", flush=True)
        if args.json is not None:
            write_json(args.json, meta, models_meta, results)
    summary = summary_tables(specs, results) if specs else ""
    if summary:
        print("## Summary\n\n" + summary + "\n")
    meta.update(seconds=time.perf_counter() - wall_start, load_end=_load(), finished=True)
    print(f"Total wall time {meta['seconds']:.0f} s; load average at start {meta['load_start']},"
          f" at end {meta['load_end']}.")
    if args.json is not None:
        write_json(args.json, meta, models_meta, results)
    if args.markdown is not None:
        args.markdown.write_text("\n\n".join(sections + ["## Summary", summary]) + "\n")
    return results
