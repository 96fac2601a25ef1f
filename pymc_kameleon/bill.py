"""The bill of a run: its log-density evaluations, per chain and in total, in both APIs.

``pm.sample_smc(kernel=KameleonSMC)`` saves ``n_evals_total`` (every chain's evaluations)
and ``n_evals_chains`` as attributes of ``sample_stats``.  ``pm.sample`` builds the
attributes of ``sample_stats`` from its own report and calls no step method after a
chain's last draw, so a step cannot add them; each step reports instead the per-draw stat
``n_evals_total``, the chain's evaluations so far (its start, Laplace search and tuning
included).  Importing the package therefore wraps ``pymc.to_inference_data``, which
``pm.sample`` calls to build its result: the wrapper returns PyMC's result unchanged and,
when its ``sample_stats`` hold that stat, adds the bill as attributes and logs a one-line
summary (:func:`record_bill_in_attrs`).  :func:`evaluations` reads the bill from either
result, :func:`add_evaluations` writes it (for results built otherwise, e.g. with a
``ZarrTrace``) and :func:`sample` is ``pm.sample`` that also logs the summary for a
``MultiTrace``.

The summary goes to the logger ``pymc_kameleon.summary`` at INFO level.  As PyMC does for
its own logger, a handler is added when the program configured no logging, and
``logging.getLogger("pymc_kameleon").setLevel(logging.WARNING)`` silences it.
``pm.sample(quiet=True)`` silences PyMC's loggers only, and it runs PyMC's conversion
after restoring them, so the summary cannot see it; ``pk.sample(..., quiet=True)``
silences both.
"""

from __future__ import annotations

import functools
import logging
import time
import warnings
from typing import Any

import numpy as np

from .compat import group_dataset, smc_stat_per_chain

__all__ = ["SUMMARY_LOGGER", "add_evaluations", "evaluations", "record_bill_in_attrs", "sample"]

#: The logger of the end-of-run summaries (of :func:`sample` and of ``KameleonSMC``).
SUMMARY_LOGGER = logging.getLogger("pymc_kameleon.summary")
if not logging.root.handlers:  # PyMC's rule for its own logger
    _package = logging.getLogger("pymc_kameleon")
    if _package.level == logging.NOTSET:
        _package.setLevel(logging.INFO)
    if not SUMMARY_LOGGER.handlers:
        SUMMARY_LOGGER.addHandler(logging.StreamHandler())


def evaluations(result) -> dict[str, Any]:
    """The log-density evaluations of a run of this package's samplers.

    Parameters
    ----------
    result : arviz.InferenceData, xarray.DataTree or pymc.backends.base.MultiTrace
        What ``pm.sample`` returned (with steps of this package, alone or next to PyMC's),
        or what ``pm.sample_smc(kernel=KameleonSMC)`` returned.

    Returns
    -------
    dict
        ``n_evals_total`` (int, every chain), ``n_evals_per_chain`` (int64 array, in the
        order of the ``chain`` coordinate) and ``n_evals_chains`` (int).

    Notes
    -----
    ``pm.sample``: each chain's last value of the stat ``n_evals_total`` (it counts every
    evaluation of the chain, tuning included, so discarding the tuning draws changes
    nothing), summed over the model's steps of this package (each counts its own; PyMC's
    steps, e.g. ``pm.Metropolis`` for a discrete variable, are not counted, nor the one
    evaluation per chain of PyMC's check of the starting point).  ``pm.sample_smc``: the
    per-stage stat ``n_evals`` summed over each chain's stages (the prior draws, the
    stages, recycling and the emulator's rounds).

    Raises
    ------
    ValueError
        When ``result`` holds no evaluation counts (sampled by other samplers).
    """
    per_chain = _per_chain(result)
    if per_chain is None:
        raise ValueError(
            "no evaluation counts in this result: it was not sampled by this package's "
            "steps (sample stat n_evals_total) or KameleonSMC (sample stat n_evals)")
    return _bill(per_chain)


def _bill(per_chain) -> dict[str, Any]:
    per_chain = np.asarray(per_chain, dtype=np.int64)
    return {"n_evals_total": int(per_chain.sum()), "n_evals_per_chain": per_chain,
            "n_evals_chains": len(per_chain)}


def add_evaluations(idata):
    """Write :func:`evaluations` into ``idata.sample_stats.attrs`` (in place); return
    ``idata``.

    For ``pm.sample``'s result, which has no such attributes, and for
    ``pm.sample_smc``'s, which lacks the per-chain counts.
    """
    bill = evaluations(idata)
    idata["sample_stats"].attrs.update(bill)
    return idata


def record_bill_in_attrs() -> None:
    """Make ``pm.sample`` put the bill of this package's steps into
    ``sample_stats.attrs`` (done once, when the package is imported).

    ``pm.sample`` builds its InferenceData with ``pymc.to_inference_data``, looked up on the
    ``pymc`` module when a run ends; this replaces that name by a wrapper which calls
    PyMC's function and, when the result's ``sample_stats`` hold this package's stat
    ``n_evals_total``, adds :func:`evaluations` to their attributes and logs the run's
    one-line summary (its wall time: PyMC's ``sampling_time``), and warns what the run's
    ``emulator=`` stats say that R-hat and ESS do not
    (:func:`~pymc_kameleon.steps.emulated.run_warnings`).  Every other result is PyMC's,
    unchanged; a failure to read the bill is logged, never raised.  Calling it again does
    nothing.
    """
    import pymc

    convert = pymc.to_inference_data
    if getattr(convert, "_adds_the_bill", False):
        return

    @functools.wraps(convert)
    def to_inference_data(*args, **kwargs):
        idata = convert(*args, **kwargs)
        messages = []
        try:
            stats = group_dataset(idata, "sample_stats")
            if "n_evals_total" in stats.data_vars:
                from .steps.emulated import run_warnings  # the steps import this module

                _bill_found(idata)
                messages = run_warnings(stats)
        except (KeyError, TypeError, ValueError, AttributeError):  # never fail a finished run
            logging.getLogger(__name__).debug("no bill for this result", exc_info=True)
        for message in messages:  # what the run's stats say that R-hat and ESS do not
            warnings.warn(message, RuntimeWarning, stacklevel=2)
        return idata

    to_inference_data._adds_the_bill = True
    pymc.to_inference_data = to_inference_data


#: Summaries logged by the wrapper of ``pymc.to_inference_data`` (so :func:`sample` does
#: not log a run twice).
_LOGGED = [0]


def _bill_found(idata) -> None:
    """Write the bill into ``idata``'s attributes and log the run's summary."""
    per_chain = _per_chain(idata)
    if per_chain is None:
        return
    bill = _bill(per_chain)
    attrs = idata["sample_stats"].attrs
    attrs.update(bill)
    seconds = attrs.get("sampling_time")
    SUMMARY_LOGGER.info(summary_line("pm.sample", bill["n_evals_per_chain"],
                                     None if seconds is None else float(seconds)))
    _LOGGED[0] += 1


def sample(*args, **kwargs):
    """``pm.sample(*args, **kwargs)``, which now itself carries the run's evaluations in
    ``sample_stats.attrs`` and logs their one-line summary; this also logs it for a
    ``MultiTrace`` result (``return_inferencedata=False``).

    The same arguments and result as ``pm.sample``; steps of other packages alone give
    ``pm.sample``'s result unchanged, without a summary.  ``quiet=True`` logs nothing.

    Examples
    --------
    >>> import pymc as pm, pymc_kameleon as pk
    >>> with pm.Model():
    ...     x = pm.Normal("x")
    ...     idata = pk.sample(draws=20, tune=20, chains=1, step=pk.RandomWalkStep(),
    ...                       progressbar=False, compute_convergence_checks=False,
    ...                       random_seed=1, quiet=True)
    >>> idata.sample_stats.attrs["n_evals_total"] > 40
    True
    """
    import pymc as pm

    start, logged = time.perf_counter(), _LOGGED[0]
    quiet = kwargs.get("quiet", False)
    level = SUMMARY_LOGGER.level
    if quiet:
        SUMMARY_LOGGER.setLevel(logging.CRITICAL + 1)
    try:
        result = pm.sample(*args, **kwargs)
    finally:
        SUMMARY_LOGGER.setLevel(level)
    seconds = time.perf_counter() - start
    per_chain = None if _LOGGED[0] > logged or quiet else _per_chain(result)
    if per_chain is not None:
        SUMMARY_LOGGER.info(summary_line("pm.sample", per_chain, seconds))
    return result


def summary_line(what: str, per_chain, seconds: float | None, worth: str = "") -> str:
    """The one-line summary: evaluations in total and per chain, wall time (None: not
    known), and ``worth`` (what the returned draws are worth, where known)."""
    per_chain = [int(n) for n in per_chain]
    total = sum(per_chain)
    if len(per_chain) <= 8:
        chains = " + ".join(f"{n:,}" for n in per_chain)
    else:
        chains = f"{min(per_chain):,} to {max(per_chain):,}"
    known = seconds is not None and np.isfinite(seconds) and seconds > 0
    rate = f", {total / seconds:,.0f} per second" if known else ""
    wall = ""
    if known:
        wall = f" in {seconds:.1f} s" if seconds < 10 else f" in {seconds:,.0f} s"
        wall += " wall time"
    line = (f"{what}: {total:,} log-density evaluations{wall} "
            f"({len(per_chain)} chain{'s' * (len(per_chain) != 1)}: {chains}{rate})")
    return f"{line}; {worth}" if worth else line


def _is_idata(result) -> bool:
    try:
        result["sample_stats"]
    except (KeyError, TypeError, AttributeError):
        return False
    return hasattr(result, "groups") or hasattr(result, "children")


def _per_chain(result) -> np.ndarray | None:
    """Each chain's evaluations, or None where ``result`` has no counts."""
    if hasattr(result, "get_sampler_stats"):  # a MultiTrace
        if "n_evals_total" not in getattr(result, "stat_names", ()):
            return None
        return np.array([_last(np.asarray(v)) for v in
                         result.get_sampler_stats("n_evals_total", combine=False,
                                                  squeeze=False)])
    if not _is_idata(result):
        return None
    stats = group_dataset(result, "sample_stats")
    if "n_evals_total" in stats.data_vars:
        values = stats["n_evals_total"].values
        if values.shape[1] == 0:  # no posterior draws: the last tuning draw
            try:
                values = group_dataset(result, "warmup_sample_stats")["n_evals_total"].values
            except KeyError:
                return None
        return np.array([_last(v) for v in values])
    if "n_evals" in stats.data_vars and "beta" in stats.data_vars:  # KameleonSMC's stages
        chains = group_dataset(result, "posterior").sizes["chain"]
        return np.array([int(np.nansum(v)) for v in
                         smc_stat_per_chain(stats["n_evals"].values, chains)])
    return None


def _last(chain: np.ndarray) -> int:
    """One chain's evaluations: its last draw's counts, summed over the steps (a compound
    step's stat has a step axis after the draw axis)."""
    if chain.shape[0] == 0:
        return 0
    return int(np.sum(chain[-1]))
