"""Quiet PyMC for benchmark runs.

Apart from the rest of ``benchmarks.common`` because it imports nothing of the package:
``cost_per_step``'s paired mode runs its worker against an exported older revision of
``pymc_kameleon``, whose modules may be laid out differently.
"""

from __future__ import annotations

import logging
import warnings

__all__ = ["quiet_pymc"]


def quiet_pymc() -> None:
    """Silence PyMC's logging and the warnings of short or badly mixing runs."""
    logging.getLogger("pymc").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", category=UserWarning)
    warnings.filterwarnings("ignore", category=RuntimeWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
