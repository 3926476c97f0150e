"""What runs on a worker: thread limits, warm-up, and one point's call with its seeds and timings.

Workers never touch the store; they return a plain tuple to the driver.
"""
from __future__ import annotations

import inspect
import os
import socket
import sys
import time
import traceback

THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS",
               "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS", "NUMBA_NUM_THREADS")

MAX_ARRAY = 100_000  # elements in one array-valued result

_FN_CACHE = {}


def limit_threads():
    """One BLAS / OpenMP / numba thread in this process (and its children).

    Sets the environment variables for anything started later and limits the
    libraries already loaded through threadpoolctl and ``numba.set_num_threads``.
    """
    for v in THREAD_VARS:
        os.environ[v] = "1"
    try:
        import threadpoolctl
        threadpoolctl.threadpool_limits(1)
    except Exception:  # pragma: no cover - threadpoolctl missing or a library it cannot drive
        pass
    try:
        import numba
        numba.set_num_threads(1)
    except Exception:  # pragma: no cover
        pass


def init_worker(warmup=None):
    """Process-pool initialiser (and Dask plugin set-up): limit threads, run the warm-up once."""
    limit_threads()
    if warmup:
        from .spec import resolve_function
        resolve_function(warmup)()


def _plain(v, name):
    """A result value as JSON-able Python: float / int / bool / str, or nested lists of numbers."""
    if isinstance(v, (bool, str)) or v is None:
        return v
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        return float(v)
    if hasattr(v, "dtype") and hasattr(v, "shape"):
        import numpy as np
        a = np.asarray(v)
        if a.ndim == 0:
            return _plain(a.item(), name)
        if a.size > MAX_ARRAY:
            raise ValueError(f"result {name!r} has {a.size} elements (at most {MAX_ARRAY})")
        if a.dtype.kind not in "biuf":
            raise ValueError(f"result {name!r} has dtype {a.dtype}; expected numbers")
        return a.astype(float).tolist() if a.dtype.kind == "f" else a.tolist()
    if isinstance(v, (list, tuple)):
        return [_plain(x, name) for x in v]
    raise ValueError(f"result {name!r} is a {type(v).__name__}; expected a number, string or array")


def _resolve(ref):
    fn = _FN_CACHE.get(ref if isinstance(ref, str) else id(ref))
    if fn is None:
        from .spec import resolve_function
        fn = resolve_function(ref)
        try:
            sig = inspect.signature(fn)
            names = set(sig.parameters)
        except (TypeError, ValueError):  # pragma: no cover - builtins
            names = set()
        fn = (fn, "rng" in names, "seed_sequence" in names)
        _FN_CACHE[ref if isinstance(ref, str) else id(ref)] = fn
    return fn


def run_point(task):
    """Run one point.

    Parameters
    ----------
    task : tuple
        ``(key, fn_ref, params, entropy)``; ``fn_ref`` is ``"module:callable"``
        or a picklable callable.

    Returns
    -------
    tuple
        ``(key, status, result, error, provenance)`` with status ``"done"`` or
        ``"failed"`` (the function raised, or returned something that is not a
        dict of numbers / small arrays); provenance has ``host``, ``pid``,
        ``started``, ``finished`` (Unix times) and ``elapsed`` (s, perf counter).
    """
    key, ref, params, entropy = task
    nb = sys.modules.get("numba")
    if nb is not None and os.environ.get("NUMBA_NUM_THREADS") == "1":
        try:  # numba's thread count is per calling thread (Dask runs tasks on a pool of threads)
            if nb.get_num_threads() != 1:
                nb.set_num_threads(1)
        except Exception:  # pragma: no cover
            pass
    started = time.time()
    t0 = time.perf_counter()
    status, result, error = "done", None, None
    try:
        fn, wants_rng, wants_ss = _resolve(ref)
        kwargs = dict(params)
        if wants_rng or wants_ss:
            import numpy as np
            seed = int(params.get("seed", 0))
            if wants_rng and "rng" not in kwargs:
                kwargs["rng"] = np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=(seed, 0)))
            if wants_ss and "seed_sequence" not in kwargs:
                kwargs["seed_sequence"] = np.random.SeedSequence(entropy, spawn_key=(seed,))
        out = fn(**kwargs)
        if not isinstance(out, dict):
            raise TypeError(f"the function returned a {type(out).__name__}, expected a dict")
        result = {}
        for k, v in out.items():
            if not isinstance(k, str):
                raise TypeError(f"result key {k!r} is not a string")
            result[k] = _plain(v, k)
    except BaseException as exc:  # a failing point is data, not a crash of the sweep
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        status, result = "failed", None
        error = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        tb = traceback.format_exc(limit=-8)
        error = error + "\n" + tb if tb else error
    elapsed = time.perf_counter() - t0
    prov = dict(host=socket.gethostname(), pid=os.getpid(), started=started, finished=time.time(),
                elapsed=elapsed)
    return key, status, result, error, prov
