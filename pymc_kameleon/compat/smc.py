"""The places where KameleonSMC relies on PyMC's SMC internals.

PyMC's :class:`~pymc.smc.kernels.SMC_KERNEL` evaluates the starting particles one after the
other in ``_initialize_kernel``, which its documentation asks subclasses not to override,
draws them from the private ``_prior_expression``, and builds the progress bar's columns
with the private ``_progressbar_config`` and ``_make_progressbar_update_functions`` (on the
kernel instance, in the process that draws the bar).
KameleonSMC needs the start's evaluations as one batch (on the user's executor), prior
draws where PyMC would use an ``initval``, and its evaluations on the progress bar:
:class:`SeamedSMCKernel` is the one class that touches all of them, for PyMC 5 and 6 alike
(read for PyMC 5.28 and 6.x).

Two more things rely on how PyMC runs SMC:

* :class:`ChainColumn`: PyMC draws the bar with rich, one task per chain, whose
  ``Elapsed`` is the task's clock.  PyMC 5 starts every task's clock when the bar appears
  (a later chain's time includes the earlier chains'), and both majors stop it when beta
  reaches 1, at the *start* of the last stage (before its moves and the recycling).  The
  column sets the clock of a task to its chain's own start and end, as PyMC 6 does for
  nutpie's chains (``NutpieProgressBarManager._set_task_elapsed``).
* :func:`worker_chain`: with ``cores > 1``, PyMC starts chain ``k``'s process as
  ``smc_worker_chain_{k}`` (``SMCProcessAdapter``, the same in PyMC 5.28 and 6.x) with
  the kernel cloudpickled, which is how the chain's process knows which chain's state to
  post for the bar (:mod:`pymc_kameleon.smc.mailbox`).  Under another name it posts nothing.
* :data:`PYMC_SAMPLING_TIME`: ``pm.sample_smc`` writes its sampling time into the first
  chain's ``sample_settings()`` once every chain is done (``_save_sample_stats``): the
  moment a run's summary can be logged, after the progress bar is gone.
* :func:`attach_result_group`: right after that, ``_save_sample_stats`` builds the result
  with ``to_inference_data``, imported by name into ``pymc.smc.sampling``, and keeps every
  group of it but ``sample_stats`` (``InferenceData(**idata, sample_stats=...)`` in PyMC 5,
  ``DataTree.from_dict`` in PyMC 6): a group added there reaches the user.
* :func:`rectangular_stats`: it builds ``sample_stats`` with ``dict_to_dataset``, also
  imported by name, from each stat's per-chain lists.
"""

from __future__ import annotations

import functools
import logging
import multiprocessing
import re
import time
from collections.abc import Callable

import numpy as np
from pymc.blocking import DictToArrayBijection
from pymc.pytensorf import floatX
from pymc.smc.kernels import SMC_KERNEL
from rich.progress import ProgressColumn
from rich.table import Column
from rich.text import Text

__all__ = ["PYMC_SAMPLING_TIME", "ChainColumn", "SeamedSMCKernel", "attach_result_group",
           "rectangular_stats", "set_chain_clock", "worker_chain"]

#: The key of the first chain's settings under which ``pm.sample_smc`` stores its sampling
#: time, after the last chain (PyMC 5.28 and 6.x).
PYMC_SAMPLING_TIME = "_t_sampling"


class SeamedSMCKernel(SMC_KERNEL):
    """PyMC's SMC kernel with the start evaluated by :meth:`evaluate_start` and the progress
    bar's columns from :meth:`progress_config` and :meth:`progress_update_functions`."""

    def progress_config(self, n_chains: int = 1) -> tuple[list, dict]:
        """The progress bar's columns and their initial cells (PyMC's by default)."""
        return SMC_KERNEL._progressbar_config(n_chains)

    def progress_update_functions(self) -> tuple:
        """Functions from a stage's stats to the cells' text (PyMC's by default)."""
        return SMC_KERNEL._make_progressbar_update_functions(self)

    def _progressbar_config(self, n_chains: int = 1):
        return self.progress_config(n_chains)

    def _make_progressbar_update_functions(self):
        return self.progress_update_functions()

    def evaluate_start(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The prior and likelihood terms at the starting particles (the rows of ``X``)."""
        raise NotImplementedError

    def set_prior_expression(self, expression) -> None:
        """Draw the starting particles from ``expression`` (PyMC's initial-point
        expression of the free variables, transformed) instead of PyMC's own."""
        self._prior_expression = expression

    def _initialize_kernel(self) -> None:
        # PyMC's own start, its evaluations replaced by one batch
        init = self.start if self.start else self.initialize_population()
        population = [DictToArrayBijection.map({v.name: init[v.name][i]
                                                for v in self.variables}).data
                      for i in range(self.draws)]
        self.tempered_posterior = np.array(floatX(population))
        self.prior_logp, self.likelihood_logp = self.evaluate_start(self.tempered_posterior)


def attach_result_group(name: str, take: Callable[[object], object]) -> None:
    """Make ``pm.sample_smc``'s result carry the group ``name``: ``take(trace)`` (an
    :class:`xarray.Dataset`, or ``None`` for no group; ``trace`` PyMC's ``MultiTrace`` of
    the run) when the result is built.  Done once; a failure is logged, never raised (the
    run's draws are not lost)."""
    import pymc.smc.sampling as sampling

    convert = sampling.to_inference_data
    if name in getattr(convert, "_attached_groups", ()):
        return

    @functools.wraps(convert)
    def to_inference_data(trace=None, *args, **kwargs):
        idata = convert(trace, *args, **kwargs)
        try:
            group = take(trace) if trace is not None else None
            if group is not None and hasattr(idata, "add_groups"):  # ArviZ 0.x
                idata.add_groups({name: group})
            elif group is not None:  # an xarray DataTree (ArviZ 1)
                idata[name] = group
        except (KeyError, TypeError, ValueError, AttributeError):
            logging.getLogger(__name__).warning("the group %r was not added", name,
                                                exc_info=True)
        return idata

    to_inference_data._attached_groups = (*getattr(convert, "_attached_groups", ()), name)
    sampling.to_inference_data = to_inference_data


def rectangular_stats(applies: Callable[[dict], bool]) -> None:
    """Make ``pm.sample_smc``'s ``sample_stats`` rectangular where the chains ran different
    numbers of stages and ``applies(attrs)`` (the run's settings): PyMC then stores each
    stat as an object array of the chains' lists, which netCDF cannot save
    (pymc-devs/pymc#5263); each chain's values become floats, NaN past its last stage,
    and the attribute ``chain_stages`` holds each chain's number of stages.
    ``_save_sample_stats`` builds the group with ``dict_to_dataset``, imported by name
    into ``pymc.smc.sampling`` (PyMC 5.28 and 6.x).  Done once."""
    import pymc.smc.sampling as sampling

    convert = sampling.dict_to_dataset
    if getattr(convert, "_rectangular", False):
        return

    @functools.wraps(convert)
    def dict_to_dataset(data, *args, attrs=None, **kwargs):
        if isinstance(data, dict) and attrs is not None and applies(attrs):
            stages = next(filter(None, map(_lengths, data.values())), None)
            if stages is not None:  # each chain's stages, for smc_stat_per_chain
                data = {name: _padded(value) for name, value in data.items()}
                attrs = {**attrs, "chain_stages": np.array(stages)}
        return convert(data, *args, attrs=attrs, **kwargs)

    dict_to_dataset._rectangular = True
    sampling.dict_to_dataset = dict_to_dataset


def _lengths(value) -> list[int] | None:
    """The lengths of an object array's per-chain sequences where they differ, else None."""
    if not (isinstance(value, np.ndarray) and value.dtype == object and value.ndim == 1):
        return None
    try:
        lengths = [len(v) for v in value]
    except TypeError:
        return None
    return lengths if len(set(lengths)) > 1 else None


def _padded(value):
    """An object array of the chains' sequences of unequal length as floats, NaN past each
    chain's end; anything else as it is."""
    if _lengths(value) is None:
        return value
    try:
        rows = [np.asarray(v, dtype=float) for v in value]
    except (TypeError, ValueError):
        return value
    if any(row.ndim != 1 for row in rows):
        return value
    out = np.full((len(rows), max(len(row) for row in rows)), np.nan)
    for i, row in enumerate(rows):
        out[i, :len(row)] = row
    return out


# ----------------------------------------------------------------------------- progress bar
_WORKER_NAME = re.compile(r"smc_worker_chain_(\d+)")  # SMCProcessAdapter's process name


def worker_chain() -> int | None:
    """The chain of this process if it is one of PyMC's SMC chain processes, else None."""
    match = _WORKER_NAME.fullmatch(multiprocessing.current_process().name)
    return None if match is None else int(match.group(1))


def set_chain_clock(task, cell) -> None:
    """Set the clock of PyMC's rich ``task`` to the chain of ``cell`` (a
    :class:`~pymc_kameleon.smc.progress.ChainCell`): from the chain's start to its end,
    running until then; not started while its chain waits for an earlier one.  Chains
    whose cell is not live (in other processes that post nothing) keep PyMC's clock."""
    if not cell.live:
        return
    started, ended = cell.clock()
    if started is None:
        task.start_time, task.finished_time = None, None
        return
    offset = task.get_time() - time.monotonic()  # rich's clock may be another one
    task.start_time = started + offset
    task.stop_time = None
    task.finished_time = None if ended is None else ended - started


class ChainColumn(ProgressColumn):
    """A column of the SMC progress bar read live from the chain's cell, the task's field
    ``field``: ``text(cell)``.  With ``clock=True`` it also sets the task's clock to the
    chain's (:func:`set_chain_clock`); give that to the first of the kernel's columns,
    which rich draws before PyMC's ``Elapsed``."""

    def __init__(self, field: str, text: Callable[[object], str], header: str,
                 clock: bool = False):
        super().__init__(table_column=Column(header, ratio=1))
        self.field, self.text, self.clock = field, text, clock

    def render(self, task) -> Text:
        cell = task.fields.get(self.field)
        if cell is None or isinstance(cell, str):
            return Text("-" if cell is None else cell)
        if self.clock:
            set_chain_clock(task, cell)
        return Text(self.text(cell))
