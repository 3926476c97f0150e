"""The comparison routines pass on small settings and fail when the theory is wrong."""
import dataclasses

import numpy as np
import pytest

import linearnets as ln
from linearnets import compare


# --- result object -------------------------------------------------------------
def _dummy(**kw):
    base = dict(name="x", title="t", quantity="q", theory=1.0, simulation=1.0, error=0.0,
                tolerance=1.0, passed=True, arrays={"a": np.arange(3.0)})
    base.update(kw)
    return compare.Comparison(**base)


def test_comparison_is_frozen_and_read_only():
    c = _dummy()
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.error = 5.0
    with pytest.raises(TypeError):
        c.arrays["b"] = 1
    with pytest.raises(ValueError):
        c.arrays["a"][0] = 3.0
    assert c.row()[-1] == "PASS" and _dummy(passed=False).row()[-1] == "FAIL"


def test_registry_and_unknown_name():
    assert {"learning_curve", "phase_one", "initial_moments", "mode_strengths", "half_time_scaling",
            "final_ntk", "silent_alignment", "silent_alignment_L3", "kernel_gap", "kernel_path"} <= set(compare.CHECKS)
    with pytest.raises(ValueError, match="names: unknown check"):
        compare.run_checks(["no_such_check"])
    with pytest.raises(ValueError, match="names must name at least one check"):
        compare.run_checks([])


def test_register_names_rows_after_their_check(monkeypatch):
    """A registered runner's row carries the registry name; several rows get NAME.row; an exception is a row."""
    monkeypatch.setattr(compare.registry, "CHECKS", dict(compare.CHECKS))
    reg = compare.registry
    reg.register(reg.Check("dummy_one", "one row", lambda seed=0, backend="auto": _dummy(name="other")),
                 reg.Check("dummy_two", "two rows",
                           lambda seed=0, backend="auto": [_dummy(name="a"), _dummy(name="b", passed=False)]),
                 reg.Check("dummy_err", "raises", lambda seed=0, backend="auto": 1 / 0))
    rows = reg.run_checks(["dummy_one", "dummy_two", "dummy_err"])
    assert [r.name for r in rows] == ["dummy_one", "dummy_two.a", "dummy_two.b", "dummy_err"]
    assert [r.status for r in rows] == ["PASS", "PASS", "FAIL", "ERROR"]
    assert rows[-1].exception.startswith("ZeroDivisionError") and not rows[-1].passed
    with pytest.raises(ValueError, match="no figure"):
        rows[-1].plot()
    with pytest.raises(ValueError, match="no figure"):
        rows[0].plot()                       # a check registered without a figure
    with pytest.raises(ValueError, match="already registered"):
        reg.register(reg.Check("dummy_one", "again", lambda **kw: None))
    with pytest.raises(ValueError, match="identifier"):
        reg.Check("bad name", "x", lambda **kw: None)
    with pytest.raises(ValueError, match="preset"):
        reg.Check("dummy_three", "x", lambda **kw: None, presets={"huge": {}})


def test_presets_fall_back_and_reach_the_runner(monkeypatch):
    """small is the default; full falls back to small, paper to full; seed always and backend where taken."""
    monkeypatch.setattr(compare.registry, "CHECKS", dict(compare.CHECKS))
    reg = compare.registry
    calls = []

    def run(seed=0, backend="auto", size=1):
        calls.append((seed, backend, size))
        return _dummy()

    def run_no_backend(seed=0, size=1):
        calls.append((seed, size))
        return _dummy()

    reg.register(reg.Check("dummy_sized", "sizes", run, presets=dict(small=dict(size=2), full=dict(size=3))),
                 reg.Check("dummy_plain", "no backend", run_no_backend))
    for preset in ("small", "full", "paper"):
        reg.run_checks(["dummy_sized"], preset=preset, seed=4, backend="numpy")
    reg.run_checks(["dummy_sized"], full=True)
    reg.run_checks(["dummy_plain"], preset="paper", seed=2)
    assert calls == [(4, "numpy", 2), (4, "numpy", 3), (4, "numpy", 3), (0, "auto", 3), (2, 1)]
    with pytest.raises(ValueError, match="preset"):
        reg.run_checks(["dummy_plain"], preset="huge")
    with pytest.raises(ValueError, match="contradicts"):
        reg.run_checks(["dummy_plain"], full=True, preset="small")


def test_every_check_has_its_figure_and_presets():
    """Every registered check draws its rows (its own plot, registered with it) and knows every preset."""
    for c in compare.CHECKS.values():
        assert callable(c.plot), c.name
        for p in compare.PRESETS:
            assert isinstance(c.arguments(p), dict)
    # the paper preset: Fig. 3's sigma ranges per depth (a mapping), the sizes of the figures
    half = compare.CHECKS["half_time_scaling"].arguments("paper")
    assert set(half["sigmas"]) == {2, 3, 4, 5} and half["D"] == 30 and half["N"] == 50
    assert compare.CHECKS["silent_alignment"].arguments("paper")["sigma"] == 1e-3


def test_every_compare_routine_is_exported():
    names = [n for n in dir(compare) if n.startswith("compare_")]
    assert len(names) == 30
    for n in names:
        assert getattr(ln, n) is getattr(compare, n) and n in compare.__all__


def test_fit_power_offset_recovers_exponent():
    sig = np.geomspace(0.05, 0.3, 6)
    p, (A, B) = compare.modes._fit_power_offset(sig, 2.0 * sig ** -2.0 + 3.0)
    assert abs(p + 2.0) < 1e-5 and abs(A - 2.0) < 1e-3 and abs(B - 3.0) < 1e-2


# --- 1. learning curves ----------------------------------------------------------
def test_learning_curves_pass_and_scale_as_sigma_squared():
    r = ln.compare_learning_curves(sigmas=(0.03, 0.01, 0.003), D=10, N=10, P=20)
    assert r.passed, r.notes
    assert abs(r.simulation - 2.0) < 0.25
    fig = r.plot()
    assert len(fig.axes) == 2


def test_learning_curves_fail_with_unmatched_c0(monkeypatch):
    # the Saxe sigmoid with c0 = q0 (not the matched (q0 + r0)/2) is off by ln 2/(2s) in time
    true = ln.loss_curve
    monkeypatch.setattr(compare.modes, "loss_curve", lambda t, s, c0, depth=2, eta=1.0: true(t, s, 2 * np.asarray(c0),
                                                                                     depth, eta))
    r = ln.compare_learning_curves(sigmas=(0.01, 0.003), D=10, N=10, P=20)
    assert not r.passed


# --- 2. phase I --------------------------------------------------------------------
def test_phase_one_passes():
    r = ln.compare_phase_one(D=25, N=10, P=50, sigma=0.01)
    assert r.passed, r.notes
    assert r.arrays["window"].sum() > 10  # the phase-I window is resolved


def test_phase_one_fails_with_wrong_rate(monkeypatch):
    true = ln.qr_full_path
    # the paper's text drops factors of 2 in places: eta -> eta/2 must be caught
    monkeypatch.setattr(compare.alignment, "qr_full_path", lambda t, s, q0, r0=0.0, eta=1.0: true(t, s, q0, r0, eta / 2))
    assert not ln.compare_phase_one(sigma=0.01).passed


def test_initial_moments_pass_and_catch_large_D_approximation(monkeypatch):
    r = ln.compare_initial_moments(width=10, input_dim=25, sigma=0.1, n_samples=2000)
    assert r.passed and r.error < r.tolerance
    # dropping the N/D term of E[q0] = sigma^2 (1 + N/D)/2 must fail
    monkeypatch.setattr(compare.alignment, "qr_initial_moments", lambda N, D, s: (0.5 * s ** 2, s ** 2 / np.sqrt(D)))
    assert not ln.compare_initial_moments(width=10, input_dim=25, sigma=0.1, n_samples=2000).passed


# --- 3. mode strengths ---------------------------------------------------------------
def test_mode_strengths_pass_all_depths():
    r = ln.compare_mode_strengths(depths=(1, 2, 3, 4), spectrum=(3.0, 1.5, 0.5), D=5, N=6, P=10)
    assert r.passed, r.notes
    # from small init (L >= 2) the modes are learned in order of strength
    s = r.arrays["spectrum"]
    for _L, t, c in zip(r.arrays["depths"][1:], r.arrays["t"][1:], r.arrays["c_sim"][1:]):
        t_half = [ln.regimes.crossing_time(t, c[:, k], s[k] / 2) for k in range(3)]
        assert t_half[0] < t_half[1] < t_half[2]


def test_mode_strengths_fail_without_depth_factor(monkeypatch):
    # the paper's dc/dt = c^{2-2/L}(s - c) (missing factor L) must be caught
    true = ln.mode_strength
    monkeypatch.setattr(compare.modes, "mode_strength",
                        lambda t, s, c0, depth=2, eta=1.0: true(t, s, c0, depth, eta / depth))
    assert not ln.compare_mode_strengths(depths=(2, 3), D=5, N=6, P=10).passed


# --- 4. half-time scaling -----------------------------------------------------------
def test_half_time_scaling_passes():
    r = ln.compare_half_time_scaling(depths=(2, 3, 4))
    assert r.passed, r.notes
    fitted = r.arrays["fitted"]
    assert abs(fitted[0] + 1.0) < 0.1 and abs(fitted[1] + 1.0) < 0.2 and abs(fitted[2] + 2.0) < 0.3


# --- 5. final NTK ----------------------------------------------------------------------
def test_final_ntk_passes():
    r = ln.compare_final_ntk(depths=(2, 3, 4), sigmas=(0.1, 0.05))
    assert r.passed, r.notes
    assert np.all(np.abs(r.arrays["slopes"] - 2.0) < 0.5)


@pytest.mark.parametrize("which", ["ntk", "alignment"])
def test_final_ntk_fails_with_wrong_theory(monkeypatch, which):
    if which == "ntk":  # depth factor L instead of L - 1 on the rank-one spike
        true = ln.final_ntk
        monkeypatch.setattr(compare.ntk, "final_ntk", lambda X1, X2, b, s, L: true(X1, X2, b, s, L + 1)
                            * s ** (2 / (L + 1) - 2 / L))
    else:
        monkeypatch.setattr(compare.ntk, "final_alignment", lambda L, n: L / np.sqrt(L ** 2 + n))
    assert not ln.compare_final_ntk(depths=(2, 3), sigmas=(0.1, 0.05)).passed


# --- 6. silent alignment and the kernel-regression gap ----------------------------------
def test_silent_alignment_passes_and_alignment_comes_first():
    r = ln.compare_silent_alignment(D=10, N=10, P=20, sigma=0.01)
    assert r.passed, r.notes
    assert float(r.arrays["t_align"]) < float(r.arrays["t_loss"])
    r3 = ln.compare_silent_alignment(depth=3, D=10, N=10, P=20, sigma=0.1)
    assert r3.passed


def test_silent_alignment_fails_with_a_wrong_phase_one_rate(monkeypatch):
    # the alignment path through qr_full_path at half the rate puts t_A twice as late
    true = ln.qr_full_path
    monkeypatch.setattr(compare.alignment, "qr_full_path", lambda t, s, q0, r0=0.0, eta=1.0: true(t, s, q0, r0, eta / 2))
    assert not ln.compare_silent_alignment(D=10, N=10, P=20, sigma=0.01).passed


def test_kernel_gap_passes_and_does_not_grow_with_anisotropy():
    r = ln.compare_kernel_gap(gammas=(0.0, 1.0), Ps=(10, 5), D=10, N=10)
    assert r.passed, r.notes
    gap, P = r.arrays["gap_final"], r.arrays["P"]
    under = gap[P < 10]
    assert under.max() < 3 * under.min()  # O(sigma) whatever gamma
    assert np.all(r.arrays["gap_initial"][P < 10] > 10 * under)  # the initial NTK is a different predictor


def test_kernel_gap_fails_with_a_wrong_predictor(monkeypatch):
    true = ln.kernel_regression
    monkeypatch.setattr(compare.ntk, "kernel_regression",
                        lambda K, Kx, y, ridge=0.0: true(K, Kx, y, ridge=0.1 * np.trace(K) / len(K)))
    assert not ln.compare_kernel_gap(gammas=(0.0,), Ps=(10, 5), D=10, N=10).passed


# --- 7. appendix G ------------------------------------------------------------------------
def test_kernel_path_passes():
    r = ln.compare_kernel_path(D=12, N=12, P=6)
    assert r.passed, r.notes
    assert r.arrays["ideal_gaps"].max() < 1e-9
    assert r.arrays["gaps"][-1] < 0.05


def test_plots_for_every_kind_are_agg_safe():
    from matplotlib.figure import Figure
    r = ln.compare_kernel_path(D=12, N=12, P=6)
    assert isinstance(r.plot(), Figure)


# --- the edges of the arguments: each routine rejects what its theory does not cover, up front ---
@pytest.mark.parametrize("call", [
    lambda: ln.compare_half_time_scaling(depths=(20,)),      # hung for minutes
    lambda: ln.compare_final_ntk(depths=(20,)),               # FlowErrors at t = 1e16-1e34
    lambda: ln.compare_kernel_gap(depth=20),
    lambda: ln.compare_silent_alignment(depth=20),
    lambda: ln.compare_intermediate_kernels(depth=20),
    lambda: ln.compare_transfer(depths=(2, 20)),
    lambda: ln.compare_mode_strengths(depths=(20,)),
    lambda: ln.compare_path_ntk(random_depths=(20,)),
    lambda: ln.compare_laziness_ratio(depths=(20,)),
], ids=["half_time", "final_ntk", "kernel_gap", "silent", "intermediate", "transfer", "modes", "path_ntk",
        "laziness"])
def test_depth_beyond_the_measured_range_is_rejected(call):
    with pytest.raises(ValueError, match=r"depth.*MAX_DEPTH = 10"):
        call()


@pytest.mark.parametrize("call, arg", [
    (lambda: ln.compare_kernel_gap(depth=10), "depth=10 with sigma=0.01"),
    (lambda: ln.compare_intermediate_kernels(depth=10), "depth=10 with sigmas"),
    (lambda: ln.compare_path_ntk(random_depths=(10,)), "random_depths=(10,)"),
    (lambda: ln.compare_half_time_scaling(depths=(6,), sigmas=(1e-3, 2e-3)), "depths=(6,)"),
])
def test_a_plateau_beyond_the_time_axis_is_rejected(call, arg):
    """sigma^(2-L) plateaus past MAX_PLATEAU / (eta s): the step would underflow the resolution of t."""
    with pytest.raises(ValueError, match="MAX_PLATEAU") as err:
        call()
    assert arg in str(err.value)


@pytest.mark.parametrize("call, name", [
    (lambda: ln.compare_phase_one(sigma=10.0), "sigma"),              # was 'c0 must be < s/2' from half_time
    (lambda: ln.compare_kernel_path(sigma=10.0), "sigma"),
    (lambda: ln.compare_kernel_gap(sigma=10.0), "sigma"),
    (lambda: ln.compare_silent_alignment(sigma=10.0), "sigma"),       # was error = NaN
    (lambda: ln.compare_silent_alignment(depth=3, sigma=0.3), "sigma"),
    (lambda: ln.compare_learning_curves(sigmas=(0.1, 10.0)), "sigmas"),
    (lambda: ln.compare_final_ntk(sigmas=(10.0,)), "sigmas"),
    (lambda: ln.compare_half_time_scaling(sigmas=(10.0,)), "sigmas"),
    (lambda: ln.compare_finite_sigma_ntk(sigmas=(10.0, 5.0)), "sigmas"),
    (lambda: ln.compare_intermediate_kernels(sigmas=(10.0,)), "sigmas"),
    (lambda: ln.compare_path_ntk(sigmas=(10.0,)), "sigmas"),
    (lambda: ln.compare_transfer(sigma=10.0), "sigma"),
    (lambda: ln.compare_unwhitened_phase1(sigmas=(10.0,)), "sigmas"),
    (lambda: ln.compare_balanced_ntk_drift(sigma=10.0), "sigma"),     # ran for minutes
    (lambda: ln.compare_laziness_ratio(sigmas=(10.0, 5.0)), "sigmas"),  # passed against a tolerance of 1000
    (lambda: ln.compare_relu_kernel_gap(sigmas=(10.0, 5.0)), "sigmas"),
])
def test_a_large_initialisation_is_rejected_naming_sigma(call, name):
    with pytest.raises(ValueError) as err:
        call()
    msg = str(err.value)
    assert msg.startswith(name) or f" {name}" in msg or f"{name}=" in msg, msg


@pytest.mark.parametrize("call, name", [
    (lambda: ln.compare_final_ntk(depths=(1,)), "depths"),             # was a division by zero in a log
    (lambda: ln.compare_half_time_scaling(depths=(1,)), "depths"),     # fitted -1 against 1
    (lambda: ln.compare_silent_alignment(depth=1), "depth"),
    (lambda: ln.compare_laziness_ratio(depths=(1,)), "depths"),
    (lambda: ln.compare_intermediate_kernels(depth=1), "depth"),
])
def test_depth_one_is_rejected_where_nothing_moves(call, name):
    with pytest.raises(ValueError, match=rf"^{name} must be"):
        call()


@pytest.mark.parametrize("kw, name", [(dict(names=5), "names"), (dict(names=["initial_moments", 5]), "names"),
                                      (dict(backend="bogus"), "backend"), (dict(seed=-1), "seed"),
                                      (dict(seed=1.5), "seed"), (dict(preset="huge"), "preset")])
def test_run_checks_rejects_bad_arguments_before_running(kw, name, monkeypatch):
    ran = []
    monkeypatch.setattr(compare.registry, "CHECKS", dict(compare.CHECKS))
    compare.registry.register(compare.Check("dummy_probe", "records a run", lambda **k: ran.append(k) or _dummy()))
    kw = dict(dict(names=["dummy_probe"]), **kw)
    with pytest.raises(ValueError, match=rf"^{name} must be"):
        compare.run_checks(**kw)
    assert not ran
    # one name as a string is that check
    rows = compare.run_checks("dummy_probe", seed=3, backend="numpy")
    assert [r.name for r in rows] == ["dummy_probe"] and ran == [dict(seed=3, backend="numpy")]
