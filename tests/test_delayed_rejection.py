"""Delayed rejection and the scale mixture of RandomWalkStep.

The acceptance probability against a direct computation, the two-stage kernel's detailed
balance on a grid (and a broken ratio's failure of it), moments through ``pm.sample`` by the
group design of ``tests/checks.py`` (and a broken ratio's failure), and the step's contract:
evaluations counted, stage stats, seeds, the stored value of a likelihood estimator.
"""

import math

import arviz as az
import numpy as np
import pymc as pm
import pytest
from checks import moment_zscores, noisy_model, sample
from scipy import stats

import pymc_kameleon.adaptation.warmup_kernel as walk_module
from pymc_kameleon import RandomWalkStep
from pymc_kameleon.math.delayed_rejection import (
    gaussian_log_density,
    log_one_minus_accept,
    second_stage_log_ratio,
)


# ----------------------------------------------------------------------------- the formula
def _direct_ratio(pi, q1, x, y1, y2):
    """Tierney and Mira's r2 written out with densities (not logs), ``q1(a, b)`` the
    density of proposing ``b`` from ``a``."""
    def a1(a, b):
        return min(1.0, pi(b) * q1(b, a) / (pi(a) * q1(a, b)))

    return (pi(y2) * q1(y2, y1) * (1.0 - a1(y2, y1))) / (pi(x) * q1(x, y1) * (1.0 - a1(x, y1)))


@pytest.mark.parametrize("x, y1, y2", [(0.0, 2.5, 0.4), (0.3, -2.0, 1.2), (0.5, 3.5, 0.2),
                                       (0.2, 4.0, 1.0)])
def test_second_stage_ratio_matches_densities_with_an_asymmetric_first_stage(x, y1, y2):
    """A skewed target and a first stage whose scale and drift depend on the start
    (``q1(a -> b) != q1(b -> a)``), against SciPy's densities multiplied out."""
    target = stats.skewnorm(4.0, loc=-0.5, scale=1.5)

    def q1(a, b):
        return stats.norm(a + 0.3 * np.tanh(a), 1.0 + 0.5 * abs(a)).pdf(b)

    def lq1(a, b):
        return float(np.log(q1(a, b)))

    expected = _direct_ratio(target.pdf, q1, x, y1, y2)
    assert 0.0 < expected < np.inf
    got = second_stage_log_ratio(target.logpdf(x), target.logpdf(y1), target.logpdf(y2),
                                 lq1(y2, y1), lq1(x, y1), lq1(y1, y2), lq1(y1, x))
    assert math.exp(got) == pytest.approx(expected, rel=1e-10)
    # the reverse terms matter: treating q1 as symmetric gives another number
    symmetric = second_stage_log_ratio(target.logpdf(x), target.logpdf(y1),
                                       target.logpdf(y2), lq1(y2, y1), lq1(x, y1))
    assert abs(math.exp(symmetric) / expected - 1.0) > 1e-6


def test_second_stage_ratio_as_the_step_calls_it():
    """The random walk passes only the forward first-stage densities (full Gaussian
    densities, normalising constants included); the reverse ones default to them, so
    ``alpha_1`` holds no proposal density (the defaults were 0 once: ``alpha_1`` then
    carried ``1 / q1``, a bias the moment test below did not see)."""
    rng = np.random.default_rng(4)
    target = stats.multivariate_normal(np.zeros(3), np.diag([1.0, 4.0, 0.25]))
    scale = 1.3
    for _ in range(20):
        x = rng.normal(size=3)
        y1 = x + scale * rng.normal(size=3)
        y2 = x + 0.2 * scale * rng.normal(size=3)
        if target.logpdf(y1) >= target.logpdf(x):
            continue  # the first stage would have accepted

        def q1(a, b):
            return stats.multivariate_normal(a, scale**2 * np.eye(3)).pdf(b)

        expected = _direct_ratio(target.pdf, q1, x, y1, y2)
        got = second_stage_log_ratio(target.logpdf(x), target.logpdf(y1), target.logpdf(y2),
                                     gaussian_log_density(y2, y1, scale),
                                     gaussian_log_density(x, y1, scale))
        assert math.exp(got) == pytest.approx(expected, rel=1e-9)


def test_second_stage_ratio_edge_cases():
    # y2 outside the support; the reverse path accepts y1 for sure; the first stage
    # accepts for sure (no second stage); y1 outside the support (1 - alpha1 = 1 on both)
    assert second_stage_log_ratio(0.0, -3.0, -math.inf, 0.0, 0.0) == -math.inf
    assert second_stage_log_ratio(0.0, -3.0, -4.0, 0.0, 0.0) == -math.inf
    assert second_stage_log_ratio(0.0, 0.5, -0.2, 0.0, 0.0) == -math.inf
    assert second_stage_log_ratio(0.0, -math.inf, -0.2, -1.0, -2.0) == pytest.approx(0.8)
    for r in (-1e-12, -0.3, -0.7, -5.0, -800.0):
        assert log_one_minus_accept(r) == pytest.approx(math.log(1.0 - math.exp(r)), rel=1e-6)
    assert log_one_minus_accept(0.0) == -math.inf and log_one_minus_accept(-math.inf) == 0.0


def test_gaussian_log_density_matches_scipy():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=3), rng.normal(size=3)
    expected = stats.multivariate_normal(a, 0.7**2 * np.eye(3)).logpdf(b)
    assert gaussian_log_density(a, b, 0.7) == pytest.approx(expected, rel=1e-12)


# ----------------------------------------------------------------------------- exactness
def _plain_ratio(logp_x, logp_y1, logp_y2, *args, **kwargs):
    """Broken: the second stage accepted as if it were a first stage."""
    return logp_y2 - logp_x + kwargs.get("log_q2_ratio", 0.0)


def _no_reverse_rejection(logp_x, logp_y1, logp_y2, log_q1_y2_y1, log_q1_x_y1,
                          log_q1_y1_y2=None, log_q1_y1_x=None, log_q2_ratio=0.0):
    """Broken: without the ``1 - alpha1(y2, y1)`` factor of the reverse path."""
    if log_q1_y1_x is None:
        log_q1_y1_x = log_q1_x_y1
    return (logp_y2 - logp_x + log_q1_y2_y1 - log_q1_x_y1 + log_q2_ratio
            - log_one_minus_accept(logp_y1 - logp_x + log_q1_y1_x - log_q1_x_y1))


def _grid_kernel(ratio):
    """The two-stage kernel on a 31-point grid (a discrete state space, where it is exact
    as on the line): a skewed target, a first stage with drift and a start-dependent
    scale and a narrow second stage, both normalised per row (so neither is symmetric)."""
    grid = np.linspace(-4.0, 4.0, 31)
    logpi = stats.skewnorm(3.0).logpdf(grid)

    def rows(scale, drift):
        w = stats.norm.pdf(grid[None, :], grid[:, None] + drift, scale)
        return np.log(w / w.sum(axis=1, keepdims=True))

    lq1 = rows(2.5 * (1.0 + 0.2 * np.tanh(grid))[:, None], 0.4 * np.tanh(grid)[:, None])
    lq2 = rows(0.5, 0.0)
    n = grid.size
    K = np.zeros((n, n))
    for i in range(n):
        for k in range(n):
            if k == i:
                continue
            lr1 = logpi[k] - logpi[i] + lq1[k, i] - lq1[i, k]
            K[i, k] += math.exp(lq1[i, k] + min(0.0, lr1))
            reject = math.exp(lq1[i, k] + log_one_minus_accept(lr1))
            for j in range(n):
                if j != i and reject > 0.0:
                    lr2 = ratio(logpi[i], logpi[k], logpi[j], lq1[j, k], lq1[i, k],
                                lq1[k, j], lq1[k, i], log_q2_ratio=lq2[j, i] - lq2[i, j])
                    K[i, j] += reject * math.exp(lq2[i, j] + min(0.0, lr2))
    K[np.arange(n), np.arange(n)] = 1.0 - K.sum(axis=1)
    return np.exp(logpi) / np.exp(logpi).sum(), K


@pytest.mark.parametrize("ratio, exact", [(second_stage_log_ratio, True),
                                          (_plain_ratio, False),
                                          (_no_reverse_rejection, False)],
                         ids=["tierney-mira", "broken-plain-ratio", "broken-no-reverse-term"])
def test_two_stage_kernel_is_reversible_on_a_grid(ratio, exact):
    """``pi_i K_ij = pi_j K_ji`` to rounding for the Tierney-Mira ratio, so ``pi`` is
    stationary; each broken ratio violates it and moves the stationary distribution."""
    pi, K = _grid_kernel(ratio)
    assert np.all(np.diag(K) >= 0.0)
    flow = pi[:, None] * K
    imbalance = float(np.abs(flow - flow.T).max())
    drift = float(np.abs(pi @ K - pi).max())
    if exact:
        assert imbalance < 1e-15 and drift < 1e-14
    else:
        assert imbalance > 1e-5 and drift > 1e-5


# ----------------------------------------------------------------------------- pm.sample
#: Group design of ``test_delayed_rejection_moments`` (as ``tests/checks.py``): N(0, 1) in
#: 1-d with a first stage too wide for it (scale 4, not adapted, so most first stages are
#: rejected and the second stage, scale 1.6, does much of the work: about half of the second
#: stages move), 10 iterations per draw; each of 4 chains of 6000 draws is a group, passing
#: when both moment z-scores are within 4 (each fails a correct chain with probability
#: 6e-5); at least 3 of 4 must pass: a correct step fails with probability about 2e-8,
#: whatever the seed.
DR_CHAINS, DR_DRAWS, DR_MIN_PASSING = 4, 6000, 3


def _dr_chains_passing(idata) -> list[bool]:
    x = idata.posterior["x"].values
    return [max(abs(z) for z in moment_zscores(chain[None], 0.0, 1.0)) < 4 for chain in x]


def _wide_dr_step():
    return RandomWalkStep(delayed_rejection=0.4, scale=4.0, adapt_scale=False, laplace=False,
                          n_steps=10)


def _standard_normal():
    with pm.Model() as model:
        pm.Normal("x", 0.0, 1.0)
    return model


# slow (both options are opt-in): 240 000 iterations, 15-36 s per run; the grid test
# above is the exactness check that runs in CI
@pytest.mark.slow
@pytest.mark.parametrize("broken", [None, _no_reverse_rejection],
                         ids=["tierney-mira", "broken-no-reverse-term"])
def test_delayed_rejection_moments(broken, monkeypatch):
    """Mean and variance of N(0, 1) per chain; the negative control (the ratio without the
    reverse path's ``1 - alpha1(y2, y1)``, whose stationary variance is 13 % too large at
    these scales, on a 121-point grid) fails the same criterion.  The plain ratio
    ``pi(y2) / pi(x)`` is off too little for this design: the grid test is its control."""
    if broken is not None:
        monkeypatch.setattr(walk_module, "second_stage_log_ratio", broken)
    idata = sample(_standard_normal(), _wide_dr_step, draws=DR_DRAWS, tune=200,
                   chains=DR_CHAINS, seed=0)
    passing = _dr_chains_passing(idata)
    assert float(idata.sample_stats["dr_proposals"].sum()) > 2 * DR_DRAWS * DR_CHAINS
    if broken is not None:
        assert sum(passing) < DR_MIN_PASSING, passing
    else:
        assert sum(passing) >= DR_MIN_PASSING, passing


@pytest.mark.slow
def test_scale_mixture_moments():
    """The mixture of two scales is a symmetric proposal: N(0, 1)'s moments by the same
    group design (adaptation on: the scale adapts on full-size proposals only)."""
    idata = sample(_standard_normal(), lambda: RandomWalkStep(scale_mixture=(0.5, 0.2)),
                   draws=DR_DRAWS, tune=500, chains=DR_CHAINS, seed=0)
    assert sum(_dr_chains_passing(idata)) >= DR_MIN_PASSING
    assert float(idata.sample_stats["dr_proposals"].sum()) == 0


def test_stats_count_both_stages_and_seed_reproduces():
    def run():
        return sample(_standard_normal(), lambda: RandomWalkStep(delayed_rejection=0.2),
                      draws=100, tune=100, chains=2, seed=3)

    idata = run()
    ss = idata.sample_stats
    n_steps, n_evals = ss["n_steps"].values, ss["n_evals"].values
    tried, accepted = ss["dr_proposals"].values, ss["dr_accepted"].values
    # one evaluation per first stage, one per second stage (none at a draw's sync here)
    np.testing.assert_array_equal(n_evals, n_steps + tried)
    assert np.all(accepted <= tried) and accepted.sum() > 0
    # "accepted" counts moves at either stage: at least the second stage's
    assert np.all(ss["accepted"].values * n_steps >= accepted - 1e-9)
    np.testing.assert_array_equal(idata.posterior["x"].values, run().posterior["x"].values)
    plain = sample(_standard_normal(), RandomWalkStep, draws=20, tune=20, chains=1, seed=3)
    assert int(plain.sample_stats["dr_proposals"].sum()) == 0


def test_noisy_estimator_keeps_stored_value(monkeypatch):
    """With a likelihood estimator (every call a fresh estimate) the second stage weighs
    the estimate made at the first stage, not a new one, and the current point's stored
    estimate, made when the chain moved there; ``model_logp`` changes only on a move."""
    calls, seen = [], []

    def counting(logp):
        def wrapped(x):
            value = float(logp(x))
            calls.append(value)
            return value
        return wrapped

    def recording(logp_x, logp_y1, logp_y2, *args, **kwargs):
        # y1's estimate is the one before y2's: nothing was estimated in between
        assert (logp_y1, logp_y2) == (calls[-2], calls[-1])
        assert logp_x in calls[:-2]  # made earlier, when the chain got there
        seen.append(logp_x)
        return second_stage_log_ratio(logp_x, logp_y1, logp_y2, *args, **kwargs)

    monkeypatch.setattr(walk_module, "second_stage_log_ratio", recording)
    idata = sample(noisy_model(0.5),
                   lambda: RandomWalkStep(delayed_rejection=0.2, logp_wrapper=counting),
                   draws=200, tune=200, chains=1, seed=1)
    ss = idata.sample_stats
    assert len(seen) >= int(ss["dr_proposals"].sum()) > 50  # sample_stats: tuning dropped
    lp, moved = ss["lp"].values[0], ss["accepted"].values[0] > 0
    assert np.all(lp[1:][~moved[1:]] == lp[:-1][~moved[1:]])
    assert float(az.ess(idata.posterior["mu"].values)) > 20


def test_bad_arguments():
    with pytest.raises(ValueError, match="delayed_rejection"):
        with _standard_normal():
            RandomWalkStep(delayed_rejection=1.5)
    with pytest.raises(ValueError, match="not both"):
        with _standard_normal():
            RandomWalkStep(delayed_rejection=0.2, scale_mixture=(0.5, 0.2))
    with pytest.raises(ValueError, match="probability"):
        with _standard_normal():
            RandomWalkStep(scale_mixture=(1.0, 0.2))
