"""Executors behind the sweep's one dispatch loop: a local process pool, or a Dask cluster.

Both offer the same four methods to :func:`linearnets.sweep.engine.run_sweep`:
``submit(task) -> handle``, ``wait(handles) -> done handles`` (blocks until at
least one is done), ``outcome(handle) -> (kind, value)`` with kind ``"ok"``
(the worker's tuple), ``"lost"`` (the worker died: resubmit the point) or
``"fatal"`` (store the point as failed with this message), and ``close()``.
``slots`` is the number of tasks to keep in flight: twice the workers.
"""
from __future__ import annotations

import concurrent.futures as cf
import contextlib
import multiprocessing as mp
import os
import re
import signal
import sys
import threading
from concurrent.futures.process import BrokenProcessPool

from ._worker import THREAD_VARS, init_worker, run_point
from .spec import SpecError

__all__ = ["SerialExecutor", "LocalExecutor", "DaskExecutor", "make_executor", "check_main_guard",
           "MainGuardError"]


class MainGuardError(RuntimeError):
    """A process pool started from a script without an ``if __name__ == "__main__":`` guard."""


_GUARD = re.compile(r"""__name__\s*==\s*['"]__main__['"]""")


def _guard_message(script):
    return (f"a sweep with a process pool (jobs >= 1) needs the script that starts it "
            f"({script}) to call it under an `if __name__ == \"__main__\":` guard: each worker "
            f"process imports the script again, and without the guard would start the sweep again. "
            f"Put the call under `if __name__ == \"__main__\":` (or pass jobs=0 to run in this "
            f"process); docs/sweeps.md shows the pattern")


def _rerun_main_script():
    """The path of the ``__main__`` script that a spawned worker runs again before it works
    (multiprocessing's own rule: a script by path or a module by name, but not a package's
    ``__main__.py`` nor IPython's launcher), or None."""
    main = sys.modules.get("__main__")
    name = getattr(getattr(main, "__spec__", None), "name", None)
    path = getattr(main, "__file__", None)
    if name is not None and (name == "__main__" or name.endswith(".__main__")):
        return None
    if path is None or os.path.splitext(os.path.basename(path))[0] == "ipython":
        return None
    return path


def check_main_guard(pool=True):
    """Raise :class:`MainGuardError` where a spawned process pool would re-run the sweep.

    In a worker that is still importing the main script (the sweep call was not under the
    guard), and, with ``pool`` (the driver is about to start a local pool), when the call
    comes from a ``__main__`` script that has no ``if __name__ == "__main__":`` at all:
    every worker would run the script's sweep again (and find the store locked by this
    driver)."""
    if getattr(mp.current_process(), "_inheriting", False):
        raise MainGuardError(_guard_message(getattr(sys.modules.get("__main__"), "__file__", None)
                                            or "the main module"))
    if not pool:
        return
    path = _rerun_main_script()
    if path is None:
        return
    main_globals = sys.modules["__main__"].__dict__
    f = sys._getframe(1)
    while f is not None and f.f_globals is not main_globals:
        f = f.f_back
    if f is None:          # not called from the script (a library, a test runner)
        return
    try:
        with open(path, encoding="utf-8") as fh:
            guarded = _GUARD.search(fh.read()) is not None
    except (OSError, UnicodeDecodeError):
        return
    if not guarded:
        raise MainGuardError(_guard_message(path))


@contextlib.contextmanager
def _one_thread_env():
    """Spawned children inherit one-thread BLAS / OpenMP / numba settings from the environment,
    and an ignored SIGINT (Python keeps SIGINT ignored when its parent ignored it): Ctrl-C
    reaches the whole process group, and the driver alone handles it (it stops the workers)."""
    saved = {v: os.environ.get(v) for v in THREAD_VARS}
    main = threading.current_thread() is threading.main_thread()
    old_int = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        for v in THREAD_VARS:
            os.environ[v] = "1"
        yield
    finally:
        for v, old in saved.items():
            if old is None:
                os.environ.pop(v, None)
            else:
                os.environ[v] = old
        if main:
            signal.signal(signal.SIGINT, old_int)


class _Done:
    """A finished handle for the in-process executor."""

    def __init__(self, value):
        self.value = value


class SerialExecutor:
    """Runs each point in the driver process (``jobs=0``): for debugging and for timing the engine."""

    slots = 1

    def __init__(self, warmup=None):
        if warmup:
            from .spec import resolve_function
            resolve_function(warmup)()

    def submit(self, task):
        return _Done(run_point(task))

    def wait(self, handles):
        return list(handles)

    def outcome(self, handle):
        return "ok", handle.value

    def close(self):
        pass

    def abort(self):
        pass

    def describe(self):
        return "in-process"


class LocalExecutor:
    """A ``ProcessPoolExecutor`` with the spawn start method, rebuilt when a worker dies.

    The stdlib pool breaks as a whole when one child is killed (every pending
    future raises ``BrokenProcessPool``); this executor reports those points as
    lost, so the engine resubmits them, and builds a fresh pool once per break.

    Parameters
    ----------
    jobs : int
        Number of worker processes (>= 1).
    warmup : str or None
        ``"module:callable"`` run once in each worker (e.g. loading compiled kernels), and
        first, with more than one worker, in one process alone: what it compiles is then
        in the cache before the workers start, and they only load it.
    """

    def __init__(self, jobs, warmup=None):
        if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
            raise ValueError(f"jobs must be an int >= 1, got {jobs!r}")
        check_main_guard()
        self.jobs = jobs
        self.warmup = warmup
        self.slots = 2 * jobs
        self.generation = 0
        self.rebuilds = 0
        if warmup and jobs > 1:
            self._make(1)
            try:
                self.pool.submit(int).result()
            except BrokenProcessPool:       # a failing warm-up: the workers report it
                pass
            self.pool.shutdown()
        self._make()

    def _make(self, workers=None):
        with _one_thread_env():
            self.pool = cf.ProcessPoolExecutor(max_workers=workers or self.jobs,
                                               mp_context=mp.get_context("spawn"),
                                               initializer=init_worker, initargs=(self.warmup,))

    def submit(self, task):
        with _one_thread_env():
            try:
                fut = self.pool.submit(run_point, task)
            except BrokenProcessPool:
                self._rebuild()
                fut = self.pool.submit(run_point, task)
        fut.generation = self.generation
        return fut

    def _rebuild(self):
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.generation += 1
        self.rebuilds += 1
        self._make()

    def wait(self, handles):
        done, _ = cf.wait(handles, return_when=cf.FIRST_COMPLETED)
        return done

    def outcome(self, fut):
        try:
            return "ok", fut.result()
        except BrokenProcessPool as exc:
            if fut.generation == self.generation:
                self._rebuild()
            return "lost", f"worker process died ({exc})"
        except cf.CancelledError:
            return "lost", "cancelled"
        except Exception as exc:  # e.g. the task could not be pickled
            return "fatal", f"{type(exc).__name__}: {exc}"

    def close(self):
        self.pool.shutdown(wait=True, cancel_futures=True)

    def abort(self):
        """Stop at once (an interrupted sweep): cancel the queued points and terminate the
        workers, whose running points are lost (not stored: the next run computes them)."""
        procs = list((getattr(self.pool, "_processes", None) or {}).values())
        self.pool.shutdown(wait=False, cancel_futures=True)
        for p in procs:
            p.terminate()
        for p in procs:
            p.join(timeout=10)

    def describe(self):
        return f"local pool, {self.jobs} worker(s)"


class DaskExecutor:
    """Points on a Dask cluster through ``distributed.Client(address)``.

    A task whose worker dies is re-run by Dask elsewhere; after
    ``distributed.scheduler.allowed-failures`` it ends in ``KilledWorker``,
    which this executor reports as a failed point. Each worker gets a plugin
    that limits BLAS / numba threads to one and runs the warm-up once.

    Parameters
    ----------
    scheduler : str or distributed.Client
        ``"tcp://HOST:PORT"``, or a client already connected.
    warmup : str or None
    """

    def __init__(self, scheduler, warmup=None):
        try:
            import distributed
        except ImportError:
            raise SpecError("a scheduler needs Dask: pip install 'linearnets[dist]'") from None
        from ._dask_plugin import SweepWorkerPlugin
        self._distributed = distributed
        if isinstance(scheduler, distributed.Client):
            self.client, self._own = scheduler, False
        else:
            try:
                self.client = distributed.Client(scheduler, timeout="20s", set_as_default=False)
            except (OSError, TimeoutError) as exc:
                raise SpecError(f"cannot reach the Dask scheduler {scheduler!r}: {exc}") from None
            self._own = True
        self.client.register_plugin(SweepWorkerPlugin(warmup), name="linearnets-sweep")
        info = self.client.scheduler_info()
        nthreads = sum(w.get("nthreads", 1) for w in info.get("workers", {}).values())
        self.slots = max(2, 2 * nthreads)
        self.address = getattr(self.client, "scheduler", None) and self.client.scheduler.address
        self._ac = None
        self._added = set()

    def submit(self, task):
        return self.client.submit(run_point, task, pure=False, key=f"sweep-point-{task[0]}-{os.urandom(4).hex()}")

    def wait(self, handles):
        if self._ac is None:
            self._ac = self._distributed.as_completed(loop=self.client.loop)
        for h in handles:
            if h.key not in self._added:
                self._added.add(h.key)
                self._ac.add(h)
        done = [next(self._ac)]
        done += self._ac.next_batch(block=False)
        for h in done:
            self._added.discard(h.key)
        return done

    def outcome(self, fut):
        from distributed.scheduler import KilledWorker
        try:
            return "ok", fut.result()
        except KilledWorker as exc:
            return "fatal", f"KilledWorker: {exc}"
        except (cf.CancelledError, OSError) as exc:
            return "lost", f"{type(exc).__name__}: {exc}"
        except Exception as exc:
            return "fatal", f"{type(exc).__name__}: {exc}"
        finally:
            fut.release()

    def close(self):
        if self._own:
            self.client.close()

    def abort(self):
        self.close()

    def describe(self):
        return f"Dask scheduler {self.address}"


def make_executor(jobs=None, scheduler=None, warmup=None):
    """The executor for ``jobs`` / ``scheduler`` (mutually exclusive).

    ``jobs=None`` and no scheduler: a local pool with one worker per CPU;
    ``jobs=0``: in the driver process; ``scheduler``: Dask.
    """
    if jobs is not None and scheduler is not None:
        raise ValueError("jobs and scheduler are mutually exclusive")
    if scheduler is not None:
        return DaskExecutor(scheduler, warmup=warmup)
    if jobs is None:
        jobs = os.cpu_count() or 1
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 0:
        raise ValueError(f"jobs must be an int >= 0, got {jobs!r}")
    if jobs == 0:
        return SerialExecutor(warmup=warmup)
    return LocalExecutor(jobs, warmup=warmup)
