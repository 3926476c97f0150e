"""Input validation shared by the closed forms and the simulator.

Every public function casts its inputs here, so that bad input fails early with
a ``ValueError`` that names the offending argument instead of propagating a NaN.
"""
from __future__ import annotations

import numbers

import numpy as np

__all__ = [
    "as_float_array",
    "check_positive",
    "check_nonnegative",
    "check_depth",
    "check_matrix",
    "check_unit_vector",
    "UNIT_TOL",
]

#: One rule for unit vectors (a teacher direction beta, ...), for every public
#: function: ``|‖v‖ − 1| <= UNIT_TOL``.  1e-6 accepts a vector normalised in
#: float32 (its norm is 1 within ~1e-7 whatever its length) and still rejects a
#: scaled vector such as ``s * beta``; an accepted vector is renormalised in float64.
UNIT_TOL = 1e-6


def as_float_array(x, name, *, finite=True, ndim=None):
    """Return ``x`` as a float64 numpy array, rejecting non-numeric or non-finite input.

    Parameters
    ----------
    x : array_like
        The value to convert.
    name : str
        Argument name used in error messages.
    finite : bool, optional
        If True (default), NaN and ±inf raise ``ValueError``.
    ndim : int or tuple of int, optional
        Allowed number(s) of dimensions.
    """
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a real number or array of real numbers") from exc
    if np.iscomplexobj(x):
        raise ValueError(f"{name} must be real, got a complex value")
    if finite and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite (got NaN or inf)")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if arr.ndim not in allowed:
            if allowed == (0,):
                raise ValueError(f"{name} must be a scalar, got shape {arr.shape}")
            raise ValueError(f"{name} must have {' or '.join(map(str, allowed))} dimension(s), "
                             f"got shape {arr.shape}")
    return arr


def check_positive(x, name, *, finite=True, ndim=None):
    """Cast to float64 and require every entry to be strictly positive (``ndim``: as in
    :func:`as_float_array`, 0 for a scalar)."""
    arr = as_float_array(x, name, finite=finite, ndim=ndim)
    if np.any(~(arr > 0)):
        raise ValueError(f"{name} must be > 0, got min {np.min(arr)!r}")
    return arr


def check_nonnegative(x, name, *, finite=True, ndim=None):
    """Cast to float64 and require every entry to be >= 0 (``ndim``: as in
    :func:`check_positive`)."""
    arr = as_float_array(x, name, finite=finite, ndim=ndim)
    if np.any(~(arr >= 0)):
        raise ValueError(f"{name} must be >= 0, got min {np.min(arr)!r}")
    return arr


def check_depth(depth, name="depth"):
    """Return ``depth`` as a Python int >= 1; reject floats with a fractional part, bools, arrays."""
    if isinstance(depth, bool) or not isinstance(depth, (numbers.Integral, numbers.Real)):
        raise ValueError(f"{name} must be an integer >= 1, got {depth!r}")
    if isinstance(depth, numbers.Real) and not isinstance(depth, numbers.Integral):
        if not np.isfinite(depth) or depth != int(depth):
            raise ValueError(f"{name} must be an integer >= 1, got {depth!r}")
    d = int(depth)
    if d < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {depth!r}")
    return d


def check_matrix(x, name, *, finite=True):
    """Cast to a C-contiguous float64 2-D array."""
    arr = as_float_array(x, name, finite=finite, ndim=2)
    return np.ascontiguousarray(arr)


def check_unit_vector(x, name, *, size=None):
    """Cast to a float64 1-D array with ``|‖x‖ − 1| <= UNIT_TOL`` and return ``x / ‖x‖``.

    Parameters
    ----------
    x : array_like, shape (n,)
        Any real dtype (float32 unit vectors are accepted, see :data:`UNIT_TOL`).
    name : str
        Argument name used in error messages.
    size : int, optional
        Required length.

    Returns
    -------
    ndarray, shape (n,), float64, unit norm to rounding
    """
    v = as_float_array(x, name, ndim=1)
    if size is not None and v.shape != (size,):
        raise ValueError(f"{name} must have shape ({size},), got {v.shape}")
    norm = float(np.linalg.norm(v))
    if not abs(norm - 1.0) <= UNIT_TOL:
        raise ValueError(f"{name} must be a unit vector (|norm - 1| <= {UNIT_TOL:g}), got norm {norm!r}")
    return v / norm
