"""Checks of theory/infinite_width.md (exits non-zero on failure).

1. sympy: the arc-cosine expectations from the polar integrals, E[relu(u) v] = lambda/2,
   the leaky-ReLU forms, the determinant identity that carries the angle between layers,
   g(theta) and the series of sin - theta cos.
2. sympy: Mehler's formula on a polynomial (E[u^3 v^3] by Isserlis) and the Hermite
   coefficients' Stein relation.
3. the Gaussian scale mixture of the tanh/softplus rule: sympy for the closed forms it sums
   (the arc-cosine identity sqrt(a'c') J = sqrt(det') + (pi - theta') lam, the series of
   sin - psi cos to psi^15), scipy quadrature with scipy's own Kolmogorov density for the
   mixture identities (tanh, tanh', the logistic sigma(beta u), softplus) and for Williams'
   arcsine form of E[erf erf];
4. numbers: linearnets.infinite_width_kernels against the sources' own recursions written
   out here (Jacot et al. 2018 at sigma = 1, beta = 1; Lee et al. 2018's NNGP; Arora et al.
   2019's NTK = sigma^2 x ours with inputs sigma x / sqrt(D)), and the two-layer NTK of a
   finite network summed over its parameters by sympy against the unit average.
"""
import math
import pathlib
import sys

import sympy as sp

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from _check import check, check_zero, finish  # noqa: E402

th, om, a, c, s, lam = sp.symbols("theta omega a c s lambda", positive=True)
r = sp.symbols("r", positive=True)

# 1. arc-cosine forms: u = sqrt(a) r cos(om), v = sqrt(c) r cos(om - th), density r e^{-r^2/2}/(2 pi)
rad2 = sp.integrate(r ** 3 * sp.exp(-r ** 2 / 2), (r, 0, sp.oo))
rad0 = sp.integrate(r * sp.exp(-r ** 2 / 2), (r, 0, sp.oo))
check("radial moments 2 and 1", rad2 == 2 and rad0 == 1)
# both positive on om in (th - pi/2, pi/2) for 0 < th < pi
ang2 = sp.integrate(sp.cos(om) * sp.cos(om - th), (om, th - sp.pi / 2, sp.pi / 2))
J = sp.sin(th) + (sp.pi - th) * sp.cos(th)
check_zero("E[relu relu] = sqrt(ac) J(theta)/(2 pi)", sp.sqrt(a * c) * rad2 * ang2 / (2 * sp.pi)
           - sp.sqrt(a * c) * J / (2 * sp.pi))
ang0 = sp.integrate(1, (om, th - sp.pi / 2, sp.pi / 2))
check_zero("E[1(u>0) 1(v>0)] = (pi - theta)/(2 pi)", rad0 * ang0 / (2 * sp.pi) - (sp.pi - th) / (2 * sp.pi))
# E[relu(u) v]: u > 0 on om in (-pi/2, pi/2)
e_rv = rad2 * sp.integrate(sp.cos(om) * sp.cos(om - th), (om, -sp.pi / 2, sp.pi / 2)) / (2 * sp.pi)
check_zero("E[relu(u) v] = lambda/2", sp.sqrt(a * c) * e_rv - sp.sqrt(a * c) * sp.cos(th) / 2)
# leaky: phi = (1-s) relu + s id
Erelu, Euv = sp.sqrt(a * c) * J / (2 * sp.pi), sp.sqrt(a * c) * sp.cos(th)
leaky = (1 - s) ** 2 * Erelu + 2 * s * (1 - s) * Euv / 2 + s ** 2 * Euv
check_zero("E[phi phi] leaky = sqrt(ac)[(1-s)^2 J/(2pi) + s cos]",
           leaky - sp.sqrt(a * c) * ((1 - s) ** 2 * J / (2 * sp.pi) + s * sp.cos(th)))
dleaky = (1 - s) ** 2 * (sp.pi - th) / (2 * sp.pi) + 2 * s * (1 - s) / 2 + s ** 2
check_zero("E[phi' phi'] leaky = (1-s)^2 (pi - theta)/(2 pi) + s", dleaky - ((1 - s) ** 2 * (sp.pi - th) / (2 * sp.pi) + s))
ns = (1 + s ** 2) / 2
check_zero("diagonal E[phi^2] = a (1 + s^2)/2", (leaky / sp.sqrt(a * c)).subs(th, 0) - ns)
g = 1 - J / sp.pi
check_zero("g = [2 pi sin^2(theta/2) - (sin - theta cos)]/pi",
           sp.expand_trig(g - (2 * sp.pi * sp.sin(th / 2) ** 2 - (sp.sin(th) - th * sp.cos(th))) / sp.pi))
ser = sp.series(sp.sin(th) - th * sp.cos(th), th, 0, 13).removeO()
check_zero("sin - theta cos = t^3/3 - t^5/30 + t^7/840 - t^9/45360 + t^11/3991680",
           ser - (th ** 3 / 3 - th ** 5 / 30 + th ** 7 / 840 - th ** 9 / 45360 + th ** 11 / 3991680))
j = ((1 - s) ** 2 * J / (2 * sp.pi) + s * sp.cos(th)) / ns
omj = ((1 - s) ** 2 * g / 2 + 2 * s * sp.sin(th / 2) ** 2) / ns
opj = ((1 - s) ** 2 * (2 - g) / 2 + 2 * s * sp.cos(th / 2) ** 2) / ns
check_zero("1 - j written without cancellation", sp.simplify(sp.expand_trig(1 - j - omj)))
check_zero("1 + j written without cancellation", sp.simplify(sp.expand_trig(1 + j - opj)))
p, q, b, jj = sp.symbols("p q b j", positive=True)
rr = sp.sqrt(p * q)
det_direct = (p + b ** 2) * (q + b ** 2) - (rr * jj + b ** 2) ** 2
det_sum = rr ** 2 * (1 - jj) * (1 + jj) + b ** 2 * ((sp.sqrt(p) - sp.sqrt(q)) ** 2 + 2 * rr * (1 - jj))
check_zero("det of the next layer = r^2(1-j)(1+j) + b^2((sqrt p - sqrt q)^2 + 2 r (1-j))", sp.expand(det_direct - det_sum))

# 2. Mehler on g(u) = u^3: E[u^3 v^3] = 9 a c lambda + 6 lambda^3 (Isserlis)
z = sp.symbols("z", real=True)
rho = sp.symbols("rho", real=True)
He = [sp.hermite_prob(n, z) for n in range(5)]
gauss = sp.exp(-z ** 2 / 2) / sp.sqrt(2 * sp.pi)


def coeff(expr, n):
    return sp.integrate(expr * He[n] * gauss, (z, -sp.oo, sp.oo)) / sp.sqrt(sp.factorial(n))


ca = [coeff((sp.sqrt(a) * z) ** 3, n) for n in range(5)]
cc = [coeff((sp.sqrt(c) * z) ** 3, n) for n in range(5)]
mehler = sum(rho ** n * ca[n] * cc[n] for n in range(5))
lam_ = rho * sp.sqrt(a * c)
check_zero("Mehler: sum rho^n c_n(a) c_n(c) = E[u^3 v^3] = 9 a c lambda + 6 lambda^3",
           sp.expand(mehler - (9 * a * c * lam_ + 6 * lam_ ** 3)))
gz = sp.tanh(sp.sqrt(a) * z)
n = 3
stein_l = sp.integrate(sp.expand((z ** 4 - 6 * z ** 2 + 3) * z ** 3) * gauss, (z, -sp.oo, sp.oo))
stein_r = sp.integrate(sp.diff(z ** 3, z) * He[3] * gauss, (z, -sp.oo, sp.oo))
check("Stein: E[g He_{n+1}] = E[g' He_n] (g = z^3, n = 3)", sp.simplify(stein_l - stein_r) == 0)

# 3. the scale mixture: closed forms (sympy) and mixture identities (quadrature)
ap, cp, lp, dp = sp.symbols("a' c' lambda det'", positive=True)
thp = sp.atan2(sp.sqrt(dp), lp)
lhs = sp.sqrt(dp + lp ** 2) * (sp.sin(thp) + (sp.pi - thp) * sp.cos(thp))
check_zero("sqrt(a'c') J(theta') = sqrt(det') + (pi - theta') lambda, a'c' = det' + lambda^2",
           sp.simplify(lhs - (sp.sqrt(dp) + (sp.pi - thp) * lp)))
psi = sp.symbols("psi", positive=True)
ser15 = sp.series(sp.sin(psi) - psi * sp.cos(psi), psi, 0, 17).removeO()
check_zero("sin psi - psi cos psi = sum_k (-1)^(k+1) 2k psi^(2k+1)/(2k+1)!, k = 1..7",
           ser15 - sum((-1) ** (k + 1) * 2 * k * psi ** (2 * k + 1) / sp.factorial(2 * k + 1) for k in range(1, 8)))

import mpmath as mpm  # noqa: E402
import numpy as np  # noqa: E402
from scipy import special  # noqa: E402

# the Kolmogorov density from the alternating series 8k sum_j (-1)^(j-1) j^2 e^(-2 j^2 k^2) in
# 60-digit arithmetic (it cancels to ~1e-22 at k = 0.15; the package uses the theta-transformed
# series below k = 1), on composite Gauss-Legendre nodes over [0.15, 8] (the mass outside is
# below 1e-20); the mixture integrals are then sums over those nodes
with mpm.workdps(60):
    xg, wgl = np.polynomial.legendre.leggauss(12)
    edges = np.linspace(0.15, 8.0, 161)
    kk = ((edges[1:] + edges[:-1])[:, None] / 2 + np.diff(edges)[:, None] / 2 * xg).ravel()
    wk = (np.diff(edges)[:, None] / 2 * wgl).ravel()
    dens = np.array([float(8 * mpm.mpf(k) * mpm.fsum((-1) ** (j - 1) * j * j * mpm.exp(-2 * j * j * mpm.mpf(k) ** 2)
                                                       for j in range(1, 80))) for k in kk])
wk = wk * dens


def mix(h):
    return float(wk @ h(kk))


ok = abs(mix(lambda k: 1.0 + 0 * k) - 1) < 1e-14
for u in (0.05, 0.7, 2.5):
    ok &= abs(mix(lambda k: special.erf(u / (math.sqrt(2) * k))) - math.tanh(u)) < 1e-14
    ok &= abs(mix(lambda k: 2 * np.exp(-u * u / (2 * k * k)) / (math.sqrt(2 * math.pi) * k)) - 1 / math.cosh(u) ** 2) < 1e-14
    for beta in (1.0, 5.0):
        tau = 2 * kk / beta
        ok &= abs(mix(lambda k: special.ndtr(u / tau)) - special.expit(beta * u)) < 1e-14
        # E[(u - tau z)_+] = u Phi(u/tau) + tau phi(u/tau)
        ok &= abs(mix(lambda k: u * special.ndtr(u / tau) + tau * np.exp(-u * u / (2 * tau ** 2)) / math.sqrt(2 * math.pi))
                  - np.logaddexp(0, beta * u) / beta) < 1e-14
check("tanh = E_K[erf(u/(sqrt2 K))], tanh' = 2 E_K[N(u; 0, K^2)], sigmoid(beta u) = E_K[Phi(beta u/(2K))], "
      "softplus_beta(u) = E_K[E_z(u - 2Kz/beta)_+] (K Kolmogorov)", ok)
# Williams: E[erf(u/sqrt(2 t1)) erf(v/sqrt(2 t2))] = (2/pi) arcsin(lam / sqrt((a + t1)(c + t2)))
zg, wg = np.polynomial.hermite_e.hermegauss(120)
wg = wg / math.sqrt(2 * math.pi)
a_, c_, l_, t1, t2 = 1.3, 0.7, 0.6, 0.4, 0.9
u = math.sqrt(a_) * zg[:, None] + 0 * zg[None, :]
v = (l_ / math.sqrt(a_)) * zg[:, None] + math.sqrt(c_ - l_ * l_ / a_) * zg[None, :]
lhs = float(wg @ (special.erf(u / math.sqrt(2 * t1)) * special.erf(v / math.sqrt(2 * t2))) @ wg)
check("Williams: E[erf erf] = (2/pi) arcsin(lam / sqrt((a + t1)(c + t2)))",
      abs(lhs - 2 / math.pi * math.asin(l_ / math.sqrt((a_ + t1) * (c_ + t2)))) < 1e-13)

# 4. numbers against the sources' recursions

import linearnets as ln  # noqa: E402

rng = np.random.default_rng(0)
X = rng.standard_normal((6, 4))
D = X.shape[1]


def relu_E(S):
    """Cho & Saul's arc-cosine expectations on a Gram-type matrix S (textbook arccos; the
    diagonal's angle set to 0, where arccos of the rounded cosine errs by ~sqrt(eps))."""
    d = np.sqrt(np.diag(S))
    cos = np.clip(S / np.outer(d, d), -1, 1)
    t = np.arccos(cos)
    np.fill_diagonal(t, 0.0)
    return (np.outer(d, d) * (np.sin(t) + (np.pi - t) * np.cos(t)) / (2 * np.pi), (np.pi - t) / (2 * np.pi))


def jacot(X, L, beta):
    """Jacot et al. (2018), Thm. 1 / Prop. 1: ntk parameterisation, W, b ~ N(0, 1), bias beta b."""
    Sig = X @ X.T / X.shape[1] + beta ** 2
    Th = Sig.copy()
    for _ in range(L - 1):
        E, dE = relu_E(Sig)
        Sig = E + beta ** 2
        Th = Th * dE + Sig
    return Sig, Th


for L in (2, 3, 5):
    nngp, ntk = ln.infinite_width_kernels(X, X, L, "relu", biases=True, bias_std=1.0)
    Sig, Th = jacot(X, L, 1.0)
    # Jacot's output carries a bias (beta^2 in both kernels): ours has none
    ok = np.allclose(nngp, Sig - 1.0, rtol=1e-12, atol=1e-14) and np.allclose(ntk, Th - 1.0, rtol=1e-12, atol=1e-14)
    check(f"Jacot et al. (sigma = 1, beta = bias_std = 1, output bias removed), L = {L}", ok)
    nngp0, ntk0 = ln.infinite_width_kernels(X, X, L, "relu")
    Sig0, Th0 = jacot(X, L, 0.0)
    check(f"Jacot et al. without biases, L = {L}",
          np.allclose(nngp0, Sig0, rtol=1e-12) and np.allclose(ntk0, Th0, rtol=1e-12))

# Lee et al. (2018): K^0 = sb^2 + sw^2 x.x'/d, K^l = sb^2 + sw^2 E[phi phi]; ours: no output bias
sw, sb = 1.4, 0.6
for act, E in (("relu", lambda S: relu_E(S)[0]), ("linear", lambda S: S)):
    K = sb ** 2 + sw ** 2 * X @ X.T / D
    for _ in range(3):
        K = sb ** 2 + sw ** 2 * E(K)
    nngp, _ = ln.infinite_width_kernels(X, X, 4, act, sigma=sw, biases=True, bias_std=sb)
    check(f"Lee et al. NNGP ({act}, sigma_w = 1.4, sigma_b = 0.6): K^L - sigma_b^2",
          np.allclose(nngp, K - sb ** 2, rtol=1e-12))

# Arora et al. (2019): c_sigma = 2 for relu, f^(1) = W x, multipliers sqrt(c/d) -> Theta = sigma^2 ours
cs = 2.0
Xa = math.sqrt(cs) * X / math.sqrt(D)
Sig = Xa @ Xa.T
Th = Sig.copy()
for _ in range(3):
    E, dE = relu_E(Sig)
    Sig, Sd = cs * E, cs * dE
    Th = Th * Sd + Sig
nngp, ntk = ln.infinite_width_kernels(X, X, 4, "relu", sigma=math.sqrt(cs))
check("Arora et al.: NNGP = Sigma^(L), NTK = sigma^2 x ours (sigma in the multiplier)",
      np.allclose(nngp, Sig, rtol=1e-12) and np.allclose(cs * ntk, Th, rtol=1e-12))

# two layers, finite width: sympy sums the NTK over every parameter; it is the unit average
m_, D_ = 3, 2
W1 = sp.Matrix(m_, D_, sp.symbols(f"w0:{m_ * D_}"))
W2 = sp.Matrix(1, m_, sp.symbols(f"v0:{m_}"))
bb = sp.Matrix(m_, 1, sp.symbols(f"b0:{m_}"))
x1 = sp.Matrix(sp.symbols("x0:2"))
x2 = sp.Matrix(sp.symbols("y0:2"))
phi = sp.Function("phi")


def f(x):
    z1 = W1 * x / sp.sqrt(D_) + bb
    return (W2 * z1.applyfunc(phi))[0] / sp.sqrt(m_)


params = list(W1) + list(W2) + list(bb)
K = sum(sp.diff(f(x1), t) * sp.diff(f(x2), t) for t in params)
z1a, z1b = W1 * x1 / sp.sqrt(D_) + bb, W1 * x2 / sp.sqrt(D_) + bb
unit = sum(phi(z1a[i]) * phi(z1b[i]) + W2[i] ** 2 * sp.Subs(sp.Derivative(phi(r), r), r, z1a[i]).doit()
           * sp.Subs(sp.Derivative(phi(r), r), r, z1b[i]).doit() * ((x1.T * x2)[0] / D_ + 1) for i in range(m_)) / m_
check("two-layer NTK = mean over units of [phi phi' + W2^2 phi' phi'' (x.x'/D + 1)]", sp.simplify(K - unit) == 0)
finish()
