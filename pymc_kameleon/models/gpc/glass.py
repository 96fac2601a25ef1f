"""UCI Glass as the binary window / non-window problem, with whitened features.

References
----------
- B. German (1987). Glass Identification. UCI Machine Learning Repository.
- D. Sejdinovic, H. Strathmann, M. Lomeli Garcia, C. Andrieu and A. Gretton, "Kernel
  adaptive Metropolis-Hastings", ICML 2014, Section 5.1.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
from scipy import linalg as sla

__all__ = ["GLASS_ENV_VAR", "load_glass", "whiten"]

#: Environment variable that may point at ``glass.data``.
GLASS_ENV_VAR = "PYMC_KAMELEON_GLASS"


def whiten(X: np.ndarray) -> np.ndarray:
    """Centre the columns of ``X`` and decorrelate them with the inverse Cholesky factor.

    With ``C = L L^T`` the sample covariance (``ddof=1``) of the rows of ``X`` and ``mu`` their
    mean, row ``x`` is mapped to ``L^{-1} (x - mu)``, so the returned matrix has zero mean and
    identity sample covariance.

    Parameters
    ----------
    X : ndarray, shape (n, d)
        Data matrix, one observation per row (``n > d``).

    Returns
    -------
    ndarray, shape (n, d)
        The whitened data.

    Raises
    ------
    ValueError
        If ``X`` is not a finite 2-d array or its covariance is singular (e.g. a constant column).

    References
    ----------
    .. [1] Sejdinovic, D., Strathmann, H., Lomeli Garcia, M., Andrieu, C., Gretton, A.
       (2014). Kernel Adaptive Metropolis-Hastings. ICML, Section 5.1 (the Glass features
       are whitened before the GP is fitted, as in the reference implementation).

    Examples
    --------
    >>> import numpy as np
    >>> mix = np.array([[2.0, 1.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 3.0]])
    >>> Z = whiten(np.random.default_rng(0).normal(size=(50, 3)) @ mix)
    >>> bool(np.allclose(Z.mean(axis=0), 0)), bool(np.allclose(np.cov(Z, rowvar=False), np.eye(3)))
    (True, True)
    """
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or X.shape[0] < 2:
        raise ValueError(f"X must be a 2-d array with at least two rows, got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError("X contains non-finite values")
    centred = X - X.mean(axis=0)
    cov = np.atleast_2d(np.cov(centred, rowvar=False))
    try:
        chol = sla.cholesky(cov, lower=True)
    except np.linalg.LinAlgError as err:
        raise ValueError(
            "the covariance of X is singular (constant or collinear columns?); cannot whiten"
        ) from err
    return sla.solve_triangular(chol, centred.T, lower=True).T


def load_glass(path: str | os.PathLike | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Load UCI Glass as the binary window / non-window problem of Sejdinovic et al. (2014).

    Parameters
    ----------
    path : str or path-like, optional
        Location of ``glass.data`` (comma-separated: id, 9 features, class 1..7; no header).
        If omitted, the environment variable ``PYMC_KAMELEON_GLASS`` is used.

    Returns
    -------
    X : ndarray, shape (214, 9)
        The features, whitened by :func:`whiten`.
    y : ndarray of int, shape (214,)
        ``+1`` for window glass (classes 1-4, 163 cases), ``-1`` otherwise (51 cases).

    Raises
    ------
    FileNotFoundError
        If the file does not exist (or no path is given and the variable is unset).
    ValueError
        If the file cannot be parsed as the Glass data set.

    References
    ----------
    .. [1] German, B. (1987). Glass Identification. UCI Machine Learning Repository.
    .. [2] Sejdinovic, D., Strathmann, H., Lomeli Garcia, M., Andrieu, C., Gretton, A.
       (2014). Kernel Adaptive Metropolis-Hastings. ICML, Section 5.1.

    Examples
    --------
    A file in the UCI format (here a made-up one with 12 rows):

    >>> import os, tempfile
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> classes = [1, 2, 5, 7, 3, 6, 1, 2, 4, 7, 1, 5]
    >>> rows = np.column_stack([np.arange(1, 13), rng.normal(size=(12, 9)), classes])
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     path = os.path.join(tmp, "glass.data")
    ...     np.savetxt(path, rows, delimiter=",")
    ...     X, y = load_glass(path)
    >>> X.shape, y.tolist()
    ((12, 9), [1, 1, -1, -1, 1, -1, 1, 1, 1, -1, 1, -1])
    """
    if path is None:
        env = os.environ.get(GLASS_ENV_VAR)
        if not env:
            raise FileNotFoundError(
                f"no path given and the environment variable {GLASS_ENV_VAR} is not set; "
                "pass the location of the UCI 'glass.data' file"
            )
        path = env
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"UCI Glass data file not found: {str(path)!r} (expected the comma-separated "
            "'glass.data' from the UCI repository, e.g. shared/data/glass.data)"
        )
    try:
        raw = np.loadtxt(path, delimiter=",", dtype=float, ndmin=2)
    except ValueError as err:
        raise ValueError(
            f"could not parse {str(path)!r} as comma-separated numbers: {err}"
        ) from err
    if raw.shape[1] != 11:
        raise ValueError(
            f"{str(path)!r} has {raw.shape[1]} columns; the Glass data has 11 "
            "(id, 9 features, class)"
        )
    if not np.all(np.isfinite(raw)):
        raise ValueError(f"{str(path)!r} contains non-finite values")
    classes = raw[:, 10]
    if np.any(classes != np.round(classes)) or np.any((classes < 1) | (classes > 7)):
        raise ValueError(f"{str(path)!r}: the class column must hold integers 1..7")
    y = np.where(classes <= 4, 1, -1).astype(int)
    return whiten(raw[:, 1:10]), y
