"""Entry point of ``python -m benchmarks.suite`` (see :mod:`benchmarks.suite.cli`)."""

from .cli import main

main()
