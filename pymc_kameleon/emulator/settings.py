"""The emulator's settings, and the defaults its front ends give the fields they leave open.

:class:`EmulatorSettings` is read by the engine (:mod:`.engine`), the correction's proposal
(:mod:`.correction`) and the steps' independence moves; a field left at None takes the
front end's default (:meth:`EmulatorSettings.completed`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from ..compat.arviz import MAX_KHAT
from ..validation import check_above, check_at_least, check_flag, check_fraction, check_integral

__all__ = ["ENGINE_DEFAULTS", "EmulatorSettings"]


@dataclass(frozen=True)
class EmulatorSettings:
    """How the emulator mode runs (``None``: a default from the dimension ``d``).

    Parameters
    ----------
    n_initial : int, optional
        Points of the first design (``10 d``).
    batch : int, optional
        Points of each design round (``3 d``).
    min_rounds, max_rounds : int
        Fewest and most design rounds.
    settle : float
        The design ends once the emulator posterior's means and sds moved less than this
        many sds in two rounds running, and at most ``max_edge`` of it lies past the edge.
    max_edge : float
        Largest share of the emulator posterior's draws past the design's edge (where the
        emulator's predictive sd is above one nat: there it is its mean function) with
        which the design may end before ``max_rounds`` (stat ``design_edge``; 1: no such
        rule).  A posterior that moves little between rounds can still sit where no point
        was evaluated (``docs/benchmarks/emulator.md``, "emulator-design-edge").
    keep_draws : bool
        Draw the emulator's posterior again (its tempering) only once it has moved by
        ``settle`` sds since the last draws, instead of after every design round: about
        30 % less of the main process's CPU, so more of the speed-up of many workers on a
        fast model, for design points chosen among older draws (on a curved tail the
        design reaches less far).
    correction_rounds : int
        Importance-sampling rounds planned.
    correction_size : int, optional
        True evaluations of the planned rounds (default ``1.25`` times the draws).
    target_ess : float
        Once the weights are reliable, rounds are added (within ``max_extra_rounds``)
        while the weighted sample is worth less than ``target_ess`` times the draws on
        any coordinate (Kish's ESS, or the delta method's ESS of a coordinate's mean
        where that is less), each as large as the shortfall asks (at least a quarter of a
        planned round): the returned draws are then worth about their number on every
        coordinate, and ArviZ's ESS of them says so (``docs/benchmarks/emulator.md``,
        "emulator-honest-draws", "emulator-weakest-coordinate").
    max_extra_rounds : int
        Rounds added while k-hat or the worth fall short, in all.
    max_restarts : int
        Times a correction whose weights collapse (Kish's ESS below ``2 d`` after a round,
        or unreliable after the extra rounds) hands its evaluations to the design and the
        design resumes, before the run falls back.
    handover : int, optional
        Of a failed correction's true evaluations, at most this many (``30 d``) become
        design points when the design resumes: the heaviest half and a random draw of the
        rest.  Each design round fits the process to all its points and tempers on it, and a
        correction holds thousands (``docs/benchmarks/emulator.md``, "emulator-handover").
    edge_weight : float
        Before the correction ends, the farthest draws of 400 resampled from the weighted
        sample are carried on past its edge (along the direction each lies from its
        neighbours), and the heaviest of them followed further outward, 340 points in
        all; the design's own points past the edge count too, a nat lighter.  Where a
        point as probable as the sample's draws (its log density above their 1 %
        quantile) has a weight under the last round's proposal more than ``edge_weight``
        nats above every weight of that round (stat ``past_edge``), the proposals are
        lighter than the posterior there, and the design resumes with the probable points
        (a failed correction, as for ``max_restarts``).  Along a curved ridge the
        proposals end short of its arms while Pareto's k-hat and Kish's ESS look sound.
        The arms' points mostly outweigh the sample by 2-9 nats, a log scale's tail by
        up to 1.4; at 0 a false alarm there mostly costs a restart of the design, its
        answer right, and a higher value lets more arms through
        (``docs/benchmarks/emulator.md``, "emulator-past-edge-restart" and
        "emulator-past-edge-design"; inf: no such check).  Not where the budget ends the
        correction first, nor where fewer than 340 evaluations are left: a warning then
        says that it did not run.
    max_khat, min_ess : float
        Pareto's k-hat above ``max_khat``, or Kish's ESS below ``min_ess`` times the
        draws, after the extra rounds: the run falls back.
    max_dim : int
        Above this dimension the run falls back at once (the emulator does not pay).
    max_error : float
        From the ``min_rounds``-th design round on, the run falls back once the emulator's
        leave-one-out error near the mode (stat ``emulator_error``) is above this many nats:
        an emulator that predicts held-out evaluations this badly does not describe the
        target, and its correction would collapse (``docs/benchmarks/emulator.md``).
    window : float
        Values more than this many nats below the best are fitted as that low.
    search_starts, search_keep : int
        The mode search climbs from the best ``search_starts`` prior draws (None: the
        front end's default, :data:`ENGINE_DEFAULTS` here and the steps' own in
        :class:`~pymc_kameleon.adaptation.independence.EmulatorMoves`) for
        ``search_climb (d + 1)`` evaluations each, then finishes at most ``search_keep``
        of them, highest first, skipping a climb that ended in a mode already finished
        (a short climb already ranks the basins: a start in a local mode without mass
        ends far below one in the global mode's basin, while one full search from each
        start would cost several times as much; ``docs/benchmarks/emulator.md``).
    search_climb : int
        The short climbs' evaluations per dimension (and one).
    widen, defensive_weight, defensive_df, defensive_scale : float
        The correction's proposal: mixture covariances widened by ``widen`` (sd factor),
        a Student-t with ``defensive_df`` degrees of freedom and scale
        ``defensive_scale`` (sd factor) taking ``defensive_weight`` of the mass (each
        None: the front end's default, as ``search_starts``).
    gamma, n_subsample, independent_weight, n_clusters, global_weight, em_iters
        The mixture moves of the tempering on the emulator and the mixture fits
        (:class:`~pymc_kameleon.particles.proposal.StageProposal`).
    mean_df : float, optional
        The emulator's mean function around each mode: the Laplace quadratic (None), or a
        Student-t shape with ``mean_df`` degrees of freedom (default 10; above 4
        dimensions ``mean_df (d / 4)^2``) and the same curvature at the mode, which falls
        off logarithmically.  Far from the design the emulator returns to its mean: the
        quadratic falls tens of nats below a curved tail it has not seen, so that neither
        the design nor ``g`` ever goes there; the slower fall keeps such regions probable
        enough for the design to evaluate them.  Degrees of freedom that do not grow with
        ``d`` put the shape ever further above the quadratic where the posterior's mass
        lies, which the emulator must then unlearn (``docs/benchmarks/emulator.md``).
    design_optimism : float
        Off at 0.  Above 0, each design round's candidates add as many draws of the
        defensive mixture fitted to the emulator's posterior, and the design's score reads
        the emulator at ``mean + design_optimism sd`` (at most its best mean): a region
        far from the design that the emulator puts many nats low, but with an sd as large,
        is then evaluated.  On a long curved tail that the design otherwise never reaches
        the emulator learns it (``g`` then covers it), and fits the bulk less finely
        (``docs/benchmarks/emulator.md``, "emulator-steps-optimism").
    tail_probe : float
        Off at 0.  Above 0, once the design settles it goes on with rounds whose score
        reads ``mean + tail_probe sd`` (at most the best mean) among the draws of the
        emulator's posterior, and ends when such a round leaves it settled: the bulk is
        fitted as without optimism, then the edges of the posterior where the emulator
        is unsure are evaluated (one round of ``batch`` points where it was right).  The
        candidates are not those of ``design_optimism``: far draws of ``g``, where the
        process's sd has reached its prior value, took every point of such a round
        (``docs/benchmarks/emulator.md``, "emulator-steps-tail-probe").

    Raises
    ------
    ValueError, TypeError
        A field out of its range, named: a count below its least value (``max_rounds``
        below ``min_rounds``), a fraction outside 0-1, a negative or NaN number.
    """

    n_initial: int | None = None
    batch: int | None = None
    min_rounds: int = 3
    max_rounds: int = 15
    settle: float = 0.05
    max_edge: float = 0.05
    keep_draws: bool = False
    correction_rounds: int = 6
    correction_size: int | None = None
    target_ess: float = 1.0
    max_extra_rounds: int = 4
    max_restarts: int = 2
    edge_weight: float = 0.0
    handover: int | None = None
    max_khat: float = MAX_KHAT
    min_ess: float = 0.5
    max_dim: int = 12
    max_error: float = 2.0
    window: float = 40.0
    search_starts: int | None = None
    search_keep: int = 2
    search_climb: int = 15
    widen: float = 1.2
    defensive_weight: float | None = None
    defensive_df: float | None = None
    defensive_scale: float | None = None
    gamma: float = 0.1
    n_subsample: int = 500
    independent_weight: float = 0.8
    n_clusters: int = 4
    global_weight: float = 0.1
    em_iters: int = 30
    mean_df: float | None = 10.0
    design_optimism: float = 0.0
    tail_probe: float = 0.0

    def __post_init__(self) -> None:
        """Every field checked here, with its name: a bad value would otherwise fail deep
        in a run after true evaluations were spent, or silently change the design."""
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None and f.name in _OPTIONAL:
                continue
            if f.name in _COUNTS:
                object.__setattr__(self, f.name, check_integral(f.name, value, _COUNTS[f.name]))
            elif f.name in _FRACTIONS:
                check_fraction(f.name, value)
            elif f.name in _POSITIVE:
                check_above(f.name, value, 0.0)
            elif f.name == "keep_draws":
                check_flag(f.name, value)
            else:  # settle, min_ess, edge_weight, target_ess, max_error, design_optimism, ...
                check_at_least(f.name, value, 0.0)
        if self.max_rounds < self.min_rounds:
            raise ValueError(f"max_rounds ({self.max_rounds}) must be at least min_rounds "
                             f"({self.min_rounds})")
        if self.defensive_weight is not None and not self.defensive_weight < 1:
            raise ValueError("defensive_weight must be below 1 (the mixture fitted to the "
                             f"posterior needs some weight), got {self.defensive_weight!r}")

    def completed(self, defaults: dict) -> EmulatorSettings:
        """These settings with every field left at None that ``defaults`` names set from
        it: a front end's own defaults, so that a user who sets one field keeps them."""
        return replace(self, **{k: v for k, v in defaults.items() if getattr(self, k) is None})


#: The engine's values of the fields whose default depends on the front end (those of
#: ``KameleonSMC(emulator=...)``; the steps' are ``adaptation.independence.STEP_DEFAULTS``).
ENGINE_DEFAULTS = {"search_starts": 8, "defensive_weight": 0.2, "defensive_df": 5.0,
                   "defensive_scale": 2.0}


#: The fields' rules (:meth:`EmulatorSettings.__post_init__`): counts with their least
#: value, fractions (0 to 1), positive numbers (infinity allowed); the rest are numbers of
#: at least 0.
_COUNTS = {"n_initial": 1, "batch": 1, "min_rounds": 1, "max_rounds": 1,
           "correction_rounds": 1, "correction_size": 1, "max_extra_rounds": 0,
           "max_restarts": 0, "handover": 1, "max_dim": 1, "search_starts": 1,
           "search_keep": 1, "search_climb": 1, "n_subsample": 1, "n_clusters": 1,
           "em_iters": 1}
_FRACTIONS = {"defensive_weight", "independent_weight", "global_weight", "max_edge"}
_POSITIVE = {"max_khat", "window", "widen", "defensive_df", "defensive_scale",
             "gamma", "mean_df"}
_OPTIONAL = {"n_initial", "batch", "correction_size", "handover", "search_starts",
             "defensive_weight", "defensive_df", "defensive_scale", "mean_df"}
