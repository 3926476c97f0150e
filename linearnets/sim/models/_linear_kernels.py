"""Numba kernels of the deep linear network (``models/linear.py`` is the numpy reference).

The right-hand side, its Jacobian-vector product, the factored stage stores and the
observations, and the cached entry points into the loops of ``methods/``; docs/simulator.md
("The linear network") lists them and their argument tuples ``ints`` and ``bufs``.
"""
from __future__ import annotations

import ctypes

import numpy as np
from numba.extending import get_cython_function_address

from ..._numba_cache import njit
from ..methods._erk_kernels import error_norm, make_erk_advance, sumsq
from ..methods._rosw_kernels import make_rosw_advance

__all__ = ["TRANSPOSED_PRODUCT_MAX_BYTES", "DGEMM", "times_transpose", "chains", "rhs_flat",
           "jvp_flat", "rhs", "jvp", "stage", "combinations", "step_end",
           "stage_stiffness_sums", "stage_fsal", "gemm_acc", "add_stage", "hermite_states",
           "error_sums", "slot_stiffness_sums", "ssp_advance", "end_to_end",
           "balance_drift", "probe_ntk", "erk_advance", "factored_advance", "rosw_advance"]

#: Largest layer (bytes) whose ``G W^T`` is formed as ``(W G^T)^T`` (docs/simulator.md).
TRANSPOSED_PRODUCT_MAX_BYTES = 1 << 21

#: scipy's Fortran ``dgemm`` for ``C += alpha A B``, passed as an argument (docs/simulator.md).
DGEMM = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * 13))(
    get_cython_function_address("scipy.linalg.cython_blas", "dgemm"))


@njit(cache=True)
def _layer(x, offs, rows, cols, i):
    """Layer ``i`` of the flat state ``x`` as a (rows[i], cols[i]) view."""
    return x[offs[i]:offs[i + 1]].reshape((rows[i], cols[i]))


@njit(cache=True)
def _top(buf, aoff, rows, i, C):
    """``A_i^T`` (rows[i] x C) in a buffer laid out as :func:`chains`' ``abuf``."""
    return buf[aoff[i]:aoff[i] + C * rows[i]].reshape((rows[i], C))


@njit(cache=True)
def _bottom(buf, goff, cols, i, C):
    """``G_i`` (C x cols[i]) in a buffer laid out as :func:`chains`' ``gbuf``."""
    return buf[goff[i]:goff[i] + C * cols[i]].reshape((C, cols[i]))


@njit(cache=True)
def times_transpose(G, W, out, tbuf):
    """``out = G W^T`` (C x r) for ``G`` (C x c), ``W`` (r x c), as ``linear.times_transpose``."""
    C, c = G.shape
    r = W.shape[0]
    if 8 * r * c <= TRANSPOSED_PRODUCT_MAX_BYTES:
        GT = tbuf[:c * C].reshape((c, C))
        GT[:, :] = G.T
        OT = tbuf[c * C:(c + r) * C].reshape((r, C))
        np.dot(W, GT, OT)
        out[:, :] = OT.T
    else:
        np.dot(G, W.T, out)


@njit(cache=True)
def chains(y, Sxx, Syx, rows, cols, offs, abuf, aoff, gbuf, goff, WT, SW, tbuf):
    """The partial products at ``y`` (``linear.chain_products``): ``A_i^T`` (rows[i] x C) into
    ``abuf`` at ``aoff``, ``G_i`` (C x cols[i]) into ``gbuf`` at ``goff``; the rest scratch."""
    L = rows.shape[0]
    C = Syx.shape[0]
    if L > 1:
        _top(abuf, aoff, rows, L - 2, C)[:, :] = _layer(y, offs, rows, cols, L - 1).T
        for i in range(L - 3, -1, -1):
            np.dot(_layer(y, offs, rows, cols, i + 1).T, _top(abuf, aoff, rows, i + 1, C),
                   _top(abuf, aoff, rows, i, C))
        np.dot(_layer(y, offs, rows, cols, 0).T, _top(abuf, aoff, rows, 0, C), WT)
    else:
        WT[:, :] = _layer(y, offs, rows, cols, 0).T
    np.dot(Sxx, WT, SW)
    np.subtract(Syx, SW.T, _bottom(gbuf, goff, cols, 0, C))
    for i in range(1, L):
        times_transpose(_bottom(gbuf, goff, cols, i - 1, C), _layer(y, offs, rows, cols, i - 1),
                        _bottom(gbuf, goff, cols, i, C), tbuf)


@njit(cache=True)
def rhs_flat(y, out, Sxx, Syx, eta_l, rows, cols, offs, abuf, aoff, gbuf, goff, WT, SW, tbuf):
    """``out = dy/dt`` at ``y`` (n,): :func:`chains`, then ``dW_i = eta_i A_i^T G_i``."""
    L = rows.shape[0]
    C = Syx.shape[0]
    chains(y, Sxx, Syx, rows, cols, offs, abuf, aoff, gbuf, goff, WT, SW, tbuf)
    for i in range(L):
        Gi = _bottom(gbuf, goff, cols, i, C)
        dW = _layer(out, offs, rows, cols, i)
        eta = eta_l[i]
        if i == L - 1:
            np.multiply(Gi, eta, dW)
        else:
            np.dot(_top(abuf, aoff, rows, i, C), Gi, dW)
            if eta != 1.0:      # a pass over the layer: skipped at unit rates, as in numpy
                np.multiply(dW, eta, dW)


@njit(cache=True)
def jvp_flat(v, out, y, Sxx, eta_l, rows, cols, offs, abuf, aoff, gbuf, goff, dabuf, dgbuf,
             dWT, dSW, tbuf, pbuf):
    """``out = J(y) v`` from the products of ``y`` in ``abuf``, ``gbuf`` (``linearize``)."""
    L = rows.shape[0]
    C = (goff[1] - goff[0]) // cols[0]
    D = Sxx.shape[0]
    if L > 1:
        _top(dabuf, aoff, rows, L - 2, C)[:, :] = _layer(v, offs, rows, cols, L - 1).T
        for i in range(L - 3, -1, -1):
            dAi = _top(dabuf, aoff, rows, i, C)
            np.dot(_layer(y, offs, rows, cols, i + 1).T, _top(dabuf, aoff, rows, i + 1, C), dAi)
            P = pbuf[:rows[i] * C].reshape((rows[i], C))
            np.dot(_layer(v, offs, rows, cols, i + 1).T, _top(abuf, aoff, rows, i + 1, C), P)
            np.add(dAi, P, dAi)
        np.dot(_layer(y, offs, rows, cols, 0).T, _top(dabuf, aoff, rows, 0, C), dWT)
        P = pbuf[:D * C].reshape((D, C))
        np.dot(_layer(v, offs, rows, cols, 0).T, _top(abuf, aoff, rows, 0, C), P)
        np.add(dWT, P, dWT)
    else:
        dWT[:, :] = _layer(v, offs, rows, cols, 0).T
    np.dot(Sxx, dWT, dSW)
    np.negative(dSW.T, _bottom(dgbuf, goff, cols, 0, C))
    for i in range(1, L):
        dGi = _bottom(dgbuf, goff, cols, i, C)
        times_transpose(_bottom(dgbuf, goff, cols, i - 1, C), _layer(y, offs, rows, cols, i - 1),
                        dGi, tbuf)
        P = pbuf[:C * cols[i]].reshape((C, cols[i]))
        times_transpose(_bottom(gbuf, goff, cols, i - 1, C), _layer(v, offs, rows, cols, i - 1),
                        P, tbuf)
        np.add(dGi, P, dGi)
    for i in range(L):
        dW = _layer(out, offs, rows, cols, i)
        dGi = _bottom(dgbuf, goff, cols, i, C)
        if i == L - 1:
            dW[:, :] = dGi
        else:
            np.dot(_top(dabuf, aoff, rows, i, C), _bottom(gbuf, goff, cols, i, C), dW)
            P = pbuf[:rows[i] * cols[i]].reshape((rows[i], cols[i]))
            np.dot(_top(abuf, aoff, rows, i, C), dGi, P)
            np.add(dW, P, dW)
        if eta_l[i] != 1.0:
            dW *= eta_l[i]


@njit(cache=True, nogil=True)
def rhs(y, out, data):
    """``out = dy/dt`` at ``y`` (n,): :func:`rhs_flat` on ``data = linear.numba_rhs_args``."""
    rhs_flat(y, out, *data)


@njit(cache=True, nogil=True)
def jvp(v, out, y, jdata):
    """``out = J(y) v``: :func:`jvp_flat` with ``jdata`` its trailing arguments."""
    jvp_flat(v, out, y, *jdata)


# --- factored Butcher stages --------------------------------------------------------------
@njit(cache=True)
def _factors(l, k, store):
    """Layer l's first ``k`` factor slots: ``U`` (k C x N_l), ``V`` (k C x N_{l-1}) views."""
    ints, bufs, kc = store[4], store[5], k * store[1].shape[0]
    r, c, u0, v0 = ints[0][l], ints[1][l], ints[4][l], ints[5][l]
    return (bufs[0][u0:u0 + kc * r].reshape((kc, r)), bufs[1][v0:v0 + kc * c].reshape((kc, c)))


@njit(cache=True)
def _apply(l, X, out, k, w, y, right, store):
    """``out = X W_l^st``, or with ``right`` ``X W_l^st^T`` (``linear.FactoredStages``)."""
    C = store[1].shape[0]
    rows, cols, offs, factored = store[4][:4]
    wst, tmp, tbuf = store[5][3], store[5][10], store[5][14]
    r, c = rows[l], cols[l]
    W = (wst if factored[l] == 0 else y)[offs[l]:offs[l + 1]].reshape((r, c))
    if right:
        times_transpose(X, W, out, tbuf)
    else:
        np.dot(X, W, out)
    if factored[l] == 0 or k == 0:
        return
    U, V = _factors(l, k, store)
    M = store[5][9 if right else 8][:C * k * C].reshape((C, k * C))
    np.dot(X, V.T if right else U.T, M)
    for a in range(C):
        for q in range(k * C):
            M[a, q] *= w[q // C]
    width = r if right else c
    T = tmp[:C * width].reshape((C, width))
    np.dot(M, U if right else V, T)
    np.add(out, T, out)


@njit(cache=True)
def _dense_sum(kd, base, size, w, k, m):
    """``sum_{j<k} w_j K_j[m]`` of a dense layer's slots (zero weights skipped)."""
    acc = 0.0
    for j in range(k):
        if w[j] != 0.0:
            acc += w[j] * kd[base + j * size + m]
    return acc


@njit(cache=True)
def stage(y, w, k, slot, store):
    """Store in ``slot`` the factors of ``f(y + sum_{j<k} w_j K_j)`` (``w``: >= k entries)."""
    Sxx, Syx, eta_l, white, ints = store[:5]
    rows, cols, offs, factored, _, _, kdoff, aoff, goff = ints
    kd, wst, abuf, gbuf, wbuf, sw = store[5][2:8]
    L = rows.shape[0]
    C = Syx.shape[0]
    D = Sxx.shape[0]
    for l in range(L):
        if factored[l] == 0:
            size = rows[l] * cols[l]
            for m in range(size):
                wst[offs[l] + m] = y[offs[l] + m] + _dense_sum(kd, kdoff[l], size, w, k, m)
    W = wbuf.reshape((C, D))
    # A_{L-2} = W_{L-1}^st, A_{l-1} = A_l W_l^st, W = A_0 W_0^st
    if L > 1:
        abuf[aoff[L - 2]:aoff[L - 1]] = wst[offs[L - 1]:offs[L]]
        for l in range(L - 2, 0, -1):
            _apply(l, abuf[aoff[l]:aoff[l + 1]].reshape((C, rows[l])),
                   abuf[aoff[l - 1]:aoff[l]].reshape((C, rows[l - 1])), k, w, y, False, store)
        _apply(0, abuf[aoff[0]:aoff[1]].reshape((C, rows[0])), W, k, w, y, False, store)
    else:
        wbuf[:] = wst[offs[0]:offs[1]]
    E = gbuf[goff[0]:goff[1]].reshape((C, D))
    if white:
        np.subtract(Syx, W, E)
    else:
        np.dot(W, Sxx, sw.reshape((C, D)))
        np.subtract(Syx, sw.reshape((C, D)), E)
    for l in range(L):
        r, c = rows[l], cols[l]
        G = gbuf[goff[l]:goff[l + 1]].reshape((C, c))
        if l > 0:
            _apply(l - 1, gbuf[goff[l - 1]:goff[l]].reshape((C, cols[l - 1])), G, k, w, y, True,
                   store)
        eta = eta_l[l]
        if factored[l] != 0:
            U, V = _factors(l, slot + 1, store)
            np.multiply(abuf[aoff[l]:aoff[l + 1]].reshape((C, r)), eta, U[slot * C:])
            V[slot * C:] = G
            continue
        Kd = kd[kdoff[l] + slot * r * c:kdoff[l] + (slot + 1) * r * c].reshape((r, c))
        if l == L - 1:
            np.multiply(G, eta, Kd)
        else:
            np.dot(abuf[aoff[l]:aoff[l + 1]].reshape((C, r)).T, G, Kd)
            if eta != 1.0:
                np.multiply(Kd, eta, Kd)


@njit(cache=True)
def _gather(l, w, k, which, store):
    """Layer l's slots with a nonzero weight into area ``which``: ``(U^T w, V)`` views."""
    C, r, c = store[1].shape[0], store[4][0][l], store[4][1][l]
    usbuf, vgbuf = store[5][11], store[5][12]
    q = C * np.count_nonzero(w[:k])
    ubase = which * (usbuf.shape[0] // 3)
    vbase = which * (vgbuf.shape[0] // 3)
    Ust = usbuf[ubase:ubase + r * q].reshape((r, q))
    Vg = vgbuf[vbase:vbase + q * c].reshape((q, c))
    U, V = _factors(l, k, store)
    q2 = 0
    for row in range(k * C):
        wq = w[row // C]
        if wq != 0.0:
            for i in range(r):
                Ust[i, q2] = U[row, i] * wq
            for i in range(c):
                Vg[q2, i] = V[row, i]
            q2 += 1
    return Ust, Vg


@njit(cache=True)
def _block_product(g, i0, i1, out):
    """``out = (U^T w)[i0:i1] V`` of gathered factors ``g = (U^T w, V)``."""
    if g[1].shape[0] == 0:
        out[:, :] = 0.0
    else:
        np.dot(g[0][i0:i1], g[1], out)


@njit(cache=True)
def combinations(W, k, out, store):
    """``out[i] = sum_{j<k} W[i, j] K_j`` as a dense flat vector for each row i of ``W``."""
    rows, cols, offs, factored, _, _, kdoff = store[4][:7]
    for i in range(W.shape[0]):
        w, o = W[i], out[i]
        for l in range(rows.shape[0]):
            r, c = rows[l], cols[l]
            if factored[l] != 0:
                g = _gather(l, w, k, 0, store)
                _block_product(g, 0, r, o[offs[l]:offs[l + 1]].reshape((r, c)))
            else:
                for m in range(r * c):
                    o[offs[l] + m] = _dense_sum(store[5][2], kdoff[l], r * c, w, k, m)


@njit(cache=True)
def _finish_block(y, y_new, m0, pb, pe, p3, use_e3, c3, rtol, atol):
    """``y_new = y + pb`` on one block from offset ``m0``; its sums of scaled error squares."""
    s5 = 0.0
    s3 = 0.0
    for m in range(pb.shape[0]):
        yv = y[m0 + m]
        yn = yv + pb[m]
        y_new[m0 + m] = yn
        sc = atol + rtol * max(abs(yv), abs(yn))
        q5 = pe[m] / sc
        s5 += q5 * q5
        if use_e3:
            q3 = (p3[m] + c3 * pb[m]) / sc
            s3 += q3 * q3
    return s5, s3


@njit(cache=True)
def step_end(y, y_new, wb, we, we3, use_e3, c3, rtol, atol, store):
    """``y_new = y + wb K`` and the error sums ``(e5, e3)``, ``linear.FactoredStages.step_end``."""
    rows, cols, offs, factored, _, _, kdoff = store[4][:7]
    kd, pbuf, block_entries = store[5][2], store[6], store[7]
    e5 = 0.0
    e3 = 0.0
    nb = pbuf.shape[0] // 3
    for l in range(rows.shape[0]):
        r, c = rows[l], cols[l]
        gb = ge = g3 = _gather(l, wb, 0, 0, store)    # empty: unused on a dense layer
        if factored[l] != 0:
            gb = _gather(l, wb, wb.shape[0], 0, store)
            ge = _gather(l, we, we.shape[0], 1, store)
            g3 = _gather(l, we3, we3.shape[0], 2, store) if use_e3 else gb
        rb = max(1, block_entries // c)
        for i0 in range(0, r, rb):
            i1 = min(r, i0 + rb)
            size = (i1 - i0) * c
            pb, pe, p3 = pbuf[:size], pbuf[nb:nb + size], pbuf[2 * nb:2 * nb + size]
            if factored[l] != 0:
                _block_product(gb, i0, i1, pb.reshape((i1 - i0, c)))
                _block_product(ge, i0, i1, pe.reshape((i1 - i0, c)))
                if use_e3:
                    _block_product(g3, i0, i1, p3.reshape((i1 - i0, c)))
            else:
                for m in range(size):
                    x = i0 * c + m
                    pb[m] = _dense_sum(kd, kdoff[l], r * c, wb, wb.shape[0], x)
                    pe[m] = _dense_sum(kd, kdoff[l], r * c, we, we.shape[0], x)
                    if use_e3:
                        p3[m] = _dense_sum(kd, kdoff[l], r * c, we3, we3.shape[0], x)
            s5, s3 = _finish_block(y, y_new, offs[l] + i0 * c, pb, pe, p3, use_e3, c3, rtol, atol)
            e5 += s5
            e3 += s3
    return e5, e3


@njit(cache=True)
def _gram_pair(X, Y, gram):
    """``(X X^T, Y Y^T)`` into the buffer ``gram``."""
    q = X.shape[0]
    GX = gram[:q * q].reshape((q, q))
    GY = gram[q * q:2 * q * q].reshape((q, q))
    np.dot(X, X.T, GX)
    np.dot(Y, Y.T, GY)
    return GX, GY


@njit(cache=True)
def _gram_form(GU, GV, w, q, C):
    """``sum_pq w_{p // C} w_{q // C} GU_pq GV_pq`` over the leading q x q blocks."""
    acc = 0.0
    for p in range(q):
        for p2 in range(q):
            acc += w[p // C] * w[p2 // C] * GU[p, p2] * GV[p, p2]
    return acc


@njit(cache=True, nogil=True)
def stage_stiffness_sums(s, wd, store):
    """``(num, dd, ref)`` of the accepted step (``linear.FactoredStages.stiffness_sums``)."""
    eps = np.finfo(np.float64).eps
    C, bufs, signs = store[1].shape[0], store[5], np.array((-1.0, 1.0))
    rows, cols, _, factored, _, _, kdoff = store[4][:7]
    kd = bufs[2]
    num = 0.0
    dd = 0.0
    ref = 0.0
    for l in range(rows.shape[0]):
        r, c = rows[l], cols[l]
        if factored[l] != 0:
            U, V = _factors(l, s + 1, store)
            GU, GV = _gram_pair(U[:s * C], V[:s * C], bufs[13])
            ref += _gram_form(GU, GV, signs[1:], C, C)
            sd = 0.0        # the floor of linear._gram_rounding
            for j in range(s):
                b = slice(j * C, (j + 1) * C)
                sd += abs(wd[j]) * np.sqrt(np.trace(GU[b, b]) * np.trace(GV[b, b]))
            dd += max(_gram_form(GU, GV, wd, s * C, C), (r + c + s * C) * eps * (sd * sd))
            GU, GV = _gram_pair(U[(s - 1) * C:], V[(s - 1) * C:], bufs[13])
            num += _gram_form(GU, GV, signs, 2 * C, C)
            continue
        size = r * c
        base = kdoff[l]
        for m in range(size):
            ref += kd[base + m] * kd[base + m]
            dv = kd[base + s * size + m] - kd[base + (s - 1) * size + m]
            num += dv * dv
            v = _dense_sum(kd, base, size, wd, s, m)
            dd += v * v
    return num, dd, ref


@njit(cache=True, nogil=True)
def stage_fsal(s, store):
    """Slot ``s`` (the derivative at the accepted state) becomes slot 0."""
    C, rows, cols, kdoff, kd = store[1].shape[0], store[4][0], store[4][1], store[4][6], store[5][2]
    for l in range(rows.shape[0]):
        if store[4][3][l] != 0:
            U, V = _factors(l, s + 1, store)
            U[:C] = U[s * C:]
            V[:C] = V[s * C:]
        else:
            size = rows[l] * cols[l]
            kd[kdoff[l]:kdoff[l] + size] = kd[kdoff[l] + s * size:kdoff[l] + (s + 1) * size]


@njit(cache=True, nogil=True)
def _store_attempt(y, y_new, h_try, A, b, e, e3, use_e3, rtol, atol, store):
    """One step of ``h_try`` on factored stages: ``y_new`` and its error norm."""
    wtmp = store[8]
    s = b.shape[0]
    for i in range(1, s + 1):
        for j in range(i):
            wtmp[j] = h_try * (b[j] if i == s else A[i, j])
        stage(y, wtmp, i, i, store)
    for j in range(s):
        wtmp[j] = h_try * b[j]
    e5, e3n = step_end(y, y_new, wtmp[:s], e, e3, use_e3, 1.0 / h_try, rtol, atol, store)
    return error_norm(e5, e3n, use_e3, h_try, y.shape[0])


# --- SSPRK104 in low-storage form on factored slots ---------------------------------------
@njit(cache=True)
def gemm_acc(Q, w, At, G, blas):
    """``Q += w At G`` in place, as ``linear.gemm_acc`` (``blas = (DGEMM, ibuf, dbuf)``)."""
    dgemm, ibuf, dbuf = blas
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
def add_stage(q, c, k, store):
    """``q += c eta_i A_i^T G_i`` of slot ``k``, layer by layer (``linear.FactoredSlots.add``)."""
    at, g, blas, eta_l = store[2][k], store[3][k], store[11], store[14][2]
    rows, cols, offs, aoff, goff = store[15]
    L = rows.shape[0]
    C = (goff[1] - goff[0]) // cols[0]
    for i in range(L):
        w = c * eta_l[i]
        if i == L - 1:
            for m in range(rows[i] * cols[i]):
                q[offs[i] + m] += w * g[goff[i] + m]
        else:
            gemm_acc(_layer(q, offs, rows, cols, i), w, _top(at, aoff, rows, i, C),
                     _bottom(g, goff, cols, i, C), blas)


@njit(cache=True)
def hermite_states(thetas, h, y, y_new, out, store):
    """``out[i]``: the cubic Hermite state at ``t + thetas[i] h`` (slots 0 and 10)."""
    for i in range(thetas.shape[0]):
        theta = thetas[i]
        u = 1.0 - theta  # the weights of tableaux.cubic_hermite, in its order
        o = out[i]
        for m in range(y.shape[0]):
            o[m] = (y_new[m] - y[m]) * (theta * theta * (3.0 - 2.0 * theta)) + y[m]
        add_stage(o, h * (theta * u * u), 0, store)
        add_stage(o, h * (-theta * theta * u), 10, store)


@njit(cache=True)
def _block_sums(y, y_new, q1, m0, P, cnt, h, rtol, atol, e5, dd):
    """Add one block's scaled error squares and ``(y_new - q1)^2`` to ``e5``, ``dd``."""
    a = np.zeros(4)
    d = np.zeros(4)
    for m in range(cnt):
        x = m0 + m
        sc = atol + rtol * max(abs(y[x]), abs(y_new[x]))
        e = ((y_new[x] - y[x]) - h * P[m]) / sc
        v = y_new[x] - q1[x]
        a[m % 4] += e * e
        d[m % 4] += v * v
    return e5 + ((a[0] + a[1]) + (a[2] + a[3])), dd + ((d[0] + d[1]) + (d[2] + d[3]))


@njit(cache=True)
def error_sums(y, y_new, q1, h, rtol, atol, store):
    """``(e5, dd)`` of ``linear.FactoredSlots.error_sums``."""
    at, g, eslots, ew, pbuf, ubuf, vbuf = store[2:9]
    block_entries, eta_l = store[12], store[14][2]
    rows, cols, offs, aoff, goff = store[15]
    L = rows.shape[0]
    C = (goff[1] - goff[0]) // cols[0]
    q = eslots.shape[0]
    e5 = 0.0
    dd = 0.0
    for i in range(L):
        r, cl = rows[i], cols[i]
        if i == L - 1:
            pbuf[:r * cl] = 0.0
            for j in range(q):
                w = ew[j] * eta_l[i]
                gj = g[eslots[j]]
                for m in range(r * cl):
                    pbuf[m] += w * gj[goff[i] + m]
            e5, dd = _block_sums(y, y_new, q1, offs[i], pbuf, r * cl, h, rtol, atol, e5, dd)
            continue
        U = ubuf[:r * q * C].reshape((r, q * C))
        V = vbuf[:q * C * cl].reshape((q * C, cl))
        for j in range(q):
            w = ew[j] * eta_l[i]
            np.multiply(_top(at[eslots[j]], aoff, rows, i, C), w, U[:, j * C:(j + 1) * C])
            V[j * C:(j + 1) * C, :] = _bottom(g[eslots[j]], goff, cols, i, C)
        rb = max(1, block_entries // cl)
        for i0 in range(0, r, rb):
            i1 = min(r, i0 + rb)
            cnt = (i1 - i0) * cl
            np.dot(U[i0:i1], V, pbuf[:cnt].reshape((i1 - i0, cl)))
            e5, dd = _block_sums(y, y_new, q1, offs[i] + i0 * cl, pbuf, cnt, h, rtol, atol, e5,
                                 dd)
    return e5, dd


@njit(cache=True)
def _diff_lanes(x1, x2, cnt, eta, num, ref):
    """Add ``sum (eta x1 - eta x2)^2``, ``sum (eta x1)^2`` (``cnt`` entries) to num, ref."""
    n = np.zeros(4)
    r = np.zeros(4)
    for m in range(cnt):
        k = eta * x1[m]
        d = k - eta * x2[m]
        n[m % 4] += d * d
        r[m % 4] += k * k
    return num + ((n[0] + n[1]) + (n[2] + n[3])), ref + ((r[0] + r[1]) + (r[2] + r[3]))


@njit(cache=True)
def _inner(Ap, Aq, Gp, Gq, gram):
    """``<Ap^T Gp, Aq^T Gq>_F = sum_ab (Ap^T Aq)_ab (Gp Gq^T)_ab`` (C x C products)."""
    C = Ap.shape[1]
    M1 = gram[:C * C].reshape((C, C))
    M2 = gram[C * C:2 * C * C].reshape((C, C))
    np.dot(Ap.T, Aq, M1)
    np.dot(Gp, Gq.T, M2)
    return np.sum(M1 * M2)


@njit(cache=True)
def slot_stiffness_sums(last, prev, store):
    """``(num, ref) = (|K_last - K_prev|^2, |K_last|^2)`` (``linear.FactoredSlots``)."""
    at, g, pbuf, gram, min_rel = store[2], store[3], store[6], store[9], store[10]
    block_entries, eta_l = store[12], store[14][2]
    rows, cols, _, aoff, goff = store[15]
    L = rows.shape[0]
    C = (goff[1] - goff[0]) // cols[0]
    num = 0.0
    ref = 0.0
    for i in range(L):
        r, cl, eta = rows[i], cols[i], eta_l[i]
        if i == L - 1:
            num, ref = _diff_lanes(g[last][goff[i]:goff[i + 1]], g[prev][goff[i]:goff[i + 1]],
                                   C * cl, eta, num, ref)
            continue
        A1, G1 = _top(at[last], aoff, rows, i, C), _bottom(g[last], goff, cols, i, C)
        A2, G2 = _top(at[prev], aoff, rows, i, C), _bottom(g[prev], goff, cols, i, C)
        nA1, nG1, nA2, nG2 = sumsq(A1), sumsq(G1), sumsq(A2), sumsq(G2)
        e2 = eta * eta
        k11 = _inner(A1, A1, G1, G1, gram)
        g_ref = e2 * k11
        g_num = e2 * (k11 - 2.0 * _inner(A1, A2, G1, G2, gram) + _inner(A2, A2, G2, G2, gram))
        scale = e2 * (np.sqrt(nA1 * nG1) + np.sqrt(nA2 * nG2)) ** 2
        if g_num >= min_rel * scale and g_ref >= min_rel * e2 * (nA1 * nG1):
            num += g_num
            ref += g_ref
            continue
        rb = max(1, block_entries // cl)
        half = pbuf.shape[0] // 2
        for i0 in range(0, r, rb):
            i1 = min(r, i0 + rb)
            cnt = (i1 - i0) * cl
            np.dot(A1[i0:i1], G1, pbuf[:cnt].reshape((i1 - i0, cl)))
            np.dot(A2[i0:i1], G2, pbuf[half:half + cnt].reshape((i1 - i0, cl)))
            num, ref = _diff_lanes(pbuf[:cnt], pbuf[half:half + cnt], cnt, eta, num, ref)
    return num, ref


@njit(cache=True, nogil=True)
def _ssp_attempt(y, y_new, h_try, A, b, e, e3, use_e3, rtol, atol, store):
    """One SSPRK(10,4) step of ``h_try`` in low-storage form: ``y_new`` and its error norm."""
    q1, q2, at, g, sums = store[0], store[1], store[2], store[3], store[13]
    Sxx, Syx, _, rows, cols, offs, _, aoff, _, goff, WT, SW, tbuf = store[14]
    n = y.shape[0]
    c6 = h_try / 6.0
    q1[:] = y
    for k in range(10):
        if k == 5:
            for m in range(n):
                q2[m] = y[m] * 0.04 + q1[m] * 0.36
                q1[m] = q2[m] * 15.0 - q1[m] * 5.0
        if k > 0:
            chains(q1, Sxx, Syx, rows, cols, offs, at[k], aoff, g[k], goff, WT, SW, tbuf)
        if k < 9:
            add_stage(q1, c6, k, store)
    for m in range(n):
        y_new[m] = q2[m] + q1[m] * 0.6
    add_stage(y_new, h_try / 10.0, 9, store)
    chains(y_new, Sxx, Syx, rows, cols, offs, at[10], aoff, g[10], goff, WT, SW, tbuf)
    e5, dd = error_sums(y, y_new, q1, h_try, rtol, atol, store)
    sums[0] = dd / h_try / h_try
    return np.sqrt(e5 / n)


@njit(cache=True, nogil=True)
def _ssp_stiffness(s, wd, store):
    """``(num, dd, ref)`` of the accepted step: ``|K_10 - K_9|^2``, ``|y_new - q1|^2 / h^2``."""
    sums = store[13]
    num, ref_new = slot_stiffness_sums(10, 9, store)
    ref = sums[1]
    sums[1] = ref_new
    return num, sums[0], ref


@njit(cache=True, nogil=True)
def _ssp_fsal(s, store):
    store[2][0] = store[2][10]
    store[3][0] = store[3][10]


# --- observations --------------------------------------------------------------------------
@njit(cache=True)
def end_to_end(Ys, rows, cols, offs, out):
    """``out[k] = W_L ... W_1`` (C x D) of each row of ``Ys``, as ``linear.end_to_end_flat``."""
    L = rows.shape[0]
    C = rows[L - 1]
    half = C * cols.max()
    buf = np.empty(2 * half)
    for k in range(Ys.shape[0]):
        if L == 1:
            out[k] = _layer(Ys[k], offs, rows, cols, 0)
            continue
        cur = _layer(Ys[k], offs, rows, cols, L - 1)
        slot = 0
        for i in range(L - 2, 0, -1):
            nxt = buf[slot * half:slot * half + C * cols[i]].reshape((C, cols[i]))
            np.dot(cur, _layer(Ys[k], offs, rows, cols, i), nxt)
            cur = nxt
            slot = 1 - slot
        np.dot(cur, _layer(Ys[k], offs, rows, cols, 0), out[k])


@njit(cache=True)
def balance_drift(y, rows, cols, offs, gram, gram0, goffs, first, tmp):
    """``max_i |G_i - G_i(t_0)|_F`` of ``G_i = W_{i+1}^T W_{i+1} - W_i W_i^T`` (``first``:
    stored in ``gram0``, 0 returned)."""
    drift = 0.0
    for i in range(rows.shape[0] - 1):
        N = rows[i]
        Wi = _layer(y, offs, rows, cols, i)
        Wn = _layer(y, offs, rows, cols, i + 1)
        np.dot(Wn.T, Wn, gram[goffs[i]:goffs[i + 1]].reshape((N, N)))
        np.dot(Wi, Wi.T, tmp[:N * N].reshape((N, N)))
        acc = 0.0
        for m in range(goffs[i], goffs[i + 1]):
            gm = gram[m] - tmp[m - goffs[i]]
            gram[m] = gm
            if first:
                gram0[m] = gm
            else:
                acc += (gm - gram0[m]) ** 2
        drift = max(drift, np.sqrt(acc))
    return drift


@njit(cache=True)
def probe_ntk(y, rows, cols, offs, Xp, out):
    """``out`` (Q, Q, C, C) = ``sum_l (H_l H_l^T) (x) (A_l A_l^T)``, the empirical NTK of ``y``
    on the probe inputs ``Xp`` (Q, D), as ``linear.linear_ntk``."""
    L = rows.shape[0]
    C = rows[L - 1]
    Q = Xp.shape[0]
    abuf, hbuf = np.empty(2 * C * cols.max()), np.empty(2 * Q * cols.max())
    tt, hh = np.empty((L, C, C)), np.empty((Q, Q))
    tt[L - 1] = np.eye(C)
    if L > 1:
        half = abuf.shape[0] // 2
        A = _layer(y, offs, rows, cols, L - 1)
        slot = 0
        for i in range(L - 2, -1, -1):
            np.dot(A, A.T, tt[i])
            if i > 0:
                nxt = abuf[slot * half:slot * half + C * cols[i]].reshape((C, cols[i]))
                np.dot(A, _layer(y, offs, rows, cols, i), nxt)
                A = nxt
                slot = 1 - slot
    out[...] = 0.0
    half = hbuf.shape[0] // 2
    H = Xp
    slot = 0
    for i in range(L):
        if i > 0:
            nxt = hbuf[slot * half:slot * half + Q * cols[i]].reshape((Q, cols[i]))
            np.dot(H, _layer(y, offs, rows, cols, i - 1).T, nxt)
            H = nxt
            slot = 1 - slot
        np.dot(H, H.T, hh)
        for p in range(Q):
            for q in range(Q):
                for a in range(C):
                    for b in range(C):
                        out[p, q, a, b] += hh[p, q] * tt[i, a, b]


# --- the cached entry points into the loops of methods/ ------------------------------------
_erk_loop = make_erk_advance(rhs)
_factored_loop = make_erk_advance(rhs, store=(_store_attempt, stage_stiffness_sums, stage_fsal))
_ssp_loop = make_erk_advance(rhs, store=(_ssp_attempt, _ssp_stiffness, _ssp_fsal))
_rosw_loop, _ = make_rosw_advance(rhs, jvp)


@njit(cache=True, nogil=True)
def erk_advance(y, K, y_new, th, t_target, t_out, stats, max_steps, tab, low, ctl, wd, stiff,
                pat, ybuf, data):
    """The embedded Runge-Kutta loop on dense stages (``_erk_kernels.make_erk_advance``
    documents the arguments and return codes; ``data`` as for :func:`rhs`)."""
    return _erk_loop(y, K, y_new, th, t_target, t_out, stats, max_steps, tab, low, ctl, wd,
                     stiff, pat, ybuf, data)


@njit(cache=True, nogil=True)
def factored_advance(y, K, y_new, th, t_target, t_out, stats, max_steps, tab, low, ctl, wd, stiff,
                     pat, ybuf, data):
    """The same loop on rank-C factored stages (``data``: their store, ``K`` unused)."""
    return _factored_loop(y, K, y_new, th, t_target, t_out, stats, max_steps, tab, low, ctl, wd,
                          stiff, pat, ybuf, data)


@njit(cache=True, nogil=True)
def ssp_advance(y, K, y_new, th, t_target, t_out, stats, max_steps, tab, low, ctl, wd, stiff, pat,
                ybuf, data):
    """The same loop on SSPRK104's factored slots (``data``: their store, ``K`` unused)."""
    return _ssp_loop(y, K, y_new, th, t_target, t_out, stats, max_steps, tab, low, ctl, wd,
                     stiff, pat, ybuf, data)


@njit(cache=True, nogil=True)
def rosw_advance(y, f0, U, work, th, stats, t_target, max_steps, a, c, mw, ew, gamma, ctl, base,
                 scratch, jv):
    """The Rosenbrock-W loop on the linear network (``_rosw_kernels.make_rosw_advance``)."""
    return _rosw_loop(y, f0, U, work, th, stats, t_target, max_steps, a, c, mw, ew, gamma, ctl,
                      base, scratch, jv)
