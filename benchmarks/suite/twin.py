"""NUTS with ``pm.sample``'s defaults on a black-box model's differentiable twin.

A suite model without a gradient (pk's ``odeint`` black box) can have a
``reference_factory`` that writes the same posterior with a gradient (pk: RK4 with
forward sensitivities) and the same free variables.  Its reference is long NUTS there,
tuned for the tail (``reference_target_accept``); this runs NUTS as a user would, with
``pm.sample``'s defaults, and judges it by the model's reference like any other sampler::

    python -m benchmarks.suite.twin --model pk --seed 1 --json pk_nuts_1.json

The table and JSON have the suite's format (``python -m benchmarks.suite`` and
``benchmarks.suite.compare`` read the JSON); the sampler is named ``nuts``.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from .cli import model_meta, run_meta, write_json
from .models import MODELS
from .reference import REFERENCE_DIR, load_reference
from .report import model_header, model_table
from .runner import run_one


def twin_spec(name: str):
    """``MODELS[name]`` with its differentiable reference model as the model to sample."""
    spec = MODELS[name]
    if spec.has_gradient or spec.reference_factory is None:
        raise ValueError(f"{name} has a gradient or no differentiable twin: "
                         "run `python -m benchmarks.suite --steps nuts` instead")
    return dataclasses.replace(spec, factory=spec.reference_factory, has_gradient=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="pk")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=None)
    parser.add_argument("--references", type=Path, default=REFERENCE_DIR)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    args.command = " ".join(["python -m benchmarks.suite.twin",
                             *(sys.argv[1:] if argv is None else argv)])

    spec = twin_spec(args.model)
    ref = load_reference(args.model, args.references)
    meta = run_meta(args)
    run = run_one(spec, "nuts", ref, args.tune, args.draws, args.chains, args.seed,
                  args.timeout)
    print(f"  [{args.model} / nuts on the twin: {run.error or f'{run.wall:.1f} s'}]",
          file=sys.stderr)
    print(model_header(spec, ref.meta) + "\n\n" + model_table(spec, [run]))
    if args.json is not None:
        meta["finished"] = True
        # the black box's own metadata (no gradient): the twin is how NUTS ran on it
        write_json(args.json, meta, {args.model: model_meta(MODELS[args.model], ref)}, [run])


if __name__ == "__main__":
    main()
