"""The sweep driver: one dispatch loop over any executor, writing each completed point to the store."""
from __future__ import annotations

import collections
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

from .executors import check_main_guard, make_executor
from .spec import SpecError, build_spec, function_name, resolve_function
from .store import Store, acquire_lock, release_lock

__all__ = ["sweep", "run_sweep", "results_frame", "sweep_status", "provenance", "SweepInterrupted"]


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) stopped a sweep: every point completed before it is in the store, and
    running the same sweep again computes the rest.

    A ``KeyboardInterrupt``, so that a script still stops; ``python -m linearnets sweep run``
    prints its one line and exits with status 130.

    Attributes
    ----------
    stored, total : int
        Points of this sweep in the store (done or failed), and in its grid.
    store : str
        The store's path.
    """

    def __init__(self, stored, total, store):
        self.stored, self.total, self.store = stored, total, store
        super().__init__(f"interrupted: {stored} of {total} points stored in {store}; "
                         f"run the same command to resume")

    def __str__(self):
        return self.args[0]


@contextlib.contextmanager
def _sigint_ignored():
    """SIGINT ignored while an interrupted sweep stops its workers (a second Ctrl-C would
    leave them running); only in the main thread, where signals are handled."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)

_GIT = {}


def _git(*args, where=None):
    """Output of ``git -C <where, default the package folder> ARGS`` (stripped), or None outside a
    checkout."""
    here = where or os.path.dirname(os.path.abspath(__file__))
    try:
        out = subprocess.run(["git", "-C", here, *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def _git_sha():
    """The git commit of the package's source tree, or None outside a checkout."""
    if "sha" not in _GIT:
        _GIT["sha"] = _git("rev-parse", "HEAD")
    return _GIT["sha"]


def _git_dirty(folder=None, patterns=()):
    """Whether tracked files under ``folder`` (default: the package's sources), optionally only
    those matching ``patterns``, differ from the commit (None outside a checkout).  Figures and
    tables a run rewrites do not count: only the code that computes."""
    folder = os.path.abspath(folder or os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    key = ("dirty", folder, tuple(patterns))
    if key not in _GIT:
        st = _git("status", "--porcelain", "--untracked-files=no", "--", *(patterns or ["."]), where=folder)
        _GIT[key] = None if st is None else bool(st)
    return _GIT[key]


def provenance():
    """Driver-side provenance: package version, git SHA (and whether the tree differs from it), host,
    pid, Python."""
    from .._version import __version__
    return dict(package_version=__version__, git_sha=_git_sha(), git_dirty=_git_dirty(),
                driver_host=socket.gethostname(), driver_pid=os.getpid(), python=sys.version.split()[0])


def _progress_bar(total, initial, progress):
    from tqdm.auto import tqdm
    # disable=None: tqdm stays silent when stderr is not a TTY
    return tqdm(total=total, initial=initial, disable=None if progress else True, unit="pt",
                desc="sweep", dynamic_ncols=True)


def _check_store_meta(store, spec):
    fn = store.get_meta("function")
    if fn is not None and fn != spec.function:
        raise SpecError(f"store {spec.store!r} holds a sweep of {fn!r}, not {spec.function!r}")
    if fn is None:
        store.set_meta("function", spec.function)
        store.set_meta("name", spec.name)
        store.set_meta("created", time.time())
    store.set_meta("axes", [[a.name, a.type.__name__] for a in spec.axes])


def run_sweep(spec, jobs=None, scheduler=None, progress=True, retry_failed=False, max_attempts=3,
              executor=None):
    """Run the points of ``spec`` not yet in its store; each completed point is committed at once.

    Parameters
    ----------
    spec : SweepSpec
    jobs : int or None
        Local worker processes (None: one per CPU; 0: in this process).
    scheduler : str, distributed.Client or None
        A Dask scheduler address (exclusive with ``jobs``).
    progress : bool
        One tqdm bar over stored points (silent anyway when stderr is not a TTY).
    retry_failed : bool
        Run again the points stored as failed (completed points never are).
    max_attempts : int
        A point whose worker died this many times is stored as failed.
    executor : object, optional
        An executor built by the caller (then ``jobs`` / ``scheduler`` are ignored and it is not closed).

    Returns
    -------
    dict
        ``total, done, failed, ran, stored, resubmitted, elapsed`` for this run.
    """
    if jobs is not None and scheduler is not None:
        raise ValueError("jobs and scheduler are mutually exclusive")
    check_main_guard(pool=False)   # a worker importing an unguarded script: say so, not "locked"
    points = spec.points()
    lock = acquire_lock(spec.store)
    t0 = time.perf_counter()
    try:
        store = Store(spec.store)
        try:
            _check_store_meta(store, spec)
            status = store.statuses()
            skip = {"done", "failed"} if not retry_failed else {"done"}
            todo = collections.deque((k, p) for k, p in points if status.get(k) not in skip)
            already = len(points) - len(todo)
            stats = dict(total=len(points), ran=0, stored=0, resubmitted=0)
            if todo:
                try:
                    _dispatch(spec, todo, already, len(points), store, stats, jobs, scheduler,
                              progress, max_attempts, executor)
                except KeyboardInterrupt:
                    final = store.statuses()
                    n = sum(final.get(k) in ("done", "failed") for k, _ in points)
                    raise SweepInterrupted(n, len(points), spec.store) from None
            final = store.statuses()
            keys = [k for k, _ in points]
            stats["done"] = sum(final.get(k) == "done" for k in keys)
            stats["failed"] = sum(final.get(k) == "failed" for k in keys)
            stats["elapsed"] = time.perf_counter() - t0
            return stats
        finally:
            store.close()
    finally:
        release_lock(lock)


def _dispatch(spec, todo, already, total, store, stats, jobs, scheduler, progress, max_attempts,
              executor):
    """The dispatch loop of :func:`run_sweep`: keep the executor's slots full, store each
    outcome as it arrives.  On Ctrl-C the queued points are cancelled and the workers
    stopped at once (their running points are not stored), then the ``KeyboardInterrupt``
    goes on."""
    prov0 = provenance()
    own = executor is None
    ex = None
    interrupted = False
    bar = None
    try:
        ex = executor if executor is not None else make_executor(jobs, scheduler, warmup=spec.warmup)
        prov0["executor"] = ex.describe()
        fn_ref = spec.raw.get("_callable") or spec.function
        bar = _progress_bar(total, already, progress)
        inflight = {}
        attempts = collections.Counter()
        params_of = dict(todo)
        while todo or inflight:
            while todo and len(inflight) < ex.slots:
                key, params = todo.popleft()
                inflight[ex.submit((key, fn_ref, params, spec.entropy))] = key
            for h in ex.wait(list(inflight)):
                key = inflight.pop(h)
                kind, value = ex.outcome(h)
                if kind == "lost":
                    attempts[key] += 1
                    if attempts[key] < max_attempts:
                        todo.appendleft((key, params_of[key]))
                        stats["resubmitted"] += 1
                        continue
                    value = (key, "failed", None, f"worker died {attempts[key]} times: {value}", {})
                elif kind == "fatal":
                    value = (key, "failed", None, value, {})
                _, st, result, error, prov = value
                prov = dict(prov0, **prov, attempts=attempts[key] + 1)
                wrote = store.put(key, spec.function, spec.version,
                                  json.dumps(params_of[key]), st, result=result, error=error,
                                  provenance=prov, started=prov.get("started"),
                                  finished=prov.get("finished"))
                stats["ran"] += 1
                stats["stored"] += int(wrote)
                bar.update(1)
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        with _sigint_ignored() if interrupted else contextlib.nullcontext():
            if bar is not None:
                bar.close()
            if own and ex is not None:
                (ex.abort if interrupted else ex.close)()


def _frame_rows(spec, rows):
    import numpy as np
    names = [a.name for a in spec.axes]
    records, index = [], []
    fields = []
    for key, params in spec.points():
        r = rows.get(key)
        rec = {}
        if r is not None:
            rec["status"] = r["status"]
            if r["result"]:
                for f, v in r["result"].items():
                    if f not in fields:
                        fields.append(f)
                    rec[f] = np.asarray(v, dtype=float) if isinstance(v, list) else v
            rec["error"] = (r["error"] or "").split("\n")[0] if r["error"] else ""
            rec["attempts"] = r["attempts"]
            rec["elapsed"] = r["provenance"].get("elapsed", float("nan"))
        else:
            rec["status"] = "pending"
            rec["error"] = ""
        records.append(rec)
        index.append(tuple(params[n] for n in names))
    return names, index, records, fields


def results_frame(spec, store=None):
    """The sweep's points as a pandas DataFrame indexed by its axes (pending points included).

    Columns: the function's result fields (NaN where a point failed or has not
    run; array-valued fields as object columns of arrays), then ``status``
    (``done`` / ``failed`` / ``pending``), ``error`` (first line), ``attempts``
    and ``elapsed`` (seconds in the worker). The index is a MultiIndex with
    one level per axis in grid order, so ``df.to_xarray()`` gives the grid.
    ``df.attrs`` holds the sweep's name, function, version and fixed parameters.
    """
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("sweep results need pandas: pip install 'linearnets[data]'") from None
    if store is None:
        path = spec.store
        if not os.path.exists(path):
            rows = {}
        else:
            with Store(path, readonly=True) as st:
                rows = st.rows()
    else:
        rows = store.rows()
    names, index, records, fields = _frame_rows(spec, rows)
    cols = fields + ["status", "error", "attempts", "elapsed"]
    df = pd.DataFrame.from_records(records, columns=cols)
    df.index = pd.MultiIndex.from_tuples(index, names=names) if len(names) > 1 else \
        pd.Index([i[0] for i in index], name=names[0])
    df["attempts"] = df["attempts"].fillna(0).astype(int)
    df.attrs.update(name=spec.name, function=spec.function, version=spec.version,
                    fixed=dict(spec.fixed), store=spec.store)
    return df


def sweep_status(spec):
    """``dict(total, done, failed, pending, failed_points=[(params, error), ...])`` from the store."""
    rows = {}
    if os.path.exists(spec.store):
        with Store(spec.store, readonly=True) as st:
            rows = st.rows()
    pts = spec.points()
    failed = [(p, rows[k]["error"] or "") for k, p in pts if k in rows and rows[k]["status"] == "failed"]
    done = sum(1 for k, _ in pts if k in rows and rows[k]["status"] == "done")
    extra = len(set(rows) - {k for k, _ in pts})
    return dict(total=len(pts), done=done, failed=len(failed), pending=len(pts) - done - len(failed),
                failed_points=failed, other_points_in_store=extra)


def sweep(fn, grid, fixed=None, store="sweep.sqlite", jobs=None, scheduler=None, version="1", *,
          name=None, entropy=None, warmup=None, retry_failed=False, progress=True):
    """Run ``fn`` over a grid of parameters, storing each point as it completes; resumable.

    Every point is one call ``fn(**params)`` with ``params`` = one grid value
    per axis plus ``fixed``; it returns a dict of numbers (or small arrays).
    Completed points live in an SQLite store keyed by a hash of the canonical
    parameters, the function name and ``version``, so calling ``sweep`` again
    with the same arguments runs only what is missing, and a killed run loses
    no completed point. A point that raises is stored as failed with its error
    and the others go on. Randomness: see :mod:`linearnets.sweep.seeding`
    (``SeedSequence(entropy, spawn_key=(seed, stream))`` per point, passed as
    ``rng=`` when ``fn`` declares it).

    Parameters
    ----------
    fn : callable or str
        A module-level function, or ``"module:callable"``.
    grid : dict
        Axis name -> values: a list, a ``range``, or ``{"logspace": [a, b, n]}``,
        ``{"linspace": [a, b, n]}``, ``{"range": [a, b]}``, ``{"values": [...],
        "type": ...}`` (see :func:`linearnets.sweep.spec.make_axis`).
    fixed : dict, optional
        Constants passed to every call (part of each point's key).
    store : str
        SQLite file; its folder must exist.
    jobs : int, optional
        Local worker processes (default: one per CPU; 0: in this process).
    scheduler : str or distributed.Client, optional
        A Dask scheduler address ``"tcp://HOST:PORT"``; exclusive with ``jobs``.
    version : str
        Part of every key: bump it to recompute after changing ``fn``.
    name, entropy, warmup, retry_failed, progress
        Sweep name (default: the function's); root seed entropy (int);
        ``"module:callable"`` run once per worker; rerun failed points;
        show a progress bar (only on a TTY).

    Returns
    -------
    pandas.DataFrame
        One row per grid point, indexed by the axes (MultiIndex); result
        fields, ``status``, ``error``, ``attempts``, ``elapsed``.
        ``df.to_xarray()`` gives the grid as labelled arrays (needs xarray).
        ``df.attrs["run"]`` holds this run's counts.

    Raises
    ------
    ValueError
        (:class:`~linearnets.sweep.spec.SpecError`) for a bad grid, an unknown
        function, a missing store folder, or both ``jobs`` and ``scheduler``.
    MainGuardError
        A process pool started from a script that does not call ``sweep`` under
        ``if __name__ == "__main__":`` (each worker imports the script again).
    SweepInterrupted
        Ctrl-C (a ``KeyboardInterrupt``): the completed points are stored, the message
        counts them; calling ``sweep`` again computes the rest.
    """
    if jobs is not None and scheduler is not None:
        raise ValueError("jobs and scheduler are mutually exclusive")
    try:
        import pandas  # noqa: F401  (fail before running anything)
    except ImportError:
        raise ImportError("linearnets.sweep needs pandas: pip install 'linearnets[data]'") from None
    if not (callable(fn) or isinstance(fn, str)):
        raise SpecError(f"fn must be a module-level callable or a 'module:callable' string, "
                        f"got {fn!r}")
    try:   # the function first, and an error that names the argument
        function_name(fn)
        resolve_function(fn)
    except SpecError as exc:
        raise SpecError(f"fn: {exc}") from None
    spec = build_spec(fn, grid, fixed, store=store, version=version, name=name, entropy=entropy,
                      warmup=warmup)
    if callable(fn):
        spec.raw["_callable"] = fn
    stats = run_sweep(spec, jobs=jobs, scheduler=scheduler, progress=progress, retry_failed=retry_failed)
    df = results_frame(spec)
    df.attrs["run"] = stats
    return df
