"""Numba kernels of the factored-stage stepper (``_lowrank.py`` is the numpy reference).

* :func:`stage` -- the factors of ``f(y + sum_{j<k} w_j K_j)`` into one stage slot;
* :func:`combination` -- ``sum_j w_j K_j`` as a dense flat vector;
* :func:`lowrank_advance` -- the adaptive stepping loop to one output time.

The same operations in the same order as the numpy reference: products through
``np.dot`` (BLAS) on contiguous views of flat buffers, elementwise sums written
as loops.  Arguments are grouped in tuples of flat arrays so every kernel has one
signature (``cache=True``):

* ``ints = (rows, cols, offs, factored, utoff, vsoff, kdoff, toff, goff)`` (int64);
* ``bufs = (ut, vs, kd, wst, tbuf, gbuf, wt, sw, mbuf, nbuf, tmp, usbuf, vgbuf)`` (float64),
  see ``_lowrank.Layout`` for what each holds.
"""
from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["stage", "combination", "lowrank_advance"]


@njit(cache=True)
def _apply_t(l, X, out, k, w, C, ints, bufs, y):
    """``out = W_l^st^T X`` (X: N_l x C, out: N_{l-1} x C)."""
    rows, cols, offs, factored, utoff, vsoff = ints[0], ints[1], ints[2], ints[3], ints[4], ints[5]
    ut, vs, wst, mbuf, tmp = bufs[0], bufs[1], bufs[3], bufs[8], bufs[10]
    r, c = rows[l], cols[l]
    if factored[l] == 0:
        Wd = wst[offs[l]:offs[l + 1]].reshape((r, c))
        np.dot(Wd.T, X, out)
        return
    W = y[offs[l]:offs[l + 1]].reshape((r, c))
    np.dot(W.T, X, out)
    if k == 0:
        return
    U = ut[utoff[l]:utoff[l] + k * C * r].reshape((k * C, r))
    V = vs[vsoff[l]:vsoff[l] + k * C * c].reshape((k * C, c))
    M = mbuf[:k * C * C].reshape((k * C, C))
    np.dot(U, X, M)
    for q in range(k * C):
        wq = w[q // C]
        for a in range(C):
            M[q, a] *= wq
    T = tmp[:c * C].reshape((c, C))
    np.dot(V.T, M, T)
    for i in range(c):
        for a in range(C):
            out[i, a] += T[i, a]


@njit(cache=True)
def _apply_right(l, G, out, k, w, C, ints, bufs, y):
    """``out = G W_l^st^T`` (G: C x N_{l-1}, out: C x N_l)."""
    rows, cols, offs, factored, utoff, vsoff = ints[0], ints[1], ints[2], ints[3], ints[4], ints[5]
    ut, vs, wst, nbuf, tmp = bufs[0], bufs[1], bufs[3], bufs[9], bufs[10]
    r, c = rows[l], cols[l]
    if factored[l] == 0:
        Wd = wst[offs[l]:offs[l + 1]].reshape((r, c))
        np.dot(G, Wd.T, out)
        return
    W = y[offs[l]:offs[l + 1]].reshape((r, c))
    np.dot(G, W.T, out)
    if k == 0:
        return
    U = ut[utoff[l]:utoff[l] + k * C * r].reshape((k * C, r))
    V = vs[vsoff[l]:vsoff[l] + k * C * c].reshape((k * C, c))
    N = nbuf[:C * k * C].reshape((C, k * C))
    np.dot(G, V.T, N)
    for a in range(C):
        for q in range(k * C):
            N[a, q] *= w[q // C]
    T = tmp[:C * r].reshape((C, r))
    np.dot(N, U, T)
    for a in range(C):
        for i in range(r):
            out[a, i] += T[a, i]


@njit(cache=True)
def stage(y, w, k, slot, Sxx, Syx, eta_l, ints, bufs):
    """Store in ``slot`` the factors of ``f(y + sum_{j<k} w_j K_j)`` (``w`` has >= k entries)."""
    rows, cols, offs, factored, utoff, vsoff, kdoff, toff, goff = ints
    ut, vs, kd, wst, tbuf, gbuf, wt, sw = (bufs[0], bufs[1], bufs[2], bufs[3], bufs[4], bufs[5],
                                           bufs[6], bufs[7])
    L = rows.shape[0]
    C = Syx.shape[0]
    D = Sxx.shape[0]
    # dense layers: the stage weights themselves
    for l in range(L):
        if factored[l] == 0:
            size = rows[l] * cols[l]
            base = kdoff[l]
            for m in range(size):
                acc = 0.0
                if k > 0:
                    for j in range(k):
                        if w[j] != 0.0:
                            acc += w[j] * kd[base + j * size + m]
                    wst[offs[l] + m] = y[offs[l] + m] + acc
                else:
                    wst[offs[l] + m] = y[offs[l] + m]
    WT = wt.reshape((D, C))
    # top products T_l (N_l x C): T_{L-2} = W_{L-1}^st^T, T_{l-1} = W_l^st^T T_l
    if L > 1:
        Tt = tbuf[toff[L - 2]:toff[L - 1]].reshape((rows[L - 2], C))
        Wtop = wst[offs[L - 1]:offs[L]].reshape((rows[L - 1], cols[L - 1]))
        for i in range(rows[L - 2]):
            for a in range(C):
                Tt[i, a] = Wtop[a, i]
        for l in range(L - 2, 0, -1):
            _apply_t(l, tbuf[toff[l]:toff[l + 1]].reshape((rows[l], C)),
                     tbuf[toff[l - 1]:toff[l]].reshape((rows[l - 1], C)), k, w, C, ints, bufs, y)
        _apply_t(0, tbuf[toff[0]:toff[1]].reshape((rows[0], C)), WT, k, w, C, ints, bufs, y)
    else:
        W0 = wst[offs[0]:offs[1]].reshape((C, D))
        for d in range(D):
            for a in range(C):
                WT[d, a] = W0[a, d]
    SW = sw.reshape((D, C))
    np.dot(Sxx, WT, SW)
    E = gbuf[goff[0]:goff[1]].reshape((C, D))
    for a in range(C):
        for d in range(D):
            E[a, d] = Syx[a, d] - SW[d, a]
    # bottom products G_l = G_{l-1} W_{l-1}^st^T and the new stage factors
    for l in range(L):
        r, c = rows[l], cols[l]
        G = gbuf[goff[l]:goff[l + 1]].reshape((C, c))
        if l > 0:
            _apply_right(l - 1, gbuf[goff[l - 1]:goff[l]].reshape((C, cols[l - 1])), G,
                         k, w, C, ints, bufs, y)
        eta = eta_l[l]
        if factored[l] != 0:
            Tl = tbuf[toff[l]:toff[l + 1]].reshape((r, C))
            U = ut[utoff[l]:utoff[l + 1]].reshape(((utoff[l + 1] - utoff[l]) // r, r))
            V = vs[vsoff[l]:vsoff[l + 1]].reshape(((vsoff[l + 1] - vsoff[l]) // c, c))
            for a in range(C):
                for i in range(r):
                    U[slot * C + a, i] = Tl[i, a] * eta
                for i in range(c):
                    V[slot * C + a, i] = G[a, i]
        elif l == L - 1:
            size = r * c
            Kd = kd[kdoff[l] + slot * size:kdoff[l] + (slot + 1) * size].reshape((r, c))
            for a in range(r):
                for i in range(c):
                    Kd[a, i] = G[a, i] * eta
        else:
            size = r * c
            Tl = tbuf[toff[l]:toff[l + 1]].reshape((r, C))
            Kd = kd[kdoff[l] + slot * size:kdoff[l] + (slot + 1) * size].reshape((r, c))
            np.dot(Tl, G, Kd)
            for a in range(r):
                for i in range(c):
                    Kd[a, i] = Kd[a, i] * eta


@njit(cache=True)
def combination(w, k, out, C, ints, bufs):
    """``out = sum_{j<k} w_j K_j`` as a dense flat vector (n,)."""
    rows, cols, offs, factored, utoff, vsoff, kdoff = (ints[0], ints[1], ints[2], ints[3],
                                                        ints[4], ints[5], ints[6])
    ut, vs, kd, usbuf, vgbuf = bufs[0], bufs[1], bufs[2], bufs[11], bufs[12]
    L = rows.shape[0]
    for l in range(L):
        r, c = rows[l], cols[l]
        if factored[l] != 0:
            U = ut[utoff[l]:utoff[l] + k * C * r].reshape((k * C, r))
            V = vs[vsoff[l]:vsoff[l] + k * C * c].reshape((k * C, c))
            # gather the slots with a nonzero weight, the U rows scaled
            nz = 0
            for j in range(k):
                if w[j] != 0.0:
                    nz += 1
            Us = usbuf[:nz * C * r].reshape((nz * C, r))
            Vg = vgbuf[:nz * C * c].reshape((nz * C, c))
            q2 = 0
            for q in range(k * C):
                wq = w[q // C]
                if wq != 0.0:
                    for i in range(r):
                        Us[q2, i] = U[q, i] * wq
                    for i in range(c):
                        Vg[q2, i] = V[q, i]
                    q2 += 1
            o = out[offs[l]:offs[l + 1]]
            if nz == 0:
                for m in range(r * c):
                    o[m] = 0.0
            else:
                np.dot(Us.T, Vg, o.reshape((r, c)))
        else:
            size = r * c
            base = kdoff[l]
            for m in range(size):
                acc = 0.0
                for j in range(k):
                    if w[j] != 0.0:
                        acc += w[j] * kd[base + j * size + m]
                out[offs[l] + m] = acc


@njit(cache=True)
def _scaled_sumsq(d, y, y_new, rtol, atol):
    acc = 0.0
    for m in range(d.shape[0]):
        sc = atol + rtol * max(abs(y[m]), abs(y_new[m]))
        q = d[m] / sc
        acc += q * q
    return acc


@njit(cache=True)
def lowrank_advance(y, y_new, d5, d3, wtmp, th, t_target, stats, max_steps, A, b, e, e3, use_e3,
                    exponent, rtol, atol, safety, min_factor, max_factor, ulps,
                    Sxx, Syx, eta_l, ints, bufs):
    """Advance ``y`` (n,) from ``th[0]`` to exactly ``t_target``; slot 0 holds ``f(y)``.

    The loop of ``_kernels.erk_advance`` with factored stages (``_lowrank.lowrank_solve``):
    ``th = [t, h]``, ``stats = [nfev, accepted, rejected, nonfinite]`` updated in
    place; returns 0 on success, -1 step-size underflow, -3 step budget exhausted.
    """
    s = b.shape[0]
    n = y.shape[0]
    C = Syx.shape[0]
    t = th[0]
    h = th[1]
    nonfinite = False
    while True:
        min_step = ulps * (np.nextafter(t, np.inf) - t)
        if h < min_step:
            h = min_step
        rejected = False
        while True:
            if stats[1] + stats[2] >= max_steps:
                th[0] = t
                th[1] = h
                return -3
            if h < min_step:
                th[0] = t
                th[1] = h
                stats[3] = 1 if nonfinite else 0
                return -1
            h_try = h
            clipped = t + h >= t_target
            if clipped:
                h_try = t_target - t
            for i in range(1, s + 1):
                for j in range(i):
                    wtmp[j] = h_try * (b[j] if i == s else A[i, j])
                stage(y, wtmp, i, i, Sxx, Syx, eta_l, ints, bufs)
            stats[0] += s
            for j in range(s):
                wtmp[j] = h_try * b[j]
            combination(wtmp, s, y_new, C, ints, bufs)
            for m in range(n):
                y_new[m] += y[m]
            # error norm (RMS, or Hairer's DOP853 combination of err5 and err3)
            combination(e, s + 1, d5, C, ints, bufs)
            e5 = _scaled_sumsq(d5, y, y_new, rtol, atol)
            if use_e3:
                combination(e3, s + 1, d3, C, ints, bufs)
                e3n = _scaled_sumsq(d3, y, y_new, rtol, atol)
                if e5 == 0.0 and e3n == 0.0:
                    err = 0.0
                else:
                    err = abs(h_try) * e5 / np.sqrt((e5 + 0.01 * e3n) * n)
            else:
                err = abs(h_try) * np.sqrt(e5 / n)
            if not np.isfinite(err):
                nonfinite = True
                stats[2] += 1
                h = h_try * min_factor
                rejected = True
                continue
            if err < 1.0:
                # _explicit.step_after_accept, inlined for the compiled loop
                if err == 0.0:
                    factor = max_factor
                else:
                    factor = min(max_factor, safety * err ** exponent)
                if rejected:
                    factor = min(1.0, factor)
                h_next = h_try * factor
                if clipped and not rejected:
                    h_next = max(h_next, h)
                h = h_next
                nonfinite = False
                break
            stats[2] += 1
            h = h_try * max(min_factor, safety * err ** exponent)
            rejected = True
        stats[1] += 1
        for m in range(n):
            y[m] = y_new[m]
        _fsal(s, C, ints, bufs)
        if clipped:
            th[0] = t_target
            th[1] = h
            return 0
        t = t + h_try


@njit(cache=True)
def _fsal(s, C, ints, bufs):
    rows, cols, factored, utoff, vsoff, kdoff = ints[0], ints[1], ints[3], ints[4], ints[5], ints[6]
    ut, vs, kd = bufs[0], bufs[1], bufs[2]
    for l in range(rows.shape[0]):
        if factored[l] != 0:
            nu = C * rows[l]
            for m in range(nu):
                ut[utoff[l] + m] = ut[utoff[l] + s * nu + m]
            nv = C * cols[l]
            for m in range(nv):
                vs[vsoff[l] + m] = vs[vsoff[l] + s * nv + m]
        else:
            size = rows[l] * cols[l]
            for m in range(size):
                kd[kdoff[l] + m] = kd[kdoff[l] + s * size + m]
