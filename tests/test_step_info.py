"""The public seam of the steps: the per-iteration ``StepInfo`` (``callback``, ``last_info``)
and the ``logp_wrapper`` around the compiled log density."""

from __future__ import annotations

import numpy as np
import pytest
from checks import SAMPLERS, noisy_model, sample

from pymc_kameleon import RandomWalkStep, StepInfo

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(params=list(SAMPLERS), scope="module")
def sampler(request):
    return SAMPLERS[request.param]


def _run(model, factory, **kwargs):
    return sample(model, factory, draws=60, tune=120, chains=1, seed=4,
                  discard_tuned_samples=False, **kwargs)


def test_callback_sees_every_iteration_and_agrees_with_the_stats(gauss, sampler):
    infos: list[StepInfo] = []
    steps = []

    def factory():
        steps.append(sampler(callback=infos.append, warmup_draws=40))
        return steps[0]

    idata = _run(gauss, factory)
    stats = {k: np.concatenate([idata.warmup_sample_stats[k].values[0],
                                idata.sample_stats[k].values[0]])
             for k in ("n_steps", "n_evals", "accepted")}
    stats["tune"] = np.arange(stats["n_steps"].size) < 120  # tune=120 (PyMC drops the stat)
    assert len(infos) == stats["n_steps"].sum()
    ends = np.cumsum(stats["n_steps"])
    per_draw = np.split(np.array([i.n_evals for i in infos]), ends[:-1])
    # the first draw's n_evals also counts the chain's start
    assert [int(e.sum()) for e in per_draw[1:]] == list(stats["n_evals"][1:])
    moved = np.split(np.array([i.accepted for i in infos]), ends[:-1])
    np.testing.assert_allclose([m.mean() for m in moved], stats["accepted"])
    assert [i.tune for i in infos] == list(np.repeat(stats["tune"], stats["n_steps"]))
    phases = [i.phase for i in infos]
    if sampler.cls is RandomWalkStep:
        assert set(phases) == {"warmup"}
    else:  # the warm-up hands over once, to the sampler's kernel
        k = phases.index("kernel")
        assert set(phases[:k]) == {"warmup"} and set(phases[k:]) == {"kernel"}
    posterior = idata.posterior["x"].values[0]
    np.testing.assert_array_equal(infos[-1].position, posterior[-1])
    last = steps[0].last_info
    for name in ("accept_prob", "accepted", "n_evals", "phase", "tune", "probe"):
        assert getattr(last, name) == getattr(infos[-1], name)
    np.testing.assert_array_equal(last.position, infos[-1].position)
    logp = gauss.compile_logp()
    for info in infos[-20:]:
        if info.proposal is not None:
            value = logp({"x": info.proposal})
            assert info.logp_proposal == pytest.approx(value, rel=1e-9, abs=1e-9)
        if info.accepted:
            np.testing.assert_array_equal(info.position, info.proposal)


def test_seam_changes_no_draw(gauss, sampler):
    plain = _run(gauss, sampler)
    wrapped = _run(gauss, lambda: sampler(callback=lambda info: None,
                                          logp_wrapper=lambda f: lambda x: f(x)))
    np.testing.assert_array_equal(plain.posterior["x"].values, wrapped.posterior["x"].values)


def test_no_probe_after_stop_tuning():
    """A noisy density's warm-up re-proposes the current point now and then while tuning
    (its acceptance measures the noise); after tuning the chain never re-evaluates it."""
    infos: list[StepInfo] = []
    _run(noisy_model(0.5), lambda: RandomWalkStep(callback=infos.append))
    probes = [i for i in infos if i.probe]
    assert probes and all(i.tune for i in probes)
    previous = [None, *(i.position for i in infos[:-1])]
    for before, info in zip(previous, infos, strict=True):
        if before is not None and not info.tune:
            assert not np.array_equal(info.proposal, before)


def test_logp_wrapper_counts_and_injects_faults(gauss):
    calls = []

    def counted(logp):
        def wrapped(x):
            calls.append(x.copy())
            return np.nan if len(calls) > 50 and len(calls) % 10 == 0 else logp(x)
        return wrapped

    idata = _run(gauss, lambda: RandomWalkStep(laplace=False, logp_wrapper=counted))
    n_evals = int(idata.warmup_sample_stats["n_evals"].sum() + idata.sample_stats["n_evals"].sum())
    assert len(calls) == n_evals
    n_nan = int(idata.warmup_sample_stats["n_nan"].sum() + idata.sample_stats["n_nan"].sum())
    assert n_nan == (n_evals - 50) // 10 + (50 // 10 - 5)  # each injected NaN, counted


def test_last_info_is_none_before_the_first_iteration(gauss):
    with gauss:
        assert RandomWalkStep().last_info is None


@pytest.mark.parametrize("cores", [1, 2])
def test_each_chains_total_evaluations_survive_discarded_tuning(gauss, cores):
    """``n_evals_total`` of a chain's last draw is every evaluation the chain spent (its
    start, the Laplace search, tuning): the per-draw counts summed over the tuning and the
    posterior draws, which ``discard_tuned_samples`` would drop."""
    kept = sample(gauss, lambda: RandomWalkStep(), draws=40, tune=80, chains=2, cores=cores,
                  seed=6, discard_tuned_samples=False)
    per_draw = np.concatenate([kept.warmup_sample_stats["n_evals"].values,
                               kept.sample_stats["n_evals"].values], axis=1)
    total = kept.sample_stats["n_evals_total"].values
    np.testing.assert_array_equal(total[:, -1], per_draw.sum(axis=1))
    np.testing.assert_array_equal(total, np.cumsum(per_draw, axis=1)[:, 80:])
    assert per_draw[:, 0].min() > per_draw[:, 1].max()  # the start's search is in it
    dropped = sample(gauss, lambda: RandomWalkStep(), draws=40, tune=80, chains=2,
                     cores=cores, seed=6)
    np.testing.assert_array_equal(dropped.sample_stats["n_evals_total"].values[:, -1],
                                  total[:, -1])


def test_laplace_budget_caps_the_start(gauss):
    """``laplace_max_evals`` caps every evaluation of the Laplace start (prior draws,
    searches, Hessians, checks): a budget below what it spends stops it with a warning, and
    the chain starts from its own start (no Laplace mode)."""
    def first_draw(**kwargs):
        idata = _run(gauss, lambda: RandomWalkStep(laplace=True, **kwargs))
        stats = idata.warmup_sample_stats
        return int(stats["n_evals"].values[0, 0]), int(stats["laplace_start"].values[0, 0])

    free, _ = first_draw()
    assert free > 150  # the prior draws alone are 200
    with pytest.warns(UserWarning, match="ran out of its laplace_max_evals=100"):
        capped, kept = first_draw(laplace_max_evals=100)
    n_steps = max(5, 2)
    assert kept == -1 and capped <= 100 + 10 + n_steps  # the start's own checks: at most 10
