"""Settings of one SMC chain that carry the evaluations of every chain of its run.

:func:`pymc.sample_smc` turns the first chain's ``kernel.sample_settings()`` into the
attributes of ``sample_stats``, once every chain has returned (chains run in this process or
come back pickled from worker processes).  A chain's own settings cannot know the other
chains' evaluations when it ends, so each chain's settings join their run (a token the kernel
carries to every chain) when created and again when unpickled, and every member of a run shows
the sum over the members: by the time PyMC reads the first chain's settings, that is the run's
total.  ``n_evals_chains`` says how many chains the total covers.
"""

from __future__ import annotations

import weakref
from typing import Any

__all__ = ["RunSettings"]

# run token -> the live settings of its chains (weak: a finished run's settings are freed)
_RUNS: dict[str, weakref.WeakValueDictionary] = {}


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
    """

    def __init__(self, run: str, chain_evals: int, settings: dict[str, Any]):
        super().__init__(settings)
        self.run = run
        self.chain_evals = int(chain_evals)
        for ended in [k for k, v in _RUNS.items() if not v]:
            del _RUNS[ended]
        members = _RUNS.setdefault(run, weakref.WeakValueDictionary())
        members[id(self)] = self
        alive = list(members.values())
        total = sum(m.chain_evals for m in alive)
        for m in alive:
            m["n_evals_total"] = total
            m["n_evals_chains"] = len(alive)

    def __reduce__(self):
        # rebuilt through __init__, so that a chain's settings coming back from a worker
        # process join their run in the receiving process
        own = {k: v for k, v in self.items() if k not in ("n_evals_total", "n_evals_chains")}
        return type(self), (self.run, self.chain_evals, own)
