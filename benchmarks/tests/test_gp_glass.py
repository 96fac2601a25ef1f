"""The GP-classification benchmark script runs end to end on a tiny budget.

Skipped when the UCI Glass data are absent (they are found as the suite finds them:
``$PYMC_KAMELEON_GLASS`` or ``../shared/data/glass.data`` next to the clone).
"""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks import gp_glass
from benchmarks.suite.models import glass_path


@pytest.fixture(scope="module")
def data():
    path = glass_path()
    if path is None:
        pytest.skip("UCI Glass data not found (set PYMC_KAMELEON_GLASS or provide shared/data)")
    return path


def test_benchmark_reference_then_compare(data, tmp_path):
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
