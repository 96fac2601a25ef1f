"""Redraw the synthetic benchmark's metric figures from the JSON results they were made of.

``python -m benchmarks.replot docs/benchmarks/full`` rewrites every ``<target>_metrics.png``
in the folder from its ``<target>.json`` (written by :mod:`benchmarks.synthetic`), without
sampling again: for changes of the figure only.  The trace figures need the traces, which
the JSON does not hold; they are left as they are.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import fields
from pathlib import Path
from types import SimpleNamespace

from .common import ChainResult
from .plots import plot_metrics


def replot(folder: Path) -> list[Path]:
    """Redraw ``<target>_metrics.png`` for every ``<target>.json`` in ``folder``."""
    names = {f.name for f in fields(ChainResult)} - {"trace"}
    written = []
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text())
        results = [ChainResult(**{k: c[k] for k in names}) for c in data["chains"]]
        mode = data["mode"].split(":")[0]
        its = f"{results[0].tune:,} + {results[0].draws:,} iterations"
        n_chains = len({r.seed for r in results})
        subtitle = f"\n{mode}: {its}, {n_chains} chain(s)"
        target = SimpleNamespace(key=data["target"], title=data["title"])
        written.append(plot_metrics(results, target, folder / f"{target.key}_metrics.png",
                                    subtitle=subtitle,
                                    full_iterations=results[0].tune + results[0].draws))
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="folder with <target>.json files")
    for path in replot(parser.parse_args().folder):
        print(path)


if __name__ == "__main__":
    main()
