"""What a design that resumes after a failed correction costs, with and without the handover.

Usage::

    python -m benchmarks.research.handover_cost --models eight-schools-nc --seeds 2 \
        --draws 2000 --chains 6 --kameleon '{"emulator": true, "max_evals": 15000}'

Runs :mod:`benchmarks.smc_compare` (its arguments, ``--samplers kameleon``) with the
emulator's engine instrumented.  At each restart of the design it prints the design's
size and the correction's, the CPU time of one Gaussian-process fit and one tempering on
the emulator fitted to *all* of their points (the handover before ``handover`` existed;
fitted and discarded, with its own random numbers, so the run is unchanged), and then the
CPU time of the resumed design's first rounds on the points actually handed.  Results:
``docs/benchmarks/emulator.md`` ("emulator-handover").
"""

from __future__ import annotations

import time

import numpy as np

from pymc_kameleon.emulator import engine


class HandoverTimer:
    """While active, one record per restart of the design (in :attr:`records`): the
    sizes, the CPU seconds of a fit and a tempering on every point (``all_fit``,
    ``all_temper``) and of each of the next ``rounds`` design rounds (``after``)."""

    def __init__(self, rounds: int = 3, verbose: bool = True):
        self.rounds, self.verbose = rounds, verbose
        self.records: list[dict] = []

    def __enter__(self) -> HandoverTimer:
        run_cls = engine.EmulatorRun
        self._saved = (run_cls._resume_design, run_cls._fit)
        resume, fit = self._saved
        timer = self

        def timed_resume(run):
            X_design, logp_design = run.points()
            X_pool, prior, lik, _ = run.correction.weighted()
            record = {"design": len(X_design), "pool": len(X_pool), "after": [],
                      "handed": None}
            record.update(_all_points_cost(run, np.concatenate([X_design, X_pool]),
                                           np.concatenate([logp_design, prior + lik])))
            timer.records.append(record)
            timer._say(f"restart: design {record['design']}, correction {record['pool']}; "
                       f"on all {record['design'] + record['pool']} points a fit takes "
                       f"{record['all_fit']:.1f} s CPU, its tempering {record['all_temper']:.1f}"
                       " s")
            resume(run)  # its own first fit is the first of the resumed rounds
            record["handed"] = len(run.X[-1])
            timer._say(f"  handed {record['handed']}")

        def timed_fit(run):
            start = time.process_time()
            fit(run)
            record = timer.records[-1] if timer.records else None
            if (record is not None and run.phase == "design"
                    and len(record["after"]) < timer.rounds):
                record["after"].append(time.process_time() - start)
                timer._say(f"  a resumed design round's fit and tempering: "
                           f"{record['after'][-1]:.1f} s CPU on "
                           f"{sum(len(x) for x in run.X)} points")

        run_cls._resume_design, run_cls._fit = timed_resume, timed_fit
        return self

    def __exit__(self, *exc) -> None:
        engine.EmulatorRun._resume_design, engine.EmulatorRun._fit = self._saved

    def _say(self, line: str) -> None:
        if self.verbose:
            print(line, flush=True)


def _all_points_cost(run, X: np.ndarray, logp: np.ndarray) -> dict:
    """CPU seconds of a fit of a copy of the run's emulator to ``X`` and of a tempering on
    it (own random numbers: the run's stream is untouched)."""
    s = run.settings
    emulator = engine.LogDensityEmulator(run.emulator.modes, s.window, s.mean_df)
    emulator.gp = run.emulator.gp  # the same warm start as the run's own fit
    start = time.process_time()
    emulator.fit(X, logp, np.random.default_rng(0))
    fitted = time.process_time()
    engine.temper(run.start, engine.FreeEvaluations(run.problem.log_prior, emulator),
                  np.random.default_rng(1), s)
    return {"all_fit": fitted - start, "all_temper": time.process_time() - fitted}


def main(argv: list[str] | None = None) -> list[dict]:
    from benchmarks import smc_compare

    with HandoverTimer() as timer:
        smc_compare.main([*(argv or []), "--samplers", "kameleon"])
    return timer.records


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
