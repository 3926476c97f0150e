"""The projection of ``benchmarks/studies/study_full_cost.py``: extrapolation in the size and
the width, interpolation along an axis, the sum over a grid (no timing runs here)."""
import importlib.util
import pathlib

import numpy as np
import pytest

PATH = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "studies" / "study_full_cost.py"
_spec = importlib.util.spec_from_file_location("study_full_cost", PATH)
sfc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sfc)


def cost(w, a, s):
    """A cost that is a power law in size and width, with an alpha-dependent size exponent."""
    k = 1.0 if a < 1 else 1.5
    return 1e-3 * (s ** k) * (w / 32.0) ** 2 * (3.0 if a < 1 else 1.0)


WIDTHS = [32.0, 64.0, 128.0, 256.0]
ALPHAS = [1e-2, 1e2]


def test_size_and_width_extrapolation_recover_power_laws():
    times = {}
    for w in WIDTHS[:3]:
        for a in ALPHAS:
            for s in (200.0, 400.0):
                times[w, a, s] = cost(w, a, s)
    times[32.0, 1e-2, 1000.0] = cost(32.0, 1e-2, 1000.0)      # timed at full size
    times[64.0, 1e2, 1000.0] = np.inf                           # ran past the budget
    times[128.0, 1e2, 400.0] = np.nan                           # (not timed at 400)
    del times[128.0, 1e2, 400.0]
    out = sfc.full_size_costs(times, WIDTHS, ALPHAS, [200.0, 400.0], 1000.0, budget=1e9)
    assert out[32.0, 1e-2][1] == "timed"
    # two sizes at the point: its own exponent (1.0 at alpha < 1, 1.5 above)
    assert out[64.0, 1e-2][0] == pytest.approx(cost(64.0, 1e-2, 1000.0), rel=1e-12)
    assert "size^1.00" in out[64.0, 1e-2][1]
    assert out[32.0, 1e2][0] == pytest.approx(cost(32.0, 1e2, 1000.0), rel=1e-12)
    # one size there: the exponent of the other widths at the same alpha (1.5, not 1.0)
    assert out[128.0, 1e2][0] == pytest.approx(cost(128.0, 1e2, 1000.0), rel=1e-12)
    assert "mean over widths" in out[128.0, 1e2][1]
    # nothing timed at h = 256: width^2 from the two widest with a figure
    for a in ALPHAS:
        assert out[256.0, a][0] == pytest.approx(cost(256.0, a, 1000.0), rel=1e-12)
        assert "width^2.00 from widths 64, 128" in out[256.0, a][1]
    # a full-size point over the budget costs at least the budget
    assert out[64.0, 1e2][0] == 1e9 and "floored" in out[64.0, 1e2][1]
    # ... and so does one that ran past it at a smaller size
    times[128.0, 1e-2, 400.0] = np.inf
    out = sfc.full_size_costs(times, WIDTHS, ALPHAS, [200.0, 400.0], 1000.0, budget=1e9)
    assert out[128.0, 1e-2][0] == pytest.approx(1e9 * 2.5, rel=1e-12)     # size^1 from 400
    assert "over 1e+09 s at size 400" in out[128.0, 1e-2][1]


def test_size_exponent_over_the_same_interval_for_a_steepening_cost():
    # a fixed part plus a cubic one: the slope over 200..400 underestimates the one above
    def c(w, s):
        return (w / 32.0) * (1.0 + 1e-8 * s ** 3)

    times = {(w, 1.0, s): c(w, s) for w in (32.0, 64.0) for s in (200.0, 400.0)}
    times[32.0, 1.0, 1000.0] = c(32.0, 1000.0)
    out = sfc.full_size_costs(times, [32.0, 64.0], [1.0], [200.0, 400.0], 1000.0)
    sec, how = out[64.0, 1.0]
    own = c(64.0, 400.0) * 2.5 ** sfc.loglog_slope(200.0, c(64.0, 200.0), 400.0, c(64.0, 400.0))
    assert sec == pytest.approx(c(64.0, 1000.0), rel=1e-12) and sec > 1.5 * own
    assert "over sizes 400..1000 at width 32" in how


def test_alpha_interpolation_and_grid_sum():
    a = np.array([1e-4, 1e1, 1e6])
    c = np.array([100.0, 10.0, 40.0])
    grid = np.logspace(-5, 7, 25)
    got = sfc.interpolate_alpha(a, c, grid)
    # piecewise power laws between the sampled values: exact at them, constant beyond
    assert got[grid < 1e-4] == pytest.approx(100.0)
    assert got[grid > 1e6] == pytest.approx(40.0)
    mid = grid[(grid > 1e-4) & (grid < 1e1)]
    assert np.allclose(got[(grid > 1e-4) & (grid < 1e1)], 100.0 * (mid / 1e-4) ** (-1 / 5),
                       rtol=1e-12)
    pts = [dict(h=w, x=v) for w in (32, 64) for v in grid for _ in range(5)]
    costs = {(32, aa): cc for aa, cc in zip(a, c)}
    per_width, longest, missing = sfc.grid_total(costs, pts, "h", "x")
    assert missing == [64] and longest == 100.0
    assert per_width[32][1] == 5 * len(grid)
    assert per_width[32][0] == pytest.approx(5 * got.sum(), rel=1e-12)


def test_spread_keeps_ends_and_middle():
    assert sfc.spread(21, 5) == [0, 5, 10, 15, 20]
    assert sfc.spread(21, 3) == [0, 10, 20]
    assert sfc.spread(2, 5) == [0, 1]
