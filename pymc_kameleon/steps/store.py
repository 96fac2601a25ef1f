"""One stored log-density value per model and chain, shared by this package's steps.

A pseudo-marginal chain is exact only if the estimate at the current point is stored and
never re-estimated.  When a model is sampled in blocks (a ``CompoundStep`` of several of our
steps), each block's step sees the point after the other blocks moved; its own stored
value belongs to an older point.  Re-estimating there would be Monte Carlo within
Metropolis.  Instead, every step of this package records the value it accepted together
with the *full* point (all model variables) it belongs to, and the next step of the same
model and chain finds it there: a block-wise sampler of ours is then a valid
pseudo-marginal Gibbs scheme (each block is an exact MH update of the extended target).

Chains in separate processes have separate copies of the model and hence separate stores;
chains run one after the other in one process cannot mix values up, because a value is
only used for the exact full point it was computed at, and with the same model data: the
key also holds a fingerprint of the values of the log density's shared variables
(``pm.Data``, a tempering ``pytensor.shared``; :func:`data_fingerprint`), taken at the start
of each chain, so that after ``pm.set_data`` a new run never picks up a value of the old
data.
"""

from __future__ import annotations

import hashlib
import warnings
import weakref
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from pymc.blocking import DictToArrayBijection

from ..pseudo_marginal import PseudoMarginalWarning

__all__ = ["PointSync", "SharedEstimate", "data_fingerprint", "point_key"]

_STORES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def point_key(point: dict) -> bytes:
    """Bytes identifying a full point exactly (names, dtypes and values)."""
    parts = []
    for name in sorted(point):
        value = np.ascontiguousarray(point[name])
        # dtype.str ('<f8'): a cached attribute, where str(dtype) formats a new string
        # for every variable of every draw
        parts += [name.encode(), value.dtype.str.encode(), value.tobytes()]
    return b"\0".join(parts)


def data_fingerprint(fn, exclude: Iterable = ()) -> bytes:
    """A 16-byte digest of the values of the tensor shared variables of a compiled PyTensor
    function ``fn`` (the model's data), leaving out those in ``exclude`` (a step's
    replacements of the variables outside its block: they are part of the point) and random
    generators.  Empty if ``fn`` does not list its shared variables."""
    get_shared = getattr(fn, "get_shared", None)
    if get_shared is None:
        return b""
    skip = {id(v) for v in exclude}
    digest = hashlib.blake2b(digest_size=16)
    for var in get_shared():
        if id(var) in skip or not hasattr(var.type, "ndim"):  # TensorType only
            continue
        value = np.ascontiguousarray(var.get_value(borrow=True))
        digest.update(f"{var.name}|{value.dtype.str}|{value.shape}|".encode())
        digest.update(value.tobytes())
    return digest.digest()


@dataclass
class SharedEstimate:
    """The last accepted (full point, log density) of a model in this process."""

    key: bytes = b""
    logp: float = float("nan")

    @classmethod
    def for_model(cls, model) -> SharedEstimate:
        """The store of ``model`` (created on first use)."""
        try:
            return _STORES.setdefault(model, cls())
        except TypeError:  # not weak-referenceable: a private store
            return cls()

    def get(self, key: bytes) -> float | None:
        return self.logp if key and key == self.key else None

    def put(self, key: bytes, logp: float) -> None:
        self.key, self.logp = key, float(logp)


class PointSync:
    """Keeps a chain's stored value matched to the full point PyMC passes a step.

    The chain's record (``x``, ``logp``, ``key``, ``data_key``, ``noisy``) is the step's;
    this object computes the keys, shares the value through the model's
    :class:`SharedEstimate` and re-evaluates where another step moved variables outside
    the block without a shared value.

    Parameters
    ----------
    store : SharedEstimate
        The model's store.
    fingerprint : callable
        ``fingerprint()``: the digest of the model's data (:func:`data_fingerprint`).
    name : str
        The step's name and variables, for messages.
    """

    def __init__(self, store: SharedEstimate, fingerprint, name: str = ""):
        self.store = store
        self.fingerprint = fingerprint
        self.name = name
        self.warned = False  # the re-estimation warning, once per step

    def key(self, record, point: dict) -> bytes:
        """The key of ``point`` (a new chain takes the data's fingerprint first: the data
        may have changed since the last one)."""
        if record.x is None:
            record.data_key = self.fingerprint()
        return point_key(point) + record.data_key

    def refresh(self, record, x: np.ndarray, key: bytes, stored: float | None,
                logp) -> int:
        """Another step moved variables outside the block: the chain is at ``x`` with the
        stored value of ``key`` or one new value of ``logp``; return evaluations spent."""
        record.x = x
        if stored is not None:
            record.logp, record.key = stored, key
            return 0
        record.logp, record.key = logp(x), key  # -inf is the state's value: never raise here
        if record.noisy and not self.warned:
            self.warned = True
            warnings.warn(
                f"{self.name}: another step method changed variables "
                "outside this block without sharing the stored likelihood estimate, so it was "
                "re-estimated (Monte Carlo within Metropolis): the chain does not target the "
                "exact posterior. Sample every continuous variable with steps of this package "
                "(they share the stored estimate).",
                PseudoMarginalWarning,
                stacklevel=3,
            )
        return 1

    def remember(self, record, new, point: dict) -> None:
        """Key the stored value on the full point PyMC will pass next (``new``, the block's
        raveled values, in ``point``), and share it."""
        full = DictToArrayBijection.rmap(new, start_point=dict(point))
        record.key = point_key(full) + record.data_key
        self.store.put(record.key, record.logp)
