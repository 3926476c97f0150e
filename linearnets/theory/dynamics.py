r"""Mode dynamics of deep linear networks: c(t), its inverse, time scales, loss curves.

On whitened data (Sigma_xx = I) a balanced, aligned depth-L linear network trained by
gradient flow on L = (1/2P) sum ||y - f(x)||^2 with rate eta learns each singular mode
s_alpha of Sigma_yx independently; its strength c = u^T W_L ... W_1 v obeys

.. math::  \dot c = \eta L c^{2-2/L} (s - c), \qquad c(0) = c_0 > 0

(derivation in ``theory/mode_dynamics.md``; the silent-alignment paper, Atanasov,
Bordelon & Pehlevan 2022, Sec. 4 and App. E.1, prints this without the factor L).

Exact solutions
---------------
With x = c/s and tau = eta s^{2-2/L} t the equation is dx/dtau = L x^{2-2/L} (1 - x).

* L = 1: x = 1 + (x0 - 1) e^{-tau}.
* L = 2: the Saxe sigmoid x = 1 / (1 + (1/x0 - 1) e^{-2 tau}).
* L >= 3: tau(x) is explicit in elementary functions (``_special``):
  rising (x0 < 1), y = x^{1/L}:
  tau = (y0^{2-L} - y^{2-L})/(L-2) + Phi_1(y) - Phi_1(y0);
  decaying (x0 > 1), z = x^{-1/L}:  tau = Phi_{2L-3}(z) - Phi_{2L-3}(z0),
  with Phi_m(v) = int_0^v u^m/(1-u^L) du.  c(t) inverts tau(x) by a safeguarded,
  vectorised Newton iteration in the logit of y (or z), a variable in which tau is
  concave (rising) or convex (decaying), with asymptotic starting points on the
  plateau and near convergence; no ODE is integrated.

Where the plateau is long, c(t) is ill-conditioned in t near the escape
(t |dc/dt| / c ~ plateau length); there the result is exact for a time within a few
ulps of t (backward stable); elsewhere c is accurate to ~1e-14 relative.
"""
from __future__ import annotations

import numpy as np

from .._validation import broadcast_args, check_depth, check_nonnegative, check_positive
from .. import _jit
from . import _kernels, _special
from ._special import softplus

__all__ = ['mode_strength', 'mode_time', 'half_time', 'plateau_time', 'loss_curve']

_EPS = np.finfo(np.float64).eps
NOISE_FACTOR = _special.NOISE_FACTOR
STEP_RTOL = _special.STEP_RTOL
MAX_ITER = _special.MAX_ITER
PLATEAU_SWITCH = _special.PLATEAU_SWITCH
#: Below this dw, expm1(dw) cannot overflow.
_DW_EXPM1_MAX = 700.0


# --------------------------------------------------------------------------- helpers

def _log_ratio(a, b):
    """log(a/b) for positive arrays: log1p where a ~ b, no overflow where a/b is huge."""
    a, b = np.broadcast_arrays(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
    shape = a.shape
    a, b = a.ravel(), b.ravel()
    with np.errstate(over="ignore", under="ignore"):
        r = a / b
    out = np.log(a) - np.log(b)
    near = (r > 0.5) & (r < 2.0)
    out[near] = np.log1p((a[near] - b[near]) / b[near])
    ok = ~near & np.isfinite(r) & (r > 1e-290)
    out[ok] = np.log(r[ok])
    return out.reshape(shape)


def _quotient(log_num, *den, num=None):
    """num / (den_1 ... den_k) for positive factors, num = exp(log_num) unless given:
    directly where nothing over- or underflows, else from logarithms, so that the result
    is +inf or 0 only where the quotient itself leaves the float range (no numpy warning)."""
    with np.errstate(over="ignore", under="ignore", divide="ignore", invalid="ignore"):
        d = den[0]
        for x in den[1:]:
            d = d * x
        out = (np.exp(log_num) if num is None else num) / d
        bad = ~(np.isfinite(out) & (out > 0) & np.isfinite(d) & (d > 0))
        if np.any(bad):
            out = np.where(bad, np.exp(log_num - sum(np.log(x) for x in den)), out)
    return out


def _validate_common(s, c0, depth, eta):
    L = check_depth(depth)
    s = check_positive(s, "s")
    c0 = check_positive(c0, "c0")
    eta = check_positive(eta, "eta")
    return s, c0, L, eta


def _tau_scale(s, eta, L):
    """eta * s^(2-2/L): converts t into the natural time tau (may overflow to inf)."""
    with np.errstate(over="ignore"):
        return eta * np.power(s, 2.0 - 2.0 / L)


def _natural_time(t, scale):
    """tau = t * scale, exactly 0 at t = 0 even where the scale overflowed (0 * inf).

    Where the product overflows, tau = inf: the mode has converged to s within
    rounding (c(tau) - s decays at least like exp(-tau) once tau >> the plateau).
    """
    t, scale = np.broadcast_arrays(np.asarray(t, dtype=np.float64), np.asarray(scale, dtype=np.float64))
    with np.errstate(over="ignore", invalid="ignore"):
        T = t * scale
    return np.where(t == 0.0, 0.0, T)


def _natural_time_of(t, s, eta, L):
    """tau = eta s^(2-2/L) t, from the logarithms where the scale alone overflows or
    underflows (tau itself may be a normal float: s = 1e300, t = 1e-200 at L = 3), inf only
    where tau leaves the float range; exactly 0 at t = 0."""
    scale = _tau_scale(s, eta, L)
    T = _natural_time(t, scale)
    t, s, eta, T = np.broadcast_arrays(np.asarray(t, dtype=np.float64), s, eta, T)
    redo = (t > 0.0) & ((scale == 0.0) | ~np.isfinite(scale))
    if np.any(redo):
        T = T.copy()
        with np.errstate(over="ignore", under="ignore"):
            T[redo] = np.exp(np.log(t[redo]) + np.log(eta[redo])
                             + (2.0 - 2.0 / L) * np.log(s[redo]))
    return T


def _physical_time(T, logT, s, eta, L):
    """t = T / (eta s^(2-2/L)), the inverse of :func:`_natural_time`: 0 at T = 0, inf where
    log T = inf.  Directly where the scale and the quotient are normal floats; elsewhere
    (the scale or T beyond the float range, the quotient subnormal) from the logarithms,
    ``exp(log T - log eta - (2 - 2/L) log s)``, so that t is 0 or +inf only where t itself
    leaves the float range (``T`` may be +inf where ``logT`` is finite)."""
    scale = _tau_scale(s, eta, L)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore"):
        t = T / scale
        bad = ~(np.isfinite(t) & (t >= np.finfo(np.float64).tiny) & np.isfinite(scale))
        if np.any(bad):
            logt = logT - np.log(eta) - (2.0 - 2.0 / L) * np.log(s)
            t = np.where(bad, np.exp(logt), t)
    return np.where(T == 0.0, 0.0, np.where(logT == np.inf, np.inf, t))


# ------------------------------------------------------------- L >= 3: rising branch
# Unknown: dw = w - w0, w = logit(y), y = (c/s)^(1/L) in (0, 1).  The residual is
# scaled by sigma0 = y0^(L-2), so that the plateau term (y0^(2-L) - y^(2-L))/(L-2)
# becomes -expm1(-a delta)/a with delta = log(y/y0): O(1), no overflow however
# small c0 is.  tau is concave in w with slope >= 1/L.

def _rise_state(lx0, L):
    lv0 = lx0 / L
    v0 = np.exp(lv0)
    g0 = -np.expm1(lv0)                   # 1 - y0, accurate also for y0 -> 1
    w0 = lv0 - np.log(g0)
    a = L - 2
    sig0 = np.exp(a * lv0)
    r0 = _special.phi_rest(v0, 1, L)
    return dict(v0=v0, w0=w0, lv0=lv0, sig0=sig0, r0=r0)


def _rise_split(dw, st):
    """(delta, S, y) from dw: delta = log(y/y0), S = log((1-y0)/(1-y)), dw = delta + S."""
    w = st["w0"] + dw
    left = w <= 0.0
    S = np.empty_like(dw)
    # S = log((1 + e^w)/(1 + e^w0)) = log1p(y0 expm1(dw)): accurate even for tiny dw
    small = dw < _DW_EXPM1_MAX
    S[small] = np.log1p(st["v0"][small] * np.expm1(dw[small]))
    S[~small] = softplus(w[~small]) - softplus(st["w0"][~small])
    delta = dw - S
    y = np.empty_like(dw)
    y[left] = st["v0"][left] * np.exp(delta[left])
    y[~left] = np.exp(-softplus(-w[~left]))
    return delta, S, y, w


def _rise_eval(dw, st, L):
    """Scaled tau(dw)*sigma0, its derivative in dw, and its rounding-error level."""
    a = L - 2
    delta, S, y, _ = _rise_split(dw, st)
    d_h = -np.expm1(-a * delta) / a
    r1 = _special.phi_rest(y, 1, L)
    sig0 = st["sig0"]
    f = sig0 * (S / L + r1 - st["r0"])
    tau_s = d_h + f
    poly = np.zeros_like(y)
    for _ in range(L):
        poly = poly * y + 1.0
    slope = np.exp(-a * delta) / poly
    # rounding of dw itself enters through slope * |dw|
    mag = np.abs(d_h) + sig0 * (np.abs(S) / L + y + st["v0"]) + slope * np.abs(dw)
    return tau_s, slope, mag


def _rise_guess(T, st, L):
    """Starting point and bracket [lo, hi] for the rising branch."""
    a = L - 2
    v0, w0, sig0 = st["v0"], st["w0"], st["sig0"]
    n = T.size
    lo = np.zeros(n)
    hi = L * T                            # slope >= 1/L
    guess = np.full(n, np.nan)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        # plateau: drop Phi_1 (>= 0), so this delta is an upper bound on the root
        p = a * T * sig0
        okp = p < 1.0
        delta_p = np.where(okp, -np.log1p(-np.where(okp, p, 0.0)) / a, np.inf)
        y_p = v0 * np.exp(delta_p)
        use_p = okp & (y_p ** L <= PLATEAU_SWITCH)
        arg = v0 * np.expm1(delta_p) / -np.expm1(st["lv0"])
        dw_p = delta_p - np.log1p(-np.where(use_p, arg, 0.0))
        guess[use_p] = dw_p[use_p]
        hi[use_p] = np.minimum(hi[use_p], dw_p[use_p])
        # late: tau ~ -(1/L) log(1-y) + K0, K0 = 1/(a sig0) - 1/a + R1(1) - Phi_1(y0)
        late = ~use_p
        if np.any(late):
            phi1_0 = softplus(w0[late]) / L + st["r0"][late]
            k0 = 1.0 / (a * sig0[late]) - 1.0 / a + _special.phi_rest_at_one(1, L) - phi1_0
            log_g = -L * (T[late] - k0)
            log_g = np.minimum(log_g, np.log(0.5))
            w_l = np.log1p(-np.exp(log_g)) - log_g
            guess[late] = w_l - w0[late]
    bad = ~np.isfinite(guess) | (guess < lo) | (guess > hi)
    guess[bad] = 0.5 * (lo[bad] + hi[bad])
    return guess, lo, hi


# ------------------------------------------------------------ L >= 3: decaying branch
# Unknown: dw = w - w0, w = logit(z), z = (s/c)^(1/L) in (0, 1), rising from z0.
# tau = Phi_{2L-3}(z) - Phi_{2L-3}(z0) is convex in w with slope <= 1/L.

def _phi_dec(z, w, L):
    """Phi_{2L-3}(z) (series where z^L is small, logarithms elsewhere) and its error scale."""
    out = np.empty_like(z)
    mag = np.empty_like(z)
    with np.errstate(under="ignore"):
        ser = z ** L <= _special.SERIES_SWITCH
    out[ser] = _special.series_tail(z[ser], L)
    mag[ser] = out[ser]
    lg = ~ser
    if np.any(lg):
        zl = z[lg]
        k0 = softplus(w[lg]) / L                      # -(1/L) log(1 - z)
        rest = _special.phi_rest(zl, L - 3, L)
        pw = zl ** (L - 2) / (L - 2)
        out[lg] = k0 + rest - pw
        mag[lg] = k0 + np.abs(rest) + pw + 1.0
    return out, mag


def _decay_state(lx0, L):
    lz0 = -lx0 / L
    z0 = np.exp(lz0)
    g0 = -np.expm1(lz0)
    w0 = lz0 - np.log(g0)
    phi0, mag0 = _phi_dec(z0, w0, L)
    return dict(v0=z0, w0=w0, lv0=lz0, phi0=phi0, mag0=mag0)


def _decay_eval(dw, st, L):
    delta, S, z, w = _rise_split(dw, st)          # same logit algebra, variable z
    phi, mag = _phi_dec(z, w, L)
    tau = phi - st["phi0"]
    poly = np.zeros_like(z)
    for _ in range(L):
        poly = poly * z + 1.0
    with np.errstate(under="ignore"):
        slope = np.exp((2 * L - 2) * np.log(z)) / poly
    return tau, slope, mag + st["mag0"] + slope * np.abs(dw)


def _decay_guess(T, st, L):
    z0, w0 = st["v0"], st["w0"]
    n = T.size
    lo = L * T                            # slope <= 1/L
    hi = np.full(n, np.inf)
    guess = np.full(n, np.nan)
    p = 2 * L - 2
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        # small z: keep the first series term only (a lower bound on tau), so the
        # resulting z is an upper bound on the root
        delta_g = softplus(np.log(p * T) - p * st["lv0"]) / p
        z_g = z0 * np.exp(delta_g)
        use_g = z_g ** L <= PLATEAU_SWITCH
        arg = z0 * np.expm1(delta_g) / -np.expm1(st["lv0"])
        dw_g = delta_g - np.log1p(-np.where(use_g, arg, 0.0))
        guess[use_g] = dw_g[use_g]
        hi[use_g] = dw_g[use_g]
        late = ~use_g
        if np.any(late):
            c_dec = _special.phi_rest_at_one(L - 3, L) - 1.0 / (L - 2)
            log_g = -L * (T[late] - (c_dec - st["phi0"][late]))
            log_g = np.minimum(log_g, np.log(0.5))
            w_l = np.log1p(-np.exp(log_g)) - log_g
            guess[late] = w_l - w0[late]
    bad = ~np.isfinite(guess) | (guess < lo) | (guess > hi)
    guess[bad] = np.where(np.isfinite(hi[bad]), 0.5 * (lo[bad] + hi[bad]), lo[bad])
    return guess, lo, hi


# ------------------------------------------------------------------- Newton driver

def _newton(evaluate, target_scale, T, st, guess, lo, hi):
    """Safeguarded vectorised Newton for evaluate(dw) * scale == T * scale.

    ``evaluate(dw, st)`` returns (value, slope, magnitude); the value is compared with
    T * target_scale.  Iterates stay inside the bracket [lo, hi], which is updated from
    the sign of the residual; a step leaving it is replaced by bisection (or doubling
    while hi is infinite).  Returns the root and the number of iterations used.
    """
    dw = guess.copy()
    lo = lo.copy()
    hi = hi.copy()
    act = np.arange(dw.size)
    it = 0
    with np.errstate(over="ignore", divide="ignore", invalid="ignore", under="ignore"):
        while act.size and it < MAX_ITER:
            it += 1
            sub = {k: v[act] for k, v in st.items()}
            x = dw[act]
            tgt = T[act] * target_scale[act]
            val, slope, mag = evaluate(x, sub)
            r = val - tgt
            noise = NOISE_FACTOR * _EPS * (mag + np.abs(tgt))
            neg = r < 0.0
            lo_a = np.where(neg, np.maximum(lo[act], x), lo[act])
            hi_a = np.where(neg, hi[act], np.minimum(hi[act], x))
            step = r / slope
            xn = x - step
            inside = (xn > lo_a) & (xn < hi_a)
            mid = 0.5 * (lo_a + hi_a)
            fallback = np.where(np.isfinite(mid), mid, x + np.maximum(1.0, np.abs(x)))
            xn = np.where(inside, xn, fallback)
            done = ((np.abs(r) <= noise) | (np.abs(step) <= STEP_RTOL * np.abs(x))
                    | (hi_a - lo_a <= STEP_RTOL * np.abs(x)) | (r == 0.0))
            dw[act] = np.where(done & ~inside, x, xn)
            lo[act] = lo_a
            hi[act] = hi_a
            act = act[~done]
    return dw, it


# ------------------------------------------------------------------ core solvers

def _strength_core(T, s, c0, L, backend=None):
    """c and s - c for natural time T = eta s^(2-2/L) t >= 0 (1-D arrays, same size).

    Returns (c, gap, iterations); gap = s - c is computed without cancellation.
    ``backend`` is "numba" (compiled kernel) or "numpy" (the vectorised reference, same
    formulas); by default the kernel once it is in the cache (:mod:`linearnets._jit`).
    """
    backend = backend or ("numba" if _jit.compiled_ready() else "numpy")
    if backend == "numba":
        return (_kernels.strength if L >= 3 else _kernels.strength_closed)(T, s, c0, L)
    n = T.size
    c = np.empty(n)
    gap = np.empty(n)
    iters = 0
    stay = (c0 == s) | (T == 0.0)
    c[stay] = c0[stay]
    gap[stay] = s[stay] - c0[stay]
    inf = ~stay & ~np.isfinite(T)
    c[inf] = s[inf]
    gap[inf] = 0.0
    todo = ~stay & ~inf
    if not np.any(todo):
        return c, gap, iters
    Tt, st_, c0t = T[todo], s[todo], c0[todo]
    ct = np.empty(Tt.size)
    gt = np.empty(Tt.size)
    if L == 1:
        # c = s - (s - c0) e^{-tau}, written from whichever end avoids cancellation
        gt[:] = (st_ - c0t) * np.exp(-Tt)
        early = Tt < 0.5
        ct[early] = c0t[early] - (st_[early] - c0t[early]) * np.expm1(-Tt[early])
        ct[~early] = st_[~early] - gt[~early]
    elif L == 2:
        rise = c0t < st_
        with np.errstate(over="ignore", under="ignore"):
            # rising: c = s expit(-A), A = log((s - c0)/c0) - 2 tau, accurate for c >= s/2;
            # below, c = c0 e^{2 tau} / (1 + (c0/s) expm1(2 tau)) keeps c's relative accuracy
            A = np.log(st_[rise] - c0t[rise]) - np.log(c0t[rise]) - 2.0 * Tt[rise]
            ct[rise] = st_[rise] * _expit(-A)
            gt[rise] = st_[rise] * _expit(A)
            E = np.expm1(2.0 * np.minimum(Tt[rise], 350.0))
            q = c0t[rise] * (E / st_[rise])
            early = (q <= 1.0) & (Tt[rise] <= 350.0)          # (E exact there)
            ce = c0t[rise][early] * (1.0 + E[early]) / (1.0 + q[early])
            idx = np.flatnonzero(rise)[early]
            ct[idx] = ce
            gt[idx] = st_[idx] - ce
            # decaying: c = s / (1 - e^B), B = log((c0 - s)/c0) - 2 tau < 0
            d = ~rise
            B = np.log1p(-st_[d] / c0t[d]) - 2.0 * Tt[d]
            den = -np.expm1(B)
            ct[d] = st_[d] / den
            gt[d] = -st_[d] * np.exp(B) / den
    else:
        lx0 = _log_ratio(c0t, st_)
        rise = c0t < st_
        for branch in (True, False):
            m = rise if branch else ~rise
            if not np.any(m):
                continue
            Tb = Tt[m]
            if branch:
                st = _rise_state(lx0[m], L)
                guess, lo, hi = _rise_guess(Tb, st, L)
                dw, k = _newton(lambda x, sub: _rise_eval(x, sub, L), st["sig0"], Tb, st,
                                guess, lo, hi)
            else:
                st = _decay_state(lx0[m], L)
                guess, lo, hi = _decay_guess(Tb, st, L)
                dw, k = _newton(lambda x, sub: _decay_eval(x, sub, L), np.ones_like(Tb), Tb,
                                st, guess, lo, hi)
            iters = max(iters, k)
            delta, _, _, w = _rise_split(dw, st)
            sb, cb = st_[m], c0t[m]
            cc = np.empty(Tb.size)
            gg = np.empty(Tb.size)
            left = w <= 0.0
            sgn = 1.0 if branch else -1.0
            # near the start: c = c0 (y/y0)^L; near convergence: from 1 - y = expit(-w)
            cc[left] = cb[left] * np.exp(sgn * L * delta[left])
            gg[left] = sb[left] - cc[left]
            e = sgn * L * softplus(-w[~left])       # log(s/c) > 0 rising, < 0 decaying
            cc[~left] = sb[~left] * np.exp(-e)
            gg[~left] = -sb[~left] * np.expm1(-e)
            ct[m] = cc
            gt[m] = gg
    c[todo] = ct
    gap[todo] = gt
    return c, gap, iters


def _expit(x):
    """1 / (1 + e^{-x}) without overflow warnings."""
    out = np.empty_like(x)
    pos = x >= 0
    out[pos] = 1.0 / (1.0 + np.exp(-x[pos]))
    e = np.exp(x[~pos])
    out[~pos] = e / (1.0 + e)
    return out


def _time_core(c, s, c0, L):
    """Natural time T at which the mode reaches c (validated: c between c0 and s), and
    log T: T is +inf where it exceeds the float range (a plateau longer than 1e308, from
    c0/s below ~1e-308 L/(L-2)), log T stays finite there."""
    n = c.size
    T = np.empty(n)
    start = c == c0
    T[start] = 0.0
    never = ~start & (c == s)
    T[never] = np.inf
    m = ~start & ~never
    if not np.any(m):
        with np.errstate(divide="ignore"):
            return T, np.log(T)
    log_big = np.full(n, np.nan)     # log T where T overflows (the rising plateau term)
    cm, sm, c0m = c[m], s[m], c0[m]
    if L == 1:
        T[m] = np.log1p((c0m - cm) / (cm - sm))
    elif L == 2:
        # 2 tau = log(c (s - c0) / (c0 (s - c))) = log1p(s (c - c0) / (c0 (s - c)))
        q = np.log(sm) + np.log(np.abs(cm - c0m)) - np.log(c0m) - np.log(np.abs(sm - cm))
        T[m] = 0.5 * softplus(q)
    else:
        lx0 = _log_ratio(c0m, sm)
        lx = _log_ratio(cm, sm)
        rise = c0m < sm
        out = np.empty(cm.size)
        for branch in (True, False):
            b = rise if branch else ~rise
            if not np.any(b):
                continue
            sgn = 1.0 if branch else -1.0
            st = (_rise_state if branch else _decay_state)(lx0[b], L)
            # delta = log(v/v0) from c/c0 directly; S = log((1 - v0)/(1 - v))
            delta = sgn * _log_ratio(cm[b], c0m[b]) / L
            lv = sgn * lx[b] / L
            S = np.log(-np.expm1(st["lv0"])) - np.log(-np.expm1(lv))
            if branch:
                a = L - 2
                v = np.exp(lv)
                log_dh = -a * st["lv0"] + np.log(-np.expm1(-a * delta)) - np.log(a)
                with np.errstate(over="ignore"):
                    d_h = np.exp(log_dh)
                out[b] = d_h + S / L + _special.phi_rest(v, 1, L) - st["r0"]
                # where d_h overflows (log d_h > 709) the O(log) rest is below its rounding
                idx = np.flatnonzero(m)[np.flatnonzero(b)]
                log_big[idx] = np.where(np.isfinite(d_h), np.nan, log_dh)
            else:
                z = np.exp(lv)
                w = lv - np.log(-np.expm1(lv))
                phi, _ = _phi_dec(z, w, L)
                out[b] = phi - st["phi0"]
        T[m] = out
    with np.errstate(divide="ignore"):
        logT = np.where(np.isnan(log_big), np.log(T), log_big)
    return T, logT


# ------------------------------------------------------------------------- public

def mode_strength(t, s, c0, depth=2, eta=1.0):
    r"""Exact strength c(t) of one mode of a deep linear network.

    Solves :math:`\dot c = \eta L c^{2-2/L}(s - c)`, :math:`c(0) = c_0`, exactly for
    every integer depth L: L = 1 linear relaxation, L = 2 the Saxe sigmoid
    :math:`c = s e^{2\eta s t}/(e^{2\eta s t} - 1 + s/c_0)`, L >= 3 by inverting the
    exact implicit solution t(c) (see :func:`mode_time`) with a safeguarded Newton
    iteration.

    Parameters
    ----------
    t : array_like, shape broadcastable
        Times, >= 0 and finite.
    s : array_like
        Target singular value(s), > 0.
    c0 : array_like
        Initial strength(s), > 0.  c0 < s rises, c0 > s decays, c0 == s stays.
    depth : int, optional
        Number of layers L >= 1.
    eta : array_like, optional
        Learning rate, > 0.

    Returns
    -------
    c : ndarray of float64, the broadcast shape of (t, s, c0, eta)
        c(t), strictly between c0 and s (it reaches s only as t -> infinity, up to
        rounding).  c(0) = c0 exactly for any s, c0, eta; where the natural time
        η s^{2−2/L} t overflows (t > 0) the mode has converged and c = s.

    Notes
    -----
    Source: Saxe, McClelland & Ganguli (2014); Atanasov, Bordelon & Pehlevan (2022),
    Sec. 4 and App. C.4, E.1 (which drop the factor L).  Derivation:
    ``theory/mode_dynamics.md``.  Near the escape from a long plateau c(t) is
    ill-conditioned in t; there the result is c at a time within a few ulps of t.

    Examples
    --------
    >>> import linearnets as ln
    >>> float(ln.mode_strength(0.0, s=2.0, c0=1e-3, depth=3))
    0.001
    >>> round(float(ln.mode_strength(1e3, s=2.0, c0=1e-3, depth=3)), 12)
    2.0
    >>> c = ln.mode_strength([0.0, 1.0, 5.0], s=1.0, c0=0.01)
    >>> c.round(6)
    array([0.01    , 0.069453, 0.995526])
    """
    s, c0, L, eta = _validate_common(s, c0, depth, eta)
    t = check_nonnegative(t, "t")
    shape = broadcast_args(t=t, s=s, c0=c0, eta=eta)[0].shape
    # the time unit is computed before broadcasting (once per mode, not per point);
    # c(0) = c0 exactly, also where eta s^(2-2/L) overflows
    T = np.broadcast_to(_natural_time_of(t, s, eta, L), shape).ravel()
    s = np.broadcast_to(s, shape).ravel()
    c0 = np.broadcast_to(c0, shape).ravel()
    c, _, _ = _strength_core(T, s, c0, L)
    return c.reshape(shape)


def mode_time(c, s, c0, depth=2, eta=1.0):
    r"""Exact time at which a mode reaches strength c: the inverse of :func:`mode_strength`.

    .. math::  t(c) = \frac{1}{\eta s^{2-2/L}} \int_{x_0}^{x}
               \frac{d\xi}{L \xi^{2-2/L}(1 - \xi)}, \quad x = c/s, \; x_0 = c_0/s,

    in closed form: L = 1, :math:`\eta t = \log\frac{c_0 - s}{c - s}`; L = 2,
    :math:`2\eta s t = \log\frac{c (s - c_0)}{c_0 (s - c)}`; L >= 3 with y = x^{1/L},
    :math:`\eta s^{2-2/L} t = \frac{y_0^{2-L} - y^{2-L}}{L-2} + \Phi_1(y) - \Phi_1(y_0)`
    (rising) or :math:`\Phi_{2L-3}(1/y) - \Phi_{2L-3}(1/y_0)` (decaying), where
    :math:`\Phi_m(v) = \int_0^v u^m/(1-u^L)\,du` is a sum of logarithms.

    Parameters
    ----------
    c : array_like
        Target strength(s): between c0 (inclusive) and s.  c == s gives +inf (the
        limit t -> infinity) unless c0 == s, when it gives 0.
    s, c0, depth, eta
        As in :func:`mode_strength`.

    Returns
    -------
    t : ndarray of float64, the broadcast shape of (c, s, c0, eta)
        Where :math:`\eta s^{2-2/L}` or the natural time leaves the float range (s =
        1e300, c0 = 1e-300), t is taken from logarithms: finite wherever t itself is
        (relative error ~ |log t| eps), 0 or +inf only beyond the range.

    Raises
    ------
    ValueError
        If c <= 0, or c is not between c0 and s (the mode never gets there), or any
        argument is outside its domain.

    Examples
    --------
    >>> import linearnets as ln
    >>> t = ln.mode_time(0.5, s=1.0, c0=0.01, depth=4)
    >>> round(float(ln.mode_strength(t, s=1.0, c0=0.01, depth=4)), 12)
    0.5
    """
    s, c0, L, eta = _validate_common(s, c0, depth, eta)
    c = check_positive(c, "c")
    c, s, c0, eta = broadcast_args(c=c, s=s, c0=c0, eta=eta)
    rise = c0 < s
    dec = c0 > s
    bad = (rise & ((c < c0) | (c > s))) | (dec & ((c > c0) | (c < s))) | (~rise & ~dec & (c != s))
    if np.any(bad):
        i = np.flatnonzero(bad.ravel())[0]
        cv, sv, c0v = c.ravel()[i], s.ravel()[i], c0.ravel()[i]
        raise ValueError(f"c = {cv!r} is never reached by a mode with s = {sv!r}, c0 = {c0v!r}: "
                         "c must lie between c0 and s")
    shape = c.shape
    T, logT = _time_core(c.ravel(), s.ravel(), c0.ravel(), L)
    t = _physical_time(T, logT, s.ravel(), eta.ravel(), L)
    return t.reshape(shape)


def half_time(s, c0, depth=2, eta=1.0):
    r"""Time for a mode to rise from c0 to half its target: ``mode_time(s/2, s, c0, ...)``.

    Parameters
    ----------
    s, c0, depth, eta
        As in :func:`mode_strength`; requires c0 < s/2.

    Returns
    -------
    t_half : ndarray of float64, the broadcast shape of (s, c0, eta)

    Raises
    ------
    ValueError
        If c0 >= s/2 (the mode never passes through s/2 on its way up), or any argument
        is outside its domain.

    Notes
    -----
    For c0 -> 0 it approaches :func:`plateau_time`.  Source: Atanasov et al. (2022),
    App. E.1 (t_{1/2}); derivation in ``theory/mode_dynamics.md``.

    Examples
    --------
    >>> import linearnets as ln
    >>> round(float(ln.half_time(1.0, 1e-4)), 6)   # log(s/c0 - 1) / (2 eta s)
    4.60512
    """
    s, c0, L, eta = _validate_common(s, c0, depth, eta)
    s, c0, eta = broadcast_args(s=s, c0=c0, eta=eta)
    if np.any(c0 >= 0.5 * s):
        raise ValueError("c0 must be < s/2 for half_time: a mode starting at or above s/2 "
                         "never passes through s/2 while rising")
    return mode_time(0.5 * s, s, c0, depth=L, eta=eta)


def plateau_time(s, c0, depth=2, eta=1.0):
    r"""Small-c0 asymptotic escape time: the leading term of :func:`half_time` as c0 -> 0.

    .. math::
        L = 1: \frac{\log 2}{\eta}, \qquad
        L = 2: \frac{\log(s/c_0)}{2\eta s}, \qquad
        L \ge 3: \frac{c_0^{-(L-2)/L}}{\eta s (L-2)}.

    For L = 1 there is no plateau: the value is the c0 -> 0 limit of the half time of
    plain exponential relaxation.  The relative difference from ``half_time`` vanishes
    as c0/s -> 0, like (c0/s) (L = 1), 1/log(s/c0) (L = 2), (c0/s)^{(L-2)/L} (L >= 3).
    With c0 ~ sigma^L this is the sigma^{2-L}/(eta s (L-2)) scaling of Atanasov et al.
    (2022), App. E.1 (their extra factor L comes from the factor L they drop).

    Parameters
    ----------
    s, c0, depth, eta
        As in :func:`mode_strength`; requires c0 < s, meaningful for c0 << s.

    Returns
    -------
    t_plateau : ndarray of float64, the broadcast shape of (s, c0, eta)

    Raises
    ------
    ValueError
        If c0 >= s (the mode does not rise: no plateau), or any argument is outside
        its domain.

    Examples
    --------
    >>> import linearnets as ln
    >>> round(float(ln.plateau_time(1.0, 1e-6, depth=4)), 9)   # c0^(-1/2) / 2
    500.0
    """
    s, c0, L, eta = _validate_common(s, c0, depth, eta)
    s, c0, eta = broadcast_args(s=s, c0=c0, eta=eta)
    if np.any(c0 >= s):
        raise ValueError("c0 must be < s for plateau_time: a mode starting at or above s has no "
                         "plateau to escape (it decays or stays), as for half_time")
    # +inf or 0 only where the time itself leaves the float range
    if L == 1:
        out = _quotient(np.log(np.log(2.0)), eta, num=np.log(2.0))
    elif L == 2:
        r = _log_ratio(s, c0)
        out = _quotient(np.log(r), 2.0, eta, s, num=r)
    else:
        out = _quotient(-(L - 2) / L * np.log(c0), eta, s, float(L - 2))
    return np.asarray(out, dtype=np.float64).reshape(s.shape)


def loss_curve(t, s, c0, depth=2, eta=1.0):
    r"""Training loss of a network whose modes follow :func:`mode_strength`.

    .. math::  \mathcal{L}(t) = \tfrac12 \sum_\alpha (s_\alpha - c_\alpha(t))^2 .

    With the loss L = (1/2P) sum_mu ||y_mu - f(x_mu)||^2 on whitened data
    (Sigma_xx = I) and W = sum_alpha c_alpha u_alpha v_alpha^T aligned with the modes
    of Sigma_yx, the loss equals this plus the constant
    (tr Sigma_yy - sum_alpha s_alpha^2)/2 of the part no linear map can fit.

    Parameters
    ----------
    t : array_like, shape (...)
        Times >= 0.
    s : array_like, shape (M,) or scalar
        Singular values of the modes, > 0.  M = 0 (``s = c0 = []``) is the empty sum:
        the loss is 0 at every t.
    c0 : array_like, shape (M,) or scalar
        Initial strengths, > 0 (broadcast against s).
    depth : int, optional
        Number of layers L >= 1.
    eta : float, optional
        Learning rate, > 0.

    Returns
    -------
    loss : ndarray of float64, shape t.shape
        Time is the leading axis (the modes are summed).  s - c is computed without
        cancellation, so the exponential tail is resolved below machine epsilon.
        The sum is scaled by the largest gap, so the result is +inf only where
        the loss itself exceeds the float range (e.g. s = 1e300 at t = 0), and
        L(0) = ½ Σ (s − c0)² exactly as computed in floating point.

    Examples
    --------
    >>> import linearnets as ln
    >>> round(float(ln.loss_curve(0.0, [3.0, 1.0], [1e-3, 1e-3])), 9)
    4.996001
    """
    L = check_depth(depth)
    t = check_nonnegative(t, "t")
    s = check_positive(s, "s")
    c0 = check_positive(c0, "c0")
    eta = check_positive(eta, "eta")
    if eta.ndim:
        raise ValueError(f"eta must be a scalar, got shape {eta.shape}")
    if s.ndim > 1 or c0.ndim > 1:
        raise ValueError(f"s and c0 must be scalars or 1-D over modes, got shapes {s.shape}, "
                         f"{c0.shape}")
    s, c0 = broadcast_args(s=np.atleast_1d(s), c0=np.atleast_1d(c0))
    if s.size == 0:   # no modes: the empty sum
        return np.zeros(t.shape)
    tt = t.ravel()[:, None]
    T_, s_, c0_ = np.broadcast_arrays(tt, s[None, :], c0[None, :])
    T_ = _natural_time(T_, _tau_scale(s_, eta, L))
    _, gap, _ = _strength_core(T_.ravel(), s_.ravel(), c0_.ravel(), L)
    gap = np.abs(gap.reshape(T_.shape))
    # ½ Σ gap² scaled by the largest gap: overflows only where the loss itself
    # exceeds the float range (then +inf), and no underflow of tiny gaps
    g_max = np.max(gap, axis=1)
    safe = np.where(g_max > 0, g_max, 1.0)
    with np.errstate(over="ignore"):
        loss = 0.5 * g_max * (g_max * np.sum((gap / safe[:, None]) ** 2, axis=1))
    return loss.reshape(t.shape)
