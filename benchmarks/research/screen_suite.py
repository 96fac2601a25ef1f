"""The surrogate screen through ``pm.sample`` on suite models: each step with and without it.

Usage::

    python -m benchmarks.research.screen_suite [--models pk,hare-lynx] [--seeds 1,2,3]
                                      [--steps rw,kamh] [--tune 1000] [--draws 1000]
                                      [--chains 4] [--screen-only]
                                      [--screen move_rate=0.1,max_steps_factor=4]

Per model of the suite and seed, every step of ``--steps`` (``rw``: ``RandomWalkStep``,
``kamh``: ``KameleonStep``, ``fkamh``: ``FastKameleonStep``, ``khmc``: ``KernelHMCStep``)
runs with its defaults and with ``screen=True`` (delayed acceptance with the kernel-ridge
surrogate learned while tuning, :mod:`pymc_kameleon.adaptation.screen`), through
:func:`benchmarks.suite.variants.compare_variants`: the suite's counting potential counts
every evaluation (tuning included), and each cell holds min bulk ESS, ESS per 1000
evaluations, max R-hat, wall seconds, the suite's criteria, the evaluations and, for the
screened variants, the share of chains whose screen was active after tuning and the
first-stage acceptance over the kept draws.  ``--screen-only`` skips the unscreened runs;
``--screen`` sets fields of :class:`~pymc_kameleon.adaptation.screen.SurrogateScreen`.  Results:
``docs/benchmarks/surrogate_screen.md``.
"""

from __future__ import annotations

import argparse
import ast

from pymc_kameleon import FastKameleonStep, KameleonStep, KernelHMCStep, RandomWalkStep
from pymc_kameleon.adaptation.screen import SurrogateScreen

__all__ = ["STEPS", "main", "runs_parser", "variants"]

#: The steps by their suite key.
STEPS = {"rw": RandomWalkStep, "kamh": KameleonStep, "fkamh": FastKameleonStep,
         "khmc": KernelHMCStep}


def variants(steps: list[str], screen: SurrogateScreen | None = None,
             screen_only: bool = False) -> dict:
    """Each step of ``steps`` (keys of :data:`STEPS`) with its defaults (unless
    ``screen_only``) and with the screen ``screen`` (default: ``screen=True``)."""
    out = {}
    for key in steps:
        cls = STEPS[key]
        if not screen_only:
            out[cls.__name__] = cls
        out[f"{cls.__name__}, screen"] = lambda cls=cls: cls(screen=screen or True)
    return out


def screen_settings(text: str) -> SurrogateScreen | None:
    """A :class:`SurrogateScreen` from ``"name=value,..."`` (None for an empty text)."""
    if not text:
        return None
    return SurrogateScreen(**{k: ast.literal_eval(v) for k, v in
                              (item.split("=") for item in text.split(","))})


def runs_parser(description: str, steps: str) -> argparse.ArgumentParser:
    """A parser of the runs' models, seeds, steps (default ``steps``) and ``pm.sample``'s
    tune, draws and chains."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--models", default="pk,hare-lynx")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--steps", default=steps, help=f"of {','.join(STEPS)}")
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--chains", type=int, default=4)
    return parser


def main(argv: list[str] | None = None) -> None:
    parser = runs_parser(__doc__.splitlines()[0], steps="rw,kamh")
    parser.add_argument("--screen-only", action="store_true")
    parser.add_argument("--screen", default="", help="SurrogateScreen fields, name=value,...")
    args = parser.parse_args(argv)
    from ..suite.variants import compare_variants

    compare_variants(args.models.split(","), [int(s) for s in args.seeds.split(",")],
                     variants(args.steps.split(","), screen_settings(args.screen),
                              args.screen_only), args.tune, args.draws, args.chains)


if __name__ == "__main__":
    main()
