"""The GP-classification example runs end to end on a tiny budget.

Skipped when the UCI Glass data are absent (they are found as the example finds them:
``$PYMC_KAMELEON_GLASS`` or ``../shared/data/glass.data`` next to the clone).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

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
