"""Render the documentation's formulas as MathML at build time.

Sphinx's default HTML math renderer loads MathJax from a CDN, so an offline reader sees raw
TeX.  Browsers display MathML natively, so converting every formula once, while the site is
built (with the pure-Python ``latex2mathml``), needs no script at all.  Selected in
``conf.py`` with ``html_math_renderer = "mathml"``.
"""

from __future__ import annotations

import re

from docutils import nodes
from latex2mathml.converter import convert
from sphinx.util import logging

logger = logging.getLogger(__name__)

# latex2mathml lacks a few commands the pages use; rewrite them into ones it knows.
_REWRITES = [
    (re.compile(r"\\lesssim"), r"\\precsim"),
    (re.compile(r"\\gtrsim"), r"\\succsim"),
    (re.compile(r"\\d(?![a-zA-Z])"), r"\\mathrm{d}"),
]


def to_mathml(latex: str, display: bool) -> str:
    """MathML of one formula; ``display`` for a block (centred, own line)."""
    text = latex.strip()
    for pattern, repl in _REWRITES:
        text = pattern.sub(repl, text)
    mathml = convert(text, display="block" if display else "inline")
    unknown = re.findall(r"<mi>(\\[a-zA-Z]+)</mi>", mathml)
    if unknown:
        raise ValueError(f"unknown command(s) {unknown}")
    return mathml


def _render(self, node, latex: str, display: bool) -> str:
    try:
        return to_mathml(latex, display)
    except Exception as exc:  # keep the TeX visible rather than break the build
        logger.warning("cannot convert formula %r to MathML: %s", latex, exc, location=node)
        return self.encode(latex)


def visit_math(self, node) -> None:
    self.body.append(f'<span class="math">{_render(self, node, node.astext(), False)}</span>')
    raise nodes.SkipNode


def visit_displaymath(self, node) -> None:
    if node.get("number"):
        self.body.append(f'<span class="eqno">({node["number"]})</span>')
    self.body.append(self.starttag(node, "div", CLASS="math notranslate nohighlight"))
    # as Sphinx's MathJax renderer: paragraphs are separate formulas, and a formula with
    # line breaks is a split environment (aligned on &)
    parts = [node.astext()] if node["nowrap"] else node.astext().split("\n\n")
    for part in (p for p in parts if p.strip()):
        if not node["nowrap"] and "\\\\" in part:
            part = "\\begin{split}" + part + "\\end{split}"
        self.body.append(_render(self, node, part, True))
    self.body.append("</div>\n")
    raise nodes.SkipNode


def setup(app):
    app.add_html_math_renderer("mathml", (visit_math, None), (visit_displaymath, None))
    return {"parallel_read_safe": True, "parallel_write_safe": True}
