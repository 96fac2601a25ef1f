"""When a stage's moves may stop: the stage rules, as objects a run can replace.

A stage of a particle sampler such as :class:`~pymc_kameleon.KameleonSMC` (without
waste-free chains) moves every particle until one of its *stop* rules says the particles
have moved enough -- :class:`Decorrelated` (PyMC's rule) or :class:`Refreshed` -- and
every *guard* allows it: at least ``min_steps`` steps, most particles distinct, and the
particles' mean log density no longer rising (:class:`Levelled`).  ``docs/smc.md``
explains each; the measurements are on docs/benchmarks/smc.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["Decorrelated", "Levelled", "Refreshed", "StageRules", "StepRecord", "finite_mean",
           "rise_se",
           "unique_fraction"]


def finite_mean(x: np.ndarray) -> float:
    finite = x[np.isfinite(x)]
    return float(np.mean(finite)) if len(finite) else np.nan


def unique_fraction(X: np.ndarray) -> float:
    """The fraction of distinct rows of ``X``."""
    return len(np.unique(X, axis=0)) / len(X)


def rise_se(logp: np.ndarray) -> float:
    """Standard error of a difference of two means of ``logp``'s finite values (``nan`` with
    fewer than two of them): the unit in which a stage's rise in log density is judged."""
    finite = logp[np.isfinite(logp)]
    return float(np.sqrt(2.0 / len(finite)) * np.std(finite)) if len(finite) >= 2 else np.nan


@dataclass
class StepRecord:
    """What a stage has done after its latest step (what the rules judge, and what a run's
    ``callback`` receives).

    Attributes
    ----------
    n_steps : int
        Steps of the stage so far.
    X, logp : numpy.ndarray
        The particles and their tempered log densities.
    refreshed : numpy.ndarray
        Which particles have accepted an independent proposal in this stage.
    levels : list of float
        The particles' mean tempered log density before the first step and after each.
    verdicts : dict
        Each rule's verdict on this step (filled by :class:`StageRules`).
    """

    n_steps: int
    X: np.ndarray
    logp: np.ndarray
    refreshed: np.ndarray
    levels: list
    verdicts: dict = field(default_factory=dict)


@dataclass
class Decorrelated:
    """PyMC's rule: stop once fewer than 90 % of the coordinates' correlations with the
    stage's start fell by more than ``threshold`` in the last step; with ``slowest``, also
    go on while the slowest coordinate's still falls that much (PyMC's rule alone stops
    once the easy coordinates have decorrelated, with curved ones still stuck)."""

    threshold: float = 0.01
    slowest: bool = False

    def start(self, X: np.ndarray) -> None:
        from pymc.smc.kernels import Pearson  # PyMC's own rule, only where it is used

        self._corr = Pearson(X)
        self._old = np.full(X.shape[1], 2.0)

    def __call__(self, record: StepRecord) -> bool:
        corr = np.nan_to_num(self._corr.get(record.X))
        old, self._old = self._old, corr
        go = np.mean((old - corr) > self.threshold) > 0.9 or (
            self.slowest and bool(np.max(old) - np.max(corr) > self.threshold))
        return not go


@dataclass
class Refreshed:
    """Stop once at least ``fraction`` of the particles have accepted an independent
    proposal in this stage (each is then a new draw from the fitted mixture; None: off)."""

    fraction: float | None = 0.9

    def start(self, X: np.ndarray) -> None:
        pass

    def __call__(self, record: StepRecord) -> bool:
        f = self.fraction
        return f is not None and bool(np.mean(record.refreshed) >= f)


@dataclass
class Levelled:
    """Go on while the particles' mean tempered log density rose over the last (up to)
    three steps by more than ``z`` standard errors of such a difference: the particles are
    still on their way to the stage's target (None: off)."""

    z: float | None = 1.0

    def start(self, X: np.ndarray) -> None:
        pass

    def __call__(self, record: StepRecord) -> bool:
        levels = record.levels
        if self.z is None or len(levels) < 2:
            return True
        rise = levels[-1] - levels[max(0, len(levels) - 4)]
        return not bool(rise > self.z * rise_se(record.logp))


@dataclass
class StageRules:
    """The rules of a stage: it ends after a step where a ``stop`` rule holds and every
    guard allows it (at least ``min_steps`` steps, at least half the particles distinct,
    :class:`Levelled`)."""

    stop: tuple = field(default_factory=lambda: (Decorrelated(), Refreshed()))
    levelled: Levelled = field(default_factory=Levelled)
    min_steps: int = 1

    @classmethod
    def from_options(cls, options) -> StageRules:
        return cls((Decorrelated(options.correlation_threshold, options.slowest_rule),
                    Refreshed(options.refresh_fraction)),
                   Levelled(options.stationarity), options.min_steps)

    def start(self, X: np.ndarray) -> None:
        for rule in (*self.stop, self.levelled):
            rule.start(X)

    def done(self, record: StepRecord) -> bool:
        """Whether the stage ends after this step (the verdicts go into ``record``)."""
        v = record.verdicts
        for rule in self.stop:
            v[type(rule).__name__] = rule(record)
        ready = any(v.values()) and record.n_steps >= self.min_steps
        if ready:
            v["distinct"] = unique_fraction(record.X) >= 0.5
            v["Levelled"] = self.levelled(record)
        return ready and v["distinct"] and v["Levelled"]
