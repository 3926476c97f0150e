"""Kernel regression and kernel–target alignment."""
import numpy as np
import pytest
from hypothesis import given, strategies as st

import linearnets as ln
from linearnets.theory.kernels import kernel_alignment, kernel_regression
from linearnets.theory.ntk import final_ntk, final_ntk_multi


def random_psd(rng, P, rank=None, jitter=0.0):
    A = rng.normal(size=(P, rank or P))
    return A @ A.T + jitter * np.eye(P)


def whitened(rng, P, D):
    Q, _ = np.linalg.qr(rng.normal(size=(max(P, D), max(P, D))))
    return np.sqrt(P) * (Q[:P, :D] if P < D else Q[:, :D])


# --- kernel regression ---------------------------------------------------------------------

@pytest.mark.parametrize("C", [None, 1, 3])
def test_kernel_regression_matches_lstsq(C):
    rng = np.random.default_rng(0)
    P, Q = 7, 4
    K = random_psd(rng, P, jitter=0.1)
    Kt = rng.normal(size=(Q, P))
    Y = rng.normal(size=(P,) if C is None else (P, C))
    f = kernel_regression(K, Kt, Y)
    alpha = np.linalg.lstsq(K, Y, rcond=None)[0]
    np.testing.assert_allclose(f, Kt @ alpha, rtol=1e-10)
    assert f.shape == ((Q,) if C is None else (Q, C)) and f.dtype == np.float64
    # ridge: against the pseudo-inverse of K + λI
    f = kernel_regression(K, Kt, Y, ridge=0.3)
    np.testing.assert_allclose(f, Kt @ np.linalg.pinv(K + 0.3 * np.eye(P)) @ Y, rtol=1e-10)


def test_kernel_regression_interpolates_training_data():
    rng = np.random.default_rng(1)
    K = random_psd(rng, 6, jitter=0.5)
    Y = rng.normal(size=(6, 2))
    np.testing.assert_allclose(kernel_regression(K, K, Y), Y, rtol=1e-10, atol=1e-12)


def test_kernel_regression_ridge_limits():
    """ridge → 0⁺ on a singular kernel: the pseudo-inverse solution; ridge → ∞: f ≈ Kt Y / ridge."""
    rng = np.random.default_rng(2)
    P, D = 8, 3
    X = rng.normal(size=(P, D))
    K = X @ X.T                                          # rank 3 < P: singular
    Xt = rng.normal(size=(5, D))
    Kt = Xt @ X.T
    y = rng.normal(size=P)
    f_pinv = Kt @ np.linalg.pinv(K) @ y
    # the min-norm least-squares linear fit, computed independently
    w = np.linalg.lstsq(X, y, rcond=None)[0]
    np.testing.assert_allclose(f_pinv, Xt @ w, rtol=1e-9)
    for ridge, tol in ((1e-4, 1e-3), (1e-7, 1e-6)):
        f = kernel_regression(K, Kt, y, ridge=ridge)
        assert np.max(np.abs(f - f_pinv)) < tol * np.max(np.abs(f_pinv))
    big = 1e12
    np.testing.assert_allclose(kernel_regression(K, Kt, y, ridge=big) * big, Kt @ y, rtol=1e-9)
    with pytest.raises(ValueError, match="singular"):
        kernel_regression(K, Kt, y)


@pytest.mark.parametrize("depth", [1, 2, 3, 8])
def test_final_ntk_regression_recovers_the_teacher(depth):
    """App. G: with K = x(I + Aββᵀ)x′ the kernel interpolant is the teacher s β·x for every A."""
    rng = np.random.default_rng(depth)
    for P, D in ((5, 5), (3, 6)):
        X = whitened(rng, P, D)
        beta = X.T @ rng.normal(size=P)                  # in the data span
        beta /= np.linalg.norm(beta)
        s = 1.7
        y = s * X @ beta
        Xt = rng.normal(size=(4, D)) @ (X.T @ X / P)     # test points in the span
        f = kernel_regression(final_ntk(X, X, beta, s, depth), final_ntk(Xt, X, beta, s, depth), y)
        np.testing.assert_allclose(f, s * Xt @ beta, rtol=1e-9, atol=1e-12)


def test_final_ntk_multi_regression_per_output_is_the_linear_fit():
    """Multi-output: the flattened (P·C) problem with the final NTK recovers Σyx x."""
    rng = np.random.default_rng(3)
    P, D, C = 4, 4, 3
    X = whitened(rng, P, D)
    Syx = rng.normal(size=(2, D))
    Syx = np.vstack([Syx, np.zeros((1, D))])             # C > rank
    Y = X @ Syx.T
    Xt = rng.normal(size=(5, D))
    K = final_ntk_multi(X, X, Syx, 3).transpose(0, 2, 1, 3).reshape(P * C, P * C)
    Kt = final_ntk_multi(Xt, X, Syx, 3).transpose(0, 2, 1, 3).reshape(5 * C, P * C)
    # the unused output direction sees only the last layer's term, of rank 2 < P: singular,
    # so take the ridgeless limit
    with pytest.raises(ValueError, match="singular"):
        kernel_regression(K, Kt, Y.ravel())
    f = kernel_regression(K, Kt, Y.ravel(), ridge=1e-10).reshape(5, C)
    np.testing.assert_allclose(f, Xt @ Syx.T, rtol=1e-7, atol=1e-7)


@given(seed=st.integers(0, 10 ** 6), P=st.integers(1, 8), ridge=st.floats(0.0, 10.0))
def test_kernel_regression_properties(seed, P, ridge):
    rng = np.random.default_rng(seed)
    K = random_psd(rng, P, jitter=0.2)
    Kt = rng.normal(size=(3, P))
    Y = rng.normal(size=(P, 2))
    f = kernel_regression(K, Kt, Y, ridge=ridge)
    # linear in Y, and the residual of the solve is small
    np.testing.assert_allclose(kernel_regression(K, Kt, 2 * Y[:, 0] - Y[:, 1], ridge=ridge),
                               2 * f[:, 0] - f[:, 1], rtol=1e-8, atol=1e-10)
    alpha = kernel_regression(K, np.eye(P), Y, ridge=ridge)
    np.testing.assert_allclose((K + ridge * np.eye(P)) @ alpha, Y, atol=1e-9 * (1 + np.abs(Y).max()))


def test_kernel_regression_accepts_roundoff_asymmetry_and_negative_eigenvalues():
    rng = np.random.default_rng(4)
    K = random_psd(rng, 5, jitter=1.0)
    Kn = K + 1e-13 * rng.normal(size=K.shape)
    y = rng.normal(size=5)
    np.testing.assert_allclose(kernel_regression(Kn, K, y), y, rtol=1e-9, atol=1e-10)
    # singular PSD kernel with a roundoff-negative eigenvalue is fine with a ridge
    X = rng.normal(size=(5, 2))
    K = X @ X.T
    w, V = np.linalg.eigh(K)
    w[0] = -1e-13
    K = V @ np.diag(w) @ V.T
    f = kernel_regression(K, K, y, ridge=1.0)
    assert np.all(np.isfinite(f))


# --- kernel alignment ------------------------------------------------------------------------

def test_kernel_alignment_formula_and_limits():
    rng = np.random.default_rng(5)
    K = random_psd(rng, 6)
    y = rng.normal(size=6)
    A = kernel_alignment(K, y)
    assert A.shape == () and A.dtype == np.float64
    np.testing.assert_allclose(A, y @ K @ y / (np.linalg.norm(K) * (y @ y)), rtol=1e-14)
    # (P, 1) targets and a (P, P, 1, 1) kernel give the same number
    np.testing.assert_allclose(kernel_alignment(K, y[:, None]), A, rtol=1e-14)
    np.testing.assert_allclose(kernel_alignment(K[:, :, None, None], y), A, rtol=1e-14)
    # perfectly aligned: K = y yᵀ; isotropic: 1/√P
    np.testing.assert_allclose(kernel_alignment(np.outer(y, y), 3 * y), 1.0, rtol=1e-14)
    np.testing.assert_allclose(kernel_alignment(np.eye(6), y), 1 / np.sqrt(6), rtol=1e-14)
    # orthogonal
    e = np.eye(6)
    assert kernel_alignment(np.outer(e[0], e[0]), e[1]) == 0.0


def test_kernel_alignment_multi_output_definitions():
    rng = np.random.default_rng(6)
    K = random_psd(rng, 5)
    Y = rng.normal(size=(5, 3))
    G = Y @ Y.T
    np.testing.assert_allclose(kernel_alignment(K, Y),
                               np.sum(K * G) / (np.linalg.norm(K) * np.linalg.norm(G)), rtol=1e-13)
    # a (P, P, C, C) kernel K ⊗ I_C: the flattened problem
    K4 = np.einsum("mn,ij->mnij", K, np.eye(3))
    Kflat = K4.transpose(0, 2, 1, 3).reshape(15, 15)
    yflat = Y.ravel()
    np.testing.assert_allclose(kernel_alignment(K4, Y), kernel_alignment(Kflat, yflat), rtol=1e-13)


@given(seed=st.integers(0, 10 ** 6), P=st.integers(1, 8), C=st.integers(1, 3),
       scale=st.floats(1e-6, 1e6))
def test_kernel_alignment_properties(seed, P, C, scale):
    rng = np.random.default_rng(seed)
    K = random_psd(rng, P, rank=int(rng.integers(1, P + 1)))
    Y = rng.normal(size=(P, C))
    A = kernel_alignment(K, Y)
    assert -1e-12 <= A <= 1 + 1e-12
    np.testing.assert_allclose(kernel_alignment(scale * K, Y / scale), A, rtol=1e-10, atol=1e-14)


def test_public_names():
    assert ln.kernel_regression is kernel_regression and ln.kernel_alignment is kernel_alignment


# --- invalid input --------------------------------------------------------------------------------

K4 = np.eye(4) + 0.1
KT = np.ones((2, 4))
Y4 = np.ones(4)


@pytest.mark.parametrize("args, kwargs, match", [
    ((np.ones((4, 3)), KT, Y4), {}, "K_train"), ((np.ones(4), KT, Y4), {}, "K_train"),
    ((K4, np.ones((2, 3)), Y4), {}, "K_test_train"), ((K4, KT, np.ones(3)), {}, "Y"),
    ((K4, KT, np.ones((4, 2, 1))), {}, "Y"), ((K4, KT, Y4), {"ridge": -1.0}, "ridge"),
    ((K4, KT, Y4), {"ridge": np.nan}, "ridge"), ((K4, KT, Y4), {"ridge": [1.0, 2.0]}, "ridge"),
    ((K4 * np.nan, KT, Y4), {}, "K_train"), ((K4, KT * np.inf, Y4), {}, "K_test_train"),
    ((K4, KT, Y4 * np.nan), {}, "Y"), ((np.triu(K4), KT, Y4), {}, "symmetric"),
    ((np.diag([1.0, 1.0, 1.0, -1.0]), KT, Y4), {}, "positive semidefinite"),
    ((np.ones((4, 4)), KT, Y4), {}, "singular"), ((np.zeros((4, 4)), KT, Y4), {}, "singular"),
    ((np.ones((4, 4)), KT, Y4), {"ridge": 1e-30}, "singular"), ((np.zeros((0, 0)), KT, Y4), {}, "K_train"),
])
def test_kernel_regression_invalid_input(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        kernel_regression(*args, **kwargs)


@pytest.mark.parametrize("args, match", [
    ((np.eye(3), np.ones(4)), "K"), ((np.ones((3, 4)), np.ones(3)), "K"), ((np.ones(3), np.ones(3)), "K"),
    ((np.eye(3), np.zeros(3)), "y"), ((np.zeros((3, 3)), np.ones(3)), "K"),
    ((np.eye(3) * np.nan, np.ones(3)), "K"), ((np.eye(3), np.ones((3, 2, 2))), "y"),
    ((np.ones((3, 3, 2, 2)), np.ones((3, 3))), "K"), ((np.eye(3), [1.0, np.inf, 0.0]), "y"),
])
def test_kernel_alignment_invalid_input(args, match):
    with pytest.raises(ValueError, match=match):
        kernel_alignment(*args)


def test_docstring_examples():
    import doctest
    import linearnets.theory.kernels as mod
    res = doctest.testmod(mod)
    assert res.attempted > 0 and res.failed == 0


@given(seed=st.integers(0, 10_000), lk=st.floats(-300, 300), ly=st.floats(-300, 300),
       multi=st.booleans())
def test_kernel_alignment_is_scale_invariant_in_floating_point(seed, lk, ly, multi):
    """1e160·I gave 0.0 and 1e-170·I raised, while I gives 0.5: normalised before any square."""
    rng = np.random.default_rng(seed)
    P, C = 5, 2
    if multi:
        J = rng.normal(size=(P * C, P * C))
        K = (J @ J.T).reshape(P, C, P, C).transpose(0, 2, 1, 3)
        y = rng.normal(size=(P, C))
    else:
        J = rng.normal(size=(P, P))
        K, y = J @ J.T, rng.normal(size=P)
    a, b = 10.0 ** lk, 10.0 ** ly
    ref = float(kernel_alignment(K, y))
    got = float(kernel_alignment(a * K, b * y))
    assert abs(got - ref) <= 1e-13 * abs(ref) + 1e-15


def test_kernel_alignment_issue_examples():
    for scale in (1e160, 1e-170, 1e300, 1e-300, 1.0):
        assert abs(float(kernel_alignment(scale * np.eye(4), np.ones(4))) - 0.5) <= 1e-15
    with pytest.raises(ValueError, match="K must be non-zero"):
        kernel_alignment(np.zeros((3, 3)), np.ones(3))
