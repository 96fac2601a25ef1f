"""Reference posteriors of the suite: made once, cached in ``benchmarks/data/suite/NAME.npz``.

Usage::

    python -m benchmarks.suite.reference --model NAME[,NAME...]   # or --all, or --missing
                                         [--seed S] [--draws N] [--tune N] [--cores C]

A reference stores, per scalar of the model's free variables (constrained space, labels of
:func:`benchmarks.suite.models.free_var_labels`), the posterior mean and sd, how they were
made (method, command, date, seconds, versions, and for MCMC references the reference's own
max R-hat, min bulk ESS and divergences) and, except for analytic references, 500 thinned
draws (float32, evenly spaced over all chains); MCMC references also keep the 0.1 % and
99.9 % quantiles per scalar, over all chains and over each half of them.  Methods
(``ModelSpec.reference``):

* ``analytic``: closed form (:mod:`benchmarks.suite.analytic`);
* ``exact``: 200k i.i.d. draws of an exact sampler (flower);
* ``nuts``: PyMC NUTS, 4 chains x 5000 draws after 2000 tuning, on the model or on another
  parametrisation of it (``reference_factory``);
* ``chain``: a long exact gradient-free chain (``pm.DEMetropolisZ``, 4 x 40000 after 5000);
* ``file``: derived from ``benchmarks/data/gp_glass_reference.npz`` (see benchmarks/gp_glass.py);
* ``posteriordb``: posteriordb's reference draws (``--posteriordb DIR``: its
  ``posterior_database/reference_posteriors/draws/draws`` folder, ``NAME.json.zip`` or
  ``NAME.json``), mapped to the model's free variables.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

import arviz as az
import numpy as np
import pymc as pm

from ..common import quiet_pymc
from .analytic import ANALYTIC
from .metrics import diagnostics, stack_posterior
from .models import MODELS, ROOT, ModelSpec, free_var_labels

__all__ = ["REFERENCE_DIR", "Reference", "load_reference", "make_reference", "reference_path"]

REFERENCE_DIR = ROOT / "benchmarks" / "data" / "suite"
GP_GLASS_CHAINS = ROOT / "benchmarks" / "data" / "gp_glass_reference.npz"
#: Thinned draws kept in a reference file.
KEEP_DRAWS = 500
EXACT_DRAWS = 200_000


@dataclass
class Reference:
    """Reference means and sds per scalar, with provenance (``meta``) and thinned draws."""

    model: str
    labels: list[str]
    mean: np.ndarray
    sd: np.ndarray
    meta: dict
    sample: np.ndarray | None = None

    def save(self, directory: Path = REFERENCE_DIR) -> Path:
        """Write ``directory/<model>.npz``."""
        directory.mkdir(parents=True, exist_ok=True)
        path = reference_path(self.model, directory)
        extra = {} if self.sample is None else {"sample": self.sample.astype(np.float32)}
        np.savez_compressed(path, labels=np.array(self.labels), mean=self.mean, sd=self.sd,
                            meta=json.dumps(self.meta), **extra)
        return path


def reference_path(name: str, directory: Path = REFERENCE_DIR) -> Path:
    """Where the reference of model ``name`` is cached."""
    return Path(directory) / f"{name}.npz"


def load_reference(name: str, directory: Path = REFERENCE_DIR) -> Reference:
    """Load the cached reference of model ``name`` (FileNotFoundError if missing)."""
    with np.load(reference_path(name, directory)) as f:
        return Reference(model=name, labels=[str(s) for s in f["labels"]], mean=f["mean"],
                         sd=f["sd"], meta=json.loads(str(f["meta"])),
                         sample=f["sample"] if "sample" in f.files else None)


def versions() -> dict:
    """Versions of the packages that produce the numbers."""
    import arviz
    import pytensor

    return {"python": sys.version.split()[0], "pymc": pm.__version__,
            "pytensor": pytensor.__version__, "arviz": arviz.__version__,
            "numpy": np.__version__}


def _thin(draws: np.ndarray) -> np.ndarray:
    flat = draws.reshape(-1, draws.shape[-1])
    idx = np.linspace(0, flat.shape[0] - 1, min(KEEP_DRAWS, flat.shape[0])).astype(int)
    return flat[idx]


#: Tail quantiles kept in an MCMC reference's meta, over all draws and over each half of
#: the chains (their agreement says whether the reference holds its tails).
TAIL_QUANTILES = (0.001, 0.999)


def tail_quantiles(draws: np.ndarray,
                   q: tuple[float, ...] = TAIL_QUANTILES) -> list[list[float]]:
    """Quantiles ``q`` (default :data:`TAIL_QUANTILES`) per scalar of ``draws (chains, draws,
    k)``, shape ``(len(q), k)``."""
    return np.quantile(draws.reshape(-1, draws.shape[-1]), q, axis=0).tolist()


def tail_quantile_mcse(draws: np.ndarray,
                       q: tuple[float, ...] = TAIL_QUANTILES) -> list[list[float]]:
    """Monte Carlo standard errors of :func:`tail_quantiles` (ArviZ's quantile MCSE, which
    accounts for the chains' autocorrelation), same shape."""
    draws = np.asarray(draws, dtype=float)
    return [[float(np.asarray(az.mcse(draws[:, :, j], method="quantile", prob=p)))
             for j in range(draws.shape[-1])] for p in q]


def _from_chains(draws: np.ndarray, meta: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    diag = diagnostics(draws)
    half = draws.shape[0] // 2
    meta.update(max_rhat=float(np.max(diag.rhat)), min_ess_bulk=float(np.min(diag.ess_bulk)),
                min_ess_tail=float(np.min(diag.ess_tail)), chains=int(draws.shape[0]),
                draws_per_chain=int(draws.shape[1]), tail_quantiles=tail_quantiles(draws),
                tail_quantiles_halves=[tail_quantiles(draws[:half]),
                                       tail_quantiles(draws[half:])],
                tail_quantiles_mcse_halves=[tail_quantile_mcse(draws[:half]),
                                            tail_quantile_mcse(draws[half:])])
    return diag.mean, diag.sd, _thin(draws)


def _mcmc(spec: ModelSpec, names: list[str], args, meta: dict):
    model = (spec.reference_factory or spec.factory)()
    kwargs = dict(draws=args.draws, tune=args.tune, chains=args.chains, cores=args.cores,
                  random_seed=args.seed, progressbar=False, compute_convergence_checks=False)
    with model:
        if spec.reference == "nuts":
            idata = pm.sample(target_accept=spec.reference_target_accept, **kwargs)
            meta["divergences"] = int(idata.sample_stats["diverging"].values.sum())
            meta["target_accept"] = spec.reference_target_accept
        else:
            kwargs.update(draws=args.chain_draws, tune=args.chain_tune)
            if spec.reference_initvals is not None:
                kwargs["initvals"] = spec.reference_initvals
            idata = pm.sample(step=pm.DEMetropolisZ(), **kwargs)
    meta["sampler"] = "NUTS" if spec.reference == "nuts" else "pm.DEMetropolisZ"
    meta["reference_model"] = (spec.reference_factory or spec.factory).__name__
    return _from_chains(stack_posterior(idata.posterior, names), meta)


def posteriordb_draws(name: str, directory: Path) -> tuple[dict[str, np.ndarray], str]:
    """posteriordb's reference draws of posterior ``name`` from ``directory`` (``NAME.json``
    or ``NAME.json.zip``): each parameter as ``(chains, draws)``, and the file read."""
    directory = Path(directory)
    plain, packed = directory / f"{name}.json", directory / f"{name}.json.zip"
    if plain.exists():
        chains, source = json.loads(plain.read_text()), plain
    elif packed.exists():
        with zipfile.ZipFile(packed) as z:
            chains, source = json.loads(z.read(f"{name}.json")), packed
    else:
        raise FileNotFoundError(f"neither {plain} nor {packed} exists (--posteriordb)")
    return {k: np.array([c[k] for c in chains], dtype=float) for k in chains[0]}, str(source)


def make_reference(spec: ModelSpec, args) -> Reference:
    """Compute the reference of ``spec`` (see the module docstring for the methods)."""
    quiet_pymc()
    names, labels = free_var_labels(spec.factory())
    meta = {"method": spec.reference, "note": spec.reference_note, "seed": args.seed,
            "command": args.command, "date": datetime.date.today().isoformat(),
            "versions": versions()}
    start = time.perf_counter()
    sample = None
    if spec.reference == "analytic":
        mean, sd = ANALYTIC[spec.name]()
    elif spec.reference == "exact":
        from pymc_kameleon.models.targets import flower_sample

        draws = flower_sample(EXACT_DRAWS, dim=spec.dim, rng=args.seed)
        mean, sd, sample = draws.mean(axis=0), draws.std(axis=0, ddof=1), _thin(draws)
        meta["draws"] = EXACT_DRAWS
    elif spec.reference in ("nuts", "chain"):
        mean, sd, sample = _mcmc(spec, names, args, meta)
    elif spec.reference == "file":
        with np.load(GP_GLASS_CHAINS) as f:
            meta.update(source=str(GP_GLASS_CHAINS.relative_to(ROOT)),
                        source_command=str(f["command"]), source_date=str(f["date"]))
            mean, sd, sample = _from_chains(np.asarray(f["theta"], dtype=float), meta)
    elif spec.reference == "posteriordb":
        if getattr(args, "posteriordb", None) is None:
            raise ValueError(f"{spec.name}: pass --posteriordb (posteriordb's draws folder)")
        draws, source = posteriordb_draws(spec.posteriordb, args.posteriordb)
        meta.update(posteriordb=spec.posteriordb, source=Path(source).name)
        mean, sd, sample = _from_chains(spec.from_posteriordb(draws), meta)
    else:
        raise ValueError(f"unknown reference method {spec.reference!r}")
    meta["seconds"] = time.perf_counter() - start
    mean, sd = np.asarray(mean, dtype=float), np.asarray(sd, dtype=float)
    if mean.shape != (len(labels),) or sd.shape != (len(labels),):
        raise RuntimeError(f"{spec.name}: reference has shape {mean.shape}, "
                           f"the model {len(labels)} scalars")
    return Reference(spec.name, labels, mean, sd, meta, sample)


def main(argv: list[str] | None = None) -> None:
    """Command line: compute and cache references."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--model", help="comma-separated model names")
    which.add_argument("--all", action="store_true", help="every model")
    which.add_argument("--missing", action="store_true", help="models without a cached file")
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--draws", type=int, default=5000, help="NUTS draws per chain")
    parser.add_argument("--tune", type=int, default=2000, help="NUTS tuning per chain")
    parser.add_argument("--chain-draws", type=int, default=40000, help="exact-chain draws")
    parser.add_argument("--chain-tune", type=int, default=5000, help="exact-chain tuning")
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--out", type=Path, default=REFERENCE_DIR)
    parser.add_argument("--posteriordb", type=Path, default=None,
                        help="posteriordb's reference_posteriors/draws/draws folder")
    args = parser.parse_args(argv)
    args.command = " ".join(["python -m benchmarks.suite.reference",
                             *(sys.argv[1:] if argv is None else argv)])
    if args.model:
        names = [n.strip() for n in args.model.split(",") if n.strip()]
        unknown = sorted(set(names) - set(MODELS))
        if unknown:
            parser.error(f"unknown models {unknown}; choose from {sorted(MODELS)}")
    else:
        names = [n for n in MODELS
                 if args.all or not reference_path(n, args.out).exists()]
    for name in names:
        spec = MODELS[name]
        if not spec.available():
            print(f"{name}: skipped (data not available)")
            continue
        ref = make_reference(spec, args)
        path = ref.save(args.out)
        m = ref.meta
        checks = (f", max R-hat {m['max_rhat']:.4f}, min bulk ESS {m['min_ess_bulk']:.0f}"
                  if "max_rhat" in m else "")
        print(f"{name}: {m['method']} in {m['seconds']:.0f} s{checks} -> "
              f"{path} ({path.stat().st_size / 1e3:.0f} kB)", flush=True)


if __name__ == "__main__":
    main()
