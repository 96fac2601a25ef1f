"""Kernel HMC with its surrogate tempered in the tails: does it reach a short tail?

Usage::

    python -m benchmarks.research.khmc_tempered [--models pk] [--seeds 1,2,3] [--temperature 2]
                                       [--width 1] [--global] [--draws 1000]

``KernelHMCStep`` can come out with a short tail on a curved posterior (pk: an sd 0.83 of
the reference in issue 57; ``docs/benchmarks/suite.md``, "truncated-khmc-tail"): its
surrogate, fitted where the chain has been, is lighter in the tail than the target, so
trajectories turn back before they reach it.  This script tempers the surrogate after
tuning: its gradient is multiplied by ``w(q) = 1`` inside the whitened radius
``sqrt(d)``, falling linearly to ``1 / T`` at ``sqrt(d) + width`` (``--global``: ``1 / T``
everywhere), so that in the tails the trajectories follow the surrogate's density to the
power ``1 / T`` and go further.  Leapfrog with any force that depends on the position only
is volume preserving and reversible, so the chain stays exact; only its mixing changes.

Each model and seed runs ``KernelHMCStep()`` and the tempered one, each with and without
``screen=True``, through :func:`benchmarks.suite.variants.compare_variants` (``pm.sample``'s
defaults, every evaluation counted).  Results: ``docs/benchmarks/surrogate_screen.md``
("Kernel HMC tempered in the tails").
"""

from __future__ import annotations

import argparse
from dataclasses import replace

import numpy as np

from pymc_kameleon import KernelHMCStep
from pymc_kameleon.adaptation.kernel_hmc import KernelHMCAdaptation
from pymc_kameleon.math.hmc import leapfrog

__all__ = ["TemperedSurrogate", "tempered_adaptation", "main"]


class TemperedSurrogate:
    """A score surrogate whose gradient is scaled by ``weight(q)`` in its trajectories."""

    def __init__(self, estimator, dim: int, temperature: float, width: float | None):
        self.estimator, self.r0 = estimator, np.sqrt(dim)
        self.temperature, self.width = temperature, width

    def weight(self, q: np.ndarray) -> float:
        """1 inside radius ``sqrt(d)``, ``1 / T`` beyond ``sqrt(d) + width`` (``width``
        None: ``1 / T`` everywhere), linear between."""
        if self.width is None:
            return 1.0 / self.temperature
        excess = (np.sqrt(q @ q) - self.r0) / self.width
        return 1.0 - (1.0 - 1.0 / self.temperature) * min(max(excess, 0.0), 1.0)

    def leapfrog(self, q, p, step_size, n_steps):
        """Leapfrog on the scaled gradient."""
        return leapfrog(q, p, lambda x: self.weight(x) * self.estimator.grad(x), step_size,
                        n_steps)

    def __getattr__(self, name):
        return getattr(self.estimator, name)


def tempered_adaptation(temperature: float, width: float | None) -> type:
    """A :class:`KernelHMCAdaptation` whose trajectories after tuning use
    :class:`TemperedSurrogate` (tuning, and so every adapted value, is unchanged)."""

    class Tempered(KernelHMCAdaptation):
        def propose(self, state, q0, rng, tune):
            current = state.current
            if tune or current.estimator is None:
                return super().propose(state, q0, rng, tune)
            state.current = replace(current, estimator=TemperedSurrogate(
                current.estimator, state.dim, temperature, width))
            try:
                return super().propose(state, q0, rng, tune)
            finally:
                state.current = current

    return Tempered


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="pk")
    parser.add_argument("--seeds", default="1,2,3")
    parser.add_argument("--temperature", type=float, default=2.0)
    parser.add_argument("--width", type=float, default=1.0)
    parser.add_argument("--global", dest="everywhere", action="store_true")
    parser.add_argument("--draws", type=int, default=1000)
    args = parser.parse_args(argv)
    from ..suite.variants import compare_variants

    tempered = tempered_adaptation(args.temperature, None if args.everywhere else args.width)
    label = f"tempered T={args.temperature:g}" + (" everywhere" if args.everywhere else "")
    compare_variants(args.models.split(","), [int(s) for s in args.seeds.split(",")], {
        "KernelHMCStep": KernelHMCStep,
        label: lambda: KernelHMCStep(adaptation_class=tempered),
        "KernelHMCStep, screen": lambda: KernelHMCStep(screen=True),
        f"{label}, screen": lambda: KernelHMCStep(screen=True, adaptation_class=tempered),
    }, draws=args.draws)


if __name__ == "__main__":
    main()
