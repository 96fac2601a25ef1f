"""Smoke tests of the benchmark scripts on tiny budgets: the synthetic targets, the
log-density backend, the cost per step, the suite's variant, cost and comparison tables,
and the bound on the work per draw."""

from __future__ import annotations

import json

import numpy as np
import pytest

from benchmarks import cost_per_step, logp_backend, synthetic
from benchmarks.common import SAMPLERS


def test_synthetic_quick_mode_writes_table_and_plots(tmp_path):
    """``python -m benchmarks.synthetic --quick`` on a tiny budget (2-d, 60 + 60 iterations)."""
    synthetic.main(["--target", "banana-strong", "--quick", "--dim", "2", "--chains", "1",
                    "--tune", "60", "--draws", "60", "--out", str(tmp_path)])
    data = json.loads((tmp_path / "banana-strong.json").read_text())
    results = data["chains"]
    assert sorted(r["sampler"] for r in results) == sorted(SAMPLERS)
    for r in results:
        assert r["draws"] == 60 and r["wall"] > 0 and r["evals"] > 0
        assert r["ess"] > 0 and 0 <= r["coverage"] <= 1
    by_key = {r["sampler"]: r for r in results}
    # honest counts: ours 5 per draw at d = 2 (the default's floor; plus the start and the
    # Laplace start, about 40 evaluations, the 50 of its check and the 200 prior draws of
    # its mass check over 120 draws), 2 per coordinate for Metropolis
    assert 7.0 < by_key["fkamh"]["evals_per_iteration"] < 8.0
    assert by_key["metropolis"]["evals_per_iteration"] == pytest.approx(4.0, abs=0.05)
    assert by_key["demz"]["evals_per_iteration"] == pytest.approx(2.0, abs=0.05)

    table = (tmp_path / "banana-strong.md").read_text()
    assert "2-d banana B(0.1, 100)" in table
    for spec in SAMPLERS.values():
        assert f"| {spec.label}" in table
    for name in ("banana-strong_metrics.png", "banana-strong_traces.png"):
        png = (tmp_path / name).read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_cli_rejects_unknown_sampler(tmp_path, capsys):
    with pytest.raises(SystemExit):
        synthetic.main(["--target", "flower", "--samplers", "nope", "--out", str(tmp_path)])
    assert "unknown samplers" in capsys.readouterr().err


@pytest.mark.parametrize("model", ["banana8", "gpc"])
def test_logp_backend_measures_a_model(model):
    """``python -m benchmarks.logp_backend`` measures in worker processes; one measurement
    in-process here (the Python VM: no compiler needed)."""
    out = logp_backend.measure(model, "FAST_COMPILE", calls=200)
    assert out["compile"] > 0 and out["first_call"] > 0 and out["per_call_us"] > 0
    assert out["dim"] == {"banana8": 8, "gpc": 5}[model]


def test_logp_backend_break_even_lines():
    def warm(start, per_call):
        return {"compile": start, "first_call": 0.0, "per_call_us": per_call}

    rows = [("hier10", "NUMBA", {}, warm(1.0, 2.0)), ("hier10", "CVM", {}, warm(0.5, 4.0)),
            ("banana8", "NUMBA", {}, warm(1.0, 3.0)), ("banana8", "CVM", {}, warm(0.5, 2.0))]
    lines = logp_backend._break_even(rows)  # the report's sentences from known timings
    assert "Numba is ahead after 250,000 calls" in lines[0]
    assert "CVM is ahead at any number of calls" in lines[1]


def test_cost_per_step_end_to_end_for_several_dimensions_and_some_steps(tmp_path):
    out = tmp_path / "cost.md"
    paired = "## Paired comparison: the working tree (A) against `HEAD` (B)\n\n| x |\n"
    out.write_text("# old table\n\n## d = 2\n\nold\n\n" + paired)
    cost_per_step.main(["--dims", "", "--out", str(out), "--sample-dim", "2,3",
                        "--sample-budget", "30,20", "--sample-repeats", "1",
                        "--sample-steps", "RandomWalkStep,pm.DEMetropolisZ"])
    text = out.read_text()
    assert "## d = " not in text  # no per-iteration part
    assert "## pm.sample end to end, d = 2" in text and "## pm.sample end to end, d = 3" in text
    assert text.count("| RandomWalkStep | ") == 2 and text.count("| pm.DEMetropolisZ | ") == 2
    assert "KameleonStep" not in text and "| 1.00 |" in text
    assert "--dims '' --iters" in text and "--sample-steps RandomWalkStep" in text
    assert "old" not in text and text.endswith("\n" + paired)  # the paired section is kept
    with pytest.raises(SystemExit):
        cost_per_step.main(["--dims", "", "--sample-steps", "Kameleon"])


def test_cost_per_step_writes_a_table_per_dimension(tmp_path):
    out = tmp_path / "cost.md"
    cost_per_step.main(["--dims", "2", "--iters", "20", "--out", str(out),
                        "--sample-dim", "2", "--sample-budget", "30,20",
                        "--sample-repeats", "1"])
    text = out.read_text()
    assert "## d = 2" in text
    assert "## pm.sample end to end, d = 2" in text
    assert "| pm.DEMetropolisZ | " in text and text.rstrip().endswith("|")
    for label in ("KameleonStep", "FastKameleonStep", "KernelHMCStep", "RandomWalkStep",
                  "pm.Metropolis", "pm.DEMetropolisZ", "pm.Slice"):
        assert f"| {label}" in text, label


def test_compare_variants_takes_factories_and_suite_samplers(capsys):
    """A step factory and a suite sampler by name side by side, wall time in every cell."""
    from benchmarks.suite.variants import compare_variants
    from pymc_kameleon import RandomWalkStep

    totals = compare_variants(["censored"], [1],
                              {"rw, 3 per draw": lambda: RandomWalkStep(n_steps=3),
                               "pm.Metropolis": "metropolis"}, tune=30, draws=30, chains=1)
    assert set(totals) == {"rw, 3 per draw", "pm.Metropolis"}
    assert all(v > 0 for v in totals.values())
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("| censored | 1 |"))
    cells = [c.strip() for c in row.split("|")[3:-1]]
    assert len(cells) == 2 and "error" not in row
    for cell in cells:  # "ESS, per 1k (R-hat) wall criteria"
        wall = float(cell.split(")")[1].split()[0])
        assert wall > 0
    assert "runs meeting all four criteria" in out


def test_spread_table_pools_every_chain_over_the_seeds(capsys):
    """The spread ESS per run of ``chains`` chains is ``chains`` times the reference
    variance over the variance of every chain's mean, pooled over the seeds."""
    from benchmarks.suite.metrics import spread_ess
    from benchmarks.suite.reference import load_reference
    from benchmarks.suite.runner import RunResult
    from benchmarks.suite.variants import print_spread

    assert np.isnan(spread_ess(np.zeros((1, 2)), np.ones(2))).all()
    sd = load_reference("censored").sd
    rng = np.random.default_rng(0)
    means = [rng.normal(size=(2, sd.size)) * sd for _ in range(3)]  # 3 seeds, 2 chains
    runs = [RunResult("censored", "x", 10, 10, 2, seed, evals=2000, chain_means=m.tolist())
            for seed, m in enumerate(means)]
    print_spread({("censored", "x"): runs, ("censored", "empty"): []}, chains=2,
                 ref_sds={"censored": sd})
    row = next(line for line in capsys.readouterr().out.splitlines()
               if line.startswith("| censored | x |"))
    ess = 2 * sd**2 / np.concatenate(means).var(axis=0, ddof=1)
    assert row.split("|")[3].strip() == "6"
    assert row.split("|")[4].strip() == f"{ess.min():.0f}, {np.median(ess):.0f}"
    assert row.split("|")[5].strip() == f"{ess.min() / 2:.1f}"


def test_cost_table_reads_suite_and_local_scale_files(tmp_path):
    """``python -m benchmarks.suite.cost``: both file formats, medians and ranges over
    seeds, failed runs skipped, the later file wins for the same (model, sampler, seed),
    and runs of different budgets are refused."""
    from benchmarks.suite import cost

    def run(sampler, seed, ess, ok=True, wall=10.0):
        return {"model": "pk", "sampler": sampler, "seed": seed, "evals": 1000 * ess,
                "wall": wall, "ess_per_1k_evals": ess, "accuracy": {"all_ok": ok},
                "tune": 1000, "draws": 1000, "chains": 4}

    suite = tmp_path / "suite.json"
    suite.write_text(json.dumps({"runs": [
        run("kamh", 1, 10.0), run("kamh", 2, 30.0, ok=False), run("rw", 1, 99.0),
        {"model": "pk", "sampler": "slice", "seed": 1, "error": "timeout", "accuracy": None}]}))
    lines = tmp_path / "local.jsonl"
    lines.write_text("\n".join(json.dumps(r) for r in (
        run("local-scale: default", 1, 5.0, wall=4.0), run("local-scale: dr0.2", 1, 1.0))))
    table = cost.rows(cost.load_runs([str(suite), str(lines)]))
    assert table[2:] == [
        "| pk | KameleonStep | 1,2 | 1 of 2 | 20.0 [10.0, 30.0] | 20k | 10 [10, 10] |",
        "| pk | RandomWalkStep | 1 | 1 of 1 | 5.0 | 5k | 4 |",
    ]
    quick = tmp_path / "quick.json"
    quick.write_text(json.dumps({"runs": [{**run("kamh", 3, 1.0), "draws": 200}]}))
    with pytest.raises(ValueError, match="different budgets"):
        cost.load_runs([str(suite), str(quick)])


def test_compare_table_counts_runs_and_lists_the_lost_ones(tmp_path):
    """``python -m benchmarks.suite.compare``: before -> after per seed, errors count
    as misses, runs only in one version are left out, looser tolerances re-judge the
    recorded worst errors, and a run passing before and missing after is listed."""
    from benchmarks.suite import compare

    def run(sampler, seed, rhat=1.0, ess=900.0, mean=0.05, sd=1.02, error=None):
        acc = None if error else {"max_rhat": rhat, "min_ess_bulk": ess, "mean_err": mean,
                                  "sd_ratio": sd}
        return {"model": "pk", "sampler": sampler, "seed": seed, "tune": 1000, "draws": 1000,
                "chains": 4, "accuracy": acc, "error": error}

    before, after = tmp_path / "before.json", tmp_path / "after.json"
    before.write_text(json.dumps({"runs": [
        run("rw", 1), run("rw", 2, rhat=1.2, ess=30), run("kamh", 1, mean=0.12),
        run("kamh", 2), run("khmc", 1)]}))
    after.write_text(json.dumps({"runs": [
        run("rw", 1, sd=0.8), run("rw", 2), run("kamh", 1), run("kamh", 2, error="timeout")]}))
    lines = compare.report(compare.load([str(before)]), compare.load([str(after)]))
    assert lines[:3] == ["| model | KameleonStep | RandomWalkStep |", "|---|---|---|",
                         "| pk | M → ok; ok → error | ok → S; RE → ok |"]
    assert "| all | 4 | 2 | 2 | 2 |" in lines
    assert lines[-2:] == ["- pk, KameleonStep, seed 2: error",
                          "- pk, RandomWalkStep, seed 1: S"]
    loose = compare.report(compare.load([str(before)]), compare.load([str(after)]),
                           mean_tol=0.15, sd_tol=0.25)
    assert loose[2] == "| pk | ok → ok; ok → error | ok → ok; RE → ok |"
    assert loose[-1] == "- pk, KameleonStep, seed 2: error"


def test_cost_per_step_paired_mode_against_head(tmp_path):
    """``--against HEAD``: one pair of fresh processes (the working tree's package, HEAD's
    exported), two tiny rounds; its section replaces the old one and keeps the rest."""
    out = tmp_path / "cost.md"
    out.write_text("# Cost\n\n## d = 2\n\nkept\n\n## Paired comparison: old\n\nold\n")
    cost_per_step.main(["--against", "HEAD", "--pairs", "1", "--rounds", "2",
                        "--block-ms", "0.5", "--out", str(out)])
    text = out.read_text()
    assert text.startswith("# Cost\n\n## d = 2\n\nkept\n\n## Paired comparison: the working")
    assert "old" not in text and text.count("## Paired comparison") == 1
    for label in ("KameleonStep", "FastKameleonStep", "KernelHMCStep", "RandomWalkStep"):
        for phase in cost_per_step.PAIRED_PHASES:
            assert f"| {label} | {phase} | " in text
    assert text.count(" | 1 x 2 |") == 8


def test_paired_ratio_is_the_median_of_the_blocks_ratios():
    a = np.array([[1.0, 2.0, 3.0], [2.0, 2.0, 2.0]])
    med, low, high = cost_per_step.paired_ratio(a, np.full_like(a, 2.0))
    assert med == 1.0 and low <= med <= high
    med, low, high = cost_per_step.paired_ratio(a[:1], np.ones((1, 3)))
    assert med == 2.0 and np.isnan(low) and np.isnan(high)


def test_work_cap_sets_the_bound_inside_the_block_only(tmp_path, capsys):
    """Inside ``work_cap(8)`` the schedule bounds the factor at 8 and ``final`` records it;
    afterwards the default (4) and the classmethod are back.  ``--report`` counts a run that
    meets the issue's tolerances (not the suite's) as passing."""
    from benchmarks.work_cap import main, work_cap
    from pymc_kameleon.adaptation.work import WorkPerDraw

    chosen: list = []
    with work_cap(8.0, chosen):
        work = WorkPerDraw.schedule(1000, 500, 4.0)  # as a step calls it: its own bound
        assert work.max_factor == 8.0
        for draw in range(work.start, work.decide):
            work.update(draw, np.array([1.0, float(draw % 5)]))  # one coordinate stuck
        assert work.final(None) == 8.0  # as a step calls it: a target or None
    assert chosen == [(8.0, np.inf)]
    with work_cap(8.0, chosen, force=True):  # a chain that reads a short time takes 8
        work = WorkPerDraw.schedule(1000, 500, 4.0)
        for draw in range(work.start, work.decide):
            work.update(draw, np.array([np.sin(draw), np.cos(3.0 * draw)]))
        assert work.final(None) == 8.0 and chosen[-1][1] < 2.0
    assert WorkPerDraw.schedule(1000, 500).max_factor == 4.0
    assert isinstance(WorkPerDraw.__dict__["schedule"], classmethod)
    acc = {"max_rhat": 1.005, "min_ess_bulk": 500.0, "mean_err": 0.12, "sd_ratio": 0.95,
           "worst_mean": "rho", "worst_sd": "alpha"}
    run = {"sampler": "rw", "cap": 16.0, "tune": 1000, "seed": 1, "accuracy": acc,
           "evals": 1000, "ess_per_1k_evals": 500.0, "factors": [16.0], "error": None}
    path = tmp_path / "runs.json"
    path.write_text(json.dumps({"runs": [run]}))
    main(["--report", str(path)])
    out = capsys.readouterr().out
    assert "| rw | 16 | 1000 | 1 | M / ✓ |" in out and "1 of 1 (1)" in out
    path.write_text(json.dumps({"runs": [run | {"forced": True}]}))
    main(["--report", str(path)])
    assert "| rw | 16 (forced) | 1000 | 1 |" in capsys.readouterr().out


def test_work_cap_window_reading_reads_long_times_short():
    """The default window reads an AR(1) of time 399 as tens of draws, not hundreds."""
    from benchmarks.work_cap import window_reading

    header, _, row = window_reading((0.995,), seeds=3)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert header.startswith("| AR(1)") and cells[:2] == ["0.995", "399"]
    assert 1.0 < float(cells[3]) < 60.0  # the median reading


def test_work_cap_escalation_reaches_further_than_one_window():
    """On a chain whose time is 399 draws, four escalating windows of 100 draws reach a
    larger median factor than one window of 200 (which reads about 12, factor 4); on a
    chain whose time is 3 the median stays 1."""
    from benchmarks.work_cap import escalation

    def medians(lines):
        return [float(line.split("|")[4]) for line in lines[2:]]

    one = medians(escalation(1, 200, rhos=(0.5, 0.995), seeds=9))
    four = medians(escalation(4, 100, rhos=(0.5, 0.995), seeds=9))
    assert one[0] == four[0] == 1.0
    assert one[1] < 6.0 < 16.0 < four[1]


def test_step_emulator_variants_and_settings():
    """``benchmarks.research.step_emulator``: ``--settings`` replaces fields of the steps'
    default settings, ``--moves`` of the moves; each step runs with the emulator, and
    without it on request."""
    from benchmarks.research import step_emulator

    moves = step_emulator.moves("defensive_weight=0.2,defensive_df=5.0")
    default = step_emulator.moves("")
    assert moves.settings.defensive_weight == 0.2 and moves.settings.defensive_df == 5.0
    assert moves.settings.search_starts == default.settings.search_starts == 4
    delayed = step_emulator.moves("", "delayed=True,weight=0.9")
    assert delayed.delayed and delayed.weight == 0.9
    assert delayed.settings == default.settings
    assert list(step_emulator.variants(["kamh"], default)) == ["KameleonStep, emulator"]
    assert list(step_emulator.variants(["rw"], default, with_plain=True)) == [
        "RandomWalkStep", "RandomWalkStep, emulator"]


def test_returned_worth_table_interval_and_ratio():
    """``benchmarks.research.returned_worth``: the spread ESS is the reference variance over
    the variance of the chain means, its 90 % interval the chi-square's on ``n - 1``
    degrees of freedom, and the ratio's interval the spread's inverted; ArviZ's ESS of iid
    chains is about their length and of chains of adjacent pairs about half."""
    from benchmarks.research.returned_worth import arviz_ess_per_chain, worth_table

    rng = np.random.default_rng(3)
    iid = rng.normal(size=(4, 800, 1))
    pairs = np.repeat(rng.normal(size=(4, 400, 1)), 2, axis=1)
    assert 650 < arviz_ess_per_chain(iid).mean() < 950
    assert 280 < arviz_ess_per_chain(pairs).mean() < 480
    means = np.array([[-1.0], [0.0], [1.0], [2.0]])  # variance 5 / 3
    [row] = worth_table(means, np.full((4, 1), 0.6), np.zeros(1), np.ones(1))
    assert row["spread"] == pytest.approx(0.6) and row["ratio"] == pytest.approx(1.0)
    lo, hi = row["spread_interval"]
    assert lo == pytest.approx(0.6 * 0.3518 / 3, rel=1e-3)  # chi2_3 at 0.05 and 0.95
    assert hi == pytest.approx(0.6 * 7.8147 / 3, rel=1e-3)
    assert row["ratio_interval"] == pytest.approx((0.6 / hi, 0.6 / lo))
    assert row["error_ess"] == pytest.approx(1 / 1.5)  # mean of squares (1 + 0 + 1 + 4) / 4
    assert np.isnan(row["mean_ratio"])
    [row] = worth_table(means, np.full((4, 1), 0.6), np.zeros(1), np.ones(1),
                        arviz_mean_ess=np.full((4, 1), 0.3))
    assert row["mean_ratio"] == pytest.approx(0.5)


def test_returned_worth_pool_stats_and_recorder():
    """The delta method's ESS of a weighted mean is the points' number under equal weights
    and Kish's where the weights do not depend on the point's value; the recorder sees the
    pool a chain resamples its returned draws from and restores the functions it wraps."""
    from benchmarks.research.returned_worth import PoolRecorder, pool_stats
    from pymc_kameleon.math.importance import kish_ess
    from pymc_kameleon.particles import recycling
    from pymc_kameleon.smc import emulated

    rng = np.random.default_rng(5)
    X = rng.normal(size=(4000, 2))
    assert pool_stats(X, np.zeros(4000))["ess"] == pytest.approx([4000, 4000])
    log_w = rng.normal(scale=0.5, size=4000)
    assert pool_stats(X, log_w)["ess"] == pytest.approx([kish_ess(log_w)] * 2, rel=0.1)
    log_w = 0.3 * X.sum(axis=1)  # draws of N(0, I) weighed towards N(0.3, I)
    original = recycling.resample_draws, emulated.resample_draws
    with PoolRecorder() as rec:
        idx = recycling.resample_draws(X, log_w, 100, rng)
    assert (recycling.resample_draws, emulated.resample_draws) == original
    [record] = rec.records
    assert len(idx) == record["size"] == 100
    assert {k: record[k] for k in ("mean", "var", "ess")} == pool_stats(X, log_w)
    assert np.allclose(record["mean"], 0.3, atol=0.05)


def test_fallback_worth_resampling_and_keeper():
    """``benchmarks.research.fallback_worth``: multinomial resampling keeps a point's copies
    together with counts that follow the weights; the keeper sees the pool the draws come
    from, after ``rounds`` importance rounds of ``draws`` points each, and restores what it
    wraps."""
    from benchmarks.research.fallback_worth import PoolKeeper, multinomial_adjacent
    from pymc_kameleon.math.mixture import GaussianMixture
    from pymc_kameleon.math.whitening import AffineMap
    from pymc_kameleon.particles import recycling
    from pymc_kameleon.smc import emulated

    rng = np.random.default_rng(3)
    log_w = np.log([0.5, 0.3, 0.2])
    counts = np.zeros(3)
    for _ in range(200):
        idx = multinomial_adjacent(log_w, 50, rng)
        starts = np.flatnonzero(np.r_[True, idx[1:] != idx[:-1]])
        assert len(starts) == len(np.unique(idx))  # each point's copies in one run
        counts += np.bincount(idx, minlength=3)
    assert counts / counts.sum() == pytest.approx([0.5, 0.3, 0.2], abs=0.02)

    X = rng.normal(size=(2000, 2))
    pool = recycling.RecycledPool()
    pool.new_stage(AffineMap.identity(2), GaussianMixture(np.ones(1), np.zeros((1, 2)),
                                                          np.eye(2)[None]))

    def evaluate(Y):
        return -0.5 * (Y**2).sum(axis=1), 0.3 * Y.sum(axis=1)

    pool.add(X, *evaluate(X))
    original = recycling.resample_draws, emulated.recycle
    with PoolKeeper(rounds=1) as keeper:
        out = emulated.recycle(pool, None, 0, 200, 100, evaluate, rng, lambda Y: Y, None,
                               target_ess=1.0)
    assert (recycling.resample_draws, emulated.recycle) == original
    [(points, weights)] = keeper.pools
    assert len(points) == len(weights) == pool.size == 2200 and len(pool.stages) == 2
    assert len(out.X) == 100 and np.allclose(out.X.mean(axis=0), 0.3, atol=0.35)  # 3.5 sd


def _weighted_pool(seed: int, weak: bool):
    """3000 points of a 4-d standard Gaussian target with their log weights: every
    coordinate drawn from the target but the first, drawn from ``N(0, 0.8^2)`` where
    ``weak`` (its tails get the large weights); otherwise the weights are ``N(0, 0.4^2)``
    noise (worth the same on every coordinate)."""
    from scipy import stats

    rng = np.random.default_rng(seed)
    X = rng.normal(size=(3000, 4))
    if weak:
        X[:, 0] *= 0.8
        log_w = stats.norm.logpdf(X[:, 0]) - stats.norm.logpdf(X[:, 0], scale=0.8)
    else:
        log_w = rng.normal(scale=0.4, size=3000)
    return X, log_w, rng


@pytest.mark.parametrize("weak", [True, False])
def test_fallback_worth_resamples_evenly(weak):
    """``resample_evenly``: 1000 draws from a sample worth about 2.5 times as many.  Where
    one coordinate is worth much less (``weak``) they are resampled along it, so that it
    keeps its worth (noise below 0.1 of a draw's variance per draw) and the others give up
    some of theirs (noise above 0.2); where every coordinate is worth the same, along the
    curve (below 0.4 on each; a random order's is about 1).  Each in at least 5 of 6
    groups.  The broken variants fail: always along the curve (about 0.05 on the strong
    coordinates) or always along the weakest coordinate (about 0.8 on the others)."""
    from benchmarks.research.fallback_worth import SCHEMES, pool_stats, resample_evenly
    from pymc_kameleon.math.importance import resample_indices

    def noise(seed, how=resample_evenly):
        X, log_w, rng = _weighted_pool(seed, weak)
        w = np.exp(log_w - log_w.max())
        mean, var = w @ X / w.sum(), (w @ X**2 / w.sum()) - (w @ X / w.sum()) ** 2
        return np.mean([(X[how(X, log_w, 1000, rng)].mean(axis=0) - mean) ** 2
                        for _ in range(20)], axis=0) / var * 1000

    def passes(noise):
        if weak:
            return bool(noise[0] < 0.1 and np.all(noise[1:] > 0.2))
        return bool(np.all(noise < 0.4))

    def along_weakest(X, log_w, size, rng):
        key = X[:, np.argmin(pool_stats(X, log_w)["ess"])]
        order = np.argsort(key)
        return order[resample_indices(log_w[order], size, rng)]

    assert sum(passes(noise(seed)) for seed in range(6)) >= 5
    broken = SCHEMES["curve"] if weak else along_weakest
    assert sum(passes(noise(seed, broken)) for seed in range(6)) < 5


def test_handover_timer_times_a_restart_and_leaves_the_run_alone():
    """``benchmarks.research.handover_cost``: on a run whose correction fails once (a Kish
    bound no sample meets), one record with the sizes, the cost on every point and the
    resumed rounds' costs; the run's draws are those of an untimed run, and the engine's
    methods are restored."""
    from scipy import stats

    from benchmarks.research.handover_cost import HandoverTimer
    from pymc_kameleon.emulator import EmulatorProblem, EmulatorRun, EmulatorSettings, engine

    def run_to_end():
        rng = np.random.default_rng(4)
        prior = stats.multivariate_normal(np.zeros(2), 100 * np.eye(2))
        lik = stats.multivariate_normal([1.0, -0.5], [[1.0, 0.8], [0.8, 1.0]])
        problem = EmulatorProblem(prior.logpdf, lambda X: (prior.logpdf(X), lik.logpdf(X)),
                                  lambda n: rng.normal(0, 10, size=(n, 2)), 2)
        run = EmulatorRun(problem, EmulatorSettings(min_ess=100.0, max_extra_rounds=0,
                                                    max_restarts=1), 400, rng)
        while run.phase not in ("done", "fallback"):
            run.step()
        return run

    saved = (engine.EmulatorRun._resume_design, engine.EmulatorRun._fit)
    with HandoverTimer(rounds=2, verbose=False) as timer:
        timed = run_to_end()
    assert (engine.EmulatorRun._resume_design, engine.EmulatorRun._fit) == saved
    [record] = timer.records
    assert record["pool"] == 6 * 84 and record["handed"] == 60 and len(record["after"]) == 2
    assert min(record["all_fit"], record["all_temper"], *record["after"]) >= 0.0
    untimed = run_to_end()
    assert timed.phase == untimed.phase == "fallback"
    assert np.array_equal(np.concatenate(timed.X), np.concatenate(untimed.X))
