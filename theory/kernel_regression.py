"""Symbolic checks of theory/kernel_regression.md (exits non-zero on failure).

1. App. G: for K_A = X (I + A b b^T) X^T and y = s X b (b in the row span), the kernel
   interpolant is s b.x for every A and every x (symbolic A, s; P = 2 < D = 3, and P = D).
2. Ridge limits: lambda -> 0+ gives the pseudo-inverse solution on a singular kernel,
   lambda f -> k^T y as lambda -> infinity.
3. Alignment identities: ||y y^T||_F = ||y||^2; the (P, C) and (P, P, C, C) definitions
   reduce to the scalar one for C = 1.
4. linearnets.kernel_regression / kernel_alignment agree with exact rational results.
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


A, s, lam = sp.symbols("A s lambda", positive=True)

# 1. App. G with P = 2 < D = 3 (rows not orthogonal: whitening is not needed for this identity)
X = sp.Matrix([[1, 2, 0], [0, 1, -1]])
b = X.T * sp.Matrix([2, 1])
b = b / sp.sqrt((b.T * b)[0])
x = sp.Matrix(sp.symbols("x1 x2 x3"))
M = sp.eye(3) + A * b * b.T
K = X * M * X.T
y = s * X * b
f = (x.T * M * X.T * K.inv() * y)[0]
check("App. G (P < D): kernel interpolant = s b.x for every A, every x",
      sp.simplify(f - s * (b.T * x)[0]) == 0)
X = sp.Matrix([[1, 2], [3, -1]])
b = sp.Matrix([sp.Rational(3, 5), sp.Rational(4, 5)])
M = sp.eye(2) + A * b * b.T
x2 = sp.Matrix(sp.symbols("x1 x2"))
f = (x2.T * M * X.T * (X * M * X.T).inv() * s * X * b)[0]
check("App. G (P = D): kernel interpolant = s b.x for every A", sp.simplify(f - s * (b.T * x2)[0]) == 0)

# 2. ridge limits on a singular kernel K = X X^T of rank 1, P = 2
Xs = sp.Matrix([[1], [2]])
Ks = Xs * Xs.T                         # rank 1
kt = sp.Matrix([[3, 6]])               # k(x) for x = 3: in the range of K
ys = sp.Matrix([1, -1])
f_lam = (kt * (Ks + lam * sp.eye(2)).inv() * ys)[0]
f_pinv = (kt * Ks.pinv() * ys)[0]
check("ridge -> 0+: pseudo-inverse solution", sp.simplify(sp.limit(f_lam, lam, 0, "+") - f_pinv) == 0)
check("ridge -> 0+: equals the min-norm linear fit x * (X^+ y)",
      sp.simplify(f_pinv - 3 * (Xs.pinv() * ys)[0]) == 0)
check("ridge -> infinity: lambda f -> k^T y",
      sp.simplify(sp.limit(lam * f_lam, lam, sp.oo) - (kt * ys)[0]) == 0)

# 3. alignment identities
P = 3
yv = sp.Matrix(sp.symbols("y1:4", real=True))
Ksym = sp.Matrix(P, P, lambda i, j: sp.Symbol(f"k{min(i, j)}{max(i, j)}", real=True))
G = yv * yv.T
frob = lambda Mx: sp.sqrt(sum(e ** 2 for e in Mx))   # noqa: E731
# both sides are non-negative, so compare squares
check("||y y^T||_F = ||y||^2", sp.expand(sum(e ** 2 for e in G) - (yv.T * yv)[0] ** 2) == 0)
A_mat = sum(Ksym[i, j] * G[i, j] for i in range(P) for j in range(P)) / (frob(Ksym) * (yv.T * yv)[0])
A_vec = (yv.T * Ksym * yv)[0] / (frob(Ksym) * (yv.T * yv)[0])
check("<K, yy^T>/(|K| |yy^T|) = y^T K y/(|K| |y|^2)", sp.simplify(A_mat - A_vec) == 0)
# (P, P, 1, 1) kernel with (P, 1) targets: the flattened definition
A_4 = sum(Ksym[i, j] * yv[i] * yv[j] for i in range(P) for j in range(P)) / (frob(Ksym) * (yv.T * yv)[0])
check("(P, P, C, C) definition reduces to the scalar one for C = 1", sp.simplify(A_4 - A_vec) == 0)

# 4. the package against exact rationals
try:
    import numpy as np
    from linearnets.theory.kernels import kernel_alignment, kernel_regression
    Kr = sp.Matrix([[4, 1, 0], [1, 3, 1], [0, 1, 2]])
    Ktr = sp.Matrix([[1, 0, 2], [sp.Rational(1, 2), 1, -1]])
    Yr = sp.Matrix([[1, 2], [0, -1], [3, 1]])
    ok = True
    for ridge in (0, sp.Rational(1, 4)):
        exact = Ktr * (Kr + ridge * sp.eye(3)).inv() * Yr
        got = kernel_regression(np.array(Kr, dtype=float), np.array(Ktr, dtype=float),
                                np.array(Yr, dtype=float), ridge=float(ridge))
        ok &= np.allclose(got, np.array(exact, dtype=float), rtol=1e-13, atol=1e-14)
    yr = sp.Matrix([1, -2, 3])
    exact_A = (yr.T * Kr * yr)[0] / (frob(Kr) * (yr.T * yr)[0])
    ok &= abs(kernel_alignment(np.array(Kr, dtype=float), np.array(yr, dtype=float).ravel())
              - float(exact_A)) < 1e-15
    check("linearnets.kernel_regression / kernel_alignment match exact rationals", bool(ok))
except ImportError as exc:  # pragma: no cover
    check(f"import ({exc})", False)

if FAILURES:
    print(f"{len(FAILURES)} check(s) failed")
    sys.exit(1)
print("all checks passed")
