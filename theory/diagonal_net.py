"""Symbolic checks of theory/diagonal_net.md (exits non-zero on failure).

1. q'(z) = asinh(z/2), q(0) = 0, q'' = 1/sqrt(4 + z^2) > 0, q = z^2/4 + O(z^4), and the
   cancellation-free form.
2. w(t) = alpha exp(+-2 eta G(t)) solves the flow (dG/dt = g), and w+^2 - w-^2 = 2 alpha^2 sinh(4 eta G).
3. The dual's gradient is X beta(nu) - y (P = 2, D = 3 symbolic).
4. The small-alpha form alpha^2 q(b/alpha^2) = |b| log(|b|/alpha^2) - |b| + O(alpha^2).
5. linearnets.diagonal_implicit_bias satisfies the KKT conditions.
"""
import pathlib
import sys

import sympy as sp

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from _check import check, check_zero, finish  # noqa: E402

z = sp.Symbol("z", real=True)
q = 2 - sp.sqrt(4 + z ** 2) + z * sp.asinh(z / 2)
check_zero("q'(z) = asinh(z/2)", sp.diff(q, z) - sp.asinh(z / 2))
check_zero("q(0) = 0", q.subs(z, 0))
check_zero("q''(z) = 1/sqrt(4 + z^2)", sp.diff(q, z, 2) - 1 / sp.sqrt(4 + z ** 2))
check_zero("q = z^2/4 - z^4/192 + O(z^6)", sp.series(q, z, 0, 6).removeO() - (z ** 2 / 4 - z ** 4 / 192))
check_zero("q = z asinh(z/2) - z^2/(2 + sqrt(4 + z^2))", q - (z * sp.asinh(z / 2) - z ** 2 / (2 + sp.sqrt(4 + z ** 2))))

al, eta, t = sp.symbols("alpha eta t", positive=True)
G = sp.Function("G")(t)
wp = al * sp.exp(2 * eta * G)
wm = al * sp.exp(-2 * eta * G)
gdot = sp.diff(G, t)
check_zero("dw+/dt = 2 eta w+ g", sp.diff(wp, t) - 2 * eta * wp * gdot)
check_zero("dw-/dt = -2 eta w- g", sp.diff(wm, t) + 2 * eta * wm * gdot)
check_zero("w+^2 - w-^2 = 2 alpha^2 sinh(4 eta G)", (wp ** 2 - wm ** 2 - 2 * al ** 2 * sp.sinh(4 * eta * G)).rewrite(sp.exp))
bb = sp.Symbol("b", positive=True)
mirror = sp.asinh((2 * al ** 2 * sp.sinh(4 * eta * G)) / (2 * al ** 2))
check("grad Q = asinh(beta/(2 alpha^2)) equals the mirror variable 4 eta G (at sample points)",
      all(abs(sp.N((mirror - 4 * eta * G).subs({G: gv, eta: ev, al: av}), 40)) < 1e-30
          for gv, ev, av in ((sp.Rational(3, 7), sp.Rational(5, 3), 2), (-sp.Rational(9, 4), 1, sp.Rational(1, 9)))))

X = sp.Matrix(2, 3, sp.symbols("x0:6", real=True))
nu = sp.Matrix(sp.symbols("n0:2", real=True))
y = sp.Matrix(sp.symbols("y0:2", real=True))
zz = X.T * nu
Phi = 2 * al ** 2 * sum(sp.cosh(v) for v in zz) - (y.T * nu)[0]
grad = sp.Matrix([sp.diff(Phi, v) for v in nu])
beta = sp.Matrix([2 * al ** 2 * sp.sinh(v) for v in zz])
check("dual gradient = X beta(nu) - y", sp.simplify(grad - (X * beta - y)) == sp.zeros(2, 1))

eps = sp.Symbol("epsilon", positive=True)        # eps = alpha^2
small = eps * q.subs(z, bb / eps)
lead = sp.limit(small - (bb * sp.log(bb / eps) - bb), eps, 0)
check_zero("alpha^2 q(b/alpha^2) = b log(b/alpha^2) - b + o(1) as alpha -> 0", lead)

import numpy as np  # noqa: E402

import linearnets as ln  # noqa: E402

rng = np.random.default_rng(0)
Xn = rng.standard_normal((4, 9))
yn = rng.standard_normal(4)
ok = True
for a in (5.0, 0.5, 0.01):
    b = ln.diagonal_implicit_bias(Xn, yn, a)
    gq = np.arcsinh(b / (2 * a * a))
    off = gq - np.linalg.pinv(Xn) @ (Xn @ gq)
    ok &= np.linalg.norm(Xn @ b - yn) < 1e-12 * np.linalg.norm(yn) and np.linalg.norm(off) < 1e-9 * np.linalg.norm(gq)
check("diagonal_implicit_bias: X beta = y and asinh(beta/(2 alpha^2)) in range(X^T)", ok)
finish()
