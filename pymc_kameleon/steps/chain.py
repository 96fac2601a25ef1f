"""One chain of a step: its record, the kernels it runs, and the draw boundaries.

:class:`Chain` holds what a step keeps per chain (the :class:`~.records.ChainRecord`: point,
stored log density, one state per kernel) and does what happens between Metropolis-Hastings
iterations: a draw's entry (the chain's start, or the stored value of a point another step
changed), the adaptation at each tuning draw boundary -- where the kernel in use may hand
over to the next one, the warm-up to the sampler's own -- and the end of tuning.  The
iterations themselves are the step's loop (:mod:`~.base`).  Late in tuning the chain's
autocorrelation sets the work per draw (:class:`.WorkPerDraw`, docs/tuning.md, "Work per
draw").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial

import numpy as np
from pymc.blocking import RaveledVars

from ..adaptation.independence import EmulatorMoves
from ..adaptation.kernel import DrawContext, Kernel, Metropolis
from ..adaptation.screen import ScreenedMetropolis, SurrogateScreen
from ..adaptation.warmup_kernel import WarmupKernel
from ..adaptation.work import MAX_FACTOR, WorkPerDraw
from ..compat import assumed_tuning_draws
from ..validation import check_at_least, check_integral
from .density import LogDensity
from .emulated import EMULATOR_OFF, EmulatorDraw, StepEmulator
from .messages import work_bound_warning
from .metropolis import StepMetropolis
from .records import BASE_STATS, SCREEN_OFF, ChainRecord, fill_stats
from .start import ChainStart
from .store import PointSync

__all__ = ["Chain", "kernel_draws", "warmup_length"]

_WARMUP_DRAWS = 500  # the warm-up's length when the step is not told how long tuning is
PHASES = ("warmup", "kernel")  # the names of the kernels in use


def warmup_length(warmup_draws: int | None, tune: int | None) -> int:
    """Draws of the warm-up: the user's ``warmup_draws``, else half of ``tune`` (500 when
    not known)."""
    if warmup_draws is not None:
        return warmup_draws
    if tune:
        return max(1, tune // 2)
    return _WARMUP_DRAWS


def _integral_or_none(name: str, value) -> int | None:
    return None if value is None else check_integral(name, value)


def kernel_draws(tune: int | None, length: int) -> int | None:
    """Tuning draws left to the sampler's kernel after a warm-up of ``length`` (None: not
    known)."""
    return max(0, tune - length) if tune else None


class Chain:
    """The chain of a step.

    Parameters
    ----------
    kernels : sequence of Kernel
        The kernels in the order they run, the warm-up first.
    dim : int
        The block's dimension.
    density : LogDensity
        The evaluated log density.
    start : ChainStart
        Finds the chain's start at its first draw.
    point_sync : PointSync
        The stored values shared with the model's other steps.
    warmup_draws, n_steps, max_work_factor, laplace, laplace_starts, laplace_max_evals,
    tune_draws
        The step's settings (see :class:`~.base.BaseKernelStep`).
    screen : SurrogateScreen, optional
        The surrogate screen in front of every Metropolis-Hastings decision.
    emulator : EmulatorMoves, optional
        The emulator's moves (:mod:`.emulated`); without a ``laplace`` given, the chain's
        start then searches no mode (the emulator's run does).
    """

    def __init__(self, kernels: Sequence[Kernel], dim: int, density: LogDensity,
                 start: ChainStart, point_sync: PointSync, *, warmup_draws: int | None,
                 n_steps: int | None, laplace: bool | None, laplace_starts: int,
                 max_work_factor: float = MAX_FACTOR,
                 laplace_max_evals: int | None = None,
                 screen: bool | SurrogateScreen | None = None,
                 tune_draws: int | None = None,
                 emulator: EmulatorMoves | None = None):
        self.kernels, self.dim = tuple(kernels), dim
        self.density, self.start, self.point_sync = density, start, point_sync
        self.warmup_draws = _integral_or_none("warmup_draws", warmup_draws)
        self.n_steps_given = _integral_or_none("n_steps", n_steps)
        self.max_work_factor = check_at_least("max_work_factor", max_work_factor, 1.0)
        self.laplace = laplace
        self.laplace_starts = check_integral("laplace_starts", laplace_starts, minimum=0)
        self.laplace_max_evals = _integral_or_none("laplace_max_evals", laplace_max_evals)
        if not isinstance(screen, SurrogateScreen):
            screen = SurrogateScreen() if screen else None
        self.screen = screen
        if emulator is not None and screen is not None:
            raise ValueError("emulator=... and screen=... cannot be combined: after tuning "
                             "the emulator screens the moves itself (EmulatorMoves.delayed)")
        if emulator is not None and laplace is None:
            self.laplace = False  # the emulator's run searches the modes itself
        self.emulator = (None if emulator is None
                         else StepEmulator(emulator, start, density, dim))
        self.tune_draws = (None if tune_draws is None
                           else check_integral("tune_draws", tune_draws, minimum=0))
        self.tune: int | None = None  # tuning draws: told by PyMC 6, else tune_draws/assumed
        self.draws: int | None = None  # tuning + posterior draws, when PyMC tells the step
        self.told = False  # PyMC told the number of tuning draws (setup_chain)
        self.assumed = False  # self.tune is pm.sample's default, assumed (PyMC 5)
        self.warned_tune = False  # the warning that the assumption was wrong was given
        self.reset()

    @property
    def warmup(self) -> WarmupKernel:
        """The first kernel."""
        return self.kernels[0]

    @property
    def length(self) -> int:
        """Draws of the warm-up."""
        return warmup_length(self.warmup_draws, self.tune)

    def tell(self, tune: int, draws: int) -> None:
        """PyMC 6's ``setup_chain``: the chain's tuning and posterior draws (wins over
        ``tune_draws``)."""
        self.tune, self.draws = int(tune), int(tune) + int(draws)
        self.told, self.assumed = True, False

    def tuning_mismatch(self) -> int | None:
        """At the end of tuning: the tuning draws the chain ran, if the step assumed
        another number (PyMC 5 without ``tune_draws``) and has not said so yet; else None.

        A chain that ran none (``tune=0``) learned nothing, so no assumption mattered.
        """
        ran = self.record.draw
        if not self.assumed or self.warned_tune or self.record.x is None or ran == self.tune:
            return None
        self.warned_tune = True
        return ran

    def reset(self) -> None:
        """A fresh chain: no point, the sampler's kernel in its initial state."""
        self.record = ChainRecord()
        self.record.states += [self._fresh_state(k) for k in self.kernels[1:]]
        if self.screen is not None:
            self.record.screen = self.screen.init(self.dim)

    def n_steps(self, tune: bool) -> int:
        """Iterations of the next draw: the user's count, else the kernel in use's default
        times the work factor."""
        if self.n_steps_given is not None:
            return self.n_steps_given
        w = self.record
        n = self.kernels[w.phase].n_steps(w.states[w.phase], self.dim, tune)
        if self.screen is not None:
            n *= self.screen.steps_factor(w.screen)
        return max(1, math.ceil(n * w.work_factor))

    def metropolis(self, mh: StepMetropolis, rng: np.random.Generator) -> Metropolis:
        """The draw's Metropolis-Hastings decisions on this chain: the step's, behind the
        surrogate screen if there is one (it learns from every evaluation and screens while
        it is accurate)."""
        w = self.record
        mh.record, mh.rng = w, rng
        if self.screen is None:
            return mh
        mh.observer = partial(self.screen.update, w.screen)
        return ScreenedMetropolis(mh, self.screen, w.screen)

    def emulator_draw(self, mh: Metropolis, tune: bool,
                      rng: np.random.Generator) -> EmulatorDraw | None:
        """The draw's emulator moves (None without an emulator); the emulator is built at
        the chain's first tuning draw."""
        if self.emulator is None:
            return None
        return self.emulator.draw(self.record, mh, tune, self.warmup, rng, self.density.name)

    def draw_stats(self, dtypes: dict, tune: bool, n_steps: int, evals: int, accept: float,
                   moved: float, emulator: dict | None = None) -> dict:
        """The draw's stats (``dtypes``: the step's), the kernels' and the screen's included;
        adds the draw's evaluations to the chain's total."""
        w, failed = self.record, self.density.failed
        w.n_evals += evals
        counts = failed.draw_stats()  # ends the draw: before its report
        report = failed.warning(self.density.name, self.density.info, self.draws)
        if report is not None:  # PyMC 6: at the chain's last draw, so before the others
            w.reports.insert(0, report)
        return {
            "accept": accept,
            "accepted": moved,
            "tune": tune,
            "model_logp": w.logp,
            "n_evals": evals,
            "n_evals_total": w.n_evals,
            "laplace_start": w.start,
            "n_steps": n_steps,
            **counts,
            "warning": w.reports.pop(0) if w.reports else None,  # one per draw
            **(SCREEN_OFF if self.screen is None else self.screen.stats(w.screen)),
            **(EMULATOR_OFF if emulator is None else emulator),
            **fill_stats(dtypes, BASE_STATS, self.kernels[-1].stats(w.states[-1], tune)),
        }

    # ------------------------------------------------------------------ a draw's entry
    def enter(self, q0: RaveledVars, point, tune: bool, rng: np.random.Generator) -> int:
        """Make the record match the incoming point; return the evaluations spent (the
        chain's start at its first draw)."""
        w = self.record
        self.density.layout(q0)
        key = self.point_sync.key(w, point)
        if w.x is not None and key == w.key:
            return 0
        x = np.array(q0.data, dtype=float)
        stored = self.point_sync.store.get(key)
        if w.x is not None:
            return self.point_sync.refresh(w, x, key, stored, self.density)
        laplace, walk = self.laplace, self.warmup
        if not walk.adapt or (laplace is None and walk.cov is not None):
            laplace = False  # a given initial shape is replaced only on request
        res = self.start.run(
            x, logp=self.density, search_logp=self.density.searching(),
            round=self.density.round, rng=rng, stored=stored, tune=tune, laplace=laplace,
            laplace_starts=self.laplace_starts, laplace_max_evals=self.laplace_max_evals,
            point=point, point_map_info=q0.point_map_info)
        if tune and not self.told:  # PyMC 5 (or a chain driven by hand): not told
            planned = assumed_tuning_draws(self.tune_draws)
            if planned is not None:
                self.tune = planned
                self.assumed = self.tune_draws is None  # pm.sample's default (PyMC 5)
        work = (WorkPerDraw.schedule(self.tune, self.length, self.max_work_factor)
                if tune and self.n_steps_given is None else None)
        w.begin(res, key, walk.init(), work)
        if res.cov is not None:
            walk.start_at(w.walk, w.x, res.cov)
        return res.n_evals

    # ------------------------------------------------------------------ tuning
    def begin_tuning_draw(self, rng: np.random.Generator) -> None:
        """Batched adaptation at the start of a tuning draw (the first draw adapts
        nothing); the hand-over to the next kernel when the one in use is done."""
        w = self.record
        if w.work is not None and w.draw > 0:
            self._measure_work()
        if w.draw > 0:
            kernel, state = self.kernels[w.phase], w.states[w.phase]
            left = (self.tune - w.draw) * self.n_steps(True) if self.tune else None
            cap = 1.0 if self.screen is None else self.screen.target(w.screen, 1.0)
            info = kernel.update_draw(state, DrawContext(
                w.x, w.logp, w.draw, self.length, w.accepts, self.tune, left, w.walk.noise,
                rng, cap))
            if info.new_window and w.work is not None:
                w.work.positions.clear()  # positions whitened by another map do not mix
            if info.done and w.phase + 1 < len(self.kernels):
                kernel.final(state, rng)
                w.phase += 1
                w.states[w.phase] = self._fresh_state(self.kernels[w.phase])
        if self.screen is not None:
            self.screen.update_draw(w.screen)
        w.accepts = []
        w.draw += 1

    def stop_tuning(self, rng: np.random.Generator) -> None:
        """Freeze the sampler's kernel, then the one in use if another."""
        w = self.record
        for i in sorted({len(self.kernels) - 1, w.phase}, reverse=True):
            if w.states[i] is not None:
                self.kernels[i].final(w.states[i], rng)
        if self.screen is not None:
            self.screen.final(w.screen)

    def _fresh_state(self, kernel: Kernel):
        """A sampler kernel's state as it takes over (its tuning draws as known now)."""
        return kernel.init(self.dim, self.warmup.scale0, kernel_draws(self.tune, self.length))

    def _measure_work(self) -> None:
        """Record the whitened position of the draw just done; at the window's end, set the
        factor on the iterations per draw."""
        w = self.record
        if w.draw >= w.work.start:  # whiten only inside the window
            w.work.update(w.draw, w.precond.to_u(w.x))
        if w.draw + 1 >= w.work.decide:
            target = (None if self.screen is None
                      else self.screen.work_target(w.screen, w.work.target_tau))
            work, w.work = w.work, None
            w.work_factor = work.final(target)
            if work.bound_reached:
                w.reports.append(work_bound_warning(
                    self.density.name, work.asked, work.max_factor, self.n_steps(False),
                    work.tau))
