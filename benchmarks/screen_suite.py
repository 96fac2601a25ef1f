"""The surrogate screen through ``pm.sample`` on suite models: each step with and without it.

Usage::

    python -m benchmarks.screen_suite [--models pk,hare-lynx] [--seeds 1,2,3]
                                      [--steps rw,kamh] [--tune 1000] [--draws 1000]
                                      [--chains 4]

Per model of the suite and seed, every step of ``--steps`` (``rw``: ``RandomWalkStep``,
``kamh``: ``KameleonStep``, ``fkamh``: ``FastKameleonStep``, ``khmc``: ``KernelHMCStep``)
runs with its defaults and with ``screen=True`` (delayed acceptance with the kernel-ridge
surrogate learned while tuning, :mod:`pymc_kameleon.adaptation.screen`), through
:func:`benchmarks.suite.variants.compare_variants`: the suite's counting potential counts
every evaluation (tuning included), and each cell holds min bulk ESS, ESS per 1000
evaluations, max R-hat, wall seconds, the suite's criteria, the evaluations and, for the
screened variants, the share of chains whose screen was active after tuning and the
first-stage acceptance over the kept draws.  Results:
``docs/benchmarks/surrogate_screen.md``.
"""

from __future__ import annotations

import argparse

from pymc_kameleon import FastKameleonStep, KameleonStep, KernelHMCStep, RandomWalkStep

__all__ = ["STEPS", "main", "variants"]

#: The steps by their suite key.
STEPS = {"rw": RandomWalkStep, "kamh": KameleonStep, "fkamh": FastKameleonStep,
         "khmc": KernelHMCStep}


def variants(steps: list[str]) -> dict:
    """Each step of ``steps`` (keys of :data:`STEPS`) with its defaults and with the screen."""
    out = {}
    for key in steps:
        cls = STEPS[key]
        out[cls.__name__] = cls
        out[f"{cls.__name__}, screen"] = lambda cls=cls: cls(screen=True)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="pk,hare-lynx")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--steps", default="rw,kamh", help=f"of {','.join(STEPS)}")
    parser.add_argument("--tune", type=int, default=1000)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--chains", type=int, default=4)
    args = parser.parse_args(argv)
    from .suite.variants import compare_variants

    compare_variants(args.models.split(","), [int(s) for s in args.seeds.split(",")],
                     variants(args.steps.split(",")), args.tune, args.draws, args.chains)


if __name__ == "__main__":
    main()
