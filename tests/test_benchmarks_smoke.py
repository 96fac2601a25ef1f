"""Smoke test of the benchmark suite: every sampler on a tiny budget, outputs written."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("matplotlib")  # the "plot" extra

from benchmarks import synthetic  # noqa: E402
from benchmarks.common import SAMPLERS, TARGETS  # noqa: E402


def test_synthetic_runner_writes_table_and_plots(tmp_path):
    target = TARGETS["banana-strong"].with_dim(2)
    results = synthetic.run_benchmark(target, tune=60, draws=60, chains=1, out=tmp_path,
                                       mode="smoke")
    assert sorted(r.sampler for r in results) == sorted(SAMPLERS)
    for r in results:
        assert r.draws == 60 and r.wall > 0 and r.evals > 0
        assert r.ess > 0 and 0 <= r.coverage <= 1
    by_key = {r.sampler: r for r in results}
    # honest counts: one evaluation per iteration for ours, 2 per coordinate for Metropolis
    assert by_key["fkamh"].evals_per_iteration == pytest.approx(1.0, abs=0.05)
    assert by_key["metropolis"].evals_per_iteration == pytest.approx(4.0, abs=0.05)
    assert by_key["demz"].evals_per_iteration == pytest.approx(2.0, abs=0.05)

    table = (tmp_path / "banana-strong.md").read_text()
    assert "2-d banana B(0.1, 100)" in table
    for spec in SAMPLERS.values():
        assert f"| {spec.label}" in table
    data = json.loads((tmp_path / "banana-strong.json").read_text())
    assert len(data["chains"]) == len(SAMPLERS)
    for name in ("banana-strong_metrics.png", "banana-strong_traces.png"):
        png = (tmp_path / name).read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_cli_rejects_unknown_sampler(tmp_path, capsys):
    with pytest.raises(SystemExit):
        synthetic.main(["--target", "flower", "--samplers", "nope", "--out", str(tmp_path)])
    assert "unknown samplers" in capsys.readouterr().err
