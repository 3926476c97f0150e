"""Symbolic checks of theory/lazy_prediction.md (exits non-zero on failure).

1. For a model linear in its parameters, F = J theta, gradient flow on
   L = (1/(alpha^2 P)) sum 1/2 |y - F|^2 gives dF/dt = (eta/(alpha^2 P)) J J^T (Y - F).
2. The eigen-factor: d/dtau [tau phi(lam tau)] = e^{-lam tau}, tau phi -> tau as lam -> 0,
   and the series of phi.
3. The closed forms solve the ODE (training and test points) for a symbolic 2x2 kernel
   with a null direction, and linearnets.lazy_prediction matches sympy's exact solution.
"""
import pathlib
import sys

import sympy as sp

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from _check import check, check_zero, finish  # noqa: E402

eta, alpha, t, tau, lam, z = sp.symbols("eta alpha t tau lambda z", positive=True)
P = 2
# 1. F = J theta with J (P x 3)
J = sp.Matrix(2, 3, sp.symbols("j0:6"))
th = sp.Matrix(sp.symbols("th0:3"))
Y = sp.Matrix(sp.symbols("y0:2"))
F = J * th
Lss = (Y - F).dot(Y - F) / (2 * alpha ** 2 * P)
dth = -eta * sp.Matrix([sp.diff(Lss, v) for v in th])
lhs = J * dth
rhs = eta / (alpha ** 2 * P) * J * J.T * (Y - F)
check("dF/dt = eta/(alpha^2 P) K (Y - F) with K = J J^T (NTK of F)", sp.simplify(lhs - rhs) == sp.zeros(2, 1))

# 2. the factor tau phi(lam tau) = (1 - e^{-lam tau})/lam
g = (1 - sp.exp(-lam * tau)) / lam
check_zero("d/dtau [(1 - e^{-lam tau})/lam] = e^{-lam tau}", sp.diff(g, tau) - sp.exp(-lam * tau))
check_zero("(1 - e^{-lam tau})/lam -> tau as lam -> 0", sp.limit(g, lam, 0) - tau)
phi = (1 - sp.exp(-z)) / z
check_zero("phi series 1 - z/2 + z^2/6 - z^3/24 + O(z^4)",
           sp.series(phi, z, 0, 4).removeO() - (1 - z / 2 + z ** 2 / 6 - z ** 3 / 24))

# 3. K = [[2, 2], [2, 2]] (one null direction), a test row k = (1, 3) partly on the null space
K = sp.Matrix([[2, 2], [2, 2]])
k = sp.Matrix([[1, 3]])
F0 = sp.Matrix([sp.Rational(1, 3), -1])
Yv = sp.Matrix([1, sp.Rational(1, 2)])
c = eta / (alpha ** 2 * P)
E = (-K * c * t).exp()
Ftr = Yv + E * (F0 - Yv)
check("training ODE dF/dt = c K (Y - F) and F(0) = F0",
      sp.simplify(Ftr.diff(t) - c * K * (Yv - Ftr)) == sp.zeros(2, 1) and sp.simplify(Ftr.subs(t, 0) - F0) == sp.zeros(2, 1))
Vecs = K.eigenvects()
# K^{-1}(I - e^{-K tau}) on the eigenbasis: (1 - e^{-lam tau})/lam, tau on the null space
Vm = sp.Matrix.hstack(*[v[2][0] / v[2][0].norm() for v in Vecs])
lams = [v[0] for v in Vecs]
fac = sp.diag(*[(tau if l == 0 else (1 - sp.exp(-l * tau)) / l) for l in lams])
Fte = (k * Vm * fac * Vm.T * (Yv - F0))[0]
Fte_t = Fte.subs(tau, c * t)
check("test ODE dF(x)/dt = c K(x, X)(Y - F(X)) (null space included)",
      sp.simplify(sp.diff(Fte_t, t) - (c * k * (Yv - Ftr))[0]) == 0)

import numpy as np  # noqa: E402

import linearnets as ln  # noqa: E402

tv = [0.0, 0.7, 3.0, 50.0]
tr, te = ln.lazy_prediction(tv, np.array(K, dtype=float), np.array(k, dtype=float), np.array(Yv, dtype=float)[:, 0],
                            np.array(F0, dtype=float)[:, 0], [0.0], eta=0.9, alpha=1.3)
sub = {eta: sp.Rational(9, 10), alpha: sp.Rational(13, 10)}
ok = True
for i, tt in enumerate(tv):
    ex_tr = [float(v) for v in Ftr.subs(sub).subs(t, tt)]
    ex_te = float(Fte_t.subs(sub).subs(t, tt))
    ok &= np.allclose(tr[i, :, 0], ex_tr, rtol=1e-13, atol=1e-14) and abs(te[i, 0, 0] - ex_te) < 1e-12 * max(1, abs(ex_te))
check("linearnets.lazy_prediction = the exact solution (singular K, test point off its range)", ok)
finish()
