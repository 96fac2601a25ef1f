"""Cost of the compiled log density on each PyTensor backend: first compile and per call.

Usage::

    python -m benchmarks.logp_backend [--modes NUMBA,CVM] [--models hier10,gauss50,...]
                                      [--calls 2000] [--out docs/benchmarks/logp_backend.md]

The step methods of this package compile the model log density once per step (for the
raveled value variables of their block, exactly as below) and call it once per iteration, so
what matters is (1) the time from building the function to its first result, paid once per
``pm.sample`` call and per process, and (2) the cost of one call, paid every iteration.

Every (model, mode) pair runs in a fresh Python process, twice:

* *cold*: with an empty PyTensor compile directory (``base_compiledir``), as on a new machine
  or after a PyTensor upgrade: the C backend compiles its C modules, Numba compiles and
  caches what it can;
* *warm*: the same process run again on the directory the cold run filled, as in every later
  session (both backends reuse their caches; a graph holding a Python Op such as the
  likelihood estimator cannot be cached by Numba and is compiled again).

Measured in each run: ``compile`` (``pymc.pytensorf.compile``, i.e. rewrites and linking),
``first call`` (Numba compiles lazily, at the first call), and ``per call``: the fastest of 7
blocks of ``--calls`` calls at fixed points (µs per call, ``trust_input=True`` as in the
steps; the minimum is the least disturbed by other processes on a shared machine).

Modes: ``NUMBA`` (PyTensor 3's default), ``CVM`` (the C virtual machine, PyTensor 2's
default; a Python Op runs its ``perform`` inside it), and ``VM`` (the Python virtual machine,
no compiler; reference).  The models: ``hier10`` (eight schools, non-centred: 10 parameters),
``gauss50`` (50-d correlated Gaussian), ``banana8`` (8-d banana B(0.1, 100)), ``noisy1`` (a
normal prior and a trivial likelihood estimator: the cost of calling a Python estimator Op)
and ``gpc`` (the pseudo-marginal GP classification model on 150 synthetic points in 5
dimensions, 100 importance samples: a realistic estimator).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

__all__ = ["MODELS", "main", "measure"]

#: model key -> description shown in the table.
MODELS = {
    "hier10": "eight schools, non-centred (d = 10)",
    "gauss50": "correlated Gaussian (d = 50)",
    "banana8": "banana B(0.1, 100) (d = 8)",
    "noisy1": "cheap estimator Op (d = 1)",
    "gpc": "GP classification, estimator Op (d = 5)",
}
DEFAULT_MODES = ("NUMBA", "CVM", "VM")
BLOCKS = 7


def _noisy_loglik(mu, rng):
    """log of an unbiased estimate of N(1 | mu, 1), up to a constant (log-normal noise)."""
    return -0.5 * (1.0 - mu) ** 2 + 0.5 * rng.standard_normal() - 0.125


def _build(key: str):
    """The PyMC model of ``key`` (built inside the worker process)."""
    import pymc as pm

    from pymc_kameleon import pseudo_marginal_potential
    from pymc_kameleon.models import banana_model, gp_classification_model
    from pymc_kameleon.models.synthetic import gaussian_model

    if key == "hier10":
        y = np.array([28.0, 8.0, -3.0, 7.0, -1.0, 1.0, 18.0, 12.0])
        sigma = np.array([15.0, 10.0, 16.0, 11.0, 9.0, 11.0, 10.0, 18.0])
        with pm.Model() as model:
            mu = pm.Normal("mu", 0.0, 5.0)
            tau = pm.HalfCauchy("tau", 5.0)
            z = pm.Normal("z", 0.0, 1.0, shape=8)
            pm.Normal("y", mu + tau * z, sigma, observed=y)
        return model
    if key == "gauss50":
        rng = np.random.default_rng(50)
        a = rng.normal(size=(50, 50))
        return gaussian_model(a @ a.T / 50 + np.eye(50))
    if key == "banana8":
        return banana_model(8, b=0.1)
    if key == "noisy1":
        with pm.Model() as model:
            mu = pm.Normal("mu", 0.0, 1.0)
            pseudo_marginal_potential("lik", _noisy_loglik, mu, seed=1)
        return model
    if key == "gpc":
        rng = np.random.default_rng(5)
        X = rng.normal(size=(150, 5))
        y = np.where(X[:, 0] + 0.5 * X[:, 1] + 0.3 * rng.normal(size=150) > 0, 1, -1)
        return gp_classification_model(X, y, n_importance=100, seed=1)
    raise ValueError(f"unknown model {key!r}; choose from {sorted(MODELS)}")


def measure(key: str, mode: str, calls: int) -> dict:
    """Compile the log density of model ``key`` with ``mode`` as the steps do; time it.

    Returns ``{"compile": s, "first_call": s, "per_call_us": µs, "dim": d}``.
    """
    import warnings

    from pymc.pytensorf import compile as compile_pytensor
    from pymc.pytensorf import join_nonshared_inputs, make_shared_replacements

    warnings.filterwarnings("ignore")
    model = _build(key)
    point = model.initial_point()
    vars = model.continuous_value_vars
    shared = make_shared_replacements(point, vars, model)
    [logp], raveled = join_nonshared_inputs(
        point=point, outputs=[model.logp()], inputs=vars, shared_inputs=shared
    )
    if mode == "VM":  # not a predefined mode name
        from pytensor.compile.mode import Mode

        mode = Mode(linker="vm", optimizer="fast_run")
    start = time.perf_counter()
    fn = compile_pytensor([raveled], logp, mode=mode)
    compiled = time.perf_counter() - start
    fn.trust_input = True
    dim = int(sum(np.size(point[v.name]) for v in vars))
    rng = np.random.default_rng(0)
    xs = [0.3 * rng.normal(size=dim) for _ in range(16)]
    start = time.perf_counter()
    fn(xs[0])
    first = time.perf_counter() - start
    n = max(1, calls if key != "gpc" else calls // 100)
    blocks = []
    for _ in range(BLOCKS):
        start = time.perf_counter()
        for i in range(n):
            fn(xs[i % 16])
        blocks.append((time.perf_counter() - start) / n)
    return {"compile": compiled, "first_call": first, "per_call_us": 1e6 * min(blocks), "dim": dim}


def _run_worker(key: str, mode: str, calls: int, compiledir: str) -> dict:
    env = {**os.environ, "PYTENSOR_FLAGS": f"base_compiledir={compiledir}",
           "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.logp_backend", "--worker", key, mode, str(calls)],
        capture_output=True, text=True, env=env, check=False,
    )
    if out.returncode != 0:
        return {"error": (out.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def _versions() -> str:
    import arviz
    import pymc
    import pytensor

    parts = [f"Python {platform.python_version()}", f"PyMC {pymc.__version__}",
             f"PyTensor {pytensor.__version__}", f"NumPy {np.__version__}",
             f"ArviZ {arviz.__version__}"]
    try:
        import numba

        parts.append(f"Numba {numba.__version__}")
    except ImportError:
        parts.append("no Numba")
    return ", ".join(parts)


def _fmt_s(x: float) -> str:
    return f"{x:.2f}" if x < 10 else f"{x:.1f}"


def _break_even(rows) -> list[str]:
    """Per model: how many calls Numba needs to make up for its longer warm start vs CVM."""
    warm = {(key, mode): w for key, mode, cold, w in rows if "error" not in w}
    out = []
    for key in dict.fromkeys(key for key, *_ in rows):
        numba, cvm = warm.get((key, "NUMBA")), warm.get((key, "CVM"))
        if numba is None or cvm is None:
            continue
        start = (numba["compile"] + numba["first_call"]) - (cvm["compile"] + cvm["first_call"])
        saved = cvm["per_call_us"] - numba["per_call_us"]
        if start <= 0 and saved >= 0:
            verdict = "Numba is ahead from the first call"
        elif start >= 0 and saved <= 0:
            verdict = "CVM is ahead at any number of calls"
        elif start > 0:
            verdict = f"Numba is ahead after {start / saved * 1e6:,.0f} calls"
        else:
            verdict = f"CVM is ahead after {start / saved * 1e6:,.0f} calls"
        out.append(f"- {MODELS[key]}: warm start NUMBA - CVM {start:+.2f} s, per call "
                   f"{-saved:+.3g} µs: {verdict}.")
    return out


def main(argv: list[str] | None = None) -> None:
    """Command-line entry point (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--modes", default=",".join(DEFAULT_MODES))
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--calls", type=int, default=2000,
                        help="calls per timing block (the gpc model uses 1/100 of it)")
    parser.add_argument("--out", type=Path, help="write the Markdown table here (else print)")
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        key, mode, calls = args.worker
        print(json.dumps(measure(key, mode, int(calls))))
        return
    modes = args.modes.split(",")
    keys = args.models.split(",")
    started = datetime.datetime.now(datetime.timezone.utc)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    t0 = time.perf_counter()
    rows = []
    for key in keys:
        for mode in modes:
            with tempfile.TemporaryDirectory(prefix="logp_backend_") as compiledir:
                cold = _run_worker(key, mode, args.calls, compiledir)
                warm = _run_worker(key, mode, args.calls, compiledir)
            rows.append((key, mode, cold, warm))
            print(key, mode, cold, warm, file=sys.stderr, flush=True)
    minutes = (time.perf_counter() - t0) / 60
    cmd = "python -m benchmarks.logp_backend" + "".join(
        f" {a}" for a in (argv if argv is not None else sys.argv[1:])
    )
    lines = [
        f"- run: {started:%Y-%m-%d %H:%M} UTC, {minutes:.1f} min, load average at "
        f"start {load}",
        f"- command: `{cmd.strip()}`",
        f"- versions: {_versions()}",
        "",
        "| model | mode | cold: compile + first call [s] | warm: compile + first call [s] "
        "| per call [µs] |",
        "| --- | --- | --- | --- | --- |",
    ]
    for key, mode, cold, warm in rows:
        if "error" in cold or "error" in warm:
            msg = cold.get("error") or warm.get("error")
            lines.append(f"| {MODELS[key]} | {mode} | fails: {msg} | | |")
            continue
        lines.append(
            f"| {MODELS[key]} | {mode} "
            f"| {_fmt_s(cold['compile'])} + {_fmt_s(cold['first_call'])} "
            f"| {_fmt_s(warm['compile'])} + {_fmt_s(warm['first_call'])} "
            f"| {warm['per_call_us']:.3g} |"
        )
    lines += ["", *_break_even(rows)]
    text = "\n".join(lines) + "\n"
    if args.out:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
