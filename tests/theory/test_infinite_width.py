"""The infinite-width NNGP and NTK against independent computations.

- ReLU / leaky ReLU / linear closed forms against an angular quadrature split at the kinks
  (exact to rounding for these piecewise trigonometric integrands);
- tanh / softplus against a direct 2-D composite Gauss-Legendre quadrature in normal
  coordinates (no Hermite series);
- both against Monte Carlo over the units of very wide random networks (tolerance from the
  standard error);
- ``empirical_ntk`` of ``init_parameterised(..., "ntk")`` networks converging to the limit
  with error ~ m^(-1/2), every activation, with and without biases (the slope's tolerance
  from its spread over seeds);
- neural-tangents' kernels where the parameterisations coincide (skipped without it).
"""
import math
import warnings

import numpy as np
import pytest
from numpy.polynomial.legendre import leggauss

import linearnets as ln
from linearnets.theory import infinite_width as iw
from linearnets._validation import ldexp_safe
from theory._reference_gaussian import expect_graded as _expect_graded
from linearnets.theory.infinite_width import infinite_width_kernels

ACTS = ["linear", "relu", ("leaky_relu", 0.2), "tanh", ("softplus", 2.0)]
ACT_IDS = ["linear", "relu", "leaky0.2", "tanh", "softplus2"]


def _phi(act):
    """(phi, phi') as gradient_flow's model evaluates them (relu'(0) = 0)."""
    name, par = act if isinstance(act, tuple) else (act, iw.ACTIVATIONS[act])
    if name == "linear":
        return (lambda u: u), (lambda u: np.ones_like(u))
    if name in ("relu", "leaky_relu"):
        s = par or 0.0
        return (lambda u: np.where(u > 0, u, s * u)), (lambda u: np.where(u > 0, 1.0, s))
    if name == "tanh":
        return np.tanh, (lambda u: 1.0 - np.tanh(u) ** 2)
    return (lambda u: np.logaddexp(0.0, par * u) / par), (lambda u: 0.5 * (1 + np.tanh(0.5 * par * u)))


def _gl(lo, hi, panels, nodes):
    x, w = leggauss(nodes)
    e = np.linspace(lo, hi, panels + 1)
    h, m = np.diff(e) / 2, (e[1:] + e[:-1]) / 2
    return (m[:, None] + h[:, None] * x).ravel(), (h[:, None] * w).ravel()


def _expect_2d(g, a, c, lam, panels=36, nodes=16, zmax=9.0):
    """E[g(u) g(v)], (u, v) ~ N(0, [[a, lam], [lam, c]]), by tensor composite GL in normal coordinates."""
    z, w = _gl(-zmax, zmax, panels, nodes)
    w = w * np.exp(-z * z / 2) / math.sqrt(2 * math.pi)
    rho = 0.0 if a * c == 0 else max(-1.0, min(1.0, lam / math.sqrt(a * c)))
    u = math.sqrt(a) * z
    v = math.sqrt(c) * (rho * z[:, None] + math.sqrt(max(0.0, 1 - rho * rho)) * z[None, :])
    return float(w @ (g(u)[:, None] * g(v)) @ w)


def _expect_polar(s, a, c, lam, nodes=40):
    """E[phi phi], E[phi' phi'] for phi = (1 - s) relu + s id: the angular integral split at
    the four kinks, times the radial moments int r^3 e^{-r^2/2} = 2 and int r e^{-r^2/2} = 1."""
    if a == 0 or c == 0:
        return 0.0, None
    th = math.acos(max(-1.0, min(1.0, lam / math.sqrt(a * c))))
    br = sorted({0.0, 2 * math.pi} | {t % (2 * math.pi) for t in
                                      (math.pi / 2, 3 * math.pi / 2, th + math.pi / 2, th + 3 * math.pi / 2)})
    x, w = leggauss(nodes)
    e2 = e0 = 0.0
    for lo, hi in zip(br[:-1], br[1:]):
        om, ww = (hi - lo) / 2 * x + (hi + lo) / 2, (hi - lo) / 2 * w
        p, q = np.cos(om), np.cos(om - th)
        e2 += ww @ (np.where(p > 0, p, s * p) * np.where(q > 0, q, s * q))
        e0 += ww @ (np.where(p > 0, 1.0, s) * np.where(q > 0, 1.0, s))
    return math.sqrt(a * c) * e2 / math.pi, e0 / (2 * math.pi)


def _reference(X, L, expect, sigma, b, tb, alpha):
    """The recursion of DESIGN.md pair by pair, with a given 2 x 2 Gaussian expectation."""
    D, P = X.shape[1], len(X)
    out = np.zeros((2, P, P))
    for i in range(P):
        for j in range(P):
            x, y = X[i], X[j]
            Q = np.array([x @ x, x @ y, y @ y]) / D
            Th, dQ = 0.0, None
            for _ in range(L - 1):
                a, lam, c = sigma ** 2 * Q + b ** 2
                Th = (sigma ** 2 * dQ * Th if dQ is not None else 0.0) + Q[1] + tb
                qq, dQ = expect(a, c, lam)
                Q = np.array([expect(a, a, a)[0], qq, expect(c, c, c)[0]])
            out[0, i, j] = alpha ** 2 * sigma ** 2 * Q[1]
            out[1, i, j] = alpha ** 2 * (Q[1] + (sigma ** 2 * dQ * Th if L > 1 else 0.0))
    return out


def _inputs(P=5, D=3, seed=2):
    X = np.random.default_rng(seed).standard_normal((P, D))
    X[3] = X[0]                 # identical inputs: the edge of arccos
    if P > 4:
        X[4] = -X[1]            # antipodal inputs: the other edge
    return X


def _rel(A, R):
    return float(np.max(np.abs(A - R)) / np.max(np.abs(R)))


# ---------------------------------------------------------------------------------------
# closed forms and quadrature against independent quadratures
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("act,s", [("relu", 0.0), (("leaky_relu", 0.3), 0.3), ("linear", 1.0)])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("L", [1, 2, 4])
def test_arccos_forms_match_angular_quadrature(act, s, bias, L):
    X = _inputs()
    kw = dict(sigma=1.3, biases=bias, bias_std=0.6, alpha=0.7)
    nngp, ntk = infinite_width_kernels(X, X, L, act, **kw)
    ref = _reference(X, L, lambda a, c, lam: _expect_polar(s, a, c, lam), 1.3, 0.6 if bias else 0.0,
                     1.0 if bias else 0.0, 0.7)
    # exact to rounding: a few hundred ulps over L layers (the reference rounds too)
    tol = 100 * L * np.finfo(float).eps
    assert _rel(nngp, ref[0]) <= tol and _rel(ntk, ref[1]) <= tol
    assert np.all(np.isfinite(nngp)) and np.all(np.isfinite(ntk))
    np.testing.assert_array_equal(nngp, nngp.T)


@pytest.mark.parametrize("act", ["tanh", ("softplus", 2.0), ("softplus", 1.0)], ids=["tanh", "sp2", "sp1"])
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("sigma", [0.8, 1.5])
def test_smooth_kernels_match_2d_quadrature(act, bias, sigma):
    X = _inputs(4)
    X[3] = X[0] * (1 + 1e-7)    # nearly identical: rho within 1e-14 of 1
    g, dg = _phi(act)
    kw = dict(sigma=sigma, biases=bias, bias_std=0.9, alpha=1.1)
    nngp, ntk = infinite_width_kernels(X, X, 3, act, **kw)
    ref = _reference(X, 3, lambda a, c, lam: (_expect_2d(g, a, c, lam), _expect_2d(dg, a, c, lam)),
                     sigma, 0.9 if bias else 0.0, 1.0 if bias else 0.0, 1.1)
    # the Mehler series' computed bound, TAIL_RTOL of the diagonal scale per layer, over
    # two layers with gain O(1); the contract asks for <= 1e-9
    sc = np.sqrt(np.outer(np.diag(ref[1]), np.diag(ref[1])))
    err = max(float(np.max(np.abs(nngp - ref[0]) / sc)), float(np.max(np.abs(ntk - ref[1]) / sc)))
    assert err <= 10 * 2 * iw.TAIL_RTOL <= 1e-9


def test_reference_quadrature_is_converged():
    """The 2-D reference itself: doubling its panels changes nothing beyond rounding."""
    g = np.tanh
    for a, c, lam in [(1.0, 2.0, 1.3), (0.5, 0.5, 0.5 * (1 - 1e-12)), (2.5, 1.0, -0.4)]:
        r1 = _expect_2d(g, a, c, lam)
        r2 = _expect_2d(g, a, c, lam, panels=72, nodes=20, zmax=10.0)
        assert abs(r1 - r2) <= 1e-14
    # the graded rule (theory/_reference_gaussian.py) at large and small scales: 16 against 24
    # nodes a panel and a wider range change nothing beyond rounding
    for f in (np.tanh, lambda u: 1 - np.tanh(u) ** 2, lambda u: np.logaddexp(0, 5 * u) / 5):
        for a, c, rho in [(1e4, 1e4, 1 - 1e-9), (1e4, 0.25, 0.7), (1e-6, 1e-6, -0.5), (16.0, 9.0, 0.999)]:
            r1 = _expect_graded(f, a, c, rho)
            r2 = _expect_graded(f, a, c, rho, nodes=24, zmax=10.0)
            scale = math.sqrt(_expect_graded(f, a, a, 1.0) * _expect_graded(f, c, c, 1.0))
            assert abs(r1 - r2) <= 1e-15 * scale, (a, c, rho, abs(r1 - r2) / scale)


def test_mehler_truncation_meets_its_bound():
    """The order chosen makes every sample's Parseval remainder <= TAIL_RTOL of E[g^2]."""
    for fn in (np.tanh, lambda u: 1 - np.tanh(u) ** 2, lambda u: np.logaddexp(0, u)):
        a = np.array([0.0, 0.1, 1.0, 2.0, 3.0])
        C, tot, good = iw._mehler_tables(a, fn, np.ones(a.size, dtype=bool))
        assert good.all()
        assert np.all(tot - np.sum(C * C, axis=1) <= iw.TAIL_RTOL * tot + 1e-300)
        assert C.shape[1] < iw.N_MAX


# ---------------------------------------------------------------------------------------
# every pre-activation scale: against a 2-D rule graded towards the kinks
# ---------------------------------------------------------------------------------------
SMOOTH = {"tanh": ("tanh", 1.0), "sp1": (("softplus", 1.0), 1.0), "sp5": (("softplus", 5.0), 5.0)}
SCALES = [(1e-3, 1e-3), (0.1, 0.3), (1.0, 1.0), (2.0, 1.0), (4.0, 4.0), (10.0, 3.0), (100.0, 100.0),
          (100.0, 0.5)]
RHOS = [-1.0, -0.5, 0.0, 0.7, 0.999, 1 - 1e-9, 1.0]


def _pair_inputs(sa, sc, rho):
    """Two inputs (D = 2) whose first-layer variances are sa^2, sc^2 (sigma = 1, no biases)
    and whose correlation is rho (the direction at angle arccos rho, computed exactly)."""
    t = math.acos(rho)
    return np.array([[sa * math.sqrt(2.0), 0.0], [sc * math.sqrt(2.0) * math.cos(t), sc * math.sqrt(2.0) * math.sin(t)]])


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("act", list(SMOOTH), ids=list(SMOOTH))
@pytest.mark.parametrize("scales", [pytest.param(sc, marks=() if sc in ((1e-3, 1e-3), (1.0, 1.0), (4.0, 4.0), (100.0, 0.5))
                                                 else pytest.mark.slow) for sc in SCALES],
                         ids=[f"{a:g},{c:g}" for a, c in SCALES])
def test_smooth_kernels_over_scales(act, scales):
    """Depth 2, where NNGP = E[phi(u) phi(v)] and NTK = E[phi' phi'] x.x'/D + E[phi phi] over the
    first layer's Gaussian: pre-activation standard deviations 1e-3 to 100 (variances 1e-6 to
    1e4; the Mehler series for the O(1) samples, the scale mixture beyond), correlations -1 to
    1, against the graded 2-D rule, within the Mehler series' computed bound TAIL_RTOL of the
    Cauchy-Schwarz scale sqrt(K_ii K_jj) (the mixture rule's own error is ~1e-15), no warning."""
    spec, beta = SMOOTH[act]
    g, dg = _phi(spec)
    sa, sc = scales
    worst = 0.0
    for rho in RHOS:
        X = _pair_inputs(sa, sc, rho)
        nngp, ntk = infinite_width_kernels(X, X, 2, spec)
        a, c, th = sa * sa, sc * sc, X[0] @ X[1] / 2
        ef, ed = _expect_graded(g, a, c, rho), _expect_graded(dg, a, c, rho)
        for K, ref in ((nngp, ef), (ntk, ed * th + ef)):
            err = abs(K[0, 1] - ref) / math.sqrt(K[0, 0] * K[1, 1])
            worst = max(worst, err)
    assert worst <= iw.TAIL_RTOL, worst


@pytest.mark.parametrize("act", list(SMOOTH), ids=list(SMOOTH))
def test_mehler_and_mixture_agree(act):
    """Two independent rules where both apply (the O(1) scales at which the Mehler series meets
    its bound): their difference is within the series' bound TAIL_RTOL of sqrt(E[g_u^2] E[g_v^2])."""
    from linearnets.theory import _infinite_width_kernels as _k

    name, par = iw.named_choice(SMOOTH[act][0], iw.ACTIVATIONS, "activation")
    g, dg, pf, pd, kind, t, w, scale2 = iw._smooth(name, par)
    a = np.array([1e-4, 0.3, 1.0, 4.0, 12.0]) / scale2
    C = {f: iw._mehler_tables(a, f, np.ones(a.size, dtype=bool)) for f in (g, dg)}
    assert all(v[2].all() for v in C.values())
    for i in range(a.size):
        for j in range(a.size):
            for rho in (-1.0, -0.4, 0.3, 0.99, 1.0):
                r = np.array([[rho]])
                mix = _k._mix_one(kind, a[i], a[j], rho, (1 - rho) * (1 + rho), t, w)
                for k, (f, par_) in enumerate(((g, pf), (dg, pd))):
                    Cf, tf, _ = C[f]
                    meh = iw._mehler_pairs(r, Cf[i:i + 1], Cf[j:j + 1], par_, np.zeros(1, np.int64))[0, 0]
                    assert abs(meh - mix[k]) <= iw.TAIL_RTOL * math.sqrt(tf[i] * tf[j]), (i, j, rho, k)


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("act", ["tanh", ("softplus", 5.0)], ids=["tanh", "sp5"])
def test_large_scale_kernels_match_graded_quadrature(act):
    """Depth 3 at pre-activation variances ~4-40 (sigma = 3, biases): the samples go to the scale
    mixture (softplus 5: beta^2 a ~ 100-1000, Geiger et al.'s experiment), against the recursion
    with the graded rule; identical and nearly identical inputs included; no warning."""
    X = _inputs(4)
    X[3] = X[0] * (1 + 1e-7)
    g, dg = _phi(act)
    kw = dict(sigma=3.0, biases=True, bias_std=0.9, alpha=1.1)
    nngp, ntk = infinite_width_kernels(X, X, 3, act, **kw)
    ref = _reference(X, 3, lambda a, c, lam: (_expect_graded(g, a, c, max(-1.0, min(1.0, lam / math.sqrt(a * c)))),
                                              _expect_graded(dg, a, c, max(-1.0, min(1.0, lam / math.sqrt(a * c))))),
                     3.0, 0.9, 1.0, 1.1)
    sc = np.sqrt(np.outer(np.diag(ref[1]), np.diag(ref[1])))
    err = max(float(np.max(np.abs(nngp - ref[0]) / sc)), float(np.max(np.abs(ntk - ref[1]) / sc)))
    # the mixture rule (~1e-15 per expectation) over two layers of gain O(1); the reference's
    # own rounding over ~1e6 nodes
    assert err <= 1e-12, err


# ---------------------------------------------------------------------------------------
# against Monte Carlo over the units of very wide networks
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("act", ACTS, ids=ACT_IDS)
@pytest.mark.parametrize("bias", [False, True])
def test_depth_two_against_a_very_wide_layer(act, bias):
    """Depth 2: the NNGP and NTK are means over the m iid hidden units of one network
    (exact at any width), so a layer of 400,000 units estimates them within its standard error."""
    X = _inputs(4)
    sigma, b, alpha, m = 1.2, (0.8 if bias else 0.0), 0.9, 400_000
    D = X.shape[1]
    rng = np.random.default_rng(7)
    U = X @ (sigma * rng.standard_normal((D, m))) / math.sqrt(D) + b * rng.standard_normal(m)
    g, dg = _phi(act)
    G, dG = g(U), dg(U)
    th1 = X @ X.T / D + (1.0 if bias else 0.0)
    terms_nngp = alpha ** 2 * sigma ** 2 * G[:, None, :] * G[None, :, :]
    terms_ntk = alpha ** 2 * (G[:, None, :] * G[None, :, :] + sigma ** 2 * th1[:, :, None] * dG[:, None, :] * dG[None, :, :])
    nngp, ntk = infinite_width_kernels(X, X, 2, act, sigma=sigma, biases=bias, bias_std=b, alpha=alpha)
    for terms, K in ((terms_nngp, nngp), (terms_ntk, ntk)):
        mean, se = terms.mean(axis=2), terms.std(axis=2) / math.sqrt(m)
        z = np.abs(K - mean) / np.maximum(se, 1e-300)
        assert np.all(z[se > 0] <= 5.0), z
        assert np.allclose(K[se == 0], mean[se == 0], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("act", ["relu", "tanh", ("softplus", 2.0)], ids=["relu", "tanh", "softplus2"])
def test_depth_three_nngp_against_wide_networks(act):
    """Depth 3: h_2.h_2'/m of width-2000 networks (8 seeds); finite-width bias O(1/m) << SE."""
    X = _inputs(4)
    sigma, b, m, seeds = 1.1, 0.5, 2000, 8
    g, _ = _phi(act)
    est = []
    for seed in range(seeds):
        p = ln.init_parameterised((3, m, m, 1), "ntk", sigma, seed=seed, biases=True, bias_std=b)
        h = g(X @ p.weights[0].T * p.multipliers[0] + p.biases[0])
        h = g(h @ p.weights[1].T * p.multipliers[1] + p.biases[1])
        est.append(sigma ** 2 * h @ h.T / m)
    est = np.array(est)
    nngp, _ = infinite_width_kernels(X, X, 3, act, sigma=sigma, biases=True, bias_std=b)
    mean, se = est.mean(axis=0), est.std(axis=0, ddof=1) / math.sqrt(seeds)
    assert np.all(np.abs(nngp - mean) <= 5 * se + 2.0 / m * np.abs(nngp))


# ---------------------------------------------------------------------------------------
# the empirical NTK of finite networks converges with error ~ m^(-1/2)
# ---------------------------------------------------------------------------------------
def _ntk_errors(act, bias, depth, widths, seeds, X, sigma=1.1, b=0.7, alpha=1.3):
    _, K = infinite_width_kernels(X, X, depth, act, sigma=sigma, biases=bias, bias_std=b, alpha=alpha)
    errs = np.empty((len(seeds), len(widths)))
    for i, seed in enumerate(seeds):
        for k, m in enumerate(widths):
            p = ln.init_parameterised((X.shape[1],) + (m,) * (depth - 1) + (1,), "ntk", sigma, seed=seed,
                                      biases=bias, bias_std=b)
            kw = p.ntk_kwargs()
            kw["alpha"] = alpha
            Km = ln.empirical_ntk(p.weights, X, X, activation=act, **kw)
            errs[i, k] = np.linalg.norm(Km - K) / np.linalg.norm(K)
    return errs


def _slopes(errs, widths):
    lw = np.log(widths)
    return np.array([np.polyfit(lw, np.log(e), 1)[0] for e in errs])


@pytest.mark.parametrize("act", ACTS, ids=ACT_IDS)
@pytest.mark.parametrize("bias", [False, True])
def test_empirical_ntk_converges_at_depth_two(act, bias):
    """Depth 2: K_m is a mean of m iid unit terms, so its error falls exactly as m^(-1/2)
    (2.4 decades of widths); tolerance 4 standard errors of the per-seed slopes."""
    widths, seeds = (64, 256, 1024, 4096, 16384), range(8)
    sl = _slopes(_ntk_errors(act, bias, 2, widths, seeds, _inputs(6, seed=3)), widths)
    tol = 4 * sl.std(ddof=1) / math.sqrt(len(sl))
    assert abs(sl.mean() + 0.5) <= tol, (sl.mean(), tol)


@pytest.mark.parametrize("act", ACTS, ids=ACT_IDS)
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("widths", [(32, 128, 512), pytest.param((32, 128, 512, 2048), marks=pytest.mark.slow)],
                         ids=["to512", "to2048"])
def test_empirical_ntk_converges_at_depth_three(act, bias, widths):
    """Depth 3 (widths 32-512, 1.2 decades; slow: to 2048): slope -1/2 within 4 standard
    errors of the per-seed slopes plus the first neglected order, an O(1/m) bias over the
    O(m^-1/2) fluctuation, which moves the slope by ~ m_min^(-1/2)/2."""
    seeds = range(6)
    sl = _slopes(_ntk_errors(act, bias, 3, widths, seeds, _inputs(6, seed=3)), widths)
    tol = 4 * sl.std(ddof=1) / math.sqrt(len(sl)) + 0.5 / math.sqrt(widths[0])
    assert abs(sl.mean() + 0.5) <= tol, (sl.mean(), tol)


# ---------------------------------------------------------------------------------------
# structure: symmetry, blocks, edges
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("act", ACTS, ids=ACT_IDS)
def test_cross_kernel_is_the_block_of_the_full_one(act, monkeypatch):
    X = np.random.default_rng(4).standard_normal((9, 4))
    full = infinite_width_kernels(X, X, 3, act, biases=True, bias_std=0.5)
    cross = infinite_width_kernels(X[:4], X[3:], 3, act, biases=True, bias_std=0.5)
    monkeypatch.setattr(iw, "BLOCK_PAIRS", 7)          # many row blocks, one row each
    blocked = infinite_width_kernels(X, X, 3, act, biases=True, bias_std=0.5)
    # the Mehler series may stop at another order for another set of samples: within its bound
    smooth = act in ("tanh", ("softplus", 2.0))
    for F, C, Bk in zip(full, cross, blocked):
        atol = (10 * iw.TAIL_RTOL if smooth else 1e-14) * np.max(np.abs(F))
        np.testing.assert_allclose(C, F[:4, 3:], rtol=0, atol=atol)
        np.testing.assert_allclose(Bk, F, rtol=0, atol=atol)
        np.testing.assert_array_equal(F, F.T)


@pytest.mark.parametrize("act", ACTS, ids=ACT_IDS)
def test_identical_and_zero_inputs_stay_finite(act):
    X = np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [0.0, 0.0, 0.0], [-1.0, -2.0, -3.0]])
    for bias in (False, True):
        nngp, ntk = infinite_width_kernels(X, X[[1, 0, 2, 3]], 4, act, biases=bias, bias_std=0.0)
        assert np.all(np.isfinite(nngp)) and np.all(np.isfinite(ntk))
        # rows 0 and 1 are the same input: their kernels against every input agree
        np.testing.assert_allclose(nngp[0], nngp[1][[1, 0, 2, 3]], rtol=1e-13, atol=1e-15)
        np.testing.assert_allclose(ntk[0], ntk[1][[1, 0, 2, 3]], rtol=1e-13, atol=1e-15)


def test_relu_diagonal_is_exact():
    """Identical inputs (two equal arrays, not one object): θ = 0 exactly at every layer, so the
    ReLU diagonal follows Q_l = σ² Q_{l-1}/2, Θ_l = (σ²/2) Θ_{l-1} + Q_{l-1} to rounding
    (an arccos of the rounded cosine would be off by ~sqrt(eps) in E[φ'φ'] = 1/2)."""
    X = np.array([[0.3, -1.2, 2.0]])
    X2 = X.copy()
    sigma, L = 1.7, 5
    nngp, ntk = infinite_width_kernels(X, X2, L, "relu", sigma=sigma)
    Q, Th = float((X @ X.T)[0, 0]) / 3, 0.0
    for _ in range(L - 1):
        Th = sigma ** 2 / 2 * Th + Q if Th else Q
        Q = sigma ** 2 * Q / 2
    assert nngp[0, 0] == pytest.approx(sigma ** 2 * Q, rel=4e-16 * L)
    assert ntk[0, 0] == pytest.approx(sigma ** 2 / 2 * Th + Q, rel=4e-16 * L)


def test_depth_one_and_alpha_scaling():
    X = np.random.default_rng(5).standard_normal((3, 4))
    nngp, ntk = infinite_width_kernels(X, X, 1, "tanh", sigma=2.0, alpha=3.0)
    np.testing.assert_allclose(nngp, 9 * 4 * X @ X.T / 4, rtol=1e-14)
    np.testing.assert_allclose(ntk, 9 * X @ X.T / 4, rtol=1e-14)
    a1 = infinite_width_kernels(X, X, 3, "relu", alpha=1.0)
    a2 = infinite_width_kernels(X, X, 3, "relu", alpha=2.0)
    np.testing.assert_allclose(a2[1], 4 * a1[1], rtol=1e-15)


def test_bias_std_without_biases_is_ignored():
    X = np.random.default_rng(6).standard_normal((3, 2))
    np.testing.assert_array_equal(infinite_width_kernels(X, X, 3, "relu", bias_std=2.0)[1],
                                  infinite_width_kernels(X, X, 3, "relu")[1])


def test_exported():
    assert ln.infinite_width_kernels is infinite_width_kernels


@pytest.mark.parametrize("kwargs,name", [
    (dict(depth=0), "depth"), (dict(depth=2.5), "depth"), (dict(depth=True), "depth"),
    (dict(sigma=0.0), "sigma"), (dict(sigma=-1.0), "sigma"), (dict(sigma=float("nan")), "sigma"),
    (dict(bias_std=-0.1), "bias_std"), (dict(alpha=0.0), "alpha"), (dict(alpha=float("inf")), "alpha"),
    (dict(activation="gelu"), "activation"), (dict(activation=("leaky_relu", 1.5)), "activation"),
    (dict(activation=("softplus", 0.0)), "activation"), (dict(activation=("relu", 1.0)), "activation"),
    (dict(biases="yes"), "biases"),
    (dict(X2=np.ones((2, 4))), "X"), (dict(X1=np.array([1.0, np.nan, 2.0]).reshape(1, 3)), "X1"),
    (dict(X1=np.ones(3)), "X1"), (dict(X2=np.full((2, 3), np.inf)), "X2"),
    (dict(X1=np.ones((2, 0)), X2=np.ones((2, 0))), "X1"),
    # beyond the float range or any feasible recursion: an error naming the argument
    (dict(alpha=10 ** 400), "alpha"), (dict(sigma=10 ** 400), "sigma"),
    (dict(biases=True, bias_std=10 ** 400), "bias_std"), (dict(depth=10 ** 30), "depth"),
    (dict(depth=iw.MAX_DEPTH + 1), "depth"),
])
def test_bad_input_names_the_argument(kwargs, name):
    args = dict(X1=np.ones((2, 3)), X2=np.ones((2, 3)), depth=2, activation="relu")
    args.update(kwargs)
    X1, X2, depth = args.pop("X1"), args.pop("X2"), args.pop("depth")
    with pytest.raises(ValueError, match=name):
        infinite_width_kernels(X1, X2, depth, **args)


# ---------------------------------------------------------------------------------------
# extreme scales: exact for the arc-cosine family, a clear error or +-inf otherwise
# ---------------------------------------------------------------------------------------
ARCCOS = ["relu", ("leaky_relu", 0.2), "linear"]


def _no_warnings(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="raise", under="ignore"):
            return fn(*args, **kw)


@pytest.mark.parametrize("act", ARCCOS, ids=["relu", "leaky0.2", "linear"])
def test_arccos_kernels_are_homogeneous_at_every_scale(act):
    """Without biases K(2^k x, 2^j x') = 2^(k+j) K(x, x') (each argument is positively
    homogeneous): the per-sample powers of two make that exact at every scale, rows of very
    different sizes in one call included; entries beyond the float range are +-inf (or 0), no
    NaN, no numpy warning."""
    X = _inputs(6)
    X2 = np.random.default_rng(11).standard_normal((3, 3))
    base = infinite_width_kernels(X, X2, 4, act, sigma=1.3, alpha=0.7)
    for k in (-1000, -700, -300, 300, 700, 1000):
        k1 = np.array([k, 0, -k // 2, k, 3, -7])
        k2 = np.array([0, k // 3, -k])
        got = _no_warnings(infinite_width_kernels, np.ldexp(X, k1[:, None]), np.ldexp(X2, k2[:, None]), 4, act,
                           sigma=1.3, alpha=0.7)
        for G, B in zip(got, base):
            want = ldexp_safe(B, k1[:, None] + k2[None, :])
            assert not np.any(np.isnan(G))
            normal = np.abs(want) >= np.finfo(float).tiny
            np.testing.assert_array_equal(np.isinf(G), np.isinf(want))
            np.testing.assert_allclose(G[normal], want[normal], rtol=4e-16, atol=0)
            # subnormal and zero entries: within one subnormal ulp of the scaled value
            assert np.all(np.abs(G[~normal] - want[~normal]) <= 2 * 2.0 ** -1074 + 4e-16 * np.abs(want[~normal]))


@pytest.mark.parametrize("act", ARCCOS, ids=["relu", "leaky0.2", "linear"])
def test_arccos_layer_kernels_scale_with_inputs_and_biases(act):
    """With biases, scaling X and every b_l by 2^k scales the NNGP and the weight parts by 4^k
    and leaves the bias parts as they are (Lambda_l scales by 4^k at every layer)."""
    from linearnets.theory.infinite_width import infinite_width_layer_kernels

    X = _inputs(5)
    kw = dict(sigmas=[1.2, 0.9, 1.4], bias_stds=[0.5, 0.8])
    n0, W0, B0 = infinite_width_layer_kernels(X, X, 3, act, **kw)
    for k in (-500, 480):
        kw2 = dict(sigmas=kw["sigmas"], bias_stds=np.ldexp(kw["bias_stds"], k))
        n, W, B = _no_warnings(infinite_width_layer_kernels, np.ldexp(X, k), np.ldexp(X, k), 3, act, **kw2)
        np.testing.assert_allclose(n, np.ldexp(n0, 2 * k), rtol=1e-15)
        np.testing.assert_allclose(W, np.ldexp(W0, 2 * k), rtol=1e-15)
        np.testing.assert_allclose(B, B0, rtol=1e-15)


@pytest.mark.parametrize("act", ARCCOS, ids=["relu", "leaky0.2", "linear"])
def test_arccos_extreme_sigma_alpha_bias(act):
    """sigma, alpha and bias_std near the float limits: the kernels scale exactly
    (NNGP ~ alpha^2 sigma^(2L) without biases), +-inf where that overflows, never NaN or a warning."""
    X = _inputs(5)
    base = infinite_width_kernels(X, X, 3, act)
    nngp, ntk = _no_warnings(infinite_width_kernels, X, X, 3, act, sigma=2.0 ** 100, alpha=2.0 ** -200)
    np.testing.assert_allclose(nngp, np.ldexp(base[0], 600 - 400), rtol=1e-15)
    np.testing.assert_allclose(ntk, np.ldexp(base[1], 400 - 400), rtol=1e-15)
    for kw in (dict(sigma=1e300), dict(alpha=1e300), dict(sigma=1e-300), dict(biases=True, bias_std=1e300),
               dict(biases=True, bias_std=1e-300, sigma=1e200)):
        for K in _no_warnings(infinite_width_kernels, X, X, 3, act, **kw):
            assert not np.any(np.isnan(K))
            assert np.all((K == 0) | np.isinf(K) | (np.abs(K) >= np.finfo(float).tiny) | (np.abs(K) > 0)), kw
    # alpha = 1e300: the kernel times 1e600 is beyond the range wherever it is not 0
    nngp, _ = _no_warnings(infinite_width_kernels, X, X, 3, act, alpha=1e300)
    np.testing.assert_array_equal(np.isinf(nngp), base[0] != 0)
    # huge bias_std: b^2 dominates every variance; the NNGP is about b^2 sigma^2 (ReLU: /2 per layer
    # then + b^2), finite at b = 1e150 and checked against the scaled recursion
    n150, _ = _no_warnings(infinite_width_kernels, X, X, 3, act, biases=True, bias_std=2.0 ** 500)
    n1, _ = infinite_width_kernels(np.ldexp(X, -500), np.ldexp(X, -500), 3, act, biases=True, bias_std=1.0)
    np.testing.assert_allclose(n150, np.ldexp(n1, 1000), rtol=1e-15)


@pytest.mark.parametrize("act", ["tanh", ("softplus", 5.0)], ids=["tanh", "sp5"])
def test_smooth_extreme_scales(act):
    """tanh/softplus: tiny inputs are fine (tanh: the linear kernel to rounding); a variance
    beyond the float range is a ValueError naming the arguments; alpha = 1e300 gives +-inf
    (no warning) where the kernel is not 0; huge but finite variances are computed
    (tanh at std 1e100: NNGP = (2/pi) arcsin rho to rounding)."""
    X = _inputs(4)
    nngp, ntk = _no_warnings(infinite_width_kernels, X * 1e-150, X * 1e-150, 3, act)
    assert np.all(np.isfinite(nngp)) and np.all(np.isfinite(ntk))
    if act == "tanh":
        lin = infinite_width_kernels(X, X, 3, "linear")
        np.testing.assert_allclose(nngp * 1e300, lin[0], rtol=1e-14)
        np.testing.assert_allclose(ntk * 1e300, lin[1], rtol=1e-14)
    with pytest.raises(ValueError, match="X1.*overflows"):
        infinite_width_kernels(X * 1e300, X, 3, act)
    with pytest.raises(ValueError, match="sigma.*overflows"):
        infinite_width_kernels(X, X, 3, act, sigma=1e300)
    with pytest.raises(ValueError, match="bias_std.*overflows"):
        infinite_width_kernels(X, X, 3, act, biases=True, bias_std=1e300)
    nngp, ntk = _no_warnings(infinite_width_kernels, X, X, 3, act, alpha=1e300)
    assert np.all(np.isinf(nngp) | (nngp == 0)) and np.all(np.isinf(ntk))
    # sigma = 1e150: tanh saturates (the layer-2 variance is sigma^2 E[tanh^2] <= 1e300, finite);
    # softplus grows with its input, so the variance of layer 2 (~ sigma^4) overflows: an error
    if act == "tanh":
        nngp, ntk = _no_warnings(infinite_width_kernels, X, X, 3, act, sigma=1e150)
        assert np.all(np.isfinite(nngp)) and not np.any(np.isnan(ntk))
        # |NNGP| <= sigma^2 E[tanh^2] < sigma^2, up to the rounding of sigma^2 and of the
        # mixture's 24 x 24 sum (a few ulps, different on each SIMD path)
        np.testing.assert_array_less(np.abs(nngp), 1e300 * (1 + 1e-14))
    else:
        with pytest.raises(ValueError, match="sigma.*overflows"):
            infinite_width_kernels(X, X, 3, act, sigma=1e150)
    if act == "tanh":
        Z = X / np.linalg.norm(X, axis=1, keepdims=True)
        nngp, ntk = _no_warnings(infinite_width_kernels, Z * 1e100, Z * 1e100, 2, act)
        d, m = Z[:, None] - Z[None, :], Z[:, None] + Z[None, :]
        theta = 2 * np.arctan2(np.linalg.norm(d, axis=2), np.linalg.norm(m, axis=2))
        np.testing.assert_allclose(nngp, 1 - 2 * theta / np.pi, rtol=0, atol=1e-14)


# ---------------------------------------------------------------------------------------
# neural-tangents, where its parameterisation coincides with this one
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("act", ["relu", ("leaky_relu", 0.2), "linear"], ids=["relu", "leaky0.2", "linear"])
@pytest.mark.parametrize("bias_std", [0.0, 1.0])
def test_against_neural_tangents(act, bias_std):
    """neural-tangents' "ntk" Dense is W_std W h/sqrt(N) + b_std b with W, b ~ N(0, 1), b trained:
    at sigma = W_std = 1 its weights are this package's, and its bias b_std b is this package's
    bias (std bias_std, gradient 1) only at b_std = 1 (its NTK counts b_std^2 per layer,
    this package's 1). bias_std = 0 is no bias (b_std=None)."""
    try:    # an installed neural-tangents that does not import with this jax also skips
        import jax
        from neural_tangents import stax
    except ImportError as exc:
        pytest.skip(f"neural-tangents unavailable: {exc}")
    jax.config.update("jax_enable_x64", True)
    X = np.random.default_rng(8).standard_normal((5, 3))
    X[3] = X[0]
    nl = {"relu": stax.Relu(), "leaky0.2": stax.LeakyRelu(0.2), "linear": stax.Identity()}[
        act if isinstance(act, str) else "leaky0.2"]
    b_std = bias_std if bias_std > 0 else None
    layers = []
    for _ in range(3):
        layers += [stax.Dense(64, W_std=1.0, b_std=b_std, parameterization="ntk"), nl]
    layers += [stax.Dense(1, W_std=1.0, b_std=None, parameterization="ntk")]
    _, _, kernel_fn = stax.serial(*layers)
    k = kernel_fn(X, X, ("nngp", "ntk"))
    nngp, ntk = infinite_width_kernels(X, X, 4, act, biases=bias_std > 0, bias_std=bias_std)
    # two closed forms in different arithmetic (measured: <= 4e-15): rounding over 4 layers
    np.testing.assert_allclose(nngp, np.asarray(k.nngp), rtol=1e-13)
    np.testing.assert_allclose(ntk, np.asarray(k.ntk), rtol=1e-13)


# ---------------------------------------------------------------------------------------
# the verify rows
# ---------------------------------------------------------------------------------------
def test_verify_rows_are_registered_and_pass_small():
    from linearnets import compare

    assert {"ntk_at_init", "infinite_width_lazy"} <= set(compare.CHECKS)
    r = ln.compare_ntk_at_init(widths=(32, 128, 512), reps=3, seed=1)
    assert r.passed and -0.8 < r.simulation < -0.2, r
    r.plot()
    r = ln.compare_infinite_width_lazy(widths=(128, 512, 2048), reps=3, seed=1)
    assert r.passed and np.all(np.diff(r.arrays["distance"]) < 0), r
    r.plot()


def test_ntk_at_init_fails_against_a_wrong_limit(monkeypatch):
    """A limit off by 10 %: the error stops falling at 0.1 and the slope leaves -1/2."""
    from linearnets.compare import infinite_width as cmp

    right = cmp.infinite_width_kernels
    monkeypatch.setattr(cmp, "infinite_width_kernels", lambda *a, **k: tuple(1.1 * K for K in right(*a, **k)))
    r = cmp.compare_ntk_at_init(widths=(64, 256, 1024, 4096), reps=3, seed=0)
    assert not r.passed, r


@pytest.mark.parametrize("kw,name", [(dict(widths=(64,)), "widths"), (dict(reps=1), "reps"),
                                     (dict(activation="gelu"), "activation"), (dict(biases=1), "biases"),
                                     (dict(sigma=0.0), "sigma")])
def test_ntk_at_init_bad_arguments(kw, name):
    with pytest.raises(ValueError, match=name):
        ln.compare_ntk_at_init(**kw)


# ---------------------------------------------------------------------------------------
# per-layer kernels: the networks of Zhou et al. / Luo et al. (multiplier 1, W ~ N(0, beta^2))
# ---------------------------------------------------------------------------------------
def test_layer_kernels_sum_to_the_ntk():
    from linearnets.theory.infinite_width import infinite_width_layer_kernels

    X = np.random.default_rng(9).standard_normal((5, 3))
    for act in ACTS:
        nngp, ntk = infinite_width_kernels(X, X, 3, act, sigma=1.3, biases=True, bias_std=0.4)
        n2, W, B = infinite_width_layer_kernels(X, X, 3, act, sigmas=[1.3] * 3, bias_stds=[0.4] * 2)
        np.testing.assert_allclose(n2, nngp, rtol=1e-14)
        np.testing.assert_allclose(W.sum(0) + B.sum(0), ntk, rtol=1e-13)


@pytest.mark.parametrize("L", [2, 3])
def test_zhou_infinite_width_ntk_against_wide_networks(L):
    """The empirical NTK of zhou_parameterisation networks (per-layer scales, biases as inputs)
    at width 2000 against the limit: relative error O(m^-1/2), tolerance 6/sqrt(m) (measured
    constants 1-2 for these sizes, seeds 0-3)."""
    from linearnets.compare.infinite_width import zhou_infinite_width_ntk
    from linearnets.parameterisations import zhou_parameterisation

    m = 2000
    betas = (0.8, 1.3 / math.sqrt(m), 0.6 / math.sqrt(m))[:L] if L == 3 else (0.8, 1.1 / math.sqrt(m))
    X = np.linspace(-1, 1, 6)[:, None]
    K = zhou_infinite_width_ntk(betas, m, X)
    errs = []
    for seed in range(4):
        p = zhou_parameterisation((1,) + (m,) * (L - 1) + (1,), betas, 1.0, seed=seed, biases=True)
        Km = ln.empirical_ntk(p.weights, X, X, **p.ntk_kwargs())
        errs.append(np.linalg.norm(Km - K) / np.linalg.norm(K))
    assert np.mean(errs) <= 6 / math.sqrt(m), errs
