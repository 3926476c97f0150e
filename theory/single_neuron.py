"""Symbolic checks of theory/single_neuron.md (exits non-zero on failure).

1. delta = eta_w a^2 - eta_a |w|^2 is conserved for any Sxx (D = 2, symbolic).
2. On whitened data u = eta_a w.beta/a obeys du/dt = eta_a eta_w s^2 - delta u - u^2.
3. The Moebius solution solves it with u(0) = u0, and equals the tanh form.
4. The quartic for a_inf^2 and its root; the conservation of the null-space part.
5. linearnets.single_neuron_nu against the symbolic solution.
"""
import pathlib
import sys

import sympy as sp

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from _check import check, check_zero, finish  # noqa: E402

ea, ew, t = sp.symbols("eta_a eta_w t", positive=True)
a = sp.Symbol("a", real=True)
w = sp.Matrix(sp.symbols("w0:2", real=True))
b = sp.Matrix(sp.symbols("b0:2", real=True))
S = sp.Matrix(2, 2, sp.symbols("S0:4", real=True))
S = (S + S.T) / 2
g = b - S * (a * w)
adot = ea * (w.T * g)[0]
wdot = ew * a * g
delta = ew * a ** 2 - ea * (w.T * w)[0]
ddelta = sp.diff(delta, a) * adot + sum(sp.diff(delta, w[i]) * wdot[i] for i in range(2))
check_zero("delta conserved for any Sxx", ddelta)

# 2. whitened
gw = b - a * w
adot = ea * (w.T * gw)[0]
wdot = ew * a * gw
u = ea * (w.T * b)[0] / a
udot = sp.diff(u, a) * adot + sum(sp.diff(u, w[i]) * wdot[i] for i in range(2))
s2 = (b.T * b)[0]
check_zero("du/dt = eta_a eta_w s^2 - delta u - u^2", udot - (ea * ew * s2 - delta * u - u ** 2))

# 3. Moebius solution
d, K, u0 = sp.symbols("delta K u0", real=True)        # K = eta_a eta_w s^2 > 0
K = sp.Symbol("K", positive=True)
Dl = sp.sqrt(d ** 2 + 4 * K)
up, um = (-d + Dl) / 2, (-d - Dl) / 2
z0 = (u0 - up) / (u0 - um)
U = up + Dl * z0 * sp.exp(-Dl * t) / (1 - z0 * sp.exp(-Dl * t))
check_zero("Moebius form solves du/dt = K - delta u - u^2", sp.diff(U, t) - (K - d * U - U ** 2))
check_zero("u(0) = u0", U.subs(t, 0) - u0)
tanh_form = (-d + Dl * sp.tanh(Dl * t / 2 + sp.atanh((d + 2 * u0) / Dl))) / 2
vals = {d: sp.Rational(-1, 3), K: sp.Rational(5, 4), u0: sp.Rational(1, 5), t: sp.Rational(7, 5)}
check("equals the tanh form between the roots", abs(sp.N((U - tanh_form).subs(vals), 40)) < 1e-30)
check_zero("product of the roots = -K", sp.expand(up * um) + K)

# 4. implicit bias quartic
A2, c, B2 = sp.symbols("A2 c B2", positive=True)          # A2 = a^2, B2 = |beta*|^2
root = (c + sp.sqrt(c ** 2 + 4 * ew * ea * B2)) / (2 * ew)
check_zero("a_inf^2 solves eta_w a^4 - c a^2 - eta_a |beta*|^2 = 0", ew * root ** 2 - c * root - ea * B2)
# delta from w_inf = beta*/a + w_perp (beta* and w_perp orthogonal): eta_w a^2 - eta_a (B2/a^2 + |w_perp|^2)
wp2 = sp.Symbol("wp2", positive=True)
dl = ew * A2 - ea * (B2 / A2 + wp2)
check_zero("delta = eta_w a^2 - eta_a(|beta*|^2/a^2 + |P w0|^2) <=> the quartic with c = delta + eta_a |P w0|^2",
           sp.simplify((ew * A2 ** 2 - (dl + ea * wp2) * A2 - ea * B2)))

# 5. the package
import numpy as np  # noqa: E402

import linearnets as ln  # noqa: E402

beta = np.array([1.0, -0.5, 0.25])
w0 = np.array([0.2, 0.1, -0.3])
a0, eta_a, eta_w = 0.4, 0.5, 2.0
tv = np.array([0.0, 0.3, 1.0, 4.0, 30.0])
nu = ln.single_neuron_nu(tv, a0, w0, beta, eta_a=eta_a, eta_w=eta_w)
sub = {d: sp.Float(eta_w * a0 ** 2 - eta_a * w0 @ w0, 30), K: sp.Float(eta_a * eta_w * beta @ beta, 30),
       u0: sp.Float(eta_a * (w0 @ beta) / a0, 30)}
ref = [float(U.subs(sub).subs(t, tt)) / eta_a for tt in tv]
check("single_neuron_nu = the symbolic solution", np.allclose(nu, ref, rtol=1e-13))
finish()
