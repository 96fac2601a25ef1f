"""Choosing one of a few values of a tuning parameter by trials (pure Python/NumPy).

Some parameters of a proposal have no acceptance rate to aim at: the isotropic term
``gamma`` of the kameleon proposals ``N(y, gamma^2 I + nu^2 G(y))`` trades the adaptive
part's shape against plain random-walk exploration, and the best value depends on the
target (large on near-Gaussian posteriors, small inside a thin curved one).
:class:`TrialSelection` runs each candidate in turn for a block of draws, in rounds, scores
it by its expected squared jump distance per iteration (Rao-Blackwellised:
``sum accept_prob * |x* - x|^2``, in the sampler's whitened coordinates) and keeps the best
one.  The first round is not scored: it lets anything adapted per candidate (e.g. each
candidate's own ``nu^2``) settle.

The ESJD is ``2 sum_i Var(x_i) (1 - rho_i)`` for a stationary chain (``rho_i`` the lag-1
autocorrelation of coordinate ``i``): in whitened coordinates, where every variance is
about 1, the candidate with the largest ESJD has the smallest mean lag-1 autocorrelation.
The estimate stays meaningful when the log density is a noisy estimate: the noise lowers
every candidate's acceptance, and a candidate that cannot move scores near zero.

References
----------
- Pasarica, C., Gelman, A. (2010). Adaptively scaling the Metropolis algorithm using
  expected squared jumped distance. Statistica Sinica 20, 343-364.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..validation import check_integral

__all__ = ["TrialSelection"]


@dataclass
class TrialSelection:
    """Round-robin trials of candidate values, scored by ESJD per iteration.

    Parameters
    ----------
    values : tuple of float
        The candidates (at least one).  With one candidate there is nothing to choose:
        :attr:`done` is true from the start.
    block : int
        Draws per candidate and round.
    rounds : int
        Rounds of trials; the first is not scored, so at least 2 when there is a choice.

    Notes
    -----
    Use: :meth:`record` once per iteration with the iteration's acceptance probability and
    proposed squared jump; :meth:`next_draw` at every draw boundary (it returns whether the
    value in use changed); :meth:`choose` to end the trials early with the best candidate,
    :meth:`stop` to end them with the candidate in use (e.g. tuning ends first).

    Examples
    --------
    >>> sel = TrialSelection((0.1, 1.0), block=1, rounds=2)
    >>> for draw in range(4):
    ...     for _ in range(10):
    ...         sel.record(0.5, 4.0 if sel.value == 1.0 else 0.01)
    ...     _ = sel.next_draw()
    >>> sel.done, sel.value
    (True, 1.0)
    """

    values: tuple[float, ...]
    block: int = 10
    rounds: int = 4
    index: int = 0  # candidate in use
    draw: int = 0  # trial draws done
    iterations: list[int] = field(default_factory=list)  # scored iterations per candidate
    jumps: list = field(default_factory=list)  # scored sums of accept * jump^2 (per coordinate)
    done: bool = False

    def __post_init__(self) -> None:
        self.values = tuple(float(v) for v in self.values)
        if not self.values or not all(np.isfinite(v) and v > 0 for v in self.values):
            raise ValueError(f"candidates must be positive numbers, got {self.values!r}")
        self.block = check_integral("block", self.block)
        self.rounds = check_integral("rounds", self.rounds, minimum=2)
        if not self.iterations:
            self.iterations = [0] * len(self.values)
            self.jumps = [0.0] * len(self.values)
        self.done = self.done or len(self.values) == 1

    @property
    def value(self) -> float:
        """The candidate in use (the chosen one once :attr:`done`)."""
        return self.values[self.index]

    @property
    def trial_draws(self) -> int:
        """Draws the trials take when they run to the end."""
        return 0 if len(self.values) == 1 else self.block * self.rounds * len(self.values)

    def scores(self) -> list[float]:
        """ESJD per scored iteration of each candidate, of its slowest coordinate when the
        jumps were recorded per coordinate (NaN where nothing was scored)."""
        return [float(np.min(j)) / n if n else float("nan")
                for j, n in zip(self.jumps, self.iterations, strict=True)]

    def record(self, accept_prob: float, sq_jump) -> None:
        """One iteration of the candidate in use (ignored outside scored trial rounds);
        ``sq_jump`` is the squared length of the proposed move or its squared components."""
        if self.done or self.draw < self.block * len(self.values):
            return
        self.iterations[self.index] += 1
        self.jumps[self.index] = (self.jumps[self.index]
                                  + float(np.nan_to_num(accept_prob)) * np.asarray(sq_jump))

    def next_draw(self) -> bool:
        """Advance by one draw; return ``True`` when the value in use changes."""
        if self.done:
            return False
        before = self.index
        self.draw += 1
        if self.draw >= self.trial_draws:
            self.choose()
        else:
            self.index = (self.draw // self.block) % len(self.values)
        return self.index != before

    def step_down(self) -> bool:
        """After the trials, switch to the largest candidate below the one in use (if any);
        return whether the value in use changed.

        For the kameleon proposals: a ``gamma`` whose isotropic walk alone is accepted less
        often than the target drives the adaptive part's scale down to its lower bound, and
        the proposal degenerates to that walk; the caller then steps down.
        """
        if not self.done:
            return False
        smaller = [i for i, v in enumerate(self.values) if v < self.value]
        if not smaller:
            return False
        self.index = max(smaller, key=lambda i: self.values[i])
        return True

    def stop(self) -> float:
        """End the trials keeping the candidate in use, and return it.

        For the end of tuning: the draw just taken reported the candidate in use, so
        keeping it makes the reported value the one every later draw uses (PyMC's
        convention for tuned values).  :meth:`choose` would switch to the best-scoring
        candidate without any draw reporting it.  Trials that ran to the end have chosen
        already; nothing changes then.
        """
        self.done = True
        return self.value

    def choose(self) -> float:
        """End the trials: keep the best-scoring candidate (the one in use if none was
        scored) and return it."""
        if not self.done:
            scores = np.array(self.scores())
            if np.isfinite(scores).any():
                self.index = int(np.nanargmax(scores))
            self.done = True
        return self.value
