"""The modules of ``pymc_kameleon`` import one another without a cycle, and all import.

With a cycle, what a module sees of another depends on which of them is imported first
(a name missing from a half-initialised module).  The graph is read from the source with
:mod:`ast`: an edge for every import of a package module, at module level or inside a
function (an import deferred into a function to break a cycle still is one), but not under
``if TYPE_CHECKING:`` (never executed).  A package's ``__init__`` is the node of the package;
importing ``a.b`` runs ``a/__init__`` first, which is Python's rule, not an edge.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = "pymc_kameleon"


def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    found = {}
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """The import statements of a module, outside ``if TYPE_CHECKING:`` blocks."""
    found = []
    stack = [tree]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                stack.extend(child.orelse)
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                found.append(child)
            stack.append(child)
    return found


def _edges(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules that ``name`` imports."""
    is_package = path.name == "__init__.py"
    targets = set()
    for node in _imports(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            bases = [alias.name for alias in node.names]
            names: list[str] = []
        else:
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                bases = [".".join([*anchor, *([node.module] if node.module else [])])]
            else:
                bases = [node.module or ""]
            names = [alias.name for alias in node.names]
        for base in bases:
            if not base.startswith(PACKAGE):
                continue
            # "from .x import y" imports the module x.y when there is one, else x
            subs = [f"{base}.{n}" for n in names if f"{base}.{n}" in modules]
            if subs:
                targets.update(subs)
            if len(subs) < len(names) or not names:
                while base not in modules:  # "import a.b.c" of a name inside a module
                    base = base.rpartition(".")[0]
                targets.add(base)
    targets.discard(name)
    return targets


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of the graph, as the list of its modules, or ``None``."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt):], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_module_graph_has_no_cycle():
    modules = _modules()
    graph = {name: _edges(name, path, modules) for name, path in modules.items()}
    # the graph is read right: the moved modules import what they use
    assert "pymc_kameleon.parallel.pickling" in graph["pymc_kameleon.parallel.batch"]
    assert "pymc_kameleon.parallel.plugin" in graph["pymc_kameleon.parallel.batch"]
    assert "pymc_kameleon.parallel.chains" in graph["pymc_kameleon.distributed"]
    assert "pymc_kameleon.adaptation.local_gaussian_base" in graph[
        "pymc_kameleon.adaptation.kameleon"]
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_finds_a_cycle_through_a_deferred_import():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycle(graph) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
    tree = ast.parse("def f():\n    from .b import g\nif TYPE_CHECKING:\n    from .c import h\n")
    assert [n.module for n in _imports(tree)] == ["b"]


def test_every_module_imports_in_a_fresh_interpreter():
    names = sorted(_modules())
    code = ("import importlib, sys\n"
            "for name in sys.argv[1:]:\n"
            "    importlib.import_module(name)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    result = subprocess.run([sys.executable, "-c", code, *names], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
