"""Input validation shared by the closed forms and the simulator.

Every public function casts its inputs here, so that bad input fails early with
a ``ValueError`` that names the offending argument instead of propagating a NaN.
"""
from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = [
    "as_float_array",
    "check_positive",
    "check_nonnegative",
    "check_depth",
    "check_int",
    "check_int_array",
    "check_layer_sizes",
    "check_nonempty",
    "broadcast_args",
    "check_seed",
    "fresh_seed",
    "rng_from_seed",
    "check_matrix",
    "check_unit_vector",
    "UNIT_TOL",
    "pow2_normalise",
    "ldexp_safe",
    "pow2_power",
    "overflow_check",
]

#: One rule for unit vectors (a teacher direction beta, ...), for every public
#: function: ``|‖v‖ − 1| <= UNIT_TOL``.  1e-6 accepts a vector normalised in
#: float32 (its norm is 1 within ~1e-7 whatever its length) and still rejects a
#: scaled vector such as ``s * beta``; an accepted vector is renormalised in float64.
UNIT_TOL = 1e-6


def _not_a_number(x):
    """True for what numpy would cast to float but is no number: strings, bytes and
    booleans (``'3'``, ``True``, ``array([True])``), also inside lists, and None (which
    numpy reads as NaN)."""
    if x is None or isinstance(x, (str, bytes, bool, np.bool_)):
        return True
    if isinstance(x, np.ndarray):
        if x.dtype.kind in "USb":
            return True
        return x.dtype == object and any(_not_a_number(e) for e in x.flat)
    if isinstance(x, (list, tuple)):
        return any(_not_a_number(e) for e in x)
    return False


def as_float_array(x, name, *, finite=True, ndim=None):
    """Return ``x`` as a float64 numpy array, rejecting non-numeric or non-finite input.

    Strings, booleans and None are not numbers: ``'3'``, ``True``, ``array([True])`` and
    ``None`` are a ``ValueError`` naming ``name`` (numpy would read them as 3.0, 1.0, NaN).

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
    if type(x) is np.ndarray and x.dtype == np.float64:
        arr = x                        # the common case, a float64 array, without casts
    else:
        if _not_a_number(x):
            raise ValueError(f"{name} must be a real number or array of real numbers, not a "
                             f"string, boolean or None: got {x!r}")
        try:
            arr = np.asarray(x, dtype=np.float64)
        except OverflowError as exc:   # a Python int beyond the float64 range (10**400)
            raise ValueError(f"{name} overflows float64 (an integer beyond 1.8e308)") from exc
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{name} must be a real number or array of real numbers") from exc
        if np.iscomplexobj(x):
            raise ValueError(f"{name} must be real, got a complex value")
    if finite and not np.isfinite(arr).all():
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
    if type(x) is float and x > 0 and x < math.inf and ndim in (None, 0):
        return np.asarray(x)          # the common case, a positive Python float, quickly
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


#: The largest integer any count, size, depth or index may be: numpy's array sizes and
#: indices are int64, so a larger integer (``P=1e300``, ``10**30``) can only fail later,
#: and less clearly.
INT_MAX = 2 ** 63 - 1


def check_int(x, name, minimum=0, maximum=None):
    """Return ``x`` as a Python int in ``[minimum, maximum]``: the one rule for integer
    arguments (counts, sizes, depths, layer indices).

    Accepts Python and numpy integers and integral floats (``3.0``, as a TOML spec may
    write them); rejects booleans, strings, fractions, NaN/inf, None, arrays and
    integers beyond int64 (:data:`INT_MAX`: ``1e300`` is integral but no count) with a
    ``ValueError`` naming ``name``.
    """
    bound = f">= {minimum}" if maximum is None else f"in [{minimum}, {maximum}]"
    msg = f"{name} must be an integer {bound}, got {x!r}"
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, numbers.Real):
        raise ValueError(msg)
    if not isinstance(x, numbers.Integral):
        if not np.isfinite(x) or x != int(x):
            raise ValueError(msg)
    n = int(x)
    if n < minimum or (maximum is not None and n > maximum):
        raise ValueError(msg)
    if n > INT_MAX:
        raise ValueError(f"{name} must be an integer {bound} that fits in int64 (at most "
                         f"2**63 - 1), got {x!r}")
    return n


def check_int_array(x, name, minimum=0):
    """Cast an integer-valued array (e.g. widths to broadcast over) to float64, every
    entry an integer ``>= minimum``; booleans and strings are a ``ValueError`` naming
    ``name``, as for :func:`check_int`."""
    if _not_a_number(x):
        raise ValueError(f"{name} must be an integer >= {minimum} (or an array of them), got {x!r}")
    arr = as_float_array(x, name)
    if np.any(arr < minimum) or np.any(arr != np.round(arr)):
        raise ValueError(f"{name} must be an integer >= {minimum} (or an array of them), got {x!r}")
    return arr


def check_depth(depth, name="depth"):
    """Return ``depth`` as a Python int >= 1 (:func:`check_int` with ``minimum=1``)."""
    return check_int(depth, name, minimum=1)


def check_layer_sizes(layer_sizes, name="layer_sizes", length=None):
    """Validate ``(D, N_1, ..., N_{L-1}, C)``: a sequence of at least two (exactly
    ``length``, if given) positive integers, each by :func:`check_int`; returns a tuple.

    None, a number, a string (``'abc'``, ``'341'``) or an array that is not 1-D is a
    ``ValueError`` naming ``name``.
    """
    what = "(D, ..., C)" if length is None else "(" + ", ".join(["D", "N", "C"][:length]) + ")"
    if (layer_sizes is None or isinstance(layer_sizes, (str, bytes, numbers.Number))
            or (isinstance(layer_sizes, np.ndarray) and layer_sizes.ndim != 1)):
        raise ValueError(f"{name} must be a sequence {what} of positive integers, "
                         f"got {layer_sizes!r}")
    try:
        items = list(layer_sizes)
    except TypeError:
        raise ValueError(f"{name} must be a sequence {what} of positive integers, "
                         f"got {layer_sizes!r}") from None
    sizes = tuple(check_int(n, f"{name}[{i}]", minimum=1) for i, n in enumerate(items))
    if (length is None and len(sizes) < 2) or (length is not None and len(sizes) != length):
        need = "at least two entries (D, C)" if length is None else f"{length} entries {what}"
        raise ValueError(f"{name} needs {need}, got {layer_sizes!r}")
    return sizes


def check_nonempty(x, name, what="entry"):
    """Return ``x`` unless it has no entries (``len(x) == 0`` or an array of size 0): the
    one rule for arguments a result needs at least one of (layers, samples, modes); else a
    ``ValueError`` naming ``name``.  ``what`` names one entry in the message."""
    n = x.size if isinstance(x, np.ndarray) else len(x)
    if n == 0:
        raise ValueError(f"{name} must hold at least one {what}, got an empty {type(x).__name__}")
    return x


def broadcast_args(**named):
    """``numpy.broadcast_arrays`` of the named arguments (in the order given), with a
    ``ValueError`` that names them and their shapes when they do not broadcast: the one
    rule for array arguments that combine elementwise.

    Examples
    --------
    >>> broadcast_args(P=[10.0, 20.0], D=[5.0, 6.0, 7.0])
    Traceback (most recent call last):
    ...
    ValueError: arguments P, D cannot be broadcast together: P (2,), D (3,)
    """
    try:
        return np.broadcast_arrays(*named.values())
    except ValueError:
        shapes = ", ".join(f"{k} {np.shape(v)}" for k, v in named.items())
        raise ValueError(f"arguments {', '.join(named)} cannot be broadcast together: "
                         f"{shapes}") from None


def _is_seed_int(x):
    return isinstance(x, numbers.Integral) and not isinstance(x, (bool, np.bool_)) and x >= 0


def fresh_seed():
    """A seed drawn from the operating system's entropy (``numpy.random.SeedSequence()``),
    as a Python int in ``[0, 2**63)``: what ``seed=None`` means, recorded as an int so that
    the run can be repeated (and stored wherever an int64 is)."""
    return int(np.random.SeedSequence().entropy) >> 65     # 128 bits of entropy -> 63


def check_seed(seed, name="seed"):
    """Validate a random seed: an int >= 0 (or a non-empty sequence of them, numpy's
    entropy), a ``numpy.random.SeedSequence``, a ``BitGenerator`` or a ``Generator``
    (returned as given; ints as Python ints), or None: fresh entropy, as
    ``numpy.random.default_rng(None)``, returned as the int :func:`fresh_seed` drew (so
    that a run can record the seed it used).

    Everything else -- negative or fractional numbers, NaN, booleans, strings -- is a
    ``ValueError`` naming ``name``.
    """
    if seed is None:
        return fresh_seed()
    if isinstance(seed, (np.random.Generator, np.random.SeedSequence, np.random.BitGenerator)):
        return seed
    if _is_seed_int(seed):
        return int(seed)
    if (isinstance(seed, (list, tuple)) and seed and all(_is_seed_int(s) for s in seed)):
        return [int(s) for s in seed]
    raise ValueError(f"{name} must be None, an int >= 0, a numpy SeedSequence or a Generator, "
                     f"got {seed!r}")


def rng_from_seed(seed, name="seed"):
    """``numpy.random.default_rng`` of a seed checked by :func:`check_seed` (a Generator
    passed in is returned itself, so its stream continues; None: fresh entropy)."""
    return np.random.default_rng(check_seed(seed, name))


def array_list(arrays, name, ndim, what):
    """``arrays`` as a list, one ``ndim``-D array alone as a list of it (``ValueError``: ``name``
    must be ``what``, for anything that is not a sequence)."""
    if isinstance(arrays, np.ndarray) and arrays.ndim == ndim:
        return [arrays]
    try:
        return list(arrays)
    except TypeError as exc:
        raise ValueError(f"{name} must be {what}") from exc


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


# ------------------------------------------------------------------------------ overflow
# The overflow rule (docs/conventions.md, "Bad input and overflow"): a result that is
# representable in float64 is computed however large or small the inputs, one that is not
# is +-inf without a numpy warning, never NaN.  Homogeneous maps (products, Gram matrices,
# kernels) get there by scaling their inputs by powers of two, which is exact: the scaled
# computation rounds exactly as the unscaled one wherever that one stays in range, and
# the scale goes back on at the end with ``ldexp`` (exact, +-inf beyond the range, 0
# stays 0).

def pow2_normalise(x):
    """``(x * 2**-e, e)``: ``x`` scaled exactly by a power of two so that its largest
    entry has magnitude in [0.5, 1) (``e = 0`` for an empty or all-zero ``x``).

    Parameters
    ----------
    x : ndarray of float64, finite

    Returns
    -------
    scaled : ndarray, the shape of ``x``
    e : int
    """
    x = np.asarray(x, dtype=np.float64)
    m = float(np.max(np.abs(x))) if x.size else 0.0
    if not (m > 0 and np.isfinite(m)):
        return x, 0
    e = int(np.frexp(m)[1])
    return np.ldexp(x, -e), e


def ldexp_safe(x, e):
    """``x * 2**e`` exactly, broadcasting: +-inf (no warning) beyond the float range, 0
    where ``x`` is 0, subnormal or 0 below it.  ``e``: int or integer array."""
    with np.errstate(over="ignore", under="ignore"):
        return np.ldexp(np.asarray(x, dtype=np.float64), np.asarray(e, dtype=np.int64))


def pow2_power(e, p):
    """``2**(e * p)`` as ``(mantissa, exponent)`` with ``mantissa * 2**exponent`` the value:
    a fractional power of a power-of-two scale (``s**p`` for ``s = f 2**e`` is
    ``f**p * 2**(e p)``) that never overflows before :func:`ldexp_safe` applies it.

    Parameters
    ----------
    e : int or integer array
    p : float

    Returns
    -------
    mantissa : float or ndarray in [1, 2)
    exponent : int64 ndarray (0-d for scalar ``e``), clipped to +-2**40 (far beyond the
        float range, where :func:`ldexp_safe` gives +-inf or 0 either way)
    """
    with np.errstate(over="ignore", invalid="ignore"):
        ep = np.clip(np.asarray(e, dtype=np.float64) * p, -2.0 ** 40, 2.0 ** 40)
    n = np.floor(ep)
    return np.exp2(ep - n), n.astype(np.int64)


def overflow_check(x, name, what, factor=1):
    """Raise a ``ValueError`` naming ``name`` when ``factor * max|x|^2`` exceeds the float64
    range: a quadratic statistic of ``x`` (``what``, e.g. a loss or a Gram matrix) would
    overflow."""
    m = float(np.max(np.abs(x))) if np.size(x) else 0.0
    with np.errstate(over="ignore"):
        big = not np.isfinite(m * m * factor)
    if big:
        raise ValueError(f"{name} overflows: {what} exceeds the float64 range "
                         f"(max |{name}| = {m:.3g})")
