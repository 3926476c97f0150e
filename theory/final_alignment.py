"""Symbolic checks of theory/final_alignment.md (exits non-zero on failure).

1. I + (L-1) b b^T has eigenvalues L (once) and 1 (n-1 times), so ||.||_F^2 = L^2 + n - 1.
2. A^2 = L^2/(L^2 + n - 1) for the final NTK on explicit rational whitened data with
   symbolic L and s, for P >= D and P < D (beta in the span).
3. linearnets.final_alignment and kernel_alignment(final_ntk(...)) agree with it.
"""
import pathlib
import sys

import sympy as sp

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from _check import check, finish  # noqa: E402  (theory/_check.py, beside this script)


L, s = sp.symbols("L s", positive=True)

# 1. spectrum of M = I + (L-1) b b^T
for n in range(2, 6):
    b = sp.Matrix([sp.Rational(1, 1)] * n) / sp.sqrt(n)
    M = sp.eye(n) + (L - 1) * b * b.T
    ev = M.eigenvals()
    ok = sp.simplify(sum(k * v for v, k in ev.items()) - (L + n - 1)) == 0
    ok &= set(sp.simplify(v) for v in ev) == {L, 1} or n == 1
    ok &= sp.simplify(sum(k * v ** 2 for v, k in ev.items()) - (L ** 2 + n - 1)) == 0
    check(f"n={n}: eigenvalues of I + (L-1)bb^T are L and 1 (x{n - 1}); sum of squares L^2+n-1", bool(ok))

# 2. explicit whitened data
O3 = sp.Matrix([[2, -2, 1], [2, 1, -2], [1, 2, 2]]) / 3          # rational orthogonal
O4 = sp.Matrix([[1, 1, 1, 1], [1, -1, 1, -1], [1, 1, -1, -1], [1, -1, -1, 1]]) / 2


def alignment_squared(X, beta):
    K = s ** (2 - 2 / L) * (X * X.T + (L - 1) * (X * beta) * (X * beta).T)
    y = s * X * beta
    num = (y.T * K * y)[0] ** 2
    den = sum(k ** 2 for k in K) * (y.T * y)[0] ** 2
    return sp.simplify(num / den)


cases = []
# P >= D: X = sqrt(P) * (orthonormal columns), X^T X = P I
cases.append(("P=4, D=3", 2 * O4[:, :3], O3[:, 0]))
cases.append(("P=3, D=3", sp.sqrt(3) * O3, sp.Matrix([sp.Rational(3, 5), 0, sp.Rational(4, 5)])))
cases.append(("P=3, D=2", sp.sqrt(3) * O3[:, :2], sp.Matrix([sp.Rational(5, 13), sp.Rational(12, 13)])))
# P < D: rows orthogonal with norm sqrt(P), beta in the row span
Xlow = sp.sqrt(2) * O4[:2, :]
bl = Xlow.T * sp.Matrix([3, 4])
cases.append(("P=2, D=4", Xlow, bl / sp.sqrt((bl.T * bl)[0])))
Xlow = sp.sqrt(2) * O3[:, :2].T
bl = Xlow.T * sp.Matrix([1, -2])
cases.append(("P=2, D=3", Xlow, bl / sp.sqrt((bl.T * bl)[0])))
for name, X, beta in cases:
    P, D = X.shape
    assert sp.simplify((beta.T * beta)[0] - 1) == 0
    if P >= D:
        assert sp.simplify(X.T * X - P * sp.eye(D)) == sp.zeros(D, D)
    else:
        assert sp.simplify(X * X.T - P * sp.eye(P)) == sp.zeros(P, P)
    n = min(P, D)
    A2 = alignment_squared(X, beta)
    check(f"{name}: A^2 = L^2/(L^2 + n - 1), n = {n}", sp.simplify(A2 - L ** 2 / (L ** 2 + n - 1)) == 0)

# 3. the package
try:
    import numpy as np
    from linearnets.theory.kernels import kernel_alignment
    from linearnets.theory.ntk import final_alignment, final_ntk
    ok = True
    for _name, X, beta in cases:
        Xn = np.array(X.evalf(30), dtype=float)
        bn = np.array(beta.evalf(30), dtype=float).ravel()
        n = min(Xn.shape)
        for depth in (1, 2, 3, 7):
            A = kernel_alignment(final_ntk(Xn, Xn, bn, 1.7, depth), 1.7 * Xn @ bn)
            ok &= abs(A - final_alignment(depth, n)) < 1e-13
            ok &= abs(final_alignment(depth, n) - depth / (depth ** 2 + n - 1) ** 0.5) < 1e-15
    check("linearnets.final_alignment == kernel_alignment(final_ntk(...))", bool(ok))
except ImportError as exc:  # pragma: no cover
    check(f"import ({exc})", False)

finish()
