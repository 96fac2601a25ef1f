"""A step-size adaptation that stays sane when the acceptance rate is capped by noise.

With a likelihood *estimator* (pseudo-marginal MCMC) the acceptance probability of even an
infinitesimal move is capped by the estimator's noise: for log-normal noise of sd ``sigma``
the cap is about ``2 Phi(-sigma / sqrt(2))`` (0.72, 0.40 and 0.16 at ``sigma`` = 0.5, 1.2 and
2).  A Robbins-Monro recursion toward a target above the cap drives the step size to zero.

:class:`AnchoredStepSize` runs two recursions on the log scale with the same gains:

* the *anchor* follows a noise-free acceptance statistic evaluated *at the anchor*, for
  kernel HMC the acceptance probability of a trajectory with step size ``anchor`` on the
  surrogate Hamiltonian ``min(1, exp(-(H_f(q*, p*) - H_f(q, p))))`` with
  ``H_f = -f(q) + |p|^2 / 2``, which costs surrogate gradients but no target evaluation
  (the statistic must be taken at the anchor, not at the clipped step size: at a smaller
  step the surrogate accepts more, and the anchor would grow without bound);
* the *step size* follows the acceptance probability against the real target, so it is
  checked against the target, but is clipped to ``[lower * anchor, upper * anchor]``.

Without noise and with a good surrogate both recursions settle at the same value and the
clip is inactive.  When noise caps the acceptance below the target, the step size stops at
``lower * anchor``: bounded away from zero by the integrator accuracy of the surrogate
dynamics, whatever the noise.  Pure Python/NumPy; runs only while PyMC tunes.

References
----------
- Andrieu, Thoms (2008). A tutorial on adaptive MCMC. Statistics and Computing 18,
  Algorithm 4 (Robbins-Monro scaling).
- Doucet, Pitt, Deligiannidis, Kohn (2015). Efficient implementation of Markov chain Monte
  Carlo when using an unbiased likelihood estimator. Biometrika 102(2) (acceptance of a
  pseudo-marginal chain as a function of the log-noise sd).
- Strathmann et al. (2015). Gradient-free Hamiltonian Monte Carlo with efficient kernel
  exponential families. NIPS (the surrogate Hamiltonian).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .robbins_monro import FIELD_NAMES, check_robbins_monro, log_scale_step

__all__ = ["AnchoredStepSize"]


@dataclass
class AnchoredStepSize:
    """Robbins-Monro step size clipped to a band around a noise-free anchor.

    ``log a <- log a + t^-c (beta_t - alpha*)`` (anchor, only when ``beta_t`` is given) and
    ``log eps <- clip(log eps + t^-c (alpha_t - alpha*), log(lower a), log(upper a))``,
    where ``alpha_t`` is the acceptance probability against the target and ``beta_t`` a
    noise-free one (kernel HMC: on the surrogate Hamiltonian).  Without ``beta_t`` the anchor
    stays at ``initial``, so the band is fixed around the initial value.

    Parameters
    ----------
    initial : float
        Initial step size and anchor (> 0).
    target : float
        Target acceptance probability ``alpha*`` of both recursions, in ``(0, 1)``.
    exponent : float
        ``c`` in the gain ``t^-c``, in ``(0.5, 1]``.
    lower, upper : float
        The band ``[lower * anchor, upper * anchor]``, ``0 < lower <= 1 <= upper``.
    anchor0 : float, optional
        Initial anchor (> 0); default ``initial``.  A fixed anchor other than the initial
        value bounds the step size in known units (e.g. the random-walk scale of a whitened
        posterior) whatever the initial value.

    References
    ----------
    .. [1] Andrieu, C., Thoms, J. (2008). A tutorial on adaptive MCMC. Statistics and
       Computing 18(4), 343-373, Algorithm 4.
    .. [2] Strathmann, H., Sejdinovic, D., Livingstone, S., Szabo, Z., Gretton, A. (2015).
       Gradient-free Hamiltonian Monte Carlo with efficient kernel exponential families.
       NIPS, Section 4.

    Examples
    --------
    Noise caps the acceptance at 0.2 while the surrogate dynamics accept 0.65 at step 1:
    the step size stops at ``lower`` times the anchor instead of collapsing.

    >>> rule = AnchoredStepSize(1.0, target=0.65, lower=0.25)
    >>> for _ in range(5000):
    ...     rule.update(0.2, anchor_accept_prob=0.65)
    >>> round(rule.value, 3), round(rule.anchor, 3)
    (0.25, 1.0)
    """

    initial: float
    target: float = 0.65
    exponent: float = 0.6
    lower: float = 0.25
    upper: float = 2.0
    anchor0: float | None = None
    t: int = 0
    log_value: float = field(init=False)
    log_anchor: float = field(init=False)

    def __post_init__(self) -> None:
        check_robbins_monro(initial=self.initial, target=self.target, exponent=self.exponent,
                            names=FIELD_NAMES)
        if not 0.0 < self.lower <= 1.0 <= self.upper < np.inf:
            raise ValueError(f"need 0 < lower <= 1 <= upper < inf, got {self.lower}, "
                             f"{self.upper}")
        anchor0 = self.initial if self.anchor0 is None else self.anchor0
        if not (np.isfinite(anchor0) and anchor0 > 0):
            raise ValueError(f"anchor must be positive, got {anchor0}")
        self.log_value = float(np.log(self.initial))
        self.log_anchor = float(np.log(anchor0))

    @property
    def value(self) -> float:
        """The current step size (exactly ``initial`` before the first update)."""
        return float(self.initial) if self.t == 0 else float(np.exp(self.log_value))

    @property
    def anchor(self) -> float:
        """The current anchor (the noise-free step size)."""
        return float(np.exp(self.log_anchor))

    @property
    def at_floor(self) -> bool:
        """Whether the step size sits on the lower edge of the band (a capped acceptance)."""
        return bool(self.log_value <= self.log_anchor + np.log(self.lower) + 1e-12)

    def update(self, accept_prob: float, anchor_accept_prob: float | None = None,
               target: float | None = None) -> None:
        """One step of both recursions.

        Parameters
        ----------
        accept_prob : float
            Acceptance probability of the last proposal against the target (NaN counts as 0).
        anchor_accept_prob : float, optional
            The noise-free acceptance probability of a proposal made with the anchor as step
            size; ``None`` leaves the anchor where it is.
        target : float, optional
            Overrides :attr:`target` for the step size's recursion in this update (e.g. one
            lowered because estimator noise caps the acceptance rate); the anchor, which
            follows a noise-free statistic, always targets :attr:`target`.
        """
        self.t += 1
        if anchor_accept_prob is not None:
            self.log_anchor = log_scale_step(self.log_anchor, self.t, self.exponent,
                                             anchor_accept_prob, self.target)
        goal = self.target if target is None else float(target)
        lo = self.log_anchor + np.log(self.lower)
        hi = self.log_anchor + np.log(self.upper)
        self.log_value = log_scale_step(self.log_value, self.t, self.exponent, accept_prob,
                                        goal, lo, hi)
