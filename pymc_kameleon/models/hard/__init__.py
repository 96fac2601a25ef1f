"""Hard real posteriors: the classes of model where a gradient-free step fails.

Each class was measured to defeat the steps' warm-up of the time (docs/benchmarks/suite.md,
"Hard real posteriors"):

* :func:`hare_lynx_model`: the predator-prey equations fitted to the Hudson's Bay Company
  pelt counts with unknown initial states (8 parameters); PyMC's initial point lies in the
  basin of a local mode that holds no posterior mass;
* :func:`years_regression_model`: a regression on calendar years, intercept-slope
  correlation -0.9999;
* :func:`collinear_regression_model`: 24 collinear predictors, d = 26;
* :func:`pk_model`: a pharmacokinetic ODE (black box) whose posterior runs out along a long
  curved arm where Km and Vm grow together (d = 4);
* :func:`gp_poisson_model`: a latent Gaussian process under Poisson counts, centred: a
  funnel between the GP's amplitude and its 11 latent values (d = 13);
* :func:`gp_pois_regr_model`: posteriordb's ``gp_pois_regr-gp_pois_regr``, the latent GP
  written non-centred as Stan writes it (d = 13); its reference is posteriordb's.

Each has a reference parametrisation with the same posterior (NUTS can sample it) or a
start for a long reference chain.  One module per class of model: :mod:`.hare_lynx`,
:mod:`.regression` (years and collinear), :mod:`.pk` and :mod:`.latent_gp` (both latent
GPs); every name is importable from ``pymc_kameleon.models.hard`` itself.
"""

from .hare_lynx import HARE_LYNX, HARE_LYNX_START, HareLynxOp, hare_lynx_model, solve_hare_lynx
from .latent_gp import (
    GP_COUNTS,
    GP_JITTER,
    GP_OFFSET,
    GP_POIS_REGR_JITTER,
    GP_POIS_REGR_K,
    GP_POIS_REGR_X,
    GP_SEED,
    GP_TRUE,
    GP_X,
    gp_correlation,
    gp_pois_regr_cov,
    gp_pois_regr_from_posteriordb,
    gp_pois_regr_model,
    gp_poisson_model,
    gp_poisson_noncentred,
    gp_simulate,
)
from .pk import (
    PK_CONC,
    PK_DOSE,
    PK_RK4_STEPS,
    PK_SEED,
    PK_TIMES,
    PK_TRUE,
    PK_VOLUME,
    PKOp,
    PKSensitivityOp,
    pk_model,
    pk_model_differentiable,
    pk_simulate,
    solve_pk,
    solve_pk_sensitivities,
)
from .regression import (
    collinear_data,
    collinear_regression_model,
    collinear_regression_whitened,
    collinear_whitening,
    years_data,
    years_regression_centred,
    years_regression_model,
)

__all__ = [
    "GP_COUNTS",
    "GP_JITTER",
    "GP_OFFSET",
    "GP_POIS_REGR_JITTER",
    "GP_POIS_REGR_K",
    "GP_POIS_REGR_X",
    "GP_SEED",
    "GP_TRUE",
    "GP_X",
    "HARE_LYNX",
    "HARE_LYNX_START",
    "HareLynxOp",
    "PKOp",
    "PKSensitivityOp",
    "PK_CONC",
    "PK_DOSE",
    "PK_RK4_STEPS",
    "PK_SEED",
    "PK_TIMES",
    "PK_TRUE",
    "PK_VOLUME",
    "collinear_data",
    "collinear_regression_model",
    "collinear_regression_whitened",
    "collinear_whitening",
    "gp_correlation",
    "gp_pois_regr_cov",
    "gp_pois_regr_from_posteriordb",
    "gp_pois_regr_model",
    "gp_poisson_model",
    "gp_poisson_noncentred",
    "gp_simulate",
    "hare_lynx_model",
    "pk_model",
    "pk_model_differentiable",
    "pk_simulate",
    "solve_hare_lynx",
    "solve_pk",
    "solve_pk_sensitivities",
    "years_data",
    "years_regression_centred",
    "years_regression_model",
]
