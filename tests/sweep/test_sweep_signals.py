"""Ctrl-C during a sweep, and a process pool started from a script without the ``__main__``
guard: one clear line each, never a traceback, and nothing lost."""
import os
import re
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

pytest.importorskip("pandas")

from linearnets.sweep.store import StoreLocked, acquire_lock  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURES = os.path.dirname(os.path.abspath(__file__))


def _env():
    """This tree's package and the sweep fixtures first on the subprocess's path."""
    rest = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    return dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, FIXTURES] + rest))


def _stored(store):
    """Points in the store (done or failed), read-only while the driver may be writing."""
    if not os.path.exists(store):
        return 0
    try:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=5) as c:
            return c.execute("SELECT COUNT(*) FROM points").fetchone()[0]
    except sqlite3.OperationalError:   # the schema is not there yet
        return 0


def test_sigint_during_sweep_run_prints_one_line_exits_130_and_resumes(tmp_path):
    n = 24
    spec = tmp_path / "spec.toml"
    spec.write_text(textwrap.dedent(f"""
        [sweep]
        name = "ctrlc"
        function = "sweep_fixtures:logged"
        store = "ctrlc.sqlite"
        [grid]
        x = {{range = [0, {n}]}}
        [fixed]
        sleep = 0.05
        """))
    store = str(tmp_path / "ctrlc.sqlite")
    cmd = [sys.executable, "-m", "linearnets", "sweep", "run", str(spec), "--jobs", "2",
           "--no-progress"]
    # a session of its own: SIGINT goes to the whole process group, driver and workers, as
    # Ctrl-C in a terminal does
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env(), start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while _stored(store) < 3:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the sweep did not start"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, (out, err)
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    m = re.fullmatch(rf"interrupted: (\d+) of {n} points stored in (.*); run the same command "
                     r"to resume", lines[0])
    assert m, lines[0]
    assert os.path.samefile(m.group(2), store)
    stored = _stored(store)
    assert int(m.group(1)) == stored and 3 <= stored < n
    assert not os.path.exists(store + ".lock")       # released on the way out
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=_env())
    assert r.returncode == 0, r.stderr
    assert f"{n}/{n} done, 0 failed" in r.stdout
    assert _stored(store) == n


UNGUARDED = """
import linearnets as ln
df = ln.sweep("sweep_fixtures:quadratic", {{"x": [1.0, 2.0, 3.0]}}, store={store!r}, jobs=1,
              progress=False)
print("rows", len(df))
"""
GUARDED = """
import linearnets as ln

if __name__ == "__main__":
    df = ln.sweep("sweep_fixtures:quadratic", {{"x": [1.0, 2.0, 3.0]}}, store={store!r}, jobs=1,
                  progress=False)
    print("rows", len(df), "done", int((df["status"] == "done").sum()))
"""


def test_pool_from_an_unguarded_script_names_the_main_guard(tmp_path):
    store = str(tmp_path / "g.sqlite")
    script = tmp_path / "unguarded.py"
    script.write_text(UNGUARDED.format(store=store))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                       env=_env(), cwd=tmp_path)
    assert r.returncode != 0
    assert 'if __name__ == "__main__":' in r.stderr
    assert "MainGuardError" in r.stderr and "StoreLocked" not in r.stderr
    assert "remove" not in r.stderr
    assert not os.path.exists(store + ".lock")
    # in this process (jobs=0) the script needs no guard
    script.write_text(UNGUARDED.format(store=store).replace("jobs=1", "jobs=0"))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                       env=_env(), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "rows 3" in r.stdout
    # the same call under the guard runs every point in the worker pool
    script.write_text(GUARDED.format(store=str(tmp_path / "g2.sqlite")))
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                       env=_env(), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "rows 3 done 3" in r.stdout


def test_store_locked_by_a_live_driver_never_advises_removing_the_lock(tmp_path):
    path = str(tmp_path / "s.sqlite")
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with open(path + ".lock", "w") as fh:
            fh.write(f"{live.pid} {os.uname().nodename}\n")
        with pytest.raises(StoreLocked) as info:
            acquire_lock(path)
    finally:
        live.kill()
        live.wait()
    msg = str(info.value)
    assert f"pid {live.pid} on this host is alive" in msg
    assert f"do not remove the lock while pid {live.pid} runs" in msg
    assert "remove it" not in msg
