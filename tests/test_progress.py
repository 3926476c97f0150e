"""progress=: a tqdm bar over the flow time, None automatic (terminal and 2 s), True, False."""
import numpy as np
import pytest

import linearnets as ln
from linearnets import _progress as P
from linearnets.network import init_network


def _problem():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((10, 3))
    return X, X[:, :1].copy(), init_network((3, 6, 1), 0.5, seed=1)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_progress_true_draws_a_bar_to_the_end(backend, capsys):
    X, Y, ws = _problem()
    tr = ln.gradient_flow(ws, X, Y, np.logspace(-2, 2, 9), backend=backend, progress=True,
                          activation="tanh")
    assert tr.success
    err = capsys.readouterr().err
    last = err.replace("\r", "\n").strip().splitlines()[-1]
    assert "gradient flow" in last and "100%" in last and "t = 100 / 100, log scale" in last


def test_progress_false_and_automatic_off_a_terminal_draw_nothing(capsys):
    X, Y, ws = _problem()
    for progress in (False, None):       # under pytest, stderr is not a terminal
        ln.gradient_flow(ws, X, Y, [0.0, 5.0], progress=progress)
        ln.gradient_flow_ensemble([ws, ws], X, Y, [0.0, 5.0], progress=progress)
    # (the first use of compiled kernels may say so on stderr: no bar)
    assert "gradient flow" not in capsys.readouterr().err


def test_ensemble_bar(capsys):
    X, Y, ws = _problem()
    ens = ln.gradient_flow_ensemble([ws, ws], X, Y, [0.0, 5.0], progress=True)
    assert ens.all_success
    last = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    assert "100%" in last and "t = 5 / 5" in last


def test_automatic_shows_after_two_seconds_on_a_terminal(monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(P.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(P, "_stderr_is_terminal", lambda: False)
    assert P.progress_for(None, np.array([0.0, 1.0])) is None
    monkeypatch.setattr(P, "_stderr_is_terminal", lambda: True)
    bar = P.progress_for(None, np.array([0.0, 1.0]))
    opened = []
    monkeypatch.setattr(bar, "_open", lambda: opened.append(True))
    monkeypatch.setattr(bar, "_draw", lambda: None)
    for c in (1.0, P.AUTO_AFTER - 0.5):
        clock[0] = 100.0 + c
        bar.update(0.1)
    assert not opened                     # not yet: a short run prints nothing
    clock[0] = 100.0 + P.AUTO_AFTER + 0.1
    bar.update(0.5)
    assert opened
    assert P.progress_for(False, np.array([0.0, 1.0])) is None


def test_position_is_log_in_time_over_decades():
    bar = P.Progress(False, 1e4, log_from=1e-2)
    assert bar.fraction(1.0) == pytest.approx(2 / 6) and bar.fraction(0.0) == 0.0
    assert bar.fraction(1e4) == 1.0
    lin = P.progress_for(True, np.linspace(0.0, 10.0, 5))
    assert lin.log_from is None and lin.fraction(2.5) == 0.25
    lin.close()
    steps = P.Progress(False, 200, label="step", desc="gradient descent")
    assert steps.fraction(50) == 0.25


@pytest.mark.parametrize("bad", ["yes", 1, 0.5, [True]])
def test_bad_progress_names_it(bad):
    X, Y, ws = _problem()
    with pytest.raises(ValueError, match="progress"):
        ln.gradient_flow(ws, X, Y, [0.0, 1.0], progress=bad)
    with pytest.raises(ValueError, match="progress"):
        ln.gradient_flow_ensemble([ws], X, Y, [0.0, 1.0], progress=bad)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_gradient_descent_bar_counts_steps(backend, capsys):
    X, Y, ws = _problem()
    tr = ln.gradient_descent(ws, X, Y, [0, 10, 9000], 0.05, backend=backend, progress=True,
                             activation="tanh")
    assert tr.success
    lines = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()
    assert "gradient descent" in lines[-1] and "100%" in lines[-1]
    assert "step = 9000 / 9000" in lines[-1]
