"""Every command the documentation tells users to run exists and starts.

The pages under ``docs/`` name benchmark modules (``python -m benchmarks.suite ...``) and
scripts (``python examples/lotka_volterra.py``, ``python tests/calibration.py gauss``).
Each named module or script must exist in the repository, and ``--help`` must exit 0 from
the repository root: the module or script and everything it imports load, and its command
line parses.  A page that cites a moved or deleted script fails here.

The commands run in one child process, one after the other as ``python -m`` and ``python``
would run them (:mod:`runpy`), so that PyMC is imported once and the test stays fast; none of
them is imported by the test process.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: ``python -m benchmarks.<module>`` or ``python <folder>/<script>.py``
COMMAND = re.compile(r"python -m (benchmarks(?:\.\w+)*)|python ((?:benchmarks|examples|tests)"
                     r"/[\w/]+\.py)")


def _commands() -> dict[str, str]:
    """Each module or script named on a docs page, with the first page naming it."""
    found: dict[str, str] = {}
    for page in sorted((ROOT / "docs").rglob("*.md")):
        for match in COMMAND.finditer(page.read_text(encoding="utf-8")):
            found.setdefault(match.group(1) or match.group(2), str(page.relative_to(ROOT)))
    return found


COMMANDS = _commands()


def _file(target: str) -> Path | None:
    """The file ``python`` runs for a script, ``python -m`` for a module (a package runs
    its ``__main__``); ``None`` if there is none."""
    if target.endswith(".py"):
        candidates = [ROOT / target]
    else:
        base = ROOT.joinpath(*target.split("."))
        candidates = [base.with_suffix(".py"), base / "__main__.py"]
    return next((p for p in candidates if p.is_file()), None)

#: Runs ``TARGET --help`` for every target in argv as ``python -m`` or ``python`` would,
#: and prints ``{target: exit code or error}`` as JSON on its last line.
_RUNNER = """
import contextlib, io, json, os, runpy, sys
codes = {}
for target in sys.argv[1:]:
    sys.argv = [target, "--help"]
    path = sys.path[:]
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            if target.endswith(".py"):
                sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
                runpy.run_path(target, run_name="__main__")
            else:
                runpy.run_module(target, run_name="__main__", alter_sys=True)
        codes[target] = "ran without exiting: --help not handled"
    except SystemExit as exit:
        codes[target] = exit.code or 0
    except BaseException as err:
        codes[target] = f"{type(err).__name__}: {err}"
    finally:
        sys.path[:] = path
print(json.dumps(codes))
"""


def test_the_pages_name_commands():
    """The extraction finds the pages' commands (a changed pattern would test nothing)."""
    assert "benchmarks.suite" in COMMANDS and "tests/calibration.py" in COMMANDS
    assert len(COMMANDS) > 20, sorted(COMMANDS)


@pytest.mark.parametrize("target", sorted(COMMANDS))
def test_the_module_or_script_exists(target):
    assert _file(target) is not None, f"{COMMANDS[target]} names `{target}`, which does not exist"


def test_every_command_answers_help():
    """``--help`` exits 0 for every command on the pages (a module that ignored it would
    start a benchmark: it is reported instead)."""
    runnable = [t for t in sorted(COMMANDS) if _file(t) is not None]
    out = subprocess.run([sys.executable, "-c", _RUNNER, *runnable], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    codes = json.loads(out.stdout.strip().splitlines()[-1])
    failed = {t: f"{code} (cited on {COMMANDS[t]})" for t, code in codes.items() if code != 0}
    assert not failed, failed
