"""Step state as PyMC ``DataClassState`` trees.

PyMC saves, compares and restores a step's state through ``sampling_state``
(:mod:`pymc.step_methods.state`): every piece must be a ``DataClassState``, an array, a
generator state or a plain value, so that ``equal_dataclass_values`` can compare two states
and ``deepcopy`` can snapshot one.  The numerical objects of this package live in modules
that do not import PyMC (plain dataclasses), so :func:`to_state` converts any tree of them
into :class:`ObjectState` / :class:`ScalarState` nodes and :func:`from_state` rebuilds it.
Floats become 0-d arrays so that ``nan == nan`` compares equal, as PyMC's array comparison
does.
"""

from __future__ import annotations

import importlib
from dataclasses import MISSING, fields, is_dataclass
from typing import Any

import numpy as np
from pymc.step_methods.compound import StepMethodState
from pymc.step_methods.state import DataClassState, dataclass_state
from pymc.util import (
    RandomGeneratorState,
    get_state_from_generator,
    random_generator_from_state,
)

from ..pseudo_marginal import estimator_states, set_estimator_states

__all__ = ["KernelStepState", "ObjectState", "ScalarState", "from_state", "restore_state",
           "save_state", "to_state"]


@dataclass_state
class ObjectState(DataClassState):
    """A plain dataclass instance: its class (module, qualified name) and field values."""

    module: str
    qualname: str
    values: dict


@dataclass_state
class ScalarState(DataClassState):
    """A Python float (as a 0-d array, so that NaN compares equal to NaN)."""

    value: np.ndarray


@dataclass_state
class KernelStepState(StepMethodState):
    """Everything a step of this package changes while sampling one chain."""

    tune: bool
    chain: Any  # the per-chain state tree (position, stored log density, adaptation)
    estimators: Any  # generator states of the likelihood estimators in the log density


def to_state(obj: Any) -> Any:
    """Convert a tree of dataclasses, containers, arrays and generators to state nodes."""
    if isinstance(obj, DataClassState):
        return obj
    if isinstance(obj, np.random.Generator):
        return get_state_from_generator(obj)
    if isinstance(obj, float):
        return ScalarState(value=np.array(obj))
    if isinstance(obj, np.ndarray):
        return obj.copy(order="K")  # the layout too: BLAS results depend on it
    if is_dataclass(obj) and not isinstance(obj, type):
        cls = type(obj)
        values = {f.name: to_state(getattr(obj, f.name)) for f in fields(obj)}
        return ObjectState(module=cls.__module__, qualname=cls.__qualname__, values=values)
    if isinstance(obj, dict):
        return {k: to_state(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):  # noqa: UP038
        return type(obj)(to_state(v) for v in obj)
    return obj


def from_state(state: Any) -> Any:
    """Inverse of :func:`to_state` (fresh objects; the state is not modified).

    A dataclass field the state does not hold (a state saved before the field was added)
    gets the field's default; a field without a default raises ``ValueError``.
    """
    if isinstance(state, ScalarState):
        return float(state.value)
    if isinstance(state, RandomGeneratorState):
        return random_generator_from_state(state)
    if isinstance(state, ObjectState):
        cls = importlib.import_module(state.module)
        for part in state.qualname.split("."):
            cls = getattr(cls, part)
        obj = cls.__new__(cls)
        for name, value in state.values.items():
            object.__setattr__(obj, name, from_state(value))
        if is_dataclass(cls):
            _fill_missing_fields(obj, state)
        return obj
    if isinstance(state, np.ndarray):
        return state.copy(order="K")
    if isinstance(state, dict):
        return {k: from_state(v) for k, v in state.items()}
    if isinstance(state, (list, tuple)):  # noqa: UP038
        return type(state)(from_state(v) for v in state)
    return state


def _fill_missing_fields(obj: Any, state: ObjectState) -> None:
    """Give ``obj`` the defaults of the dataclass fields that ``state`` does not hold."""
    for f in fields(obj):
        if f.name in state.values:
            continue
        if f.default is not MISSING:
            value = f.default
        elif f.default_factory is not MISSING:
            value = f.default_factory()
        else:
            raise ValueError(
                f"the saved state of {state.qualname} has no value for its field {f.name!r} "
                "(saved by another version of pymc-kameleon?)"
            )
        object.__setattr__(obj, f.name, value)


def save_state(vars, rng: np.random.Generator, tune: bool, logp_fn,
               chain: dict) -> KernelStepState:
    """A step's ``sampling_state``: its variables, generator, tuning flag, the per-chain
    tree ``chain`` and the states of the likelihood estimators in ``logp_fn``."""
    return KernelStepState(var_names=[v.name for v in vars], rng=get_state_from_generator(rng),
                           tune=tune, chain=to_state(chain),
                           estimators=to_state(estimator_states(logp_fn)))


def restore_state(state: KernelStepState, vars, logp_fn) -> tuple[np.random.Generator, bool,
                                                                    dict]:
    """Check ``state`` belongs to ``vars``, restore the estimators' states in ``logp_fn``;
    return the generator, the tuning flag and the per-chain tree."""
    if not isinstance(state, KernelStepState):
        raise TypeError(f"expected a KernelStepState, got {type(state).__name__}")
    names = [v.name for v in vars]
    if list(state.var_names) != names:
        raise ValueError(f"the state belongs to variables {state.var_names}, not {names}")
    set_estimator_states(logp_fn, from_state(state.estimators))
    return from_state(state.rng), bool(state.tune), from_state(state.chain)
