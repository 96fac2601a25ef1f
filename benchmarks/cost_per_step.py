"""Cost per Metropolis-Hastings iteration of every step method, and where the time goes.

Usage::

    python -m benchmarks.cost_per_step [--dims 2,8,10,32,100] [--iters 2000]
                                       [--out docs/benchmarks/cost_per_step.md]
                                       [--sample-dim 10] [--sample-budget 1000,1000]
                                       [--sample-repeats 3] [--sample-steps LABELS]

For each dimension ``d`` the model is the banana B(0.1, 100) of
:func:`pymc_kameleon.models.banana_model` (a cheap PyTensor log density).  Each step is driven
by ``step.step(point)`` in a loop, as ``pm.sample`` does, after one untimed block (Numba and
PyTensor compilation, warm-up of the caches):

* our steps (``warmup_draws=20``, so the kernel adaptation starts early) are timed in two
  blocks while tuning (early and late: the cost must not grow with the chain) and one block
  after ``stop_tuning()``.  A PyMC draw holds ``n_steps`` MH iterations; the cost per
  iteration is the time per draw divided by ``n_steps``;
* PyMC's ``Metropolis``, ``DEMetropolisZ`` and ``Slice``: one block while tuning and one
  after; their cost is per ``step.step`` call (one "iteration" each; Metropolis and Slice
  update every coordinate in it, Slice with a variable number of evaluations).

Then, end to end, every step samples ``banana_model(d)`` for each ``d`` of ``--sample-dim``
(one or several, comma-separated) with ``pm.sample`` (one chain, tuning included, our steps
at their defaults, PyMC's with ``d`` times the tune and draws, i.e. as many MH iterations):
PyMC's ``sampling_time`` per chain and per MH iteration, as a ratio to DEMetropolisZ's.
``--sample-steps`` restricts this part to some steps (labels as in the tables, e.g.
``KameleonStep,RandomWalkStep``: PyMC's Slice at ``d = 100`` would take minutes), and
``--dims ""`` skips the per-iteration part.

Paired mode: is the working tree's cost per iteration within a few per cent of a revision's?
Separate runs on a shared machine differ by about +-10 %, too much to tell, so::

    python -m benchmarks.cost_per_step --against REV [--rev REV_A] [--pairs 6] [--rounds 60]
                                       [--block-ms 10] [--clock cpu] [--pin CPU] [--dims 2]

exports REV's ``pymc_kameleon`` (``git archive``) to a temporary directory, copies the working
tree's there too (or exports REV_A's), and starts ``--pairs`` pairs of fresh processes: A with
the working tree's package, B with REV's, first on ``PYTHONPATH`` so that it shadows the
installed one (each process reports the ``pymc_kameleon.__file__`` it imported, which is
checked); the ``benchmarks`` code is the working tree's in both. On ``banana_model(d)`` (one
``d``, default 2: the cheapest density), each of our steps is made and warmed up in both
processes with the same seed, then timed in ``--rounds`` rounds while tuning and as many after
``stop_tuning``; a round is a block of A and the same block of B in turn, who goes first
alternating (``--block-ms`` long on A's warm-up), so that the two see the same load. Blocks are
read on the calling thread's CPU clock (``--clock cpu``; ``wall``: elapsed time), which leaves
out the time a process waits for a core; ``--pin`` puts every process on one processor. The
table (each tree's median block in microseconds per MH iteration, the median of the rounds'
ratios A / B and a bootstrap interval over the pairs of processes) replaces the section "Paired
comparison" of ``--out``, which a full run keeps.

The time is split into the log density (the compiled PyTensor function, measured per call and
multiplied by the evaluations made, from the ``n_evals`` stat for our steps), the step's own
numerics and bookkeeping (its ``astep`` minus the log density) and PyMC's loop
(``ArrayStepShared.step``: point dict <-> raveled array).  The time ``pm.sample`` adds around
``step.step`` (trace recording, progress) is not included.
"""

from __future__ import annotations

import argparse
import datetime
import io
import json
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pymc as pm
from scipy.stats import bootstrap
from threadpoolctl import threadpool_limits

from pymc_kameleon import FastKameleonStep, KameleonStep, KernelHMCStep, RandomWalkStep
from pymc_kameleon.compat import group_dataset, start_chain
from pymc_kameleon.math.compiled import HAVE_NUMBA
from pymc_kameleon.models import banana_model

from .quiet import quiet_pymc

__all__ = ["export_package", "main", "paired", "time_step"]

B = 0.1
_WARMUP = 20
#: (label, step class, ours) of the compared steps; ``pm.sample`` makes them at their defaults
STEPS = [
    ("KameleonStep", KameleonStep, True),
    ("FastKameleonStep", FastKameleonStep, True),
    ("KernelHMCStep", KernelHMCStep, True),
    ("RandomWalkStep", RandomWalkStep, True),
    ("pm.Metropolis", pm.Metropolis, False),
    ("pm.DEMetropolisZ", pm.DEMetropolisZ, False),
    ("pm.Slice", pm.Slice, False),
]
#: steps whose kernel phase the timed blocks reach early (``warmup_draws=_WARMUP``)
_KERNEL_PHASE = (KameleonStep, FastKameleonStep, KernelHMCStep)


def _timed_factory(cls):
    """The factory of the timed blocks: a short warm-up where there is a kernel phase, and
    (where the step takes it) a long planned tuning, as ``start_chain(tune=10**6)`` tells
    PyMC 6's steps, so that the steps of both majors and of older revisions (which take no
    ``tune_draws``) stay in the phase a block is named after."""
    kwargs = {"warmup_draws": _WARMUP} if cls in _KERNEL_PHASE else {}

    def make():
        try:
            return cls(**kwargs, tune_draws=10**6)
        except TypeError:  # a revision before tune_draws
            return cls(**kwargs)

    return make


#: the clocks of the timed blocks: elapsed time, or the CPU time of the calling thread (which
#: leaves out the time the process waits for a core another process holds)
CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.thread_time}


class _Timer:
    """Time spent in a step's ``astep`` (wrapped on the instance), read on ``clock``."""

    def __init__(self, step, clock: Callable[[], float] = time.perf_counter):
        self.total = 0.0
        inner = step.astep

        def astep(q0):
            start = clock()
            try:
                return inner(q0)
            finally:
                self.total += clock() - start

        step.astep = astep


def _logp_cost(step, point, n: int = 2000,
               clock: Callable[[], float] = time.perf_counter) -> float:
    """Seconds per call of the block's compiled log density (ours only)."""
    x = np.concatenate([np.ravel(point[v.name]) for v in step.vars]).astype(float)
    fn = step.compiled_logp
    fn(x)
    start = clock()
    for _ in range(n):
        fn(x)
    return (clock() - start) / n


class BlockTimer:
    """A step on ``banana_model(dim)``, driven by ``step.step(point)`` in timed blocks.

    Every time is read on ``clock`` (one of :data:`CLOCKS`); a block of ``n`` draws (default:
    ``iters`` MH iterations, at least 5 draws) returns microseconds per MH iteration as
    ``{"total", "logp", "numerics", "pymc"}``, split as described in the module doc.
    """

    def __init__(self, make, dim: int, iters: int, ours: bool, seed: int = 0,
                 clock: Callable[[], float] = time.perf_counter):
        self.model = banana_model(dim, b=B)
        with self.model:
            self.step = make()
        self.ours, self.clock = ours, clock
        self.n_steps = getattr(self.step, "n_steps", 1) if ours else 1
        self.draws = max(iters // self.n_steps, 5)
        start_chain(self.step, np.random.default_rng(seed), tune=10**6, draws=0)
        self.timer = _Timer(self.step, clock)
        self.point = self.model.initial_point()
        self.logp = _logp_cost(self.step, self.point, clock=clock) if ours else float("nan")

    def block(self, n: int | None = None) -> dict:
        """Run ``n`` draws (default ``self.draws``) and time them."""
        n = self.draws if n is None else n
        self.timer.total, evals, iterations = 0.0, 0, 0
        start = self.clock()
        for _ in range(n):
            self.point, stats = self.step.step(self.point)
            evals += int(stats[0].get("n_evals", 0)) if self.ours else 0
            # a draw's MH iterations from its stat: ``n_steps`` may change at stop_tuning
            iterations += int(stats[0].get("n_steps", self.n_steps)) if self.ours else 1
        wall = self.clock() - start
        per = 1e6 / iterations
        logp_s = evals * self.logp if self.ours else 0.0
        return {"total": wall * per, "logp": logp_s * per if self.ours else float("nan"),
                "numerics": (self.timer.total - logp_s) * per,
                "pymc": (wall - self.timer.total) * per}

    def warm_up(self) -> dict:
        """Compilation, caches and (ours) the end of the warm-up, a first refresh: the time
        of this block is not a measurement."""
        return self.block(_WARMUP + max(self.draws, 60) if self.ours else self.draws)

    def stop_tuning(self) -> None:
        """``stop_tuning``, then an untimed block: the frozen path may compile on its first
        call."""
        self.step.stop_tuning()
        self.block(max(self.draws // 10, 5))


def time_step(make, dim: int, iters: int, ours: bool, seed: int = 0,
              clock: Callable[[], float] = time.perf_counter) -> dict:
    """Microseconds per MH iteration in each phase, split as described in the module doc.

    Every time is read on ``clock`` (one of :data:`CLOCKS`).  Returns
    ``{phase: {"total", "logp", "numerics", "pymc"}}`` and ``"n_steps"``, ``"rank"``.
    """
    timer = BlockTimer(make, dim, iters, ours, seed, clock)
    timer.warm_up()
    out = {"tune early": timer.block()}
    if ours:
        timer.block(2 * timer.draws)
        out["tune late"] = timer.block()
    timer.stop_tuning()
    out["draws"] = timer.block()
    out["n_steps"] = timer.n_steps
    adapt = getattr(timer.step, "_adapt", None)
    out["rank"] = getattr(adapt, "rank", None)
    return out


def time_sample(make, dim: int, tune: int, draws: int, ours: bool, seed: int = 0,
                repeats: int = 3, model: pm.Model | None = None) -> dict:
    """End to end: ``pm.sample`` (one chain, tuning included) on ``banana_model(dim)``
    (or on ``model``, when given), the median of ``repeats`` runs (seeds
    ``seed, seed + 1, ...``).

    The step is built before the clock starts (it compiles the log density); the time is
    PyMC's own ``sampling_time`` attribute.  MH iterations are the log-density evaluations
    (the ``n_evals`` stat, tuning included) for our steps and one per draw for PyMC's.
    """
    if model is None:
        model = banana_model(dim, b=B)
    runs = []
    for rep in range(repeats):
        with model:
            step = make()
            idata = pm.sample(draws=draws, tune=tune, chains=1, cores=1, step=step,
                              random_seed=seed + rep, progressbar=False,
                              compute_convergence_checks=False, discard_tuned_samples=False)
        seconds = float(group_dataset(idata, "posterior").attrs["sampling_time"])
        if ours:  # one evaluation per MH iteration (a rejected non-finite proposal has none)
            iterations = sum(int(group_dataset(idata, g)["n_evals"].sum())
                             for g in ("warmup_sample_stats", "sample_stats"))
        else:
            iterations = tune + draws
        runs.append({"seconds": seconds, "iterations": iterations,
                     "us": 1e6 * seconds / iterations})
    return sorted(runs, key=lambda r: r["us"])[len(runs) // 2]


#: the repository root: its ``benchmarks`` package drives both sides of a paired comparison
ROOT = Path(__file__).resolve().parents[1]
#: the phases a paired comparison reports: tuning after the warm-up, and after stop_tuning
PAIRED_PHASES = ("tuning", "draws")
#: heading of the paired comparison's section of ``--out`` (a full run keeps that section)
PAIRED_HEADING = "## Paired comparison"


def export_package(rev: str, dest: Path, repo: Path = ROOT) -> Path:
    """Write ``pymc_kameleon`` as of git revision ``rev`` of ``repo`` into ``dest``.

    Returns ``dest``: put it first on ``PYTHONPATH`` and it shadows the installed package.
    """
    archive = subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", rev,
                              "pymc_kameleon"], check=True, capture_output=True).stdout
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def _worker(dim: int, iters: int, clock: str, pin: int | None) -> None:
    """One side of a paired comparison: a :class:`BlockTimer` driven by commands on stdin.

    Replies with one JSON line each on stdout: first the package's ``__file__`` (the parent
    checks which tree it imported), then for ``start LABEL SEED`` (make the step, warm it
    up) the warm-up's microseconds per draw, for ``stop_tuning`` null, for ``block N``
    the microseconds per iteration of a block of ``N`` draws.
    """
    import pymc_kameleon

    if pin is not None:
        os.sched_setaffinity(0, {pin})
    # the replies own stdout: whatever else is printed (C level included) goes to stderr
    reply = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)

    def send(obj) -> None:
        reply.write(json.dumps(obj) + "\n")
        reply.flush()

    quiet_pymc()
    classes = {label: cls for label, cls, ours in STEPS if ours}
    timer = None
    send({"module": pymc_kameleon.__file__})
    with threadpool_limits(limits=1):
        for line in sys.stdin:
            command, *arg = line.split()
            if command == "start":
                timer = BlockTimer(_timed_factory(classes[arg[0]]), dim, iters, True,
                                   seed=int(arg[1]), clock=CLOCKS[clock])
                send(timer.warm_up()["total"] * timer.n_steps)
            elif command == "stop_tuning":
                timer.stop_tuning()
                send(None)
            else:
                send(timer.block(int(arg[0]))["total"])


class _Side:
    """A fresh :func:`_worker` process with ``tree``'s package first on the path."""

    def __init__(self, tree: Path, cwd: Path, worker_args: list[str]):
        self.tree = tree
        path = [str(tree), str(ROOT)] + [v for v in [os.environ.get("PYTHONPATH")] if v]
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
        self.log = tempfile.TemporaryFile("w+", dir=cwd)
        # the working directory is neither tree: ``python -m`` puts it before PYTHONPATH
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.cost_per_step", "--worker", *worker_args],
            cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
            text=True)
        ran = Path(self.ask(None)["module"]).resolve().parent
        if ran != (tree / "pymc_kameleon").resolve():
            self.close()
            raise RuntimeError(f"the worker for {tree} imported {ran}")

    def ask(self, command: str | None):
        if command is not None:
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            self.log.seek(0)
            raise RuntimeError(f"the worker for {self.tree} ended:\n{self.log.read()[-3000:]}")
        return json.loads(line)

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
        self.log.close()


def _round(sides: list[_Side], command: str, r: int) -> list[float]:
    """One round: ``command`` to both sides in turn, and their replies, A's first.

    Who goes first alternates from round to round: a block that follows the other process's
    block (cache and scheduler state) may cost more than the one after it.
    """
    order = sides if r % 2 == 0 else sides[::-1]
    replies = [side.ask(command) for side in order]
    return replies if r % 2 == 0 else replies[::-1]


def paired(against: str, pairs: int = 6, rounds: int = 60, dim: int = 2, block_ms: float = 10.0,
           clock: str = "cpu", pin: int | None = None, rev: str | None = None) -> dict:
    """Time our steps on two trees, A and B, in pairs of fresh processes.

    A is the working tree's package (or, given ``rev``, that revision's), B the revision
    ``against``'s; both are copied or exported to a temporary directory.  Each pair starts
    one process of each (seed: the pair's index, so both run the same chain); for every step
    and phase they run ``rounds`` rounds: a timed block of A and the same block of B in
    turn (A B, B A, A B, ...), so that the two blocks of a round see the same load.  A block
    lasts about ``block_ms`` on A's warm-up.

    Returns ``{label: {phase: {"a": ..., "b": ...}}}``: arrays (pairs, rounds) of
    microseconds per MH iteration.
    """
    worker_args = ["--dims", str(dim), "--clock", clock]
    worker_args += [] if pin is None else ["--pin", str(pin)]
    labels = [label for label, _, ours in STEPS if ours]
    out = {label: {ph: {"a": [], "b": []} for ph in PAIRED_PHASES} for label in labels}
    with tempfile.TemporaryDirectory(prefix="cost-paired-") as tmp:
        tree_b = export_package(against, Path(tmp) / "b")
        tree_a = Path(tmp) / "a"
        if rev is None:  # a copy, as B is: no side has the other's caches (Numba's, .pyc)
            shutil.copytree(ROOT / "pymc_kameleon", tree_a / "pymc_kameleon",
                            ignore=shutil.ignore_patterns("__pycache__"))
        else:
            export_package(rev, tree_a)
        for i in range(pairs):
            sides = [_Side(tree, Path(tmp), worker_args) for tree in (tree_a, tree_b)]
            try:
                for label in labels:
                    us_per_draw = [side.ask(f"start {label} {i}") for side in sides][0]
                    for phase in PAIRED_PHASES:
                        if phase == "draws":
                            for side in sides:
                                side.ask("stop_tuning")
                        n = max(round(block_ms * 1e3 / us_per_draw), 5)
                        a, b = np.array([_round(sides, f"block {n}", r)
                                         for r in range(rounds)]).T
                        out[label][phase]["a"].append(a)
                        out[label][phase]["b"].append(b)
            finally:
                for side in sides:
                    side.close()
            print(f"pair {i + 1}/{pairs}:", ", ".join(
                f"{label} " + " ".join(
                    f"{np.median(out[label][ph]['a'][-1] / out[label][ph]['b'][-1]):.3f}"
                    for ph in PAIRED_PHASES) for label in labels), flush=True)
    return {label: {ph: {k: np.array(v) for k, v in phases.items()}
                    for ph, phases in by_phase.items()} for label, by_phase in out.items()}


def paired_ratio(a: np.ndarray, b: np.ndarray, confidence: float = 0.95,
                 seed: int = 0) -> tuple[float, float, float]:
    """The median of the blocks' paired ratios ``a / b`` (arrays (pairs, rounds)) and its
    bootstrap interval, resampling whole pairs of processes (a process's own speed is
    shared by its blocks)."""
    ratio = a / b

    def pooled_median(index: np.ndarray) -> float:
        return float(np.median(ratio[index.astype(int)]))

    if len(ratio) < 2:
        return pooled_median(np.arange(len(ratio))), float("nan"), float("nan")
    ci = bootstrap((np.arange(len(ratio)),), pooled_median, vectorized=False,
                   confidence_level=confidence, method="percentile", n_resamples=2000,
                   rng=np.random.default_rng(seed)).confidence_interval
    return pooled_median(np.arange(len(ratio))), ci.low, ci.high


def paired_rows(result: dict, confidence: float = 0.95) -> list[str]:
    """Markdown table of :func:`paired`: each tree's median over its blocks, the median of
    the paired ratios A / B and its interval (:func:`paired_ratio`)."""
    rows = ["| step | phase | A us/iter | B us/iter | A / B, median of paired blocks "
            f"| {confidence:.0%} interval | pairs x rounds |", "|---|---|---|---|---|---|---|"]
    for label, phases in result.items():
        for phase, res in phases.items():
            med, low, high = paired_ratio(res["a"], res["b"], confidence)
            rows.append(f"| {label} | {phase} | {np.median(res['a']):.1f} | "
                        f"{np.median(res['b']):.1f} | {med:.3f} | {low:.3f} - {high:.3f} | "
                        "{} x {} |".format(*res["a"].shape))
    return rows


def _split_sections(text: str, heading: str) -> tuple[str, str]:
    """``text`` without, and the text of, the ``## `` sections whose heading starts with
    ``heading`` (each up to the next ``## `` heading)."""
    parts: tuple[list[str], list[str]] = ([], [])
    inside = False
    for line in text.splitlines(keepends=True):
        if line.startswith("## "):
            inside = line.startswith(heading)
        parts[inside].append(line)
    return "".join(parts[0]), "".join(parts[1])


def _versions() -> str:
    packages = ("pymc", "pytensor", "numpy") + (("numba",) if HAVE_NUMBA else ())
    return ", ".join(f"{p} {version(p)}" for p in packages)


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _main_paired(args, dim: int, argv_text: str) -> None:
    """``--against``: the paired comparison, its section written into ``args.out``."""
    started = datetime.datetime.now().astimezone()
    load0, t0 = _load(), time.perf_counter()
    result = paired(args.against, args.pairs, args.rounds, dim, args.block_ms, args.clock,
                    args.pin, args.rev)
    a_name = "the working tree" if args.rev is None else f"`{args.rev}`"
    lines = [
        f"{PAIRED_HEADING}: {a_name} (A) against `{args.against}` (B)", "",
        f"- run: {started:%Y-%m-%d %H:%M %Z}, {(time.perf_counter() - t0) / 60:.1f} min; load "
        f"average at start {load0}, at end {_load()}",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores; Python "
        f"{platform.python_version()}, {_versions()}",
        f"- command: `python -m benchmarks.cost_per_step {argv_text}`", "",
        f"`banana_model({dim}, b=0.1)`, our steps (`warmup_draws={_WARMUP}`), microseconds "
        f"per MH iteration on the {args.clock} clock, while tuning (after the warm-up) and "
        f"after `stop_tuning`. Each pair of fresh processes (A, B) runs {args.rounds} rounds "
        f"per step and phase, a round a block of A and the same block of B in turn, who "
        f"goes first alternating (about {args.block_ms:g} ms). A tree's figure is its "
        "median block; A / B is the median of the rounds' ratios, its interval a bootstrap "
        "over the pairs of processes. "
        "A / B above 1: A is slower.", "",
        *paired_rows(result), "",
    ]
    text = "\n".join(lines)
    rest = ""
    if args.out.exists():
        rest, _ = _split_sections(args.out.read_text(), PAIRED_HEADING)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(rest.rstrip("\n") + "\n\n" + text if rest.strip() else text)
    print(text)


def _cell(res: dict) -> str:
    total, logp, num, loop = (res[k] for k in ("total", "logp", "numerics", "pymc"))
    logp_s = "-" if np.isnan(logp) else f"{logp:.1f}"
    return f"{total:.0f} ({logp_s} / {num:.1f} / {loop:.1f})"


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", default=None,
                        help="comma-separated (default 2,8,10,32,100; paired mode: one, 2)")
    parser.add_argument("--iters", type=int, default=None,
                        help="MH iterations per timed block, at least 5 draws (default 2000)")
    parser.add_argument("--out", type=Path, default=Path("docs/benchmarks/cost_per_step.md"))
    parser.add_argument("--sample-dim", default="10",
                        help="dimensions of the end-to-end pm.sample comparison, "
                             "comma-separated (0 or empty: skip it)")
    parser.add_argument("--sample-budget", default="1000,1000", help="tune,draws of it")
    parser.add_argument("--sample-repeats", type=int, default=3,
                        help="runs per step of it (the median is reported)")
    parser.add_argument("--sample-steps", default=None,
                        help="labels of the steps of it, comma-separated (default: all)")
    parser.add_argument("--against", metavar="REV", default=None,
                        help="paired mode: compare our steps with those of git revision REV")
    parser.add_argument("--rev", default=None,
                        help="paired mode: compare REV's steps, not the working tree's")
    parser.add_argument("--pairs", type=int, default=6,
                        help="paired mode: pairs of fresh processes (A, B)")
    parser.add_argument("--rounds", type=int, default=60,
                        help="paired mode: timed blocks per tree, step and phase in a pair")
    parser.add_argument("--block-ms", type=float, default=10.0,
                        help="paired mode: the length of a timed block (on A's warm-up)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="cpu",
                        help="paired mode: the clock of the timed blocks")
    parser.add_argument("--pin", type=int, default=None,
                        help="paired mode: run every process on this processor")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker or args.against:
        dim = int(args.dims.split(",")[0]) if args.dims else 2
        if args.worker:  # its warm-up: 1000 MH iterations unless told
            return _worker(dim, args.iters or 1000, args.clock, args.pin)
        argv_text = " ".join(sys.argv[1:] if argv is None else argv)
        return _main_paired(args, dim, argv_text)
    args.dims = "2,8,10,32,100" if args.dims is None else args.dims
    args.iters = args.iters or 2000
    dims = [int(d) for d in args.dims.split(",") if d.strip()]
    sample_dims = [int(d) for d in args.sample_dim.split(",") if d.strip() and int(d) > 0]
    labels = [label for label, _, _ in STEPS]
    sample_steps = labels if args.sample_steps is None else [
        v.strip() for v in args.sample_steps.split(",") if v.strip()]
    unknown = sorted(set(sample_steps) - set(labels))
    if unknown:
        parser.error(f"unknown --sample-steps {unknown}; choose from {labels}")
    quiet_pymc()
    started = datetime.datetime.now().astimezone()
    load0 = _load()
    t0 = time.perf_counter()
    results: dict[int, list] = {}
    with threadpool_limits(limits=1):
        for d in dims:
            results[d] = []
            for label, cls, ours in STEPS:
                res = time_step(_timed_factory(cls), d, args.iters, ours)
                results[d].append((label, res))
                print(d, f"{label:18s}", {k: _cell(v) for k, v in res.items()
                                          if isinstance(v, dict)}, flush=True)
        sampled: dict[int, list] = {}
        tune, draws = (int(v) for v in args.sample_budget.split(","))
        for d in sample_dims:
            sampled[d] = []
            for label, cls, ours in STEPS:
                if label not in sample_steps:
                    continue
                # PyMC's steps make one MH iteration per draw: d times the draws give them
                # as many iterations as our steps make (n_steps = d), and a clock reading
                # long enough to be stable (0.05 s at tune 1000 + draws 1000 was not)
                k = 1 if ours else d
                res = time_sample(cls, d, k * tune, k * draws, ours,
                                  repeats=args.sample_repeats)
                sampled[d].append((label, res))
                print("pm.sample", d, f"{label:18s}", res, flush=True)
    versions = _versions()
    lines = [
        "# Cost per Metropolis-Hastings iteration",
        "",
        f"- run: {started:%Y-%m-%d %H:%M %Z}, {(time.perf_counter() - t0) / 60:.1f} min; load "
        f"average at start {load0}, at end {_load()}",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores (BLAS limited to 1 thread); "
        f"Python {platform.python_version()}, {versions}; compiled numerics: "
        f"{'Numba' if HAVE_NUMBA else 'NumPy fallback'}",
        f"- command: `python -m benchmarks.cost_per_step --dims {args.dims or repr('')} "
        f"--iters {args.iters}` (end to end: `--sample-dim {args.sample_dim} "
        f"--sample-budget {args.sample_budget} --sample-repeats {args.sample_repeats}"
        + ("" if args.sample_steps is None else f" --sample-steps {args.sample_steps}")
        + "`)",
        "",
        "Model `banana_model(d, b=0.1)` (PyTensor). Microseconds per MH iteration "
        "(our steps: per draw / `n_steps`; PyMC's: per `step.step` call), as "
        "`total (log density / step numerics and bookkeeping / PyMC's loop)`. "
        "The log density is timed per call times the evaluations made (ours only; for "
        "PyMC's steps it is inside the middle number). Timings on a shared machine are "
        "noisy (about +-20 %).",
    ]
    for d in dims:
        lines += ["", f"## d = {d}", "",
                  "| step | n_steps | tuning (early) | tuning (late) | draws | F-KAMH rank |",
                  "|---|---|---|---|---|---|"]
        for label, res in results[d]:
            late = _cell(res["tune late"]) if "tune late" in res else ""
            rank = "" if not res["rank"] else str(res["rank"])
            lines.append(f"| {label} | {res['n_steps']} | {_cell(res['tune early'])} | {late} "
                         f"| {_cell(res['draws'])} | {rank} |")
    for d, rows in sampled.items():
        base = dict(rows).get("pm.DEMetropolisZ", {}).get("us")
        lines += ["", f"## pm.sample end to end, d = {d}", "",
                  f"`pm.sample(tune={tune}, draws={draws}, chains=1, cores=1)` on "
                  f"`banana_model({d}, b=0.1)`, our steps at their defaults "
                  f"(warm-up included), PyMC's with {d} times the tune and "
                  "draws (as many MH iterations), median of "
                  f"{args.sample_repeats} runs, "
                  "PyMC's `sampling_time` per chain and per MH iteration (our steps: "
                  "`n_steps` iterations per draw; PyMC's: one `step.step` call per draw). "
                  "This includes the log density and what `pm.sample` adds per draw (trace, "
                  "stats), which our steps share among their `n_steps` iterations.", "",
                  "| step | sampling s | MH iterations | us per iteration | / DEMetropolisZ |",
                  "|---|---|---|---|---|"]
        for label, res in rows:
            ratio = f"{res['us'] / base:.2f}" if base else "-"
            lines.append(f"| {label} | {res['seconds']:.2f} | {res['iterations']} | "
                         f"{res['us']:.1f} | {ratio} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out.exists():  # keep the paired comparison's section
        _, kept = _split_sections(args.out.read_text(), PAIRED_HEADING)
        text += "\n" + kept if kept else ""
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)


if __name__ == "__main__":
    main()
