"""SIGKILL of the driver mid-sweep, then a resume: nothing lost, nothing recomputed, nothing stored twice."""
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

pytest.importorskip("pandas")


def _done_x(store):
    """x of the points the store holds as done (read-only, while the driver may be writing)."""
    if not os.path.exists(store):
        return set()
    try:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=5) as c:
            rows = c.execute("SELECT params FROM points WHERE status = 'done'").fetchall()
    except sqlite3.OperationalError:  # the schema is not there yet
        return set()
    import json
    return {json.loads(p)["x"] for (p,) in rows}


def _logged_x(log):
    if not os.path.exists(log):
        return []
    with open(log) as fh:
        return [float(dict(kv.split("=", 1) for kv in ln.split())["x"]) for ln in fh if ln.strip()]


def test_driver_sigkill_then_resume(tmp_path):
    n = 40
    log1 = tmp_path / "calls.log"
    spec = tmp_path / "spec.toml"

    def write_spec(log):
        spec.write_text(textwrap.dedent(f"""
            [sweep]
            name = "killme"
            function = "sweep_fixtures:logged"
            store = "kill.sqlite"
            [grid]
            x = {{range = [0, {n}]}}
            [fixed]
            sleep = 0.05
            """) + f'log = "{log}"\n')

    # the log path is a fixed parameter, so both runs must use the same one for the keys to agree:
    # one log file, and the resume's calls are those appended after the kill
    write_spec(log1)
    store = str(tmp_path / "kill.sqlite")
    proc = subprocess.Popen([sys.executable, "-m", "linearnets", "sweep", "run", str(spec), "--jobs", "1",
                             "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while len(_done_x(store)) < 8:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the sweep did not start"
            time.sleep(0.05)
    finally:
        # SIGKILL the driver and its workers (the process group this test started)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    time.sleep(0.2)
    stored = _done_x(store)
    calls_before = len(_logged_x(log1))
    assert 8 <= len(stored) < n
    assert os.path.exists(store + ".lock")  # left behind by the killed driver: stale, by its pid
    r = subprocess.run([sys.executable, "-m", "linearnets", "sweep", "run", str(spec), "--jobs", "1",
                        "--no-progress"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert f"{n}/{n} done" in r.stdout
    resumed = _logged_x(log1)[calls_before:]
    # nothing recomputed: no point stored before the kill ran again
    assert not (set(resumed) & stored), sorted(set(resumed) & stored)
    # nothing lost: every point done, each stored once
    assert _done_x(store) == set(range(n))
    with sqlite3.connect(store) as c:
        assert c.execute("SELECT COUNT(*), COUNT(DISTINCT key) FROM points").fetchone() == (n, n)
        assert c.execute("SELECT MAX(attempts) FROM points").fetchone()[0] == 1
    # every point was computed at least once over both runs, and the resume computed only the missing ones
    assert set(_logged_x(log1)) == set(range(n))
    assert len(resumed) == n - len(stored)
    assert not os.path.exists(store + ".lock")
