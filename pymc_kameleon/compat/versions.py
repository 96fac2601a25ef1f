"""The installed versions of PyMC, PyTensor and ArviZ, as ``(major, minor)``."""

from __future__ import annotations

import re

import arviz as az
import pymc as pm
import pytensor

__all__ = ["ARVIZ_VERSION", "PYMC_VERSION", "PYTENSOR_VERSION"]


def _version(text: str) -> tuple[int, int]:
    """``(major, minor)`` of a version string such as ``"6.4.0"`` or ``"3.3.7+4.g1a2b"``."""
    match = re.match(r"(\d+)\.(\d+)", text)
    if match is None:
        raise ValueError(f"cannot parse the version {text!r}")
    return int(match.group(1)), int(match.group(2))


#: ``(major, minor)`` of the installed PyMC, PyTensor and ArviZ.
PYMC_VERSION = _version(pm.__version__)
PYTENSOR_VERSION = _version(pytensor.__version__)
ARVIZ_VERSION = _version(az.__version__)
