"""Symbolic check of theory/transfer.md (exits non-zero on failure)."""

import sympy as sp

from _check import check, check_zero, finish  # noqa: E402  (theory/_check.py, beside this script)


A, P, D, k, lam, c, s, L, al = sp.symbols("A P D kappa lambda c s L alpha", positive=True)

# spectrum of M = Aββᵀ + I (D = 3, β = e1 rotated by an angle)
t = sp.Symbol("t", real=True)
beta = sp.Matrix([sp.cos(t), sp.sin(t), 0])
perp = sp.Matrix([-sp.sin(t), sp.cos(t), 0])
M = A * beta * beta.T + sp.eye(3)
check_zero("M β = (1 + A) β", (M * beta - (1 + A) * beta).applyfunc(sp.simplify).norm() ** 2)
check_zero("M v = v for v ⊥ β", (M * perp - perp).applyfunc(sp.simplify).norm() ** 2)
# E_x'[x'x'ᵀ] = I makes the integral operator act as M on coefficient vectors: T(v·x) = (Mv)·x

lam1 = 1 + A
eq = lam + k * (lam1 / (P * lam1 + k) + (D - 1) / (P + k)) - k
gamma = P * lam1 ** 2 / (P * lam1 + k) ** 2 + (D - 1) * P / (P + k) ** 2
stable = lam + k ** 2 * (lam1 / (P * lam1 + k) ** 2 + (D - 1) / (P + k) ** 2)
# κ(1-γ) − stable = (κ equation residual) × something: verify it vanishes on the root
check_zero("κ(1 − γ) = λ + κ²Σλ/(Pλ+κ)² on the κ equation",
      sp.simplify(k * (1 - gamma) - stable + eq))

# conditioning forms used by transfer_kappa (theory/transfer.md, "Conditioning")
bb = lam1 * (P - 1) + P - D + 1
cc = P * lam1 * (P - D)
check_zero("1 − λ1/(Pλ1+κ) − (D−1)/(P+κ) = (κ² + bκ + c)/((Pλ1+κ)(P+κ))",
           sp.simplify(1 - lam1 / (P * lam1 + k) - (D - 1) / (P + k)
                       - (k ** 2 + bb * k + cc) / ((P * lam1 + k) * (P + k))))
m_k = k / (P + k / lam1) + (D - 1) * k / (P + k)
check_zero("m(κ) = κ Σλ/(Pλ+κ) = Σ κ/(P + κ/λ)",
           sp.simplify(m_k - k * (lam1 / (P * lam1 + k) + (D - 1) / (P + k))))
check_zero("δ − m(λ + δ) at δ = κ − λ is the κ equation", sp.simplify((k - lam) - m_k + eq))
r1, r2 = k / (P * lam1 + k), k / (P + k)
Eg_ratio = k * (al ** 2 * r1 ** 2 + (1 - al ** 2) * r2 ** 2) / (lam + lam1 * r1 ** 2 + (D - 1) * r2 ** 2)
Eg_stable = k ** 3 * (al ** 2 / (P * lam1 + k) ** 2 + (1 - al ** 2) / (P + k) ** 2) / stable
check_zero("E_g in the ratios r = κ/(Pλ+κ) equals the stable form", sp.simplify(Eg_ratio - Eg_stable))

# isotropic, ridgeless
iso = {A: 0, lam: 0}
check_zero("A = 0: κ = D − P solves the equation", sp.simplify(eq.subs(iso).subs(k, D - P)))
Eg = (k ** 2 * (al ** 2 / (P * lam1 + k) ** 2 + (1 - al ** 2) / (P + k) ** 2)) / (1 - gamma)
check_zero("A = 0: E_g = 1 − P/D", sp.simplify(Eg.subs(iso).subs(k, D - P) - (1 - P / D)))
noise = sp.Symbol("noise", positive=True)
check_zero("A = 0: noise term = noise P/(D − P)",
      sp.simplify((noise * gamma / (1 - gamma)).subs(iso).subs(k, D - P) - noise * P / (D - P)))

# scale c with ridge λ == ridge λ/c (2×2 kernel matrix, symbolic)
K = sp.Matrix(2, 2, sp.symbols("k11 k12 k12 k22"))
kx = sp.Matrix(1, 2, sp.symbols("q1 q2"))
f1 = c * kx * (c * K + lam * sp.eye(2)).inv()
f2 = kx * (K + lam / c * sp.eye(2)).inv()
check_zero("c K with ridge λ == K with ridge λ/c", (f1 - f2).applyfunc(sp.simplify).norm() ** 2)

# final NTK = scale · xᵀ(Aββᵀ + I)x' with A = L − 1, scale = s^{2−2/L}
xb, xpb, xx = sp.symbols("xb xpb xx")
ntk = s ** (2 - 2 / L) * (xx + (L - 1) * xb * xpb)
check_zero("final NTK spike A = L − 1", sp.simplify(ntk - s ** (2 - 2 / L) * ((L - 1) * xb * xpb + xx)))

# E_g monotone in A (sign set by α): dE/dA via implicit differentiation, sampled exactly
dk_dA = -sp.diff(eq, A) / sp.diff(eq, k)
dE = sp.diff(Eg, A) + sp.diff(Eg, k) * dk_dA
good = True
for Pv, Dv, Av, lv in [(10, 40, 3, 0), (30, 40, 1, 0), (5, 100, 20, 0), (60, 40, 2, 1), (20, 50, 5, 3)]:
    kv = sp.nsolve(eq.subs({P: Pv, D: Dv, A: Av, lam: lv}), k, Dv)
    sub = {P: Pv, D: Dv, A: Av, lam: lv, k: kv}
    d1, d0 = dE.subs(sub).subs(al, 1), dE.subs(sub).subs(al, 0)
    good &= bool(d1 < 0) and bool(d0 > 0)
check("dE_g/dA < 0 at α = 1 and > 0 at α = 0 (sampled)", good)
finish()
