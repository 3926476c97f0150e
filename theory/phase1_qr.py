"""Symbolic checks of theory/phase1_qr.md (exits non-zero on failure).

1. The exact equations of motion (1), (2) of q and r for the two-layer gradient flow,
   with explicit symbolic matrices (N = 2, D = 3, generic unit beta).
2. Their O(eps^2) part under W -> eps W, a -> eps a is the linear system (3).
3. q0 cosh + r0 sinh solves (3); the package's qr_trajectory agrees numerically.
4. E q0, E r0, E r0^2 and var q0 under the Gaussian init, by Isserlis' theorem.
"""
import pathlib
import sys

import sympy as sp

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from _check import check, finish  # noqa: E402  (theory/_check.py, beside this script)


N, D = 2, 3
eta, s, eps, t = sp.symbols("eta s epsilon t", positive=True)
W = sp.Matrix(N, D, lambda i, j: sp.Symbol(f"W{i}{j}"))
a = sp.Matrix(N, 1, lambda i, j: sp.Symbol(f"a{i}"))
b = sp.Matrix(D, 1, lambda i, j: sp.Symbol(f"b{i}"))
unit = (b.T * b)[0] - 1


def mod_unit(expr):
    """Reduce a polynomial modulo ||beta||^2 = 1."""
    expr = sp.expand(expr)
    return sp.reduced(expr, [unit], *b)[1] if expr != 0 else expr


# gradient flow on whitened data, Syx = s beta^T, in the package's conventions
E = s * b.T - a.T * W                   # (1, D) error row  Syx - W_2 W_1 Sxx
dW = eta * a * E                        # dW_1/dt = eta W_2^T E
da = eta * (E * W.T).T                  # dW_2/dt = eta E W_1^T, transposed

u = W * b
q = sp.Rational(1, 2) * ((a.T * a)[0] + (u.T * u)[0])
r = (a.T * u)[0]


def time_derivative(expr):
    out = 0
    for i in range(N):
        out += sp.diff(expr, a[i]) * da[i]
        for j in range(D):
            out += sp.diff(expr, W[i, j]) * dW[i, j]
    return out


dq, dr = time_derivative(q), time_derivative(r)
WTa = W.T * a
# exact equations (1) and (2)
eq1 = eta * (2 * s * r - r ** 2 - (WTa.T * WTa)[0])
eq2 = eta * (2 * s * q - (a.T * W * W.T * W * b)[0] - (a.T * a)[0] * r)
check("exact dq/dt, eq. (1)", mod_unit(dq - eq1) == 0)
check("exact dr/dt, eq. (2)", mod_unit(dr - eq2) == 0)

# O(eps^2) truncation: the linear system (3), and nothing at O(eps^3)
scale = {**{x: eps * x for x in W}, **{x: eps * x for x in a}}
for name, lhs, rhs in (("dq/dt", dq, 2 * eta * s * r), ("dr/dt", dr, 2 * eta * s * q)):
    ser = sp.expand(lhs.xreplace(scale))
    c2 = ser.coeff(eps, 2)
    c3 = ser.coeff(eps, 3)
    c4 = ser.coeff(eps, 4)
    check(f"{name} = 2 eta s (r|q) at O(eps^2)", mod_unit(c2 - rhs) == 0)
    check(f"{name}: no O(eps^3) term, a non-zero O(eps^4) term", c3 == 0 and mod_unit(c4) != 0)

# solution of (3)
q0, r0 = sp.symbols("q0 r0", real=True)
tau = 2 * eta * s * t
qt = q0 * sp.cosh(tau) + r0 * sp.sinh(tau)
rt = r0 * sp.cosh(tau) + q0 * sp.sinh(tau)
check("q(t) solves dq/dt = 2 eta s r", sp.simplify(sp.diff(qt, t) - 2 * eta * s * rt) == 0)
check("r(t) solves dr/dt = 2 eta s q", sp.simplify(sp.diff(rt, t) - 2 * eta * s * qt) == 0)
check("initial values", qt.subs(t, 0) == q0 and rt.subs(t, 0) == r0)
check("q^2 - r^2 conserved", sp.simplify(qt ** 2 - rt ** 2 - (q0 ** 2 - r0 ** 2)) == 0)

try:
    from linearnets.theory.alignment import qr_trajectory
    vals = {q0: sp.Rational(3, 1000), r0: -sp.Rational(1, 1000), s: sp.Rational(7, 5),
            eta: sp.Rational(1, 2)}
    ok = True
    for tv in (0, sp.Rational(1, 10), 2, 50):
        exact_q = sp.N(qt.subs(vals).subs(t, tv), 30)
        exact_r = sp.N(rt.subs(vals).subs(t, tv), 30)
        qn, rn = qr_trajectory(float(tv), 1.4, 3e-3, -1e-3, 0.5)
        ok &= abs(qn - float(exact_q)) <= 1e-13 * float(exact_q)
        ok &= abs(rn - float(exact_r)) <= 1e-13 * float(exact_q)
    check("linearnets.qr_trajectory matches the closed form", bool(ok))
except ImportError as exc:  # pragma: no cover
    check(f"import linearnets ({exc})", False)

# initial moments by Isserlis' theorem
sigma = sp.Symbol("sigma", positive=True)


def gaussian_expectation(expr, variances):
    poly = sp.Poly(sp.expand(expr), *variances.keys())
    total = 0
    for powers, coeff in poly.terms():
        term = coeff
        for (_var, v), k in zip(variances.items(), powers):
            if k % 2:
                term = 0
                break
            term *= sp.factorial2(k - 1) * v ** (k // 2)
        total += term
    return sp.expand(total)


for n, d in ((1, 1), (2, 3), (3, 2)):
    Wn = sp.Matrix(n, d, lambda i, j: sp.Symbol(f"V{i}{j}"))
    an = sp.Matrix(n, 1, lambda i, j: sp.Symbol(f"c{i}"))
    bn = sp.Matrix(d, 1, lambda i, j: sp.Symbol(f"e{i}"))
    unit_n = (bn.T * bn)[0] - 1
    var = {**{x: sigma ** 2 / d for x in Wn}, **{x: sigma ** 2 / n for x in an}}
    un = Wn * bn
    qn = sp.Rational(1, 2) * ((an.T * an)[0] + (un.T * un)[0])
    rn = (an.T * un)[0]

    def red(expr):
        expr = sp.expand(expr)
        return sp.expand(sp.reduced(expr, [unit_n], *bn)[1]) if expr != 0 else expr

    Eq0 = red(gaussian_expectation(qn, var))
    Er0 = red(gaussian_expectation(rn, var))
    Er02 = red(gaussian_expectation(rn ** 2, var))
    varq = red(gaussian_expectation(qn ** 2, var) - Eq0 ** 2)
    check(f"E q0 = sigma^2 (1 + N/D)/2  (N={n}, D={d})",
          sp.simplify(Eq0 - sigma ** 2 * (1 + sp.Rational(n, d)) / 2) == 0)
    check(f"E r0 = 0, E r0^2 = sigma^4/D  (N={n}, D={d})",
          Er0 == 0 and sp.simplify(Er02 - sigma ** 4 / d) == 0)
    check(f"var q0 = sigma^4 (1/N + N/D^2)/2  (N={n}, D={d})",
          sp.simplify(varq - sigma ** 4 * (sp.Rational(1, n) + sp.Rational(n, d ** 2)) / 2) == 0)

try:
    from linearnets.theory.alignment import qr_initial_moments
    qm, rs = qr_initial_moments(3, 2, 0.5)
    check("linearnets.qr_initial_moments matches",
          abs(qm - 0.125 * 2.5) < 1e-15 and abs(rs - 0.25 / 2 ** 0.5) < 1e-15)
except ImportError as exc:  # pragma: no cover
    check(f"import linearnets ({exc})", False)

finish()
