"""The messages a step gives the user about its setup (errors and warnings)."""

from __future__ import annotations

import warnings

from pymc.vartypes import discrete_types

__all__ = ["discrete_message", "sampler_never_started"]


def discrete_message(name: str, vars) -> str:
    """The error for discrete variables given to the continuous step ``name``."""
    discrete = [v.name for v in vars if v.dtype in discrete_types]
    return (f"{name} samples continuous variables only, but got discrete variable(s) "
            f"{discrete}. Give them to another step method, e.g. pm.sample(step=[{name}"
            "([...continuous vars...]), pm.Metropolis([...discrete vars...])]).")


def sampler_never_started(name: str, var_names, draw: int, length: int,
                          tune: int | None) -> None:
    """A ``UserWarning`` that tuning ended after ``draw`` draws, inside the default warm-up
    of ``length`` draws (``tune``: the tuning draws, None if the step was not told): the
    user asked for this sampler and would get the warm-up's random walk without being
    told."""
    why = f"half of tune={tune}" if tune else "the number of tuning draws was not given to the step"
    plural = "" if draw == 1 else "s"
    warnings.warn(
        f"{name}{var_names}: tuning ended after {draw} draw{plural}, within the "
        f"warm-up ({length} draws: {why}), so {name}'s own adaptation never started and "
        "the chain samples with the warm-up's tuned random walk.  Tune for more than "
        f"{length} draws (pm.sample's default tune=1000 does) or give warmup_draws below "
        "the number of tuning draws.", UserWarning, stacklevel=2)
