"""Symbolic check of theory/intermediate.md (exits non-zero on failure)."""
import sys

import sympy as sp

ok = True


def check(name, expr):
    global ok
    good = sp.simplify(expr) == 0
    print(("ok   " if good else "FAIL ") + name)
    ok &= good


# two modes, depth L = 3, explicit orthonormal frames (rotations by symbolic angles)
th, ph, ps = sp.symbols("theta phi psi", real=True)
s1, s2, P = sp.symbols("s1 s2 P", positive=True)
L = 3


def rot3(a):
    return sp.Matrix([[sp.cos(a), -sp.sin(a), 0], [sp.sin(a), sp.cos(a), 0], [0, 0, 1]])


V = rot3(th)[:, :2]                  # D = 3, r = 2
R1 = rot3(ph)[:, :2]                 # hidden width 3
R2 = rot3(ps)[:, :2]
U = sp.eye(2)                        # C = 2
S = sp.diag(s1, s2)
Sp = lambda q: sp.diag(s1 ** q, s2 ** q)
R = [V, R1, R2, U]
W = [R[l + 1] * Sp(sp.Rational(1, L)) * R[l].T for l in range(L)]
H = sp.eye(3)
for l in range(1, L + 1):
    H = W[l - 1] * H
    check(f"H_{l}ᵀH_{l} = V S^(2l/L) Vᵀ", (H.T * H - V * Sp(sp.Rational(2 * l, L)) * V.T)
          .applyfunc(sp.simplify).norm() ** 2)
check("H_L = Σyx", (H - U * S * V.T).applyfunc(sp.simplify).norm() ** 2)

# training set with XᵀX = P I: XV = √P Q, Y Yᵀ = P Q S² Qᵀ, K_l = P^{1-l/L} (YYᵀ)^{l/L}
p = sp.Symbol("p", positive=True)
lam = P * sp.Matrix([s1 ** 2, s2 ** 2])              # eigenvalues of YYᵀ on span Q
K_eig = P * sp.Matrix([s1 ** (2 * p), s2 ** (2 * p)])
check("K_l eigenvalues = P^{1-p} (eigenvalues of YYᵀ)^p",
      sp.powsimp(sp.expand_power_base(K_eig - P ** (1 - p) * lam.applyfunc(lambda e: e ** p),
                                      force=True), force=True).norm() ** 2)

# alignment: both kernels diagonal in the same basis Q
align = (sum(K_eig[i] * lam[i] for i in range(2))
         / sp.sqrt(sum(k ** 2 for k in K_eig) * sum(m ** 2 for m in lam)))
formula = (s1 ** (2 + 2 * p) + s2 ** (2 + 2 * p)) / sp.sqrt((s1 ** (4 * p) + s2 ** (4 * p)) * (s1 ** 4 + s2 ** 4))
check("alignment closed form", sp.simplify(sp.powsimp(align - formula, force=True)))
check("alignment = 1 at p = 1", sp.simplify(formula.subs(p, 1) - 1))
check("alignment = 1 for equal singular values", sp.simplify(formula.subs(s2, s1) - 1))
# monotone in p for a sample of numbers
f = sp.lambdify(p, formula.subs({s1: 3, s2: sp.Rational(1, 2)}))
vals = [f(k / 20) for k in range(1, 21)]
mono = all(b >= a - 1e-15 for a, b in zip(vals, vals[1:]))
print(("ok   " if mono else "FAIL ") + "alignment increases with p (s = 3, 1/2)")
ok &= mono
sys.exit(0 if ok else 1)
