"""Sphinx configuration of the pymc-kameleon documentation.

Build it with the one command that README.md documents (and ``.ci/run`` executes)::

    pip install ".[docs]" && sphinx-build -E -W --keep-going -b html docs docs/_build/html

Pages are MyST markdown; the API reference is generated from the numpy-style docstrings by
autodoc + numpydoc.  Nothing is executed at build time except importing the package.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pymc_kameleon

DOCS = Path(__file__).resolve().parent

# -- project -------------------------------------------------------------------------------
project = "pymc-kameleon"
author = "pymc-kameleon developers"
copyright = "pymc-kameleon developers"
release = pymc_kameleon.__version__
version = release

# -- general -------------------------------------------------------------------------------
extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
]
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
root_doc = "index"

# MyST: $...$ and $$...$$ math, amsmath environments, ::: fences, definition lists, and
# anchors for headings (so that pages can link to ``page.md#a-heading``).
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3

# autodoc + numpydoc: the docstrings carry the types, so signatures stay short.
autodoc_member_order = "bysource"
autodoc_typehints = "none"
autodoc_preserve_defaults = True
autodoc_inherit_docstrings = False  # no PyTensor docstrings for Op.perform & co.
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False

# -- HTML ----------------------------------------------------------------------------------
html_theme = "furo"
html_title = f"pymc-kameleon {release}"
html_static_path: list[str] = []


# -- generated benchmark pages -------------------------------------------------------------
# The benchmark scripts write result pages into docs/benchmarks/ (full/, quick/, ...), and
# docs/benchmarks/README.md links to them.  Whichever of them exist must be in a toctree
# (otherwise Sphinx warns, and -W fails), but a glob pattern that matches nothing is itself a
# warning.  So when README.md has no toctree of its own, a hidden glob toctree of all the
# other pages under docs/benchmarks/ is appended to it at read time (the file is not
# modified), and only if there is at least one such page.
def _benchmark_pages() -> list[Path]:
    root = DOCS / "benchmarks"
    return [p for p in sorted(root.rglob("*.md")) if p != root / "README.md"]


def _add_benchmark_toctree(app, docname: str, source: list[str]) -> None:
    text = source[0]
    has_toctree = "{toctree}" in text or ".. toctree::" in text
    if docname != "benchmarks/README" or has_toctree or not _benchmark_pages():
        return
    source[0] = text + "\n\n```{toctree}\n:hidden:\n:glob:\n\n**\n```\n"


# -- module docstrings ---------------------------------------------------------------------
# numpydoc parses the docstrings of classes and functions, not those of modules, where a
# numpy-style heading ("References" underlined with dashes) would become a document section
# (duplicate section ids across modules).  Render such headings as rubrics instead.
def _module_headings_as_rubrics(app, what, name, obj, options, lines: list[str]) -> None:
    if what != "module":
        return
    for i in range(len(lines) - 1):
        title, rule = lines[i].strip(), lines[i + 1].strip()
        if title and len(rule) >= 3 and set(rule) == {"-"} and len(rule) >= len(title):
            lines[i], lines[i + 1] = f".. rubric:: {title}", ""


# -- step method signatures ----------------------------------------------------------------
# PyMC's BlockedStep defines ``__new__(cls, *args, **kwargs)``, which autodoc would show as
# the signature of every step method; show the parameters of ``__init__`` instead.
def _init_signature(app, what, name, obj, options, signature, return_annotation):
    if what != "class" or signature != "(*args, **kwargs)":
        return None
    sig = inspect.signature(obj.__init__)
    params = [p.replace(annotation=p.empty) for p in list(sig.parameters.values())[1:]]
    return str(sig.replace(parameters=params, return_annotation=sig.empty)), None


def setup(app):
    app.connect("source-read", _add_benchmark_toctree)
    app.connect("autodoc-process-docstring", _module_headings_as_rubrics)
    app.connect("autodoc-process-signature", _init_signature)
    return {"parallel_read_safe": True}
