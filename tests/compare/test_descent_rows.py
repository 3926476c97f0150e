"""The verify rows of the discrete step pass, and fail when their theory is made wrong."""
import numpy as np
import pytest

import linearnets as ln
from linearnets.compare import descent
from linearnets.theory import discrete


@pytest.mark.parametrize("name", ["gd_mode_map", "gd_stability", "catapult", "modified_flow",
                                  "logistic_max_margin"])
def test_row_passes(name):
    row = ln.run_checks([name], seed=3)[0]
    assert row.passed, row


def test_gd_mode_map_fails_on_a_wrong_sign(monkeypatch):
    def wrong(k, s, c0, depth=2, lr=0.1):          # (a^L - s) for (s - a^L): the map runs away from s
        a = np.asarray(c0, float) ** (1.0 / depth) * np.ones(np.broadcast(k, s).shape)
        out = np.empty_like(a)
        kb = np.broadcast_to(k, a.shape)
        for n in range(int(np.max(k)) + 1):
            out[kb == n] = (a ** depth)[kb == n]
            a = a + lr * (a ** depth - np.asarray(s)) * a ** (depth - 1)
        return out
    monkeypatch.setattr(descent, "gd_mode_strength", wrong)
    row = descent.compare_gd_mode_map(n_steps=40)
    assert not row.passed and row.error > 1e-3


def test_catapult_fails_on_a_wrong_factor(monkeypatch):
    def wrong(steps, f0, ntk0, y, lr, x_sq=1.0):  # x_sq dropped from the map's O(lr^2) terms
        return discrete.catapult_map(steps, f0, ntk0, y, lr, x_sq=1.0)
    monkeypatch.setattr(descent, "catapult_map", wrong)
    row = descent.compare_catapult()
    assert not row.passed


def test_gd_stability_fails_on_a_wrong_threshold(monkeypatch):
    monkeypatch.setattr(descent, "gd_stability_threshold",
                        lambda s, depth=2: 2.0 / (depth * np.asarray(s) ** (2.0 - 1.0 / depth)))
    assert not descent.compare_gd_stability().passed


def test_logistic_max_margin_fails_on_a_wrong_direction(monkeypatch):
    monkeypatch.setattr(descent, "max_margin_direction", lambda X, y: np.array([1.0, 0.0]))
    assert not descent.compare_logistic_max_margin(n_steps=20_000).passed
