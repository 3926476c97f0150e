"""Data helpers: whitened inputs, teacher tasks, partial whitening, sufficient statistics,
and real data ready to train on (:func:`load_digits`).

Conventions (docs/conventions.md): ``X`` (P, D) with samples as rows, ``Y`` (P, C) or (P,);
``Sxx = X^T X / P`` (D, D), ``Syx = Y^T X / P`` (C, D).  All draws use a
``numpy.random.Generator`` seeded by ``seed``, so results are reproducible.
"""
from __future__ import annotations

import functools
import numbers
import random

import numpy as np

from ._validation import (as_float_array, check_int, check_matrix, check_nonnegative, ldexp_safe,
                          pow2_normalise, rng_from_seed)

__all__ = [
    "whitened_inputs",
    "teacher_task",
    "scalar_teacher",
    "partially_whitened",
    "sufficient_statistics",
    "load_digits",
    "DIGIT_SOURCES",
]


def _count(x, name, minimum=1):
    return check_int(x, name, minimum=minimum)


def _orthonormal_columns(rng, n, k):
    """An (n, k) matrix with orthonormal columns, Haar-distributed (QR with sign fix)."""
    q, r = np.linalg.qr(rng.standard_normal((n, k)))
    return q * np.sign(np.where(np.diag(r) == 0, 1.0, np.diag(r)))


def whitened_inputs(P, D, seed=0):
    """Inputs whose empirical covariance is exactly the identity.

    Parameters
    ----------
    P, D : int
        Number of samples and input dimension, ``P >= D``.
    seed : int >= 0, numpy.random.SeedSequence, Generator or None (fresh entropy)

    Returns
    -------
    X : ndarray, shape (P, D)
        ``X^T X / P = I_D`` to rounding: ``X = sqrt(P) Q`` with Q the orthonormal
        factor of a Gaussian (P, D) matrix.

    Examples
    --------
    >>> X = whitened_inputs(50, 5)
    >>> bool(np.allclose(X.T @ X / 50, np.eye(5)))
    True
    """
    P = _count(P, "P")
    D = _count(D, "D")
    if P < D:
        raise ValueError(f"whitened inputs need P >= D, got P={P}, D={D}")
    rng = rng_from_seed(seed)
    return np.sqrt(P) * _orthonormal_columns(rng, P, D)


def _inputs(rng, P, D, whiten):
    if whiten:
        if P < D:
            raise ValueError(f"whitened inputs need P >= D, got P={P}, D={D}")
        return np.sqrt(P) * _orthonormal_columns(rng, P, D)
    return rng.standard_normal((P, D))


def teacher_task(P, D, singular_values, seed=0, whiten=True):
    """A linear teacher ``Y = X B^T`` with prescribed singular values.

    Parameters
    ----------
    P, D : int
    singular_values : array_like, shape (C,)
        Nonnegative; ``C = len(singular_values) <= D``.
    seed : int >= 0, numpy.random.SeedSequence, Generator or None (fresh entropy)
    whiten : bool
        If True, ``X`` is exactly whitened (``Syx = B``); otherwise i.i.d. N(0, 1).

    Returns
    -------
    X : ndarray, shape (P, D)
    Y : ndarray, shape (P, C)
        ``B = U diag(s) V^T`` with U (C, C) orthogonal and V (D, C) orthonormal
        columns, both random.

    Examples
    --------
    >>> X, Y = teacher_task(100, 4, [3.0, 1.0])
    >>> np.round(np.linalg.svd(Y.T @ X / 100, compute_uv=False), 12)
    array([3., 1.])
    """
    P = _count(P, "P")
    D = _count(D, "D")
    s = check_nonnegative(singular_values, "singular_values")
    if s.ndim != 1 or s.size == 0:
        raise ValueError(f"singular_values must be a non-empty 1-D array, got shape {s.shape}")
    C = s.size
    if C > D:
        raise ValueError(f"need len(singular_values) <= D, got {C} > {D}")
    rng = rng_from_seed(seed)
    X = _inputs(rng, P, D, whiten)
    U = _orthonormal_columns(rng, C, C)
    V = _orthonormal_columns(rng, D, C)
    B = (U * s) @ V.T
    return X, X @ B.T


def scalar_teacher(P, D, s, seed=0, whiten=True):
    """Scalar-output teacher ``y = s X beta`` with a random unit vector beta.

    Parameters
    ----------
    P, D : int
    s : float
        Teacher strength, ``s >= 0``.
    seed : int >= 0, numpy.random.SeedSequence, Generator or None (fresh entropy)
    whiten : bool

    Returns
    -------
    X : ndarray, shape (P, D)
    y : ndarray, shape (P,)
    beta : ndarray, shape (D,)
        ``|beta| = 1``; for whitened X, ``Syx = s beta^T``.

    Examples
    --------
    >>> X, y, beta = scalar_teacher(20, 3, 2.0)
    >>> bool(np.allclose(y @ X / 20, 2.0 * beta))
    True
    """
    P = _count(P, "P")
    D = _count(D, "D")
    s = float(check_nonnegative(s, "s", ndim=0))
    rng = rng_from_seed(seed)
    X = _inputs(rng, P, D, whiten)
    beta = rng.standard_normal(D)
    beta /= np.linalg.norm(beta)
    return X, s * (X @ beta), beta


def partially_whitened(X, gamma):
    """Partially whitened inputs ``X_gamma = U S^gamma V^T`` from the thin SVD ``X = U S V^T``.

    Parameters
    ----------
    X : array_like, shape (P, D)
    gamma : float
        ``gamma >= 0``; 0 gives ``U V^T`` (whitened up to the scale 1/P:
        ``X_0^T X_0 = I`` when P >= D), 1 gives X itself.  Singular values below
        ``max(P, D) eps s_max`` count as zero and stay zero for every gamma.

    Returns
    -------
    ndarray, shape (P, D)

    Examples
    --------
    >>> X = np.random.default_rng(0).standard_normal((10, 3))
    >>> bool(np.allclose(partially_whitened(X, 1.0), X))
    True
    """
    X = check_matrix(X, "X")
    gamma = float(check_nonnegative(gamma, "gamma", ndim=0))
    U, S, Vt = np.linalg.svd(X, full_matrices=False)
    # singular values at rounding level (below max(P, D) eps s_max, the rank rule of
    # task_modes) are zero and stay zero: 1e-15**0 would turn them into 1
    keep = S > (max(X.shape) * np.finfo(np.float64).eps * (S[0] if S.size else 0.0))
    with np.errstate(over="ignore", invalid="ignore"):
        Sg = np.where(keep, S, 1.0) ** gamma * keep
        out = (U * Sg) @ Vt
    if np.all(np.isfinite(out)):
        return out
    # S^gamma overflowed: S^gamma = s_max^gamma (S / s_max)^gamma with the scale
    # s_max^gamma = mant 2^n put on last, so the result is +-inf where it exceeds the float
    # range and exact elsewhere, never NaN (docs/conventions.md, "Bad input and overflow")
    Sg = np.where(keep, np.where(keep, S, 1.0) / S[0], 0.0) ** gamma
    with np.errstate(over="ignore"):
        ep = min(gamma * np.log2(S[0]), 2.0 ** 40)
    n = np.floor(ep)
    return ldexp_safe(np.exp2(ep - n) * ((U * Sg) @ Vt), int(n))


def sufficient_statistics(X, Y):
    """``(Sxx, Syx) = (X^T X / P, Y^T X / P)``.

    Parameters
    ----------
    X : array_like, shape (P, D)
        At least one sample (P >= 1; P = 0 is a ``ValueError`` naming X).
    Y : array_like, shape (P, C) or (P,)

    Returns
    -------
    Sxx : ndarray, shape (D, D)
    Syx : ndarray, shape (C, D)
        C = 1 when Y is 1-D.

    Examples
    --------
    >>> Sxx, Syx = sufficient_statistics(np.eye(2), np.array([1.0, 2.0]))
    >>> Syx
    array([[0.5, 1. ]])
    """
    X = check_matrix(X, "X")
    if X.shape[0] < 1:
        raise ValueError("X must hold at least one sample (P >= 1 rows), got P = 0")
    Y = as_float_array(Y, "Y", ndim=(1, 2))
    if Y.ndim == 1:
        Y = Y[:, None]
    if Y.shape[0] != X.shape[0]:
        raise ValueError(f"X and Y must have the same number of rows, got {X.shape[0]} and "
                         f"{Y.shape[0]}")
    P = X.shape[0]
    # exact power-of-two scalings of X and Y, back on at the end: exact where
    # representable, +-inf beyond (docs/conventions.md, "Bad input and overflow")
    (Xs, ex), (Ys, ey) = pow2_normalise(X), pow2_normalise(Y)
    return ldexp_safe(Xs.T @ Xs / P, 2 * ex), ldexp_safe(Ys.T @ Xs / P, ex + ey)


# ------------------------------------------------------------------------------ real data

#: The sources of :func:`load_digits`: ``"sklearn"``, scikit-learn's bundled 8x8 digits
#: (1797 images, 64 pixels 0..16; the ``data`` extra), and ``"mnist1d"``, the MNIST-1D
#: data set (5000 signals of length 40) that the ``mnist1d`` package generates offline
#: (the ``mnist1d`` extra: ``pip install linearnets[mnist1d]``).  Neither downloads anything.
DIGIT_SOURCES = ("sklearn", "mnist1d")


def _digit_images(source="sklearn"):
    """``(X, target)`` of a source of :data:`DIGIT_SOURCES`: every image (float64, read-only)
    and its digit 0-9, in the source's order.  scikit-learn reads its file each call (a few
    ms); MNIST-1D, generated, is kept after the first."""
    if source == "mnist1d":
        return _mnist1d()
    if source != "sklearn":
        raise ValueError(f"source must be one of {DIGIT_SOURCES}, got {source!r}")
    try:
        from sklearn.datasets import load_digits as _sk_digits
    except ImportError as exc:
        raise ImportError("the digits need scikit-learn, which bundles them (the 'data' "
                          "extra: pip install 'linearnets[data]')") from exc
    d = _sk_digits()
    X, target = d.data.astype(np.float64), np.asarray(d.target, dtype=np.int64)
    X.setflags(write=False)
    target.setflags(write=False)
    return X, target


@functools.lru_cache(maxsize=1)
def _mnist1d():
    try:
        from mnist1d.data import get_dataset_args, make_dataset
    except ImportError as exc:
        raise ImportError("source='mnist1d' needs the mnist1d package, which generates "
                          "MNIST-1D offline (the extra: pip install 'linearnets[mnist1d]')"
                          ) from exc
    # make_dataset seeds numpy's and Python's global generators (its own seed, 42): the
    # caller's global states are put back
    np_state, py_state = np.random.get_state(), random.getstate()
    try:
        d = make_dataset(get_dataset_args())
    finally:
        np.random.set_state(np_state)
        random.setstate(py_state)
    X = np.concatenate([d["x"], d["x_test"]]).astype(np.float64)
    target = np.concatenate([d["y"], d["y_test"]]).astype(np.int64)
    X.setflags(write=False)
    target.setflags(write=False)
    return X, target


def _digit_classes(classes):
    """``classes`` as a tuple of tuples of digits (one tuple per class), each digit 0-9 in
    one class only."""
    if classes is None:
        return tuple((d,) for d in range(10))
    msg = ("classes must be a sequence of at least two classes, each a digit 0-9 or a "
           f"sequence of digits (a digit in one class only), got {classes!r}")
    if isinstance(classes, (str, bytes, numbers.Number)):
        raise ValueError(msg)
    try:
        items = list(classes)
    except TypeError:
        raise ValueError(msg) from None
    out = []
    for c in items:
        group = (c,) if isinstance(c, numbers.Integral) else c
        if isinstance(group, (str, bytes)):
            raise ValueError(msg)
        try:
            group = tuple(check_int(d, "classes", 0, 9) for d in group)
        except TypeError:
            raise ValueError(msg) from None
        if not group:
            raise ValueError(msg)
        out.append(group)
    flat = [d for g in out for d in g]
    if len(out) < 2 or len(set(flat)) != len(flat):
        raise ValueError(msg)
    return tuple(out)


def load_digits(classes=(0, 1), n_train=None, n_test=None, *, standardize=True, pca=None,
                labels=None, seed=0, source="sklearn"):
    r"""Handwritten digits split into training and test sets, ready to train on.

    The images of the chosen digits (every image whose digit is in ``classes``, in the
    source's order) are split by one permutation,
    ``numpy.random.default_rng(seed).permutation(n_pool)``: the first ``n_train`` images
    train, the next ``n_test`` test.  Then, with statistics of the training set only:

    * ``standardize=True``: every pixel :math:`x_j \to (x_j - \mu_j)/\sigma_j` (a
      pixel constant on the training set is only centred); ``"center"``:
      :math:`x_j - \mu_j`; ``False``: the raw pixels;
    * ``pca=k``: the projections on the training set's top ``k`` principal directions
      (right singular vectors of the processed training matrix), scaled so that a
      training image has mean squared norm ``k`` (each component of unit mean square).

    Parameters
    ----------
    classes : sequence, or None
        The classes, in label order: each a digit 0-9 or a sequence of digits (``((0, 2,
        4, 6, 8), (1, 3, 5, 7, 9))``: parity).  None: the ten digits.  Default ``(0, 1)``.
    n_train, n_test : int, optional
        Sizes of the two sets, ``n_train + n_test <=`` the images of those classes (360
        for two digits of the ``"sklearn"`` source, 1797 for all ten).  One of them None:
        the rest of the images; both None: a fifth of the images test, the rest train.
    standardize : bool or "center"
        As above.  Default True.
    pca : int, optional
        Number of principal components kept (``1 <= pca <=`` the number of pixels).
    labels : {None, "pm1", "int", "onehot"}
        ``"pm1"``: +1 for ``classes[0]``, -1 for ``classes[1]`` (two classes only; the
        default for two classes); ``"int"``: the index of the class in ``classes``
        (int64; the default for more); ``"onehot"``: rows of the (n, K) identity (float64).
    seed : int >= 0, numpy.random.SeedSequence, Generator or None (fresh entropy)
        The split.
    source : {"sklearn", "mnist1d"}
        :data:`DIGIT_SOURCES`: scikit-learn's bundled 8x8 digits (1797 images, 64 pixels;
        the ``data`` extra), or MNIST-1D (5000 signals of 40 samples, generated offline
        by the ``mnist1d`` package with its own seed, pooled over its train/test split).

    Returns
    -------
    X_train : ndarray, shape (n_train, D)
    y_train : ndarray, shape (n_train,) or (n_train, K) for ``"onehot"``
    X_test : ndarray, shape (n_test, D)
    y_test : ndarray, shape (n_test,) or (n_test, K)

    Raises
    ------
    ValueError
        Naming the argument: unknown classes or source, sizes beyond the images of the
        classes, ``"pm1"`` with more than two classes, a bad ``pca``.
    ImportError
        Without scikit-learn (``source="sklearn"``) or mnist1d (``source="mnist1d"``).

    Notes
    -----
    The 8x8 digits are the UCI optical recognition of handwritten digits test set
    (Alpaydin & Kaynak 1998) that scikit-learn ships.  MNIST-1D: Greydanus & Kobak (2024),
    "Scaling down deep learning with MNIST-1D".

    Examples
    --------
    >>> import linearnets as ln
    >>> Xtr, ytr, Xte, yte = ln.load_digits((0, 1), n_train=100, n_test=50, seed=0)
    >>> Xtr.shape, Xte.shape, sorted(set(ytr))
    ((100, 64), (50, 64), [-1.0, 1.0])
    >>> bool(abs(Xtr.mean(axis=0)).max() < 1e-12)       # centred on the training set
    True
    """
    groups = _digit_classes(classes)
    if standardize not in (True, False, "center"):
        raise ValueError(f"standardize must be True, False or 'center', got {standardize!r}")
    if labels is None:
        labels = "pm1" if len(groups) == 2 else "int"
    if labels not in ("pm1", "int", "onehot"):
        raise ValueError(f"labels must be 'pm1', 'int' or 'onehot', got {labels!r}")
    if labels == "pm1" and len(groups) != 2:
        raise ValueError(f"labels='pm1' needs two classes, got {len(groups)}: use 'int' or "
                         f"'onehot'")
    if source not in DIGIT_SOURCES:
        raise ValueError(f"source must be one of {DIGIT_SOURCES}, got {source!r}")
    images, target = _digit_images(source)
    cls = np.full(10, -1, dtype=np.int64)
    for k, g in enumerate(groups):
        cls[list(g)] = k
    keep = cls[target] >= 0
    X, y = images[keep], cls[target[keep]]
    n = X.shape[0]
    if n_train is not None:
        n_train = check_int(n_train, "n_train", 1)
    if n_test is not None:
        n_test = check_int(n_test, "n_test", 0)
    if n_train is None and n_test is None:
        n_test = n // 5
    if n_train is None:
        n_train = n - n_test
        if n_train < 1:
            raise ValueError(f"n_test = {n_test} leaves no training image of the {n} of these "
                             f"classes")
    if n_test is None:
        n_test = max(n - n_train, 0)
    if n_train + n_test > n:
        raise ValueError(f"n_train + n_test must be <= {n}, the images of the classes "
                         f"{classes!r} ({source}), got {n_train} + {n_test}")
    if pca is not None:
        pca = check_int(pca, "pca", 1, X.shape[1])
    perm = rng_from_seed(seed).permutation(n)
    tr, te = perm[:n_train], perm[n_train:n_train + n_test]
    if standardize:
        mu = X[tr].mean(0)
        if standardize == "center":
            X = X - mu
        else:
            sd = X[tr].std(0)
            sd[sd == 0] = 1.0
            X = (X - mu) / sd
    if pca is not None:
        _, _, Vt = np.linalg.svd(X[tr], full_matrices=False)
        X = X @ Vt[:pca].T
        X /= np.sqrt((X[tr] ** 2).sum(1).mean())      # unit mean squared norm ...
        X *= np.sqrt(pca)                              # ... times pca
    if labels == "pm1":
        y = np.where(y == 0, 1.0, -1.0)
    elif labels == "onehot":
        y = np.eye(len(groups))[y]
    return X[tr], y[tr], X[te], y[te]
