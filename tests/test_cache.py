"""numba's cache of the package's kernels: outside the package folders, keyed on the sources."""
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

import linearnets
from linearnets import _numba_cache

PACKAGE_DIR = os.path.dirname(os.path.abspath(linearnets.__file__))
REPO_ROOT = os.path.dirname(PACKAGE_DIR)

pytest.importorskip("numba")

# Two small kernels: compiling them takes a few seconds.
_CALL = textwrap.dedent("""
    import json, sys
    import numpy as np
    import linearnets
    from linearnets import _numba_cache
    from linearnets.sim.models import _linear_kernels as k
    G = np.ones((2, 3)); W = np.ones((4, 3)); out = np.empty((2, 4)); tbuf = np.empty(14)
    k.times_transpose(G, W, out, tbuf)
    k.sumsq(np.arange(5.0))
    print(json.dumps({
        "file": linearnets.__file__,
        "dir": _numba_cache.cache_dir(),
        "compiles": _numba_cache.compile_count(),
        "hits": sum(sum(d.stats.cache_hits.values()) for d in (k.times_transpose, k.sumsq)),
        "misses": sum(sum(d.stats.cache_misses.values()) for d in (k.times_transpose, k.sumsq)),
    }))
""")


def _run(code, env_extra, cwd):
    env = dict(os.environ)
    env.pop("NUMBA_CACHE_DIR", None)
    env.pop("NUMBA_DISABLE_JIT", None)
    env["PYTHONPATH"] = REPO_ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.update(env_extra)
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


def _package_cache_files():
    found = {}
    for root, _, files in os.walk(PACKAGE_DIR):
        for name in files:
            if name.endswith((".nbi", ".nbc")):
                path = os.path.join(root, name)
                found[path] = os.stat(path).st_mtime_ns
    return found


def test_second_process_loads_kernels_from_user_cache_and_package_stays_clean(tmp_path):
    before = _package_cache_files()
    env = {"LINEARNETS_CACHE_DIR": str(tmp_path / "cache")}
    first, err1 = _run(_CALL, env, tmp_path)
    assert first["dir"].startswith(str(tmp_path / "cache"))
    assert first["compiles"] >= 2 and first["misses"] >= 2 and first["hits"] == 0
    assert err1.count("linearnets: compiling numba kernels") == 1  # once per process
    written = [f for _, _, fs in os.walk(first["dir"]) for f in fs]
    assert any(f.startswith("_linear_kernels.times_transpose") and f.endswith(".nbi") for f in written)
    assert any(f.startswith("_erk_kernels.sumsq") and f.endswith(".nbc") for f in written)

    second, err2 = _run(_CALL, env, tmp_path)
    assert second["dir"] == first["dir"]
    assert second["compiles"] == 0 and second["misses"] == 0 and second["hits"] >= 2
    assert "compiling numba kernels" not in err2

    # nothing written or rewritten inside the package folders
    assert _package_cache_files() == before


def test_cache_key_follows_kernel_sources_and_their_imports(tmp_path):
    copy = tmp_path / "linearnets"
    shutil.copytree(PACKAGE_DIR, copy, ignore=shutil.ignore_patterns("__pycache__"))
    kernels, linear = copy / "sim" / "methods" / "_rosw_kernels.py", copy / "sim" / "models" / "_linear_kernels.py"
    sources = {os.path.relpath(p, copy).replace(os.sep, "/") for p in _numba_cache.kernel_sources(str(kernels), str(copy))}
    # the kernel module and what it imports (a callee lives in _erk_kernels.py), and the decorator
    assert {"sim/methods/_rosw_kernels.py", "sim/methods/_erk_kernels.py", "_numba_cache.py"} <= sources
    assert "compare/common.py" not in sources and "cli.py" not in sources and "theory/_kernels.py" not in sources
    key = _numba_cache.cache_key(str(kernels), str(copy), version="9.9")
    assert key.startswith("9.9-") and key == _numba_cache.cache_key(str(kernels), str(copy), version="9.9")
    key_linear = _numba_cache.cache_key(str(linear), str(copy), version="9.9")
    assert key_linear != key                       # one directory per kernel module

    with open(copy / "compare" / "common.py", "a") as f:  # not a kernel's dependency
        f.write("\n# edited\n")
    assert _numba_cache.cache_key(str(kernels), str(copy), version="9.9") == key
    with open(copy / "sim" / "methods" / "_rosw_kernels.py", "a") as f:
        f.write("\n# edited\n")
    key2 = _numba_cache.cache_key(str(kernels), str(copy), version="9.9")
    assert key2 != key
    key_linear2 = _numba_cache.cache_key(str(linear), str(copy), version="9.9")
    assert key_linear2 != key_linear               # imported by models/_linear_kernels.py
    # the factory of the compiled loops: its loop is cached inside another module's entry
    # point (models/_linear_kernels.py), which numba alone would not see change
    with open(copy / "sim" / "methods" / "_erk_kernels.py", "a") as f:
        f.write("\n# edited\n")
    assert _numba_cache.cache_key(str(linear), str(copy), version="9.9") != key_linear2
    assert _numba_cache.cache_key(str(kernels), str(copy), version="9.9") != key2


def test_every_cached_kernel_goes_through_the_packages_njit():
    """A ``cache=True`` decoration with numba's own njit would write into the package folders:
    every one in the package is this module's njit, and those modules are the kernel modules."""
    import ast
    mods, offenders = set(_numba_cache.kernel_modules()), []
    for root, _, files in os.walk(PACKAGE_DIR):
        for name in files:
            if not name.endswith(".py") or name == "_numba_cache.py":
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, PACKAGE_DIR)[:-3].replace(os.sep, ".")
            for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
                if isinstance(node, ast.ImportFrom) and node.module == "numba" and \
                        {a.name for a in node.names} & {"njit", "jit"}:
                    offenders.append(f"{rel}: from numba import {', '.join(a.name for a in node.names)}")
                if isinstance(node, ast.Call) and any(k.arg == "cache" for k in node.keywords):
                    if not (isinstance(node.func, ast.Name) and node.func.id == "njit" and rel in mods):
                        offenders.append(f"{rel}:{node.lineno}")
    assert not offenders, offenders
    assert {"theory._kernels", "sim.models._linear_kernels", "sim.methods._erk_kernels",
            "sim.models._mlp_kernels"} <= mods


def test_unusable_cache_dir_falls_back_and_user_code_keeps_numbas_default(tmp_path):
    blocker = tmp_path / "not_a_dir"
    blocker.write_text("a file where the cache directory should be")
    user_mod = tmp_path / "usermod.py"
    user_mod.write_text(textwrap.dedent("""
        from numba import njit

        @njit(cache=True)
        def twice(x):
            return 2.0 * x
    """))
    code = textwrap.dedent("""
        import json, os
        import linearnets
        from linearnets import _numba_cache
        import numba
        import usermod
        from linearnets.sim.models import _linear_kernels as _kernels
        usermod.twice(1.0)
        print(json.dumps({"dir": _numba_cache.cache_dir(), "numba_dir": numba.config.CACHE_DIR,
                          "user": os.listdir(os.path.join(os.path.dirname(usermod.__file__), "__pycache__"))}))
    """)
    out, _ = _run(code, {"LINEARNETS_CACHE_DIR": str(blocker), "XDG_CACHE_HOME": str(tmp_path / "xdg"),
                         "PYTHONPATH": str(tmp_path) + os.pathsep + REPO_ROOT}, tmp_path)
    assert out["dir"].startswith(str(tmp_path / "xdg" / "linearnets" / "numba"))
    assert any(f.startswith("usermod.twice") and f.endswith(".nbi") for f in out["user"])
    assert out["numba_dir"] == ""       # numba's setting is the package's only while it decorates


def test_nothing_compiles_at_import_and_warmup_lists_every_kernel(tmp_path):
    code = textwrap.dedent("""
        import json
        import linearnets
        from linearnets import _numba_cache, _warmup
        print(json.dumps({"compiles": _numba_cache.compile_count(),
                          "kernels": sorted(_warmup.kernel_dispatchers())}))
    """)
    out, err = _run(code, {"LINEARNETS_CACHE_DIR": str(tmp_path / "cache")}, tmp_path)
    assert out["compiles"] == 0 and "compiling" not in err
    names = set(out["kernels"])
    assert {"sim.models._linear_kernels.rhs_flat", "sim.models._linear_kernels.erk_advance",
            "sim.models._linear_kernels.rosw_advance", "sim.models._linear_kernels.rhs",
            "sim.models._linear_kernels.jvp", "sim.methods._erk_kernels.stage_states",
            "theory._kernels.strength_deep"} <= names
    assert len(names) >= 50


def test_warmup_is_a_cli_command():
    from linearnets.cli import main

    assert main(["warmup", "--help"]) == 0


# Runs of the linear network through the compiled loops' entry points: RK45 and DOP853 on
# dense stages (the loop of methods/_erk_kernels.make_erk_advance), ROS34PW2 (that of
# methods/_rosw_kernels.make_rosw_advance), "auto" (both, switching).
_ENTRY_POINTS = ("erk_advance", "rosw_advance", "rhs", "jvp")
_RUNS = textwrap.dedent("""
    import json, time
    import numpy as np
    t0 = time.perf_counter()
    import linearnets as ln
    from linearnets import _numba_cache
    from linearnets.sim.models import _linear_kernels as lk
    X, Y = ln.teacher_task(12, 4, [1.0, 0.5], seed=0)[:2]
    w = ln.init_network((4, 5, 5, 2), 0.3, seed=1)
    seconds = {}
    for method in ("RK45", "DOP853", "ROS34PW2", "auto"):
        t1 = time.perf_counter()
        tr = ln.gradient_flow(w, X, Y, np.linspace(0.0, 50.0, 4), backend="numba", method=method,
                              rtol=1e-6, atol=1e-9)
        assert tr.success, tr.message
        seconds[method] = time.perf_counter() - t1
    print(json.dumps({
        "compiles": _numba_cache.compile_count(), "seconds": seconds,
        "total": time.perf_counter() - t0,
        "hits": {n: sum(getattr(lk, n).stats.cache_hits.values()) for n in %r},
        "misses": {n: sum(getattr(lk, n).stats.cache_misses.values()) for n in %r},
    }))
""" % (_ENTRY_POINTS, _ENTRY_POINTS))


@pytest.mark.slow
def test_second_process_loads_the_compiled_loops_entry_points_from_cache(tmp_path):
    """The factory-built loops compile into the linear model's cached entry points: a
    second process takes every one from the cache and compiles nothing."""
    env = {"LINEARNETS_CACHE_DIR": str(tmp_path / "cache")}
    cold, _ = _run(_RUNS, env, tmp_path)
    assert cold["compiles"] > 0 and all(cold["misses"][n] >= 1 for n in ("erk_advance", "rosw_advance"))
    warm, err = _run(_RUNS, env, tmp_path)
    assert warm["compiles"] == 0 and "compiling numba kernels" not in err
    assert all(warm["misses"][n] == 0 for n in _ENTRY_POINTS), warm["misses"]
    assert warm["hits"]["erk_advance"] >= 1 and warm["hits"]["rosw_advance"] >= 1
    print(f"cold {cold['seconds']}, warm {warm['seconds']} (seconds per first run)")


@pytest.mark.slow
def test_warmup_compiles_every_kernel_then_loads_them(tmp_path):
    code = textwrap.dedent("""
        import json
        from linearnets._warmup import warmup
        info = warmup(progress=False)
        print(json.dumps(info))
    """)
    env = {"LINEARNETS_CACHE_DIR": str(tmp_path / "cache")}
    cold, err = _run(code, env, tmp_path)
    assert cold["unused"] == [] and cold["compiled"] >= cold["kernels"]
    assert "compiling numba kernels" not in err  # the bar replaces the notice
    warm, _ = _run(code, env, tmp_path)
    assert warm["compiled"] == 0 and warm["loaded"] > 0


_MLP_CALL = textwrap.dedent("""
    import json
    import numpy as np
    import linearnets as ln
    from linearnets import _numba_cache
    from linearnets.sim.models import _mlp_kernels as k
    rng = np.random.default_rng(0)
    X = rng.standard_normal((6, 2)); Y = np.sign(rng.standard_normal((6, 1)))
    ws = ln.init_network((2, 3, 1), 1.0, seed=0)
    tr = ln.gradient_flow(ws, X, Y, [0.0, 0.1], backend="numba", activation="relu",
                          loss="soft_hinge", centered=True, stop="margin", rtol=1e-4)
    # the entry points Python calls (mlp_forward is compiled inside mlp_rhs and mlp_loss)
    kernels = (k.mlp_rhs, k.mlp_loss, k.erk_advance_kinks)
    print(json.dumps({
        "backend": tr.backend,
        "compiles": _numba_cache.compile_count(),
        "hits": [sum(d.stats.cache_hits.values()) for d in kernels],
        "misses": sum(sum(d.stats.cache_misses.values()) for d in kernels),
    }))
""")


def test_second_process_loads_the_compiled_mlp_from_cache(tmp_path):
    """The MLP's kernels (sim/models/_mlp_kernels.py) through gradient_flow on backend
    'numba', its compiled stepping loop included: compiled in a first process, every one
    loaded from the cache in a second."""
    env = {"LINEARNETS_CACHE_DIR": str(tmp_path / "cache")}
    first, _ = _run(_MLP_CALL, env, tmp_path)
    assert first["backend"] == "numba" and first["compiles"] >= 3 and first["misses"] >= 3
    second, err = _run(_MLP_CALL, env, tmp_path)
    assert second["compiles"] == 0 and second["misses"] == 0 and min(second["hits"]) >= 1
    assert "compiling numba kernels" not in err


_RACE = textwrap.dedent("""
    import json, sys, time
    import numpy as np
    from linearnets.sim.models import _mlp_kernels as k
    TYPES = [np.float64, np.float32, np.int64, np.int32, np.int16, np.int8, np.uint64,
             np.uint32, np.uint16, np.uint8]
    i, n, start = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
    while time.time() < start:
        time.sleep(0.001)
    mine = [t for j, t in enumerate(TYPES) if n == 0 or j % n == i]
    out = {t.__name__: float(k.vtanh(t(3))) for t in mine}
    print(json.dumps({"values": out, "hits": sum(k.vtanh.stats.cache_hits.values()),
                      "misses": sum(k.vtanh.stats.cache_misses.values())}))
""")


def test_processes_compiling_one_kernel_at_once_leave_a_consistent_cache(tmp_path):
    """numba issues #4807 / #10128: processes that compile different signatures of one cached
    kernel at once must not leave an index entry pointing at another signature's code. Four
    processes on one fresh cache compile ten signatures of ``_mlp_kernels.vtanh`` at the
    same moment; a fifth then loads every one from the cache, with the writers' values."""
    env = dict(os.environ, LINEARNETS_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("NUMBA_CACHE_DIR", None)
    env.pop("NUMBA_DISABLE_JIT", None)
    script = tmp_path / "race.py"
    script.write_text(_RACE)
    import time
    start = str(time.time() + 8.0)        # after every writer has imported the package
    procs = [subprocess.Popen([sys.executable, str(script), str(i), "4", start], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for i in range(4)]
    written = {}
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        written.update(json.loads(out.strip().splitlines()[-1])["values"])
    assert len(written) == 10
    reader = subprocess.run([sys.executable, str(script), "0", "0", "0"], env=env,
                            capture_output=True, text=True, timeout=600)
    assert reader.returncode == 0, reader.stderr
    read = json.loads(reader.stdout.strip().splitlines()[-1])
    assert read["misses"] == 0 and read["hits"] == 10
    assert read["values"] == written
    assert all(abs(v - 0.9950547536867305) < 1e-6 for v in written.values())   # tanh(3)


def test_a_cache_entry_is_saved_under_the_index_lock(tmp_path):
    """:func:`_numba_cache.lock_cache`: while numba writes a dispatcher's index, the file lock
    beside it is held (another open of it cannot take the lock)."""
    code = textwrap.dedent("""
        import fcntl, json, os, sys
        import numba
        numba.config.CACHE_DIR = sys.argv[1]
        sys.path.insert(0, sys.argv[1])
        with open(os.path.join(sys.argv[1], "usermod.py"), "w") as f:
            f.write("import numba\\n@numba.njit(cache=True)\\ndef f(x):\\n    return x + 1\\n")
        import usermod
        from linearnets._numba_cache import lock_cache
        index = lock_cache(usermod.f)._cache._cache_file
        held = []
        save_index = index._save_index
        def probe(overloads):
            fd = os.open(index._index_path + ".lock", os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                held.append(False)
            except BlockingIOError:
                held.append(True)
            finally:
                os.close(fd)
            save_index(overloads)
        index._save_index = probe
        print(json.dumps({"value": usermod.f(2), "held": held}))
    """)
    pytest.importorskip("fcntl")
    out, _ = _run(code.replace("sys.argv[1]", repr(str(tmp_path))), {}, tmp_path)
    assert out == {"value": 3, "held": [True]}
