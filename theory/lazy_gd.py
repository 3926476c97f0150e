"""Symbolic checks of theory/lazy_gd.md (exits non-zero on failure).

1. A gradient-descent step of a model linear in its parameters, F = F0 + J (theta - theta0),
   moves the outputs by c K (Y - F), c = lr/(alpha^2 P), K = J J^T.
2. q^k r0 solves r_{k+1} = q r_k; g_k = (1 - q^k)/lam solves g_{k+1} - g_k = c q^k
   (and c k on the null space); |q| < 1 iff 0 < lr < 2 alpha^2 P / lam.
3. (1 - c lam)^(t/lr) -> e^{-lam t/(alpha^2 P)} as lr -> 0.
4. linearnets.lazy_prediction_gd against exact rational matrix powers (singular K, a test point).
"""
import pathlib
import sys

import sympy as sp

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from _check import check, check_zero, finish  # noqa: E402

lr, alpha, lam, t = sp.symbols("lr alpha lambda t", positive=True)
k = sp.symbols("k", integer=True, nonnegative=True)
P = 2
c = lr / (alpha ** 2 * P)

# 1. the linearised step, exactly
J = sp.Matrix(2, 3, sp.symbols("j0:6"))
Jq = sp.Matrix(1, 3, sp.symbols("h0:3"))                 # a test point's Jacobian
th = sp.Matrix(sp.symbols("th0:3"))
th0 = sp.Matrix(sp.symbols("s0:3"))
F0 = sp.Matrix(sp.symbols("f0:2"))
Y = sp.Matrix(sp.symbols("y0:2"))
F = F0 + J * (th - th0)
loss = (Y - F).dot(Y - F) / (2 * alpha ** 2 * P)
th1 = th - lr * sp.Matrix([sp.diff(loss, v) for v in th])
F1 = F0 + J * (th1 - th0)
check("training outputs: F_{k+1} = F_k + c K (Y - F_k), K = J J^T",
      sp.simplify(F1 - F - c * J * J.T * (Y - F)) == sp.zeros(2, 1))
check("test outputs: F_{k+1}(x) = F_k(x) + c K(x, X)(Y - F_k(X))",
      sp.simplify(Jq * (th1 - th) - c * Jq * J.T * (Y - F)) == sp.zeros(1, 1))

# 2. the eigen-mode recursions (q as a symbol, lam = (1 - q)/c)
qs = sp.symbols("q", positive=True)
r0 = sp.symbols("r0")
check_zero("r_k = q^k r0 solves r_{k+1} = q r_k", sp.powsimp(qs ** (k + 1) * r0 - qs * (qs ** k * r0)))
g = (1 - qs ** k) / lam
gdiff = sp.powsimp(sp.expand((g.subs(k, k + 1) - g - c * qs ** k).subs(lam, (1 - qs) / c) * (1 - qs)))
check_zero("g_k = (1 - q^k)/lam: g_{k+1} - g_k = c q^k", gdiff)
g = (1 - (1 - c * lam) ** k) / lam
check_zero("g_0 = 0", g.subs(k, 0))
check_zero("g_k -> c k as lam -> 0 (the null space)", sp.limit(g.subs(k, 5), lam, 0) - 5 * c)
xv = sp.symbols("x", real=True)
check("|1 - x| < 1 iff 0 < x < 2 (x = c lam, increasing in lr: lr < 2 alpha^2 P / lam)",
      sp.solveset(sp.Abs(1 - xv) < 1, xv, sp.S.Reals) == sp.Interval.open(0, 2))

# 3. the flow limit
h = sp.symbols("h", positive=True)
expr = (1 - h * lam / (alpha ** 2 * P)) ** (t / h)
check_zero("(1 - lr lam/(alpha^2 P))^(t/lr) -> exp(-lam t/(alpha^2 P)) as lr -> 0",
           sp.limit(expr, h, 0, "+") - sp.exp(-lam * t / (alpha ** 2 * P)))

# 4. the implementation against exact matrix powers
import numpy as np  # noqa: E402

import linearnets as ln  # noqa: E402

K = sp.Matrix([[2, 2, 0], [2, 2, 0], [0, 0, 1]])       # singular
Kq = sp.Matrix([[1, 3, 1]])                            # partly on K's null space
F0v = sp.Matrix([sp.Rational(1, 3), -1, sp.Rational(1, 2)])
Yv = sp.Matrix([1, sp.Rational(1, 2), -2])
lrv, av, Pv = sp.Rational(9, 10), sp.Rational(6, 5), 3
cv = lrv / (av ** 2 * Pv)
A = sp.eye(3) - cv * K
steps = [0, 1, 2, 7, 40]
tr, te = ln.lazy_prediction_gd(steps, np.array(K, dtype=float), np.array(Kq, dtype=float),
                               np.array(Yv, dtype=float)[:, 0], np.array(F0v, dtype=float)[:, 0],
                               [0.25], lr=float(lrv), alpha=float(av))
ok = True
for i, kv in enumerate(steps):
    ex_tr = Yv + A ** kv * (F0v - Yv)
    S = sp.zeros(3, 3)
    for j in range(kv):
        S += A ** j
    ex_te = sp.Rational(1, 4) + (Kq * cv * S * (Yv - F0v))[0]
    ok &= np.allclose(tr[i, :, 0], [float(e) for e in ex_tr], rtol=1e-13, atol=1e-14)
    ok &= abs(te[i, 0, 0] - float(ex_te)) <= 1e-12 * max(1.0, abs(float(ex_te)))
check("linearnets.lazy_prediction_gd = exact rational powers (singular K, test point off its range)", ok)
finish()
