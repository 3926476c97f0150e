"""Symbolic checks of theory/lambda_balanced.md (exits non-zero on failure).

1. For balanced weights (D = 2, N = 1, C = 1, symbolic), gradient flow of Q = [W1^T; W2]
   equals eta (F Q - 1/2 Q Q^T Q).
2. The scalar Riccati solution M = e^{2 eta f t} q^2 / (1 + q^2 G), G = eta (e^{2 eta f t} - 1)/(2 eta f),
   solves dM/dt = eta (2 f M - M^2), and G -> eta t at f = 0.
3. The matrix solution M = A S^{-1} A^T solves the Riccati equation (numerically, random
   2 x 2 F and Q0, derivative by sympy).
4. init_lambda_balanced's singular values: s2^2 - s1^2 = lambda and s1 s2 = p; their large-lambda
   expansion (the 1/lambda drift).
5. The NTK formula for C = 1, N = 2, D = 2 from the gradients.
6. linearnets.lambda_balanced_flow against the symbolic scalar solution.
"""
import pathlib
import sys

import sympy as sp

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from _check import check, check_zero, finish  # noqa: E402

eta, lam, s1, s2, t = sp.symbols("eta lambda s1 s2 t", real=True)
a, b, c = sp.symbols("a b c", real=True)
# 1. W1 = (a, b) (1 x 2), W2 = c (1 x 1); Syx = (s1, s2); balance c^2 - (a^2 + b^2) = lambda
W1 = sp.Matrix([[a, b]])
W2 = sp.Matrix([[c]])
Syx = sp.Matrix([[s1, s2]])
E = Syx - W2 * W1
dW1 = eta * W2.T * E
dW2 = eta * E * W1.T
Q = sp.Matrix.vstack(W1.T, W2)
F = sp.Matrix(sp.BlockMatrix([[-lam / 2 * sp.eye(2), Syx.T], [Syx, lam / 2 * sp.eye(1)]]))
rhs = eta * (F * Q - Q * Q.T * Q / 2)
flow = sp.Matrix.vstack(dW1.T, dW2)
diff = (rhs - flow).subs(lam, c ** 2 - a ** 2 - b ** 2)
check("balanced: dQ/dt = eta (F Q - 1/2 Q Q^T Q)", sp.simplify(diff) == sp.zeros(3, 1))

# 2. scalar Riccati
f, q = sp.symbols("f q", positive=True)
G = eta * (sp.exp(2 * eta * f * t) - 1) / (2 * eta * f)
M = sp.exp(2 * eta * f * t) * q ** 2 / (1 + q ** 2 * G)
check_zero("scalar Riccati: dM/dt = eta (2 f M - M^2)", sp.diff(M, t) - eta * (2 * f * M - M ** 2))
check_zero("G -> eta t at f = 0 (no F^{-1} needed)", sp.limit(G, f, 0) - eta * t)
check_zero("M(0) = q^2", M.subs(t, 0) - q ** 2)

# 3. matrix solution, numerically at random rationals
import numpy as np  # noqa: E402
import scipy.linalg  # noqa: E402

rng = np.random.default_rng(0)
Fn = rng.standard_normal((3, 3))
Fn = Fn + Fn.T
Q0 = rng.standard_normal((3, 2))
et = 0.7


def Mnum(tt):
    A = scipy.linalg.expm(et * Fn * tt) @ Q0
    w, V = np.linalg.eigh(Fn)
    g = et * np.expm1(2 * et * w * tt) / (2 * et * w)
    S = np.eye(2) + Q0.T @ (V * g) @ V.T @ Q0
    return A @ np.linalg.solve(S, A.T)


h = 1e-5
tt = 0.8
dM = (Mnum(tt + h) - Mnum(tt - h)) / (2 * h)
Mt = Mnum(tt)
check("matrix solution solves dM/dt = eta (F M + M F - M^2) (central difference, 1e-8)",
      np.abs(dM - et * (Fn @ Mt + Mt @ Fn - Mt @ Mt)).max() < 1e-7 * max(1, np.abs(dM).max()))

# 4. singular values of init_lambda_balanced
p = sp.symbols("p", positive=True)
L = sp.symbols("L", positive=True)
root = sp.sqrt(L ** 2 + 4 * p ** 2)
S1sq, S2sq = (root - L) / 2, (root + L) / 2
check_zero("s2^2 - s1^2 = lambda", S2sq - S1sq - L)
check_zero("s1 s2 = p", sp.sqrt(sp.expand(S1sq * S2sq)) - p)
check_zero("stable form s1^2 = p^2 / ((root + lambda)/2)", S1sq - p ** 2 / S2sq)
check_zero("s1^2 = p^2/lambda - p^4/lambda^3 + O(lambda^-5)",
           sp.series(S1sq, L, sp.oo, 5).removeO() - (p ** 2 / L - p ** 4 / L ** 3))
check_zero("s2^2 = lambda + p^2/lambda + O(lambda^-3)", sp.series(S2sq, L, sp.oo, 3).removeO() - (L + p ** 2 / L))

# 5. NTK, C = 1, N = 2, D = 2
A1 = sp.Matrix(2, 2, sp.symbols("u0:4"))
B2 = sp.Matrix(1, 2, sp.symbols("v0:2"))
x = sp.Matrix(sp.symbols("x0:2"))
xp = sp.Matrix(sp.symbols("z0:2"))
fx = (B2 * A1 * x)[0]
fxp = (B2 * A1 * xp)[0]
params = list(A1) + list(B2)
K = sum(sp.diff(fx, v) * sp.diff(fxp, v) for v in params)
Kform = (x.T * A1.T * A1 * xp)[0] + (B2 * B2.T)[0] * (x.T * xp)[0]
check_zero("NTK = x^T W1^T W1 x' + W2 W2^T x^T x'", K - Kform)

# 6. the package against the scalar (D = C = N = 1) solution
import linearnets as ln  # noqa: E402

w1, w2, sv, lv = 0.3, 0.5, 1.7, 0.5 ** 2 - 0.3 ** 2
Fs = np.array([[-lv / 2, sv], [sv, lv / 2]])
tv = np.array([0.0, 0.4, 2.0, 9.0])
W, A_, B_ = ln.lambda_balanced_flow(tv, np.array([[w1]]), np.array([[w2]]), np.array([[sv]]), eta=0.6)
ref = []
for tt in tv:
    Aq = scipy.linalg.expm(0.6 * Fs * tt) @ np.array([[w1], [w2]])
    Gm = 0.5 * np.linalg.solve(Fs, scipy.linalg.expm(2 * 0.6 * Fs * tt) - np.eye(2))
    S = 1 + (np.array([[w1, w2]]) @ Gm @ np.array([[w1], [w2]]))[0, 0]
    ref.append((Aq @ Aq.T / S)[1, 0])
check("lambda_balanced_flow = the expm / F^{-1} formula (nonsingular F)", np.allclose(W[:, 0, 0], ref, rtol=1e-12))
finish()
