"""The suite's models: their factories and metadata.

The factories are the package's (:mod:`pymc_kameleon.models.classic`,
:mod:`~pymc_kameleon.models.features`, :mod:`~pymc_kameleon.models.hard` and the others of
:mod:`pymc_kameleon.models`) but for GP-Glass, whose data file is looked up here.  Every
factory takes no argument and is picklable.  :data:`MODELS` maps a model's name to its
:class:`ModelSpec`.  Metrics are computed
on the free variables of the model, in the constrained space PyMC reports in
``idata.posterior`` (e.g. ``tau`` > 0, not ``log tau``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
import pymc as pm

from pymc_kameleon.models import banana_model, gp_classification_model, lotka_volterra_model
from pymc_kameleon.models.classic import (
    eight_schools_centred,
    eight_schools_noncentred,
    funnel_model,
    gauss50_model,
    logistic_model,
    logistic_raw_model,
    logistic_raw_whitened,
    poisson_model,
    radon_centred,
    radon_noncentred,
    scales_model,
)
from pymc_kameleon.models.features import (
    anova_zerosum_model,
    censored_model,
    dirichlet_multinomial_model,
    imputation_model,
    lkj_model,
    mixture_model,
    robust_regression_model,
    timeseries_model,
    timeseries_noncentred,
    truncated_model,
)
from pymc_kameleon.models.gpc import GLASS_ENV_VAR, load_glass
from pymc_kameleon.models.hard import (
    HARE_LYNX_START,
    collinear_regression_model,
    collinear_regression_whitened,
    gp_pois_regr_from_posteriordb,
    gp_pois_regr_model,
    gp_poisson_model,
    gp_poisson_noncentred,
    hare_lynx_model,
    pk_model,
    pk_model_differentiable,
    years_regression_centred,
    years_regression_model,
)
from pymc_kameleon.models.synthetic import flower_model

__all__ = ["DEFAULT_GLASS", "MODELS", "REGRESSION_PRIOR_SD", "ModelSpec", "free_var_labels",
           "glass_path", "regression_data", "regression_model", "set_glass_path"]

ROOT = Path(__file__).resolve().parents[2]


#: Path given with :func:`set_glass_path` (``--glass`` of the command line), if any.
_GLASS_PATH: Path | None = None
#: Where ``glass.data`` is looked for when neither a path nor the variable is given.
DEFAULT_GLASS = ROOT.parent / "shared" / "data" / "glass.data"


def set_glass_path(path: str | os.PathLike | None) -> None:
    """Use ``path`` as ``glass.data`` for GP-Glass (``None``: back to the default lookup)."""
    global _GLASS_PATH
    _GLASS_PATH = None if path is None else Path(path)


def glass_path() -> Path | None:
    """Path of ``glass.data``, or ``None`` if the file is absent (GP-Glass is then skipped).

    Looked up in this order: the path of :func:`set_glass_path`, ``$PYMC_KAMELEON_GLASS``,
    :data:`DEFAULT_GLASS` (``../shared/data/glass.data`` next to the repository).
    """
    env = os.environ.get(GLASS_ENV_VAR)
    path = _GLASS_PATH or (Path(env) if env else DEFAULT_GLASS)
    return path if path.is_file() else None


def gp_glass_model() -> pm.Model:
    """Pseudo-marginal GP classification on UCI Glass (100 importance samples), d = 9."""
    path = glass_path()
    if path is None:
        raise FileNotFoundError(f"glass.data not found (pass --glass PATH or set {GLASS_ENV_VAR})")
    X, y = load_glass(path)
    return gp_classification_model(X, y, n_importance=100, seed=0)


#: Prior sds of :func:`regression_model`: each coefficient's (normal) and the noise sd's
#: (half-normal).
REGRESSION_PRIOR_SD = (2.0, 2.0)


def regression_data(n: int = 40, seed: int = 71) -> tuple[np.ndarray, np.ndarray]:
    """The simulated data of :func:`regression_model`: ``X`` (n, 5) standard normal,
    ``y = X beta + 0.8 eps`` with ``beta = (1, -0.5, 0.25, 0, 2)`` (fixed seed)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    y = X @ np.array([1.0, -0.5, 0.25, 0.0, 2.0]) + 0.8 * rng.normal(size=n)
    return X, y


def regression_model() -> pm.Model:
    """Bayesian linear regression, 5 coefficients and the noise sd (d = 6): independent
    proper priors (normal coefficients, half-normal sd), so that the evidence and the
    nested samplers' unit cube apply; the posterior is exact up to a 1-d quadrature over
    the sd (:func:`benchmarks.suite.analytic.regression_posterior`)."""
    X, y = regression_data()
    beta_sd, sigma_sd = REGRESSION_PRIOR_SD
    with pm.Model() as model:
        beta = pm.Normal("beta", 0.0, beta_sd, shape=X.shape[1])
        sigma = pm.HalfNormal("sigma", sigma_sd)
        pm.Normal("y", pm.math.dot(X, beta), sigma, observed=y)
    return model


# ------------------------------------------------------------------------------ metadata
@dataclass(frozen=True)
class ModelSpec:
    """A suite model and what is known about it.

    ``reference`` says how the cached reference is made: ``"analytic"``, ``"exact"``
    (i.i.d. draws of an exact sampler), ``"nuts"`` (long NUTS on ``reference_factory``,
    which defaults to ``factory`` and may be another parametrisation of the same
    posterior with the model's free variables as deterministics), ``"chain"`` (a long exact
    gradient-free chain), ``"file"`` (derived from an existing cached sample) or
    ``"posteriordb"`` (posteriordb's reference draws of the posterior ``posteriordb``,
    mapped to the model's free variables by ``from_posteriordb``).
    ``cheap``: one log-density evaluation costs little next to a sampler's bookkeeping
    (tens of µs); ``hard`` explains why a model is hard by design (empty if not).
    """

    name: str
    title: str
    factory: Callable[[], pm.Model]
    dim: int
    cheap: bool
    has_gradient: bool
    reference: str
    reference_note: str
    multimodal: bool = False
    pseudo_marginal: bool = False
    hard: str = ""
    reference_factory: Callable[[], pm.Model] | None = None
    reference_target_accept: float = 0.9
    reference_initvals: dict | None = None
    posteriordb: str = ""
    from_posteriordb: Callable[[dict[str, np.ndarray]], np.ndarray] | None = None
    available: Callable[[], bool] = lambda: True

    @property
    def criteria_apply(self) -> bool:
        """Whether the issue's acceptance criteria apply (not multimodal by design)."""
        return not self.multimodal


def free_var_labels(model: pm.Model) -> tuple[list[str], list[str]]:
    """Names of the free variables (model order) and one label per scalar (``x[3]``).

    Scalars are numbered in C order of each variable's constrained shape, as in
    ``idata.posterior[name].values.reshape(chains, draws, -1)``.
    """
    shapes = model.eval_rv_shapes()
    names, labels = [], []
    for rv in model.free_RVs:
        shape = tuple(int(n) for n in shapes[rv.name])
        names.append(rv.name)
        if not shape:
            labels.append(rv.name)
        else:
            labels += [f"{rv.name}[{','.join(map(str, idx))}]" for idx in np.ndindex(*shape)]
    return names, labels


def _spec(*args, **kwargs) -> ModelSpec:
    return ModelSpec(*args, **kwargs)


MODELS: dict[str, ModelSpec] = {
    s.name: s
    for s in (
        _spec("eight-schools-nc", "8 schools, non-centred", eight_schools_noncentred, 10,
              True, True, "nuts", "NUTS 4 x 5000 (target_accept 0.95)",
              reference_target_accept=0.95),
        _spec("eight-schools-c", "8 schools, centred (funnel geometry)", eight_schools_centred,
              10, True, True, "nuts", "NUTS on the non-centred model (theta deterministic)",
              hard="funnel between tau and theta near tau = 0 (NUTS diverges here)",
              reference_factory=eight_schools_noncentred, reference_target_accept=0.95),
        _spec("radon", "radon-style varying intercepts, 20 counties, centred", radon_centred,
              24, True, True, "nuts", "NUTS on the non-centred model (a deterministic)",
              reference_factory=radon_noncentred, reference_target_accept=0.95),
        _spec("radon-nc", "radon-style varying intercepts, 20 counties, non-centred",
              radon_noncentred, 24, True, True, "nuts", "NUTS 4 x 5000 (target_accept 0.95)",
              reference_target_accept=0.95),
        _spec("logistic", "logistic regression, 8 standardised predictors", logistic_model,
              9, True, True, "nuts", "NUTS 4 x 5000"),
        _spec("logistic-raw", "logistic regression, raw collinear predictors",
              logistic_raw_model, 5, True, True, "nuts",
              "NUTS on whitened coordinates of the same posterior",
              hard="coefficient sds from 0.01 to 20, correlations up to ~0.95",
              reference_factory=logistic_raw_whitened),
        _spec("poisson", "Poisson regression with offset, 4 predictors", poisson_model, 5,
              True, True, "nuts", "NUTS 4 x 5000"),
        _spec("lotka-volterra", "Lotka-Volterra, black-box odeint Op (no gradient)",
              lotka_volterra_model, 5, False, False, "chain",
              "pm.DEMetropolisZ 4 x 40000 after 5000 tuning, thinned"),
        _spec("scales", "bounded parameters on scales 1e-3 .. 1e3 (conjugate)", scales_model,
              5, True, True, "analytic", "closed form (conjugate blocks)"),
        _spec("gauss-50", "50-d correlated Gaussian (AR(1) 0.9, sds 0.5..2)", gauss50_model,
              50, True, True, "analytic", "closed form"),
        _spec("funnel", "Neal's funnel, centred, d = 10", funnel_model, 10, True, True,
              "analytic", "closed form: sd(v) = 3, sd(x_i) = exp(9/4)",
              hard="scales of x vary by e^{+-4.5} with v; sd(x) is dominated by rare v > 6"),
        _spec("banana-moderate", "8-d banana B(0.03, 100)",
              partial(banana_model, 8, 0.03, 100.0), 8, True, True, "analytic",
              "closed form: sd = (10, sqrt(1 + 2 b^2 v^2), 1, ...)"),
        _spec("banana-strong", "8-d banana B(0.1, 100)", partial(banana_model, 8, 0.1, 100.0),
              8, True, True, "analytic", "closed form: sd = (10, sqrt(1 + 2 b^2 v^2), 1, ...)",
              hard="strongly twisted: thin curved ridge with heavy tails in x[1]"),
        _spec("flower", "8-d flower F(10, 6, 6, 1)", partial(flower_model, 8), 8, True, True,
              "exact", "200k i.i.d. draws of flower_sample", multimodal=True),
        _spec("gp-glass", "GP classification on UCI Glass (pseudo-marginal)", gp_glass_model,
              9, False, False, "file",
              "benchmarks/data/gp_glass_reference.npz (4 exact pseudo-marginal RW chains)",
              pseudo_marginal=True, available=lambda: glass_path() is not None),
        # PyMC features a drop-in step must handle (pymc_kameleon/models/features.py)
        _spec("imputation", "normal with 3 missing observations imputed", imputation_model,
              5, True, True, "nuts", "NUTS 4 x 5000"),
        _spec("lkj", "3-d normal, LKJ prior, packed Cholesky factor", lkj_model, 9, True,
              True, "nuts", "NUTS 4 x 5000"),
        _spec("dirichlet", "Dirichlet-multinomial, 4 categories (simplex)",
              dirichlet_multinomial_model, 4, True, True, "analytic",
              "closed form: Dirichlet(1 + counts)"),
        _spec("anova-zerosum", "one-way ANOVA, ZeroSumNormal effects", anova_zerosum_model,
              7, True, True, "nuts", "NUTS 4 x 5000"),
        _spec("timeseries", "latent Gaussian random walk, 25 steps", timeseries_model, 26,
              True, True, "nuts", "NUTS on the non-centred model (x deterministic)",
              hard="funnel between the path x and its innovation sd sigma",
              reference_factory=timeseries_noncentred, reference_target_accept=0.95),
        _spec("censored", "normal, right-censored data", censored_model, 2, True, True,
              "nuts", "NUTS 4 x 5000"),
        _spec("mixture", "two-component normal mixture, ordered means", mixture_model, 4,
              True, True, "nuts", "NUTS 4 x 5000"),
        _spec("robust", "Student-t regression on pm.Data", robust_regression_model, 3, True,
              True, "nuts", "NUTS 4 x 5000"),
        _spec("truncated", "normal, data truncated at 0", truncated_model, 2, True, True,
              "nuts", "NUTS 4 x 5000",
              hard="a long tail to mu < 0 with large sigma (NUTS: bulk ESS 240 of 4000 at "
                   "pm.sample's defaults)"),
        # hard real posteriors (issue 42; pymc_kameleon/models/hard/)
        _spec("hare-lynx", "predator-prey ODE on the hare-lynx pelts, unknown initial states",
              hare_lynx_model, 8, False, False, "chain",
              "pm.DEMetropolisZ 4 x 40000 after 5000 tuning, started at the global mode",
              hard="PyMC's initial point lies in the basin of a local mode without mass",
              reference_initvals=HARE_LYNX_START),
        _spec("years", "regression on calendar years 1952-2013 (uncentred covariate)",
              years_regression_model, 3, True, True, "nuts",
              "NUTS on the centred intercept (the same posterior)",
              hard="intercept-slope correlation -0.9999",
              reference_factory=years_regression_centred),
        _spec("collinear", "linear regression, 24 collinear predictors (d = 26)",
              collinear_regression_model, 26, True, True, "nuts",
              "NUTS on whitened coefficients (the same posterior)",
              hard="correlations up to 0.999 between coefficients",
              reference_factory=collinear_regression_whitened),
        _spec("regression", "linear regression, 5 coefficients and the noise sd (d = 6)",
              regression_model, 6, True, True, "analytic",
              "closed form given the noise sd, a 1-d quadrature over it"),
        _spec("pk", "PK ODE: oral dose, Michaelis-Menten elimination (black box, d = 4)",
              pk_model, 4, False, False, "nuts",
              "NUTS on the same ODE by RK4 with forward sensitivities (same posterior)",
              hard="concentrations below Km: a long curved arm where Km and Vm grow together",
              reference_factory=pk_model_differentiable, reference_target_accept=0.95),
        _spec("gp-poisson", "latent GP Poisson regression, 11 periods, centred (d = 13)",
              gp_poisson_model, 13, True, True, "nuts",
              "NUTS on the non-centred model (f deterministic)",
              hard="funnel between the GP amplitude and the 11 latent values",
              reference_factory=gp_poisson_noncentred, reference_target_accept=0.99),
        _spec("gp-poisson-nc", "the same latent GP, non-centred: f = L(amp, ls) z (d = 13)",
              gp_poisson_noncentred, 13, True, True, "nuts", "NUTS 4 x 5000 (target_accept 0.99)",
              reference_target_accept=0.99),
        _spec("gp-pois-regr", "posteriordb gp_pois_regr: latent GP, non-centred as in Stan "
              "(d = 13)", gp_pois_regr_model, 13, True, True, "posteriordb",
              "posteriordb's reference draws (Stan, 10 x 1000 thinned), f_tilde = L^-1 f",
              hard="the hyperparameters reach the counts only through L(alpha, rho) f_tilde",
              posteriordb="gp_pois_regr-gp_pois_regr",
              from_posteriordb=gp_pois_regr_from_posteriordb),
    )
}
