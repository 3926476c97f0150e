"""The first-run rule of ``backend="auto"`` (linearnets/_jit.py): numpy and one background
warm-up while the kernel cache is incomplete, numba once it is complete, LINEARNETS_JIT."""
import importlib
import os

import numpy as np
import pytest

import linearnets as ln
from linearnets import _jit, _numba_cache
from linearnets import backend as B
from linearnets.cli import background_warmup

pytestmark = pytest.mark.skipif(_numba_cache.fcntl is None, reason="the warm-up lock needs fcntl")


class FakePopen:
    calls = []

    def __init__(self, args, **kw):
        FakePopen.calls.append((args, kw))


@pytest.fixture
def cold(tmp_path, monkeypatch):
    """An empty cache root, ``LINEARNETS_JIT=background``, no warm-up started yet in this
    process, and ``subprocess.Popen`` recorded instead of run.  The kernel modules are
    imported first: their kernels keep the real cache (its root is read at decoration)."""
    for name in _numba_cache.KERNEL_MODULES:
        importlib.import_module(f"linearnets.{name}")
    monkeypatch.setitem(_numba_cache._state, "root", str(tmp_path))
    monkeypatch.setitem(_numba_cache._state, "warm", False)
    monkeypatch.setitem(_jit._state, "started", None)
    monkeypatch.setitem(_jit._state, "noticed", False)
    monkeypatch.setenv(_jit.ENV_VAR, "background")
    monkeypatch.setattr(_jit, "_popen", FakePopen)
    FakePopen.calls = []
    return tmp_path


def _problem():
    X, y, beta = ln.scalar_teacher(P=20, D=4, s=2.0, seed=0)
    w = ln.init_balanced((4, 6, 1), sigma=0.1, left=[[1.0]], right=beta[:, None])
    return w, X, y


def test_the_marker_is_keyed_on_every_kernel_module():
    assert sorted(_numba_cache.KERNEL_MODULES) == sorted(_numba_cache.kernel_modules())


def test_cold_cache_runs_numpy_and_starts_one_warmer(cold, capsys):
    w, X, y = _problem()
    trs = [ln.gradient_flow(w, X, y, [0.0, 1.0, 5.0]) for _ in range(3)]
    gd = ln.gradient_descent(w, X, y, [0, 5], 0.05)
    assert [tr.backend for tr in trs] == ["numpy"] * 3 and gd.backend == "numpy"
    assert len(FakePopen.calls) == 1                      # once per process
    args, kw = FakePopen.calls[0]
    assert args[1:] == list(_jit.WARMER) and kw["start_new_session"]
    assert kw["env"][_jit.ENV_VAR] == "eager" and kw["stdin"] is not None
    assert capsys.readouterr().err.count("not compiled yet") == 1
    # the closed forms too: the vectorised reference, equal to the kernel to rounding
    t = np.logspace(-2, 4, 13)
    c_cold = ln.mode_strength(t, 1.0, 1e-4, depth=4)
    os.environ[_jit.ENV_VAR] = "eager"
    c_kernel = ln.mode_strength(t, 1.0, 1e-4, depth=4)
    np.testing.assert_allclose(c_cold, c_kernel, rtol=1e-12, atol=0)
    assert len(FakePopen.calls) == 1


def test_the_warmup_compiles_what_its_tasks_reach(cold):
    """Inside the warm-up (``_jit.warming``) a ``backend="auto"`` call compiles: it neither
    runs on numpy nor starts a second warm-up; after it the cold rule holds again."""
    w, X, y = _problem()
    with _jit.warming():
        assert _jit.compiled_ready()
        assert ln.gradient_flow(w, X, y, [0.0, 1.0]).backend == "numba"
    assert FakePopen.calls == []
    assert not _jit.compiled_ready() and len(FakePopen.calls) == 1


def test_cold_numpy_run_agrees_with_the_compiled_run(cold):
    w, X, y = _problem()
    t = np.concatenate([[0.0], np.logspace(-1, 2, 8)])
    rtol = 1e-8
    cold_run = ln.gradient_flow(w, X, y, t, rtol=rtol, record=("modes",))
    compiled = ln.gradient_flow(w, X, y, t, rtol=rtol, record=("modes",), backend="numba")
    assert (cold_run.backend, compiled.backend) == ("numpy", "numba")
    scale = np.max(np.abs(compiled.modes))
    assert np.max(np.abs(cold_run.modes - compiled.modes)) <= 100 * rtol * scale


def test_another_processs_warmer_is_not_doubled(cold):
    held = _numba_cache.warmup_lock()           # another open file: as another process
    assert held is not None
    try:
        assert not _jit.compiled_ready()
        assert FakePopen.calls == []
        assert B.resolve_backend("auto", 10, B.BACKENDS) == "numpy"
    finally:
        os.close(held)


def test_a_failed_warmup_is_not_restarted(cold):
    open(_numba_cache.warm_marker() + ".failed", "w").close()     # unreadable: not these sources
    assert not _jit.compiled_ready() and len(FakePopen.calls) == 1
    _jit._state["started"] = None
    _numba_cache.mark_warm({"error": "RuntimeError: no compiler"}, failed=True)
    assert not _numba_cache.is_warm() and _numba_cache.warmup_failed()
    assert not _jit.compiled_ready() and len(FakePopen.calls) == 1


def test_the_marker_follows_the_kernels_sources(cold):
    import json

    marker = _numba_cache.mark_warm({"compiled": 0})
    with open(marker) as f:
        saved = json.load(f)
    assert "sim/models/_linear_kernels.py" in saved["sources"]
    assert "_numba_cache.py" in saved["sources"] and "sim/flow.py" not in saved["sources"]
    _numba_cache._state["warm"] = False
    assert _numba_cache.is_warm()
    saved["sources"]["sim/models/_linear_kernels.py"] = "0" * 64      # as after an edit
    with open(marker, "w") as f:
        json.dump(saved, f)
    _numba_cache._state["warm"] = False
    assert not _numba_cache.is_warm()


def test_warm_cache_picks_numba_and_explicit_numba_compiles(cold):
    assert B.resolve_backend("numba", 10, B.BACKENDS) == "numba"     # explicit: always
    assert FakePopen.calls == []
    marker = _numba_cache.mark_warm({"compiled": 0})
    assert os.path.basename(marker).startswith(f"warm-{ln.__version__}-")
    assert B.resolve_backend("auto", 10, B.BACKENDS) == "numba"
    assert FakePopen.calls == []


@pytest.mark.parametrize("mode, expected", [("eager", "numba"), ("off", "numpy")])
def test_environment_variable(cold, monkeypatch, mode, expected):
    monkeypatch.setenv(_jit.ENV_VAR, mode)
    assert B.resolve_backend("auto", 10, B.BACKENDS) == expected
    assert FakePopen.calls == []
    monkeypatch.setenv(_jit.ENV_VAR, "sometimes")
    with pytest.raises(ValueError, match=_jit.ENV_VAR):
        B.resolve_backend("auto", 10, B.BACKENDS)


def test_background_warmup_holds_the_lock_and_marks_the_cache(cold, monkeypatch):
    import linearnets._warmup as W

    ran = []
    monkeypatch.setattr(W, "warmup", lambda progress: ran.append(progress) or
                        {"compiled": 3, "loaded": 0, "seconds": 0.5})
    held = _numba_cache.warmup_lock()
    try:
        assert background_warmup(nice=0) is None and ran == []   # another holds it
    finally:
        os.close(held)
    assert background_warmup(nice=0)["compiled"] == 3 and ran == [False]
    assert _numba_cache.is_warm() and os.path.isfile(_numba_cache.warm_marker())
    fd = _numba_cache.warmup_lock()
    assert fd is not None                                                 # released
    os.close(fd)

    def fail(progress):
        raise RuntimeError("no compiler")
    monkeypatch.setattr(W, "warmup", fail)
    monkeypatch.setitem(_numba_cache._state, "warm", False)
    os.remove(_numba_cache.warm_marker())
    with pytest.raises(RuntimeError):
        background_warmup(nice=0)
    assert os.path.isfile(_numba_cache.warm_marker() + ".failed")


def test_the_warmer_inherits_the_lock_until_it_exits(cold, monkeypatch):
    """A real child (a short sleep in place of the warm-up): the lock is held exactly while it
    lives, so that no other process starts a second one, and freed when it ends."""
    import subprocess

    monkeypatch.setattr(_jit, "_popen", subprocess.Popen)
    monkeypatch.setattr(_jit, "WARMER", ("-c", "import time; time.sleep(1.5)"))
    proc = _jit.start_warmer()
    assert proc is not None and _jit.start_warmer() is proc          # once per process
    assert _numba_cache.warmup_lock() is None                        # held by the child
    proc.wait(timeout=30)
    fd = _numba_cache.warmup_lock()
    assert fd is not None
    os.close(fd)


def test_the_warmup_command_marks_the_cache(cold, monkeypatch):
    import linearnets._warmup as W
    from linearnets.cli import main

    monkeypatch.setattr(W, "warmup", lambda progress: {"compiled": 0, "loaded": 9, "seconds": 0.1,
                                                       "cache_dir": str(cold)})
    assert not _numba_cache.is_warm()
    assert main(["warmup", "--no-progress"]) == 0
    assert os.path.isfile(_numba_cache.warm_marker())
    assert B.resolve_backend("auto", 10, B.BACKENDS) == "numba"


_FIRST = """
import json, sys
import linearnets as ln
from linearnets import _numba_cache
X, y, beta = ln.scalar_teacher(P=20, D=4, s=2.0, seed=0)
tr = ln.gradient_flow(ln.init_network((4, 6, 1), 0.3, seed=0), X, y, [0.0, 1.0])
print(json.dumps({"backend": tr.backend, "compiles": _numba_cache.compile_count()}))
"""


@pytest.mark.slow
def test_a_real_first_run_then_the_next(tmp_path):
    """Fresh processes on an empty cache: the first runs on numpy and starts the warm-up,
    which marks the cache; the next runs the compiled kernels and compiles nothing."""
    import fcntl
    import json
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(ln.__file__)))
    env = dict(os.environ, LINEARNETS_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=root, **{_jit.ENV_VAR: "background"})

    def run():
        proc = subprocess.run([sys.executable, "-c", _FIRST], env=env, capture_output=True,
                              text=True, timeout=600, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout.splitlines()[-1]), proc.stderr

    first, err = run()
    assert first == {"backend": "numpy", "compiles": 0} and "not compiled yet" in err
    fd = os.open(tmp_path / "cache" / "warmup.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)          # until the warm-up ends
    finally:
        os.close(fd)
    markers = [n for n in os.listdir(tmp_path / "cache") if n.startswith("warm-")]
    assert len(markers) == 1 and not markers[0].endswith(".failed"), \
        (tmp_path / "cache" / "warmup.log").read_text()
    second, err = run()
    assert second == {"backend": "numba", "compiles": 0} and "compiling" not in err
