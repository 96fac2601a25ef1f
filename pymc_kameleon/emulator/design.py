"""Where the emulator asks for true evaluations: the first design and the batches after it.

The first design puts most points around the modes the search found (draws of their
Laplace Gaussians, widened) and some prior draws, so that regions away from the modes are
seen.  Each later batch takes, among draws of the emulator's posterior, the points where
the emulator is both probable and uncertain: the score ``log sd(x) + (s(x) - max s) / 2``
(a moderated-variance rule, as VBMC's), one point after the other, each conditioning the
process's variance on the points already chosen (a variance needs no value), so that one
batch does not pile up in one place.  With ``optimism`` the density term reads
``mean + optimism sd`` (at most the best mean), so that a region the emulator puts low only
for want of points there is evaluated too.

:func:`edge_directions` gives a sample's farthest draws and the direction each lies from
its neighbours: along a curved ridge that is the ridge's own direction, where a step
outward from the centre would leave it.  :func:`carry_on` follows such points outward, a
step at a time, each step keeping the heaviest of a few jittered points: along a ridge
that bends, a straight path leaves it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy.spatial import cKDTree

from ..math.whitening import AffineMap
from .surrogate import LogDensityEmulator, Mode

__all__ = ["batch", "carry_on", "edge_directions", "initial_design"]


def initial_design(modes: list[Mode], prior_draws: Callable[[int], np.ndarray], size: int,
                   rng: np.random.Generator, prior_share: float = 0.2,
                   widen: float = 1.5) -> np.ndarray:
    """``size`` points: a ``prior_share`` of prior draws, the rest around the modes."""
    n_prior = int(round(prior_share * size))
    per_mode = np.full(len(modes), (size - n_prior) // len(modes))
    per_mode[: (size - n_prior) % len(modes)] += 1
    parts = [prior_draws(n_prior)] if n_prior else []
    for mode, n in zip(modes, per_mode, strict=True):
        w = mode.whitening
        parts.append(w.rows_to_x(widen * rng.standard_normal((int(n), len(mode.mean)))))
    return np.concatenate(parts)


def batch(emulator: LogDensityEmulator, candidates: np.ndarray, size: int,
          optimism: float = 0.0) -> np.ndarray:
    """``size`` distinct rows of ``candidates`` with the highest moderated variance, each
    chosen given those before it (``optimism``: see the module's description)."""
    candidates = np.unique(candidates, axis=0)
    gp = emulator.gp
    Z = emulator.whitening.rows_to_u(candidates)
    mean, sd = gp.predict(Z)
    var = sd**2
    top = np.max(mean)
    level = np.minimum(mean + optimism * sd, top) if optimism > 0 else mean
    picked: list[int] = []
    cross = np.zeros((len(Z), 0))  # conditional covariances with the picked points
    for _ in range(min(size, len(Z))):
        score = 0.5 * np.log(np.maximum(var, 1e-300)) + 0.5 * (level - top)
        score[picked] = -np.inf
        j = int(np.argmax(score))
        picked.append(j)
        c = gp.posterior_cov(Z, Z[j:j + 1])[:, 0] - cross @ cross[j]
        c = c / np.sqrt(max(var[j], 1e-300))
        var = np.maximum(var - c**2, 0.0)
        cross = np.column_stack([cross, c])
    return candidates[picked]


def edge_directions(X: np.ndarray, share: float = 0.1, neighbours: int = 20
                    ) -> tuple[AffineMap, np.ndarray, np.ndarray]:
    """The whitening of the sample ``X`` (rows) by its mean and covariance, the ``share`` of
    its draws farthest from its mean in those coordinates (farthest first), and the unit
    direction each lies from the mean of its ``neighbours`` nearest draws."""
    whitening = AffineMap.from_sample(X)
    U = whitening.rows_to_u(X)
    far = np.argsort(-np.sum(U**2, axis=1))[:max(int(share * len(X)), 1)]
    away = U[far].copy()  # from the mean, where there are no neighbours
    k = min(neighbours, len(X) - 1)
    if k > 0:
        _, near = cKDTree(U).query(U[far], k=k + 1)  # the first is the draw itself
        away -= U[near[:, 1:]].mean(axis=1)
    away /= np.maximum(np.linalg.norm(away, axis=1, keepdims=True), 1e-12)
    return whitening, U[far], away


def carry_on(U: np.ndarray, away: np.ndarray, weigh: Callable[[np.ndarray], np.ndarray],
             rng: np.random.Generator, steps: int = 4, tries: int = 9,
             jitter: float = 0.3) -> None:
    """Each row of ``U`` carried ``steps`` units on from ``away`` (unit rows), a unit a
    step: each step ``weigh`` gets one batch of the straight step and ``tries - 1``
    points jittered ``jitter`` around it for every row (rows of ``tries`` points each),
    and returns their log weights; the heaviest of each row's points is kept, and the
    step to it is the next direction."""
    U, away = np.array(U, dtype=float), np.array(away, dtype=float)
    k, d = U.shape
    for _ in range(steps):
        ahead = (U + away)[:, None]
        points = np.concatenate([ahead, ahead + jitter * rng.standard_normal(
            (k, tries - 1, d))], axis=1)
        w = np.asarray(weigh(points.reshape(-1, d)), dtype=float).reshape(k, tries)
        best = points[np.arange(k), np.argmax(np.where(np.isnan(w), -np.inf, w), axis=1)]
        away = best - U
        away /= np.maximum(np.linalg.norm(away, axis=1, keepdims=True), 1e-12)
        U = best
