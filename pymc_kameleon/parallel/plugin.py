"""The Dask worker plugin that gives each worker process its own PyTensor compilation directory.

PyTensor reads ``base_compiledir`` once, at import, and its default directory is shared by
every process of a user (often on a network file system on clusters, where its file lock is
unreliable).  :func:`register_compiledir_plugin` registers a plugin, pickled by value so that
loading it imports neither PyTensor nor this package, which sets ``base_compiledir`` in
``PYTENSOR_FLAGS`` of every worker process that has not imported PyTensor yet.  Used by
:func:`pymc_kameleon.distributed.sample` and by :class:`~.batch.BatchEvaluator` on a Dask
client.
"""

from __future__ import annotations

from typing import Any

__all__ = ["register_compiledir_plugin"]

#: Name of the worker plugin that chooses the PyTensor compilation directory.
_PLUGIN_NAME = "pymc-kameleon-pytensor-compiledir"
#: Environment variable in which the plugin records the directory it chose.
_COMPILEDIR_ENV = "PYMC_KAMELEON_COMPILEDIR"


def _compiledir_plugin(root: str | None) -> Any:
    """A worker plugin that gives each worker process its own PyTensor ``base_compiledir``.

    The class is defined here, inside a function, so that (cloud)pickle sends it by value:
    loading it in a worker imports neither this package nor PyTensor, which must not be
    imported before ``PYTENSOR_FLAGS`` is set.
    """
    from distributed.diagnostics.plugin import WorkerPlugin

    class PyTensorCompiledir(WorkerPlugin):
        name = _PLUGIN_NAME

        def __init__(self, root, env_name):
            self.root = root
            self.env_name = env_name

        def setup(self, worker):
            import os
            import re
            import sys

            if "pytensor" in sys.modules:
                return  # too late: PyTensor has read its flags
            items = [s for s in os.environ.get("PYTENSOR_FLAGS", "").split(",") if s.strip()]
            keys = {s.split("=", 1)[0].strip() for s in items}
            if self.root is None:
                if keys & {"base_compiledir", "compiledir"}:
                    return  # the cluster's own choice (e.g. set in the job script)
                # Dask's scratch space (node-local if configured so), next to the worker's
                # own directory, which Dask deletes while PyTensor still uses it at exit.
                root = os.path.join(os.path.dirname(os.path.abspath(worker.local_directory)),
                                    "pymc-kameleon-pytensor")
            else:
                root = os.path.expanduser(os.path.expandvars(self.root))
            name = re.sub(r"[^A-Za-z0-9_.-]", "_", str(worker.name))
            path = os.path.join(root, f"worker-{name}")
            if "," in path:
                return  # cannot be written into PYTENSOR_FLAGS
            items = [s for s in items
                     if s.split("=", 1)[0].strip() not in ("base_compiledir", "compiledir")]
            os.environ["PYTENSOR_FLAGS"] = ",".join([*items, f"base_compiledir={path}"])
            os.environ[self.env_name] = path

    return PyTensorCompiledir(root, _COMPILEDIR_ENV)


def register_compiledir_plugin(client: Any, root: str | None) -> None:
    """Give every worker process of ``client`` its own PyTensor ``base_compiledir`` under
    ``root`` (``None``: Dask's scratch space), unless PyTensor is already imported there."""
    plugin = _compiledir_plugin(root)
    if hasattr(client, "register_plugin"):
        client.register_plugin(plugin, name=_PLUGIN_NAME)
    else:  # distributed < 2023.9
        client.register_worker_plugin(plugin, name=_PLUGIN_NAME)
