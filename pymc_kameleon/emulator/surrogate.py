"""The emulator: a Gaussian-process regression of the log density around its modes.

``log p(x) = q(x) + c + f(z)``: ``q`` the Laplace quadratic of the modes the search found
(the largest of their quadratics; or, with ``mean_df``, a Student-t shape with the same
curvature at each mode, which falls off more slowly), so that the emulator falls off away
from the design;
``f`` a Gaussian process with per-coordinate lengths (:class:`~pymc_kameleon.math.gp.
GaussianProcess`) in the coordinates ``z`` whitened by the best mode's covariance.  Values
more than ``window`` nats below the best, and non-finite ones (failed evaluations, outside
the support), are fitted as the lower of that level and the quadratic: far tails would
distort the fit, yet the emulator must learn that such regions are low, or its posterior
may put mass where every true evaluation says there is none.  ``docs/emulator.md``
explains the design.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

from ..math.gp import GaussianProcess
from ..math.whitening import AffineMap

__all__ = ["LogDensityEmulator", "Mode", "mean_shape_df"]

#: The Student-t mean keeps ``mean_df`` degrees of freedom up to ``DF_DIM`` dimensions; above,
#: they grow as ``(d / DF_DIM)^2``, so that the shape's excess over the quadratic at the
#: posterior's typical radius (``q = d``: about ``d^2 / 4 (nu + d)`` nats) stays near its
#: value at ``DF_DIM``: a fixed ``nu`` left the steps' ``g`` too broad in 8 dimensions
#: (``docs/benchmarks/emulator.md``, "emulator-mean-dimension").
DF_DIM = 4


def mean_shape_df(mean_df: float, dim: int) -> float:
    """The Student-t mean's degrees of freedom in ``dim`` dimensions (see ``DF_DIM``)."""
    return float(mean_df) * max(1.0, (dim / DF_DIM) ** 2)


@dataclass
class Mode:
    """A mode of the log density: its location, the Laplace covariance and its value."""

    mean: np.ndarray
    cov: np.ndarray
    logp: float

    @property
    def whitening(self) -> AffineMap:
        return AffineMap.from_cov(self.mean, self.cov)


class LogDensityEmulator:
    """A regression of the log density on the evaluated points.

    Parameters
    ----------
    modes : list of Mode
        The modes found (the first is the best); their quadratics are the mean function.
    window : float
        Values more than this far below the best are fitted as that low (see the module).
    mean_df : float, optional
        Degrees of freedom of the Student-t mean function up to 4 dimensions, growing as
        ``(d / 4)^2`` above (:func:`mean_shape_df`; None: the quadratic).
    """

    def __init__(self, modes: list[Mode], window: float = 40.0, mean_df: float | None = None):
        self.modes = list(modes)
        self.window = float(window)
        self.mean_df = mean_df
        self.whitening = self.modes[0].whitening
        self._maps = [m.whitening for m in self.modes]
        self.gp: GaussianProcess | None = None

    def quadratic(self, Z: np.ndarray) -> np.ndarray:
        """The mean function at whitened rows ``Z``: the modes' Laplace quadratics, or their
        Student-t shapes with ``mean_df`` (their largest, smoothly)."""
        X = self.whitening.rows_to_x(Z)
        terms = [m.logp - self._fall(np.sum(w.rows_to_u(X) ** 2, axis=1))
                 for m, w in zip(self.modes, self._maps, strict=True)]
        return logsumexp(np.stack(terms), axis=0)

    def _fall(self, q: np.ndarray) -> np.ndarray:
        if self.mean_df is None:
            return 0.5 * q
        d = len(self.modes[0].mean)
        k = mean_shape_df(self.mean_df, d) + d
        return 0.5 * k * np.log1p(q / k)

    def fit(self, X: np.ndarray, logp: np.ndarray,
            rng: np.random.Generator) -> LogDensityEmulator:
        """Fit to the points ``X`` (rows) and their log densities (NaN, ``-inf`` allowed)."""
        X, first = np.unique(X, axis=0, return_index=True)  # a repeated point adds nothing
        logp, Z = logp[first], self.whitening.rows_to_u(X)
        floor = np.max(logp[np.isfinite(logp)]) - self.window
        low = ~(logp >= floor)  # far below the best, or not finite
        y = np.where(low, np.minimum(floor, self.quadratic(Z)), logp)
        self.gp = GaussianProcess.fit(Z, y, mean_function=self.quadratic, rng=rng,
                                      start=self.gp)
        return self

    def predict(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The emulated log density and its predictive sd at rows ``X``."""
        return self.gp.predict(self.whitening.rows_to_u(np.asarray(X, dtype=float)))

    def __call__(self, X: np.ndarray) -> np.ndarray:
        """The emulated log density at rows ``X`` (the predictive mean alone)."""
        return self.gp.predict_mean(self.whitening.rows_to_u(np.asarray(X, dtype=float)))

    def held_out_error(self) -> float:
        """Root mean squared leave-one-out error of the fitted points within ``d`` nats of
        the best (where the posterior's mass lies), in nats."""
        y = self.gp.y
        top = y >= np.max(y) - self.gp.X.shape[1]
        return float(np.sqrt(np.mean(self.gp.loo_residuals()[top] ** 2)))
