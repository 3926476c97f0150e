"""Numba kernels of the factored-stage stepper (``_lowrank.py`` is the numpy reference).

The linear model's fast path for the explicit pairs on wide networks: a loop of its own
with rank-C factored stages, on the step control of ``methods/_erk_kernels.py``.

* :func:`stage` -- the factors of ``f(y + sum_{j<k} w_j K_j)`` into one stage slot;
* :func:`combination` -- ``sum_j w_j K_j`` as a dense flat vector (:func:`combinations`:
  ``y +`` that for many weight vectors, the outputs inside a step);
* :func:`step_end` -- the new state and the scaled error sums in one pass;
* :func:`lowrank_advance` -- the adaptive stepping loop to one output time.

The same operations in the same order as the numpy reference: products through
``np.dot`` (BLAS) on contiguous views of flat buffers, elementwise sums written
as loops.  (A whole gradient in hand-written loops was measured 1.35-1.8x faster
than these BLAS calls with one output and 1.3-3.6x slower with 4 to 10, besides
rounding apart from the reference: ``benchmarks/studies/study_narrow_kernel.py``.)
Arguments are grouped in tuples of flat arrays so every kernel has one signature (``cache=True``):

* ``ints = (rows, cols, offs, factored, utoff, vsoff, kdoff, aoff, goff)`` (int64);
* ``bufs = (ut, vs, kd, wst, abuf, gbuf, wbuf, sw, mbuf, nbuf, tmp, usbuf, vgbuf, gram,
  tbuf)`` (float64), see ``_lowrank.Layout`` for what each holds (``gram``: two Gram
  matrices of the stiffness estimate; ``tbuf``: scratch of ``_kernels.times_transpose``).
"""
from __future__ import annotations

import numpy as np

from .._numba_cache import njit
from ._kernels import (ACCEPTED, NONFINITE_TRIAL, STIFF, capped_step, count_stiff, error_norm,
                       hold_step, judge_step, step_guard, sumsq, times_transpose, trial_step)

__all__ = ["stage", "combination", "combinations", "step_end", "stiffness_sums", "fsal",
           "lowrank_advance"]

@njit(cache=True)
def _apply_left(l, A, out, k, w, C, ints, bufs, y):
    """``out = A W_l^st`` (A: C x N_l, out: C x N_{l-1})."""
    rows, cols, offs, factored, utoff, vsoff = ints[0], ints[1], ints[2], ints[3], ints[4], ints[5]
    ut, vs, wst, mbuf, tmp = bufs[0], bufs[1], bufs[3], bufs[8], bufs[10]
    r, c = rows[l], cols[l]
    if factored[l] == 0:
        np.dot(A, wst[offs[l]:offs[l + 1]].reshape((r, c)), out)
        return
    np.dot(A, y[offs[l]:offs[l + 1]].reshape((r, c)), out)
    if k == 0:
        return
    U = ut[utoff[l]:utoff[l] + k * C * r].reshape((k * C, r))
    V = vs[vsoff[l]:vsoff[l] + k * C * c].reshape((k * C, c))
    M = mbuf[:C * k * C].reshape((C, k * C))
    np.dot(A, U.T, M)
    for a in range(C):
        for q in range(k * C):
            M[a, q] *= w[q // C]
    T = tmp[:C * c].reshape((C, c))
    np.dot(M, V, T)
    for a in range(C):
        for i in range(c):
            out[a, i] += T[a, i]


@njit(cache=True)
def _apply_right(l, G, out, k, w, C, ints, bufs, y):
    """``out = G W_l^st^T`` (G: C x N_{l-1}, out: C x N_l)."""
    rows, cols, offs, factored, utoff, vsoff = ints[0], ints[1], ints[2], ints[3], ints[4], ints[5]
    ut, vs, wst, nbuf, tmp, tbuf = bufs[0], bufs[1], bufs[3], bufs[9], bufs[10], bufs[14]
    r, c = rows[l], cols[l]
    if factored[l] == 0:
        times_transpose(G, wst[offs[l]:offs[l + 1]].reshape((r, c)), out, tbuf)
        return
    times_transpose(G, y[offs[l]:offs[l + 1]].reshape((r, c)), out, tbuf)
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
def stage(y, w, k, slot, Sxx, Syx, eta_l, white, ints, bufs):
    """Store in ``slot`` the factors of ``f(y + sum_{j<k} w_j K_j)`` (``w`` has >= k entries)."""
    rows, cols, offs, factored, utoff, vsoff, kdoff, aoff, goff = ints
    ut, vs, kd, wst, abuf, gbuf, wbuf, sw = (bufs[0], bufs[1], bufs[2], bufs[3], bufs[4],
                                             bufs[5], bufs[6], bufs[7])
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
    W = wbuf.reshape((C, D))
    # top products A_l (C x N_l): A_{L-2} = W_{L-1}^st, A_{l-1} = A_l W_l^st; W = A_0 W_0^st
    if L > 1:
        At = abuf[aoff[L - 2]:aoff[L - 1]]
        for m in range(C * rows[L - 2]):
            At[m] = wst[offs[L - 1] + m]
        for l in range(L - 2, 0, -1):
            _apply_left(l, abuf[aoff[l]:aoff[l + 1]].reshape((C, rows[l])),
                        abuf[aoff[l - 1]:aoff[l]].reshape((C, rows[l - 1])), k, w, C, ints, bufs, y)
        _apply_left(0, abuf[aoff[0]:aoff[1]].reshape((C, rows[0])), W, k, w, C, ints, bufs, y)
    else:
        for m in range(C * D):
            wbuf[m] = wst[offs[0] + m]
    # E = Syx - W Sxx (Sxx = I on whitened data), stored as G_0
    E = gbuf[goff[0]:goff[1]].reshape((C, D))
    if white:
        for a in range(C):
            for d in range(D):
                E[a, d] = Syx[a, d] - W[a, d]
    else:
        SW = sw.reshape((C, D))
        np.dot(W, Sxx, SW)
        for a in range(C):
            for d in range(D):
                E[a, d] = Syx[a, d] - SW[a, d]
    # bottom products G_l = G_{l-1} W_{l-1}^st^T and the new stage factors
    for l in range(L):
        r, c = rows[l], cols[l]
        G = gbuf[goff[l]:goff[l + 1]].reshape((C, c))
        if l > 0:
            _apply_right(l - 1, gbuf[goff[l - 1]:goff[l]].reshape((C, cols[l - 1])), G,
                         k, w, C, ints, bufs, y)
        eta = eta_l[l]
        if factored[l] != 0:
            Al = abuf[aoff[l]:aoff[l + 1]].reshape((C, r))
            U = ut[utoff[l]:utoff[l + 1]].reshape(((utoff[l + 1] - utoff[l]) // r, r))
            V = vs[vsoff[l]:vsoff[l + 1]].reshape(((vsoff[l + 1] - vsoff[l]) // c, c))
            for a in range(C):
                for i in range(r):
                    U[slot * C + a, i] = Al[a, i] * eta
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
            Al = abuf[aoff[l]:aoff[l + 1]].reshape((C, r))
            Kd = kd[kdoff[l] + slot * size:kdoff[l] + (slot + 1) * size].reshape((r, c))
            np.dot(Al.T, G, Kd)
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
def combinations(W, k, y, out, C, ints, bufs):
    """``out[i] = y + sum_{j<k} W[i, j] K_j`` for each row i of ``W`` (m, >= k): the
    states of a step's continuous extension (``W``: h times its weights), each formed as
    :func:`combination` and then added to ``y``, as the one-at-a-time path does."""
    n = y.shape[0]
    for i in range(W.shape[0]):
        o = out[i]
        combination(W[i], k, o, C, ints, bufs)
        for m in range(n):
            o[m] = o[m] + y[m]


@njit(cache=True)
def _gather(l, w, k, which, C, ints, bufs):
    """Gather layer l's slots with nonzero weight into work area ``which`` (0, 1, 2).

    Writes ``U^T`` scaled by ``w`` (N_l x q) and ``V`` (q x N_{l-1}) as in
    ``_lowrank._Stages._gathered``; returns ``q`` (nonzero slots times C).
    """
    rows, cols, utoff, vsoff = ints[0], ints[1], ints[4], ints[5]
    ut, vs, usbuf, vgbuf = bufs[0], bufs[1], bufs[11], bufs[12]
    r, c = rows[l], cols[l]
    q = 0
    for j in range(k):
        if w[j] != 0.0:
            q += C
    ubase = which * (usbuf.shape[0] // 3)
    vbase = which * (vgbuf.shape[0] // 3)
    Ust = usbuf[ubase:ubase + r * q].reshape((r, q))
    Vg = vgbuf[vbase:vbase + q * c].reshape((q, c))
    U = ut[utoff[l]:utoff[l] + k * C * r].reshape((k * C, r))
    V = vs[vsoff[l]:vsoff[l] + k * C * c].reshape((k * C, c))
    q2 = 0
    for row in range(k * C):
        wq = w[row // C]
        if wq != 0.0:
            for i in range(r):
                Ust[i, q2] = U[row, i] * wq
            for i in range(c):
                Vg[q2, i] = V[row, i]
            q2 += 1
    return q


@njit(cache=True)
def _block_product(l, which, q, i0, i1, out, C, ints, bufs):
    """``out = (U^T w)[i0:i1] V`` from work area ``which`` (out: (i1 - i0) x N_{l-1})."""
    cols = ints[1]
    usbuf, vgbuf = bufs[11], bufs[12]
    c = cols[l]
    if q == 0:
        for i in range(i1 - i0):
            for j in range(c):
                out[i, j] = 0.0
        return
    ubase = which * (usbuf.shape[0] // 3)
    vbase = which * (vgbuf.shape[0] // 3)
    np.dot(usbuf[ubase + i0 * q:ubase + i1 * q].reshape((i1 - i0, q)),
           vgbuf[vbase:vbase + q * c].reshape((q, c)), out)


@njit(cache=True)
def _finish_block(y, y_new, m0, pb, pe, p3, use_e3, c3, rtol, atol):
    """``y_new = y + pb`` on one block from offset ``m0``; its sums of scaled error squares.

    Summed left to right, as the numpy reference does (a reassociated, vectorised
    sum was measured no faster: the loop is bound by memory traffic, and exact
    agreement with the reference keeps both backends on the same steps).
    """
    s5 = 0.0
    s3 = 0.0
    if use_e3:
        for m in range(pb.shape[0]):
            yv = y[m0 + m]
            yn = yv + pb[m]
            y_new[m0 + m] = yn
            sc = atol + rtol * max(abs(yv), abs(yn))
            q5 = pe[m] / sc
            q3 = (p3[m] + c3 * pb[m]) / sc
            s5 += q5 * q5
            s3 += q3 * q3
    else:
        for m in range(pb.shape[0]):
            yv = y[m0 + m]
            yn = yv + pb[m]
            y_new[m0 + m] = yn
            sc = atol + rtol * max(abs(yv), abs(yn))
            q5 = pe[m] / sc
            s5 += q5 * q5
    return s5, s3


@njit(cache=True)
def step_end(y, y_new, wb, we, we3, use_e3, c3, rtol, atol, block_entries, C, ints, bufs, pbuf):
    """``y_new = y + sum_j wb_j K_j`` and the scaled error sums ``(e5, e3)``.

    The compiled ``_lowrank._Stages.step_end``: one pass over the state, factored
    layers in row blocks whose products stay in cache; the second error estimate
    is ``sum_j we3_j K_j + c3 sum_j wb_j K_j``.
    """
    rows, cols, offs, factored, kdoff = ints[0], ints[1], ints[2], ints[3], ints[6]
    kd = bufs[2]
    L = rows.shape[0]
    e5 = 0.0
    e3 = 0.0
    nb = pbuf.shape[0] // 3
    for l in range(L):
        r, c = rows[l], cols[l]
        base = offs[l]
        if factored[l] != 0:
            qb = _gather(l, wb, wb.shape[0], 0, C, ints, bufs)
            qe = _gather(l, we, we.shape[0], 1, C, ints, bufs)
            q3 = _gather(l, we3, we3.shape[0], 2, C, ints, bufs) if use_e3 else 0
            rb = max(1, block_entries // c)
            for i0 in range(0, r, rb):
                i1 = min(r, i0 + rb)
                size = (i1 - i0) * c
                Pb = pbuf[:size].reshape((i1 - i0, c))
                Pe = pbuf[nb:nb + size].reshape((i1 - i0, c))
                P3 = pbuf[2 * nb:2 * nb + size].reshape((i1 - i0, c))
                _block_product(l, 0, qb, i0, i1, Pb, C, ints, bufs)
                _block_product(l, 1, qe, i0, i1, Pe, C, ints, bufs)
                if use_e3:
                    _block_product(l, 2, q3, i0, i1, P3, C, ints, bufs)
                s5, s3 = _finish_block(y, y_new, base + i0 * c, pbuf[:size], pbuf[nb:nb + size],
                                       pbuf[2 * nb:2 * nb + size], use_e3, c3, rtol, atol)
                e5 += s5
                e3 += s3
        else:
            size = r * c
            kb = kdoff[l]
            s5 = 0.0
            s3 = 0.0
            for m in range(size):
                pb = 0.0
                for j in range(wb.shape[0]):
                    if wb[j] != 0.0:
                        pb += wb[j] * kd[kb + j * size + m]
                pe = 0.0
                for j in range(we.shape[0]):
                    if we[j] != 0.0:
                        pe += we[j] * kd[kb + j * size + m]
                yv = y[base + m]
                yn = yv + pb
                y_new[base + m] = yn
                sc = atol + rtol * max(abs(yv), abs(yn))
                qv = pe / sc
                s5 += qv * qv
                if use_e3:
                    p3 = 0.0
                    for j in range(we3.shape[0]):
                        if we3[j] != 0.0:
                            p3 += we3[j] * kd[kb + j * size + m]
                    qv = (p3 + c3 * pb) / sc
                    s3 += qv * qv
            e5 += s5
            e3 += s3
    return e5, e3


@njit(cache=True)
def _gram_pair(X, Y, bufs):
    """``(X X^T, Y Y^T)`` into the ``gram`` buffer, each as a product with a copied
    transpose (``_lowrank._gram``)."""
    usbuf, gram = bufs[11], bufs[13]
    q, r = X.shape
    c = Y.shape[1]
    GX = gram[:q * q].reshape((q, q))
    GY = gram[q * q:2 * q * q].reshape((q, q))
    Xt = usbuf[:r * q].reshape((r, q))
    for p in range(q):
        for i in range(r):
            Xt[i, p] = X[p, i]
    np.dot(X, Xt, GX)
    Yt = usbuf[:c * q].reshape((c, q))
    for p in range(q):
        for i in range(c):
            Yt[i, p] = Y[p, i]
    np.dot(Y, Yt, GY)
    return GX, GY


@njit(cache=True)
def stiffness_sums(s, wd, C, ints, bufs):
    """``_lowrank._Stages.stiffness_sums``: ``(num, dd, ref)`` of the accepted step."""
    eps = np.finfo(np.float64).eps
    rows, cols, factored, utoff, vsoff, kdoff = ints[0], ints[1], ints[3], ints[4], ints[5], ints[6]
    ut, vs, kd = bufs[0], bufs[1], bufs[2]
    num = 0.0
    dd = 0.0
    ref = 0.0
    for l in range(rows.shape[0]):
        r, c = rows[l], cols[l]
        if factored[l] != 0:
            U = ut[utoff[l]:utoff[l + 1]].reshape(((utoff[l + 1] - utoff[l]) // r, r))
            V = vs[vsoff[l]:vsoff[l + 1]].reshape(((vsoff[l + 1] - vsoff[l]) // c, c))
            q = s * C
            GU, GV = _gram_pair(U[:q], V[:q], bufs)
            acc = 0.0
            for a in range(C):
                for b in range(C):
                    acc += GU[a, b] * GV[a, b]
            ref += acc
            acc = 0.0
            for p in range(q):
                wp = wd[p // C]
                for p2 in range(q):
                    acc += wp * wd[p2 // C] * GU[p, p2] * GV[p, p2]
            # floored at its rounding (_lowrank._gram_rounding)
            sd = 0.0
            for j in range(s):
                du = 0.0
                for p in range(j * C, (j + 1) * C):
                    du += GU[p, p]
                dv = 0.0
                for p in range(j * C, (j + 1) * C):
                    dv += GV[p, p]
                sd += abs(wd[j]) * np.sqrt(du * dv)
            dd += max(acc, (r + c + s * C) * eps * (sd * sd))
            GU, GV = _gram_pair(U[(s - 1) * C:(s + 1) * C], V[(s - 1) * C:(s + 1) * C], bufs)
            acc = 0.0
            for p in range(2 * C):
                sp = -1.0 if p < C else 1.0
                for p2 in range(2 * C):
                    sp2 = -1.0 if p2 < C else 1.0
                    acc += sp * sp2 * GU[p, p2] * GV[p, p2]
            num += acc
        else:
            size = r * c
            base = kdoff[l]
            a_ref = 0.0
            a_num = 0.0
            a_dd = 0.0
            for m in range(size):
                a_ref += kd[base + m] * kd[base + m]
                dv = kd[base + s * size + m] - kd[base + (s - 1) * size + m]
                a_num += dv * dv
                v = 0.0
                for j in range(s):
                    if wd[j] != 0.0:
                        v += wd[j] * kd[base + j * size + m]
                a_dd += v * v
            ref += a_ref
            num += a_num
            dd += a_dd
    return num, dd, ref


@njit(cache=True)
def fsal(s, C, ints, bufs):
    """Slot ``s`` (the derivative at the accepted state) becomes slot 0."""
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


@njit(cache=True)
def lowrank_advance(y, y_new, pbuf, block_entries, wtmp, th, t_target, t_out, stats, max_steps, A,
                    b, e, e3, use_e3, exponent, rtol, atol, safety, min_factor, max_factor,
                    min_err, ulps, wd, stiff, Sxx, Syx, eta_l, white, ints, bufs):
    """Advance ``y`` (n,) from ``th[0]`` to exactly ``t_target``; slot 0 holds ``f(y)``.

    The loop of ``_erk_kernels.make_erk_advance`` with factored stages (``_lowrank.lowrank_solve``):
    ``th`` and ``stats`` (as there) updated in
    place; returns 0 on success, -1 step-size underflow, -3 step budget exhausted,
    ``PENDING`` after an accepted step reaching ``t_out`` (as ``erk_advance``: ``y`` and
    the slots are still the step's, ``y_new`` its end state; the caller completes it
    with ``y[:] = y_new`` and :func:`fsal`), or ``STIFF`` as ``erk_advance`` (slot 0
    then holds ``f(y)``).
    """
    s = b.shape[0]
    n = y.shape[0]
    C = Syx.shape[0]
    t = th[0]
    h = th[1]
    nonfinite = False
    # the state and the trial state swap roles at every accepted step; the caller's
    # ``y`` receives the state once, when this call returns
    cur = y
    nxt = y_new
    in_y = True
    while True:
        min_step = ulps * (np.nextafter(t, np.inf) - t)
        if h < min_step:
            h = min_step
        rejected = False
        while True:
            code = step_guard(h, min_step, stats, max_steps, nonfinite)
            if code != 0:
                th[0] = t
                th[1] = h
                _settle(y, cur, in_y)
                return code
            h_try, clipped = trial_step(t, h, t_target)
            for i in range(1, s + 1):
                for j in range(i):
                    wtmp[j] = h_try * (b[j] if i == s else A[i, j])
                stage(cur, wtmp, i, i, Sxx, Syx, eta_l, white, ints, bufs)
            stats[0] += s
            for j in range(s):
                wtmp[j] = h_try * b[j]
            e5, e3n = step_end(cur, nxt, wtmp[:s], e, e3, use_e3, 1.0 / h_try, rtol, atol,
                               block_entries, C, ints, bufs, pbuf)
            err = error_norm(e5, e3n, use_e3, h_try, n)
            verdict, h = judge_step(err, h, h_try, exponent, max_factor, safety, min_factor,
                                    rejected, clipped, th, min_err, stats)
            if verdict == ACCEPTED:
                nonfinite = False
                break
            nonfinite = nonfinite or verdict == NONFINITE_TRIAL
            rejected = True
        stats[1] += 1
        num, dd, ref = stiffness_sums(s, wd, C, ints, bufs)
        h_free = h
        h = capped_step(h, h_try, num, dd, ref, sumsq(nxt), th, stiff)
        stiff_now = count_stiff(h, h_free, th, stiff, stats)
        t_new = t_target if clipped else t + h_try
        if t_new >= t_out:
            return hold_step(th, t, h, h_try, t_new, y, y_new, not in_y)
        cur, nxt = nxt, cur
        in_y = not in_y
        fsal(s, C, ints, bufs)
        if clipped:
            th[0] = t_target
            th[1] = h
            _settle(y, cur, in_y)
            return 0
        t = t + h_try
        if stiff_now:
            th[0] = t
            th[1] = h
            _settle(y, cur, in_y)
            return STIFF


@njit(cache=True)
def _settle(y, cur, in_y):
    """Copy the current state into the caller's array unless it is already there."""
    if not in_y:
        for m in range(y.shape[0]):
            y[m] = cur[m]
