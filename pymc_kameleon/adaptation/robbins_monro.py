"""Robbins-Monro scaling toward a target acceptance rate (pure Python/NumPy).

``log scale <- log scale + zeta_t (alpha_t - alpha*)``, ``zeta_t = t^-c``.  In the step
methods it runs only while PyMC tunes; ``stop_tuning()`` freezes it, so the draws after
tuning come from a fixed, valid Metropolis-Hastings kernel.

References
----------
- Andrieu, Thoms (2008). A tutorial on adaptive MCMC. Statistics and Computing 18,
  Algorithm 4.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["RobbinsMonro", "check_robbins_monro", "log_scale_step"]

LOG_BOUND = 60.0  # keeps exp(log scale) finite whatever the acceptance history
FIELD_NAMES = ("initial", "target", "exponent")  # of RobbinsMonro and AnchoredStepSize


def check_robbins_monro(*, initial: float | None = None, target: float | None = None,
                        exponent: float | None = None,
                        names: tuple[str, str, str] = ("the initial scale", "target_accept",
                                                       "adapt_exponent")) -> None:
    """``ValueError`` unless the given arguments of a Robbins-Monro recursion are valid.

    Parameters
    ----------
    initial : float, optional
        Starting scale: finite and positive.
    target : float, optional
        Target acceptance probability: in ``(0, 1)``.
    exponent : float, optional
        ``c`` in the gain ``t^-c``: in ``(0.5, 1]``, so that the gains sum to infinity
        while their squares do not (Andrieu and Thoms, 2008, Section 4).
    names : tuple of str
        How the messages call ``initial``, ``target`` and ``exponent``: by default the
        keywords of the step methods.

    Examples
    --------
    >>> check_robbins_monro(target=0.234, exponent=0.6)
    >>> check_robbins_monro(exponent=0.5)
    Traceback (most recent call last):
    ...
    ValueError: adapt_exponent must lie in (0.5, 1], got 0.5
    """
    if initial is not None and not (np.isfinite(initial) and initial > 0):
        raise ValueError(f"{names[0]} must be a positive number, got {initial!r}")
    if target is not None and not 0.0 < target < 1.0:
        raise ValueError(f"{names[1]} must lie in (0, 1), got {target!r}")
    if exponent is not None and not 0.5 < exponent <= 1.0:
        raise ValueError(f"{names[2]} must lie in (0.5, 1], got {exponent!r}")


def log_scale_step(log_value: float, t: int, exponent: float, accept_prob: float,
                   target: float, lower: float = -LOG_BOUND,
                   upper: float = LOG_BOUND, gain: float | None = None) -> float:
    """One Robbins-Monro step on a log scale, clipped to ``[lower, upper]``.

    ``log s <- clip(log s + t^-c (alpha - alpha*), lower, upper)``, an acceptance
    probability ``alpha`` of NaN counting as 0 (a proposal that could not be evaluated).

    Parameters
    ----------
    log_value : float
        Current log scale.
    t : int
        Index of this step (``>= 1``): the gain is ``t^-exponent``.
    exponent : float
        ``c`` of the gain.
    accept_prob, target : float
        Observed acceptance probability (or a batch mean) and its target.
    lower, upper : float
        Bounds of the log scale (default ``-+60``).
    gain : float, optional
        A constant gain instead of ``t^-exponent`` (SMC's between-stage adaptation, where
        adapting does not bias the result).

    Returns
    -------
    float
        The new log scale.

    Examples
    --------
    >>> log_scale_step(0.0, 1, 0.6, 1.0, 0.25)
    0.75
    """
    gain = t ** (-exponent) if gain is None else gain
    step = gain * (float(np.nan_to_num(accept_prob)) - target)
    return float(np.clip(log_value + step, lower, upper))


@dataclass
class RobbinsMonro:
    """Robbins-Monro recursion on the log of a positive scale, with optional bounds.

    The value is stored as given (no ``exp(log(.))`` round trip), so before the first
    update :attr:`value` is exactly ``initial``, as PyMC's stats convention expects.

    Parameters
    ----------
    initial : float
        Starting value of the scale (> 0).
    target : float
        Target acceptance probability ``alpha*``.
    exponent : float
        ``c`` in ``zeta_t = t^-c``; must lie in ``(0.5, 1]`` so that the gains sum to infinity
        while their squares do not.
    lower, upper : float
        Bounds of the scale.  A lower bound above zero keeps the scale from collapsing when
        the target acceptance cannot be reached (noisy likelihood estimators).

    References
    ----------
    .. [1] Robbins, H., Monro, S. (1951). A stochastic approximation method. Annals of
       Mathematical Statistics 22(3), 400-407.
    .. [2] Andrieu, C., Thoms, J. (2008). A tutorial on adaptive MCMC. Statistics and
       Computing 18(4), 343-373, Algorithm 4.

    Examples
    --------
    >>> rm = RobbinsMonro(initial=1.0, target=0.234)
    >>> rm.update(1.0)  # accepted with probability 1: scale grows
    >>> rm.value > 1.0
    True
    >>> RobbinsMonro(initial=0.1, target=0.234).value == 0.1
    True
    """

    initial: float
    target: float
    exponent: float = 0.6
    lower: float = 0.0
    upper: float = float("inf")
    t: int = 0
    value: float = float("nan")

    def __post_init__(self) -> None:
        check_robbins_monro(initial=self.initial, target=self.target, exponent=self.exponent,
                            names=FIELD_NAMES)
        if not 0.0 <= self.lower <= self.upper:
            raise ValueError(f"RobbinsMonro: need 0 <= lower <= upper, got {self.lower}, "
                             f"{self.upper}")
        if np.isnan(self.value):
            self.value = float(self.initial)

    @property
    def log_value(self) -> float:
        return float(np.log(self.value))

    @property
    def at_floor(self) -> bool:
        """Whether the scale sits on its lower bound (the target acceptance was out of reach
        however small the scale; never with ``lower = 0``)."""
        return bool(self.value <= self.lower * (1.0 + 1e-9))

    def rescale(self, factor: float) -> None:
        """Multiply the scale (and its bounds) by ``factor`` (e.g. a new natural scale)."""
        self.value *= float(factor)
        self.lower *= float(factor)
        self.upper *= float(factor)

    def update(self, accept_prob: float, target: float | None = None) -> None:
        """One recursion step with an acceptance probability (or a mean over a batch).

        ``target`` overrides the target for this step (e.g. one lowered because a noisy
        likelihood estimator caps the attainable acceptance rate).
        """
        self.t += 1
        goal = self.target if target is None else float(target)
        log_value = log_scale_step(float(np.log(self.value)), self.t, self.exponent,
                                   accept_prob, goal)
        self.value = float(np.clip(np.exp(log_value), self.lower, self.upper))
