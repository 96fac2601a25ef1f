"""What a step does at each tuning draw boundary, over its sequence of kernels.

The current kernel adapts on the last draw (``update_draw``); when it says it is done (the
warm-up's last window), it is frozen and the next kernel takes over with a fresh state.  Late
in tuning the chain's autocorrelation sets the work per draw (:class:`.WorkPerDraw`,
``docs/tuning.md``, "Work per draw").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..adaptation.kernel import DrawContext, Kernel
from .records import ChainRecord

__all__ = ["begin_tuning_draw", "kernel_draws", "warmup_length"]

_WARMUP_DRAWS = 500  # the warm-up's length when the step is not told how long tuning is


def warmup_length(warmup_draws: int | None, tune: int | None) -> int:
    """Draws of the warm-up: the user's ``warmup_draws``, else half of ``tune`` (500 when
    not known)."""
    if warmup_draws is not None:
        return warmup_draws
    if tune:
        return max(1, tune // 2)
    return _WARMUP_DRAWS


def kernel_draws(tune: int | None, length: int) -> int | None:
    """Tuning draws left to the sampler's kernel after a warm-up of ``length`` (None: not
    known)."""
    return max(0, tune - length) if tune else None


def begin_tuning_draw(w: ChainRecord, kernels: Sequence[Kernel], *, dim: int,
                      walk_scale: float, length: int, tune: int | None,
                      n_steps: Callable[[], int], rng: np.random.Generator) -> None:
    """Batched adaptation at the start of a tuning draw (the first draw adapts nothing).

    Parameters
    ----------
    w : ChainRecord
        The chain (its kernels' states, the last draw's acceptances, the draw count).
    kernels : sequence of Kernel
        The step's kernels in order; ``w.phase`` is the one in use.
    dim, walk_scale : int, float
        The block's dimension and ``2.38 / sqrt(d)``, for a kernel that takes over.
    length, tune : int, int or None
        Draws of the warm-up and of tuning (None: not known).
    n_steps : callable
        The iterations per draw at the current count.
    rng : numpy.random.Generator
    """
    if w.work is not None and w.draw > 0:
        _measure_work(w)
    if w.draw > 0:
        kernel, state = kernels[w.phase], w.states[w.phase]
        left = (tune - w.draw) * n_steps() if tune else None
        info = kernel.update_draw(state, DrawContext(w.x, w.logp, w.draw, length, w.accepts,
                                                     tune, left, w.walk.noise, rng))
        if info.new_window and w.work is not None:
            w.work.positions.clear()  # positions whitened by another map do not mix
        if info.done and w.phase + 1 < len(kernels):
            kernel.final(state, rng)
            w.phase += 1
            w.states[w.phase] = kernels[w.phase].init(dim, walk_scale,
                                                      kernel_draws(tune, length))
    w.accepts = []
    w.draw += 1


def _measure_work(w: ChainRecord) -> None:
    """Record the whitened position of the draw just done; at the window's end, set the
    factor on the iterations per draw."""
    if w.draw >= w.work.start:  # whiten only inside the window
        w.work.update(w.draw, w.precond.to_u(w.x))
    if w.draw + 1 >= w.work.decide:
        w.work_factor, w.work = w.work.final(), None
