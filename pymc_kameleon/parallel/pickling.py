"""Pickle objects for another process: compiled PyTensor functions, model factories.

:func:`dumps` is cloudpickle, except that ``as_op`` Ops are sent with their function (by
value when it was defined in a script's ``__main__``), so that a worker process can load
them.  :class:`~.batch.BatchEvaluator` sends its compiled functions with it,
:func:`pymc_kameleon.distributed.sample` its factories, and
:class:`~pymc_kameleon.KameleonSMC` pickles itself with it.
"""

from __future__ import annotations

import io
import pickle
import types

import cloudpickle
from pytensor.compile.ops import FromFunctionOp

from ..compat import from_function_op_args

__all__ = ["dumps"]


def _code_with_filename(make, args, filename: str) -> types.CodeType:
    return make(*args).replace(co_filename=filename)


class _OpByValuePickler(cloudpickle.CloudPickler):
    """cloudpickle, except that ``as_op``/``wrap_py`` Ops are pickled with their function,
    and functions sent by value keep their file name.

    PyTensor pickles such an Op by reference to its module-level name, which a worker process
    cannot import when the Op was defined in a script's ``__main__``.  Rebuilding it from the
    function (which cloudpickle sends by value) gives an equal Op in the worker.  cloudpickle
    names the file of a function sent by value ``<dynamic-code>``; a traceback from the
    worker then shows neither the user's file nor the line, so the name is kept.
    """

    def reducer_override(self, obj):
        if type(obj) is FromFunctionOp:
            return FromFunctionOp, from_function_op_args(obj)
        if type(obj) is types.CodeType:
            make, args = self.dispatch_table[types.CodeType](obj)
            return _code_with_filename, (make, args, obj.co_filename)
        return super().reducer_override(obj)


def dumps(obj) -> bytes:
    """Pickle ``obj`` (compiled PyTensor functions included) for another process."""
    buffer = io.BytesIO()
    _OpByValuePickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buffer.getvalue()
