"""Symbolic check of theory/unwhitened.md (exits non-zero on failure)."""

import sympy as sp

from _check import check_zero, finish  # noqa: E402  (theory/_check.py, beside this script)


N, D = 2, 3
eta, s, t = sp.symbols("eta s t", positive=True)
W = sp.Matrix(N, D, lambda i, j: sp.Symbol(f"W{i}{j}"))
a = sp.Matrix(N, 1, lambda i, j: sp.Symbol(f"a{i}"))
beta = sp.Matrix(D, 1, lambda i, j: sp.Symbol(f"beta{i}"))
Sig = sp.Matrix(D, D, lambda i, j: sp.Symbol(f"S{min(i, j)}{max(i, j)}"))
g = Sig * beta
m1, b = (beta.T * g)[0], (g.T * g)[0]

# linearised flow (1): dW = ηs a gᵀ, da = ηs W g  (from the full gradient minus O(σ³))
E_full = s * g.T - a.T * W * Sig
dW_full, da_full = eta * a * E_full, eta * W * E_full.T
dW, da = eta * s * a * g.T, eta * s * W * g
eps = sp.Symbol("eps")
scale = {**{w: eps * w for w in W}, **{x: eps * x for x in a}}
diff = (dW_full.subs(scale) - eps * dW).applyfunc(sp.expand)
diff_a = (da_full.subs(scale) - eps * da).applyfunc(sp.expand)
check_zero("flow (1) is the gradient up to O(eps^3) at weights eps*(W, a)",
      sum(e.coeff(eps, k) ** 2 for e in list(diff) + list(diff_a) for k in (0, 1, 2)))


def stats(Wm, av):
    wb, wg = Wm * beta, Wm * g
    return sp.Matrix([(av.T * av)[0], (av.T * wb)[0], (av.T * wg)[0],
                      (wb.T * wb)[0], (wb.T * wg)[0], (wg.T * wg)[0]])


x = stats(W, a)
# time derivative of the statistics along (1), by the chain rule
dx = sp.Matrix([sum(sp.diff(xi, w) * dw for w, dw in zip(W, dW))
                + sum(sp.diff(xi, ai) * dai for ai, dai in zip(a, da)) for xi in x])
A = eta * s * sp.Matrix([[0, 0, 2, 0, 0, 0],
                         [m1, 0, 0, 0, 1, 0],
                         [b, 0, 0, 0, 0, 1],
                         [0, 2 * m1, 0, 0, 0, 0],
                         [0, b, m1, 0, 0, 0],
                         [0, 0, 2 * b, 0, 0, 0]])
check_zero("the six statistics close: dx/dt = A x", sp.expand(dx - A * x).norm() ** 2)

lam, B = sp.Symbol("lam"), sp.Symbol("B", positive=True)
Asym = eta * s * sp.Matrix([[0, 0, 2, 0, 0, 0], [sp.Symbol("m"), 0, 0, 0, 1, 0],
                            [B, 0, 0, 0, 0, 1], [0, 2 * sp.Symbol("m"), 0, 0, 0, 0],
                            [0, B, sp.Symbol("m"), 0, 0, 0], [0, 0, 2 * B, 0, 0, 0]])
check_zero("charpoly = λ²(λ² − η²s²b)(λ² − 4η²s²b)",
      sp.expand(Asym.charpoly(lam).as_expr()
                - lam ** 2 * (lam ** 2 - eta ** 2 * s ** 2 * B) * (lam ** 2 - 4 * eta ** 2 * s ** 2 * B)))
check_zero("b a² − h11 is conserved", sp.expand(b * dx[0] - dx[5]))

# exact solution of (1), written with generic sqrt(b) = rb
rb = sp.Symbol("rb", positive=True)
th = eta * s * rb * t
C, S = sp.cosh(th), sp.sinh(th)
a0, wg0 = a, W * g
at = C * a0 + S / rb * wg0
ct = S / rb * a0 + (C - 1) / rb ** 2 * wg0
Wt = W + ct * g.T
sub_b = {rb: sp.sqrt(b)}
res_a = (sp.diff(at, t) - eta * s * Wt * g)
res_W = (sp.diff(Wt, t) - eta * s * at * g.T)
check_zero("a(t) solves da/dt = ηs W g", sp.simplify(res_a.subs(sub_b)).norm() ** 2)
check_zero("W(t) solves dW/dt = ηs a gᵀ", sp.simplify(res_W.subs(sub_b)).norm() ** 2)
check_zero("initial conditions", (at.subs(t, 0) - a0).norm() ** 2 + (Wt.subs(t, 0) - W).norm() ** 2)

# scaled coefficients used in the code
T, tau = sp.symbols("theta tau", positive=True)
phi = lambda z: (1 - sp.exp(-z)) / z
rbs = T / tau
check_zero("sinh θ e^{-θ}/√b = τ φ(2θ)", sp.simplify((sp.sinh(T) * sp.exp(-T) / rbs - tau * phi(2 * T)).rewrite(sp.exp)))
check_zero("(cosh θ − 1) e^{-θ}/b = ½(τ φ(θ))²",
      sp.simplify(((sp.cosh(T) - 1) * sp.exp(-T) / rbs ** 2 - (tau * phi(T)) ** 2 / 2).rewrite(sp.exp)))

# t → ∞ limit: M restricted to span{β, g} ∝ I + ggᵀ/b
v = sp.Matrix(N, 1, lambda i, j: sp.Symbol(f"v{i}"))
Wlim = v * g.T / sp.sqrt(b)
Mlim = Wlim.T * Wlim + (v.T * v)[0] * sp.eye(D)
check_zero("late-time M = |a|²(I + ggᵀ/b)", sp.simplify(Mlim - (v.T * v)[0] * (sp.eye(D) + g * g.T / b)).norm() ** 2)

finish()
