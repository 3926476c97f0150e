"""Array-backend selection for the simulator: ``"numpy"``, ``"numba"``, ``"cupy"`` or ``"auto"``.

* ``"numpy"`` -- the readable reference; every product goes through numpy/BLAS,
  the stepping loop runs in Python.
* ``"numba"`` -- the whole stepping loop compiled (``cache=True``); no Python per step.
  numba is a required dependency (``install_requires``): ``import linearnets`` needs it.
  The kernels compile on first use (one notice on stderr) and are cached outside
  the package, in a user cache directory (:mod:`linearnets._numba_cache`);
  ``python -m linearnets warmup`` compiles them all ahead of time.
* ``"cupy"`` -- state and products on a GPU.  CuPy is an optional dependency
  (extra ``gpu``): it is detected with :func:`importlib.util.find_spec` without
  being imported, imported lazily only when the backend is used, and results are
  converted back to numpy at the boundary (:func:`to_numpy`).
* ``"auto"`` -- :func:`resolve_backend` picks cupy for wide networks when CuPy and
  a GPU are present, numba otherwise (numpy for a method that implements only numpy) once
  the kernels are in the cache: before, numpy, while one background process compiles them
  (:mod:`linearnets._jit`; ``LINEARNETS_JIT=eager`` compiles in-process instead).
"""
from __future__ import annotations

import functools
import importlib
import importlib.util

import numpy as np

from . import _jit

__all__ = [
    "BACKENDS",
    "CUPY_MIN_WIDTH",
    "check_backend",
    "numba_available",
    "cupy_installed",
    "gpu_available",
    "get_cupy",
    "resolve_backend",
    "to_numpy",
]

#: Accepted backend names.
BACKENDS = ("auto", "numpy", "numba", "cupy")

#: Widest layer from which ``"auto"`` prefers the GPU: below it kernel-launch
#: latency and host transfers outweigh the O(C N^2) products of one gradient.
CUPY_MIN_WIDTH = 1024


def check_backend(name):
    """Return ``name`` if it is a known backend name, else raise ``ValueError``."""
    if not isinstance(name, str) or name not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {name!r}")
    return name


@functools.lru_cache(maxsize=None)
def numba_available() -> bool:
    """Whether numba can be imported: always, in an install of this package (numba is
    required; :mod:`linearnets.theory` imports it)."""
    return importlib.util.find_spec("numba") is not None


@functools.lru_cache(maxsize=None)
def cupy_installed() -> bool:
    """Whether CuPy is installed (checked without importing it)."""
    return importlib.util.find_spec("cupy") is not None


@functools.lru_cache(maxsize=None)
def gpu_available() -> bool:
    """Whether CuPy is installed, importable and sees at least one CUDA device."""
    if not cupy_installed():
        return False
    try:
        cp = importlib.import_module("cupy")
        return cp.cuda.runtime.getDeviceCount() > 0
    except Exception:  # any CUDA/driver failure means: no usable GPU
        return False


def get_cupy():
    """Import and return CuPy, or raise ``ValueError`` saying why the backend is unusable."""
    if not cupy_installed():
        raise ValueError("backend='cupy' needs CuPy, which is not installed "
                         "(pip install 'linearnets[gpu]' or a cupy-cudaXXx wheel)")
    try:
        cp = importlib.import_module("cupy")
    except Exception as exc:
        raise ValueError(f"backend='cupy': CuPy is installed but failed to import ({exc})") from exc
    if not gpu_available():
        raise ValueError("backend='cupy': CuPy is installed but no CUDA GPU is available")
    return cp


def resolve_backend(name, max_width=0, available=()):
    """Turn a requested backend name into a concrete one.

    Parameters
    ----------
    name : str
        One of :data:`BACKENDS`.
    max_width : int
        Widest layer of the network (guides ``"auto"``).
    available : collection of str
        Backends the chosen method implements (empty: no restriction).

    Returns
    -------
    str
        ``"numpy"``, ``"numba"`` or ``"cupy"``.
    """
    check_backend(name)
    ok = (lambda b: not available or b in available)
    if name == "auto":
        if ok("cupy") and max_width >= CUPY_MIN_WIDTH and gpu_available():
            return "cupy"
        if ok("numba") and (not ok("numpy") or _jit.compiled_ready()):
            return "numba"
        if ok("numpy"):
            return "numpy"
        raise ValueError(f"no usable backend among {tuple(available)}")
    if name == "cupy":
        get_cupy()  # readable error if unusable
    if not ok(name):
        raise ValueError(f"backend {name!r} is not implemented for this method "
                         f"(available: {tuple(sorted(available))})")
    return name


def to_numpy(a):
    """Return ``a`` as a float64 numpy array (copies device arrays to the host)."""
    if type(a).__module__.startswith("cupy"):
        return np.asarray(a.get(), dtype=np.float64)
    return np.asarray(a, dtype=np.float64)
