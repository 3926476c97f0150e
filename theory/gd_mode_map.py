"""Symbolic checks of theory/gd_mode_map.md (exits non-zero on failure).

1. The layer gradient of (1/2)||S - W_L...W_1||_F^2 (whitened data) on rank-one aligned
   matrices W_l = a_l r_l r_{l-1}^T is -(s - c) prod_{j != l} a_j r_l r_{l-1}^T (L = 2, 3).
2. The balanced map, its fixed point s^(1/L), the derivative 1 - lr L s^(2-2/L) there and
   the threshold 2/(L s^(2-2/L)) (L = 1..6); the Hessian of (1/2)(s - prod a)^2.
3. The continuous limit: dc/dt = L c^(2-2/L) (s - c).
4. linearnets.gd_mode_strength against the exact rational iteration.
"""
import pathlib
import sys

import sympy as sp

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from _check import check, check_zero, finish  # noqa: E402

s, lr, a = sp.symbols("s lr a", positive=True)

# 1. explicit matrices: unit vectors with rational entries (3-4-5 and 2-3-6-7 triples)
vecs = [sp.Matrix([sp.Rational(3, 5), sp.Rational(4, 5), 0]),
        sp.Matrix([sp.Rational(2, 7), sp.Rational(3, 7), sp.Rational(6, 7)]),
        sp.Matrix([0, sp.Rational(4, 5), sp.Rational(-3, 5)]),
        sp.Matrix([sp.Rational(6, 7), sp.Rational(-2, 7), sp.Rational(-3, 7)])]
for L in (2, 3):
    al = sp.symbols(f"a1:{L + 1}", positive=True)
    r = vecs[:L + 1]
    S = s * r[L] * r[0].T
    # generic matrices, evaluated on the ansatz after differentiation
    Ws = [sp.Matrix(3, 3, sp.symbols(f"w{l}_0:9")) for l in range(L)]
    W = sp.eye(3)
    for Wl in Ws:
        W = Wl * W
    loss = sum(((S - W)[i, j]) ** 2 for i in range(3) for j in range(3)) / 2
    on = {}
    for l in range(L):
        M = al[l] * r[l + 1] * r[l].T
        on.update({Ws[l][i, j]: M[i, j] for i in range(3) for j in range(3)})
    c = sp.prod(al)
    ok = True
    for l in range(L):
        G = sp.Matrix(3, 3, lambda i, j: sp.diff(loss, Ws[l][i, j])).subs(on)
        expect = -(s - c) * sp.prod([al[j] for j in range(L) if j != l]) * r[l + 1] * r[l].T
        ok &= sp.simplify(G - expect) == sp.zeros(3, 3)
    check(f"L={L}: dL/dW_l = -(s - c) prod_(j!=l) a_j r_l r_(l-1)^T on the aligned ansatz", ok)

# 2. the balanced map, fixed point, derivative, threshold
for L in range(1, 7):
    al = sp.symbols(f"b1:{L + 1}", positive=True)
    c = sp.prod(al)
    loss = (s - c) ** 2 / 2
    step = [al[l] - lr * sp.diff(loss, al[l]) for l in range(L)]
    bal = {v: a for v in al}
    check_zero(f"L={L}: balanced start stays balanced, a' = a + lr (s - a^L) a^(L-1)",
               sum((e.subs(bal) - (a + lr * (s - a ** L) * a ** (L - 1))) ** 2 for e in step))
    g = a + lr * (s - a ** L) * a ** (L - 1)
    astar = s ** sp.Rational(1, L)
    check_zero(f"L={L}: a* = s^(1/L) is a fixed point", g.subs(a, astar) - astar)
    check_zero(f"L={L}: map derivative at a* = 1 - lr L s^(2-2/L)",
               sp.diff(g, a).subs(a, astar) - (1 - lr * L * s ** (2 - sp.Rational(2, L))))
    thr = 2 / (L * s ** (2 - sp.Rational(2, L)))
    check_zero(f"L={L}: derivative -1 exactly at lr* = 2/(L s^(2-2/L))",
               sp.diff(g, a).subs(a, astar).subs(lr, thr) + 1)
    if L in (2, 3):
        H = sp.hessian(loss, al).subs({v: astar for v in al})
        ev = H.eigenvals()
        check(f"L={L}: Hessian of (s - prod a)^2/2 at the balanced minimum: eigenvalues "
              "L s^(2-2/L) (once) and 0",
              any(sp.simplify(e - L * s ** (2 - sp.Rational(2, L))) == 0 and m == 1 for e, m in ev.items())
              and sum(m for e, m in ev.items() if sp.simplify(e) == 0) == L - 1)
    # continuous limit: c = a^L, dc/dt = L a^(L-1) da/dt with da/dt = (s - a^L) a^(L-1)
    cc = sp.symbols("c", positive=True)
    dcdt = (L * a ** (L - 1) * (s - a ** L) * a ** (L - 1)).subs(a, cc ** sp.Rational(1, L))
    check_zero(f"L={L}: lr -> 0: dc/dt = L c^(2-2/L)(s - c)",
               sp.powsimp(sp.expand(dcdt - L * cc ** (2 - sp.Rational(2, L)) * (s - cc)), force=True))

# 4. the implementation against the exact rational iteration (the rationals' digits grow ~ (2L-1)^k)
import numpy as np  # noqa: E402

import linearnets as ln  # noqa: E402

ok = True
for L, a0, sv, lrv in ((2, sp.Rational(1, 2), sp.Rational(3, 2), sp.Rational(1, 10)),
                       (3, sp.Rational(1, 3), 1, sp.Rational(3, 10)),
                       (2, sp.Rational(9, 10), 1, sp.Rational(11, 10))):     # above lr* = 1: oscillates
    av, ref = a0, []
    for _k in range(7):
        ref.append(float(av ** L))
        av = av + lrv * (sv - av ** L) * av ** (L - 1)
    got = ln.gd_mode_strength(np.arange(7), float(sv), float(a0 ** L), depth=L, lr=float(lrv))
    ok &= np.allclose(got, ref, rtol=1e-13, atol=0)
check("linearnets.gd_mode_strength = the exact rational iteration (6 steps, three cases)", ok)
check("linearnets.gd_stability_threshold = 2/(L s^(2-2/L))",
      np.allclose(ln.gd_stability_threshold([0.5, 2.0], depth=3), [2 / (3 * 0.5 ** (4 / 3)), 2 / (3 * 2.0 ** (4 / 3))],
                  rtol=1e-15))
finish()
