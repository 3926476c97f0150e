"""The BLAS threads of this package's calls: one thread for small products, the pool for large
ones only where the cores are free.

OpenBLAS (the BLAS that numpy and scipy load, and that numba's compiled ``np.dot`` calls)
starts a pool of one thread per core and splits every product above a small size across it.
That pays only while the product is large and the other cores are idle: a product split
across two threads while another process holds one of the two cores waits for the scheduler
at every call, and a flow makes thousands of calls (a 64-200-1 ReLU flow: 21.3 s against
2.3 s on one thread with one core busy; tanh 10-64-64-1: 620 against 201 ms).  So each flow,
descent, NTK and kernel call of this package runs its products under :func:`limited`:

* below :data:`CROSSOVER` multiply-adds in its largest product, on one thread;
* above it, on as many threads as there are free cores: the cores this process may use
  (``os.sched_getaffinity``), less the load of other processes (the larger of the one-minute
  load average less this process's own CPU rate over the same minute, and the threads
  runnable at this instant besides this one), rounded, at most the pool that the libraries
  have (which ``OPENBLAS_NUM_THREADS`` or a caller's ``threadpoolctl`` limit sets);
* ``LINEARNETS_THREADS=N`` in the environment, or ``with linearnets.threads(N):``, fixes N
  threads for every call instead.

The measurements behind the crossover are in docs/methods.md ("Threads";
``benchmarks/studies/study_thread_crossover.py``).
"""
from __future__ import annotations

import contextlib
import functools
import operator
import os
import time

__all__ = ["CROSSOVER", "ENV_VAR", "blas_threads", "limited", "threads"]

#: Multiply-adds of a call's largest matrix product below which it runs on one thread:
#: on this package's reference machine (2 cores, OpenBLAS 0.3) the pool first wins idle
#: near 1e6 (an isolated product, 1.6-1.75x), but between an integrator's other work it
#: loses up to 1.8x idle and 9x with one core busy at that size; from 1e7 it wins idle.
CROSSOVER = 10_000_000

#: The environment variable that fixes the thread count (a positive integer, or "auto").
ENV_VAR = "LINEARNETS_THREADS"

#: Seconds over which this process's own CPU rate is taken out of the load average.
_WINDOW = 60.0

_fixed = []             # the stack of ``threads(n)`` overrides
_samples = []           # (wall, cpu) of this process at recent calls, oldest first


@functools.lru_cache(maxsize=None)
def _blas():
    """threadpoolctl's controllers of the loaded BLAS libraries (made once: it scans them)."""
    from threadpoolctl import ThreadpoolController
    return tuple(ThreadpoolController().select(user_api="blas").lib_controllers)


def _cores():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:      # pragma: no cover - not on Linux
        return os.cpu_count() or 1


def _own_rate(now, cpu):
    """This process's CPU seconds per second over about the last minute (0 at first)."""
    while len(_samples) > 1 and now - _samples[1][0] >= _WINDOW:
        del _samples[0]
    rate = 0.0
    if _samples and now - _samples[0][0] > 1.0:
        rate = (cpu - _samples[0][1]) / (now - _samples[0][0])
    if not _samples or now - _samples[-1][0] > 1.0:
        _samples.append((now, cpu))
    return rate


def _env_threads():
    value = os.environ.get(ENV_VAR)
    if value is None:
        return None
    value = value.strip().lower()
    if value in ("", "auto"):
        return None
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"{ENV_VAR} must be a positive integer or 'auto', got {value!r}")
    return n


def blas_threads(work, pool=None):
    """The BLAS thread count for a call whose largest matrix product has ``work``
    multiply-adds (m·k·n for an (m, k) @ (k, n) product).

    Parameters
    ----------
    work : float
        Multiply-adds of the call's largest product.
    pool : int, optional
        The most threads to use (default: the BLAS libraries' current setting).

    Returns
    -------
    int
        ``threads(n)``'s or ``LINEARNETS_THREADS``'s n where set; else 1 below
        :data:`CROSSOVER`, and above it the free cores (module docstring), at least 1 and at
        most ``pool``.
    """
    if pool is None:
        pool = max([lib.num_threads for lib in _blas()], default=1)
    fixed = _fixed[-1] if _fixed else _env_threads()
    if fixed is not None:
        return fixed
    if work < CROSSOVER or pool <= 1:
        return 1
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):     # pragma: no cover - no load average (Windows)
        load = 0.0
    others = max(load - _own_rate(time.monotonic(), time.process_time()), _running_now() - 1)
    return max(1, min(pool, round(_cores() - max(0.0, others))))


def _running_now():
    """Threads running or runnable on the machine at this instant, this one included (Linux's
    /proc/loadavg), so that a process started within the last minute, which the one-minute
    average barely shows yet, is counted; 1 where it cannot be read."""
    try:
        with open("/proc/loadavg") as f:
            return int(f.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return 1


class limited:
    """Run the block's BLAS products on :func:`blas_threads` (``work``) threads, and restore
    the libraries' settings after it (``with limited(work) as n``: n the count)."""

    __slots__ = ("work", "changed")

    def __init__(self, work):
        self.work, self.changed = work, ()

    def __enter__(self):
        libs = _blas()
        old = [lib.num_threads for lib in libs]
        n = blas_threads(self.work, max(old, default=1))
        self.changed = [(lib, k) for lib, k in zip(libs, old) if k != n]
        for lib, _ in self.changed:
            lib.set_num_threads(n)
        return n

    def __exit__(self, *exc):
        for lib, k in self.changed:
            lib.set_num_threads(k)
        return False


@contextlib.contextmanager
def threads(n):
    """Fix the BLAS thread count of this package's calls inside the block.

    Parameters
    ----------
    n : int
        Threads, >= 1 (the libraries' pool can be larger than the cores: it is not capped).

    Examples
    --------
    >>> import numpy as np
    >>> import linearnets as ln
    >>> with ln.threads(1):
    ...     K = ln.empirical_ntk([np.eye(2)], np.eye(2), np.eye(2))
    """
    try:
        count = -1 if isinstance(n, bool) else operator.index(n)
    except TypeError:
        count = -1
    if count < 1:
        raise ValueError(f"threads: n must be an integer >= 1, got {n!r}")
    _fixed.append(count)
    try:
        yield count
    finally:
        _fixed.pop()
