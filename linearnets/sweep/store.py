"""The sweep store: one SQLite file on the driver's disk, written only by the driver.

- WAL journal, ``synchronous=FULL``, one transaction per completed point: a
  point is on disk when :meth:`Store.put` returns, so a SIGKILL of the driver
  loses no completed point.
- Key: :func:`linearnets.sweep.spec.point_key` (canonical parameters, function
  name, version). :meth:`Store.put` is an upsert that never overwrites a
  completed point, so a point executed twice (at-least-once execution after a
  worker loss) is stored once.
- Provenance (package version, git SHA, driver and worker host / pid, start and
  finish times) sits beside each point, not in its key.
- A lock file ``STORE.lock`` (``pid host``) keeps a second driver out; a lock
  left by a dead process on this host is detected by its pid and replaced.
"""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import socket
import sqlite3
import time

__all__ = ["Store", "StoreLocked", "acquire_lock", "release_lock"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS points (
    key TEXT PRIMARY KEY,
    fn TEXT NOT NULL,
    version TEXT NOT NULL,
    params TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('done', 'failed')),
    result TEXT,
    error TEXT,
    attempts INTEGER NOT NULL DEFAULT 1,
    provenance TEXT NOT NULL,
    started REAL,
    finished REAL,
    stored REAL NOT NULL
);
"""


class StoreLocked(RuntimeError):
    """Another live driver holds the store's lock."""


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _locked_message(store_path, lock, pid, host):
    """Why the store is locked, and what to do: never "remove the lock" while its driver runs."""
    if host != socket.gethostname():
        return (f"store {store_path!r} is in use by pid {pid} on host {host} (lock {lock!r}), "
                f"which this host cannot check: if no sweep runs there any more, remove the lock")
    parent = mp.parent_process()
    if parent is not None and parent.pid == pid:
        return (f"store {store_path!r} is locked by this process's parent, pid {pid}, a sweep "
                f"driver: a worker process imported the script that started the sweep and ran "
                f"it again. Call the sweep under `if __name__ == \"__main__\":` "
                f"(docs/sweeps.md)")
    return (f"store {store_path!r} is in use by a sweep that is running: pid {pid} on this host "
            f"is alive and holds the lock {lock!r}. Wait for it to finish, or stop it (Ctrl-C, "
            f"or kill {pid}; what it stored stays), then run again; do not remove the lock "
            f"while pid {pid} runs")


def acquire_lock(store_path):
    """Create ``store_path + '.lock'`` for this process, replacing a stale one.

    A lock is stale when it names this host and a pid that no longer exists.

    Returns
    -------
    str
        The lock file's path.

    Raises
    ------
    StoreLocked
        When a live process (or one on another host) holds the lock.
    """
    lock = store_path + ".lock"
    me = f"{os.getpid()} {socket.gethostname()}\n"
    for _ in range(5):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                with open(lock, encoding="utf-8") as fh:
                    text = fh.read().split()
            except FileNotFoundError:
                continue
            if len(text) < 2:  # being written right now, or garbage
                time.sleep(0.05)
                try:
                    with open(lock, encoding="utf-8") as fh:
                        text = fh.read().split()
                except FileNotFoundError:
                    continue
            try:
                pid, host = int(text[0]), text[1]
            except (IndexError, ValueError):
                raise StoreLocked(f"store {store_path!r} has an unreadable lock file {lock!r}; "
                                  "remove it if no sweep is running") from None
            if host == socket.gethostname() and not _pid_alive(pid):
                try:
                    os.unlink(lock)  # stale: its driver is gone
                except FileNotFoundError:
                    pass
                continue
            raise StoreLocked(_locked_message(store_path, lock, pid, host)) from None
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(me)
            fh.flush()
            os.fsync(fh.fileno())
        return lock
    raise StoreLocked(f"could not acquire the lock {lock!r}")


def release_lock(lock):
    """Remove a lock file this process created (a no-op if it is gone or not ours)."""
    try:
        with open(lock, encoding="utf-8") as fh:
            text = fh.read().split()
        if text and int(text[0]) == os.getpid():
            os.unlink(lock)
    except (FileNotFoundError, ValueError):
        pass


class Store:
    """A sweep's SQLite store.

    Parameters
    ----------
    path : str
        The database file (created if missing, unless ``readonly``).
    readonly : bool
        Open for reading only (``status`` / ``export`` while a driver runs).
    """

    def __init__(self, path, readonly=False):
        self.path = os.path.abspath(os.fspath(path))
        if readonly:
            if not os.path.exists(self.path):
                raise FileNotFoundError(f"store {self.path!r} does not exist (nothing has been run)")
            self.conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=30.0)
        else:
            self.conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=FULL")
            self.conn.executescript(_SCHEMA)
        self.readonly = readonly

    def close(self):
        self.conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- metadata ---------------------------------------------------------------
    def get_meta(self, key, default=None):
        try:
            row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        except sqlite3.OperationalError:
            return default
        return json.loads(row[0]) if row else default

    def set_meta(self, key, value):
        self.conn.execute("INSERT INTO meta (key, value) VALUES (?, ?) "
                          "ON CONFLICT(key) DO UPDATE SET value = excluded.value", (key, json.dumps(value)))

    # -- points -------------------------------------------------------------------
    def put(self, key, fn, version, params_json, status, result=None, error=None, provenance=None,
            started=None, finished=None):
        """Store one point in its own transaction; never overwrites a completed point.

        A failed point is replaced by a later completion (or a later failure,
        counting the attempts); a ``done`` row is left untouched.

        Returns
        -------
        bool
            True if the row was written, False if a completed point was already there.
        """
        if status not in ("done", "failed"):
            raise ValueError(f"status must be 'done' or 'failed', got {status!r}")
        res = None if result is None else json.dumps(result)
        cur = self.conn.execute(
            "INSERT INTO points (key, fn, version, params, status, result, error, attempts, provenance, "
            "started, finished, stored) VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?) "
            "ON CONFLICT(key) DO UPDATE SET status = excluded.status, result = excluded.result, "
            "error = excluded.error, attempts = points.attempts + 1, provenance = excluded.provenance, "
            "started = excluded.started, finished = excluded.finished, stored = excluded.stored "
            "WHERE points.status != 'done'",
            (key, fn, version, params_json, status, res, error, json.dumps(provenance or {}),
             started, finished, time.time()))
        return cur.rowcount > 0

    def statuses(self):
        """``{key: status}`` of every stored point."""
        return dict(self.conn.execute("SELECT key, status FROM points"))

    def rows(self, keys=None):
        """Stored rows as dicts (``key, params, status, result, error, attempts, provenance, ...``)."""
        cols = ("key", "fn", "version", "params", "status", "result", "error", "attempts", "provenance",
                "started", "finished", "stored")
        cur = self.conn.execute(f"SELECT {', '.join(cols)} FROM points")
        out = {}
        for r in cur:
            d = dict(zip(cols, r))
            if keys is not None and d["key"] not in keys:
                continue
            d["params"] = json.loads(d["params"])
            d["result"] = json.loads(d["result"]) if d["result"] is not None else None
            d["provenance"] = json.loads(d["provenance"])
            out[d["key"]] = d
        return out

    def count(self):
        return self.conn.execute("SELECT COUNT(*) FROM points").fetchone()[0]
