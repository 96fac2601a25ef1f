"""The GP-classification example and benchmark script run end to end on a tiny budget.

Skipped when the UCI Glass data are absent (they are found as the example finds them:
``$PYMC_KAMELEON_GLASS`` or ``../shared/data/glass.data`` next to the clone).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load_example():
    spec = importlib.util.spec_from_file_location(
        "gp_classification_glass", ROOT / "examples" / "gp_classification_glass.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def example():
    return _load_example()


@pytest.fixture(scope="module")
def data(example):
    path = example.default_data_path()
    if path is None:
        pytest.skip("UCI Glass data not found (set PYMC_KAMELEON_GLASS or provide shared/data)")
    return path


def test_example_prints_summary_and_saves_the_pair_plot(example, data, tmp_path, capsys):
    plot = tmp_path / "pair.png"
    example.main(["--data", str(data), "--sampler", "fast-kameleon", "--draws", "30",
                  "--tune", "30", "--chains", "1", "--cores", "1", "--n-importance", "10",
                  "--plot", str(plot)])
    out = capsys.readouterr().out
    assert "theta[8]" in out and "ess_bulk" in out
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_example_without_data_is_a_clear_error(example, monkeypatch, capsys):
    monkeypatch.setattr(example, "default_data_path", lambda: None)
    with pytest.raises(SystemExit):
        example.main(["--plot", ""])
    assert "glass.data not found" in capsys.readouterr().err


def test_benchmark_reference_then_compare(data, tmp_path):
    from benchmarks import gp_glass

    ref = tmp_path / "ref.npz"
    gp_glass.main(["reference", "--data", str(data), "--n-importance", "10", "--chains", "2",
                   "--draws", "20", "--tune", "10", "--thin", "2", "--reference", str(ref)])
    cached = np.load(ref)
    assert cached["theta"].shape == (2, 10, 9)
    assert "--draws 20" in str(cached["command"])
    gp_glass.main(["compare", "--data", str(data), "--n-importance", "10", "--seeds", "1",
                   "--draws", "16", "--tune", "16", "--reference", str(ref),
                   "--out", str(tmp_path)])
    table = (tmp_path / "gp_glass.md").read_text()
    for name in gp_glass.SAMPLERS:
        assert f"| {name} |" in table
    # d = 9 estimates per draw for the exact steps (one per MH iteration, plus the start
    # evaluated twice to detect noise), 2 d = 18 for element-wise Metropolis
    rows = {line.split("|")[1].strip(): line.split("|") for line in table.splitlines()
            if line.startswith("| ") and "sampler" not in line}
    assert float(rows["KAMH"][6]) == pytest.approx(9.0, abs=0.2)
    assert float(rows["pm.Metropolis (MCWM)"][6]) == pytest.approx(18.0, abs=0.5)
    assert (tmp_path / "gp_glass.png").stat().st_size > 10_000
