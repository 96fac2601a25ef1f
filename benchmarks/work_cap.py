"""The bound on the work per draw, and a longer tuning, on one suite model.

``python -m benchmarks.work_cap --model gp-pois-regr --steps rw,kamh,fkamh,khmc
--seeds 1,2,3 --caps 4,8,16 [--tune 1000] --json out.json``

Each run is the suite's (:func:`benchmarks.suite.runner.run_one`: ``pm.sample``'s defaults
otherwise, chains one after the other, every log-density evaluation counted) with
:class:`~pymc_kameleon.adaptation.work.WorkPerDraw`'s bound on the factor set to ``cap``
(the default is :data:`~pymc_kameleon.adaptation.work.MAX_FACTOR`) and ``tune`` tuning
draws.  Per run: the four criteria (R-hat, bulk ESS, means, sds), min bulk ESS, the
evaluations, ESS per 1000 evaluations and the factor each chain chose (its ``tau`` too).
Results: docs/benchmarks/work_cap.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from functools import partial
from pathlib import Path

from pymc_kameleon.adaptation import work

from .suite.compare import cell
from .suite.models import MODELS
from .suite.reference import load_reference
from .suite.runner import run_one

__all__ = ["main", "work_cap"]


@contextlib.contextmanager
def work_cap(cap: float, chosen: list):
    """Within the block, every step's work-per-draw window bounds its factor by ``cap``;
    each chain's ``(factor, tau)`` is appended to ``chosen``."""
    schedule, final = work.WorkPerDraw.__dict__["schedule"], work.WorkPerDraw.final

    def _final(self):
        factor = final(self)
        chosen.append((factor, self.tau))
        return factor

    work.WorkPerDraw.schedule = partial(schedule.__func__, work.WorkPerDraw, max_factor=cap)
    work.WorkPerDraw.final = _final
    try:
        yield
    finally:
        work.WorkPerDraw.schedule, work.WorkPerDraw.final = schedule, final


def main(argv: list[str] | None = None) -> None:
    """Command line: one line of JSON per run on stdout, all of them in ``--json``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gp-pois-regr")
    parser.add_argument("--steps", default="rw,kamh,fkamh,khmc")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--caps", default="4,8,16")
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    spec, ref = MODELS[args.model], load_reference(args.model)
    runs = []
    for cap in (float(c) for c in args.caps.split(",")):
        for sampler in args.steps.split(","):
            for seed in (int(s) for s in args.seeds.split(",")):
                chosen: list = []
                with work_cap(cap, chosen):
                    res = run_one(spec, sampler, ref, args.tune, args.draws, args.chains, seed)
                out = res.to_dict() | {"cap": cap, "criteria": cell(res.to_dict()),
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
