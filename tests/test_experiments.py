"""The shipped experiments (``experiments/*/spec.toml``): each spec parses, one small point runs.

Keep each experiment's tests in functions named after it (``test_luo_*``, ``test_zhou_*``).
"""
from __future__ import annotations

import dataclasses
import importlib
import json
import pathlib
import sys

import numpy as np
import pytest

import linearnets as ln
from linearnets.sweep.plot import plot_sweep
from linearnets.sweep.spec import load_spec

EXP = pathlib.Path(__file__).resolve().parents[1] / "experiments"


def _module(folder, name):
    path = str(EXP / folder)
    if path not in sys.path:
        sys.path.insert(0, path)
    return importlib.import_module(name)


def _frame(axes, values):
    """A results frame as ``ln.sweep`` returns it: MultiIndex over the axes, fields, status."""
    import pandas as pd

    idx = pd.MultiIndex.from_tuples(list(values), names=axes)
    rows = list(values.values())
    df = pd.DataFrame(rows, index=idx)
    df["status"] = "done"
    return df


# -- experiment 2: Luo et al. (2021), two layers --------------------------------------------------

def test_luo_spec_parses():
    spec = load_spec(str(EXP / "luo_two_layer" / "spec.toml"))
    assert [a.name for a in spec.axes] == ["gamma", "gamma_prime", "m", "seed"]
    assert spec.shape == (5, 5, 4, 3)
    assert spec.fixed["loss_stop"] == 1e-4
    full = load_spec(str(EXP / "luo_two_layer" / "spec.toml"), full=True)
    assert full.shape == (9, 9, 7, 3)
    assert max(full.axes[2].values) == 32000
    assert spec.store != full.store


def test_luo_coordinates_and_paper_rule():
    luo = _module("luo_two_layer", "luo")
    for g, gp in [(0.2, -0.8), (1.0, 0.0), (1.4, 0.8), (1.8, -0.4)]:
        e_w, e_a = luo.exponents(g, gp)
        c = ln.phase_coordinates(0.0, [e_a, e_w])
        assert c["gamma"] == pytest.approx(g, abs=1e-12)
        assert c["gamma_prime"] == pytest.approx(gp, abs=1e-12)
        assert e_w - e_a == pytest.approx(gp, abs=1e-12)   # gamma' > 0: input weights larger
    assert luo.paper_regime(0.5, 0.0) == "linear"            # NTK scaling
    assert luo.paper_regime(1.4, 0.8) == "linear"            # gamma' > gamma - 1
    assert luo.paper_regime(1.8, -0.8) == "condensed"
    assert luo.paper_regime(1.0, -0.4) == "critical"         # gamma = 1, gamma' <= 0
    assert luo.paper_regime(1.4, 0.4) == "critical"          # gamma' = gamma - 1


def test_luo_point_runs_and_is_lazy_at_ntk_scaling():
    luo = _module("luo_two_layer", "luo")
    r50 = luo.point(0.5, 0.0, 50, 0)
    r400 = luo.point(0.5, 0.0, 400, 0)
    for r in (r50, r400):
        assert r["converged"] == 1.0
        assert r["loss_end"] <= 1e-4 * (1 + 1e-9)
        assert 0 < r["rd_w"] < 1 and np.isfinite(r["rd_a"])
    # linear regime: RD of the input layer falls with width (lazy estimate m^{gamma - 1} = m^{-1/2})
    assert r400["rd_w"] < 0.7 * r50["rd_w"]
    with pytest.raises(ValueError, match="m must be"):
        luo.point(0.5, 0.0, 1, 0)


def test_luo_table_recovers_slopes_and_plot_writes(tmp_path):
    luo = _module("luo_two_layer", "luo")
    spec = load_spec(str(EXP / "luo_two_layer" / "spec.toml"))
    rng = np.random.default_rng(0)
    truth = {(0.2, 0.0): -0.8, (1.8, -0.8): 0.8, (1.0, 0.0): 0.0}
    vals = {}
    for (g, gp), s in truth.items():
        for m in (100, 200, 400):
            for seed in range(3):
                vals[(g, gp, m, seed)] = dict(rd_w=float(m ** s * np.exp(0.01 * rng.standard_normal())))
    df = _frame(["gamma", "gamma_prime", "m", "seed"], vals)
    rows = {(r["gamma"], r["gamma_prime"]): r for r in luo.table(df)}
    for key, s in truth.items():
        assert rows[key]["slope"] == pytest.approx(s, abs=0.05)
    assert rows[(0.2, 0.0)]["measured"] == "linear" and rows[(1.8, -0.8)]["measured"] == "condensed"
    assert rows[(1.0, 0.0)]["paper"] == "critical"
    out = tmp_path / "luo.png"
    spec = dataclasses.replace(spec, store=str(tmp_path / "none.sqlite"))
    plot_sweep(spec, df, str(out))
    assert out.stat().st_size > 0
    # the figure's table and the version that drew it, beside the figure
    import pandas as pd

    csv = pd.read_csv(tmp_path / "luo.csv")
    assert len(csv) == len(rows) and list(csv.columns) == list(luo.table(df)[0])
    np.testing.assert_allclose(csv["slope"], [r["slope"] for r in luo.table(df)], rtol=1e-15)
    prov = json.loads((tmp_path / "luo.provenance.json").read_text())
    assert prov["written_by"]["package_version"] == ln.__version__
    assert prov["table"] == "luo.csv" and prov["points_done"] == len(vals) and prov["points_computed_by"] == []


def test_every_experiment_names_its_table():
    for toml in sorted(EXP.glob("*/spec*.toml")):
        spec = load_spec(str(toml))
        assert spec.plot and spec.table, toml


def _hypot(x, y):
    return {"r": float(np.hypot(x, y))}


def test_plot_writes_the_points_and_their_provenance_without_a_table(tmp_path):
    # a spec without plot or table: the completed points as the CSV, and the commits that
    # computed them, read from the store
    import pandas as pd

    from linearnets.sweep.engine import _git_sha, results_frame, run_sweep
    from linearnets.sweep.spec import build_spec

    spec = build_spec(_hypot, {"x": [3.0, 5.0], "y": [4.0]}, store=str(tmp_path / "s.sqlite"), name="hyp")
    spec.raw["_callable"] = _hypot
    run_sweep(spec, jobs=0, progress=False)
    out = tmp_path / "hyp.png"
    df = results_frame(spec)
    plot_sweep(spec, df, str(out))
    prov = json.loads((tmp_path / "hyp.provenance.json").read_text())
    assert prov["points_done"] == 2 == sum(p["points"] for p in prov["points_computed_by"])
    assert prov["points_computed_by"][0]["git_sha"] == _git_sha() == prov["written_by"]["git_sha"]
    csv = pd.read_csv(tmp_path / "hyp.csv")
    assert list(csv["x"]) == [3.0, 5.0] and list(csv["r"]) == [5.0, np.hypot(5.0, 4.0)]
    assert "status" not in csv.columns


# -- experiment 3: Zhou et al. (2022), three layers ----------------------------------------------

def test_zhou_spec_parses():
    spec = load_spec(str(EXP / "zhou_three_layer" / "spec.toml"))
    assert [a.name for a in spec.axes] == ["gamma2", "gamma3", "m", "seed"]
    assert 0.0 in spec.axes[0].values
    g3 = spec.axes[1].values
    assert min(g3) == pytest.approx(0.9) and max(g3) == pytest.approx(2.1)
    assert min(spec.axes[2].values) == 100 and max(spec.axes[2].values) == 800
    full = load_spec(str(EXP / "zhou_three_layer" / "spec.toml"), full=True)
    assert max(full.axes[2].values) == 10000


def test_zhou_slice_is_a_subset_of_the_full_grid():
    full = load_spec(str(EXP / "zhou_three_layer" / "spec.toml"), full=True)
    sl = load_spec(str(EXP / "zhou_three_layer" / "spec_slice.toml"))
    assert sl.shape == (1, 9, 3, 3) and sl.store != full.store
    for a, b in zip(sl.axes, full.axes):
        assert a.name == b.name and set(a.values) <= set(b.values)
    assert sl.axes[0].values == (0.0,)


def test_zhou_coordinates_and_lazy_rule():
    zhou = _module("zhou_three_layer", "zhou")
    for g2, g3 in [(0.0, 1.0), (-0.5, 2.1), (0.5, 0.9)]:
        c = ln.phase_coordinates(0.0, list(zhou.exponents(g2, g3)))
        assert c["gamma1"] == pytest.approx(0.0, abs=1e-12)
        assert c["gamma2"] == pytest.approx(g2, abs=1e-12)
        assert c["gamma3"] == pytest.approx(g3, abs=1e-12)
    # the paper's examples: NTK (0, 1) lazy in every layer, Xavier (0, 3/2) W1 critical
    assert zhou.lazy_slopes(0.0, 1.0) == pytest.approx((-0.5, -1.0, -0.5))
    assert zhou.expected_regimes(0.0, 1.0) == ("linear", "linear")
    assert zhou.expected_regimes(0.0, 1.5) == ("critical", "linear")
    assert zhou.expected_regimes(0.0, 2.1) == ("condensed", "condensed")
    assert zhou.expected_regimes(0.0, 1.8) == ("condensed", "?")
    assert [zhou.paper_slice_regime(g) for g in (0.9, 1.2, 1.5 + 1e-15, 2.1)] == \
        ["linear", "linear", "critical", "condensed"]


def test_zhou_point_runs():
    zhou = _module("zhou_three_layer", "zhou")
    r = zhou.point(0.0, 1.0, 30, 0)
    assert r["converged"] == 1.0
    assert r["loss_end"] <= 1e-4 * (1 + 1e-9)
    assert all(0 < r[k] < np.inf for k in ("rd1", "rd2", "rd3"))
    assert 1 <= r["n_orient1"] <= 30
    with pytest.raises(ValueError, match="m must be"):
        zhou.point(0.0, 1.0, 1, 0)


def test_zhou_table_and_plot(tmp_path):
    zhou = _module("zhou_three_layer", "zhou")
    spec = load_spec(str(EXP / "zhou_three_layer" / "spec.toml"))
    vals = {}
    for g3 in (1.0, 1.8):
        for m in (10, 20, 40):
            for seed in range(2):
                vals[(0.0, g3, m, seed)] = dict(rd1=float(m ** (g3 - 1.5)), rd2=float(m ** (g3 - 2.0)) * (1 + 0.01 * seed),
                                                n_orient1=3.0)
    df = _frame(["gamma2", "gamma3", "m", "seed"], vals)
    rows = {r["gamma3"]: r for r in zhou.table(df)}
    assert rows[1.0]["rd1_slope"] == pytest.approx(-0.5, abs=1e-9)
    assert rows[1.8]["rd1_label"] == "condensed" and rows[1.8]["rd2_label"] == "linear"
    out = tmp_path / "zhou.png"
    zhou.plot(df, spec, str(out))            # re-runs one small condensed point for the heatmap
    assert out.stat().st_size > 0


# -- experiment 1: Geiger et al. (2019), feature vs lazy ---------------------------------------

def test_geiger_specs_parse():
    for name, n in (("spec.toml", 108), ("spec_depth.toml", 18)):
        spec = load_spec(str(EXP / "geiger_feature_lazy" / name))
        assert spec.function == "geiger:point"
        assert int(np.prod([len(a.values) for a in spec.axes])) == n


def test_geiger_point_feature_and_lazy_ends():
    """One point at each end (h = 16, 40 train / 40 test digits): F is the centred output
    gradient_flow records, every margin is >= 1 at t_stop, the kernel moves by far more than
    1 in the feature regime and little in the lazy one, and t1 (drift = 1) is of the order of
    alpha sqrt(h) (Geiger et al.: t1 ~ alpha sqrt(h))."""
    import math

    from linearnets.parameterisations import geiger_parameterisation
    geiger = _module("geiger_feature_lazy", "geiger")
    small = dict(n_train=40, n_test=40, n_kernel=16)
    feat = geiger.point(1e-2, 16, 0, **small)
    lazy = geiger.point(1e2, 16, 0, **small)
    assert feat["drift"] > 10.0 and lazy["drift"] < 0.1
    assert 0.1 < feat["t1"] / 1e-2 < 10.0 and feat["t1"] < feat["t_stop"]
    assert math.isnan(lazy["t1"])
    for r in (feat, lazy):
        assert r["F_test"].shape == (40,) and 0.0 <= r["test_err"] < 0.5
    # p.forward (F_test's) is the model's F = alpha (f - f_0): on the training points the recorded F
    Xtr, ytr, _, _ = geiger.digits_parity(40, 40)
    alpha = 1e-2 / 4.0
    p = geiger_parameterisation((10, 16, 16, 16, 1), alpha, seed=0)
    tr = ln.gradient_flow(p.weights, Xtr, ytr, [1e-3, 1e3], rtol=1e-6, atol=1e-9, stop="margin",
                          record=("outputs",), **p.flow_kwargs())
    F = p.forward(Xtr, weights=list(tr.weights))[:, 0]
    np.testing.assert_allclose(F, tr.outputs[-1, :, 0], rtol=1e-10, atol=1e-12)
    assert np.min(ytr * F) >= 1.0 - 1e-6


def test_geiger_table_recovers_known_exponents(tmp_path):
    """table() on synthetic points with drift = (alpha sqrt h)^-1 (lazy) and ^-1.5 (feature),
    t1 = 2 alpha sqrt(h), Var F = 0.5/h exactly: the fitted slopes are those exponents."""
    geiger = _module("geiger_feature_lazy", "geiger")
    vals = {}
    for a in np.logspace(-3, 3, 7):
        for h in (16, 64):
            for seed in range(3):
                drift = a ** -1.5 if a <= 0.1 else (0.5 / a if a >= 100 else 1.0)
                F = np.full(5, [1.0, -1.0, 0.0][seed] * np.sqrt(0.5 / h))
                vals[(float(a), h, seed)] = dict(drift=drift, t1=2 * a if a <= 0.1 else np.nan,
                                                 t_stop=3 * a, test_err=0.1, F_test=F)
    df = _frame(["alpha_sqrt_h", "h", "seed"], vals)
    per_width, overall = geiger.table(df)
    for r in per_width:
        assert r["lazy_slope"] == pytest.approx(-1.0, abs=1e-9)
        assert r["a_feature"] == pytest.approx(1.5, abs=1e-9)
        assert r["t1_slope"] == pytest.approx(1.0, abs=1e-9)
    assert overall["var_slope_lazy"] == pytest.approx(-1.0, abs=1e-9)
    assert all(m == pytest.approx(-1.0, abs=1e-9) for m, _ in overall["var_slopes"].values())
    assert overall["collapse_spread_decades"] == pytest.approx(0.0, abs=1e-12)
    assert overall["spread_vs_alpha_decades"] > 0.5     # against alpha the widths separate
    rows = geiger.table_rows(df)     # the CSV's rows: the widths, then the fits over all of them
    assert [r["h"] for r in rows] == [16, 64, "all"]
    assert rows[-1]["a_feature"] == pytest.approx(1.5, abs=1e-9)
    assert rows[-1]["var_slope_lazy"] == overall["var_slope_lazy"] and "var_slopes" not in rows[-1]
    spec = load_spec(str(EXP / "geiger_feature_lazy" / "spec.toml"))
    out = tmp_path / "geiger.png"
    geiger.plot(df, spec, str(out))
    assert out.stat().st_size > 0


def test_provenance_dirty_flag_counts_code_not_figures(tmp_path):
    # a figure or table rewritten by `sweep plot` leaves the tree "clean"; a changed module does not
    import subprocess

    from linearnets.sweep import engine

    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    if subprocess.run(git + ["init", "-q"], capture_output=True).returncode != 0:
        pytest.skip("no git")
    (tmp_path / "point.py").write_text("x = 1\n")
    (tmp_path / "fig.png").write_bytes(b"old")
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-q", "-m", "c"], check=True)
    (tmp_path / "fig.png").write_bytes(b"new")
    engine._GIT.clear()
    assert engine._git_dirty(str(tmp_path), ("*.py", "*.toml")) is False
    assert engine._git_dirty(str(tmp_path)) is True
    (tmp_path / "point.py").write_text("x = 2\n")
    engine._GIT.clear()
    assert engine._git_dirty(str(tmp_path), ("*.py", "*.toml")) is True
    engine._GIT.clear()
    assert engine._git_dirty() in (True, False, None)         # the package's own sources


# -- experiment 5: the catapult (Lewkowycz et al. 2020) ------------------------------------------

def test_catapult_spec_and_a_small_point(tmp_path):
    spec = load_spec(str(EXP / "catapult" / "spec.toml"))
    assert [a.name for a in spec.axes] == ["activation", "eta", "m", "seed"]
    cat = _module("catapult", "catapult")
    rows = {}
    for act in ("linear", "relu"):
        for eta in (1.0, 3.0, 5.0):
            rows[(act, eta, 512, 0)] = cat.point(act, eta, 512, 0, n_steps=600)
    lin = {e: r for (a, e, _, _), r in rows.items() if a == "linear"}
    # the exact map at the run's own width: GD and catapult_map agree to rounding
    assert abs(lin[1.0]["eta_end"] - lin[1.0]["eta_map"]) < 1e-10
    assert abs(lin[1.0]["eta_end"] - 1.0) < 0.05                     # lazy
    assert lin[3.0]["eta_end"] < 2.0 and lin[3.0]["loss_end"] < 1e-10  # catapult: converged below 2/lr
    assert lin[5.0]["diverged"] == 1.0
    df = _frame(("activation", "eta", "m", "seed"), rows)
    out = tmp_path / "catapult.png"
    cat.plot(df, spec, str(out))
    assert out.stat().st_size > 0
    table = {(r["activation"], r["m"]): r for r in cat.table(df)}
    assert table[("linear", 512)]["divergent_min"] == 5.0


# -- experiment 6: the edge of stability (Cohen et al. 2021) -------------------------------------

def test_edge_of_stability_spec_and_a_small_point(tmp_path):
    spec = load_spec(str(EXP / "edge_of_stability" / "spec.toml"))
    assert [a.name for a in spec.axes] == ["lr", "seed"]
    eos = _module("edge_of_stability", "eos")
    r = eos.point(0.4, 0, P=32, D=4, width=16, n_steps=300, every=10, init_scale=0.5)
    assert r["success"] == 1.0 and r["S0_ratio"] < 1.0 and r["steps"].shape == r["sharpness"].shape == (31,)
    assert r["loss_end"] < r["loss0"]
    df = _frame(("lr", "seed"), {(0.4, 0): r})
    out = tmp_path / "eos.png"
    eos.plot(df, spec, str(out))
    assert out.stat().st_size > 0
    assert eos.table(df)[0]["two_over_lr"] == 5.0
