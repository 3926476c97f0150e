"""The quick run (``sim.flow._Quick``): a small linear flow's call on numba with the Python
work cut down, and ``gradient_flow``'s cache of its prepared flows.  It must give what the
general path gives (the same loop: compared here at a tolerance in units of rtol), hand
over every run it does not finish plainly (stiffness, failure, Ctrl-C), refill a cached
flow with new data exactly, and check input as the general path does."""
import threading
import warnings

import numpy as np
import pytest

import linearnets as ln
from linearnets.sim import flow as F
from linearnets.sim.flow import prepare_flow
from linearnets.network import init_network
from sim_helpers import Interrupt

pytestmark = pytest.mark.skipif(not ln.backend.numba_available(),
                                reason="the quick run is numba's")


def _data(seed=0, P=40, D=6, C=2, white=False):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((P, D))
    if white:                            # Sxx = I exactly up to rounding
        Q, _ = np.linalg.qr(X)
        X = Q * np.sqrt(P)
    return X, X @ rng.standard_normal((D, C)) + 0.1 * rng.standard_normal((P, C))


def _general(X, Y, ws, t_eval, **kw):
    """The general path's run: a prepared flow with the quick run switched off."""
    flow = prepare_flow(X, Y, [w.shape for w in ws], t_eval, backend="numba", **kw)
    flow._quick = None
    return flow.run(ws)


def _on_threads(work, n):
    """``work(i)`` for i < n, each on a thread of its own, all at once."""
    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()


def _close(a, b, rtol):
    """Two runs of the same loop agree far inside the tolerance they were run at."""
    assert a.success == b.success and a.status is b.status
    for name in ("end_to_end", "loss"):
        x, y = getattr(a, name), getattr(b, name)
        np.testing.assert_allclose(x, y, rtol=0, atol=rtol * max(1.0, np.abs(y).max()))
    for w, v in zip(a.weights, b.weights):
        np.testing.assert_allclose(w, v, rtol=0, atol=rtol * max(1.0, np.abs(v).max()))


@pytest.fixture
def quick_calls(monkeypatch):
    """The runs the quick run finished (not handed over), counted."""
    done = []
    run = F.PreparedFlow._quick_run

    def counted(self, ws, tick):
        traj = run(self, ws, tick)
        done.append(traj is not None)
        return traj
    monkeypatch.setattr(F.PreparedFlow, "_quick_run", counted)
    monkeypatch.setattr(F, "_quick_flows", threading.local())      # an empty cache
    return done


@pytest.mark.parametrize("method,rtol", [("auto", 1e-6), ("RK45", 1e-7), ("Tsit5", 1e-5),
                                         ("DOP853", 1e-9), ("BS32", 1e-5)])
@pytest.mark.parametrize("t_eval", [[0.0, 20.0], np.linspace(0.0, 12.0, 7), [2.0, 8.0],
                                    [5.0]])
def test_quick_run_is_the_general_run(method, rtol, t_eval, quick_calls):
    X, Y = _data()
    ws = init_network((6, 8, 8, 2), 0.3, seed=1)
    kw = dict(rtol=rtol, atol=rtol * 1e-3, method=method)
    want = _general(X, Y, ws, t_eval, **kw)
    first = ln.gradient_flow(ws, X, Y, t_eval, **kw)          # prepares and keeps the flow
    again = ln.gradient_flow(ws, X, Y, t_eval, **kw)          # the kept flow
    assert quick_calls == [True, True]
    assert len(F._quick_flows.flows) == 1
    _close(first, want, rtol)
    _close(again, want, rtol)
    assert first.method == want.method and first.backend == "numba"


def test_eta_alpha_and_one_output_column(quick_calls):
    X, Y = _data(C=1)
    ws = init_network((6, 5, 1), 0.5, seed=2)
    kw = dict(rtol=1e-8, eta=0.5, alpha=2.0)
    want = _general(X, Y, ws, [0.0, 3.0, 9.0], **kw)
    for _ in range(2):
        got = ln.gradient_flow(ws, X, Y[:, 0], [0.0, 3.0, 9.0], **kw)       # Y as (P,)
        _close(got, want, 1e-8)
    assert quick_calls == [True, True]


def test_kept_flow_refilled_with_new_data(quick_calls):
    """One kept flow, run on four data sets of its shapes (whitened and not, in turn):
    each run is the general path's on those data."""
    ws = init_network((6, 8, 2), 0.4, seed=3)
    kw = dict(rtol=1e-8)
    for seed, white in ((0, False), (1, True), (2, False), (3, True)):
        X, Y = _data(seed, white=white)
        _close(ln.gradient_flow(ws, X, Y, [0.0, 10.0], **kw),
               _general(X, Y, ws, [0.0, 10.0], **kw), 1e-8)
    assert quick_calls == [True] * 4 and len(F._quick_flows.flows) == 1


def test_stiff_run_goes_on_as_auto_would(quick_calls):
    """A run past convergence turns stiff: the quick run hands its stretch to "auto", which
    switches as in the general path."""
    X, Y = _data()
    ws = init_network((6, 8, 8, 2), 0.1, seed=1)
    got = ln.gradient_flow(ws, X, Y, [0.0, 50.0, 1000.0], rtol=1e-6)
    want = _general(X, Y, ws, [0.0, 50.0, 1000.0], rtol=1e-6)
    assert "stiff from" in want.message and "ROS34PW2" in want.message

    def switch(message):          # (where it turned stiff, the methods it switched through)
        head, tail = message.split("stiff from t=")[1].split(":", 1)
        return float(head), tail
    (t_got, path_got), (t_want, path_want) = switch(got.message), switch(want.message)
    assert path_got == path_want
    assert abs(t_got - t_want) <= 1e-6 * t_want
    _close(got, want, 1e-6)
    assert quick_calls == [True]


def test_failed_run_is_the_general_paths():
    X, Y = _data()
    ws = init_network((6, 8, 8, 2), 0.3, seed=1)
    with pytest.warns(ln.FlowWarning, match="5 attempted steps"):
        got = ln.gradient_flow(ws, X, Y, [0.0, 1.0, 20.0], max_steps=5, method="RK45")
    with pytest.warns(ln.FlowWarning):
        want = _general(X, Y, ws, [0.0, 1.0, 20.0], max_steps=5, method="RK45")
    # the quick run hands a failed run back: both are the general path's, run twice here
    assert not got.success and got.message == want.message
    np.testing.assert_array_equal(np.isnan(got.loss), np.isnan(want.loss))
    with pytest.raises(ln.FlowError):
        ln.gradient_flow(ws, X, Y, [0.0, 20.0], max_steps=5, raise_on_failure=True)


def test_interrupted_quick_run_keeps_the_outputs_so_far():
    X, Y = _data()
    ws = init_network((6, 8, 8, 2), 0.3, seed=1)
    t = np.linspace(0.0, 20.0, 21)
    prep = prepare_flow(X, Y, (6, 8, 8, 2), t, backend="numba", method="RK45", rtol=1e-9)
    assert prep._quick is not None
    full = prep.run(ws)
    with pytest.raises(ln.FlowInterrupted) as info:
        prep._run(ws, None, Interrupt(4))
    tr = info.value.trajectory
    n = int(np.sum(~np.isnan(tr.loss)))
    assert 1 <= n < t.size and np.all(np.isnan(tr.end_to_end[n:]))
    assert tr.status is ln.FlowStatus.INTERRUPTED and tr.t_last == t[n - 1]
    assert f"({n} of {t.size})" in tr.message
    np.testing.assert_allclose(tr.loss[:n], full.loss[:n], rtol=1e-9)
    np.testing.assert_allclose(tr.end_to_end[:n], full.end_to_end[:n], rtol=0, atol=1e-9)
    W = tr.weights[2] @ tr.weights[1] @ tr.weights[0]          # the state at t[n - 1]
    np.testing.assert_allclose(W, full.end_to_end[n - 1], rtol=0, atol=1e-9)


def test_breakdown_guard_reads_the_exact_losses():
    rec = F._QuickRecorder.__new__(F._QuickRecorder)
    t = np.array([0.0, 1.0, 2.0])
    assert not rec.rose(np.array([1.0, 0.5, 0.1]), t)
    assert not rec.rose(np.array([1.0, 9.0, 0.1]), t)         # below BREAKDOWN_RISE
    assert rec.rose(np.array([1.0, 0.5, 10.5]), t)
    assert rec.rose(np.array([1.0, np.nan, 0.1]), t)
    assert not rec.rose(np.zeros(3), t)


def test_callers_arrays_are_left_alone():
    """Neither path changes the caller's weights or data, nor makes them read-only."""
    X, Y = _data()
    ws = init_network((6, 8, 2), 0.3, seed=1)
    copies = [a.copy() for a in (*ws, X, Y)]
    prep = prepare_flow(X, Y, (6, 8, 2), [0.0, 5.0], backend="numba")
    for run in (lambda: prep.run(ws), lambda: ln.gradient_flow(ws, X, Y, [0.0, 5.0]),
                lambda: ln.gradient_flow(ws, X, Y, [0.0, 5.0])):
        tr = run()
        assert not tr.weights0[0].flags.writeable
    for a, c in zip((*ws, X, Y), copies):
        assert a.flags.writeable
        np.testing.assert_array_equal(a, c)


def test_bad_input_on_a_kept_flow_is_named(quick_calls):
    X, Y = _data()
    ws = init_network((6, 8, 2), 0.3, seed=1)
    ln.gradient_flow(ws, X, Y, [0.0, 5.0])
    assert len(F._quick_flows.flows) == 1
    Xbad = X.copy()
    Xbad[3, 2] = np.nan
    with pytest.raises(ValueError, match="X"):
        ln.gradient_flow(ws, Xbad, Y, [0.0, 5.0])
    with pytest.raises(ValueError, match="t_eval"):
        ln.gradient_flow(ws, X, Y, [0.0, 5.0, 4.0])
    with pytest.raises(ValueError, match="t_eval"):
        ln.gradient_flow(ws, X, Y, [-1.0, 5.0])
    with pytest.raises(ValueError, match="t_eval"):
        ln.gradient_flow(ws, X, Y, np.array([[0.0], [5.0]]))
    with pytest.raises(ValueError, match="t_eval"):
        ln.gradient_flow(ws, X, Y, [0.0, True])
    with pytest.raises(ValueError, match="Y overflows"):
        ln.gradient_flow(ws, X, Y * 1e200, [0.0, 5.0])
    wbad = [w.copy() for w in ws]
    wbad[1][0, 0] = np.inf
    with pytest.raises(ValueError, match=r"weights\[1\]"):
        ln.gradient_flow(wbad, X, Y, [0.0, 5.0])
    with pytest.raises(ValueError, match="progress"):
        ln.gradient_flow(ws, X, Y, [0.0, 5.0], progress="yes")
    with pytest.raises(ValueError, match="t_eval"):         # the horizon: beyond any budget
        ln.gradient_flow(ws, X, Y, [0.0, 1e300])


def test_what_the_cache_keeps(quick_calls):
    X, Y = _data()
    ws = init_network((6, 8, 2), 0.3, seed=1)
    # runs the quick run does not take, and calls with more than plain arrays, stay out
    ln.gradient_flow(ws, X, Y, [0.0, 1.0], record=("weights",))
    ln.gradient_flow(ws, X, Y, [0.0, 1.0], backend="numpy")
    ln.gradient_flow(ws, X, Y, [0.0, 1.0], activation="tanh")
    ln.gradient_flow(ws, X.tolist(), Y, [0.0, 1.0])
    ln.gradient_flow(ws, X, Y, [0.0, 1.0], lr_scales=[1.0, 2.0])
    assert not getattr(F._quick_flows, "flows", None)
    for i in range(F.QUICK_CACHE + 3):
        ln.gradient_flow(ws, X, Y, [0.0, 1.0], rtol=1e-6 * (1 + i))
    assert len(F._quick_flows.flows) == F.QUICK_CACHE


def test_threads_keep_their_own_flows():
    """Calls from several threads at once, each on its own data: each is its serial run."""
    ws = init_network((6, 8, 2), 0.3, seed=1)
    data = [_data(seed) for seed in range(4)]
    want = [_general(X, Y, ws, [0.0, 10.0]) for X, Y in data]
    got = [None] * 4

    def work(i):
        X, Y = data[i]
        for _ in range(5):
            got[i] = ln.gradient_flow(ws, X, Y, [0.0, 10.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _on_threads(work, 4)
    for g, w in zip(got, want):
        _close(g, w, 1e-8)


def test_one_prepared_flow_on_many_threads():
    """One prepared flow run from several threads at once (as an ensemble's members are):
    each thread forms its own quick run, each run is its serial run."""
    X, Y = _data()
    nets = [init_network((6, 8, 8, 2), 0.3, seed=s) for s in range(4)]
    prep = prepare_flow(X, Y, (6, 8, 8, 2), [0.0, 4.0, 12.0], backend="numba", rtol=1e-8)
    want = [_general(X, Y, ws, [0.0, 4.0, 12.0], rtol=1e-8) for ws in nets]
    got = [None] * 4

    def work(i):
        for _ in range(5):
            got[i] = prep.run(nets[i])
    _on_threads(work, 4)
    for g, w in zip(got, want):
        _close(g, w, 1e-8)
