"""KameleonSMC's settings: defaults, checks and the attributes PyMC saves."""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from ..failures import check_on_error
from .weighted import check_weights_path

__all__ = ["SMCOptions"]


@dataclass(frozen=True)
class SMCOptions:
    """What a :class:`~pymc_kameleon.KameleonSMC` run does besides PyMC's own settings.

    Parameters
    ----------
    gamma : float, default 0.1
        Isotropic part of the KAMH proposal, whitened units.
    n_subsample : int, default 500
        Particles in the KAMH subsample ``Z``.
    correlation_threshold : float, default 0.01
        PyMC's stopping rule for the MH steps of a stage.
    max_steps, min_steps : int, default 100 and 1
        Bounds on the MH steps of a stage.
    learning_rate : float, default 1.0
        Step of the ``log nu`` adaptation between stages.
    slowest_rule : bool, default False
        Also step while the slowest coordinate decorrelates.
    independent_weight : float, default 0.8
        Probability of a move from the fitted mixture (0: KAMH moves only).
    n_clusters, global_weight, em_iters : int, float, int, default 4, 0.1 and 30
        The mixture: k-means clusters refined by EM, plus the particles' Gaussian.
    refresh_fraction : float or None, default 0.9
        End a stage once this share of particles accepted a move from the mixture.
    stationarity : float or None, default 1.0
        Step while the particles' mean log density rose over the last three steps by more
        than this many standard errors (``None``: off).
    max_evals, waste_free, recycle, weights_path
        As :class:`~pymc_kameleon.KameleonSMC` documents them.
    """

    gamma: float = 0.1
    n_subsample: int = 500
    correlation_threshold: float = 0.01
    max_steps: int = 100
    min_steps: int = 1
    learning_rate: float = 1.0
    slowest_rule: bool = False
    independent_weight: float = 0.8
    n_clusters: int = 4
    global_weight: float = 0.1
    refresh_fraction: float | None = 0.9
    em_iters: int = 30
    stationarity: float | None = 1.0
    max_evals: int | None = None
    waste_free: bool | int = False
    recycle: int | None = None
    on_error: str = "raise"
    weights_path: str | None = None

    @classmethod
    def pop_from(cls, kwargs: dict) -> SMCOptions:
        """The options among ``kwargs`` (removed from it; the rest are PyMC's)."""
        return cls(**{f.name: kwargs.pop(f.name) for f in fields(cls) if f.name in kwargs})

    def __post_init__(self) -> None:
        check_on_error(self.on_error)
        object.__setattr__(self, "weights_path", check_weights_path(self.weights_path))
        if (self.gamma <= 0 or self.n_subsample < 2 or self.max_steps < 1
                or not 0 <= self.independent_weight <= 1):
            raise ValueError("gamma must be > 0, n_subsample >= 2, max_steps >= 1 and "
                             "0 <= independent_weight <= 1")
        if self.recycle is not None and int(self.recycle) < 1:
            raise ValueError(
                f"recycle must be None or a number of draws >= 1, got {self.recycle!r}")
        typed = {"gamma": float, "n_subsample": int, "max_steps": int, "min_steps": int,
                 "learning_rate": float, "slowest_rule": bool, "independent_weight": float,
                 "n_clusters": int, "global_weight": float, "em_iters": int}
        for name, kind in typed.items():
            object.__setattr__(self, name, kind(getattr(self, name)))
        for name, kind in (("stationarity", float), ("max_evals", int), ("recycle", int)):
            value = getattr(self, name)
            object.__setattr__(self, name, None if value is None else kind(value))

    def check(self, draws: int) -> None:
        """``ValueError`` where an option does not fit ``draws`` particles."""
        if self.max_evals is not None and self.max_evals < 2 * draws:
            raise ValueError(
                f"max_evals={self.max_evals} cannot pay for the {draws} prior draws and one "
                f"stage's moves: give at least 2 * draws = {2 * draws}, or fewer draws")
        wf = self.waste_free
        if wf is not True and wf is not False and (int(wf) < 2 or int(wf) > draws // 2):
            raise ValueError(f"waste_free must be True, False or a chain length P with "
                             f"2 <= P <= draws / 2, got {wf!r}")

    def chain_length(self, draws: int, dim: int) -> int | None:
        """``P`` of waste-free SMC (``None``: off).  ``True`` gives chains of about 20 steps
        while keeping ``M = draws / P`` at least ``max(100, 10 d)`` (the mixture's fit)."""
        if self.waste_free is False:
            return None
        if self.waste_free is True:
            return int(np.clip(draws // max(100, 10 * dim), 2, 20))
        return int(self.waste_free)
