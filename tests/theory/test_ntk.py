"""Final NTK of deep linear networks against an independent numerical construction.

The reference kernels are built here from explicit weights with numpy alone: the
balanced, aligned solution W_l = R_{l+1} S^{1/L} R_lᵀ with random orthonormal R_l,
its Jacobian by central differences (exact up to rounding, since f is linear in
each single weight), and K = J Jᵀ.  A small gradient-flow integrator (solve_ivp)
checks that training from small σ reaches that kernel up to O(σ²).
"""
import warnings

import numpy as np
import pytest
from hypothesis import given, strategies as st
from scipy.integrate import solve_ivp

import linearnets as ln
from linearnets.theory.kernels import kernel_alignment
from linearnets.theory.ntk import final_alignment, final_ntk, final_ntk_multi


# --- independent reference construction ----------------------------------------------

def orthonormal_columns(rng, n, k):
    Q, _ = np.linalg.qr(rng.normal(size=(n, k)))
    return Q[:, :k]


def balanced_weights(Syx, depth, widths, rng):
    """W_l = R_{l+1} S^{1/L} R_lᵀ with R_1 = V, R_{L+1} = U and random hidden R_l."""
    U, S, Vt = np.linalg.svd(Syx, full_matrices=False)
    k = int(np.sum(S > 1e-12 * S[0]))
    U, S, V = U[:, :k], S[:k], Vt[:k].T
    Rs = [V] + [orthonormal_columns(rng, n, k) for n in widths] + [U]
    assert len(Rs) == depth + 1
    return [Rs[l + 1] @ np.diag(S ** (1.0 / depth)) @ Rs[l].T for l in range(depth)]


def forward(weights, X):
    out = X.T
    for W in weights:
        out = W @ out
    return out.T                      # (P, C)


def jacobian_fd(weights, X, h=0.5):
    """(P, C, n_params) Jacobian by central differences over every weight entry."""
    cols = []
    for l, W in enumerate(weights):
        for idx in np.ndindex(W.shape):
            wp = [w.copy() for w in weights]
            wm = [w.copy() for w in weights]
            wp[l][idx] += h
            wm[l][idx] -= h
            cols.append((forward(wp, X) - forward(wm, X)) / (2 * h))
    return np.stack(cols, axis=-1)


def ntk_reference(weights, X1, X2):
    J1, J2 = jacobian_fd(weights, X1), jacobian_fd(weights, X2)
    return np.einsum("mip,njp->mnij", J1, J2)       # (P1, P2, C, C)


def gradient_flow(weights, Sxx, Syx, T, eta=1.0):
    """Exact gradient flow dW_l/dt = η A_lᵀ (Σyx − W Σxx) B_lᵀ, integrated to time T."""
    shapes = [W.shape for W in weights]
    sizes = [W.size for W in weights]

    def unpack(z):
        out, i = [], 0
        for shp, n in zip(shapes, sizes):
            out.append(z[i:i + n].reshape(shp))
            i += n
        return out

    def rhs(_, z):
        Ws = unpack(z)
        prods = [np.eye(shapes[0][1])]
        for W in Ws:
            prods.append(W @ prods[-1])               # prods[l] = W_l ⋯ W_1
        E = Syx - prods[-1] @ Sxx
        grads, top = [], np.eye(shapes[-1][0])
        for l in range(len(Ws) - 1, -1, -1):
            grads.append(top.T @ E @ prods[l].T)
            top = top @ Ws[l]
        return eta * np.concatenate([g.ravel() for g in grads[::-1]])

    z0 = np.concatenate([W.ravel() for W in weights])
    sol = solve_ivp(rhs, (0.0, T), z0, method="DOP853", rtol=1e-10, atol=1e-13)
    assert sol.success
    return unpack(sol.y[:, -1])


def init(layer_sizes, sigma, rng):
    return [rng.normal(0.0, sigma / np.sqrt(layer_sizes[l]), (layer_sizes[l + 1], layer_sizes[l]))
            for l in range(len(layer_sizes) - 1)]


def whitened(rng, P, D):
    """X (P, D) with XᵀX/P = I (P >= D) or XXᵀ = P·I (P < D, rows orthogonal)."""
    Q = orthonormal_columns(rng, max(P, D), min(P, D))
    if P >= D:
        return np.sqrt(P) * Q @ orthonormal_columns(rng, D, D).T
    return np.sqrt(P) * (Q @ orthonormal_columns(rng, P, P).T).T


# --- scalar output ---------------------------------------------------------------------

@pytest.mark.parametrize("depth", [1, 2, 3, 4, 6])
def test_final_ntk_matches_explicit_balanced_network(depth):
    rng = np.random.default_rng(depth)
    D, s = 4, 2.7
    beta = rng.normal(size=D)
    beta /= np.linalg.norm(beta)
    weights = balanced_weights(s * beta[None, :], depth, [3] * (depth - 1), rng)
    X1, X2 = rng.normal(size=(5, D)), rng.normal(size=(3, D))
    K_ref = ntk_reference(weights, X1, X2)[:, :, 0, 0]
    K = final_ntk(X1, X2, beta, s, depth)
    assert K.shape == (5, 3) and K.dtype == np.float64
    np.testing.assert_allclose(K, K_ref, rtol=1e-10, atol=1e-12 * np.abs(K_ref).max())
    # the balanced network computes the teacher
    np.testing.assert_allclose(forward(weights, X1)[:, 0], s * X1 @ beta, rtol=1e-12)


def test_final_ntk_prefactor_is_s_to_2_minus_2_over_L():
    """Not the s^{2L−2} printed in the paper: K scales as s^{2−2/L}."""
    X = np.eye(3)
    beta = np.array([0.0, 1.0, 0.0])
    X2 = np.random.default_rng(0).normal(size=(4, 3))
    for L in (1, 2, 3, 5, 20):
        ratio = final_ntk(X2, X2, beta, 10.0, L) / final_ntk(X2, X2, beta, 1.0, L)
        np.testing.assert_allclose(ratio, 10.0 ** (2 - 2 / L), rtol=1e-13)
        np.testing.assert_allclose(final_ntk(X, X, beta, 1.0, L), np.eye(3) + (L - 1) * np.outer(beta, beta))


def test_final_ntk_extreme_scales_and_depth():
    X = np.random.default_rng(0).normal(size=(4, 3))
    beta = np.array([0.6, 0.8, 0.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for s in (1e-6, 1.0, 1e6):
            for L in (1, 2, 20):
                K = final_ntk(X, X, beta, s, L)
                Km = final_ntk_multi(X, X, s * beta[None, :], L)[:, :, 0, 0]
                assert np.all(np.isfinite(K))
                np.testing.assert_allclose(Km, K, rtol=1e-10, atol=1e-14 * np.abs(K).max())


# --- multiple outputs ----------------------------------------------------------------------

@pytest.mark.parametrize("depth, C, D, rank", [(1, 3, 4, 2), (2, 3, 4, 2), (3, 2, 4, 2),
                                               (3, 4, 3, 2), (4, 3, 5, 3), (5, 3, 3, 1)])
def test_final_ntk_multi_matches_explicit_balanced_network(depth, C, D, rank):
    rng = np.random.default_rng(10 * depth + C)
    U = orthonormal_columns(rng, C, rank)
    V = orthonormal_columns(rng, D, rank)
    S = rng.uniform(0.5, 3.0, rank)
    Syx = U @ np.diag(S) @ V.T                          # C > rank: unused output directions
    widths = list(rng.integers(rank, rank + 3, depth - 1))
    weights = balanced_weights(Syx, depth, widths, rng)
    X1, X2 = rng.normal(size=(4, D)), rng.normal(size=(3, D))
    K_ref = ntk_reference(weights, X1, X2)
    K = final_ntk_multi(X1, X2, Syx, depth)
    assert K.shape == (4, 3, C, C) and K.dtype == np.float64
    np.testing.assert_allclose(K, K_ref, rtol=1e-10, atol=1e-11 * np.abs(K_ref).max())
    # zero singular values padded in explicitly change nothing
    Syx_padded = U @ np.diag(S) @ V.T + 0.0 * rng.normal(size=(C, D))
    np.testing.assert_allclose(final_ntk_multi(X1, X2, Syx_padded, depth), K, rtol=1e-12)


def test_final_ntk_multi_ignores_roundoff_singular_values():
    """A numerically rank-deficient Σyx must not pick up s^{2/L} ~ O(1) from roundoff modes."""
    rng = np.random.default_rng(5)
    u, v = orthonormal_columns(rng, 3, 1), orthonormal_columns(rng, 4, 1)
    Syx = 2.0 * u @ v.T
    Syx_noisy = Syx + 1e-17 * rng.normal(size=Syx.shape)
    X = rng.normal(size=(3, 4))
    L = 20
    np.testing.assert_allclose(final_ntk_multi(X, X, Syx_noisy, L), final_ntk_multi(X, X, Syx, L),
                               rtol=1e-12, atol=1e-12)


def test_final_ntk_multi_reduces_to_scalar_and_is_symmetric():
    rng = np.random.default_rng(2)
    X1, X2 = rng.normal(size=(6, 5)), rng.normal(size=(4, 5))
    beta = rng.normal(size=5)
    beta /= np.linalg.norm(beta)
    for L in (1, 2, 3, 7):
        np.testing.assert_allclose(final_ntk_multi(X1, X2, 1.3 * beta[None, :], L)[:, :, 0, 0],
                                   final_ntk(X1, X2, beta, 1.3, L), rtol=1e-12)
        # a negative teacher: same kernel (only the sign of U changes)
        np.testing.assert_allclose(final_ntk_multi(X1, X2, -1.3 * beta[None, :], L)[:, :, 0, 0],
                                   final_ntk(X1, X2, beta, 1.3, L), rtol=1e-12)
    Syx = rng.normal(size=(3, 5))
    K12 = final_ntk_multi(X1, X2, Syx, 3)
    K21 = final_ntk_multi(X2, X1, Syx, 3)
    np.testing.assert_allclose(K12, K21.transpose(1, 0, 3, 2), rtol=1e-12)
    K11 = final_ntk_multi(X1, X1, Syx, 3).transpose(0, 2, 1, 3).reshape(18, 18)
    assert np.linalg.eigvalsh(K11).min() > -1e-10 * np.abs(K11).max()


# --- training reaches the final kernel ---------------------------------------------------------

def trained_kernel_error(sigma, depth, X, Syx, widths, seed, X_eval):
    rng = np.random.default_rng(seed)
    P, D = X.shape
    C = Syx.shape[0]
    Sxx = X.T @ X / P
    weights = init([D] + widths + [C], sigma, rng)
    T = (np.log(1 / sigma ** 2) if depth == 2 else sigma ** (2 - depth)) * 4.0 + 40.0
    final = gradient_flow(weights, Sxx, Syx, T)
    K_emp = ntk_reference(final, X_eval, X_eval)
    K = final_ntk_multi(X_eval, X_eval, Syx, depth)
    return np.linalg.norm(K_emp - K) / np.linalg.norm(K)


@pytest.mark.parametrize("depth", [2, 3])
def test_gradient_flow_from_small_init_reaches_final_ntk(depth):
    """Whitened data, P >= D: relative Frobenius error O(σ²)."""
    rng = np.random.default_rng(7)
    P, D = 6, 4
    X = whitened(rng, P, D)
    Syx = np.array([[2.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]]) @ orthonormal_columns(rng, D, D).T
    errs = [trained_kernel_error(sg, depth, X, Syx, [5] * (depth - 1), 0, X) for sg in (0.1, 0.03)]
    assert errs[1] < 0.5 * 0.03 ** 2 * 10
    assert errs[0] / errs[1] > 0.5 * (0.1 / 0.03) ** 2        # O(σ²) scaling


def test_gradient_flow_below_full_rank_data_in_and_off_span():
    """P < D: s, β from the SVD of Σyx; O(σ²) on the data span, only O(σ) off it."""
    rng = np.random.default_rng(11)
    P, D = 3, 6
    X = whitened(rng, P, D)
    assert np.allclose(X @ X.T, P * np.eye(P))
    beta_T = rng.normal(size=D)
    beta_T /= np.linalg.norm(beta_T)                      # teacher, partly off the span
    y = 1.5 * X @ beta_T
    Syx = (y @ X / P)[None, :]
    s = np.linalg.norm(Syx)
    beta = Syx[0] / s
    Pi = X.T @ X / P                                      # projector onto the span
    assert s < 1.5 * 0.999 and np.allclose(Pi @ beta, beta)
    in_span = rng.normal(size=(4, D)) @ Pi
    off_span = rng.normal(size=(4, D)) @ (np.eye(D) - Pi)
    errs_in, errs_off = [], []
    for sigma in (0.03, 0.01):
        errs_in.append(trained_kernel_error(sigma, 2, X, Syx, [4], 1, in_span))
        errs_off.append(trained_kernel_error(sigma, 2, X, Syx, [4], 1, np.r_[in_span, off_span]))
    assert errs_in[1] < 10 * 0.01 ** 2
    assert errs_in[0] / errs_in[1] > 0.5 * 9                 # σ²
    assert errs_off[1] > 3 * errs_in[1]                      # the off-span error is larger ...
    assert 0.5 * 3 < errs_off[0] / errs_off[1] < 2 * 3       # ... and O(σ)
    # and the scalar formula with (s, β) from Σyx is the same kernel
    np.testing.assert_allclose(final_ntk(in_span, in_span, beta, s, 2),
                               final_ntk_multi(in_span, in_span, Syx, 2)[:, :, 0, 0], rtol=1e-12)


# --- final alignment ------------------------------------------------------------------------

@pytest.mark.parametrize("P, D", [(8, 3), (5, 5), (3, 7), (1, 4)])
@pytest.mark.parametrize("depth", [1, 2, 3, 10])
def test_final_alignment_matches_kernel_alignment_of_final_ntk(P, D, depth):
    rng = np.random.default_rng(P * 100 + D)
    X = whitened(rng, P, D)
    # β in the data span (automatic for P >= D)
    beta = X.T @ rng.normal(size=P)
    beta /= np.linalg.norm(beta)
    s = 0.7
    K = final_ntk(X, X, beta, s, depth)
    A = kernel_alignment(K, s * X @ beta)
    np.testing.assert_allclose(A, final_alignment(depth, min(P, D)), rtol=1e-12)


def test_final_alignment_limits_and_shape():
    n = np.arange(1, 50)
    np.testing.assert_allclose(final_alignment(1, n), 1 / np.sqrt(n), rtol=1e-15)
    assert np.all(final_alignment(1, 1) == 1.0)
    assert np.all(np.diff(final_alignment(3, n)) < 0)                    # decreasing in n
    A = np.array([final_alignment(L, 10) for L in range(1, 30)])
    assert np.all(np.diff(A) > 0) and A[-1] < 1                           # increasing in L, < 1
    assert 1 - final_alignment(10 ** 6, 10) < 1e-10                       # → 1 as L → ∞
    out = final_alignment(2, 5)
    assert isinstance(out, np.ndarray) and out.shape == () and out.dtype == np.float64
    assert final_alignment(2, [[1, 2, 3]]).shape == (1, 3)


@given(depth=st.integers(1, 20), n=st.integers(1, 10 ** 6))
def test_final_alignment_properties(depth, n):
    A = final_alignment(depth, n)
    assert 0 < A <= 1
    assert np.isclose(A, depth / np.sqrt(depth ** 2 + n - 1), rtol=1e-14)
    assert final_alignment(depth + 1, n) >= A


@given(seed=st.integers(0, 10 ** 6), depth=st.integers(1, 8), s=st.floats(1e-3, 1e3))
def test_final_ntk_properties(seed, depth, s):
    rng = np.random.default_rng(seed)
    D = int(rng.integers(1, 6))
    X = rng.normal(size=(int(rng.integers(1, 6)), D))
    beta = rng.normal(size=D)
    beta /= np.linalg.norm(beta)
    K = final_ntk(X, X, beta, s, depth)
    # symmetric PSD, and the eigenvalue along β is L times the isotropic one
    np.testing.assert_allclose(K, K.T, rtol=1e-12, atol=1e-15 * np.abs(K).max())
    assert np.linalg.eigvalsh(K).min() >= -1e-10 * np.abs(K).max()
    e = np.eye(D)
    Kb = final_ntk(beta[None, :], beta[None, :], beta, s, depth)
    Ke = final_ntk(e, e, beta, s, depth)
    np.testing.assert_allclose(Kb, depth * s ** (2 - 2 / depth), rtol=1e-10)
    np.testing.assert_allclose(np.trace(Ke), s ** (2 - 2 / depth) * (D + depth - 1), rtol=1e-10)


def test_public_names():
    assert ln.final_ntk is final_ntk and ln.final_ntk_multi is final_ntk_multi
    assert ln.final_alignment is final_alignment


# --- invalid input -----------------------------------------------------------------------

X3 = np.ones((2, 3))
B3 = np.array([1.0, 0.0, 0.0])


@pytest.mark.parametrize("args, name", [
    ((np.ones(3), X3, B3, 1.0, 2), "X1"), ((X3, np.ones((2, 2)), B3, 1.0, 2), "X2"),
    ((X3 * np.nan, X3, B3, 1.0, 2), "X1"), ((X3, X3, np.ones(3), 1.0, 2), "beta"),
    ((X3, X3, np.zeros(3), 1.0, 2), "beta"), ((X3, X3, np.ones(2), 1.0, 2), "beta"),
    ((X3, X3, B3, 0.0, 2), "s"), ((X3, X3, B3, -1.0, 2), "s"), ((X3, X3, B3, np.inf, 2), "s"),
    ((X3, X3, B3, [1.0, 2.0], 2), "s"), ((X3, X3, B3, 1.0, 0), "depth"),
    ((X3, X3, B3, 1.0, 2.5), "depth"), ((X3, X3, B3, 1.0, True), "depth"),
    ((X3, X3, B3, 1.0, np.nan), "depth"),
])
def test_final_ntk_invalid_input(args, name):
    with pytest.raises(ValueError, match=name):
        final_ntk(*args)


@pytest.mark.parametrize("args, name", [
    ((X3, X3, np.ones(3), 2), "Syx"), ((X3, X3, np.ones((2, 2)), 2), "Syx"),
    ((X3, X3, np.zeros((2, 3)), 2), "Syx"), ((X3, X3, np.full((2, 3), np.nan), 2), "Syx"),
    ((X3, np.ones((2, 4)), np.ones((2, 3)), 2), "X2"), ((X3, X3, np.ones((2, 3)), -1), "depth"),
    ((X3, X3, np.ones((2, 3)), 1.5), "depth"),
])
def test_final_ntk_multi_invalid_input(args, name):
    with pytest.raises(ValueError, match=name):
        final_ntk_multi(*args)


@pytest.mark.parametrize("args, name", [
    ((0, 3), "depth"), ((2.5, 3), "depth"), ((2, 0), "n"), ((2, 1.5), "n"), ((2, np.nan), "n"),
    ((2, [3, -1]), "n"), ((2, True), "n"), ((2, np.inf), "n"),
])
def test_final_alignment_invalid_input(args, name):
    with pytest.raises(ValueError, match=name):
        final_alignment(*args)


def test_docstring_examples():
    import doctest
    import linearnets.theory.ntk as mod
    res = doctest.testmod(mod)
    assert res.attempted > 0 and res.failed == 0


# --- against the package's own simulator ---------------------------------------------------

@pytest.mark.parametrize("depth", [2, 3])
def test_simulated_training_reaches_final_ntk(depth):
    """ln.gradient_flow from small σ on a whitened teacher task: ‖K_emp − K‖_F/‖K‖_F = O(σ²)."""
    from linearnets.data import teacher_task
    X, Y = teacher_task(12, 5, [2.0, 0.7], seed=3)
    Syx = Y.T @ X / X.shape[0]
    Xtest = np.random.default_rng(0).normal(size=(6, 5))
    errs = []
    for sigma in (0.1, 0.03):
        weights = ln.init_network([5] + [6] * (depth - 1) + [2], sigma, seed=1)
        T = (np.log(1 / sigma ** 2) if depth == 2 else sigma ** (2 - depth)) * 4.0 / 0.7 + 60.0
        traj = ln.gradient_flow(weights, X, Y, [0.0, T], rtol=1e-10, atol=1e-14, backend="numpy")
        assert traj.success
        K_emp = ln.empirical_ntk(traj.weights, Xtest, Xtest)
        K = final_ntk_multi(Xtest, Xtest, Syx, depth)
        errs.append(np.linalg.norm(K_emp - K) / np.linalg.norm(K))
    assert errs[1] < 10 * 0.03 ** 2
    assert errs[0] / errs[1] > 0.5 * (0.1 / 0.03) ** 2


# --- numerical rank of Σyx (one rule for every fractional power) ---------------------------

def _exact_factor_kernels(U, S, V, X1, X2, L):
    """final-NTK and layer kernels from the exact factors (no SVD of the rank-deficient Σyx)."""
    C = U.shape[0]
    G = X1 @ X2.T
    Z1, Z2 = X1 @ V, X2 @ V
    K = np.zeros(G.shape + (C, C))
    for l in range(1, L + 1):
        A = np.eye(C) if l == L else (U * S ** (2.0 * (L - l) / L)) @ U.T
        B = G if l == 1 else (Z1 * S ** (2.0 * (l - 1) / L)) @ Z2.T
        K += B[:, :, None, None] * A
    layers = [G] + [(Z1 * S ** (2.0 * l / L)) @ Z2.T for l in range(1, L + 1)]
    return K, layers


@pytest.mark.parametrize("C, D, n_zero", [(2, 6, 1), (3, 7, 1), (3, 6, 2), (2, 7, 1)])
def test_exactly_rank_deficient_syx_gives_exact_kernels_at_depths_1_to_8(C, D, n_zero):
    """Σyx = U diag(s) Vᵀ with singular values exactly 0: the SVD returns them at ~eps·s_max;
    raised to 2(l−1)/L they used to cost 2e-9 (L=4) to 2e-6 (L=6). The rank rule drops them."""
    rng = np.random.default_rng(100 * C + D + n_zero)
    U = orthonormal_columns(rng, C, C)
    V = orthonormal_columns(rng, D, C)
    s = np.sort(rng.uniform(0.5, 3.0, C))[::-1]
    s[C - n_zero:] = 0.0
    Syx = (U * s) @ V.T
    k = C - n_zero
    Uk, Sk, Vk = U[:, :k], s[:k], V[:, :k]
    X1, X2 = rng.normal(size=(5, D)), rng.normal(size=(4, D))
    for L in range(1, 9):
        K_ref, layers_ref = _exact_factor_kernels(Uk, Sk, Vk, X1, X2, L)
        K = final_ntk_multi(X1, X2, Syx, L)
        assert np.linalg.norm(K - K_ref) <= 1e-12 * np.linalg.norm(K_ref), L
        # the path NTK at t -> infinity and at c(0) = s is the same kernel
        Kp = ln.path_ntk([0.0], X1, X2, Syx, Sk * (1.0 - 1e-15), depth=L)[0]
        assert np.linalg.norm(Kp - K_ref) <= 1e-12 * np.linalg.norm(K_ref), L
        for l in range(0, L + 1):
            Kl = ln.intermediate_kernel(X1, X2, Syx, L, l)
            assert np.linalg.norm(Kl - layers_ref[l]) <= 1e-12 * np.linalg.norm(layers_ref[l]), (L, l)
    # the tolerance is the documented one: rcond=0 keeps the rounding-level mode, and it shows
    s_num = np.linalg.svd(Syx, compute_uv=False)
    assert np.all(s_num[k:] <= max(C, D) * np.finfo(float).eps * s_num[0])
    if s_num[k] > 0:
        K_ref, layers_ref = _exact_factor_kernels(Uk, Sk, Vk, X1, X2, 8)
        K0 = final_ntk_multi(X1, X2, Syx, 8, rcond=0.0)
        assert np.linalg.norm(K0 - K_ref) > 1e-6 * np.linalg.norm(K_ref)
    s_modes, _, _ = ln.task_modes(Syx)
    assert s_modes.size == k


def test_rcond_is_validated_and_can_drop_a_genuine_small_mode():
    rng = np.random.default_rng(3)
    U, V = orthonormal_columns(rng, 2, 2), orthonormal_columns(rng, 5, 2)
    Syx = (U * np.array([1.0, 1e-9])) @ V.T
    X = rng.normal(size=(3, 5))
    assert ln.task_modes(Syx)[0].size == 2                   # 1e-9 is far above the rounding level
    assert ln.task_modes(Syx, rcond=1e-6)[0].size == 1
    K1 = final_ntk_multi(X, X, Syx, 4, rcond=1e-6)
    np.testing.assert_allclose(K1, final_ntk_multi(X, X, U[:, :1] @ V[:, :1].T, 4), rtol=1e-12, atol=1e-14)
    for bad in (-0.1, 1.0, np.nan, [1e-3]):
        with pytest.raises(ValueError, match="rcond"):
            final_ntk_multi(X, X, Syx, 3, rcond=bad)
        with pytest.raises(ValueError, match="rcond"):
            ln.intermediate_kernel(X, X, Syx, 3, 1, rcond=bad)
