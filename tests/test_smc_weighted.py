"""KameleonSMC's ``weights_path``: the weighted sample behind the draws, written to a file.

The file is checked against independent computations: the model's own log density at
every row, the model's variables from the raveled points, each chain's log evidence and
draws from ``pm.sample_smc``'s output, and the weighted moments against the exact
posterior.  Weights written without the proposals' density must fail.  Then the stats'
types (what netCDF needs) and the bad inputs.
"""

from __future__ import annotations

import warnings
from itertools import chain as flatten

import numpy as np
import pymc as pm
import pytest
from scipy import stats
from scipy.special import logsumexp

from pymc_kameleon import KameleonSMC
from pymc_kameleon.compat import group_dataset
from pymc_kameleon.compat import smc_stat_per_chain as per_chain
from pymc_kameleon.smc.weighted import combine_weighted, write_weighted

COV = np.array([[1.0, 0.6], [0.6, 2.0]])
MEAN = np.array([1.0, -2.0])
PRIOR_SD = 10.0
POST_COV = np.linalg.inv(np.linalg.inv(COV) + np.eye(2) / PRIOR_SD**2)
POST_MEAN = POST_COV @ np.linalg.solve(COV, MEAN)
# s ~ HalfNormal(1), unrelated to the data: a transformed variable with a known posterior
S_MEAN, S_SD = np.sqrt(2 / np.pi), np.sqrt(1 - 2 / np.pi)


@pytest.fixture(scope="module")
def model():
    with pm.Model() as m:
        x = pm.Normal("x", 0.0, PRIOR_SD, shape=2)
        pm.HalfNormal("s", 1.0)
        pm.MvNormal("y", x, cov=COV, observed=MEAN)
    return m


def _sample(model, path, chains=2, cores=1, **kwargs):
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pm.sample_smc(300, kernel=KameleonSMC, chains=chains, cores=cores,
                             random_seed=11, progressbar=False, weights_path=path,
                             compute_convergence_checks=False, **kwargs)


def _same_as_file(idata, f) -> None:
    """The result's group ``weighted_sample`` holds the file's arrays, the raveled points'
    columns labelled by the value variables."""
    group = group_dataset(idata, "weighted_sample")
    for key in f.files:
        if key not in ("value_names", "value_sizes"):
            np.testing.assert_array_equal(group[key].values, f[key], err_msg=key)
    assert list(group["value"].values) == ["x[0]", "x[1]", "s_log__"]
    assert group["x_x"].dims == ("row", "x_dim_0") and group["design_x"].dims[0] == "design_row"


def _check_rows(model, f, prefix: str, n: int = 40) -> None:
    """At ``n`` rows: the stored terms are the model's own log density (prior plus
    likelihood), and the model's variables are the raveled points back-transformed."""
    rows = np.linspace(0, len(f[f"{prefix}log_prior"]) - 1, n).astype(int)
    logp = model.compile_logp()
    for i in rows:
        x = f[f"{prefix}x"][i]  # value variables x (2), s_log__ (1)
        point = {"x": x[:2], "s_log__": np.array(x[2])}
        total = f[f"{prefix}log_prior"][i] + f[f"{prefix}log_likelihood"][i]
        assert total == pytest.approx(float(logp(point)), rel=1e-6, abs=1e-6)
        np.testing.assert_allclose(f[f"{prefix}x_x"][i], x[:2])
        assert f[f"{prefix}x_s"][i] == pytest.approx(np.exp(x[2]))


@pytest.mark.parametrize(("cores", "broken"), [(1, False), (2, False), (1, True)])
def test_weights_path_keeps_each_chains_weighted_sample(model, tmp_path, monkeypatch,
                                                        cores, broken):
    """With the emulator, two chains: each chain's rows hold its draws, their weights
    give its log evidence (the recycled pool's where the chain fell back to the stages),
    and the weighted moments match the exact posterior (means within 0.15 sd, sds within
    15 %, each chain); the design's points come with their true terms.  Weights that
    leave out the proposals' density must fail."""
    if broken:
        monkeypatch.setattr(
            "pymc_kameleon.particles.recycling.RecycledPool._own_stage_weights",
            lambda self, X, log_p: np.where(np.isnan(log_p), -np.inf, log_p))
    path = tmp_path / "weighted.npz"
    # the broken variant without the check past the sample's edge, which would hand its
    # corrections back and fall back: the file's weights are under test, not the check
    idata = _sample(model, path, cores=cores, emulator={
        "correction_size": 600, **({"edge_weight": np.inf} if broken else {})})
    f = np.load(path)
    assert list(f["value_names"]) == ["x", "s_log__"] and list(f["value_sizes"]) == [2, 1]
    ss = group_dataset(idata, "sample_stats")
    stages = ss.attrs.get("chain_stages")
    # a chain the check past the sample's edge sent to the stages (a false alarm on the
    # scale's tail) returns its recycled pool, whose weights give the recycled evidence
    fell_back = [c[-1] == 4 for c in per_chain(ss["emulator_phase"].values, 2, stages)]
    evidence = [(recycled if back else stages_)[-1] for recycled, stages_, back in zip(
        per_chain(ss["log_evidence_recycled"].values, 2, stages),
        per_chain(ss["log_marginal_likelihood"].values, 2, stages), fell_back, strict=True)]
    post = group_dataset(idata, "posterior")
    ok = []
    for c in range(2):
        mine = f["chain"] == c
        log_w = f["log_weight"][mine]
        assert logsumexp(log_w) - np.log(mine.sum()) == pytest.approx(evidence[c], abs=1e-9)
        # the chain's draws are resampled from its own rows
        assert np.isin(post["s"].values[c], f["x_s"][mine]).all()
        w = np.exp(log_w - logsumexp(log_w))
        X = np.column_stack([f["x_x"][mine], f["x_s"][mine]])
        mean = w @ X
        sd = np.sqrt(w @ (X - mean) ** 2)
        exact_mean = np.append(POST_MEAN, S_MEAN)
        exact_sd = np.append(np.sqrt(np.diag(POST_COV)), S_SD)
        ok.append(bool(np.all(np.abs(mean - exact_mean) < 0.15 * exact_sd)
                       and np.all(np.abs(sd / exact_sd - 1) < 0.15)))
    assert all(ok) != broken, ok
    if broken:
        return
    assert set(np.unique(f["design_chain"])) == {0, 1}
    _same_as_file(idata, f)  # also from PyMC's chain processes (cores=2)
    _check_rows(model, f, "")
    _check_rows(model, f, "design_")
    # every stat of every stage one Python type, never a bool: netCDF saves such object
    # arrays (PyMC stores several chains' stats as objects)
    for name, var in group_dataset(idata, "sample_stats").data_vars.items():
        values = list(flatten.from_iterable(np.ravel(np.asarray(e, dtype=object))
                                            for e in np.ravel(var.values)))
        kinds = {type(v) for v in values}
        assert len(kinds) == 1 and bool not in kinds and np.bool_ not in kinds, (name, kinds)


@pytest.mark.parametrize("kwargs", [{"recycle": 600}, {"emulator": {"max_dim": 1}}])
def test_weights_path_keeps_the_recycled_pool(model, tmp_path, kwargs):
    """``recycle`` and the emulator's fallback keep their recycled pools: the chain's
    draws come from its rows, whose weights give its recycled log evidence, the exact
    evidence within 0.1 nat; no design points (the fallback here comes before any)."""
    path = tmp_path / "recycled.npz"
    idata = _sample(model, path, chains=1, **kwargs)
    f = np.load(path)
    ss = group_dataset(idata, "sample_stats")
    lml = per_chain(ss["log_evidence_recycled"].values, 1)[0][-1]
    n = len(f["log_weight"])
    assert logsumexp(f["log_weight"]) - np.log(n) == pytest.approx(lml, abs=1e-9)
    exact = stats.multivariate_normal(np.zeros(2), PRIOR_SD**2 * np.eye(2) + COV).logpdf(MEAN)
    assert lml == pytest.approx(exact, abs=0.1)
    assert np.isin(group_dataset(idata, "posterior")["s"].values[0], f["x_s"]).all()
    assert np.all(f["chain"] == 0) and f["design_x"].shape == (0, 3)
    assert f["design_x_x"].shape == (0, 2) and f["design_x_s"].shape == (0,)
    _check_rows(model, f, "", n=20)
    _same_as_file(idata, f)


def test_weighted_sample_group_is_its_own_runs(model):
    """Without ``weights_path`` the result still holds the group ``weighted_sample``; a
    run whose draws are the stages' own particles has none, and neither has the next run
    (here PyMC's own kernel) after a run that returned no InferenceData: its weighted
    sample is not that run's."""
    idata = _sample(model, None, chains=1, recycle=300)
    group = group_dataset(idata, "weighted_sample")
    assert np.isin(group_dataset(idata, "posterior")["s"].values[0], group["x_s"].values).all()
    assert "weighted_sample" not in _groups(_sample(model, None, chains=1))
    _sample(model, None, chains=1, recycle=300, return_inferencedata=False)
    with model, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = pm.sample_smc(100, chains=1, random_seed=1, progressbar=False,
                              compute_convergence_checks=False)
    assert "weighted_sample" not in _groups(idata)


def _groups(idata) -> list[str]:
    """The result's groups (an InferenceData's, or a DataTree's children)."""
    return list(idata.groups()) if callable(getattr(idata, "groups", None)) else list(
        idata.children)


def test_weights_path_bad_input(model, tmp_path):
    """Clear errors before a run: no weighted sample to keep, a folder that does not
    exist; a file that cannot be written at the end is a warning (the draws are kept), and
    so is a run with no weighted sample to write (an older file would pass for it)."""
    with model, pytest.raises(ValueError, match="carry no weights"):
        pm.sample_smc(100, kernel=KameleonSMC, weights_path=tmp_path / "w.npz", chains=1,
                      progressbar=False)
    with model, pytest.raises(ValueError, match="does not exist"):
        pm.sample_smc(100, kernel=KameleonSMC, recycle=100, chains=1, progressbar=False,
                      weights_path=tmp_path / "missing" / "w.npz")
    arrays = {"x": np.zeros((1, 1)), "log_prior": np.zeros(1), "log_likelihood": np.zeros(1),
              "log_weight": np.zeros(1), "value_names": np.array(["a"]),
              "value_sizes": np.array([1]), "design_x": np.zeros((0, 1)),
              "design_log_prior": np.zeros(0), "design_log_likelihood": np.zeros(0)}
    with pytest.warns(RuntimeWarning, match="could not be written"):
        write_weighted(str(tmp_path), combine_weighted([(0, arrays)]))  # a folder, not a file
    write_weighted(str(tmp_path / "ok.npz"), combine_weighted([(0, arrays), (1, None)]))
    assert np.load(tmp_path / "ok.npz")["chain"].tolist() == [0]
    with pytest.warns(RuntimeWarning, match="nothing was written"):
        write_weighted(str(tmp_path / "none.npz"), combine_weighted([(0, None), (1, None)]))
    assert not (tmp_path / "none.npz").exists()
