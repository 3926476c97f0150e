"""Symbolic checks of theory/mode_dynamics.md; exits non-zero if any check fails.

1. Gradient flow of a balanced, aligned deep linear network on whitened data reduces to
   dc/dt = eta L c^(2-2/L) (s - c) for every mode (L = 1..4, two modes, full symbolic
   2x2 weight matrices differentiated through the loss).
2. The closed forms for L = 1, 2 solve the ODE with c(0) = c0.
3. For L = 3, 4, 5, 6 the elementary partial-fraction form of Phi_m has derivative
   v^m / (1 - v^L), so tau(y) has d tau/dy = 1/(y^(L-1) (1 - y^L)) (rising branch) and
   the decaying branch in z = 1/y has d tau/dz = z^(2L-3)/(1 - z^L); with the chain rule
   dt/dc = 1/(eta L c^(2-2/L) (s - c)).
4. The asymptotic time scales: half time minus plateau time -> K_L (L >= 3), the L = 2
   logarithm, the L = 1 relaxation, and the late-time exponential rate eta L s^(2-2/L).
"""

import sympy as sp

from _check import check, finish  # noqa: E402  (theory/_check.py, beside this script)


def is_zero(expr, symbols=(), samples=3):
    """Exact simplification, backed by high-precision numerical evaluation at sample points."""
    e = sp.simplify(expr)
    if e == 0:
        return True
    vals = [sp.Rational(3, 7), sp.Rational(5, 11), sp.Rational(2, 3), sp.Rational(1, 5)]
    for k in range(samples):
        sub = {x: vals[(k + i) % len(vals)] for i, x in enumerate(symbols)}
        if abs(sp.N(expr.subs(sub), 40)) > sp.Float(10) ** -30:
            return False
    return True


t, eta, s, c0, c = sp.symbols("t eta s c0 c", positive=True)

# ---------------------------------------------------------------- 1. reduction
# Whitened data: L = 1/2 tr Syy - tr(Syx W^T) + 1/2 tr(W W^T), W = W_L ... W_1.
# Two modes: Syx = diag(s1, s2) in the mode bases.  Differentiate the loss with respect to
# every entry of symbolic 2x2 weights, then evaluate on the balanced aligned manifold
# W_l = diag(a1, a2): the flow must stay diagonal and give a' = eta a^(L-1) (s - a^L).
s1, s2, a1, a2 = sp.symbols("s1 s2 a1 a2", positive=True)
Syx = sp.diag(s1, s2)
for L in range(1, 5):
    Ws = [sp.Matrix(2, 2, sp.symbols(f"w{l}_0:4")) for l in range(L)]
    W = sp.eye(2)
    for Wl in Ws:
        W = Wl * W
    loss = -(Syx * W.T).trace() + (W * W.T).trace() / 2
    on = {}
    for Wl in Ws:
        on.update({Wl[0, 0]: a1, Wl[1, 1]: a2, Wl[0, 1]: 0, Wl[1, 0]: 0})
    ok = True
    for Wl in Ws:
        flow = sp.Matrix(2, 2, lambda i, j: -eta * sp.diff(loss, Wl[i, j])).subs(on)
        want = sp.diag(eta * a1 ** (L - 1) * (s1 - a1 ** L), eta * a2 ** (L - 1) * (s2 - a2 ** L))
        ok &= sp.simplify(flow - want) == sp.zeros(2, 2)
    check(f"L={L}: balanced aligned flow stays diagonal with a' = eta a^(L-1) (s - a^L)", ok)
    a = sp.symbols("a", positive=True)
    # c = a^L: c' = L a^(L-1) a' = eta L c^(2-2/L) (s - c)
    cdot = L * a ** (L - 1) * eta * a ** (L - 1) * (s - a ** L)
    target = eta * L * (a ** L) ** (2 - sp.Rational(2, L)) * (s - a ** L)
    check(f"L={L}: c = a^L obeys dc/dt = eta L c^(2-2/L) (s - c)",
          sp.simplify(sp.powsimp(cdot - target, force=True)) == 0)

# ------------------------------------------------------------- 2. closed forms
c1 = s + (c0 - s) * sp.exp(-eta * t)
check("L=1: c = s + (c0 - s) e^{-eta t} solves c' = eta (s - c)",
      sp.simplify(sp.diff(c1, t) - eta * (s - c1)) == 0 and sp.simplify(c1.subs(t, 0) - c0) == 0)
E = sp.exp(2 * eta * s * t)
c2 = s * E / (E - 1 + s / c0)
check("L=2: Saxe sigmoid solves c' = 2 eta c (s - c), c(0) = c0",
      sp.simplify(sp.diff(c2, t) - 2 * eta * c2 * (s - c2)) == 0
      and sp.simplify(c2.subs(t, 0) - c0) == 0)
c2_stable = s / (1 + (s / c0 - 1) * sp.exp(-2 * eta * s * t))
c2_early = c0 * E / (1 + (c0 / s) * (E - 1))
check("L=2: the two stable rewritings used in code equal the sigmoid",
      sp.simplify(c2 - c2_stable) == 0 and sp.simplify(c2 - c2_early) == 0)
t1 = sp.log((c0 - s) / (c - s)) / eta
t2 = sp.log(c * (s - c0) / (c0 * (s - c))) / (2 * eta * s)
check("L=1, 2: inverse t(c) has dt/dc = 1/(eta L c^(2-2/L)(s - c)) and t(c0) = 0",
      sp.simplify(sp.diff(t1, c) - 1 / (eta * (s - c))) == 0
      and sp.simplify(sp.diff(t2, c) - 1 / (2 * eta * c * (s - c))) == 0
      and sp.simplify(t2.subs(c, c0)) == 0)

# ---------------------------------------------------- 3. elementary t(c), L >= 3
v, y, z = sp.symbols("v y z", positive=True)


def phi(m, L, var):
    """Phi_m(v) = -(1/L) sum_k omega_k^(m+1) log(1 - v conj(omega_k)) (real for real v)."""
    out = 0
    for k in range(L):
        w = sp.exp(2 * sp.pi * sp.I * k / L)
        out += -w ** (m + 1) * sp.log(1 - var * sp.conjugate(w)) / L
    return out


for L in (3, 4, 5, 6):
    for m in sorted({1, L - 3}):
        dphi = sp.diff(phi(m, L, v), v)
        check(f"L={L}: d Phi_{m}/dv = v^{m}/(1 - v^L)",
              is_zero(dphi - v ** m / (1 - v ** L), (v,)))
    # Phi_m is real on (0, 1): imaginary parts of conjugate pairs cancel
    val = sp.N(phi(1, L, sp.Rational(1, 3)), 30)
    check(f"L={L}: Phi_1(1/3) is real and equals its series",
          abs(sp.im(val)) < 1e-25 and abs(sp.re(val) - sp.N(sp.Sum(
              sp.Rational(1, 3) ** (2 + sp.Symbol("j") * L) / (2 + sp.Symbol("j") * L),
              (sp.Symbol("j"), 0, 200)).doit(), 30)) < 1e-25)
    # rising branch: tau(y) = (y0^(2-L) - y^(2-L))/(L-2) + Phi_1(y) - Phi_1(y0)
    tau_r = -y ** (2 - L) / (L - 2) + phi(1, L, y)
    check(f"L={L}: rising tau'(y) = 1/(y^(L-1)(1 - y^L))",
          is_zero(sp.diff(tau_r, y) - 1 / (y ** (L - 1) * (1 - y ** L)), (y,)))
    # decaying branch in z = 1/y: tau(z) = Phi_{2L-3}(z) = Phi_{L-3}(z) - z^(L-2)/(L-2)
    tau_d = phi(L - 3, L, z) - z ** (L - 2) / (L - 2)
    check(f"L={L}: decaying tau'(z) = z^(2L-3)/(1 - z^L)",
          is_zero(sp.diff(tau_d, z) - z ** (2 * L - 3) / (1 - z ** L), (z,)))
    # chain rule back to c: y = (c/s)^(1/L), t = tau / (eta s^(2-2/L))
    yc = (c / s) ** sp.Rational(1, L)
    unit = eta * s ** (2 - sp.Rational(2, L))
    dt_dc = (1 / (yc ** (L - 1) * (1 - yc ** L))) * sp.diff(yc, c) / unit
    want = 1 / (eta * L * c ** (2 - sp.Rational(2, L)) * (s - c))
    check(f"L={L}: dt/dc = 1/(eta L c^(2-2/L) (s - c)) from tau(y)",
          is_zero(dt_dc - want, (c, s, eta)))
    zc = (s / c) ** sp.Rational(1, L)
    dt_dc_d = (zc ** (2 * L - 3) / (1 - zc ** L)) * sp.diff(zc, c) / unit
    check(f"L={L}: dt/dc = 1/(eta L c^(2-2/L) (s - c)) from tau(z) (c > s)",
          is_zero((dt_dc_d - want).subs({c: 3, s: 2, eta: sp.Rational(1, 2)}), ()))

# ----------------------------------------------------------- 4. time scales
half2 = sp.log(c * (s - c0) / (c0 * (s - c))).subs(c, s / 2) / (2 * eta * s)
check("L=2: half time = log(s/c0 - 1)/(2 eta s) = log(s/c0)/(2 eta s) + O(c0/s)",
      sp.simplify(half2 - sp.log(s / c0 - 1) / (2 * eta * s)) == 0
      and sp.limit((half2 - sp.log(s / c0) / (2 * eta * s)) * s / c0, c0, 0) == -1 / (2 * eta * s))
half1 = t1.subs(c, s / 2)
check("L=1: half time -> log(2)/eta as c0 -> 0",
      sp.simplify(sp.limit(half1, c0, 0) - sp.log(2) / eta) == 0)
for L in (3, 4, 5):
    y0 = sp.symbols("y0", positive=True)
    yh = sp.Rational(1, 2) ** sp.Rational(1, L)
    tau_half = (y0 ** (2 - L) - yh ** (2 - L)) / (L - 2) + phi(1, L, yh) - phi(1, L, y0)
    plateau = y0 ** (2 - L) / (L - 2)
    K = -yh ** (2 - L) / (L - 2) + phi(1, L, yh)
    rem = sp.series(phi(1, L, y0), y0, 0, 3).removeO()
    check(f"L={L}: tau_half - y0^(2-L)/(L-2) = K_L - y0^2/2 + O(y0^(L+2))",
          is_zero(sp.expand(rem - y0 ** 2 / 2), (y0,))
          and is_zero((tau_half - plateau - K).subs(y0, 0), ()))
    # in t units: y0^(2-L)/(L-2)/(eta s^(2-2/L)) = c0^(-(L-2)/L)/(eta s (L-2))
    tp = ((c0 / s) ** sp.Rational(1, L)) ** (2 - L) / (L - 2) / (eta * s ** (2 - sp.Rational(2, L)))
    check(f"L={L}: plateau time = c0^(-(L-2)/L) / (eta s (L-2))",
          is_zero(tp - c0 ** (-sp.Rational(L - 2, L)) / (eta * s * (L - 2)), (c0, s, eta)))
    rhs = eta * L * c ** (2 - sp.Rational(2, L)) * (s - c)
    check(f"L={L}: late-time relaxation rate eta L s^(2-2/L)",
          sp.simplify(sp.diff(rhs, c).subs(c, s) + eta * L * s ** (2 - sp.Rational(2, L))) == 0)

finish()
