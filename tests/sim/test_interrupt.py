"""Ctrl-C: ln.FlowInterrupted carrying the outputs computed so far (numpy and numba loops,
the ensemble), from a real SIGINT in a subprocess and from interrupts raised in the loops."""
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import linearnets as ln
from linearnets.sim import ensemble as _ensemble
from linearnets.sim.flow import prepare_flow
from linearnets.network import init_network
from sim_helpers import Interrupt

_CHILD = r"""
import sys, time
import numpy as np
import linearnets as ln
backend, ensemble = sys.argv[1], sys.argv[2] == "1"
rng = np.random.default_rng(0)
X = rng.standard_normal((60, 8)); Y = np.sin(X[:, :1])
nets = [ln.init_network((8, 32, 1), 1.0, seed=s) for s in range(3)]
kw = dict(activation="tanh", backend=backend, rtol=1e-10, max_steps=10**9)
run = ((lambda t: ln.gradient_flow_ensemble(nets, X, Y, t, **kw)) if ensemble
       else (lambda t: ln.gradient_flow(nets[0], X, Y, t, **kw)))
run([0.0, 0.01])                        # imports and compiles
print("started", flush=True)
try:
    run(np.linspace(0.0, 1e7, 1001))    # hours
    print("finished", flush=True)
except ln.FlowInterrupted as e:
    now = time.time()
    tr = e.trajectory
    n = int(np.sum(~np.isnan(np.atleast_2d(tr.loss)[0])))
    print("interrupted", repr(now), n, bool(np.any(tr.success)), flush=True)
    sys.exit(3)
"""


@pytest.mark.parametrize("backend,ensemble", [
    ("numba", False),
    pytest.param("numpy", False, marks=pytest.mark.slow),    # a fresh process each: the
    pytest.param("numba", True, marks=pytest.mark.slow)])    # default suite keeps one
def test_sigint_raises_flow_interrupted_with_the_outputs_so_far(backend, ensemble):
    """SIGINT during a long run: within 2 s the child catches ln.FlowInterrupted, whose
    trajectory holds the outputs recorded so far (at least t = 0), success False."""
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, backend, str(int(ensemble))],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "started", proc.stderr.read()
        time.sleep(0.5)                      # inside the long run's loop
        assert proc.poll() is None
        sent = time.time()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    words = out.split()
    assert proc.returncode == 3 and words[0] == "interrupted", (out, err)
    latency, n, success = float(words[1]) - sent, int(words[2]), words[3] == "True"
    assert n >= 1 and not success
    assert latency < 2.0, latency


def _problem(seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((20, 4))
    return X, np.sin(X[:, :1]), init_network((4, 12, 1), 1.0, seed=seed + 1)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("act", ["linear", "tanh"])
def test_interrupted_trajectory_is_the_run_so_far(backend, act):
    """Interrupted in its loop, a run raises FlowInterrupted (a KeyboardInterrupt) whose
    trajectory is the uninterrupted run's up to the last recorded output, NaN after, with
    the weights there."""
    X, Y, ws = _problem()
    t = np.linspace(0.0, 50.0, 41)
    prep = prepare_flow(X, Y, (4, 12, 1), t, backend=backend, activation=act,
                        record=("weights", "outputs"), method="RK45", rtol=1e-10)
    full = prep.run(ws)
    assert full.success
    with pytest.raises(ln.FlowInterrupted) as info:
        prep._run(ws, None, Interrupt(30 if backend == "numpy" else 3))
    assert isinstance(info.value, KeyboardInterrupt)
    tr = info.value.trajectory
    n = int(np.sum(~np.isnan(tr.loss)))
    assert 1 <= n < t.size and np.all(np.isnan(tr.loss[n:]))
    assert not tr.success and tr.status is ln.FlowStatus.INTERRUPTED
    assert "interrupted" in tr.message and "interrupted" in str(info.value)
    assert tr.t_last == t[n - 1]
    # the same arithmetic as the uninterrupted run up to there
    np.testing.assert_array_equal(tr.loss[:n], full.loss[:n])
    np.testing.assert_array_equal(tr.outputs[:n], full.outputs[:n])
    assert np.all(np.isnan(tr.outputs[n:])) and np.all(np.isnan(tr.weights_t[0][n:]))
    for w, wt in zip(tr.weights, full.weights_t):
        np.testing.assert_array_equal(w, wt[n - 1])


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_ensemble_interrupt_keeps_every_member(backend, monkeypatch):
    """A SIGINT in the middle of an ensemble (delivered to the main thread while the
    members run, on threads for numba): FlowInterrupted with an EnsembleTrajectory of B
    members, none successful, the recorded outputs finite and NaN after."""
    X, Y, _ = _problem(1)
    nets = [init_network((4, 12, 1), 1.0, seed=s) for s in range(3)]
    t = np.linspace(0.0, 1e6, 201)

    class Bar:          # the ensemble's progress bar: a SIGINT at its 5th update
        calls = 0

        def update(self, c, member=0):
            Bar.calls += 1
            if Bar.calls == 5:          # to the process, as Ctrl-C sends it
                os.kill(os.getpid(), signal.SIGINT)

        def update_all(self, c):
            pass

        def close(self):
            pass
    monkeypatch.setattr(_ensemble, "progress_for", lambda *a, **k: Bar())
    with pytest.raises(ln.FlowInterrupted) as info:
        ln.gradient_flow_ensemble(nets, X, Y, t, backend=backend, activation="tanh",
                                  rtol=1e-10, max_steps=10**9)
    ens = info.value.trajectory
    assert isinstance(ens, ln.EnsembleTrajectory) and ens.n_members == 3
    assert not np.any(ens.success)
    assert all(s is ln.FlowStatus.INTERRUPTED for s in ens.status)
    assert np.isfinite(ens.loss[0, 0]) and np.all(np.isnan(ens.loss[:, -1]))
    for b in range(3):
        n = int(np.sum(~np.isnan(ens.loss[b])))
        assert np.all(np.isnan(ens.loss[b, n:]))
        if n == 0:      # never started: its parameters at t = 0
            assert "before this member started" in ens.message[b]
            np.testing.assert_array_equal(ens.weights[0][b], nets[b][0])


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_interrupted_descent_keeps_its_steps(backend, monkeypatch):
    """Ctrl-C in gradient descent (between chunks of steps): FlowInterrupted whose trajectory
    has the recorded steps (and t = steps lr), NaN rows after the last one reached."""
    from linearnets.sim import descent as _descent
    X, Y, ws = _problem()
    steps = np.array([0, 5000, 10000, 15000])
    monkeypatch.setattr(_descent.PreparedDescent, "_bar", lambda self, progress: _Bar())
    with pytest.raises(ln.FlowInterrupted) as info:
        ln.gradient_descent(ws, X, Y, steps, 0.01, backend=backend, activation="tanh")
    tr = info.value.trajectory
    np.testing.assert_array_equal(tr.steps, steps)
    n = int(np.sum(~np.isnan(tr.loss)))
    assert 1 <= n < steps.size and tr.status is ln.FlowStatus.INTERRUPTED


class _Bar:
    """A bar whose update raises KeyboardInterrupt at its third call (a chunk of steps)."""
    end = 0.0

    def __init__(self):
        self.hook = Interrupt(3)

    def update(self, clock):
        self.hook(clock)

    def update_all(self, clock):
        pass

    def close(self):
        pass
