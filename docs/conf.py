"""Sphinx configuration of the pymc-kameleon documentation.

Build it with the one command that README.md documents (and ``.ci/run`` executes)::

    pip install ".[docs]" && sphinx-build -E -W --keep-going -b html docs docs/_build/html

Pages are MyST markdown; the API reference is generated from the numpy-style docstrings by
autodoc + numpydoc.  The example pages under ``docs/examples/`` are MyST notebooks that
myst-nb executes at every build (they sample small models: a few tens of seconds in all),
so their output, tables and figures always come from the code shown.  Formulas are
converted to MathML at build time (``_ext/mathml.py``): the site loads no script from a CDN.
"""

from __future__ import annotations

import inspect
import re
import sys
from pathlib import Path

import pymc_kameleon

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))

# -- project -------------------------------------------------------------------------------
project = "pymc-kameleon"
author = "pymc-kameleon developers"
copyright = "pymc-kameleon developers"
release = pymc_kameleon.__version__
version = release

# -- general -------------------------------------------------------------------------------
extensions = [
    "myst_nb",  # MyST markdown pages (it includes myst_parser) and executed notebooks
    "sphinx.ext.autodoc",
    "sphinx.ext.viewcode",
    "numpydoc",
    "mathml",  # docs/_ext/mathml.py
]
exclude_patterns = ["_build", "_ext", "jupyter_execute", "Thumbs.db", ".DS_Store"]
root_doc = "index"

# MyST: $...$ and $$...$$ math, amsmath environments, ::: fences, definition lists, and
# anchors for headings (so that pages can link to ``page.md#a-heading``).
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3

# myst-nb: execute every notebook page at each build, in its own folder, and fail the build
# (with -W) if a cell raises.  Warnings a cell prints are shown on the page as they would be
# to a user.
nb_execution_mode = "force"
nb_execution_timeout = 600
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True

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
html_math_renderer = "mathml"  # formulas as MathML at build time, no MathJax from a CDN


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


# -- inherited step arguments --------------------------------------------------------------
# The step classes document the arguments they share with every step (n_steps, warmup_draws,
# laplace; model, rng, ...) by one line pointing to the base class, which is not part of the
# public API.  So that each step's page lists every argument it takes, such a grouped entry
# is replaced, before numpydoc renders it, by the base class's own entries for those names;
# a step-specific remark after the pointer ("See ...BaseKernelStep.  A given n_steps ...")
# is kept under the first of them.
_GROUPED = re.compile(r"^(\w+(?:, \w+)+)$")
_POINTER = re.compile(
    r"^(See :class:`~pymc_kameleon\.steps\.base\.BaseKernelStep`|As for every PyMC step method)"
)


def _base_parameters() -> dict[str, tuple[str, list[str]]]:
    from numpydoc.docscrape import NumpyDocString

    from pymc_kameleon.steps.base import BaseKernelStep

    doc = NumpyDocString(inspect.getdoc(BaseKernelStep))
    return {p.name: (p.type, list(p.desc)) for p in doc["Parameters"]}


def _expand_inherited_parameters(app, what, name, obj, options, lines: list[str]) -> None:
    from pymc_kameleon.steps.base import BaseKernelStep

    if what != "class" or not (inspect.isclass(obj) and issubclass(obj, BaseKernelStep)):
        return
    base = _base_parameters()
    out: list[str] = []
    i = 0
    while i < len(lines):
        match = _GROUPED.match(lines[i])
        names = match.group(1).split(", ") if match else []
        desc_end = i + 1
        while desc_end < len(lines) and lines[desc_end].startswith("    "):
            desc_end += 1
        desc = " ".join(line.strip() for line in lines[i + 1 : desc_end])
        pointer = _POINTER.match(desc)
        if not names or not pointer or not all(n in base for n in names):
            out.append(lines[i])
            i += 1
            continue
        remark = desc[pointer.end() :]
        remark = remark[1:].strip() if remark.startswith(".") else ""
        for k, n in enumerate(names):
            ptype, pdesc = base[n]
            out.append(f"{n} : {ptype}" if ptype else n)
            out.extend("    " + line if line else "" for line in pdesc)
            if k == 0 and remark:
                out.extend(["", "    For this step: " + remark])
        i = desc_end
    lines[:] = out


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
    # before numpydoc (priority 500) parses the Parameters section
    app.connect("autodoc-process-docstring", _expand_inherited_parameters, priority=400)
    return {"parallel_read_safe": True}
