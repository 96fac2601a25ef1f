"""Settings of one SMC chain that carry the evaluations of every chain of its run.

:func:`pymc.sample_smc` turns the first chain's ``kernel.sample_settings()`` into the
attributes of ``sample_stats``, once every chain has returned (chains run in this process or
come back pickled from worker processes).  A chain's own settings cannot know the other
chains' evaluations when it ends, so each chain's settings join their run (a token the kernel
carries to every chain) when created and again when unpickled, and every member of a run shows
the sum over the members: by the time PyMC reads the first chain's settings, that is the run's
total.  ``n_evals_chains`` says how many chains the total covers.

When PyMC writes its sampling time into the first chain's settings
(:data:`~pymc_kameleon.compat.smc.PYMC_SAMPLING_TIME`), every chain is done and the progress
bar is gone: the run's ``on_sampled(members, seconds)`` is called then, once (the summary).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from typing import Any

from .compat.smc import PYMC_SAMPLING_TIME

__all__ = ["RunSettings"]

# run token -> the live settings of its chains (weak: a finished run's settings are freed)
_RUNS: dict[str, weakref.WeakValueDictionary] = {}
_SUMMARISED: set[str] = set()  # runs whose on_sampled was called (in this process)


class RunSettings(dict):
    """One chain's sample settings, plus ``n_evals_total`` and ``n_evals_chains`` of its run.

    Parameters
    ----------
    run : str
        The run's token (the same for every chain of one :func:`pymc.sample_smc` call).
    chain_evals : int
        Log-density evaluations of this chain.
    settings : dict
        The chain's other settings.
    chain_draws : int
        The chain's returned draws.
    chain_worth : float
        What they are worth in independent draws where the chain knows it (resampled from
        an importance sample), else NaN.
    on_sampled : callable, optional
        ``on_sampled(members, seconds)`` once PyMC wrote its sampling time (a module-level
        function: it travels with the settings).
    chain : int, optional
        The chain's number.
    payload : object, optional
        What ``on_sampled`` needs of the chain besides its settings (it travels with
        them, and is not one of them).
    """

    def __init__(self, run: str, chain_evals: int, settings: dict[str, Any],
                 chain_draws: int = 0, chain_worth: float = math.nan,
                 on_sampled: Callable[[list, float], None] | None = None,
                 chain: int | None = None, payload: Any = None):
        super().__init__(settings)
        self.run = run
        self.chain_evals = int(chain_evals)
        self.chain_draws, self.chain_worth = int(chain_draws), float(chain_worth)
        self.on_sampled = on_sampled
        self.chain, self.payload = chain, payload
        for ended in [k for k, v in _RUNS.items() if not v]:
            del _RUNS[ended]
            _SUMMARISED.discard(ended)
        members = _RUNS.setdefault(run, weakref.WeakValueDictionary())
        members[id(self)] = self
        alive = list(members.values())
        total = sum(m.chain_evals for m in alive)
        for m in alive:
            dict.__setitem__(m, "n_evals_total", total)
            dict.__setitem__(m, "n_evals_chains", len(alive))

    def members(self) -> list[RunSettings]:
        """The settings of the run's chains in this process."""
        return list(_RUNS.get(self.run, {}).values())

    def __setitem__(self, key, value) -> None:
        super().__setitem__(key, value)
        if (key == PYMC_SAMPLING_TIME and self.on_sampled is not None
                and self.run not in _SUMMARISED):
            _SUMMARISED.add(self.run)
            self.on_sampled(self.members(), float(value))

    def __reduce__(self):
        # rebuilt through __init__, so that a chain's settings coming back from a worker
        # process join their run in the receiving process
        own = {k: v for k, v in self.items() if k not in ("n_evals_total", "n_evals_chains")}
        return type(self), (self.run, self.chain_evals, own, self.chain_draws,
                            self.chain_worth, self.on_sampled, self.chain, self.payload)
