"""Every formula of the documentation converts to MathML at build time (docs/_ext/mathml.py).

The docs build would warn (and fail with -W) on a formula it cannot convert; this test says
which one, without building the site.  Skipped without the docs extra (latex2mathml).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

pytest.importorskip("latex2mathml")

DOCS = Path(__file__).resolve().parents[1] / "docs"
_spec = importlib.util.spec_from_file_location("docs_mathml", DOCS / "_ext" / "mathml.py")
mathml = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mathml)

_MATH = re.compile(r"\$\$(.+?)\$\$|\$([^$\n]+?)\$", re.S)


def _formulas() -> list[tuple[str, str, bool]]:
    found = []
    for page in sorted(DOCS.rglob("*.md")):
        for m in _MATH.finditer(page.read_text()):
            found.append((str(page.relative_to(DOCS)), m.group(1) or m.group(2), bool(m.group(1))))
    return found


def test_every_formula_of_the_docs_converts():
    formulas = _formulas()
    assert len(formulas) > 100  # the pages hold several hundred
    failed = []
    for page, tex, display in formulas:
        try:
            out = mathml.to_mathml(tex, display)
        except Exception as exc:  # noqa: BLE001 - collect them all
            failed.append((page, tex, str(exc)))
            continue
        assert out.startswith("<math") and "\\" not in re.sub(r"<[^>]+>", "", out)
    assert failed == []


def test_unknown_command_is_an_error_not_raw_tex():
    """The negative control: latex2mathml alone would print ``\\foo`` as text."""
    with pytest.raises(ValueError, match="foo"):
        mathml.to_mathml(r"\foo x", display=False)


def test_rewrites_of_commands_latex2mathml_lacks():
    out = mathml.to_mathml(r"a \lesssim b \gtrsim c,\ \d x", display=False)
    assert "&#x0227E;" in out and "&#x0227F;" in out  # the symbols, not raw commands
    assert "\\" not in re.sub(r"<[^>]+>", "", out)
