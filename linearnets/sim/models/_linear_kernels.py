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
from ..methods._descent_kernels import make_gd_advance
from ..methods._erk_kernels import error_norm, make_erk_advance, sumsq
from ..methods._rosw_kernels import make_rosw_advance
from ..methods.tableaux import SSPRK104_LOW_STORAGE as _LS

__all__ = ["TRANSPOSED_PRODUCT_MAX_BYTES", "SMALL_PRODUCT_MAX", "SMALL_DOT_MAX",
           "SMALL_TRANSPOSED_PRODUCT_MAX", "DGEMM", "small_product", "row_times", "row_dots",
           "mul", "mul_t", "times_transpose", "chains", "rhs_flat",
           "jvp_flat", "rhs", "jvp", "stage", "combination", "combinations", "step_end",
           "stage_stiffness_sums", "stage_fsal", "gemm_acc", "add_stage", "hermite_states",
           "error_sums", "slot_stiffness_sums", "ssp_advance", "end_to_end",
           "balance_drift", "probe_ntk", "erk_advance", "factored_advance", "rosw_advance",
           "gd_advance"]

#: Largest layer (bytes) whose ``G W^T`` is formed as ``(W G^T)^T`` (docs/simulator.md).
TRANSPOSED_PRODUCT_MAX_BYTES = 1 << 21

#: Largest one-row products (multiply-adds) that :func:`mul` (``x B``) and :func:`mul_t`
#: (``x B^T``, dot products) form in their own loops rather than through BLAS: the measured
#: crossovers (docs/simulator.md, "The linear network").
SMALL_PRODUCT_MAX = 1024
SMALL_DOT_MAX = 256
#: Largest ``G W^T`` (multiply-adds) formed by ``np.dot`` on the transposed view of ``W``,
#: not through :func:`times_transpose`'s copies.
SMALL_TRANSPOSED_PRODUCT_MAX = 4096

#: scipy's Fortran ``dgemm`` for ``C += alpha A B``, passed as an argument (docs/simulator.md).
DGEMM = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * 13))(
    get_cython_function_address("scipy.linalg.cython_blas", "dgemm"))

#: SSPRK104 in two-register form, from its tableau: the stages (slot ``SSP_STAGES`` holds
#: ``f(y_new)``), the stage that mixes the registers, a stage's factor on ``h``, the mix and
#: the last stage's weights (``tableaux.LowStorage``).
SSP_STAGES, SSP_FIRST = _LS.stages, _LS.first
SSP_MIX0, SSP_MIX1, SSP_MIX2, SSP_MIX3 = _LS.mix
#: ``h sub`` and ``h last[1]`` formed as divisions ``h / 6``, ``h / 10`` (``1 / (1/6)`` is 6.0
#: exactly), the rounding of the loop's steps before it read the tableau.
SSP_SUB_DIV, SSP_LAST0, SSP_LAST1_DIV = 1.0 / _LS.sub, _LS.last[0], 1.0 / _LS.last[1]
#: The slots of the slot store's ``sums``: the accepted step's ``|y_new - q1|^2 / h^2`` and
#: ``|K_0|^2``.
DD, REF = 0, 1


@njit(cache=True, inline="always")
def _lane_sum(v):
    """``(v_0 + v_1) + (v_2 + v_3)``: four accumulation lanes summed in a fixed order."""
    return (v[0] + v[1]) + (v[2] + v[3])


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


@njit(cache=True, inline="always")
def small_product(m, k, n, dot=False):
    """Whether :func:`mul` (``dot``: :func:`mul_t`) forms an (m x k) by (k x n) product in its
    own loops."""
    return m == 1 and 0 < k and k * n <= (SMALL_DOT_MAX if dot else SMALL_PRODUCT_MAX)


@njit(cache=True, inline="always")
def row_times(x, b, bo, k, n, out, oo):
    """``out[oo:oo + n] = x[:k] B`` for ``B`` (k x n) at ``b[bo:]``: blocks of eight columns,
    each summed over ``p`` in eight scalars that stay in registers (no stores in the sum)."""
    main = n - n % 8
    for q0 in range(0, main, 8):
        s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = 0.0
        for p in range(k):
            xp = x[p]
            r = b[bo + p * n + q0:bo + p * n + q0 + 8]
            s0 += xp * r[0]
            s1 += xp * r[1]
            s2 += xp * r[2]
            s3 += xp * r[3]
            s4 += xp * r[4]
            s5 += xp * r[5]
            s6 += xp * r[6]
            s7 += xp * r[7]
        o = out[oo + q0:oo + q0 + 8]
        o[0], o[1], o[2], o[3] = s0, s1, s2, s3
        o[4], o[5], o[6], o[7] = s4, s5, s6, s7
    for q in range(main, n):
        acc = 0.0
        for p in range(k):
            acc += x[p] * b[bo + p * n + q]
        out[oo + q] = acc


@njit(cache=True, inline="always")
def row_dots(x, b, bo, k, n, out, oo):
    """``out[oo:oo + n] = x[:k] B^T`` for ``B`` (n x k) at ``b[bo:]``: dot products of
    contiguous rows in four partial sums."""
    main = k - k % 4
    for i in range(n):
        row = b[bo + i * k:bo + (i + 1) * k]
        s0 = s1 = s2 = s3 = 0.0
        for p in range(0, main, 4):
            s0 += x[p] * row[p]
            s1 += x[p + 1] * row[p + 1]
            s2 += x[p + 2] * row[p + 2]
            s3 += x[p + 3] * row[p + 3]
        for p in range(main, k):
            s0 += x[p] * row[p]
        out[oo + i] = (s0 + s1) + (s2 + s3)


@njit(cache=True)
def mul(a, ao, b, bo, m, k, n, out, oo):
    """``out = A B`` on flat C-ordered buffers: ``A`` (m x k) at ``a[ao:]``, ``B`` (k x n) at
    ``b[bo:]``, ``out`` (m x n) at ``out[oo:]``, by :func:`row_times` where
    :func:`small_product`, else ``np.dot`` on views.  Returns whether the loops formed it."""
    if not small_product(m, k, n):
        np.dot(a[ao:ao + m * k].reshape((m, k)), b[bo:bo + k * n].reshape((k, n)),
               out[oo:oo + m * n].reshape((m, n)))
        return False
    row_times(a[ao:ao + k], b, bo, k, n, out, oo)
    return True


@njit(cache=True)
def mul_t(a, ao, b, bo, m, k, n, out, oo):
    """``out = A B^T`` as :func:`mul` (``B``: n x k), by :func:`row_dots` or ``np.dot`` on the
    transposed view."""
    if not small_product(m, k, n, True):
        np.dot(a[ao:ao + m * k].reshape((m, k)), b[bo:bo + n * k].reshape((n, k)).T,
               out[oo:oo + m * n].reshape((m, n)))
        return False
    row_dots(a[ao:ao + k], b, bo, k, n, out, oo)
    return True


@njit(cache=True)
def times_transpose(G, W, out, tbuf):
    """``out = G W^T`` (C x r) for ``G`` (C x c), ``W`` (r x c), as ``linear.times_transpose``."""
    C, c = G.shape
    r = W.shape[0]
    if C * c * r > SMALL_TRANSPOSED_PRODUCT_MAX and 8 * r * c <= TRANSPOSED_PRODUCT_MAX_BYTES:
        GT = tbuf[:c * C].reshape((c, C))
        GT[:, :] = G.T
        OT = tbuf[c * C:(c + r) * C].reshape((r, C))
        np.dot(W, GT, OT)
        out[:, :] = OT.T
    else:
        np.dot(G, W.T, out)


@njit(cache=True)
def chains(y, Sxx, Syx, lay, abuf, gbuf, scratch):
    """The partial products at ``y`` (``linear.chain_products``) on the layout ``lay = (rows,
    cols, offs, aoff, goff)`` (``linear.chain_layout``): ``A_i^T`` (rows[i] x C) into ``abuf``
    at ``aoff``, ``G_i`` (C x cols[i]) into ``gbuf`` at ``goff``; ``scratch = (WT, SW,
    tbuf)``."""
    rows, cols, offs, aoff, goff = lay
    WT, SW, tbuf = scratch
    L = rows.shape[0]
    C = Syx.shape[0]
    for i in range(L - 1, -1, -1):      # A_{i-1}^T = W_i^T A_i^T, down to W^T
        dst = _top(abuf, aoff, rows, i - 1, C) if i > 0 else WT
        if i == L - 1:
            dst[:, :] = _layer(y, offs, rows, cols, i).T
        else:
            np.dot(_layer(y, offs, rows, cols, i).T, _top(abuf, aoff, rows, i, C), dst)
    np.dot(Sxx, WT, SW)
    np.subtract(Syx, SW.T, _bottom(gbuf, goff, cols, 0, C))
    for i in range(1, L):
        times_transpose(_bottom(gbuf, goff, cols, i - 1, C), _layer(y, offs, rows, cols, i - 1),
                        _bottom(gbuf, goff, cols, i, C), tbuf)


@njit(cache=True)
def rhs_flat(y, out, Sxx, Syx, eta_l, lay, abuf, gbuf, scratch):
    """``out = dy/dt`` at ``y`` (n,): :func:`chains`, then ``dW_i = eta_i A_i^T G_i``."""
    rows, cols, offs, aoff, goff = lay
    L = rows.shape[0]
    C = Syx.shape[0]
    chains(y, Sxx, Syx, lay, abuf, gbuf, scratch)
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
def jvp_flat(v, out, y, Sxx, eta_l, lay, abuf, gbuf, tangent):
    """``out = J(y) v`` from the products of ``y`` in ``abuf``, ``gbuf`` (``linearize``;
    ``lay`` as for :func:`chains`); ``tangent = (dabuf, dgbuf, dWT, dSW, tbuf, pbuf)`` the
    buffers of the products' derivatives (``dWT``, ``dSW``: D x C) and scratch."""
    rows, cols, offs, aoff, goff = lay
    dabuf, dgbuf, dWT, dSW, tbuf, pbuf = tangent
    L = rows.shape[0]
    C = dWT.shape[1]
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
@njit(cache=True, inline="always")
def _apply(l, src, so, dst, do, right, k, w, C, ints, bufs, y):
    """``dst[do:] = X W_l^st`` (``right``: ``X W_l^st^T``), ``X`` at ``src[so:]`` (one kernel for
    both sides: measured 25 % slower on the small bench problem than two products' loops)."""
    rows, cols, offs, factored, utoff, vsoff, kdoff, aoff, goff = ints
    ut, vs, kd, wst, abuf, gbuf, wbuf, sw, mbuf, tmp, usbuf, vgbuf, gram, tbuf = bufs
    r, c = rows[l], cols[l]
    src_w = wst if factored[l] == 0 else y
    if right:
        ni, no = c, r
        if C * c * r <= SMALL_TRANSPOSED_PRODUCT_MAX:
            mul_t(src, so, src_w, offs[l], C, c, r, dst, do)
        else:
            times_transpose(src[so:so + C * c].reshape((C, c)),
                            src_w[offs[l]:offs[l + 1]].reshape((r, c)),
                            dst[do:do + C * r].reshape((C, r)), tbuf)
    else:
        ni, no = r, c
        mul(src, so, src_w, offs[l], C, r, c, dst, do)
    if factored[l] == 0 or k == 0:
        return
    # M = X F_in^T (C x kC), scaled by the slots' weights; dst += M F_out
    fin, fio, fout, foo = (vs, vsoff[l], ut, utoff[l]) if right else (ut, utoff[l], vs, vsoff[l])
    q = k * C
    mul_t(src, so, fin, fio, C, ni, q, mbuf, 0)
    for a in range(C):
        for j in range(q):
            mbuf[a * q + j] *= w[j // C]
    mul(mbuf, 0, fout, foo, C, q, no, tmp, 0)
    for m in range(C * no):
        dst[do + m] += tmp[m]


@njit(cache=True, inline="always")
def _dense_sum(kd, base, size, w, k, m):
    """``sum_{j<k} w_j K_j[m]`` of a dense layer's slots (zero weights skipped)."""
    acc = 0.0
    for j in range(k):
        if w[j] != 0.0:
            acc += w[j] * kd[base + j * size + m]
    return acc


@njit(cache=True)
def stage(y, w, k, slot, Sxx, Syx, eta_l, white, ints, bufs):
    """Store in ``slot`` the factors of ``f(y + sum_{j<k} w_j K_j)`` (``w``: >= k entries)."""
    rows, cols, offs, factored, utoff, vsoff, kdoff, aoff, goff = ints
    ut, vs, kd, wst, abuf, gbuf, wbuf, sw, mbuf, tmp, usbuf, vgbuf, gram, tbuf = bufs
    L = rows.shape[0]
    C = Syx.shape[0]
    D = Sxx.shape[0]
    for l in range(L):
        if factored[l] == 0:
            size = rows[l] * cols[l]
            for m in range(size):
                wst[offs[l] + m] = y[offs[l] + m] + _dense_sum(kd, kdoff[l], size, w, k, m)
    # A_{L-2} = W_{L-1}^st, A_{l-1} = A_l W_l^st, W = A_0 W_0^st (L = 1: W = W_0^st)
    for l in range(L - 1, -1, -1):
        dst, do = (abuf, aoff[l - 1]) if l > 0 else (wbuf, 0)
        if l == L - 1:
            for m in range(C * cols[l]):
                dst[do + m] = wst[offs[l] + m]
        else:
            _apply(l, abuf, aoff[l], dst, do, False, k, w, C, ints, bufs, y)
    e0 = goff[0]
    if not white:
        mul(wbuf, 0, Sxx.ravel(), 0, C, D, D, sw, 0)
    src = wbuf if white else sw
    for a in range(C):
        for d in range(D):
            gbuf[e0 + a * D + d] = Syx[a, d] - src[a * D + d]
    for l in range(L):
        r, c = rows[l], cols[l]
        if l > 0:
            _apply(l - 1, gbuf, goff[l - 1], gbuf, goff[l], True, k, w, C, ints, bufs, y)
        eta = eta_l[l]
        if factored[l] != 0:
            for m in range(C * r):
                ut[utoff[l] + slot * C * r + m] = abuf[aoff[l] + m] * eta
            for m in range(C * c):
                vs[vsoff[l] + slot * C * c + m] = gbuf[goff[l] + m]
            continue
        kb = kdoff[l] + slot * r * c
        if l == L - 1:
            for m in range(r * c):
                kd[kb + m] = gbuf[goff[l] + m] * eta
        else:
            Kd = kd[kb:kb + r * c].reshape((r, c))
            np.dot(abuf[aoff[l]:aoff[l + 1]].reshape((C, r)).T,
                   gbuf[goff[l]:goff[l + 1]].reshape((C, c)), Kd)
            if eta != 1.0:
                for m in range(r * c):
                    kd[kb + m] = kd[kb + m] * eta


@njit(cache=True)
def _gather(l, w, k, which, C, ints, bufs):
    """Layer l's slots with a nonzero weight, ``U^T w`` and ``V``, into area ``which``; q."""
    rows, cols, offs, factored, utoff, vsoff, kdoff, aoff, goff = ints
    ut, vs, kd, wst, abuf, gbuf, wbuf, sw, mbuf, tmp, usbuf, vgbuf, gram, tbuf = bufs
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
    rows, cols, offs, factored, utoff, vsoff, kdoff, aoff, goff = ints
    ut, vs, kd, wst, abuf, gbuf, wbuf, sw, mbuf, tmp, usbuf, vgbuf, gram, tbuf = bufs
    c = cols[l]
    if q == 0:
        out[:, :] = 0.0
        return
    ubase = which * (usbuf.shape[0] // 3)
    vbase = which * (vgbuf.shape[0] // 3)
    np.dot(usbuf[ubase + i0 * q:ubase + i1 * q].reshape((i1 - i0, q)),
           vgbuf[vbase:vbase + q * c].reshape((q, c)), out)


@njit(cache=True)
def combination(w, k, out, C, ints, bufs):
    """``out = sum_{j<k} w_j K_j`` as a dense flat vector (n,)."""
    rows, cols, offs, factored, utoff, vsoff, kdoff, aoff, goff = ints
    ut, vs, kd, wst, abuf, gbuf, wbuf, sw, mbuf, tmp, usbuf, vgbuf, gram, tbuf = bufs
    for l in range(rows.shape[0]):
        r, c = rows[l], cols[l]
        if factored[l] != 0:
            q = _gather(l, w, k, 0, C, ints, bufs)
            _block_product(l, 0, q, 0, r, out[offs[l]:offs[l + 1]].reshape((r, c)), C, ints,
                           bufs)
        else:
            for m in range(r * c):
                out[offs[l] + m] = _dense_sum(kd, kdoff[l], r * c, w, k, m)


@njit(cache=True)
def combinations(W, k, y, out, C, ints, bufs):
    """``out[i] = y + sum_{j<k} W[i, j] K_j`` for each row i of ``W`` (m, >= k)."""
    for i in range(W.shape[0]):
        o = out[i]
        combination(W[i], k, o, C, ints, bufs)
        for m in range(y.shape[0]):
            o[m] = o[m] + y[m]


@njit(cache=True, inline="always")
def _sumsq_lanes(x, n):
    """``sum x[:n]^2`` in eight partial sums, which vectorise (summed in a fixed order)."""
    main = n - n % 8
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = 0.0
    for m in range(0, main, 8):
        s0 += x[m] * x[m]
        s1 += x[m + 1] * x[m + 1]
        s2 += x[m + 2] * x[m + 2]
        s3 += x[m + 3] * x[m + 3]
        s4 += x[m + 4] * x[m + 4]
        s5 += x[m + 5] * x[m + 5]
        s6 += x[m + 6] * x[m + 6]
        s7 += x[m + 7] * x[m + 7]
    for m in range(main, n):
        s0 += x[m] * x[m]
    return ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))


@njit(cache=True, error_model="numpy")     # no zero-division test: the divisions vectorise
def _finish_block(y, y_new, m0, pb, pe, p3, use_e3, c3, rtol, atol):
    """``y_new = y + pb`` from ``m0`` and the sums of scaled error squares (``pe``, ``p3``
    scaled in place by a pass with no sum, which vectorises, then summed in lanes)."""
    n = pb.shape[0]
    yb = y[m0:m0 + n]
    ynb = y_new[m0:m0 + n]
    for m in range(n):
        yv = yb[m]
        yn = yv + pb[m]
        ynb[m] = yn
        pe[m] = pe[m] / (atol + rtol * max(abs(yv), abs(yn)))
    if not use_e3:
        return _sumsq_lanes(pe, n), 0.0
    for m in range(n):
        p3[m] = (p3[m] + c3 * pb[m]) / (atol + rtol * max(abs(yb[m]), abs(ynb[m])))
    return _sumsq_lanes(pe, n), _sumsq_lanes(p3, n)


@njit(cache=True)
def step_end(y, y_new, weights, rtol, atol, block_entries, C, ints, bufs, pbuf):
    """``y_new = y + wb K`` and the error sums ``(e5, e3)``, ``linear.FactoredStages.step_end``
    (``weights = (wb, we, we3, use_e3, c3)``)."""
    wb, we, we3, use_e3, c3 = weights
    rows, cols, offs, factored, utoff, vsoff, kdoff, aoff, goff = ints
    ut, vs, kd, wst, abuf, gbuf, wbuf, sw, mbuf, tmp, usbuf, vgbuf, gram, tbuf = bufs
    e5 = 0.0
    e3 = 0.0
    nb = pbuf.shape[0] // 3
    qb = qe = q3 = 0
    for l in range(rows.shape[0]):
        r, c = rows[l], cols[l]
        fac = factored[l] != 0
        if fac:
            qb = _gather(l, wb, wb.shape[0], 0, C, ints, bufs)
            qe = _gather(l, we, we.shape[0], 1, C, ints, bufs)
            q3 = _gather(l, we3, we3.shape[0], 2, C, ints, bufs) if use_e3 else 0
        rb = max(1, block_entries // c)
        for i0 in range(0, r, rb):
            i1 = min(r, i0 + rb)
            size = (i1 - i0) * c
            pb, pe, p3 = pbuf[:size], pbuf[nb:nb + size], pbuf[2 * nb:2 * nb + size]
            if fac:
                _block_product(l, 0, qb, i0, i1, pb.reshape((i1 - i0, c)), C, ints, bufs)
                _block_product(l, 1, qe, i0, i1, pe.reshape((i1 - i0, c)), C, ints, bufs)
                if use_e3:
                    _block_product(l, 2, q3, i0, i1, p3.reshape((i1 - i0, c)), C, ints, bufs)
            else:
                for m in range(size):
                    x = i0 * c + m
                    pb[m] = _dense_sum(kd, kdoff[l], r * c, wb, wb.shape[0], x)
                    pe[m] = _dense_sum(kd, kdoff[l], r * c, we, we.shape[0], x)
                    if use_e3:
                        p3[m] = _dense_sum(kd, kdoff[l], r * c, we3, we3.shape[0], x)
            s5, s3 = _finish_block(y, y_new, offs[l] + i0 * c, pb, pe, p3, use_e3, c3, rtol,
                                   atol)
            e5 += s5
            e3 += s3
    return e5, e3


@njit(cache=True)
def _gram_pair(X, Y, bufs):
    """``(X X^T, Y Y^T)`` into the ``gram`` buffer, each a product with a copied transpose."""
    ut, vs, kd, wst, abuf, gbuf, wbuf, sw, mbuf, tmp, usbuf, vgbuf, gram, tbuf = bufs
    q, r = X.shape
    c = Y.shape[1]
    GX = gram[:q * q].reshape((q, q))
    GY = gram[q * q:2 * q * q].reshape((q, q))
    Xt = usbuf[:r * q].reshape((r, q))      # element loops: no slice assignment's overlap test
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


#: The block weights of ``|K_0|^2`` and of ``|K_s - K_{s-1}|^2`` in :func:`_gram_form`.
_ONE, _SIGNS = np.ones(1), np.array([-1.0, 1.0])


@njit(cache=True, inline="always")
def _gram_form(GU, GV, w, C, q):
    """``sum_{p,p' < q} w_{p//C} w_{p'//C} GU_pp' GV_pp'``, the squared norm of ``sum_j w_j
    U_j^T V_j`` from the Gram matrices of the factors."""
    acc = 0.0
    for p in range(q):
        wp = w[p // C]
        for p2 in range(q):
            acc += wp * w[p2 // C] * GU[p, p2] * GV[p, p2]
    return acc


@njit(cache=True, nogil=True)
def stage_stiffness_sums(s, wd, store):
    """``(num, dd, ref)`` of the accepted step (``linear.FactoredStages.stiffness_sums``;
    ``store`` as for :func:`_store_attempt`)."""
    eps = np.finfo(np.float64).eps
    Sxx, Syx, eta_l, white, ints, bufs, pbuf, block, wtmp = store
    C = Syx.shape[0]
    rows, cols, offs, factored, utoff, vsoff, kdoff, aoff, goff = ints
    ut, vs, kd, wst, abuf, gbuf, wbuf, sw, mbuf, tmp, usbuf, vgbuf, gram, tbuf = bufs
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
            ref += _gram_form(GU, GV, _ONE, C, C)
            acc = _gram_form(GU, GV, wd, C, q)
            sd = 0.0        # the floor of linear._gram_rounding
            for j in range(s):
                du = 0.0
                dv = 0.0
                for p in range(j * C, (j + 1) * C):
                    du += GU[p, p]
                    dv += GV[p, p]
                sd += abs(wd[j]) * np.sqrt(du * dv)
            dd += max(acc, (r + c + s * C) * eps * (sd * sd))
            GU, GV = _gram_pair(U[(s - 1) * C:(s + 1) * C], V[(s - 1) * C:(s + 1) * C], bufs)
            num += _gram_form(GU, GV, _SIGNS, C, 2 * C)
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
    Sxx, Syx, eta_l, white, ints, bufs, pbuf, block, wtmp = store
    C = Syx.shape[0]
    rows, cols, offs, factored, utoff, vsoff, kdoff, aoff, goff = ints
    ut, vs, kd, wst, abuf, gbuf, wbuf, sw, mbuf, tmp, usbuf, vgbuf, gram, tbuf = bufs
    for l in range(rows.shape[0]):       # element loops, as _gram_pair
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


@njit(cache=True, nogil=True)
def _store_attempt(y, y_new, h_try, pair, atol, store):
    """One attempted step on factored stages: ``y_new``, its error norm (``store``:
    ``linear.FactoredStageOps.data``)."""
    A, b, e, e3, use_e3, _, rtol = pair
    Sxx, Syx, eta_l, white, ints, bufs, pbuf, block, wtmp = store
    s = b.shape[0]
    for i in range(1, s + 1):
        for j in range(i):
            wtmp[j] = h_try * (b[j] if i == s else A[i, j])
        stage(y, wtmp, i, i, Sxx, Syx, eta_l, white, ints, bufs)
    for j in range(s):
        wtmp[j] = h_try * b[j]
    e5, e3n = step_end(y, y_new, (wtmp[:s], e, e3, use_e3, 1.0 / h_try), rtol, atol, block,
                       Syx.shape[0], ints, bufs, pbuf)
    return error_norm(e5, e3n, use_e3, h_try, y.shape[0])


# --- SSPRK104 in low-storage form on factored slots ---------------------------------------
#: The slots of ``gemm_acc``'s Fortran arguments: ``ibuf`` (int32) and ``dbuf`` (float64).
_TRANS, _M, _N, _K, _LDA, _LDB, _LDC = range(7)
_ALPHA, _BETA = range(2)


@njit(cache=True)
def gemm_acc(Q, w, At, G, blas):
    """``Q += w At G`` in place, as ``linear.gemm_acc`` (``blas = (DGEMM, ibuf, dbuf)``)."""
    dgemm, ibuf, dbuf = blas
    r, k = At.shape
    c = G.shape[1]
    ibuf[_TRANS] = 78  # 'N'
    ibuf[_M] = c
    ibuf[_N] = r
    ibuf[_K] = k
    ibuf[_LDA] = c
    ibuf[_LDB] = k
    ibuf[_LDC] = c
    dbuf[_ALPHA] = w
    dbuf[_BETA] = 1.0
    dgemm(ibuf.ctypes, ibuf.ctypes, ibuf[_M:].ctypes, ibuf[_N:].ctypes, ibuf[_K:].ctypes,
          dbuf.ctypes, G.ctypes, ibuf[_LDA:].ctypes, At.ctypes, ibuf[_LDB:].ctypes,
          dbuf[_BETA:].ctypes, Q.ctypes, ibuf[_LDC:].ctypes)


@njit(cache=True, inline="always")
def add_stage(q, c, k, store):
    """``q += c eta_i A_i^T G_i`` of slot ``k``, layer by layer (``linear.FactoredSlots.add``)."""
    q1, q2, at, g, eslots, ew, pbuf, gram, min_rel, blas, block_entries, sums, args = store
    _, Syx, eta_l, (rows, cols, offs, aoff, goff), _, _, _ = args
    at, g = at[k], g[k]
    L = rows.shape[0]
    C = Syx.shape[0]
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
    """``out[i]``: the cubic Hermite state at ``t + thetas[i] h`` (slots 0 and SSP_STAGES)."""
    for i in range(thetas.shape[0]):
        theta = thetas[i]
        u = 1.0 - theta  # the weights of tableaux.cubic_hermite, in its order
        o = out[i]
        for m in range(y.shape[0]):
            o[m] = (y_new[m] - y[m]) * (theta * theta * (3.0 - 2.0 * theta)) + y[m]
        add_stage(o, h * (theta * u * u), 0, store)
        add_stage(o, h * (-theta * theta * u), SSP_STAGES, store)


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
    return e5 + _lane_sum(a), dd + _lane_sum(d)


@njit(cache=True)
def error_sums(y, y_new, q1, h, rtol, atol, store):
    """``(e5, dd)`` of ``linear.FactoredSlots.error_sums``: ``S`` of a block summed slot by
    slot with :func:`gemm_acc` (products of inner size C, which BLAS runs on one thread)."""
    q1, q2, at, g, eslots, ew, pbuf, gram, min_rel, blas, block_entries, sums, args = store
    _, Syx, eta_l, (rows, cols, offs, aoff, goff), _, _, _ = args
    L = rows.shape[0]
    C = Syx.shape[0]
    e5 = 0.0
    dd = 0.0
    for i in range(L):
        r, cl = rows[i], cols[i]
        rb = r if i == L - 1 else max(1, block_entries // cl)
        for i0 in range(0, r, rb):
            i1 = min(r, i0 + rb)
            cnt = (i1 - i0) * cl
            P = pbuf[:cnt]
            P[:] = 0.0
            for j in range(eslots.shape[0]):
                w = ew[j] * eta_l[i]
                gj = g[eslots[j]]
                if i == L - 1:
                    for m in range(cnt):
                        P[m] += w * gj[goff[i] + m]
                else:
                    At = _top(at[eslots[j]], aoff, rows, i, C)
                    gemm_acc(P.reshape((i1 - i0, cl)), w, At[i0:i1], _bottom(gj, goff, cols, i, C),
                             blas)
            e5, dd = _block_sums(y, y_new, q1, offs[i] + i0 * cl, P, cnt, h, rtol, atol, e5, dd)
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
    return num + _lane_sum(n), ref + _lane_sum(r)


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
    q1, q2, at, g, eslots, ew, pbuf, gram, min_rel, blas, block_entries, sums, args = store
    _, Syx, eta_l, (rows, cols, _, aoff, goff), _, _, _ = args
    L = rows.shape[0]
    C = Syx.shape[0]
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
def _ssp_attempt(y, y_new, h_try, pair, atol, store):
    """One SSPRK(10,4) step of ``h_try`` in low-storage form: ``y_new`` and its error norm."""
    q1, q2, at, g, eslots, ew, pbuf, gram, min_rel, blas, block_entries, sums, args = store
    Sxx, Syx, _, lay, _, _, scratch = args
    _, _, _, _, _, _, rtol = pair
    n = y.shape[0]
    c = h_try / SSP_SUB_DIV
    q1[:] = y
    for k in range(SSP_STAGES):
        if k == SSP_FIRST:
            for m in range(n):
                q2[m] = y[m] * SSP_MIX0 + q1[m] * SSP_MIX1
                q1[m] = q2[m] * SSP_MIX2 + q1[m] * SSP_MIX3
        if k > 0:
            chains(q1, Sxx, Syx, lay, at[k], g[k], scratch)
        if k < SSP_STAGES - 1:
            add_stage(q1, c, k, store)
    for m in range(n):
        y_new[m] = q2[m] + q1[m] * SSP_LAST0
    add_stage(y_new, h_try / SSP_LAST1_DIV, SSP_STAGES - 1, store)
    k = SSP_STAGES
    chains(y_new, Sxx, Syx, lay, at[k], g[k], scratch)
    e5, dd = error_sums(y, y_new, q1, h_try, rtol, atol, store)
    sums[DD] = dd / h_try / h_try
    return np.sqrt(e5 / n)


@njit(cache=True, nogil=True)
def _ssp_stiffness(s, wd, store):
    """``(|K_s - K_{s-1}|^2, |y_new - q1|^2 / h^2, |K_0|^2)`` (s = SSP_STAGES)."""
    q1, q2, at, g, eslots, ew, pbuf, gram, min_rel, blas, block_entries, sums, args = store
    num, ref_new = slot_stiffness_sums(SSP_STAGES, SSP_STAGES - 1, store)
    ref = sums[REF]
    sums[REF] = ref_new
    return num, sums[DD], ref


@njit(cache=True, nogil=True)
def _ssp_fsal(s, store):
    q1, q2, at, g, eslots, ew, pbuf, gram, min_rel, blas, block_entries, sums, args = store
    at[0] = at[SSP_STAGES]
    g[0] = g[SSP_STAGES]


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
_rosw_loop = make_rosw_advance(rhs, jvp)
_gd_loop = make_gd_advance(rhs)


@njit(cache=True, nogil=True)
def gd_advance(y, g, n, lr, data):
    """Up to ``n`` steps of gradient descent (``_descent_kernels.make_gd_advance``; ``data``
    as for :func:`rhs`)."""
    return _gd_loop(y, g, n, lr, data)


@njit(cache=True, nogil=True)
def erk_advance(y, K, y_new, th, stats, pairs, control, pat, ybuf, data):
    """The embedded Runge-Kutta loop on dense stages (``_erk_kernels.make_erk_advance``
    documents the arguments and return codes; ``data`` as for :func:`rhs`)."""
    return _erk_loop(y, K, y_new, th, stats, pairs, control, pat, ybuf, data)


@njit(cache=True, nogil=True)
def factored_advance(y, K, y_new, th, stats, pairs, control, pat, ybuf, data):
    """The same loop on rank-C factored stages (``data``: their store, ``K`` unused)."""
    return _factored_loop(y, K, y_new, th, stats, pairs, control, pat, ybuf, data)


@njit(cache=True, nogil=True)
def ssp_advance(y, K, y_new, th, stats, pairs, control, pat, ybuf, data):
    """The same loop on SSPRK104's factored slots (``data``: their store, ``K`` unused)."""
    return _ssp_loop(y, K, y_new, th, stats, pairs, control, pat, ybuf, data)


@njit(cache=True, nogil=True)
def rosw_advance(y, f0, U, work, th, stats, uform, ctl, data):
    """The Rosenbrock-W loop on the linear network (``_rosw_kernels.make_rosw_advance``)."""
    return _rosw_loop(y, f0, U, work, th, stats, uform, ctl, data)
