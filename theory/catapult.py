"""Symbolic checks of theory/catapult.md (exits non-zero on failure).

1. One gradient-descent step on symbolic W1 (m, D), W2 (1, m), x (D,), for m = 1, 2, 3:
   f' and NTK' are the map of (f, NTK) with r = f - y, whatever the width.
2. With x_sq = 1/n, y = 0: Lewkowycz et al.'s f' = f(1 - eta lam + eta^2 f^2/n),
   lam' = lam + eta f^2 (eta lam - 4)/n.
3. lam - 2 sqrt(x_sq) f = |u - sqrt(x_sq) v|^2; the linearisation r' = (1 - lr lam) r at f = y;
   lam' - lam = lr x_sq r^2 (lr lam - 4) - 4 lr x_sq r y.
4. linearnets.catapult_map against the exact rational iteration.
"""
import pathlib
import sys

import sympy as sp

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from _check import check, check_zero, finish  # noqa: E402

lr, y = sp.symbols("lr y", real=True)


def the_map(f, lam, xsq):
    r = f - y
    return f - lr * lam * r + lr ** 2 * r ** 2 * xsq * f, lam + lr * xsq * r * (lr * lam * r - 4 * f)


D = 2
x = sp.Matrix(sp.symbols(f"x0:{D}", real=True))
xsq = (x.T * x)[0]
for m in (1, 2, 3):
    W1 = sp.Matrix(m, D, sp.symbols(f"p0:{m * D}", real=True))
    W2 = sp.Matrix(1, m, sp.symbols(f"q0:{m}", real=True))
    f = (W2 * W1 * x)[0]
    lam = (W1 * x).dot(W1 * x) + xsq * W2.dot(W2)
    loss = (f - y) ** 2 / 2
    # the NTK is the squared norm of the gradient of f in all parameters
    grad_f = [sp.diff(f, v) for v in list(W1) + list(W2)]
    check_zero(f"m={m}: NTK = |W1 x|^2 + x_sq |W2|^2 = |grad f|^2", sum(g ** 2 for g in grad_f) - lam)
    W1n = W1 - lr * W1.applyfunc(lambda w: sp.diff(loss, w))
    W2n = W2 - lr * W2.applyfunc(lambda w: sp.diff(loss, w))
    fn = (W2n * W1n * x)[0]
    lamn = (W1n * x).dot(W1n * x) + xsq * W2n.dot(W2n)
    mf, ml = the_map(f, lam, xsq)
    check_zero(f"m={m}: f' = f - lr lam r + lr^2 r^2 x_sq f", sp.expand(fn - mf))
    check_zero(f"m={m}: lam' = lam + lr x_sq r (lr lam r - 4 f)", sp.expand(lamn - ml))

# 2. the paper's form
f, lam, n = sp.symbols("f lambda n", positive=True)
mf, ml = the_map(f, lam, 1 / n)
check_zero("y = 0, x_sq = 1/n: f' = f(1 - lr lam + lr^2 f^2/n)",
           (mf - f * (1 - lr * lam + lr ** 2 * f ** 2 / n)).subs(y, 0))
check_zero("y = 0, x_sq = 1/n: lam' = lam + lr f^2 (lr lam - 4)/n",
           (ml - (lam + lr * f ** 2 * (lr * lam - 4) / n)).subs(y, 0))

# 3. the bound, the linearisation, the large-r identity
u = sp.Matrix(sp.symbols("u0:3", real=True))
v = sp.Matrix(sp.symbols("v0:3", real=True))
xs = sp.symbols("x_sq", positive=True)
d = u - sp.sqrt(xs) * v
check_zero("lam - 2 sqrt(x_sq) u.v = |u - sqrt(x_sq) v|^2 >= 0",
           sp.expand(u.dot(u) + xs * v.dot(v) - 2 * sp.sqrt(xs) * u.dot(v) - d.dot(d)))
r = sp.symbols("r", real=True)
fr = y + r
mf, ml = the_map(fr, lam, xs)
check_zero("fixed points f = y (any lam)", mf.subs(r, 0) - y)
check_zero("d r'/d r at r = 0 is 1 - lr lam", sp.diff(mf - y, r).subs(r, 0) - (1 - lr * lam))
check_zero("lam' - lam = lr x_sq r^2 (lr lam - 4) - 4 lr x_sq r y",
           sp.expand(ml - lam - (lr * xs * r ** 2 * (lr * lam - 4) - 4 * lr * xs * r * y)))

# 4. the implementation against the exact rational iteration
import numpy as np  # noqa: E402

import linearnets as ln  # noqa: E402

ok = True
for f0, l0, yv, lrv, xv in ((sp.Rational(1, 2), 2, 0, sp.Rational(1, 10), sp.Rational(1, 100)),
                            (sp.Rational(-3, 10), sp.Rational(3, 2), sp.Rational(1, 5), sp.Rational(2), sp.Rational(1, 20))):
    fv, lv, ref_f, ref_l = f0, sp.Rational(l0), [], []
    for _k in range(7):
        ref_f.append(float(fv))
        ref_l.append(float(lv))
        rv = fv - yv
        fv, lv = fv - lrv * lv * rv + lrv ** 2 * rv ** 2 * xv * fv, lv + lrv * xv * rv * (lrv * lv * rv - 4 * fv)
    gf, gl = ln.catapult_map(np.arange(7), float(f0), float(l0), float(yv), float(lrv), float(xv))
    ok &= np.allclose(gf, ref_f, rtol=1e-13, atol=1e-15) and np.allclose(gl, ref_l, rtol=1e-13, atol=0)
check("linearnets.catapult_map = the exact rational iteration (lazy and catapult lr)", ok)
finish()
