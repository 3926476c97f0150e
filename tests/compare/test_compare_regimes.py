"""The lazy / rich verify rows pass on their defaults and fail when the theory is wrong."""
import numpy as np
import pytest

import linearnets as ln
from linearnets import compare
from linearnets.compare import regimes as cr

ROWS = ("lambda_balanced", "balanced_ntk_drift", "lazy_limit", "lazy_limit_relu", "single_neuron",
        "diagonal_bias", "laziness_ratio", "laziness_ratio_relu", "output_variance", "relu_kernel_gap")


def test_registered_one_row_each():
    for name in ROWS:
        assert name in compare.CHECKS
    rows = compare.run_checks(["lazy_limit_relu", "balanced_ntk_drift"])
    assert [r.name for r in rows] == ["lazy_limit_relu", "balanced_ntk_drift"] and all(r.passed for r in rows)


@pytest.mark.parametrize("fn", [cr.compare_lambda_balanced, cr.compare_balanced_ntk_drift, cr.compare_lazy_limit,
                                cr.compare_single_neuron, cr.compare_diagonal_bias, cr.compare_laziness_ratio],
                         ids=lambda f: f.__name__)
def test_passes_and_plots(fn):
    r = fn()
    assert r.passed, r.notes
    assert r.error <= r.tolerance
    assert len(r.plot().axes) >= 1


def test_lazy_limit_relu_passes():
    r = cr.compare_lazy_limit(activation="relu")
    assert r.passed, r.notes
    assert r.name == "lazy_limit_relu"


@pytest.mark.parametrize("act", ["linear", "relu"])
def test_jacobian_gives_the_empirical_ntk_and_relu_laziness(act):
    X = np.random.default_rng(0).standard_normal((5, 4))
    w = ln.init_network((4, 6, 5, 1), 0.8, seed=1)
    J = cr._jacobian(w, X, act)
    np.testing.assert_allclose(J @ J.T, ln.empirical_ntk(w, X, X, activation=act), rtol=1e-12, atol=1e-14)
    if act == "relu":
        r = cr.compare_laziness_ratio(activation="relu")
        assert r.passed and r.name == "laziness_ratio_relu", r.notes


def test_lambda_balanced_fails_with_wrong_eta(monkeypatch):
    true = ln.lambda_balanced_flow
    monkeypatch.setattr(cr, "lambda_balanced_flow", lambda t, W1, W2, Syx, eta=1.0: true(t, W1, W2, Syx, eta=1.1 * eta))
    assert not cr.compare_lambda_balanced().passed


def test_single_neuron_fails_with_swapped_rates(monkeypatch):
    true = ln.single_neuron_nu
    monkeypatch.setattr(cr, "single_neuron_nu",
                        lambda t, a0, w0, beta, eta_a=1.0, eta_w=1.0: true(t, a0, w0, beta, eta_a=eta_w, eta_w=eta_a))
    assert not cr.compare_single_neuron().passed


def test_diagonal_fails_with_the_l2_solution(monkeypatch):
    monkeypatch.setattr(cr, "diagonal_implicit_bias", lambda X, y, alpha: np.linalg.pinv(X) @ y)
    assert not cr.compare_diagonal_bias(alphas=(1.0, 0.1)).passed


def test_lazy_limit_fails_with_the_wrong_loss_normalisation(monkeypatch):
    true = ln.lazy_prediction
    monkeypatch.setattr(cr, "lazy_prediction", lambda t, K, Kq, Y, alpha=1.0: true(t, K, Kq, Y, alpha=1.0))
    assert not cr.compare_lazy_limit().passed


def test_relu_kernel_gap_final_ntk_machine_at_small_sigma():
    pytest.importorskip("sklearn")
    r = cr.compare_relu_kernel_gap(n_draws=3, seed=1)
    gap, gap0 = r.arrays["gap"], r.arrays["gap_init"]
    assert gap.shape == (3, 1, 1) and np.all(np.isfinite(gap))
    # trained to the stop rule (interpolation), so the gap is not a residual training error
    assert np.all(r.arrays["loss_ratio"] <= 1.01 * cr.RELU_GAP_STOP)
    assert r.passed and r.simulation == pytest.approx(np.median(gap[:, 0, 0])), r.notes
    assert r.tolerance == cr.RELU_GAP_TOL
    # the kernel machine of the initial NTK is far on every draw: the network is not lazy
    assert np.all(gap0 > 4 * cr.RELU_GAP_TOL) and np.all(gap < gap0 / 10)


def test_relu_kernel_gap_fails_for_the_initial_ntk_and_a_large_sigma():
    # the failed forms of the claim exceed the tolerance: the kernel machine of the NTK at
    # t = 0, and the network from the standard initialisation sigma = 1
    pytest.importorskip("sklearn")
    init = cr.compare_relu_kernel_gap(n_draws=3, seed=1, kernel="init")
    assert not init.passed and init.simulation > 2 * cr.RELU_GAP_TOL, init.notes
    large = cr.compare_relu_kernel_gap(n_draws=3, seed=1, sigmas=(1.0,))
    assert not large.passed and large.simulation > 2 * cr.RELU_GAP_TOL, large.notes


def test_relu_kernel_gap_fails_against_a_ridge_kernel_machine(monkeypatch):
    # a kernel machine regularised at the mean eigenvalue does not interpolate: its gap to
    # the network is O(1) whatever sigma, and the row must fail (at a tenth of the mean
    # eigenvalue it is ~0.04, inside the tolerance: the docstring says so)
    pytest.importorskip("sklearn")
    true = ln.kernel_regression
    monkeypatch.setattr(cr, "kernel_regression",
                        lambda K, Kx, y, ridge=0.0: true(K, Kx, y, ridge=np.trace(K) / len(K)))
    r = cr.compare_relu_kernel_gap(n_draws=1, seed=1)
    assert not r.passed and r.simulation > 0.1


def test_relu_kernel_gap_fair_test_set():
    # one map for every image: training and test images have the same scale at every gamma
    pytest.importorskip("sklearn")
    X, y = cr._digits_pool((0, 1))
    idx = np.random.default_rng(0).permutation(len(X))
    for g in (0.0, 0.5, 1.0):
        M = cr._partial_whitening(X, g)
        lam = np.linalg.eigvalsh((X @ M).T @ (X @ M) / len(X))
        assert lam[-1] == pytest.approx(1.0)
        if g == 0.0:       # white on the pool's span
            assert np.allclose(lam[lam > 1e-8], 1.0)
        n_tr = np.linalg.norm(X[idx[:30]] @ M, axis=1).mean()
        n_te = np.linalg.norm(X[idx[30:130]] @ M, axis=1).mean()
        assert 0.8 < n_te / n_tr < 1.25


def test_relu_kernel_gap_skips_without_scikit_learn(monkeypatch):
    import sys
    from linearnets import cli
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    rows = compare.run_checks(["relu_kernel_gap"])
    assert len(rows) == 1 and rows[0].status == "SKIP" and rows[0].passed
    assert "scikit-learn" in rows[0].notes and "SKIP" in cli.format_table(rows)
    assert len(rows[0].plot().axes) == 1


@pytest.mark.slow
def test_relu_kernel_gap_row_passes():
    pytest.importorskip("sklearn")
    r = compare.run_checks(["relu_kernel_gap"])[0]
    assert r.name == "relu_kernel_gap" and r.passed, r.notes
    assert r.arrays["gap"].shape == (7, 1, 1) and len(r.plot().axes) == 2


@pytest.mark.slow
def test_relu_kernel_gap_reports_the_anisotropy():
    pytest.importorskip("sklearn")
    r = cr.compare_relu_kernel_gap(gammas=(0.5, 0.75), n_draws=3, seed=1)
    assert r.arrays["gap"].shape == (3, 1, 2) and "anisotropy (reported, not tested)" in r.notes
    assert len(r.plot().axes) == 2


def test_relu_kernel_gap_bad_input(monkeypatch):
    pytest.importorskip("sklearn")
    with pytest.raises(ValueError, match="classes"):
        cr.compare_relu_kernel_gap(classes=(3, 3))
    with pytest.raises(ValueError, match="P"):
        cr.compare_relu_kernel_gap(P=400, Q=100)
    with pytest.raises(ValueError, match="P"):
        cr.compare_relu_kernel_gap(P=50, Q=320)
    with pytest.raises(ValueError, match="gammas"):
        cr.compare_relu_kernel_gap(gammas=(-0.5,))
    with pytest.raises(ValueError, match="gamma"):
        cr.compare_relu_kernel_gap(gamma=0.0)
    with pytest.raises(ValueError, match="sigmas"):
        cr.compare_relu_kernel_gap(sigmas=(1e-3, -1e-2))
    with pytest.raises(ValueError, match="kernel"):
        cr.compare_relu_kernel_gap(kernel="lazy")
    with pytest.raises(ValueError, match="n_draws"):
        cr.compare_relu_kernel_gap(n_draws=0)
    import sys
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    with pytest.raises(ImportError, match="scikit-learn"):
        cr.compare_relu_kernel_gap(n_draws=1)


def test_output_variance_row_passes_and_fails_uncentered():
    r = compare.run_checks(["output_variance"])[0]
    assert r.name == "output_variance" and r.passed, r.notes
    assert r.error <= r.tolerance < 0.5
    a = r.arrays
    assert np.all(a["loss_ratio"] < 1e-2)           # trained, not at initialisation
    assert len(r.plot().axes) == 1
    # uncentered, the trained F keeps alpha f0's width-independent fluctuations
    bad = cr.compare_output_variance(widths=(16, 256), n_seeds=24, centered=False)
    assert not bad.passed and abs(bad.simulation) < 0.5
