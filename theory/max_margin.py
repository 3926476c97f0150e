"""Symbolic checks of theory/max_margin.md (exits non-zero on failure).

1. Least-distance programming by NNLS: with E = [Z^T; 1^T], f = e_{D+1}, rho = E u - f,
   g = E^T rho: |rho|^2 = u.g - rho_{D+1}, and Z w - 1 = g/(1 - sum u) for
   w = Z^T u/(1 - sum u); g = Z Z^T u - (1 - sum u) 1.
2. A rational example: the KKT point of min |w|^2 s.t. Z w >= 1 with a known support set,
   against linearnets.max_margin_direction.
"""
import pathlib
import sys

import sympy as sp

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from _check import check, check_zero, finish  # noqa: E402

P, D = 3, 2
Z = sp.Matrix(P, D, sp.symbols(f"z0:{P * D}", real=True))
u = sp.Matrix(sp.symbols(f"u0:{P}", nonnegative=True))
E = Z.T.col_join(sp.ones(1, P))
f = sp.zeros(D + 1, 1)
f[D] = 1
rho = E * u - f
g = E.T * rho
su = sum(u)
check_zero("|rho|^2 = u.g - rho_{D+1}", sp.expand(rho.dot(rho) - (u.dot(g) - rho[D])))
check("g = Z Z^T u - (1 - sum u) 1", sp.expand(g - (Z * Z.T * u - (1 - su) * sp.ones(P, 1))) == sp.zeros(P, 1))
w = Z.T * u / (1 - su)
check("Z w - 1 = g/(1 - sum u) for w = Z^T u/(1 - sum u)",
      sp.simplify(Z * w - sp.ones(P, 1) - g / (1 - su)) == sp.zeros(P, 1))

# 2. rational example: z1 = (2, 1), z2 = (1, 3), z3 = (3, 3) (y x, labels folded in);
# support set {z1, z2}: w solves z1.w = z2.w = 1
Zv = sp.Matrix([[2, 1], [1, 3], [3, 3]])
wv = sp.Matrix(2, 1, sp.symbols("w0:2"))
sol = sp.solve([(Zv[0, :] * wv)[0] - 1, (Zv[1, :] * wv)[0] - 1], list(wv))
ws = sp.Matrix([sol[wv[0]], sol[wv[1]]])
al = (Zv[:2, :].T).solve(ws)                      # w = alpha1 z1 + alpha2 z2
check("KKT of the example: alpha >= 0, z3.w >= 1, w = Z_S^T alpha",
      all(a >= 0 for a in al) and (Zv[2, :] * ws)[0] >= 1)

import numpy as np  # noqa: E402

import linearnets as ln  # noqa: E402

yv = np.array([1.0, -1.0, 1.0])
X = np.array(Zv, dtype=float) * yv[:, None]      # x_mu = y_mu z_mu
got = ln.max_margin_direction(X, yv)
exact = np.array([float(v) for v in ws / ws.norm()])
check("linearnets.max_margin_direction = the exact KKT point (1e-14)", np.allclose(got, exact, rtol=0, atol=1e-14))
finish()
