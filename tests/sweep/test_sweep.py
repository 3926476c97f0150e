"""The sweep engine: specs, keys, seeding, the store, the serial and local-pool executors, the CLI."""
import os
import sqlite3
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import linearnets as ln
from linearnets.sweep import SpecError, point_rng, point_seed_sequence, stream, sweep_status
from linearnets.sweep.spec import build_spec, canonical, make_axis, point_key
from linearnets.sweep.store import Store, StoreLocked, acquire_lock, release_lock

pd = pytest.importorskip("pandas")

TOY = "sweep_fixtures"


def _log_lines(path):
    if not os.path.exists(path):
        return []
    with open(path) as fh:
        return [dict(kv.split("=", 1) for kv in line.split()) for line in fh if line.strip()]


# -- spec ---------------------------------------------------------------------------------------

def test_axis_forms_and_types():
    a = make_axis("alpha", {"logspace": [-2, 2, 5]})
    assert a.type is float and np.allclose(a.values, np.logspace(-2, 2, 5), rtol=1e-15)
    assert make_axis("x", {"linspace": [0, 1, 3]}).values == (0.0, 0.5, 1.0)
    r = make_axis("seed", {"range": [0, 4]})
    assert r.type is int and r.values == (0, 1, 2, 3)
    assert make_axis("seed", range(3)).values == (0, 1, 2)
    m = make_axis("h", [32, 64.0])
    assert m.type is float and all(isinstance(v, float) for v in m.values)
    assert make_axis("h", {"values": [1, 2], "type": "float"}).values == (1.0, 2.0)
    assert make_axis("act", ["relu", "tanh"]).type is str
    with pytest.raises(SpecError, match="unknown axis form"):
        make_axis("x", {"geomspace": [1, 2, 3]})
    with pytest.raises(SpecError, match="mixed value types"):
        make_axis("x", [1, "a"])
    with pytest.raises(SpecError, match="logspace"):
        make_axis("x", {"logspace": [0, 1]})
    with pytest.raises(SpecError, match="not an int"):
        make_axis("x", {"values": [1.5], "type": "int"})
    with pytest.raises(SpecError, match="identifier"):
        make_axis("not a name", [1])


def test_keys_canonical():
    # 12 significant digits: a typed 0.1 and a computed 10**-1 are one point; 1e-13 apart is the same point
    assert point_key("m:f", "1", {"a": 0.1}) == point_key("m:f", "1", {"a": 10.0 ** -1})
    assert point_key("m:f", "1", {"a": 1.0}) == point_key("m:f", "1", {"a": 1.0 + 1e-13})
    assert point_key("m:f", "1", {"a": 1.0}) != point_key("m:f", "1", {"a": 1.0 + 1e-10})
    # int axis 2 and float axis 2.0 canonicalise by type; the function name and version enter the key
    assert canonical({"h": 2}) != canonical({"h": 2.0})
    assert point_key("m:f", "1", {"a": 1.0}) != point_key("m:g", "1", {"a": 1.0})
    assert point_key("m:f", "1", {"a": 1.0}) != point_key("m:f", "2", {"a": 1.0})
    assert canonical({"b": 1, "a": 2}) == canonical({"a": 2, "b": 1})
    # a spec's float axis coerces ints, so [1, 2.5] keys 1 as 1.0
    spec = build_spec(f"{TOY}:quadratic", {"x": [1, 2.5]}, store="s.sqlite")
    assert [p["x"] for _, p in spec.points()] == [1.0, 2.5]
    assert spec.points()[0][0] == point_key(f"{TOY}:quadratic", "1", {"x": 1.0})


def test_build_spec_errors(tmp_path):
    with pytest.raises(SpecError, match="unknown function"):
        build_spec("sweep_fixtures:nope", {"x": [1]}, store=str(tmp_path / "s.sqlite"))
    with pytest.raises(SpecError, match="cannot import module"):
        build_spec("no_such_module_xyz:f", {"x": [1]}, store=str(tmp_path / "s.sqlite"))
    with pytest.raises(SpecError, match="store folder"):
        build_spec(f"{TOY}:quadratic", {"x": [1]}, store=str(tmp_path / "missing" / "s.sqlite"))
    with pytest.raises(SpecError, match="both a grid axis and fixed"):
        build_spec(f"{TOY}:quadratic", {"x": [1]}, {"x": 2}, store=str(tmp_path / "s.sqlite"))
    with pytest.raises(ValueError, match="mutually exclusive"):
        ln.sweep(f"{TOY}:quadratic", {"x": [1.0]}, store=str(tmp_path / "s.sqlite"), jobs=1,
                 scheduler="tcp://127.0.0.1:1")


# -- seeding ---------------------------------------------------------------------------------------

def test_seeding_depends_on_point_only():
    a = point_rng(7, 3, 1).standard_normal(4)
    b = np.random.default_rng(np.random.SeedSequence(7, spawn_key=(3, 1))).standard_normal(4)
    assert np.array_equal(a, b)
    assert not np.array_equal(point_rng(7, 3, 0).standard_normal(4), a)
    ss = np.random.SeedSequence(7, spawn_key=(3,))
    assert np.array_equal(stream(ss, 1).standard_normal(4), a)
    assert point_seed_sequence(7, 3, 1).spawn_key == (3, 1)
    with pytest.raises(ValueError, match="seed"):
        point_rng(7, -1)


def test_rng_injection_order_free(tmp_path):
    """The engine's rng is SeedSequence(entropy, (seed, 0)): the same whatever the grid around it."""
    df1 = ln.sweep(f"{TOY}:noisy", {"x": [0.0, 1.0], "seed": [0, 1, 2]}, store=str(tmp_path / "a.sqlite"),
                   jobs=0, entropy=11, progress=False)
    df2 = ln.sweep(f"{TOY}:noisy", {"seed": [2, 1], "x": [1.0]}, store=str(tmp_path / "b.sqlite"),
                   jobs=0, entropy=11, progress=False)
    z = point_rng(11, 1, 0).standard_normal(4)
    assert np.array_equal(df1.loc[(0.0, 1), "z"], z)
    assert np.array_equal(df2.loc[(1, 1.0), "z"], z)
    assert df1.loc[(1.0, 2), "y"] == df2.loc[(2, 1.0), "y"]


# -- store ---------------------------------------------------------------------------------------

def test_store_upsert_never_overwrites_done(tmp_path):
    path = str(tmp_path / "s.sqlite")
    with Store(path) as st:
        assert st.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert st.conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert st.put("k", "f", "1", "{}", "failed", error="boom")
        assert st.put("k", "f", "1", "{}", "done", result={"y": 1.0})
        assert not st.put("k", "f", "1", "{}", "done", result={"y": 2.0})
        assert not st.put("k", "f", "1", "{}", "failed", error="late")
        row = st.rows()["k"]
    assert row["status"] == "done" and row["result"] == {"y": 1.0} and row["attempts"] == 2
    with sqlite3.connect(path) as c:
        assert c.execute("SELECT COUNT(*) FROM points").fetchone()[0] == 1


def test_lock_live_and_stale(tmp_path):
    path = str(tmp_path / "s.sqlite")
    lock = acquire_lock(path)
    with pytest.raises(StoreLocked, match=f"pid {os.getpid()}"):
        acquire_lock(path)
    release_lock(lock)
    assert not os.path.exists(lock)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with open(path + ".lock", "w") as fh:
        fh.write(f"{dead.pid} {os.uname().nodename}\n")
    lock = acquire_lock(path)  # stale (dead pid): replaced
    with open(lock) as fh:
        assert int(fh.read().split()[0]) == os.getpid()
    release_lock(lock)


# -- engine, in process -------------------------------------------------------------------------

def test_serial_sweep_resume_and_failures(tmp_path):
    log = str(tmp_path / "calls.log")
    store = str(tmp_path / "s.sqlite")
    grid = {"x": {"linspace": [0, 1, 5]}, "seed": [0, 1]}
    df = ln.sweep(f"{TOY}:logged", grid, {"log": log}, store=store, jobs=0, progress=False)
    assert list(df.index.names) == ["x", "seed"] and len(df) == 10
    assert (df["status"] == "done").all()
    x = df.index.get_level_values("x").to_numpy()
    s = df.index.get_level_values("seed").to_numpy()
    assert np.array_equal(df["y"].to_numpy(), 2.0 * x + s)
    assert len(_log_lines(log)) == 10
    # resume: nothing recomputed; growing the grid runs only the new points
    df = ln.sweep(f"{TOY}:logged", grid, {"log": log}, store=store, jobs=0, progress=False)
    assert len(_log_lines(log)) == 10 and df.attrs["run"]["ran"] == 0
    grid2 = {"x": {"linspace": [0, 1, 5]}, "seed": [0, 1, 2]}
    df = ln.sweep(f"{TOY}:logged", grid2, {"log": log}, store=store, jobs=0, progress=False)
    assert len(_log_lines(log)) == 15 and df.attrs["run"]["ran"] == 5
    ds = df.to_xarray()
    assert ds["y"].shape == (5, 3) and float(ds["y"].sel(x=0.5, seed=2)) == 3.0
    # provenance beside each point
    with Store(store, readonly=True) as st:
        prov = next(iter(st.rows().values()))["provenance"]
    assert prov["package_version"] == ln.__version__ and prov["pid"] == os.getpid() and "host" in prov


def test_raising_point_is_stored_failed(tmp_path):
    store = str(tmp_path / "s.sqlite")
    df = ln.sweep(f"{TOY}:fail_when", {"x": [0.0, 0.5, 1.0]}, store=store, jobs=0, progress=False)
    assert list(df["status"]) == ["done", "failed", "done"]
    assert "ValueError: x = 0.5 is the bad point" in df.loc[0.5, "error"]
    assert np.isnan(df.loc[0.5, "y"]) and df.loc[1.0, "y"] == 1.0
    spec = build_spec(f"{TOY}:fail_when", {"x": [0.0, 0.5, 1.0]}, store=store)
    st = sweep_status(spec)
    assert (st["done"], st["failed"], st["pending"]) == (2, 1, 0)
    assert st["failed_points"][0][0]["x"] == 0.5


# -- local pool --------------------------------------------------------------------------------

def test_pool_worker_sigkill_resubmits(tmp_path):
    """A SIGKILLed worker breaks the stdlib pool; the engine rebuilds it and resubmits the lost points."""
    log, marker = str(tmp_path / "calls.log"), str(tmp_path / "killed")
    store = str(tmp_path / "s.sqlite")
    xs = [float(i) for i in range(12)]
    df = ln.sweep(f"{TOY}:die_once", {"x": xs}, {"marker": marker, "kill_at": 3.0, "log": log, "sleep": 0.02},
                  store=store, jobs=1, progress=False)
    assert os.path.exists(marker)  # the kill happened
    assert (df["status"] == "done").all(), df["error"].tolist()
    assert np.array_equal(df["y"].to_numpy(), np.array(xs) ** 3)
    assert df.attrs["run"]["resubmitted"] >= 1
    assert df.loc[3.0, "pid"] != int(open(marker).read())  # re-run in a fresh worker
    with sqlite3.connect(store) as c:
        assert c.execute("SELECT COUNT(*) FROM points").fetchone()[0] == 12


# -- CLI ------------------------------------------------------------------------------------------

def _spec(tmp_path, body, name="spec.toml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(body))
    return str(p)


class _Result:
    def __init__(self, returncode, stdout, stderr):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def _cli(*args):
    """``python -m linearnets sweep ARGS`` in this process (status, stdout, stderr)."""
    import contextlib
    import io

    from linearnets.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["sweep", *args])
    return _Result(code, out.getvalue(), err.getvalue())


def test_cli_subprocess_bad_spec(tmp_path):
    """A real ``python -m linearnets sweep run`` on a bad spec: one line on stderr, exit status 2."""
    spec = _spec(tmp_path, """
        [sweep]
        function = "sweep_fixtures:quadratic"
        store = "s.sqlite"
        [grid]
        x = {geomspace = [1, 2, 3]}
        """)
    r = subprocess.run([sys.executable, "-m", "linearnets", "sweep", "run", spec], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2 and "unknown axis form" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_cli_bad_specs_one_line(tmp_path):
    cases = {
        "unknown function": """
            [sweep]
            function = "sweep_fixtures:nope"
            store = "s.sqlite"
            [grid]
            x = [1.0]
            """,
        "unknown axis form": """
            [sweep]
            function = "sweep_fixtures:quadratic"
            store = "s.sqlite"
            [grid]
            x = {geomspace = [1, 2, 3]}
            """,
        "store folder": """
            [sweep]
            function = "sweep_fixtures:quadratic"
            store = "nowhere/s.sqlite"
            [grid]
            x = [1.0]
            """,
    }
    for i, (what, body) in enumerate(cases.items()):
        r = _cli("run", _spec(tmp_path, body, f"s{i}.toml"), "--jobs", "0")
        assert r.returncode == 2, r.stderr
        assert what in r.stderr and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    r = _cli("run", str(tmp_path / "absent.toml"))
    assert r.returncode == 2 and "not found" in r.stderr and "Traceback" not in r.stderr
    r = _cli("run", str(tmp_path / "s0.toml"), "--jobs", "2", "--scheduler", "tcp://127.0.0.1:1")
    assert r.returncode == 2 and "not allowed with" in r.stderr


def test_cli_run_status_export(tmp_path):
    spec = _spec(tmp_path, """
        [sweep]
        name = "demo"
        function = "sweep_fixtures:fail_when"
        version = "1"
        store = "out/demo.sqlite"
        [grid]
        x = {linspace = [0, 1, 3]}
        [fixed]
        bad = 0.5
        [full.grid]
        x = {linspace = [0, 1, 5]}
        """)
    (tmp_path / "out").mkdir()
    r = _cli("run", spec, "--jobs", "0")
    assert r.returncode == 1 and "2/3 done, 1 failed" in r.stdout, r.stdout + r.stderr
    r = _cli("status", spec)
    assert r.returncode == 0 and "1 failed" in r.stdout and "{'x': 0.5}" in r.stdout
    r = _cli("run", spec, "--jobs", "0")
    assert "computed 0 point(s)" in r.stdout
    r = _cli("status", spec, "--full")
    assert "5 points: 2 done, 1 failed, 2 pending" in r.stdout, r.stdout
    csv = str(tmp_path / "r.csv")
    r = _cli("export", spec, "--out", csv)
    assert r.returncode == 0, r.stderr
    back = pd.read_csv(csv)
    assert list(back["x"]) == [0.0, 0.5, 1.0] and list(back["status"]) == ["done", "failed", "done"]
    nc = str(tmp_path / "r.nc")
    r = _cli("export", spec, "--out", nc)
    assert r.returncode == 0, r.stderr
    xr = pytest.importorskip("xarray")
    with xr.open_dataset(nc) as ds:
        assert np.array_equal(ds["y"].values, [0.0, np.nan, 1.0], equal_nan=True)
    r = _cli("export", spec, "--out", str(tmp_path / "r.parquet"))
    try:
        import pyarrow  # noqa: F401
        assert r.returncode == 0
    except ImportError:
        assert r.returncode == 2 and "pyarrow" in r.stderr and "Traceback" not in r.stderr
    r = _cli("plot", spec, "--out", str(tmp_path / "f.png"))
    assert r.returncode == 0 and os.path.getsize(tmp_path / "f.png") > 1000, r.stderr
