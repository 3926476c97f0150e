"""Test fixtures of the sweep engine: small functions, one that fails on cue, one that logs
its calls, and a worker that kills itself.

Each is an ordinary module-level function, importable by name (``"sweep_fixtures:quadratic"``)
in the test process and in every worker and subprocess (``tests/conftest.py`` puts this
folder on ``sys.path`` and ``PYTHONPATH``).
"""
from __future__ import annotations

import os
import signal
import time

import numpy as np

__all__ = ["quadratic", "noisy", "linalg", "trivial", "fail_when", "logged", "die_once", "slow"]


def _log(path, **fields):
    """Append one line to ``path`` (O_APPEND: lines from concurrent processes do not interleave)."""
    if path:
        line = " ".join(f"{k}={v}" for k, v in fields.items()) + "\n"
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


def quadratic(x, a=1.0, b=0.0):
    """``{"y": a x² + b}``."""
    return {"y": a * x * x + b}


def trivial(**params):
    """Returns ``{"ok": 1.0}`` at once: measures the engine's own cost per point."""
    return {"ok": 1.0}


def noisy(x, seed, n=4, rng=None):
    """``x`` plus ``n`` standard normals drawn from the point's stream (engine-provided ``rng``)."""
    z = rng.standard_normal(n)
    return {"y": float(x + z.mean()), "z": z}


def linalg(n, seed=0, rng=None):
    """Floating-point work on a random ``n x n`` matrix from the point's stream (BLAS and LAPACK calls)."""
    A = rng.standard_normal((n, n))
    S = A @ A.T / n + np.eye(n)
    x = np.linalg.solve(S, rng.standard_normal(n))
    return {"logdet": float(np.linalg.slogdet(S)[1]), "x_norm": float(x @ x), "top": float(np.linalg.eigvalsh(S)[-1])}


def fail_when(x, bad=0.5):
    """``{"y": x}``, raising ValueError at ``x == bad``."""
    if x == bad:
        raise ValueError(f"x = {x} is the bad point")
    return {"y": float(x)}


def logged(x, log="", sleep=0.0, seed=0):
    """``{"y": 2x + seed}``, appending ``key`` and pid to the file ``log`` (a side channel counting calls)."""
    if sleep:
        time.sleep(sleep)
    _log(log, x=repr(float(x)), seed=seed, pid=os.getpid())
    return {"y": 2.0 * x + seed}


def die_once(x, marker="", kill_at=0.0, log="", sleep=0.0):
    """SIGKILLs its own worker the first time it runs ``x == kill_at`` (``marker`` file records it)."""
    if sleep:
        time.sleep(sleep)
    if x == kill_at and marker and not os.path.exists(marker):
        with open(marker, "w") as fh:
            fh.write(str(os.getpid()))
        os.kill(os.getpid(), signal.SIGKILL)
    _log(log, x=repr(float(x)), pid=os.getpid())
    return {"y": float(x) ** 3, "pid": os.getpid()}


def slow(x, sleep=0.05):
    """Sleeps ``sleep`` seconds, returns ``{"y": x}``."""
    time.sleep(sleep)
    return {"y": float(x), "v": np.arange(3) * x}
