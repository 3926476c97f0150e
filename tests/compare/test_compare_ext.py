"""The extended comparisons pass on small settings and fail when the theory is wrong."""
import numpy as np
import pytest

import linearnets as ln
from linearnets import compare


def test_registered_and_exported():
    for name in ("unwhitened_phase1", "path_ntk", "intermediate_kernels", "transfer", "finite_sigma_ntk"):
        assert name in compare.CHECKS
    for fn in ("compare_unwhitened_phase1", "compare_path_ntk", "compare_intermediate_kernels",
               "compare_transfer", "compare_finite_sigma_ntk"):
        assert callable(getattr(ln, fn))


# --- 1. unwhitened phase I ------------------------------------------------------------
def test_unwhitened_passes_with_sigma_squared_error_and_sigma_beta_direction():
    r = ln.compare_unwhitened_phase1()
    assert r.passed, r.notes
    assert abs(r.simulation - 2.0) < 0.15
    errs = r.arrays["errors"].max(axis=1)
    ratio = errs[:-1] / errs[1:]                     # sigma halves: error / 4
    assert np.all((ratio > 3.5) & (ratio < 4.5)), ratio
    # the kernel's top direction is Sigma beta, clearly not beta
    assert np.all(r.arrays["overlap_sigma_beta"][:, -1] > 0.99)
    assert np.all(r.arrays["overlap_beta"][:, -1] < 0.6)
    assert len(r.plot().axes) == 3


def test_unwhitened_fails_with_wrong_rate(monkeypatch):
    true = ln.unwhitened_phase1
    monkeypatch.setattr(compare.unwhitened, "unwhitened_phase1",
                        lambda t, Sigma, beta, s, x0, eta=1.0: true(t, Sigma, beta, s, x0, eta=eta / 2))
    assert not ln.compare_unwhitened_phase1().passed


def test_unwhitened_fails_if_the_kernel_grew_along_beta(monkeypatch):
    # the whitened intuition (Sigma -> I: growth along beta) must be caught by the direction check
    true = ln.unwhitened_kernel_matrix
    monkeypatch.setattr(compare.unwhitened, "unwhitened_kernel_matrix",
                        lambda t, W1, w2, Sigma, beta, s, eta=1.0: true(t, W1, w2, np.eye(len(beta)), beta, s, eta))
    assert not ln.compare_unwhitened_phase1().passed


# --- 2. many outputs along the path --------------------------------------------------------
def test_path_ntk_passes_and_learns_strongest_mode_first():
    r = ln.compare_path_ntk()
    assert r.passed, r.notes
    assert r.error < 1e-7                            # exact up to the integrator
    for h in r.arrays["half_sim"]:
        assert np.all(np.argsort(h, axis=1) == [0, 1, 2])
    L2 = list(r.arrays["random_depths"]).index(2)
    h = r.arrays["half_sim"][L2]
    # the log law: halving sigma delays mode alpha by ln(2)/s_alpha
    np.testing.assert_allclose(np.diff(h, axis=0), np.log(2) / r.arrays["spectrum"] * np.ones((2, 1)),
                               rtol=0.02)
    assert len(r.plot().axes) >= 6


def test_path_ntk_fails_without_the_depth_factor(monkeypatch):
    true = ln.path_ntk
    monkeypatch.setattr(compare.modes, "path_ntk", lambda t, X1, X2, Syx, c0, depth=2, eta=1.0:
                        true(t, X1, X2, Syx, c0, depth=depth, eta=eta / depth))
    assert not ln.compare_path_ntk(random_depths=(2,), sigmas=(0.02, 0.01)).passed


def test_path_ntk_fails_with_a_wrong_log_law(monkeypatch):
    # L = 2 with a power law t ~ 1/sigma (the L = 3 law) instead of ln(1/sigma)
    true = ln.mode_learning_times
    monkeypatch.setattr(compare.modes, "mode_learning_times", lambda s, c0, depth=2, eta=1.0, fraction=0.5:
                        true(s, np.asarray(c0) ** 1.5 if depth == 2 else c0, 3 if depth == 2 else depth,
                             eta, fraction))
    r = ln.compare_path_ntk(depths=(2,), random_depths=(2,), sigmas=(0.02, 0.01))
    assert not r.passed
    assert np.all(r.arrays["law_deviation"][0] > r.arrays["law_tolerance"][0])


def test_path_ntk_fails_with_a_wrong_power_law(monkeypatch):
    # L = 3 with t ~ sigma^-2 instead of sigma^(2-L) = sigma^-1
    true = ln.mode_learning_times
    monkeypatch.setattr(compare.modes, "mode_learning_times", lambda s, c0, depth=2, eta=1.0, fraction=0.5:
                        true(s, np.asarray(c0) ** 2 if depth == 3 else c0, depth, eta, fraction))
    r = ln.compare_path_ntk(depths=(2,), random_depths=(3,), sigmas=(0.02, 0.01))
    assert not r.passed
    assert np.all(r.arrays["law_deviation"][0] > r.arrays["law_tolerance"][0])


# --- 3. intermediate kernels ----------------------------------------------------------------
def test_intermediate_kernels_pass_with_sigma_squared_error():
    r = ln.compare_intermediate_kernels()
    assert r.passed, r.notes
    assert np.all(np.abs(r.arrays["slopes"] - 2.0) < 0.1)
    # the input kernel is exact: X X^T both ways, equal up to the rounding of the products
    assert np.all(r.arrays["kernel_error"][:, 0] <= 10 * np.finfo(float).eps)
    assert len(r.plot().axes) == 3


def test_intermediate_kernels_fail_with_wrong_power(monkeypatch):
    # (Syx^T Syx)^(l/2L) instead of ^(l/L)
    true = ln.intermediate_kernel
    monkeypatch.setattr(compare.ntk, "intermediate_kernel",
                        lambda X1, X2, Syx, depth, layer: true(X1, X2, Syx, 2 * depth, layer))
    assert not ln.compare_intermediate_kernels(sigmas=(0.1, 0.05)).passed


def test_intermediate_rejects_depth_one():
    with pytest.raises(ValueError, match="depth"):
        ln.compare_intermediate_kernels(depth=1)


# --- 4. transfer --------------------------------------------------------------------------------
def test_transfer_passes_and_A_helps_aligned_hurts_orthogonal():
    r = ln.compare_transfer(n_draw=200)
    assert r.passed, r.notes
    a = r.arrays
    j1, j0 = list(a["alphas"]).index(1.0), list(a["alphas"]).index(0.0)
    assert a["diff_mean"][j1] < -4 * a["diff_se"][j1] and a["diff_mean"][j0] > 4 * a["diff_se"][j0]
    np.testing.assert_allclose(a["spike_measured"], a["spike_depths"] - 1.0, atol=0.02)
    assert len(r.plot().axes) == 2


def test_transfer_fails_with_wrong_spectrum(monkeypatch):
    true = ln.transfer_error
    monkeypatch.setattr(compare.transfer, "transfer_error", lambda P, D, A, alpha, ridge=0.0, noise=0.0:
                        true(P, D, np.asarray(A) / 2, alpha, ridge, noise))
    assert not ln.compare_transfer(n_draw=200).passed


def test_transfer_fails_with_wrong_trained_spike(monkeypatch):
    true = ln.trained_ntk_spike
    monkeypatch.setattr(compare.transfer, "trained_ntk_spike", lambda L, s=1.0: (float(L), true(L, s)[1]))
    assert not ln.compare_transfer(n_draw=50).passed


def test_transfer_validates_inputs():
    with pytest.raises(ValueError, match="As"):
        ln.compare_transfer(As=(-2.0, 1.0), n_draw=10)
    with pytest.raises(ValueError, match="alphas"):
        ln.compare_transfer(alphas=(0.0, 1.5), n_draw=10)


# --- 5. finite-sigma final NTK ---------------------------------------------------------------------
def test_finite_sigma_ntk_gains_one_power_of_sigma():
    r = ln.compare_finite_sigma_ntk()
    assert r.passed, r.notes
    p0, p1 = r.arrays["slopes"]
    assert abs(p0 - 2.0) < 0.15 and abs(p1 - 3.0) < 0.15
    assert np.all(r.arrays["error_finite"] < 0.1 * r.arrays["error_sigma0"])
    assert len(r.plot().axes) == 2


def test_finite_sigma_ntk_fails_with_wrong_correction(monkeypatch):
    # twice the finite-sigma correction: the error is O(sigma^2) again
    true = ln.final_ntk_finite_sigma
    monkeypatch.setattr(compare.ntk, "final_ntk_finite_sigma", lambda X1, X2, W1, w2, beta, s:
                        2.0 * true(X1, X2, W1, w2, beta, s) - ln.final_ntk(X1, X2, beta, s, 2))
    assert not ln.compare_finite_sigma_ntk().passed


def test_checks_run_through_the_registry():
    res = compare.run_checks(["finite_sigma_ntk"])
    assert len(res) == 1 and res[0].name == "finite_sigma_ntk" and res[0].passed


@pytest.mark.slow
def test_paper_sized_settings_pass():
    res = compare.run_checks(["unwhitened_phase1", "path_ntk", "intermediate_kernels", "transfer",
                              "finite_sigma_ntk"], full=True)
    assert all(r.passed for r in res), [r.notes for r in res if not r.passed]


# --- every public compare_* validates its own arguments ------------------------------------------
import inspect  # noqa: E402

_COMPARES = [getattr(ln, n) for n in dir(ln) if n.startswith("compare_")]


def _bad_values(fn, name, default):
    """Values outside the argument's domain, judged from its name and default (and the routine)."""
    if name == "backend":
        return ["nope", 3]
    if name == "seed":
        return [-1, 1.5, "0"]
    if isinstance(default, bool):
        return []
    if isinstance(default, int):
        return [0, -3, 2.5, True, "7"] if name not in ("depth",) else [0, 1.5, True]
    if isinstance(default, float):
        if name == "y" and fn is ln.compare_catapult:              # any real target
            return [np.nan, np.inf, "x", [1.0, 2.0]]
        if name == "ridge":
            return [-1.0, np.nan, "x"]
        return [0.0, -1.0, np.nan, np.inf, "x", [1.0, 2.0]]
    if isinstance(default, tuple) or default is None:
        bad = [(), "abc", [[1.0]]]
        if name in ("depths", "random_depths", "Ps"):
            bad += [(0,), (2.5,)]
        elif name == "alphas" and fn is ln.compare_transfer:      # task alignments, in [-1, 1]
            bad += [(1.5,)]
        elif name == "lams" and fn is ln.compare_lambda_balanced:  # any real lambda
            bad += [(np.nan,)]
        elif name == "As":
            bad += [(-1.0,)]
        elif name == "gammas":
            bad += [(-0.5,), (np.nan,)]
        else:
            bad += [(0.1, -0.1), (np.nan,)]
        return bad
    return []


@pytest.mark.parametrize("fn", _COMPARES, ids=lambda f: f.__name__)
def test_every_compare_validates_its_own_arguments(fn):
    """Bad input raises ValueError naming the comparison's own argument, before any simulation."""
    sig = inspect.signature(fn)
    assert len(_COMPARES) == 30
    checked = 0
    for name, par in sig.parameters.items():
        for bad in _bad_values(fn, name, par.default):
            with pytest.raises(ValueError) as err:
                fn(**{name: bad})
            assert name in str(err.value), (fn.__name__, name, bad, str(err.value))
            checked += 1
    assert checked >= 10


def test_issue_examples_of_unclear_compare_errors():
    with pytest.raises(ValueError, match=r"^N must be an integer >= 1"):
        ln.compare_phase_one(N=0)
    with pytest.raises(ValueError, match=r"^D must be an integer >= 1"):
        ln.compare_kernel_gap(D=-1)
    with pytest.raises(ValueError, match="Ps must be <= D"):
        ln.compare_kernel_gap(Ps=(30,), D=20)
    with pytest.raises(ValueError, match="P must be >= D"):
        ln.compare_learning_curves(P=5, D=10)
    with pytest.raises(ValueError, match="spectrum must have at most"):
        ln.compare_mode_strengths(spectrum=(3.0, 2.0, 1.0), N=2)
    with pytest.raises(ValueError, match="scales must have D"):
        ln.compare_unwhitened_phase1(scales=(1.0, 2.0), D=4)
