"""Unit tests: the Hilbert curve order and systematic resampling along it."""

import itertools

import numpy as np
import pytest
from scipy import stats

from pymc_kameleon.math import space_filling
from pymc_kameleon.math.importance import resample_indices
from pymc_kameleon.math.space_filling import hilbert_keys, hilbert_order


def _curve(d: int, bits: int) -> np.ndarray:
    """Every cell of the ``2**bits`` grid in ``d`` dimensions, in the curve's order."""
    cells = np.array(list(itertools.product(range(1 << bits), repeat=d)))
    return cells[np.lexsort(hilbert_keys(cells, bits)[::-1])]


@pytest.mark.parametrize("d, bits", [(1, 4), (2, 1), (2, 4), (3, 3), (4, 2), (6, 2)])
def test_hilbert_curve_visits_every_cell_once_by_unit_steps(d, bits):
    """The curve's defining property, checked on the full grid: it starts at the origin,
    visits every cell once, and each step moves to a neighbour (one coordinate by one).
    Lexicographic or Morton order fails the steps."""
    path = _curve(d, bits)
    assert (path[0] == 0).all()
    assert len({tuple(c) for c in path}) == (1 << bits) ** d
    assert (np.abs(np.diff(path, axis=0)).sum(axis=1) == 1).all()


def test_hilbert_keys_split_into_words_keep_the_order(monkeypatch):
    """Keys longer than one word (``d * bits`` above 62) order as one long key would."""
    whole = _curve(4, 3)
    monkeypatch.setattr(space_filling, "_WORD", 5)
    assert hilbert_keys(whole, 3).shape[0] == 3  # 12 bits in words of 5
    np.testing.assert_array_equal(_curve(4, 3), whole)


def test_hilbert_order_survives_degenerate_weights():
    """One point of weight, or none finite, or every point equal: still an ordering."""
    X = np.random.default_rng(0).normal(size=(50, 3))
    for log_w in (np.r_[0.0, np.full(49, -np.inf)], np.full(50, -np.inf), None):
        assert sorted(hilbert_order(X, log_w).tolist()) == list(range(50))
    assert sorted(hilbert_order(np.ones((5, 2))).tolist()) == list(range(5))


@pytest.mark.parametrize("adjacent", [False, True])
def test_resampling_along_the_curve_is_systematic(adjacent):
    """Along any fixed order, systematic resampling gives point ``i`` ``floor(N w_i)`` or
    ``ceil(N w_i)`` copies, ``N w_i`` on average (so the draws are unbiased): checked over
    2000 resamplings, within 4.5 standard errors of that average."""
    rng = np.random.default_rng(1)
    X, log_w = rng.normal(size=(40, 3)), rng.normal(size=40)
    w = np.exp(log_w - log_w.max())
    expected = 25 * w / w.sum()
    counts = np.array([np.bincount(resample_indices(log_w, 25, rng, adjacent=adjacent,
                                                    points=X), minlength=40)
                       for _ in range(2000)])
    assert (counts >= np.floor(expected)).all() and (counts <= np.ceil(expected)).all()
    se = np.sqrt(np.maximum(counts.var(axis=0), 1e-12) / len(counts))
    assert (np.abs(counts.mean(axis=0) - expected) <= 4.5 * se + 1e-9).all()
    if adjacent:  # a point's copies next to each other
        idx = resample_indices(log_w, 25, rng, adjacent=True, points=X)
        starts = np.flatnonzero(np.r_[True, idx[1:] != idx[:-1]])
        assert len(starts) == len(set(idx.tolist()))


def _resampling_noise(seed: int, aligned: bool = True) -> float:
    """The variance the resampling adds to the mean of 1000 draws from 2500 weighted points
    (a correlated 4-d Gaussian target, a wider Student-t proposal), along the curve over
    the same in random order; ``aligned=False`` (the broken variant) gives the curve the
    points in a shuffled order, as a caller passing misaligned points would."""
    rng = np.random.default_rng(seed)
    cov = 0.5 * np.eye(4) + 0.5
    Z = 1.15 * rng.standard_t(10, size=(2500, 4))
    X = Z @ np.linalg.cholesky(cov).T
    log_w = (stats.multivariate_normal(np.zeros(4), cov).logpdf(X)
             - stats.t.logpdf(Z / 1.15, 10).sum(axis=1))
    w = np.exp(log_w - log_w.max())
    mean = w @ X / w.sum()
    points = X if aligned else X[rng.permutation(len(X))]

    def noise(**kw):
        return np.mean([(X[resample_indices(log_w, 1000, rng, adjacent=True, **kw)]
                         .mean(axis=0) - mean) ** 2 for _ in range(40)])

    return noise(points=points) / noise()


def test_resampling_along_the_curve_adds_little_noise():
    """Along the curve the draws' mean adds about a tenth of the noise of a random order
    (measured 0.05-0.22): below 0.5 in at least 5 of 6 groups.  Misaligned points, the
    broken variant, add as much as a random order (0.6-1.3) and fail."""
    ratios = [_resampling_noise(seed) for seed in range(6)]
    assert sum(r < 0.5 for r in ratios) >= 5, ratios
    broken = [_resampling_noise(seed, aligned=False) for seed in range(6)]
    assert sum(r < 0.5 for r in broken) < 5, broken


# ------------------------------------------------------- what the resampled draws are worth
#: A 4-d standard Gaussian target seen through a proposal that is narrow on the first
#: coordinate (its tails get the large weights: the weak one) and wide on the others.
_SD = np.array([0.85, 1.5, 1.5, 1.5])


def _pools(seed: int, n: int, size: int = 3000):
    """``n`` independent weighted samples of the target above."""
    rng = np.random.default_rng(seed)
    for _ in range(n):
        X = rng.normal(size=(size, 4)) * _SD
        yield X, (stats.norm.logpdf(X) - stats.norm.logpdf(X, scale=_SD)).sum(axis=1)


def _second_moment(mu: float, sd: float, power: int) -> float:
    """``E_q[w^2 x^p]`` for one coordinate, ``w = N(x; 0, 1) / N(x; mu, sd^2)`` and
    ``q = N(mu, sd^2)``, by quadrature."""
    from scipy import integrate

    def f(x):
        return np.exp(2 * stats.norm.logpdf(x) - stats.norm.logpdf(x, mu, sd)) * x**power

    return integrate.quad(f, -20, 20, points=[0.0])[0]


@pytest.mark.parametrize("broken", [False, True])
def test_coordinate_worth_against_the_asymptotic_variance(broken):
    """The delta method's worth of a weighted mean, per coordinate, on 50 000 draws of a
    product proposal for a standard Gaussian target, against the self-normalised
    estimator's asymptotic variance by quadrature: ``n / (E_q[w_j^2 x_j^2] prod_k!=j
    E_q[w_k^2])``, within 10 %.  Kish's ESS on every coordinate (the broken variant) is
    25 % high on the shifted coordinate and fails."""
    from pymc_kameleon.math.draw_worth import coordinate_worth
    from pymc_kameleon.math.importance import kish_ess

    mu, sd, n = np.array([0.8, 0.0, 0.0, 0.0]), np.array([1.2, 1.3, 1.3, 1.3]), 50_000
    rng = np.random.default_rng(0)
    X = mu + rng.normal(size=(n, 4)) * sd
    log_w = (stats.norm.logpdf(X) - stats.norm.logpdf(X, mu, sd)).sum(axis=1)
    plain = np.array([_second_moment(m, s, 0) for m, s in zip(mu, sd, strict=True)])
    with_x = np.array([_second_moment(m, s, 2) for m, s in zip(mu, sd, strict=True)])
    exact = n / (with_x * np.prod(plain) / plain)
    worth = np.full(4, kish_ess(log_w)) if broken else coordinate_worth(X, log_w)
    close = np.abs(worth / exact - 1) < 0.1
    assert close.all() != broken, (worth, exact)


def test_curve_noise_is_the_resampling_noise_over_offsets():
    """The deterministic average over a grid of offsets matches the variance of the
    resampled mean over 4000 random offsets, per coordinate (within 10 %); along one
    coordinate's sort that coordinate gets next to no noise."""
    from pymc_kameleon.math.draw_worth import curve_noise
    from pymc_kameleon.math.importance import systematic

    X, log_w = next(_pools(0, 1))
    w = np.exp(log_w - log_w.max())
    w /= w.sum()
    mean, var = w @ X, w @ (X - w @ X) ** 2
    order = hilbert_order(X, log_w)
    offsets = np.random.default_rng(1).random(4000)
    means = np.array([X[systematic(w, order, 500, u)].mean(axis=0) for u in offsets])
    mc = np.mean((means - mean) ** 2, axis=0) / var * 500
    assert curve_noise(X, log_w, 500) == pytest.approx(mc, rel=0.1)
    assert curve_noise(X, log_w, 500, np.argsort(X[:, 1]))[1] < 0.01


def _arviz_over_spread(seed: int, resample) -> np.ndarray:
    """ArviZ's bulk ESS of 1000 draws resampled from each of 100 weighted samples, over the
    ESS from the spread of their means: the weak coordinate's ratio, and the mean of the
    three others'."""
    import arviz as az

    rng = np.random.default_rng(seed + 100)
    means, counted = [], []
    for X, log_w in _pools(seed, 100):
        y = X[resample(X, log_w, rng)]
        means.append(y.mean(axis=0))
        counted.append(az.ess(az.convert_to_dataset(y[None]), method="bulk")["x"].values)
    ratio = np.mean(counted, axis=0) * np.var(means, axis=0, ddof=1)
    return np.array([ratio[0], ratio[1:].mean()])


def test_returned_draws_are_worth_about_what_arviz_counts_on_every_coordinate():
    """ArviZ counts the returned draws (shuffled) about once each on every coordinate:
    :func:`resample_draws` caps what a draw is worth on the strong coordinates and keeps
    the weak one's worth, so ArviZ's ESS is within 1.5x of the spread's on the weak
    coordinate and on the others (the mean of the three) in at least 4 of 6 groups
    (measured on 12 groups: 11 within, the others' ratio 0.73-0.96, the weak one's
    0.54-1.23).  The broken variant, every draw along the Hilbert curve (as before the
    cap), counts the strong coordinates' draws at 0.36-0.51 of their worth and fails."""
    from pymc_kameleon.math.draw_worth import resample_draws

    def capped(X, log_w, rng):
        return resample_draws(X, log_w, 1000, rng)

    def curve(X, log_w, rng):
        return resample_indices(log_w, 1000, rng, points=X)

    def within(r):
        return bool(np.all(np.abs(np.log(r)) < np.log(1.5)))

    ratios = [_arviz_over_spread(seed, capped) for seed in range(6)]
    assert sum(within(r) for r in ratios) >= 4, ratios
    broken = [_arviz_over_spread(seed, curve) for seed in range(6)]
    assert sum(within(r) for r in broken) < 4, broken


def test_capped_plan_keeps_every_coordinate_within_the_cap():
    """Where the curve's draws are worth more than the cap on some coordinate, the plan's
    share brings every other coordinate to the cap and leaves the weakest its worth;
    where every coordinate is far richer (a tiny pool's worth per draw is low: nothing to
    cap), no share."""
    from pymc_kameleon.math.draw_worth import WORTH_CAP, capped_plan, draws_worth

    X, log_w = next(_pools(3, 1))
    before = draws_worth(X, log_w, 1000)
    how, share, weak = capped_plan(X, log_w, 1000)
    after = draws_worth(X, log_w, 1000, (how, share))
    assert (how, weak) == ("sorted", 0) and 0 < share < 1000
    assert before.max() > WORTH_CAP and np.delete(after, weak).max() <= WORTH_CAP * 1.01
    assert after[weak] >= 0.95 * before[weak]
    assert capped_plan(X[:600], log_w[:600], 500)[1] == 0


def test_capped_plan_keeps_the_draws_worth_on_their_weakest_coordinate():
    """The share never leaves a coordinate worth less than the weakest along the curve (or
    than 1 where that is more): on five samples with a second, middling coordinate the
    plan keeps every coordinate at that floor.  The cap alone (the smallest share that
    brings every other coordinate to the cap, the broken variant) takes the middling one
    to 0.87-0.89 and breaks it on every sample."""
    from pymc_kameleon.math.draw_worth import WORTH_CAP, capped_plan, draws_worth

    sd = np.array([0.85, 1.0, 1.6, 1.6])
    rng = np.random.default_rng(0)
    kept, broken = [], []
    for _ in range(5):
        X = rng.normal(size=(3000, 4)) * sd
        log_w = (stats.norm.logpdf(X) - stats.norm.logpdf(X, scale=sd)).sum(axis=1)
        floor = min(draws_worth(X, log_w, 1000).min(), 1.0) - 1e-9
        how, share, weak = capped_plan(X, log_w, 1000)
        kept.append(draws_worth(X, log_w, 1000, (how, share)).min() >= floor)
        capped = next(n for n in range(0, 1001, 25)
                      if np.delete(draws_worth(X, log_w, 1000, (how, n)), weak).max()
                      <= WORTH_CAP)
        broken.append(draws_worth(X, log_w, 1000, (how, capped)).min() >= floor)
    assert all(kept) and not any(broken), (kept, broken)
