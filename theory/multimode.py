"""Symbolic check of theory/multimode.md (exits non-zero on failure)."""
import sys

import sympy as sp

ok = True


def check(name, expr):
    global ok
    good = sp.simplify(expr) == 0
    print(("ok   " if good else "FAIL ") + name)
    ok &= good


eta, t = sp.symbols("eta t", positive=True)
s1, s2 = sp.symbols("s1 s2", positive=True)
c1, c2 = sp.Function("c1")(t), sp.Function("c2")(t)
L = 3
# two modes; U = I_2 (C = 2), V = first two axes of R^3 rotated, hidden frames rotated
th, ph, ps = sp.symbols("theta phi psi", real=True)


def rot3(a):
    return sp.Matrix([[sp.cos(a), -sp.sin(a), 0], [sp.sin(a), sp.cos(a), 0], [0, 0, 1]])


V = rot3(th)[:, :2]
U = sp.eye(2)
R = [V, rot3(ph)[:, :2], rot3(ps)[:, :2], U]
Lam = lambda q: sp.diag(c1 ** q, c2 ** q)
W = [R[l + 1] * Lam(sp.Rational(1, L)) * R[l].T for l in range(L)]
S = sp.diag(s1, s2)
Syx = U * S * V.T
Wend = W[2] * W[1] * W[0]
check("end-to-end map = U Λ Vᵀ", (Wend - U * Lam(1) * V.T).applyfunc(sp.simplify).norm() ** 2)

E = Syx - Wend
rate = {sp.Derivative(c1, t): eta * L * c1 ** (2 - sp.Rational(2, L)) * (s1 - c1),
        sp.Derivative(c2, t): eta * L * c2 ** (2 - sp.Rational(2, L)) * (s2 - c2)}
for l in range(L):
    above = sp.eye(2) if l == L - 1 else sp.prod([W[k] for k in range(L - 1, l, -1)])
    below = sp.eye(3) if l == 0 else sp.prod([W[k] for k in range(l - 1, -1, -1)])
    grad = eta * above.T * E * below.T                     # -dL/dW_l times eta
    dW = sp.diff(W[l], t).subs(rate)
    check(f"layer {l + 1}: gradient flow = d/dt of the aligned form with dc/dt = ηLc^(2-2/L)(s-c)",
          (grad - dW).applyfunc(lambda e: sp.simplify(sp.powsimp(e, force=True))).norm() ** 2)

# NTK of the aligned network against the explicit parameter-gradient sum (C = 2, D = 3)
x = sp.Matrix(sp.symbols("x0:3"))
xp = sp.Matrix(sp.symbols("y0:3"))
K = sp.zeros(2, 2)
for l in range(L):
    above = sp.eye(2) if l == L - 1 else sp.prod([W[k] for k in range(L - 1, l, -1)])
    below = sp.eye(3) if l == 0 else sp.prod([W[k] for k in range(l - 1, -1, -1)])
    K += above * above.T * (below * x).dot(below * xp)
A = lambda l: sp.eye(2) if l == L else U * Lam(sp.Rational(2 * (L - l), L)) * U.T
B = lambda l: sp.eye(3) if l == 1 else V * Lam(sp.Rational(2 * (l - 1), L)) * V.T
Kf = sum((A(l) * (x.T * B(l) * xp)[0] for l in range(1, L + 1)), sp.zeros(2, 2))
check("NTK = Σ_l A_l ⊗ xᵀB_l x'", (K - Kf).applyfunc(lambda e: sp.simplify(sp.powsimp(sp.expand(e), force=True))).norm() ** 2)

# learning-time asymptotics: L >= 3 plateau integral and the L = 2 delay ln 2/(η s)
c, c0, s, Ls = sp.symbols("c c0 s L", positive=True)
lead = sp.integrate(1 / (eta * 3 * s * c ** (2 - sp.Rational(2, 3))), (c, c0, sp.oo))
check("L = 3: ∫ dc/(ηLs c^{2-2/L}) from c0 = c0^{-1/3}/(η s)", sp.simplify(lead - c0 ** sp.Rational(-1, 3) / (eta * s)))
t2 = lambda cc0: sp.log(s / cc0 - 1) / (2 * eta * s)     # exact L = 2 half time
check("L = 2: halving σ (c0 -> c0/4) delays by ln2/(η s) as c0 -> 0",
      sp.limit(t2(c0 / 4) - t2(c0), c0, 0) - sp.log(2) / (eta * s))

# finite-σ final state of a two-layer scalar network (rational weights scaled by σ)
sig, sv = sp.symbols("sigma s_v", positive=True)
Rr = sp.Rational
W0 = sig * sp.Matrix([[Rr(1, 2), Rr(-1, 3)], [Rr(2, 5), Rr(1, 7)], [Rr(-3, 4), Rr(1, 2)]])
p0 = sig * sp.Matrix([Rr(1, 3), Rr(-1, 2), Rr(1, 5)])
bt = sp.Matrix([1, 0])
v = p0 + W0 * bt
nv = sp.sqrt((v.T * v)[0])
ah = v / nv
D0 = p0 * p0.T - W0 * W0.T
dl = (ah.T * D0 * ah)[0]
u2 = (dl + sp.sqrt(dl ** 2 + 4 * sv ** 2)) / 2
u = sp.sqrt(u2)
Q = sp.eye(3) - ah * ah.T
Pp = sp.eye(2) - bt * bt.T
eps = -(u / sv) * (nv * Q * p0 - Q * W0 * Pp * W0.T * ah)
a_inf = u * ah
W_inf = ((sv / u) * ah + eps) * bt.T + Q * W0 * Pp
check("finite σ: u² − s²/u² = δ", sp.simplify(u2 - sv ** 2 / u2 - dl))
check("finite σ: the final state interpolates, aᵀW = sβᵀ",
      (a_inf.T * W_inf - sv * bt.T).applyfunc(sp.simplify).norm() ** 2)
res = a_inf * a_inf.T - W_inf * W_inf.T - D0
check("finite σ: conservation aaᵀ − WWᵀ = D0 holds to O(σ⁴)",
      sum(sp.simplify(sp.series(e, sig, 0, 4).removeO()) ** 2 for e in res))
M_state = W_inf.T * W_inf + u2 * sp.eye(2)
M_form = (sv ** 2 / u2) * bt * bt.T + Pp * W0.T * Q * W0 * Pp + u2 * sp.eye(2)
check("finite σ: M_∞ formula equals the state's WᵀW + |a|²I to O(σ³)",
      sum(sp.simplify(sp.series(e, sig, 0, 3).removeO()) ** 2 for e in (M_state - M_form)))
check("finite σ: first order u² = s + δ/2",
      sp.simplify(sp.series((sp.Symbol("d") + sp.sqrt(sp.Symbol("d") ** 2 + 4 * sv ** 2)) / 2,
                            sp.Symbol("d"), 0, 2).removeO() - sv - sp.Symbol("d") / 2))
sys.exit(0 if ok else 1)
