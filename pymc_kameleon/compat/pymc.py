"""What differs between PyMC 5 and PyMC 6 for a step method, and PyMC's private hooks.

* how a chain hands a step its generator (:func:`start_chain`): ``step.set_rng(rng)`` in
  PyMC 5, ``step.setup_chain(rng, tune, draws)`` in PyMC 6;
* whether a step learns the number of tuning draws of ``pm.sample``
  (:data:`TELLS_TUNING_DRAWS`, :func:`assumed_tuning_draws`): PyMC 6 tells it in
  ``setup_chain``; PyMC 5 does not, so a step assumes ``pm.sample``'s default unless the
  user gives the number;
* the names under which PyMC 5 and 6 ask a step class for its progress-bar columns and
  its state class (:class:`StepHooks`), which are private in PyMC.

References
----------
- PyMC 6 migration notes and ``pymc.step_methods.compound.BlockedStep.setup_chain``.
"""

from __future__ import annotations

from typing import Any

from .versions import PYMC_VERSION

__all__ = ["PM_SAMPLE_TUNE", "TELLS_TUNING_DRAWS", "StepHooks", "assumed_tuning_draws",
           "start_chain"]

#: ``pm.sample``'s default number of tuning draws (PyMC 5 and 6).
PM_SAMPLE_TUNE = 1000
#: Whether PyMC tells a step the number of tuning draws of its chain (``setup_chain``).
TELLS_TUNING_DRAWS = PYMC_VERSION[0] >= 6


# ----------------------------------------------------------------------------- step methods
def start_chain(step, rng, tune: int = 0, draws: int = 0) -> None:
    """Prepare ``step`` for a new chain with generator ``rng``, as ``pm.sample`` does.

    For scripts that drive ``step.step(point)`` by hand.  PyMC 6 calls
    ``step.setup_chain(rng, tune, draws)`` once per chain; PyMC 5 called
    ``step.set_rng(rng)``.

    Parameters
    ----------
    step : pymc.step_methods.compound.BlockedStep or CompoundStep
    rng : int or numpy.random.Generator
    tune, draws : int
        Tuning and draw iterations of the chain (used by PyMC 6 only).

    Examples
    --------
    >>> import numpy as np, pymc as pm
    >>> with pm.Model():
    ...     x = pm.Normal("x")
    ...     step = pm.Metropolis()
    >>> start_chain(step, np.random.default_rng(1))
    """
    # by version, not by ``hasattr``: a step class may define ``setup_chain`` for PyMC 6
    # while running on PyMC 5, whose base classes have no ``setup_chain`` to delegate to
    if PYMC_VERSION[0] >= 6:
        step.setup_chain(rng, tune, draws)
    else:
        step.set_rng(rng)


def assumed_tuning_draws(tune_draws: int | None) -> int | None:
    """The number of tuning draws a step plans its chain for before PyMC tells it, if ever.

    The user's ``tune_draws`` if given.  Else: PyMC 6 tells the step in ``setup_chain``
    (None until then: not known); PyMC 5 never does, and a step assumes ``pm.sample``'s
    default, :data:`PM_SAMPLE_TUNE` -- the step cannot see ``pm.sample``'s arguments, and
    the default is what most runs use.

    Parameters
    ----------
    tune_draws : int or None
        The number of tuning draws the user gave the step.

    Returns
    -------
    int or None

    Examples
    --------
    >>> assumed_tuning_draws(300)
    300
    >>> assumed_tuning_draws(None) == (None if TELLS_TUNING_DRAWS else PM_SAMPLE_TUNE)
    True
    """
    if tune_draws is not None:
        return tune_draws
    if TELLS_TUNING_DRAWS:  # PyMC 6: setup_chain tells the step
        return None
    return PM_SAMPLE_TUNE  # PyMC 5: never told


# ----------------------------------------------------------------------------- PyMC's hooks
class StepHooks:
    """PyMC's private hooks of a step class, answered from the class's public ones.

    PyMC 5 and 6 build a step's progress-bar columns with
    ``step._progressbar_config(n_chains)`` and ``step._make_progressbar_update_functions()``,
    and their ``WithSamplingState`` reads the state class from ``_state_class``.  A class
    deriving from this one defines instead:

    * ``progress_config(n_chains)``: the rich columns and their initial cells;
    * ``progress_update_functions()``: functions from a draw's stats to the cells' text
      (PyMC asks the step instance: the functions may depend on it);
    * ``state_class``: the ``DataClassState`` of its ``sampling_state``, if any.
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "state_class" in cls.__dict__:
            cls._state_class = cls.state_class

    @classmethod
    def _progressbar_config(cls, n_chains: int = 1) -> tuple[list, dict]:
        return cls.progress_config(n_chains)

    def _make_progressbar_update_functions(self) -> tuple:
        return self.progress_update_functions()


# ----------------------------------------------------------------------------- SMC stats
def smc_stat_per_chain(values, chains: int, stages=None) -> list:
    """A per-stage stat of ``pm.sample_smc`` as one float array per chain.

    PyMC stores it as a numeric or an object array (chains with different numbers of
    stages) and, on PyMC 6 with one chain, with the stages on the chain axis.  KameleonSMC
    pads the chains with NaN to the longest where they ran different numbers of stages,
    each chain's number in the attribute ``chain_stages``.

    Parameters
    ----------
    values : numpy.ndarray
        ``idata.sample_stats[name].values``.
    chains : int
        The run's number of chains.
    stages : sequence of int, optional
        Each chain's number of stages (``idata.sample_stats.attrs.get("chain_stages")``):
        the padding past it is dropped.

    Returns
    -------
    list of numpy.ndarray
    """
    import numpy as np

    if chains == 1:
        return [np.asarray(np.ravel(values), dtype=float)]
    rows = np.asarray(values, dtype=object).reshape(chains, -1)
    out = [np.concatenate([np.ravel(np.asarray(e, dtype=float)) for e in row]) for row in rows]
    if stages is not None:
        out = [row[:int(n)] for row, n in zip(out, np.ravel(stages), strict=True)]
    return out
