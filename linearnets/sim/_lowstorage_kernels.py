"""Numba kernels of the low-storage SSPRK104 stepper (``_lowstorage.py`` is the numpy reference).

The linear model's fast path for SSPRK104: a loop of its own with factored stages, on the
step control of ``methods/_erk_kernels.py``.

* :func:`add_stage` -- ``q += c K`` for a stage derivative held as layer factors;
* :func:`hermite_states` -- the interpolated states of the outputs inside a step;
* :func:`error_sums` -- the scaled error sum and ``|y_new - q1|^2`` in one pass;
* :func:`stiffness_sums` -- ``|K_10 - K_9|^2`` and ``|K_10|^2`` from Gram matrices of
  the factors, or multiplied out in blocks where cancellation spoils those;
* :func:`ssp_advance` -- the adaptive stepping loop to one output time.

The operations of the numpy reference (products through ``np.dot``; elementwise
sums as loops); the two backends agree at the tolerance, not bit for bit.  Stage factors live in two 2-D buffers,
one row per stage slot: ``at[k]`` holds ``A_i^T`` (N_i x C) at offsets ``aoff``,
``g[k]`` holds ``G_i`` (C x N_{i-1}) at ``goff`` (the layout of ``_kernels.chains``).
"""
from __future__ import annotations

import ctypes

import numpy as np
from numba.extending import get_cython_function_address

from .._numba_cache import njit
from ._kernels import (ACCEPTED, NONFINITE_TRIAL, STIFF, capped_step, chains, count_stiff, hold_step,
                       judge_step, step_guard, sumsq, trial_step)
from ._lowrank_kernels import _settle

__all__ = ["gemm_acc", "add_stage", "hermite_states", "error_sums", "stiffness_sums",
           "ssp_advance"]

#: scipy's Fortran ``dgemm`` (the library numba's ``np.dot`` calls), for the accumulating
#: product ``C += alpha A B`` that ``np.dot`` cannot express; every argument by reference.
#: Passed to the kernels as an argument: a ctypes pointer held as a global would be
#: compiled in as a constant, and numba does not cache such functions.
DGEMM = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * 13))(
    get_cython_function_address("scipy.linalg.cython_blas", "dgemm"))


@njit(cache=True)
def gemm_acc(dgemm, Q, w, At, G, ibuf, dbuf):
    """``Q += w At G`` for C-ordered ``Q`` (r x c), ``At`` (r x k), ``G`` (k x c), in place:
    the column-major ``Q^T += w G^T At^T`` (``_lowstorage.gemm_acc``, the same call).
    ``ibuf`` (int32, 8) and ``dbuf`` (2) hold the arguments passed by reference."""
    r, k = At.shape
    c = G.shape[1]
    ibuf[0] = 78  # 'N'
    ibuf[1] = c
    ibuf[2] = r
    ibuf[3] = k
    ibuf[4] = c
    ibuf[5] = k
    ibuf[6] = c
    dbuf[0] = w
    dbuf[1] = 1.0
    dgemm(ibuf.ctypes, ibuf.ctypes, ibuf[1:].ctypes, ibuf[2:].ctypes, ibuf[3:].ctypes,
           dbuf.ctypes, G.ctypes, ibuf[4:].ctypes, At.ctypes, ibuf[5:].ctypes, dbuf[1:].ctypes,
           Q.ctypes, ibuf[6:].ctypes)


@njit(cache=True)
def add_stage(q, c, at, g, eta_l, rows, cols, offs, aoff, goff, dgemm, ibuf, dbuf):
    """``q += c eta_i A_i^T G_i`` layer by layer (``_lowstorage.add_stage``): below the
    top one accumulating rank-C product per layer, read and written once."""
    L = rows.shape[0]
    C = (goff[1] - goff[0]) // cols[0]
    for i in range(L):
        r = rows[i]
        cl = cols[i]
        w = c * eta_l[i]
        base = offs[i]
        if i == L - 1:
            for m in range(r * cl):
                q[base + m] += w * g[goff[i] + m]
            continue
        gemm_acc(dgemm, q[base:base + r * cl].reshape((r, cl)), w,
                 at[aoff[i]:aoff[i] + C * r].reshape((r, C)),
                 g[goff[i]:goff[i] + C * cl].reshape((C, cl)), ibuf, dbuf)


@njit(cache=True)
def hermite_states(thetas, h, y, y_new, out, at, g, eta_l, rows, cols, offs, aoff, goff, dgemm,
                   ibuf, dbuf):
    """``out[i]``: the state at ``t + thetas[i] h`` inside the accepted step ``y -> y_new``
    by the cubic Hermite interpolant on its ends and their derivatives (slots 0 and 10),
    formed as ``_lowstorage.hermite_state`` forms it, for each of the m ``thetas``: the
    outputs of a step in one call."""
    n = y.shape[0]
    for i in range(thetas.shape[0]):
        theta = thetas[i]
        u = 1.0 - theta  # the weights of _tableaux.cubic_hermite, in its order
        h01 = theta * theta * (3.0 - 2.0 * theta)
        h10 = theta * u * u
        h11 = -theta * theta * u
        o = out[i]
        for m in range(n):
            o[m] = (y_new[m] - y[m]) * h01 + y[m]
        add_stage(o, h * h10, at[0], g[0], eta_l, rows, cols, offs, aoff, goff, dgemm, ibuf,
                  dbuf)
        add_stage(o, h * h11, at[10], g[10], eta_l, rows, cols, offs, aoff, goff, dgemm, ibuf,
                  dbuf)


@njit(cache=True)
def _block_sums(y, y_new, q1, m0, P, cnt, h, rtol, atol, e5, dd):
    """Add one block's scaled error squares and ``(y_new - q1)^2`` to ``e5``, ``dd``:
    four interleaved partial sums (element m into sum m % 4, each left to right, then
    ``(s0 + s1) + (s2 + s3)``), which the compiler can keep in vector registers."""
    a0 = a1 = a2 = a3 = 0.0
    d0 = d1 = d2 = d3 = 0.0
    main = cnt - cnt % 4
    for m in range(0, main, 4):
        x = m0 + m
        sc = atol + rtol * max(abs(y[x]), abs(y_new[x]))
        e = ((y_new[x] - y[x]) - h * P[m]) / sc
        a0 += e * e
        v = y_new[x] - q1[x]
        d0 += v * v
        sc = atol + rtol * max(abs(y[x + 1]), abs(y_new[x + 1]))
        e = ((y_new[x + 1] - y[x + 1]) - h * P[m + 1]) / sc
        a1 += e * e
        v = y_new[x + 1] - q1[x + 1]
        d1 += v * v
        sc = atol + rtol * max(abs(y[x + 2]), abs(y_new[x + 2]))
        e = ((y_new[x + 2] - y[x + 2]) - h * P[m + 2]) / sc
        a2 += e * e
        v = y_new[x + 2] - q1[x + 2]
        d2 += v * v
        sc = atol + rtol * max(abs(y[x + 3]), abs(y_new[x + 3]))
        e = ((y_new[x + 3] - y[x + 3]) - h * P[m + 3]) / sc
        a3 += e * e
        v = y_new[x + 3] - q1[x + 3]
        d3 += v * v
    for m in range(main, cnt):
        x = m0 + m
        sc = atol + rtol * max(abs(y[x]), abs(y_new[x]))
        e = ((y_new[x] - y[x]) - h * P[m]) / sc
        v = y_new[x] - q1[x]
        j = m - main
        if j == 0:
            a0 += e * e
            d0 += v * v
        elif j == 1:
            a1 += e * e
            d1 += v * v
        else:
            a2 += e * e
            d2 += v * v
    return e5 + ((a0 + a1) + (a2 + a3)), dd + ((d0 + d1) + (d2 + d3))


@njit(cache=True)
def error_sums(y, y_new, q1, h, at, g, eslots, ew, eta_l, rows, cols, offs, aoff, goff, rtol,
               atol, pbuf, ubuf, vbuf, block_entries):
    """``(e5, dd)`` of ``_lowstorage.error_sums``: ``e5 = sum ((y_new - y - h S) / sc)^2``
    with ``S = sum_j ew_j K_{eslots[j]}`` and ``dd = |y_new - q1|^2``."""
    L = rows.shape[0]
    C = (goff[1] - goff[0]) // cols[0]
    q = eslots.shape[0]
    e5 = 0.0
    dd = 0.0
    for i in range(L):
        r = rows[i]
        cl = cols[i]
        base = offs[i]
        if i == L - 1:
            for m in range(r * cl):
                pbuf[m] = 0.0
            for j in range(q):
                w = ew[j] * eta_l[i]
                gj = g[eslots[j]]
                for m in range(r * cl):
                    pbuf[m] += w * gj[goff[i] + m]
            e5, dd = _block_sums(y, y_new, q1, base, pbuf, r * cl, h, rtol, atol, e5, dd)
            continue
        U = ubuf[:r * q * C].reshape((r, q * C))
        V = vbuf[:q * C * cl].reshape((q * C, cl))
        for j in range(q):
            w = ew[j] * eta_l[i]
            Atj = at[eslots[j]][aoff[i]:aoff[i] + r * C].reshape((r, C))
            Gj = g[eslots[j]][goff[i]:goff[i] + C * cl].reshape((C, cl))
            for a in range(r):
                for b in range(C):
                    U[a, j * C + b] = Atj[a, b] * w
            for b in range(C):
                for d in range(cl):
                    V[j * C + b, d] = Gj[b, d]
        rb = max(1, block_entries // cl)
        for i0 in range(0, r, rb):
            i1 = min(r, i0 + rb)
            cnt = (i1 - i0) * cl
            np.dot(U[i0:i1], V, pbuf[:cnt].reshape((i1 - i0, cl)))
            e5, dd = _block_sums(y, y_new, q1, base + i0 * cl, pbuf, cnt, h, rtol, atol, e5, dd)
    return e5, dd


@njit(cache=True)
def _diff_lanes(x1, x2, cnt, eta):
    """``(sum (eta x1 - eta x2)^2, sum (eta x1)^2)`` over ``cnt`` entries, in the four
    interleaved partial sums of :func:`_block_sums`."""
    n0 = n1 = n2 = n3 = 0.0
    r0 = r1 = r2 = r3 = 0.0
    main = cnt - cnt % 4
    for m in range(0, main, 4):
        k = eta * x1[m]
        d = k - eta * x2[m]
        n0 += d * d
        r0 += k * k
        k = eta * x1[m + 1]
        d = k - eta * x2[m + 1]
        n1 += d * d
        r1 += k * k
        k = eta * x1[m + 2]
        d = k - eta * x2[m + 2]
        n2 += d * d
        r2 += k * k
        k = eta * x1[m + 3]
        d = k - eta * x2[m + 3]
        n3 += d * d
        r3 += k * k
    for m in range(main, cnt):
        k = eta * x1[m]
        d = k - eta * x2[m]
        j = m - main
        if j == 0:
            n0 += d * d
            r0 += k * k
        elif j == 1:
            n1 += d * d
            r1 += k * k
        else:
            n2 += d * d
            r2 += k * k
    return (n0 + n1) + (n2 + n3), (r0 + r1) + (r2 + r3)


@njit(cache=True)
def _inner(Ap, Aq, Gp, Gq, gram):
    """``<Ap^T Gp, Aq^T Gq>_F = sum_ab (Ap^T Aq)_ab (Gp Gq^T)_ab`` (C x C products)."""
    C = Ap.shape[1]
    M1 = gram[:C * C].reshape((C, C))
    M2 = gram[C * C:2 * C * C].reshape((C, C))
    np.dot(Ap.T, Aq, M1)
    np.dot(Gp, Gq.T, M2)
    acc = 0.0
    for a in range(C):
        for b in range(C):
            acc += M1[a, b] * M2[a, b]
    return acc


@njit(cache=True)
def _gram_sums(A1, G1, A2, G2, eta, gram, min_rel):
    """``_lowstorage._gram_sums``: ``(ok, num, ref)`` of one layer from Gram matrices."""
    nA1 = sumsq(A1)
    nG1 = sumsq(G1)
    nA2 = sumsq(A2)
    nG2 = sumsq(G2)
    e2 = eta * eta
    k11 = _inner(A1, A1, G1, G1, gram)
    ref = e2 * k11
    num = e2 * (k11 - 2.0 * _inner(A1, A2, G1, G2, gram) + _inner(A2, A2, G2, G2, gram))
    s1 = e2 * (nA1 * nG1)
    scale = e2 * (np.sqrt(nA1 * nG1) + np.sqrt(nA2 * nG2)) ** 2
    return num >= min_rel * scale and ref >= min_rel * s1, num, ref


@njit(cache=True)
def stiffness_sums(at, g, last, prev, eta_l, rows, cols, aoff, goff, pbuf, block_entries, gram,
                   min_rel):
    """``(num, ref) = (|K_last - K_prev|^2, |K_last|^2)`` (``_lowstorage.stiffness_sums``):
    per layer from Gram matrices where reliable, else multiplied out block by block
    (``pbuf``: two halves, each holding a block of rows of at most ``block_entries``
    entries, or one row if that is longer)."""
    L = rows.shape[0]
    C = (goff[1] - goff[0]) // cols[0]
    num = 0.0
    ref = 0.0
    for i in range(L):
        r = rows[i]
        cl = cols[i]
        eta = eta_l[i]
        if i == L - 1:
            a_num, a_ref = _diff_lanes(g[last][goff[i]:goff[i + 1]], g[prev][goff[i]:goff[i + 1]],
                                       C * cl, eta)
            num += a_num
            ref += a_ref
            continue
        sa = slice(aoff[i], aoff[i] + r * C)
        sg = slice(goff[i], goff[i] + C * cl)
        A1 = at[last][sa].reshape((r, C))
        G1 = g[last][sg].reshape((C, cl))
        A2 = at[prev][sa].reshape((r, C))
        G2 = g[prev][sg].reshape((C, cl))
        ok, a_num, a_ref = _gram_sums(A1, G1, A2, G2, eta, gram, min_rel)
        if ok:
            num += a_num
            ref += a_ref
            continue
        rb = max(1, block_entries // cl)
        for i0 in range(0, r, rb):
            i1 = min(r, i0 + rb)
            cnt = (i1 - i0) * cl
            P1 = pbuf[:cnt]
            P2 = pbuf[pbuf.shape[0] // 2:pbuf.shape[0] // 2 + cnt]
            np.dot(A1[i0:i1], G1, P1.reshape((i1 - i0, cl)))
            np.dot(A2[i0:i1], G2, P2.reshape((i1 - i0, cl)))
            a_num, a_ref = _diff_lanes(P1, P2, cnt, eta)
            num += a_num
            ref += a_ref
    return num, ref


@njit(cache=True)
def _stage(q, k, at, g, Sxx, Syx, rows, cols, offs, aoff, goff, WT, SW, tbuf):
    chains(q, Sxx, Syx, rows, cols, offs, at[k], aoff, g[k], goff, WT, SW, tbuf)


@njit(cache=True)
def ssp_advance(y, y_new, q1, q2, at, g, th, ref0, t_target, t_out, stats, max_steps, eslots, ew,
                exponent, rtol, atol, safety, min_factor, max_factor, min_err, ulps, stiff, pbuf,
                ubuf, vbuf, gram, min_rel, dgemm, ibuf, dbuf, block_entries, Sxx, Syx, eta_l,
                rows, cols, offs, aoff, goff, WT, SW, tbuf):
    """Advance ``y`` (n,) from ``th[0]`` to exactly ``t_target``; slot 0 holds the factors
    of ``f(y)`` on entry and exit.

    One attempted step is ``_lowstorage.ssp_trial`` and the step control is that of
    ``_erk_kernels.make_erk_advance``'s loop: ``th = [t, h, rho, h_prev, err_prev, h_step, t_new, ...]``
    (this loop has no stiffness test: it leaves the last two entries alone),
    ``ref0 = [|f(y)|^2]`` and ``stats = [nfev, accepted, rejected, nonfinite, capped]`` are
    updated in place; returns 0 on success, -1 step-size underflow, -3 step budget
    exhausted, or ``PENDING`` after an accepted step reaching ``t_out`` (dense output):
    ``y`` and ``y_new`` then hold the step's ends, slots 0 and 10 their derivatives, and
    the caller completes the step (``y[:] = y_new``, slot 10 into slot 0).
    """
    n = y.shape[0]
    t = th[0]
    h = th[1]
    nonfinite = False
    cur = y
    nxt = y_new
    in_y = True
    dd = 0.0
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
            # --- one SSPRK(10,4) step in Ketcheson's low-storage form
            c6 = h_try / 6.0
            for m in range(n):
                q1[m] = cur[m]
            add_stage(q1, c6, at[0], g[0], eta_l, rows, cols, offs, aoff, goff, dgemm,
                      ibuf, dbuf)
            for k in range(1, 5):
                _stage(q1, k, at, g, Sxx, Syx, rows, cols, offs, aoff, goff, WT, SW, tbuf)
                add_stage(q1, c6, at[k], g[k], eta_l, rows, cols, offs, aoff, goff, dgemm,
                          ibuf, dbuf)
            for m in range(n):
                q2[m] = cur[m] * 0.04 + q1[m] * 0.36
                q1[m] = q2[m] * 15.0 - q1[m] * 5.0
            for k in range(5, 9):
                _stage(q1, k, at, g, Sxx, Syx, rows, cols, offs, aoff, goff, WT, SW, tbuf)
                add_stage(q1, c6, at[k], g[k], eta_l, rows, cols, offs, aoff, goff, dgemm,
                          ibuf, dbuf)
            _stage(q1, 9, at, g, Sxx, Syx, rows, cols, offs, aoff, goff, WT, SW, tbuf)
            for m in range(n):
                nxt[m] = q2[m] + q1[m] * 0.6
            add_stage(nxt, h_try / 10.0, at[9], g[9], eta_l, rows, cols, offs, aoff, goff, dgemm,
                      ibuf, dbuf)
            _stage(nxt, 10, at, g, Sxx, Syx, rows, cols, offs, aoff, goff, WT, SW, tbuf)
            stats[0] += 10
            e5, dd = error_sums(cur, nxt, q1, h_try, at, g, eslots, ew, eta_l, rows, cols, offs,
                                aoff, goff, rtol, atol, pbuf, ubuf, vbuf, block_entries)
            err = np.sqrt(e5 / n)
            verdict, h = judge_step(err, h, h_try, exponent, max_factor, safety, min_factor,
                                    rejected, clipped, th, min_err, stats)
            if verdict == ACCEPTED:
                nonfinite = False
                break
            nonfinite = nonfinite or verdict == NONFINITE_TRIAL
            rejected = True
        stats[1] += 1
        num, ref_new = stiffness_sums(at, g, 10, 9, eta_l, rows, cols, aoff, goff, pbuf,
                                      block_entries, gram, min_rel)
        h_free = h
        h = capped_step(h, h_try, num, dd / h_try / h_try, ref0[0], sumsq(nxt), th, stiff)
        stiff_now = count_stiff(h, h_free, th, stiff, stats)
        ref0[0] = ref_new
        t_new = t_target if clipped else t + h_try
        if t_new >= t_out:
            return hold_step(th, t, h, h_try, t_new, y, y_new, not in_y)
        cur, nxt = nxt, cur
        in_y = not in_y
        for m in range(at.shape[1]):
            at[0, m] = at[10, m]
        for m in range(g.shape[1]):
            g[0, m] = g[10, m]
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
