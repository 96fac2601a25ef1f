"""The messages a step gives the user about its setup (errors and warnings)."""

from __future__ import annotations

import math
import warnings

from pymc.stats.convergence import SamplerWarning, WarningType
from pymc.vartypes import discrete_types

__all__ = ["discrete_message", "sampler_never_started", "tuning_draws_warning",
           "work_bound_warning"]


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


def tuning_draws_warning(name: str, var_names, ran: int, assumed: int) -> None:
    """A ``UserWarning`` that a chain ran ``ran`` tuning draws where the step, not told the
    number (PyMC 5), planned its tuning for ``assumed`` (``pm.sample``'s default)."""
    plural = "" if ran == 1 else "s"
    warnings.warn(
        f"{name}{list(var_names)}: this chain ran {ran} tuning draw{plural}, but PyMC 5 does not "
        f"tell a step how many, so the step planned its tuning for {assumed} "
        f"(pm.sample's default tune={assumed}): its warm-up took half of {assumed} draws "
        "and its later adaptation was scheduled for the rest.  Pass "
        f"tune_draws={ran} to the step (the tune given to pm.sample).",
        UserWarning, stacklevel=2)


def work_bound_warning(name: str, asked: float, bound: float, n_steps: int,
                       tau: float) -> SamplerWarning:
    """The report (PyMC's ``warning`` stat) that the autocorrelation late in tuning asked for
    ``asked`` times the default iterations per draw, more than the ``bound`` the chain now
    runs at (``n_steps`` iterations per draw after tuning; ``tau`` the autocorrelation time
    per draw measured at the default work): its draws will mix more slowly than the step
    aims for, which R-hat and ESS show only after sampling (docs/tuning.md, "Work per
    draw")."""
    if math.isfinite(asked):
        message = (
            f"{name}: in this chain the draws' autocorrelation late in tuning asked for at "
            f"least {asked:.1f} times the default iterations per draw, more than the bound "
            f"({bound:g} times, {n_steps} iterations per draw).  At the bound each draw is "
            f"autocorrelated over at least {tau / bound:.1f} draws, so the bulk ESS will be "
            "at most about the number of draws divided by that (a short window measures "
            f"long times short).  To fix it, raise max_work_factor to {math.ceil(asked)} "
            f"or more (n_steps={math.ceil(n_steps * asked / bound)}), or draw more; a "
            "reparameterisation that makes the posterior closer to Gaussian helps most.")
    else:
        message = (
            f"{name}: in this chain a coordinate did not move in the last tuning draws, so the "
            f"work per draw stays at its bound ({bound:g} times, {n_steps} iterations per "
            "draw) and the chain may be stuck.  Check the start and the model, or tune "
            "longer.")
    return SamplerWarning(WarningType.CONVERGENCE, message, "warn",
                          extra={"asked": asked, "bound": bound, "n_steps": n_steps})
