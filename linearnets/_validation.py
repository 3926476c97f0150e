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
]


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
