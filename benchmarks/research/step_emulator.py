"""The steps' ``emulator=True`` through ``pm.sample`` on suite models, and how far ``g``
covers a posterior's tails.

Usage::

    python -m benchmarks.research.step_emulator [--models pk,hare-lynx] [--seeds 1,2,3]
                                      [--steps kamh,fkamh,rw,khmc] [--with-plain]
                                      [--settings defensive_weight=0.2,defensive_scale=2]
                                      [--moves delayed=True,weight=0.9]
    python -m benchmarks.research.step_emulator --g-tails [--models pk] [--seeds 1,2]

The first form runs each step of ``--steps`` with ``emulator=`` (the step's default
:class:`~pymc_kameleon.adaptation.independence.EmulatorMoves`, or with ``--settings``
replacing fields of its :class:`~pymc_kameleon.emulator.EmulatorSettings` and ``--moves``
fields of the moves), and with
``--with-plain`` also without, through :func:`benchmarks.suite.variants.compare_variants`
(every evaluation counted; min bulk ESS, ESS per 1000 evaluations, max R-hat, the suite's
criteria, the evaluations, the worst sd ratio).

``--g-tails`` measures the independence proposal itself: per seed, the emulator's run
(search and design, as a step's first tuning draw does it), ``g`` fitted to its posterior
with the step's settings and with variants of the defensive component, and for each ``g``
Kish's ESS and Pareto's k-hat of ``p / g`` over 3 000 draws of ``g``, the independence
sampler's acceptance with the chain at the reference posterior's draws, and the log
weights ``log p - log g`` at those draws above their median (90, 99, 99.9 %): a chain that
enters a region of weight ``w`` stays about ``w`` times longer than at the median.  Models
whose free variables are untransformed, with a reference sample.  Results:
``docs/benchmarks/emulator.md``.
"""

from __future__ import annotations

import ast
import dataclasses

import numpy as np

from pymc_kameleon.adaptation.independence import EmulatorMoves, IndependenceProposal

from .screen_suite import STEPS, runs_parser

__all__ = ["g_tails", "main", "variants"]

#: Defensive components compared by ``--g-tails``: (defensive_weight, defensive_scale,
#: defensive_df); the first is the engine's, the second the steps' default.
DEFENSIVE = [(0.2, 2.0, 5.0), (0.3, 4.0, 3.0), (0.3, 3.0, 5.0), (0.4, 3.0, 3.0)]


def _fields(text: str) -> dict:
    """``"name=value,..."`` as a dict of Python literals."""
    if not text:
        return {}
    return {k: ast.literal_eval(v) for k, v in (i.split("=") for i in text.split(","))}


def moves(settings: str, move_fields: str = "") -> EmulatorMoves:
    """The steps' default moves with ``"name=value,..."`` replacing fields of its
    settings (``settings``) and of the moves themselves (``move_fields``)."""
    base = EmulatorMoves()
    return dataclasses.replace(base, settings=dataclasses.replace(base.settings,
                                                                  **_fields(settings)),
                               **_fields(move_fields))


def variants(steps: list[str], emulator: EmulatorMoves, with_plain: bool = False) -> dict:
    """Each step of ``steps`` (keys of :data:`~.screen_suite.STEPS`) with ``emulator``, and
    without it when ``with_plain``."""
    out = {}
    for key in steps:
        cls = STEPS[key]
        if with_plain:
            out[cls.__name__] = cls
        out[f"{cls.__name__}, emulator"] = lambda cls=cls: cls(emulator=emulator)
    return out


def g_tails(name: str, seed: int, emulator: EmulatorMoves, n: int = 3000) -> list[str]:
    """The rows of the ``--g-tails`` table for suite model ``name`` and ``seed``."""
    import pymc as pm
    from scipy.special import logsumexp

    from pymc_kameleon.compat import pareto_khat
    from pymc_kameleon.emulator import EmulatorRun
    from pymc_kameleon.emulator.engine import EmulatorProblem

    from ..suite.models import MODELS
    from ..suite.reference import load_reference

    model = MODELS[name].factory()
    if [v.name for v in model.value_vars] != [v.name for v in model.free_RVs]:
        raise ValueError(f"{name}: --g-tails needs untransformed free variables")
    names = [v.name for v in model.value_vars]
    logp_fn, prior_fn = model.compile_logp(), model.compile_logp(vars=model.free_RVs)
    rng = np.random.default_rng(seed)

    def rows(fn, X: np.ndarray) -> np.ndarray:
        return np.array([fn(dict(zip(names, x, strict=True))) for x in np.atleast_2d(X)])

    def evaluate(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        prior = rows(prior_fn, X)
        return prior, rows(logp_fn, X) - prior

    def prior_draws(k: int) -> np.ndarray:
        draws = pm.draw(model.free_RVs, draws=k, random_seed=rng)
        return np.column_stack([np.reshape(d, (k, -1)) for d in draws])

    problem = EmulatorProblem(lambda X: rows(prior_fn, X), evaluate, prior_draws, len(names))
    run = EmulatorRun(problem, emulator.settings, emulator.posterior_draws, rng)
    while run.phase in ("start", "design"):
        run.step()
    R = load_reference(name).sample.astype(float)
    logp_ref = rows(logp_fn, R)
    out = []
    for weight, scale, df in DEFENSIVE:
        settings = dataclasses.replace(emulator.settings, defensive_weight=weight,
                                       defensive_scale=scale, defensive_df=df)
        g = IndependenceProposal.fit(run.posterior, rng, settings)
        Y = np.array([g.sample(rng) for _ in range(n)])
        log_w = rows(logp_fn, Y) - g.logpdf(Y)
        log_w = np.where(np.isfinite(log_w), log_w, -np.inf)
        kish = np.exp(2 * logsumexp(log_w) - logsumexp(2 * log_w)) / n
        log_w_ref = logp_ref - g.logpdf(R)
        x = rng.integers(len(R), size=n)
        accept = np.mean(np.exp(np.minimum(0.0, log_w - log_w_ref[x])))
        q = np.quantile(log_w_ref - np.median(log_w_ref), [0.9, 0.99, 0.999])
        out.append(f"| {name} | {seed} | {weight}, {scale}, {df:g} | {kish:.2f} | "
                   f"{pareto_khat(log_w):.2f} | {accept:.2f} | "
                   + " / ".join(f"{v:.2f}" for v in q) + " |")
    return out


def main(argv: list[str] | None = None) -> None:
    parser = runs_parser(__doc__.splitlines()[0], steps="kamh,fkamh,rw,khmc")
    parser.add_argument("--with-plain", action="store_true")
    parser.add_argument("--settings", default="", help="EmulatorSettings fields, name=value,...")
    parser.add_argument("--moves", default="", help="EmulatorMoves fields, name=value,...")
    parser.add_argument("--g-tails", action="store_true")
    args = parser.parse_args(argv)
    models, seeds = args.models.split(","), [int(s) for s in args.seeds.split(",")]
    emulator = moves(args.settings, args.moves)
    if args.g_tails:
        print("| model | seed | defensive weight, scale, df | Kish ESS / n | k-hat | "
              "acceptance | log w above median, 90 / 99 / 99.9 % |")
        print("|---|---|---|---|---|---|---|")
        for name in models:
            for seed in seeds:
                print("\n".join(g_tails(name, seed, emulator)), flush=True)
        return
    from ..suite.variants import compare_variants

    compare_variants(models, seeds, variants(args.steps.split(","), emulator, args.with_plain),
                     args.tune, args.draws, args.chains)


if __name__ == "__main__":
    main()
