"""Symbolic checks of theory/final_ntk.md (exits non-zero on failure).

1. Balance: d/dt (W_2^T W_2 - W_1 W_1^T) = 0 under gradient flow (L = 2, general Sigma_xx).
2. For L = 1, 2, 3, with symbolic diagonal S (s_alpha = t_alpha^L), hidden rotations,
   C = 3 > rank 2, the NTK of the balanced solution computed from the explicit
   Jacobian equals formula (3).
3. One output: formula (4) with prefactor s^{2 - 2/L} for L = 1..4; s^{2L-2} fails.
4. linearnets.final_ntk / final_ntk_multi agree with the symbolic kernels.
"""
import pathlib
import sys

import sympy as sp

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

FAILURES = []


def check(name, ok):
    print(f"{'ok  ' if ok else 'FAIL'} {name}")
    if not ok:
        FAILURES.append(name)


def cayley(mu):
    """Rational 2x2 rotation."""
    c, s_ = (1 - mu ** 2) / (1 + mu ** 2), 2 * mu / (1 + mu ** 2)
    return sp.Matrix([[c, -s_], [s_, c]])


# a rational 3x3 orthogonal matrix
O3 = sp.Matrix([[2, -2, 1], [2, 1, -2], [1, 2, 2]]) / 3
assert O3.T * O3 == sp.eye(3)

eta = sp.Symbol("eta", positive=True)

# 1. balance (App. D) for L = 2, C = 1, N = 2, D = 2 with general symmetric Sxx
W1 = sp.Matrix(2, 2, lambda i, j: sp.Symbol(f"w{i}{j}"))
W2 = sp.Matrix(1, 2, lambda i, j: sp.Symbol(f"v{j}"))
Sxx = sp.Matrix([[sp.Symbol("xa"), sp.Symbol("xb")], [sp.Symbol("xb"), sp.Symbol("xc")]])
Syx = sp.Matrix([[sp.Symbol("ya"), sp.Symbol("yb")]])
E = Syx - W2 * W1 * Sxx
dW1 = eta * W2.T * E
dW2 = eta * E * W1.T
dbal = dW2.T * W2 + W2.T * dW2 - dW1 * W1.T - W1 * dW1.T
check("balance W2^T W2 - W1 W1^T is conserved (App. D)", dbal.applyfunc(sp.expand) == sp.zeros(2, 2))


# 2. explicit Jacobian NTK of the balanced solution vs formula (3)
def explicit_ntk(weights_values, x, xp):
    """K_ij(x, x') from sum over all weight entries of df_i(x)/dw df_j(x')/dw."""
    syms = [sp.Matrix(*W.shape, lambda i, j, l=l: sp.Symbol(f"W{l}_{i}_{j}"))
            for l, W in enumerate(weights_values)]
    f = lambda inp: sp.prod(reversed(syms)) * inp if len(syms) > 1 else syms[0] * inp  # noqa: E731
    fx, fxp = f(x), f(xp)
    subs = {S: v for Wsym, Wval in zip(syms, weights_values) for S, v in zip(Wsym, Wval)}
    C = fx.shape[0]
    K = sp.zeros(C, C)
    for Wsym in syms:
        for w in Wsym:
            gx = fx.diff(w).xreplace(subs)
            gxp = fxp.diff(w).xreplace(subs)
            K += gx * gxp.T
    return K.applyfunc(sp.cancel)


def formula_ntk(U, Svals, V, L, x, xp):
    C, D = U.shape[0], V.shape[0]
    K = sp.zeros(C, C)
    for l in range(1, L + 1):
        A = sp.eye(C) if l == L else U * sp.diag(*[sv ** sp.Rational(2 * (L - l), L) for sv in Svals]) * U.T
        B = sp.eye(D) if l == 1 else V * sp.diag(*[sv ** sp.Rational(2 * (l - 1), L) for sv in Svals]) * V.T
        K += A * (x.T * B * xp)[0]
    return K


t1, t2, m1, m2, m3 = sp.symbols("t1 t2 m1 m2 m3", positive=True)
x = sp.Matrix(sp.symbols("x1 x2"))
xp = sp.Matrix(sp.symbols("y1 y2"))
U = O3[:, :2]                                   # C = 3 > rank 2
# hidden R_l of widths 2 and 3; symbolic rotations for L <= 2, rational ones for L = 3
# (keeps the script fast; the kernel does not depend on them either way)
for L in (1, 2, 3):
    V = cayley(m1) if L < 3 else cayley(sp.Rational(1, 2))          # D = 2
    hidden = ({2: cayley(m2), 3: O3[:, [0, 2]] * cayley(m3)} if L < 3 else
              {2: cayley(sp.Rational(1, 3)), 3: O3[:, [0, 2]] * cayley(sp.Rational(2, 5))})
    S_half = sp.diag(t1, t2)                    # S^{1/L}
    Svals = [t1 ** L, t2 ** L]
    widths = {1: [], 2: [2], 3: [2, 3]}[L]
    Rs = [V] + [hidden[2] if n == 2 else hidden[3] for n in widths] + [U]
    weights = [Rs[l + 1] * S_half * Rs[l].T for l in range(L)]
    prod = weights[0]
    for Wl in weights[1:]:
        prod = Wl * prod
    check(f"L={L}: balanced chain has end-to-end map U S V^T",
          (prod - U * sp.diag(*Svals) * V.T).applyfunc(sp.cancel) == sp.zeros(3, 2))
    bal = all((weights[l + 1].T * weights[l + 1] - weights[l] * weights[l].T).applyfunc(sp.cancel)
              == sp.zeros(weights[l].shape[0], weights[l].shape[0]) for l in range(L - 1))
    check(f"L={L}: the chain is balanced", bal)
    Kx = explicit_ntk(weights, x, xp)
    Kf = formula_ntk(U, Svals, V, L, x, xp)
    check(f"L={L}: explicit Jacobian NTK == formula (3), C=3 > rank 2",
          (Kx - Kf).applyfunc(sp.cancel) == sp.zeros(3, 3))
    if L == 3:
        # the identity terms matter: the unused output direction u_3 still has a kernel
        u3 = O3[:, 2]
        k33 = sp.cancel((u3.T * Kx * u3)[0])
        check("L=3: kernel along the unused output direction is x^T V S^{4/3} V^T x' (last layer)",
              sp.cancel(k33 - (x.T * V * sp.diag(t1 ** 4, t2 ** 4) * V.T * xp)[0]) == 0)

# 3. one output, formula (4)
s = sp.Symbol("s", positive=True)
beta = sp.Matrix([sp.Rational(3, 5), sp.Rational(4, 5)])
for L in range(1, 5):
    u = sp.Symbol("u", positive=True)          # u = s^{1/L}
    Rs = [beta] + [cayley(m2)[:, :1] if l % 2 else sp.Matrix([[0], [1]]) for l in range(1, L)] + [sp.eye(1)]
    weights = [Rs[l + 1] * u * Rs[l].T for l in range(L)]
    Kx = explicit_ntk(weights, x, xp)[0].subs(u, s ** sp.Rational(1, L))
    K4 = s ** (2 - sp.Rational(2, L)) * ((x.T * xp)[0] + (L - 1) * (beta.T * x)[0] * (beta.T * xp)[0])
    check(f"one output, L={L}: K = s^(2-2/L) [x.x' + (L-1)(b.x)(b.x')]", sp.simplify(Kx - K4) == 0)
    if L >= 2:
        K_paper = K4 / s ** (2 - sp.Rational(2, L)) * s ** (2 * L - 2)
        check(f"one output, L={L}: the printed prefactor s^(2L-2) is wrong", sp.simplify(Kx - K_paper) != 0)

# 4. the package against the symbolic kernels
try:
    import numpy as np
    from linearnets.theory.ntk import final_ntk, final_ntk_multi
    vals = {t1: sp.Rational(13, 10), t2: sp.Rational(7, 10), m1: sp.Rational(1, 3)}
    X1 = np.array([[0.3, -1.2], [2.0, 0.5]])
    X2 = np.array([[1.1, 0.4], [-0.7, 0.9], [0.2, 0.2]])
    ok = True
    for L in (1, 2, 3):
        Svals = [float((t1 ** L).subs(vals)), float((t2 ** L).subs(vals))]
        V = cayley(m1)
        Vn = np.array(V.subs(vals), dtype=float)
        Un = np.array(U, dtype=float)
        Syx_n = Un @ np.diag(Svals) @ Vn.T
        K = final_ntk_multi(X1, X2, Syx_n, L)
        Kf = formula_ntk(U, [t1 ** L, t2 ** L], V, L, x, xp).subs(vals)
        for mu in range(2):
            for nu in range(3):
                sub = {x[0]: X1[mu, 0], x[1]: X1[mu, 1], xp[0]: X2[nu, 0], xp[1]: X2[nu, 1]}
                ref = np.array(Kf.subs(sub), dtype=float)
                ok &= np.allclose(K[mu, nu], ref, rtol=1e-12, atol=1e-12)
        b = np.array([0.6, 0.8])
        Ks = final_ntk(X1, X2, b, 2.5, L)
        ref = 2.5 ** (2 - 2 / L) * (X1 @ X2.T + (L - 1) * np.outer(X1 @ b, X2 @ b))
        ok &= np.allclose(Ks, ref, rtol=1e-13)
    check("linearnets.final_ntk(_multi) match the symbolic kernels", bool(ok))
except ImportError as exc:  # pragma: no cover
    check(f"import ({exc})", False)

if FAILURES:
    print(f"{len(FAILURES)} check(s) failed")
    sys.exit(1)
print("all checks passed")
