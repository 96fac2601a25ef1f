"""Where KameleonSMC's particles start: proper priors, exact draws, finite densities.

SMC starts from prior draws and tempers from them, so the prior must be proper and its
draws must be draws: :func:`check_proper_priors` refuses flat priors,
:func:`prior_draws_replace_initvals` makes every particle a prior draw where PyMC would
start them all at an ``initval``, :func:`sorted_ordered_draws` draws iid priors under an
``ordered`` transform exactly (PyMC's draws ignore the ordering), and
:func:`check_start_finite` stops a run whose start has no finite density.
"""

from __future__ import annotations

import warnings

import numpy as np
from pymc.model import modelcontext

__all__ = ["check_proper_priors", "check_start_finite", "prior_draws_replace_initvals",
           "sortable_ordered", "sorted_ordered_draws", "value_transforms"]


def check_proper_priors(model=None) -> None:
    """Raise if a free variable has a flat (improper) prior, which SMC cannot start from.

    SMC draws its first particles from the prior and tempers from it; a ``pm.Flat`` or
    ``pm.HalfFlat`` prior has no draws and no normalising constant (PyMC fails later with
    "Cannot sample from flat variable").

    Raises
    ------
    ValueError
        Naming every such variable and what to give it instead.
    """
    model = modelcontext(model)
    flat = [
        rv.name for rv in model.free_RVs
        if type(rv.owner.op).__name__ in ("FlatRV", "HalfFlatRV")
    ]
    if flat:
        raise ValueError(
            f"KameleonSMC starts from the prior, but {', '.join(map(repr, flat))} "
            f"{'has' if len(flat) == 1 else 'have'} a flat (improper) prior, which cannot be "
            "sampled and has no evidence. Give each a proper prior that covers the plausible "
            "values (e.g. pm.Normal(name, 0, 10) instead of pm.Flat, pm.HalfNormal(name, 10) "
            "instead of pm.HalfFlat), or keep the flat prior and sample with pm.sample and a "
            "step method such as pymc_kameleon.KameleonStep (see docs/smc.md)."
        )


def value_transforms(model) -> dict[str, str]:
    """The transform's name of every free variable, by its value variable's name."""
    out = {}
    for rv in model.free_RVs:
        transform = model.rvs_to_transforms.get(rv)
        out[model.rvs_to_values[rv].name] = (
            "none" if transform is None else type(transform).__name__.lower())
    return out


def sortable_ordered(model) -> dict[str, tuple]:
    """Free variables under an ``ordered`` transform whose prior draws can simply be sorted.

    PyMC draws the prior without the ordering constraint, so the transformed draws are NaN.
    For a prior that is iid along the ordered axis (every parameter broadcast along it),
    drawn independently of the other free variables and on which none of them depends,
    sorted iid draws are exact draws of the ordered prior (the order statistics).
    """
    from pymc.distributions.transforms import Ordered

    try:
        from pytensor.graph.traversal import ancestors
    except ImportError:  # PyTensor < 2.32
        from pytensor.graph.basic import ancestors

    free = set(model.free_RVs)
    out = {}
    for rv in model.free_RVs:
        transform = model.rvs_to_transforms.get(rv)
        if not isinstance(transform, Ordered) or not hasattr(rv.owner.op, "dist_params"):
            continue
        params = rv.owner.op.dist_params(rv.owner)
        iid = all(p.type.ndim < rv.type.ndim or p.type.broadcastable[-1] for p in params)
        independent = not (set(ancestors(params)) & free)
        others = [o for o in model.free_RVs if o is not rv]
        no_children = rv not in set(ancestors([i for o in others for i in o.owner.inputs]))
        if iid and independent and no_children:
            out[model.rvs_to_values[rv].name] = (rv, transform)
    return out


def sorted_ordered_draws(population: dict, ordered: dict, draws: int,
                         rng: np.random.Generator) -> dict:
    """``population`` (PyMC's prior draws) with each variable of ``ordered``
    (:func:`sortable_ordered`) drawn anew and sorted, in its transformed space."""
    import pymc as pm
    import pytensor.tensor as pt

    for name, (rv, transform) in ordered.items():
        x = np.sort(pm.draw(rv, draws=draws, random_seed=rng), axis=-1)
        if not getattr(transform, "ascending", True):
            x = x[..., ::-1]
        population[name] = transform.forward(pt.as_tensor(x)).eval()
    return population


def prior_draws_replace_initvals(model):
    """PyMC's expression of the prior draws, ignoring ``initval``s, with a warning; None
    where no free variable has one.

    PyMC's SMC starts all particles of such a variable at the initval, which the first
    reweighting treats as prior draws: the particles stay one point (sd 0) and look
    converged.  SMC's weights and evidence need prior draws.
    """
    given = [rv.name for rv, v in model.rvs_to_initial_values.items()
             if v is not None and not isinstance(v, str)]
    if not given:
        return None
    from pymc.initial_point import make_initial_point_expression

    warnings.warn(
        f"KameleonSMC starts every particle from the prior: the initval of "
        f"{', '.join(map(repr, given))} is not used (SMC's weights and evidence need prior "
        "draws; pass start= to choose the particles yourself).", UserWarning, stacklevel=3)
    return make_initial_point_expression(
        free_rvs=model.free_RVs, rvs_to_transforms=model.rvs_to_transforms,
        initval_strategies={}, default_strategy="prior", return_transformed=True)


def check_start_finite(X: np.ndarray, prior: np.ndarray, lik: np.ndarray, layout: dict,
                       transforms: dict[str, str], given: bool) -> None:
    """Stop when most starting particles have no finite log density: tempering would
    start from a handful of particles, or none, and return them looking converged.

    Parameters
    ----------
    X, prior, lik : numpy.ndarray
        The starting particles (rows) and their prior and likelihood terms.
    layout : dict
        ``name: size`` of the value variables in the order of ``X``'s columns.
    transforms : dict
        :func:`value_transforms`.
    given : bool
        Whether the particles were given as ``start=`` (else PyMC's prior draws).
    """
    finite = np.isfinite(prior) & np.isfinite(lik)
    if finite.mean() >= 0.5:
        return
    culprits, offset = [], 0
    for name, size in layout.items():
        bad = ~np.isfinite(X[:, offset:offset + size]).all(axis=1)
        offset += size
        if bad.mean() > 0.5:
            culprits.append(f"{name!r} (transform {transforms.get(name)}: "
                            f"{bad.mean():.0%} of its draws are not finite)")
    where = "the starting points given as start=" if given else "PyMC's prior draws"
    hint = (
        "PyMC draws a prior without its transform's constraint (an `ordered` prior's draws "
        "are not ordered): give the variable a prior whose draws satisfy it (e.g. an iid "
        "prior with transform=ordered, which KameleonSMC sorts; or the cumulative sum of "
        "positive increments)" if culprits else
        "the prior puts most of its mass where the likelihood is not finite: make the "
        "prior narrower, or the likelihood return finite values there")
    raise ValueError(
        f"KameleonSMC: the log density is not finite at {np.sum(~finite)} of "
        f"{len(finite)} of {where}"
        + (f", because of {', '.join(culprits)}" if culprits else "")
        + f". SMC cannot start from them: {hint}.")
