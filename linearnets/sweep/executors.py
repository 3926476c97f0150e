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
from concurrent.futures.process import BrokenProcessPool

from ._worker import THREAD_VARS, init_worker, run_point
from .spec import SpecError

__all__ = ["SerialExecutor", "LocalExecutor", "DaskExecutor", "make_executor"]


@contextlib.contextmanager
def _one_thread_env():
    """Spawned children inherit one-thread BLAS / OpenMP / numba settings from the environment."""
    saved = {v: os.environ.get(v) for v in THREAD_VARS}
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
