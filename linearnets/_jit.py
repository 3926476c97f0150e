"""When ``backend="auto"`` runs the compiled kernels: the first run on numpy, the kernels
compiled in the background.

Compiling every kernel a run needs costs about a minute on a first run (docs/first_run.md);
numpy runs the same methods at once.  So where ``"auto"`` would pick numba and the cache is
not complete yet (no :func:`linearnets._numba_cache.warm_marker`), the call runs on numpy
and this process starts, once per cache (a lock file), ``python -m linearnets warmup
--background`` (:func:`linearnets.cli.background_warmup`): a quiet, low-priority process that compiles every kernel into the cache and
then writes the marker; later ``"auto"`` calls (in any process) pick numba.

The environment variable ``LINEARNETS_JIT`` chooses:

* ``background`` (the default) -- as above;
* ``eager`` -- ``"auto"`` picks numba and compiles in this process, as before (the test
  suite runs so: deterministic, and no process outlives it);
* ``off`` -- ``"auto"`` picks numba only where the cache is already complete, and never
  starts a warm-up (a cluster's workers, read-only caches).

An explicit ``backend="numba"`` always compiles in-process.  Without ``fcntl`` (not POSIX)
or a writable cache, ``background`` acts as ``eager``.
"""
from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading

from . import _numba_cache

__all__ = ["ENV_VAR", "MODES", "WARMER", "jit_mode", "compiled_ready", "start_warmer"]

#: Environment variable selecting the rule (:data:`MODES`).
ENV_VAR = "LINEARNETS_JIT"
#: Its accepted values; the first is the default.
MODES = ("background", "eager", "off")

#: What :func:`start_warmer` runs (after ``sys.executable``).
WARMER = ("-m", "linearnets", "warmup", "--background")

_popen = subprocess.Popen       # (tests record the call instead)
_LOCK = threading.Lock()
_state = {"started": None, "noticed": False, "warming": 0}
_NOTICE = ("linearnets: the numba kernels are not compiled yet: this call runs on numpy while "
           "one background process compiles them into {dir} (later calls use them; "
           "LINEARNETS_JIT=eager compiles in this process instead, see docs/first_run.md).\n")


def jit_mode():
    """The value of ``LINEARNETS_JIT`` (default ``"background"``); ValueError for another."""
    mode = os.environ.get(ENV_VAR, "").strip().lower() or MODES[0]
    if mode not in MODES:
        raise ValueError(f"{ENV_VAR} must be one of {MODES}, got {os.environ[ENV_VAR]!r}")
    return mode


def compiled_ready():
    """Whether a ``backend="auto"`` call should run the compiled kernels now.

    True in ``eager`` mode, where the cache is complete, or where the background rule cannot
    run (no ``fcntl`` or no writable cache).  Otherwise False: in ``background`` mode after
    starting the warm-up (:func:`start_warmer`, which prints one notice per process).

    No rule by problem size: numpy's cost over the compiled loop is a per-step Python
    overhead, a factor that falls towards 1 as the products grow (docs/first_run.md), so a
    cold call is slower on numpy than compiling only when it takes very many steps, which
    is not known before it runs.
    """
    mode = jit_mode()
    if mode == "eager" or _state["warming"] or _numba_cache.is_warm():
        return True
    if mode == "off":
        return False
    if _numba_cache.fcntl is None or _numba_cache.cache_dir() is None:
        return True
    start_warmer()
    return False


@contextlib.contextmanager
def warming():
    """Inside the block :func:`compiled_ready` is True: the warm-up
    (``linearnets._warmup.warmup``) compiles the kernels its tasks reach through
    ``backend="auto"`` instead of running them on numpy (the cache is not complete until it
    ends)."""
    _state["warming"] += 1
    try:
        yield
    finally:
        _state["warming"] -= 1


def start_warmer():
    """Start ``python -m linearnets warmup --background`` unless this process already tried,
    another process holds the cache's warm-up lock, or the cache is complete.

    The lock (:func:`linearnets._numba_cache.warmup_lock`) is taken here and handed to the
    child as an inherited descriptor: it is held exactly while the warm-up runs and released
    when it ends, however it ends.  Returns the child's ``Popen`` or None.
    """
    with _LOCK:
        if _state["started"] is not None:
            return _state["started"] or None
        _state["started"] = False
        fd = _numba_cache.warmup_lock()
        if fd is None:
            return None
        try:
            if _numba_cache.is_warm() or _numba_cache.warmup_failed():
                return None        # complete, or a warm-up of these sources failed: not again
            root = _numba_cache.cache_dir()
            # the child imports this very package (an editable tree, a relative PYTHONPATH)
            top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
            path = os.pathsep.join([top] + [p for p in [os.environ.get("PYTHONPATH")] if p])
            env = dict(os.environ, **{ENV_VAR: "eager", "LINEARNETS_WARMUP_LOCK_FD": str(fd),
                                      "PYTHONPATH": path})
            with open(os.path.join(root, "warmup.log"), "ab") as log:
                proc = _popen(
                    [sys.executable, *WARMER],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, cwd=root,
                    pass_fds=(fd,), start_new_session=True, close_fds=True)
        except OSError:
            return None
        finally:
            os.close(fd)
        _state["started"] = proc
        if not _state["noticed"]:
            _state["noticed"] = True
            try:
                sys.stderr.write(_NOTICE.format(dir=root))
                sys.stderr.flush()
            except Exception:  # a closed or missing stderr must not break a run
                pass
        return proc
