"""Symbolic check of theory/multimode.md (exits non-zero on failure)."""

import sympy as sp

from _check import check_zero, finish  # noqa: E402  (theory/_check.py, beside this script)


eta, t = sp.symbols("eta t", positive=True)
s1, s2 = sp.symbols("s1 s2", positive=True)
L = 3
# c_α = k_α^L with k_α(t) > 0, so that Λ^{1/L} = diag(k) and every power is polynomial
k1, k2 = sp.Function("k1")(t), sp.Function("k2")(t)
c1, c2 = k1 ** L, k2 ** L
# two modes; U = I_2 (C = 2), V and the hidden frames: rotations with rational entries


def rot3(cs, sn):
    return sp.Matrix([[cs, -sn, 0], [sn, cs, 0], [0, 0, 1]])


V = rot3(sp.Rational(3, 5), sp.Rational(4, 5))[:, :2]
U = sp.eye(2)
R = [V, rot3(sp.Rational(5, 13), sp.Rational(12, 13))[:, :2],
     rot3(sp.Rational(8, 17), sp.Rational(-15, 17))[:, :2], U]
Lam = lambda q: sp.diag(k1 ** (L * q), k2 ** (L * q))       # Λ^q with Λ = diag(c)
W = [R[l + 1] * Lam(sp.Rational(1, L)) * R[l].T for l in range(L)]
S = sp.diag(s1, s2)
Syx = U * S * V.T
Wend = W[2] * W[1] * W[0]
check_zero("end-to-end map = U Λ Vᵀ", (Wend - U * Lam(1) * V.T).applyfunc(sp.expand).norm() ** 2)

E = Syx - Wend
# dc/dt = ηLc^{2-2/L}(s - c)  <=>  dk/dt = η k^{L-1}(s - k^L)   (c = k^L)
rate = {sp.Derivative(k1, t): eta * k1 ** (L - 1) * (s1 - c1),
        sp.Derivative(k2, t): eta * k2 ** (L - 1) * (s2 - c2)}
check_zero("dk/dt = ηk^{L-1}(s-k^L) is dc/dt = ηLc^{2-2/L}(s-c)",
      sp.expand(sp.diff(c1, t).subs(rate) - eta * L * k1 ** (2 * L - 2) * (s1 - c1)))


def partial(lo, hi, n):
    """W_hi ⋯ W_lo (1-based inclusive); identity of size n if empty."""
    out = None
    for k in range(lo, hi + 1):
        out = W[k - 1] if out is None else W[k - 1] * out
    return sp.eye(n) if out is None else out


for l in range(1, L + 1):
    above = partial(l + 1, L, 2)
    below = partial(1, l - 1, 3)
    grad = eta * above.T * E * below.T                     # −η ∂L/∂W_l
    dW = sp.diff(W[l - 1], t).subs(rate)
    check_zero(f"layer {l}: gradient flow = d/dt of the aligned form with dc/dt = ηLc^(2-2/L)(s-c)",
          (grad - dW).applyfunc(sp.expand).norm() ** 2)

# NTK of the aligned network against the explicit parameter-gradient sum (C = 2, D = 3)
x = sp.Matrix(sp.symbols("x0:3"))
xp = sp.Matrix(sp.symbols("y0:3"))
K = sp.zeros(2, 2)
for l in range(1, L + 1):
    above = partial(l + 1, L, 2)
    below = partial(1, l - 1, 3)
    K += above * above.T * (below * x).dot(below * xp)
A = lambda l: sp.eye(2) if l == L else U * Lam(sp.Rational(2 * (L - l), L)) * U.T
B = lambda l: sp.eye(3) if l == 1 else V * Lam(sp.Rational(2 * (l - 1), L)) * V.T
Kf = sum((A(l) * (x.T * B(l) * xp)[0] for l in range(1, L + 1)), sp.zeros(2, 2))
check_zero("NTK = Σ_l A_l ⊗ xᵀB_l x'", (K - Kf).applyfunc(sp.expand).norm() ** 2)

# learning-time asymptotics: L >= 3 plateau integral and the L = 2 delay ln 2/(η s)
c, c0, s, Ls = sp.symbols("c c0 s L", positive=True)
lead = sp.integrate(1 / (eta * 3 * s * c ** (2 - sp.Rational(2, 3))), (c, c0, sp.oo))
check_zero("L = 3: ∫ dc/(ηLs c^{2-2/L}) from c0 = c0^{-1/3}/(η s)", sp.simplify(lead - c0 ** sp.Rational(-1, 3) / (eta * s)))
t2 = lambda cc0: sp.log(s / cc0 - 1) / (2 * eta * s)     # exact L = 2 half time
check_zero("L = 2: halving σ (c0 -> c0/4) delays by ln2/(η s) as c0 -> 0",
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
check_zero("finite σ: u² − s²/u² = δ", sp.simplify(u2 - sv ** 2 / u2 - dl))
check_zero("finite σ: the final state interpolates, aᵀW = sβᵀ",
      (a_inf.T * W_inf - sv * bt.T).applyfunc(sp.simplify).norm() ** 2)
res = a_inf * a_inf.T - W_inf * W_inf.T - D0
check_zero("finite σ: conservation aaᵀ − WWᵀ = D0 holds to O(σ⁴)",
      sum(sp.simplify(sp.series(e, sig, 0, 4).removeO()) ** 2 for e in res))
M_state = W_inf.T * W_inf + u2 * sp.eye(2)
M_form = (sv ** 2 / u2) * bt * bt.T + Pp * W0.T * Q * W0 * Pp + u2 * sp.eye(2)
check_zero("finite σ: M_∞ formula equals the state's WᵀW + |a|²I to O(σ³)",
      sum(sp.simplify(sp.series(e, sig, 0, 3).removeO()) ** 2 for e in (M_state - M_form)))
check_zero("finite σ: first order u² = s + δ/2",
      sp.simplify(sp.series((sp.Symbol("d") + sp.sqrt(sp.Symbol("d") ** 2 + 4 * sv ** 2)) / 2,
                            sp.Symbol("d"), 0, 2).removeO() - sv - sp.Symbol("d") / 2))
finish()
