"""What a step keeps per chain and reports per iteration.

:class:`ChainState` and :class:`Proposal` are the sampler's view (whitened coordinates),
:class:`StepInfo` the documented record of one iteration, :class:`ChainRecord` the step's own
per-chain bookkeeping (saved by ``sampling_state``), and :func:`fill_stats` completes a
sampler's per-draw stats.  The split mirrors BlackJAX's ``State(position, logdensity)`` /
``Info(...)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from pymc.stats.convergence import SamplerWarning

from ..adaptation.kernel import ChainState, Proposal
from ..adaptation.warmup import AffineMap
from ..adaptation.warmup_kernel import WarmupState
from ..adaptation.work import WorkPerDraw

if TYPE_CHECKING:
    from .start import StartResult

__all__ = ["BASE_STATS", "SCREEN_OFF", "ChainRecord", "ChainState", "Proposal", "StepInfo",
           "fill_stats"]

#: The stats every step reports per draw (name: dtype, shape), before its kernel's own.
BASE_STATS: dict[str, tuple[Any, Any]] = {
    "accept": (np.float64, []),
    "accepted": (np.float64, []),  # float like pm.Metropolis (same name, same dtype)
    "tune": (bool, []),
    "model_logp": (np.float64, []),
    "n_evals": (np.int64, []),
    "n_evals_total": (np.int64, []),  # the chain's evaluations so far, every draw included
    # the start of the kept Laplace mode: -1 none (the chain's own start), 0 the chain's
    # start, k the k-th dispersed start (a prior draw)
    "laplace_start": (np.int64, []),
    "n_steps": (np.int64, []),  # MH iterations of the draw
    "n_nan": (np.int64, []),  # evaluations that gave NaN (rejected; reported)
    "n_errors": (np.int64, []),  # evaluations that raised, with on_error="reject"
    "warning": (SamplerWarning, None),  # the chain's report of the two (PyMC's stat)
    # the surrogate screen (screen=...): whether it screens, the draw's first-stage and
    # second-stage acceptance fractions, the evaluations its first stage saved
    "screen_active": (bool, []),
    "screen_stage1": (np.float64, []),
    "screen_stage2": (np.float64, []),
    "evals_saved": (np.int64, []),
    # the emulator (emulator=...): whether the draw used it, the chain's phase (0 off,
    # 1 moves on the emulator while tuning, 2 independence moves after, 3 fallen back), the
    # draw's mean acceptance of independence and of local moves (NaN where none), and the
    # Pareto k-hat of the chain's independence proposals' weights p / g so far
    "emulator_active": (bool, []),
    "emulator_phase": (np.int64, []),
    "accept_independent": (np.float64, []),
    "accept_local": (np.float64, []),
    "independence_khat": (np.float64, []),
    # ... and the fraction of the draw's moves after tuning that the emulator's screen
    # passed to a true evaluation (NaN without the screen)
    "emulator_stage1": (np.float64, []),
    # ... and the build's measures of g on the true density, which set the iterations per
    # draw: its trial's mean acceptance and the acceptance at stationarity estimated from
    # the trial with the emulator as control variate (NaN before the build)
    "trial_accept": (np.float64, []),
    "accept_estimate": (np.float64, []),
}

#: The screen's stats of a step without one.
SCREEN_OFF = {"screen_active": False, "screen_stage1": np.nan, "screen_stage2": np.nan,
              "evals_saved": 0}


@dataclass(frozen=True, eq=False)  # array fields: compare them with NumPy
class StepInfo:
    """What one Metropolis-Hastings iteration of a step did.

    Read the last iteration's as :attr:`BaseKernelStep.last_info`, or every iteration's
    (tuning included) through the step's ``callback``.  Building it costs nothing unless
    one of the two is read.

    Attributes
    ----------
    position : numpy.ndarray
        The chain's point after the iteration, in model coordinates (the block's raveled
        values, as PyMC stores them).
    proposal : numpy.ndarray or None
        The last point the iteration evaluated, in model coordinates, or ``None`` when it
        evaluated none (a diverged trajectory, a non-finite proposal).  Delayed rejection's
        second stage is the last.
    logp_proposal : float
        Its log density (``-inf`` outside the support, for NaN or a failed evaluation);
        NaN when nothing was evaluated.
    accept_prob : float
        The Metropolis-Hastings acceptance probability.
    accepted : bool
        Whether the chain moved.
    n_evals : int
        Log-density evaluations of the iteration (0, 1, or 2 with delayed rejection).
    phase : str
        ``"warmup"`` (the warm-up random walk proposed) or ``"kernel"`` (the sampler's own).
    tune : bool
        Whether the step was tuning.
    probe : bool
        Whether the warm-up proposed the current point again to measure the noise of a
        likelihood estimator (only while tuning).
    """

    position: np.ndarray
    proposal: np.ndarray | None
    logp_proposal: float
    accept_prob: float
    accepted: bool
    n_evals: int
    phase: str
    tune: bool
    probe: bool


@dataclass
class ChainRecord:
    """Per-chain bookkeeping of the step: the point, its stored value and the kernels' states."""

    x: np.ndarray | None = None  # position in model coordinates
    logp: float = float("nan")
    key: bytes = b""  # full point (all model variables) the stored value belongs to
    data_key: bytes = b""  # fingerprint of the model's data, taken at the chain's start
    # one state per kernel of the step (the warm-up's first: its map whitens the chain)
    states: list = field(default_factory=lambda: [None])
    phase: int = 0  # the kernel in use (0: the warm-up)
    draw: int = 0  # tuning draws done
    start: int = -1  # where the Laplace mode was found from (-1: not used, 0: the chain's start)
    work: WorkPerDraw | None = None  # measures the autocorrelation late in tuning
    work_factor: float = 1.0  # on the default iterations per draw (set once while tuning)
    accepts: list = field(default_factory=list)  # accept probs of the last draw (no probes)
    n_evals: int = 0  # evaluations of the chain so far (its start and tuning included)
    screen: Any = None  # the surrogate screen's state (screen=...)
    emulator: Any = None  # the emulator's state (emulator=...; None before the first draw)
    reports: list = field(default_factory=list)  # SamplerWarnings for the next draws' stat

    def begin(self, res: StartResult, key: bytes, walk: WarmupState,
              work: WorkPerDraw | None) -> None:
        """Take the chain's start ``res`` (found for the point of key ``key``), with the
        warm-up's fresh state ``walk`` and the work-per-draw measurement ``work``."""
        self.x, self.logp, self.start = res.x, res.logp, res.laplace_start
        self.key = b"" if res.moved else key  # a moved start is stored at the draw's end
        self.walk, self.work = walk, work
        walk.noisy = res.noisy

    @property
    def walk(self) -> WarmupState | None:
        """The warm-up kernel's state (None before the chain's start)."""
        return self.states[0]

    @walk.setter
    def walk(self, value: WarmupState) -> None:
        self.states[0] = value

    @property
    def noisy(self) -> bool:
        """Whether the log density is a likelihood estimator's (measured at the start)."""
        return self.walk.noisy

    @property
    def precond(self) -> AffineMap:
        """The whitening map ``x = m + L u`` of the chain (the warm-up's, frozen after it)."""
        return self.walk.precond


def fill_stats(dtypes: dict[str, tuple[Any, Any]], skip: dict[str, Any],
               info: dict[str, Any]) -> dict[str, Any]:
    """A sampler's per-iteration stats: the values in ``info`` for the names of ``dtypes``
    not in ``skip`` (the base's own stats), neutral values (NaN, False, 0) where ``info``
    has none."""
    out = {}
    for name, (dtype, _) in dtypes.items():
        if name in skip:
            continue
        if name in info:
            out[name] = info[name]
        else:
            kind = np.dtype(dtype).kind
            out[name] = np.nan if kind == "f" else (False if kind == "b" else 0)
    return out
