"""What differs between ArviZ 0.x (PyMC 5) and ArviZ 1 (PyMC 6) in ``pm.sample``'s results.

``pm.sample`` returns an ``arviz.InferenceData`` of :class:`xarray.Dataset` groups with
ArviZ 0.x and an :class:`xarray.DataTree` with ArviZ 1, whose diagnostics also return
``DataTree`` objects and whose summaries have other columns (:func:`as_dataset`,
:func:`group_dataset`, :func:`max_rhat`, :func:`summary_table`).  The examples use them so
that one script runs on both.

References
----------
- ArviZ 1.0: "InferenceData is replaced by xarray.DataTree" (ArviZ documentation).
"""

from __future__ import annotations

import arviz as az
import numpy as np
import xarray as xr

from .versions import ARVIZ_VERSION

__all__ = ["MAX_KHAT", "SUMMARY_COLUMNS", "as_dataset", "group_dataset", "max_rhat", "pareto_khat",
           "summary_table"]

#: Columns of :func:`summary_table`: the ones both ArviZ majors compute, in a fixed order.
SUMMARY_COLUMNS = ("mean", "sd", "mcse_mean", "mcse_sd", "ess_bulk", "ess_tail", "r_hat")


def as_dataset(obj) -> xr.Dataset:
    """An :class:`xarray.Dataset` from a Dataset or from a ``DataTree`` node (ArviZ 1).

    ArviZ 1's diagnostics (``az.rhat``, ``az.ess``) and the groups of ``pm.sample``'s result
    are ``DataTree`` nodes, which lack ``to_array`` and multi-variable selection
    (``node[["a", "b"]]``); their datasets have both.  The examples use it so that they run
    on both ArviZ majors.

    Parameters
    ----------
    obj : xarray.Dataset or xarray.DataTree
        E.g. ``az.ess(idata)`` or a group of ``pm.sample``'s result.

    Returns
    -------
    xarray.Dataset
        ``obj`` itself if it is a Dataset, else the node's dataset.

    Examples
    --------
    >>> import xarray as xr
    >>> as_dataset(xr.Dataset({"a": 1.0}))["a"].item()
    1.0
    """
    if isinstance(obj, xr.Dataset):
        return obj
    if hasattr(obj, "to_dataset"):
        return obj.to_dataset()
    raise TypeError(f"expected an xarray Dataset or DataTree, got {type(obj).__name__}")


def group_dataset(idata, group: str = "posterior") -> xr.Dataset:
    """Group ``group`` of ``pm.sample``'s result as an :class:`xarray.Dataset`.

    Works for an ``arviz.InferenceData`` (ArviZ 0.x) and an :class:`xarray.DataTree`
    (ArviZ 1), so ``group_dataset(idata, "sample_stats")[["accept", "lp"]]`` works on both.

    Parameters
    ----------
    idata : arviz.InferenceData or xarray.DataTree
    group : str
        ``"posterior"``, ``"sample_stats"``, ``"warmup_sample_stats"``, ...

    Returns
    -------
    xarray.Dataset
    """
    return as_dataset(idata[group])


def max_rhat(idata, var_names: list[str] | None = None) -> float:
    """Largest rank-normalised split R-hat over the posterior variables ``var_names`` (all).

    Parameters
    ----------
    idata : arviz.InferenceData, xarray.DataTree or xarray.Dataset
        A result of ``pm.sample`` or a posterior dataset.
    var_names : list of str, optional

    Returns
    -------
    float
        The largest R-hat over all variables and their elements.

    References
    ----------
    .. [1] Vehtari, A., Gelman, A., Simpson, D., Carpenter, B., Bürkner, P.-C. (2021).
       Rank-normalization, folding, and localization: an improved R-hat for assessing
       convergence of MCMC. Bayesian Analysis 16(2).
    """
    post = idata if isinstance(idata, xr.Dataset) else group_dataset(idata, "posterior")
    if var_names is not None:
        post = post[list(var_names)]
    rhat = as_dataset(az.rhat(post))
    return float(max(float(np.max(rhat[name].values)) for name in rhat.data_vars))


def summary_table(idata, **kwargs):
    """``az.summary`` with the columns both ArviZ majors compute (:data:`SUMMARY_COLUMNS`).

    ArviZ 0.x adds a 94% HDI, ArviZ 1 an 89% equal-tailed interval and orders the columns
    differently; the common ones keep printed summaries and tables alike across versions.

    Parameters
    ----------
    idata : arviz.InferenceData, xarray.DataTree or xarray.Dataset
    **kwargs
        Passed to :func:`arviz.summary` (e.g. ``var_names``).

    Returns
    -------
    pandas.DataFrame
    """
    table = az.summary(idata, **kwargs)
    return table[[c for c in SUMMARY_COLUMNS if c in table.columns]]


# ----------------------------------------------------------------------------- PSIS
#: Pareto's k-hat of importance weights above which their estimates (Kish's ESS among
#: them) are unreliable (Vehtari et al. 2024); the emulator, the steps' independence
#: proposals and the recycled pools all judge their weights by it.
MAX_KHAT = 0.7


def pareto_khat(log_w: np.ndarray) -> float:
    """Pareto's k-hat of importance weights (Vehtari et al. 2024) from ArviZ's PSIS:
    ``arviz.psislw`` takes the log weights on ArviZ 0.x, ``arviz_stats``' array interface
    their negatives on ArviZ 1.x (the log-likelihood convention of LOO).  Too few weights
    for a tail of five (under about 25): ``inf`` on both, as ArviZ 0.x says it, where
    ArviZ 1.x raises."""
    log_w = np.asarray(log_w, dtype=float)
    if ARVIZ_VERSION[0] < 1:
        return float(az.psislw(log_w.copy())[1])
    from arviz_stats.base import array_stats

    try:
        return float(array_stats.psislw(-log_w)[1])
    except ValueError as exc:  # "n_draws_tail must be at least 5"
        if "tail" not in str(exc):
            raise
        return float("inf")
