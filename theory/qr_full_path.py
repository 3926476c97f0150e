"""Symbolic checks of theory/qr_full_path.md (exits non-zero on failure).

1. The aligned rank-one set is invariant and its q, r obey the mode system (M) exactly.
2. p m is conserved and p obeys the Riccati equation.
3. The closed forms p(t), m(t) solve the system, start at (p0, m0), p m = delta^2.
4. Limits: t -> infinity gives q -> lambda, r -> s; small q0 gives qr_trajectory.
5. The paper's App. C.5 formula differs by O(q0^2) at fixed t and solves dp/dt = eta p(2s - p).
6. linearnets.qr_full_path agrees with a 40-digit evaluation of the closed form.
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


eta, s, t, lam = sp.symbols("eta s t lambda", positive=True)
aa, ww = sp.symbols("a w", real=True)

# 1. invariance of W_1 = ahat w beta^T, a = a ahat, with ahat = (c, d) unit and beta = e_1 (D = 2)
c, d = sp.symbols("c d", real=True)
ahat = sp.Matrix([c, d])
beta = sp.Matrix([1, 0])
W1 = ahat * ww * beta.T
avec = aa * ahat
E = s * beta.T - avec.T * W1
dW1 = eta * avec * E
da = eta * (E * W1.T).T
adot = eta * ww * (s - aa * ww)
wdot = eta * aa * (s - aa * ww)


def on_sphere(e):
    """Reduce modulo |ahat|^2 = 1."""
    e = sp.expand(e)
    return sp.reduced(e, [c ** 2 + d ** 2 - 1], c, d)[1] if e != 0 else e


inv_W = (dW1 - ahat * wdot * beta.T).applyfunc(on_sphere)
inv_a = (da - ahat * adot).applyfunc(on_sphere)
check("aligned rank-one set is invariant (a' = eta w (s - aw), w' = eta a (s - aw))",
      inv_W == sp.zeros(2, 2) and inv_a == sp.zeros(2, 1))
q_aw = (aa ** 2 + ww ** 2) / 2
r_aw = aa * ww
dq = sp.diff(q_aw, aa) * adot + sp.diff(q_aw, ww) * wdot
dr = sp.diff(r_aw, aa) * adot + sp.diff(r_aw, ww) * wdot
check("dq/dt = 2 eta r (s - r) on the aligned set", sp.expand(dq - 2 * eta * r_aw * (s - r_aw)) == 0)
check("dr/dt = 2 eta q (s - r) on the aligned set", sp.expand(dr - 2 * eta * q_aw * (s - r_aw)) == 0)

# 2. p, m form
p, m, dl2 = sp.symbols("p m delta2", positive=True)
qq, rr = (p + m) / 2, (p - m) / 2
dp = 2 * eta * rr * (s - rr) + 2 * eta * qq * (s - rr)
dm = 2 * eta * rr * (s - rr) - 2 * eta * qq * (s - rr)
check("d(pm)/dt = 0", sp.expand(dp * m + p * dm) == 0)
check("dp/dt = eta(-p^2 + 2sp + delta^2) with m = delta^2/p",
      sp.simplify(dp.subs(m, dl2 / p) - eta * (-p ** 2 + 2 * s * p + dl2)) == 0)

# 3. closed forms, with delta^2 = lam^2 - s^2 (rational in E, no square roots)
p0, Ev = sp.symbols("p0 E", positive=True)
delta2 = lam ** 2 - s ** 2
m0 = delta2 / p0
P = (p0 * ((lam + s) + (lam - s) * Ev) + delta2 * (1 - Ev)) / (p0 * (1 - Ev) + (lam + s) * Ev + (lam - s))
M = (m0 * ((lam - s) + (lam + s) * Ev) + delta2 * (1 - Ev)) / (m0 * (1 - Ev) + (lam - s) * Ev + (lam + s))
dEdt = -2 * eta * lam * Ev                 # E = exp(-2 eta lam t)
Pdot = sp.diff(P, Ev) * dEdt
Mdot = sp.diff(M, Ev) * dEdt
check("p(t) solves dp/dt = eta(-p^2 + 2sp + delta^2)",
      sp.cancel(Pdot - eta * (-P ** 2 + 2 * s * P + delta2)) == 0)
check("m(t) solves dm/dt = eta(-m^2 - 2sm + delta^2)",
      sp.cancel(Mdot - eta * (-M ** 2 - 2 * s * M + delta2)) == 0)
check("p(t) m(t) = delta^2 for all t", sp.cancel(P * M - delta2) == 0)
check("p(0) = p0, m(0) = m0", sp.cancel(P.subs(Ev, 1) - p0) == 0 and sp.cancel(M.subs(Ev, 1) - m0) == 0)
Pinf, Minf = sp.cancel(P.subs(Ev, 0)), sp.cancel(M.subs(Ev, 0))
check("t -> infinity: p -> lambda + s, m -> lambda - s",
      sp.cancel(Pinf - (lam + s)) == 0 and sp.cancel(Minf - (lam - s)) == 0)
check("t -> infinity: q -> lambda = sqrt(s^2 + delta^2), r -> s",
      sp.cancel((Pinf + Minf) / 2 - lam) == 0 and sp.cancel((Pinf - Minf) / 2 - s) == 0)

# 4. small q0: series in eps with p0 = eps x, m0 = eps y
eps, x, y = sp.symbols("epsilon x y", positive=True)
lam_e = sp.sqrt(s ** 2 + eps ** 2 * x * y)
E_e = sp.exp(-2 * eta * lam_e * t)


def closed(p0_, m0_):
    d2 = p0_ * m0_
    pe = (p0_ * ((lam_e + s) + (lam_e - s) * E_e) + d2 * (1 - E_e)) / (
        p0_ * (1 - E_e) + (lam_e + s) * E_e + (lam_e - s))
    me = (m0_ * ((lam_e - s) + (lam_e + s) * E_e) + d2 * (1 - E_e)) / (
        m0_ * (1 - E_e) + (lam_e - s) * E_e + (lam_e + s))
    return pe, me


pe, me = closed(eps * x, eps * y)
pser = sp.series(pe, eps, 0, 2).removeO()
mser = sp.series(me, eps, 0, 2).removeO()
check("small q0: p = p0 e^{2 eta s t} + O(q0^2)", sp.simplify(pser - eps * x * sp.exp(2 * eta * s * t)) == 0)
check("small q0: m = m0 e^{-2 eta s t} + O(q0^2)",
      sp.simplify(mser - eps * y * sp.exp(-2 * eta * s * t)) == 0)

# 5. the paper's App. C.5 formula (r0 = 0)
q0s = sp.Symbol("q0", positive=True)
tau = 2 * eta * s * t
den = sp.exp(tau) - 1 + 2 * s / q0s
p_paper = 2 * s * sp.exp(tau) / den
check("paper's q + r solves dp/dt = eta p (2s - p) (no delta^2 term)",
      sp.simplify(sp.diff(p_paper, t) - eta * p_paper * (2 * s - p_paper)) == 0)
pe0, me0 = closed(eps, eps)              # r0 = 0, q0 = eps
q_ours = (pe0 + me0) / 2
q_paper = (2 * s * sp.cosh(tau) / den).subs(q0s, eps)
diff_ser = sp.series(q_ours - q_paper, eps, 0, 3).removeO()
check("paper's C.5 q differs at O(q0^2), not O(q0)",
      sp.simplify(diff_ser.coeff(eps, 1)) == 0 and sp.simplify(diff_ser.coeff(eps, 2)) != 0)

# 6. the package against a 40-digit evaluation
try:
    import mpmath
    from linearnets.theory.alignment import qr_full_path
    mpmath.mp.dps = 40
    ok = True
    for (sv, q0v, r0v, ev) in ((1.3, 1e-3, 2e-4, 0.7), (2e-3, 1e-7, -5e-8, 3.0), (50.0, 0.3, 0.3, 1.0)):
        for tv in (0.0, 0.01, 1.0, 10.0, 1e4):
            S, Q0, R0, ET, TT = map(mpmath.mpf, (sv, q0v, r0v, ev, tv))
            pp0, mm0 = Q0 + R0, Q0 - R0
            d2 = pp0 * mm0
            L = mpmath.sqrt(S ** 2 + d2)
            EE = mpmath.exp(-2 * ET * L * TT)
            pv = (pp0 * ((L + S) + (L - S) * EE) + d2 * (1 - EE)) / (pp0 * (1 - EE) + (L + S) * EE + (L - S))
            mv = (mm0 * ((L - S) + (L + S) * EE) + d2 * (1 - EE)) / (mm0 * (1 - EE) + (L - S) * EE + (L + S))
            qn, rn = qr_full_path(tv, sv, q0v, r0v, ev)
            qx, rx = (pv + mv) / 2, (pv - mv) / 2
            ok &= abs(qn - float(qx)) <= 1e-13 * float(qx)
            ok &= abs(rn - float(rx)) <= 1e-13 * float(qx)
    check("linearnets.qr_full_path matches a 40-digit evaluation", bool(ok))
except ImportError as exc:  # pragma: no cover
    check(f"import ({exc})", False)

if FAILURES:
    print(f"{len(FAILURES)} check(s) failed")
    sys.exit(1)
print("all checks passed")
