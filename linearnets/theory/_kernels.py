"""Compiled (numba) kernel for c(t) at depth L >= 3.

A point-by-point transcription of the vectorised numpy reference in
:mod:`linearnets.theory.dynamics` (same variables, starting points, brackets and
stopping rules); each point leaves the Newton loop as soon as it has converged, which
is what makes it several times faster than the masked numpy iteration.
"""
from __future__ import annotations

import math

import numba as nb
import numpy as np

from .._numba_cache import njit
from ._special import (MAX_ITER, NOISE_FACTOR, PLATEAU_SWITCH, SERIES_SWITCH, SERIES_TERMS,
                       STEP_RTOL)

_EPS = 2.220446049250313e-16


@njit(cache=True, error_model="numpy")
def _softplus(w):
    if w > 0.0:
        return w + math.log1p(math.exp(-w))
    return math.log1p(math.exp(w))


@njit(cache=True, error_model="numpy")
def _phi_rest(v, L, ct, st, cm, sm, even_sign):
    out = 0.0
    for i in range(ct.size):
        re_log = 0.5 * math.log1p(v * (v - 2.0 * ct[i]))
        im_log = math.atan2(v * st[i], 1.0 - v * ct[i])
        out -= (2.0 / L) * (cm[i] * re_log - sm[i] * im_log)
    if L % 2 == 0:
        out -= (even_sign / L) * math.log1p(v)
    return out


@njit(cache=True, error_model="numpy")
def _series_tail(v, L):
    q = v ** L
    acc = 0.0
    for j in range(SERIES_TERMS - 1, -1, -1):
        acc = acc * q + 1.0 / (2 * L - 2 + j * L)
    return v ** (2 * L - 2) * acc


@njit(cache=True, error_model="numpy")
def _split(dw, w0, v0):
    """delta = log(v/v0), S = log((1-v0)/(1-v)), v and w from dw = w - w0."""
    w = w0 + dw
    if dw < 700.0:
        e = math.expm1(dw)
        q = v0 * e
        S = math.log1p(q)
        delta = dw - S
        if w <= 0.0:
            # v = v0 e^delta = v0 e^dw / (1 + v0 expm1(dw)): no further exp needed
            return delta, S, v0 * (1.0 + e) / (1.0 + q), w
    else:
        S = _softplus(w) - _softplus(w0)
        delta = dw - S
    if w <= 0.0:
        v = v0 * math.exp(delta)
    else:
        v = math.exp(-_softplus(-w))
    return delta, S, v, w


@njit(cache=True, error_model="numpy")
def _phi_dec(z, w, L, ct, st, cm, sm, es):
    if z ** L <= SERIES_SWITCH:
        val = _series_tail(z, L)
        return val, val
    k0 = _softplus(w) / L
    rest = _phi_rest(z, L, ct, st, cm, sm, es)
    pw = z ** (L - 2) / (L - 2)
    return k0 + rest - pw, k0 + abs(rest) + pw + 1.0


@njit(cache=True, error_model="numpy")
def _poly(v, L):
    p = 0.0
    for _ in range(L):
        p = p * v + 1.0
    return p


@njit(cache=True, error_model="numpy")
def _eval(rise, dw, w0, v0, sig0, ref0, mag0, L, tab):
    """(value, slope, magnitude) of the scaled residual's value part at dw."""
    ct, st, cm, sm, es = tab
    delta, S, v, w = _split(dw, w0, v0)
    if rise:
        a = L - 2
        em = math.expm1(-a * delta)
        d_h = -em / a
        r1 = _phi_rest(v, L, ct, st, cm, sm, es)
        val = d_h + sig0 * (S / L + r1 - ref0)
        slope = (1.0 + em) / _poly(v, L)
        mag = abs(d_h) + sig0 * (abs(S) / L + v + v0) + slope * abs(dw)
        return val, slope, mag
    phi, mag = _phi_dec(v, w, L, ct, st, cm, sm, es)
    slope = math.exp((2 * L - 2) * math.log(v)) / _poly(v, L)
    return phi - ref0, slope, mag + mag0 + slope * abs(dw)


@njit(cache=True, error_model="numpy")
def _log_ratio(a, b):
    r = a / b
    if 0.5 < r < 2.0:
        return math.log1p((a - b) / b)
    if math.isfinite(r) and r > 1e-290:
        return math.log(r)
    return math.log(a) - math.log(b)


@njit(cache=True, error_model="numpy")
def _prepare(s, c0, L, tab1, tab3):
    """Per-mode constants (they depend on s and c0 only, not on t)."""
    lx0 = _log_ratio(c0, s)
    rise = c0 < s
    sgn = 1.0 if rise else -1.0
    lv0 = sgn * lx0 / L
    v0 = math.exp(lv0)
    w0 = lv0 - math.log(-math.expm1(lv0))
    if rise:
        sig0 = math.exp((L - 2) * lv0)
        ref0 = _phi_rest(v0, L, tab1[0], tab1[1], tab1[2], tab1[3], tab1[4])
        mag0 = 0.0
    else:
        sig0 = 1.0
        ref0, mag0 = _phi_dec(v0, w0, L, tab3[0], tab3[1], tab3[2], tab3[3], tab3[4])
    return rise, sgn, lv0, v0, w0, sig0, ref0, mag0, _softplus(w0), -math.expm1(lv0)


@njit(cache=True, error_model="numpy")
def _solve_one(T, s, c0, L, tab1, tab3, r1_one, r3_one, state):
    """(c, s - c, iterations) for one point with 0 < T < inf and c0 != s."""
    rise, sgn, lv0, v0, w0, sig0, ref0, mag0, sp0, g0 = state
    log_switch = math.log(PLATEAU_SWITCH)
    tab = tab1 if rise else tab3
    inf = math.inf
    if rise:
        a = L - 2
        tgt = T * sig0
        lo = 0.0
        hi = L * T
        guess = math.nan
        p = a * T * sig0
        if p < 1.0:
            delta_p = -math.log1p(-p) / a
            if L * (lv0 + delta_p) <= log_switch:
                guess = delta_p - math.log1p(-v0 * math.expm1(delta_p) / g0)
                hi = min(hi, guess)
        if not math.isfinite(guess):
            phi1_0 = sp0 / L + ref0
            k0 = 1.0 / (a * sig0) - 1.0 / a + r1_one - phi1_0
            log_g = min(-L * (T - k0), math.log(0.5))
            guess = math.log1p(-math.exp(log_g)) - log_g - w0
        if not (lo <= guess <= hi):
            guess = 0.5 * (lo + hi)
    else:
        tgt = T
        lo = L * T
        hi = inf
        guess = math.nan
        p = 2 * L - 2
        delta_g = _softplus(math.log(p * T) - p * lv0) / p
        if L * (lv0 + delta_g) <= log_switch:
            guess = delta_g - math.log1p(-v0 * math.expm1(delta_g) / g0)
            hi = guess
        else:
            c_dec = r3_one - 1.0 / (L - 2)
            log_g = min(-L * (T - (c_dec - ref0)), math.log(0.5))
            guess = math.log1p(-math.exp(log_g)) - log_g - w0
        if not (lo <= guess <= hi):
            guess = 0.5 * (lo + hi) if math.isfinite(hi) else lo
    x = guess
    it = 0
    while it < MAX_ITER:
        it += 1
        val, slope, mag = _eval(rise, x, w0, v0, sig0, ref0, mag0, L, tab)
        r = val - tgt
        noise = NOISE_FACTOR * _EPS * (mag + abs(tgt))
        if r < 0.0:
            lo = max(lo, x)
        else:
            hi = min(hi, x)
        step = r / slope if slope > 0.0 else (-inf if r < 0.0 else inf)
        xn = x - step
        inside = lo < xn < hi
        if not inside:
            mid = 0.5 * (lo + hi)
            xn = mid if math.isfinite(mid) else x + max(1.0, abs(x))
        done = (abs(r) <= noise or abs(step) <= STEP_RTOL * abs(x)
                or hi - lo <= STEP_RTOL * abs(x) or r == 0.0)
        if done:
            if inside:
                x = xn
            break
        x = xn
    delta, S, v, w = _split(x, w0, v0)
    if w <= 0.0:
        c = c0 * math.exp(sgn * L * delta)
        gap = s - c
    else:
        e = sgn * L * _softplus(-w)
        c = s * math.exp(-e)
        gap = -s * math.expm1(-e)
    return c, gap, it


#: Points per parallel chunk; within a chunk the per-mode constants are reused.
CHUNK = 4096


@njit(cache=True, error_model="numpy", parallel=True)
def strength_deep(T, s, c0, L, tab1, tab3, r1_one, r3_one, c_out, gap_out):
    """Fill c_out, gap_out for 1-D T, s, c0 (depth L >= 3); return the max iterations."""
    n = T.size
    nchunk = (n + CHUNK - 1) // CHUNK
    its = np.zeros(nchunk, dtype=np.int64)
    for k in nb.prange(nchunk):
        itmax = 0
        s_prev = math.nan
        c0_prev = math.nan
        state = _prepare(1.0, 0.5, L, tab1, tab3)
        for i in range(k * CHUNK, min(n, (k + 1) * CHUNK)):
            Ti, si, ci = T[i], s[i], c0[i]
            if Ti == 0.0 or ci == si:
                c_out[i] = ci
                gap_out[i] = si - ci
            elif not math.isfinite(Ti):
                c_out[i] = si
                gap_out[i] = 0.0
            else:
                # per-mode constants are reused while (s, c0) repeats (one mode, many t)
                if si != s_prev or ci != c0_prev:
                    state = _prepare(si, ci, L, tab1, tab3)
                    s_prev = si
                    c0_prev = ci
                c, g, it = _solve_one(Ti, si, ci, L, tab1, tab3, r1_one, r3_one, state)
                c_out[i] = c
                gap_out[i] = g
                if it > itmax:
                    itmax = it
        its[k] = itmax
    return its.max() if nchunk else 0


def tables(depth):
    """Per-depth constants the kernel needs."""
    from ._special import phi_rest_at_one, trig_tables
    L = depth
    return (trig_tables(1, L), trig_tables(L - 3, L), phi_rest_at_one(1, L),
            phi_rest_at_one(L - 3, L))


def strength(T, s, c0, depth):
    """c and s - c for 1-D float64 arrays (depth >= 3) via the compiled kernel."""
    T = np.ascontiguousarray(T, dtype=np.float64)
    s = np.ascontiguousarray(s, dtype=np.float64)
    c0 = np.ascontiguousarray(c0, dtype=np.float64)
    c = np.empty_like(T)
    gap = np.empty_like(T)
    tab1, tab3, r1, r3 = tables(depth)
    it = strength_deep(T, s, c0, int(depth), tab1, tab3, r1, r3, c, gap)
    return c, gap, it


@njit(cache=True, error_model="numpy")
def _expit(x):
    if x >= 0.0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


@njit(cache=True, error_model="numpy", parallel=True)
def strength_shallow(T, s, c0, L, c_out, gap_out):
    """The closed forms for L = 1, 2 (same formulas as the numpy reference)."""
    for i in nb.prange(T.size):
        Ti, si, ci = T[i], s[i], c0[i]
        if Ti == 0.0 or ci == si:
            c_out[i] = ci
            gap_out[i] = si - ci
        elif not math.isfinite(Ti):
            c_out[i] = si
            gap_out[i] = 0.0
        elif L == 1:
            g = (si - ci) * math.exp(-Ti)
            gap_out[i] = g
            c_out[i] = ci - (si - ci) * math.expm1(-Ti) if Ti < 0.5 else si - g
        elif ci < si:
            E = math.expm1(2.0 * min(Ti, 350.0))
            q = ci * (E / si)
            if q <= 1.0 and Ti <= 350.0:     # (E exact: below c = s/2 at relative accuracy)
                c = ci * (1.0 + E) / (1.0 + q)
                c_out[i] = c
                gap_out[i] = si - c
            else:
                A = math.log(si - ci) - math.log(ci) - 2.0 * Ti
                c_out[i] = si * _expit(-A)
                gap_out[i] = si * _expit(A)
        else:
            B = math.log1p(-si / ci) - 2.0 * Ti
            den = -math.expm1(B)
            c_out[i] = si / den
            gap_out[i] = -si * math.exp(B) / den
    return 0


def strength_closed(T, s, c0, depth):
    """c and s - c for L = 1, 2 via the compiled closed forms."""
    T = np.ascontiguousarray(T, dtype=np.float64)
    s = np.ascontiguousarray(s, dtype=np.float64)
    c0 = np.ascontiguousarray(c0, dtype=np.float64)
    c = np.empty_like(T)
    gap = np.empty_like(T)
    strength_shallow(T, s, c0, int(depth), c, gap)
    return c, gap, 0
