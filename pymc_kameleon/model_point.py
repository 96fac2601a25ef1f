"""A point of the sampler's space in the model's own variables, for messages.

Samplers move the model's value variables (``sigma_log__``); a user reads their model's
variables (``sigma``).  :class:`ModelPoint` maps a raveled point of value variables to the
model's variables, untransformed, with the layout that
:func:`pymc_kameleon.failures.format_point` prints.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["ModelPoint"]


class ModelPoint:
    """Raveled values of some value variables -> the model's own variables.

    Parameters
    ----------
    model : pymc.Model
    layout : sequence of (name, shape, size)
        The value variables in the raveled order (PyMC's ``point_map_info``).

    A variable whose transform depends on a variable outside ``layout`` keeps its value
    variable's name and value.  The function is compiled at the first call.
    """

    def __init__(self, model, layout: Sequence[tuple]):
        self.model = model
        self.layout = [(name, tuple(shape), int(size)) for name, shape, size, *_ in layout]
        self._fn = None
        self.info: list[tuple] | None = None  # the model variables' layout

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_fn": None, "info": None}  # compiled again where needed

    def _compile(self) -> None:
        from pymc.pytensorf import compile as compile_fn

        try:
            from pytensor.graph.traversal import graph_inputs
        except ImportError:  # PyTensor < 2.32
            from pytensor.graph.basic import graph_inputs
        from pytensor.graph.basic import Constant
        from pytensor.tensor.sharedvar import SharedVariable

        model = self.model
        values = {v.name: v for v in model.value_vars}
        inputs = [values[name] for name, *_ in self.layout]
        allowed = set(inputs)
        names, outputs = [], []
        for rv in model.free_RVs:
            value = model.rvs_to_values[rv]
            if value not in allowed:
                continue
            out = value
            if model.rvs_to_transforms.get(rv) is not None:
                [back] = model.replace_rvs_by_values([rv])
                free = {v for v in graph_inputs([back])
                        if not isinstance(v, Constant | SharedVariable)}
                if free <= allowed:
                    out = back
            names.append(rv.name if out is not value else value.name)
            outputs.append(out)
        self._fn = compile_fn(inputs, outputs, on_unused_input="ignore")
        self._names, self._dtypes = names, [v.dtype for v in inputs]

    def values(self, x: np.ndarray) -> dict[str, np.ndarray]:
        """The model's variables at the raveled point ``x``."""
        if self._fn is None:
            self._compile()
        args, start = [], 0
        for (_, shape, size), dtype in zip(self.layout, self._dtypes, strict=True):
            args.append(np.asarray(x[start:start + size], dtype=dtype).reshape(shape))
            start += size
        out = {name: np.asarray(v) for name, v in
               zip(self._names, self._fn(*args), strict=True)}
        if self.info is None:
            self.info = [(k, v.shape, v.size) for k, v in out.items()]
        return out

    def ravel(self, x: np.ndarray) -> np.ndarray:
        """The model's variables at ``x``, raveled in the order of :attr:`info`."""
        return np.concatenate([np.ravel(v).astype(float) for v in self.values(x).values()])
