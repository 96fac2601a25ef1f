"""Tests of the benchmark scripts; they run with the package's tests (pyproject's testpaths)."""
