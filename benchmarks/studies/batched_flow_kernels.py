"""All members of a small ReLU-type MLP ensemble in one compiled loop (numba): the kernels
of ``study_batched_flow.py`` (a one-hidden-layer net, the MSE loss).

Each member keeps its own time, step size, stepper (the primary pair or the low-order pair at
kinks) and accept/reject, exactly as the serial compiled loop (``methods._erk_kernels``
built with switches; ``methods.base.integrate``'s rule at kinks, non-predictive controller,
no stability cap: a kinked model's settings): :func:`batched_flow` is that loop with its
stage evaluations done together.  Every round each live member forms the state of its own
next stage (member-major arrays, the serial arithmetic), the states go side by side into
slots (flat arrays, slot row ``q`` of slot ``a`` at ``q S + a``: the member axis innermost,
``S`` the live members rounded up to 4, the padding zero networks), and :func:`batched_rhs`
evaluates all slots at once: the first layer of all of them is one BLAS product with the
shared inputs, the top layer runs four slots to a SIMD register.  A member that has reached
its last output time leaves its slot to the last live one (the work per round follows the
live members).

Layout of the data tuple ``data = (X, XT, Y, f0, lay, m, scales, a, alpha)``: as
``linearnets/sim/models/_mlp_kernels.py`` (``lay[l] = (offset, rows, cols, bias offset or
-1)``), ``XT`` the inputs transposed (contiguous), ``a`` the activation's slope below zero
(0: ReLU); ``f0`` (P, C, B4) the network at t = 0 per slot (zeros when not centred),
``alpha`` (B4,) per slot, B4 the members rounded up to 4.
"""
from __future__ import annotations

import numpy as np

from numba import njit

from linearnets.sim.methods.base import (CALM_STEPS, CLIP_EPS, KINK_GROWTH, KINK_REJECTIONS,
                                         MAX_FACTOR, MIN_FACTOR, MIN_STEP_ULPS, error_norm,
                                         kink_factor, step_factor)

__all__ = ["batched_rhs", "batched_flow", "slot_rows"]


@njit(nogil=True, error_model="numpy")
def batched_rhs(Ys, out, S, data, Hc, Dv, G1, G0, F, lossv):
    """``out`` = the flow's velocity at ``Ys`` for the slots ``a < S`` of a one-hidden-layer
    net: flat arrays, slot row ``q`` of slot ``a`` at ``q * S + a`` (the member axis
    innermost), the weights transposed (:func:`slot_rows`), so that the first layer of all
    slots is one product with the shared inputs, ``Z = X [W_1^T of every slot]`` (P, N S),
    and its gradient another, ``X^T G_0``; the MSE loss.

    ``Hc``, ``G0`` (P N S) scratch, ``Dv`` (P N S) receives ``phi'`` (the switch pattern
    ``Dv == 1``); ``G1``, ``F`` (P C S) scratch; ``lossv`` (S,) receives each slot's loss."""
    X, XT, Y, f0, lay, m, scales, ap, alpha = data
    P, D = X.shape
    o1, N, bo = lay[0, 0], lay[0, 1], lay[0, 3]
    o2, C = lay[1, 0], lay[1, 1]
    NS = N * S
    m1, m2 = m[0], m[1]
    lossv[:S] = 0.0
    # 2-D and 3-D views made once (a view costs reference counting; indices from a range,
    # the leading ones fixed in the inner loop, need no wraparound check there)
    W1 = Ys[o1 * S:(o1 + D * N) * S].reshape((D, NS))
    W2 = Ys[o2 * S:(o2 + N * C) * S].reshape((N, C, S))
    dW1 = out[o1 * S:(o1 + D * N) * S].reshape((D, NS))
    dW2 = out[o2 * S:(o2 + N * C) * S].reshape((N, C, S))
    b1 = Ys[bo * S:(bo + N) * S] if bo >= 0 else Ys[:NS]
    db1 = out[bo * S:(bo + N) * S] if bo >= 0 else out[:NS]
    H2, G02, D2 = (Hc[:P * NS].reshape((P, NS)), G0[:P * NS].reshape((P, NS)),
                   Dv[:P * NS].reshape((P, NS)))
    H3, G03 = Hc[:P * NS].reshape((P, N, S)), G0[:P * NS].reshape((P, N, S))
    F3, G13 = F[:P * C * S].reshape((P, C, S)), G1[:P * C * S].reshape((P, C, S))
    np.dot(X, W1, H2)
    for p in range(P):
        for t in range(NS):
            v = m1 * H2[p, t] + (b1[t] if bo >= 0 else 0.0)
            pos = v > 0.0
            H2[p, t] = v if pos else ap * v
            D2[p, t] = 1.0 if pos else ap
    # the top, the slots four at a time (S a multiple of 4; each four loaded, then combined,
    # then stored, so that the compiler packs them into one SIMD register):
    # F = m2 W2 h, G = (alpha (F - f0) - y) / (alpha P)
    for p in range(P):
        for ci in range(C):
            for a in range(0, S, 4):
                f0_ = f1_ = f2_ = f3_ = 0.0
                for j in range(N):
                    h0, h1, h2, h3 = (H3[p, j, a], H3[p, j, a + 1], H3[p, j, a + 2],
                                      H3[p, j, a + 3])
                    w0, w1, w2, w3 = (W2[j, ci, a], W2[j, ci, a + 1], W2[j, ci, a + 2],
                                      W2[j, ci, a + 3])
                    f0_ += h0 * w0
                    f1_ += h1 * w1
                    f2_ += h2 * w2
                    f3_ += h3 * w3
                F3[p, ci, a], F3[p, ci, a + 1], F3[p, ci, a + 2], F3[p, ci, a + 3] = (
                    f0_, f1_, f2_, f3_)
            yv = Y[p, ci]
            for a in range(S):
                r_ = alpha[a] * (m2 * F3[p, ci, a] - f0[p, ci, a]) - yv
                lossv[a] += 0.5 * r_ * r_
                G13[p, ci, a] = r_ / (alpha[a] * P)
    # backward: dW2 = sum_p G h^T; G0 = m2 (W2^T G) phi'; db = sum_p G0; dW1 = X^T G0
    for j in range(N):
        for ci in range(C):
            for a in range(S):
                dW2[j, ci, a] = 0.0
    for p in range(P):
        for j in range(N):
            for a in range(S):
                G03[p, j, a] = 0.0
        for ci in range(C):
            for a in range(0, S, 4):
                g0, g1, g2, g3 = (G13[p, ci, a], G13[p, ci, a + 1], G13[p, ci, a + 2],
                                  G13[p, ci, a + 3])
                for j in range(N):
                    h0, h1, h2, h3 = (H3[p, j, a], H3[p, j, a + 1], H3[p, j, a + 2],
                                      H3[p, j, a + 3])
                    w0, w1, w2, w3 = (W2[j, ci, a], W2[j, ci, a + 1], W2[j, ci, a + 2],
                                      W2[j, ci, a + 3])
                    d0, d1, d2, d3 = (dW2[j, ci, a], dW2[j, ci, a + 1], dW2[j, ci, a + 2],
                                      dW2[j, ci, a + 3])
                    e0, e1, e2, e3 = (G03[p, j, a], G03[p, j, a + 1], G03[p, j, a + 2],
                                      G03[p, j, a + 3])
                    dW2[j, ci, a], dW2[j, ci, a + 1], dW2[j, ci, a + 2], dW2[j, ci, a + 3] = (
                        d0 + g0 * h0, d1 + g1 * h1, d2 + g2 * h2, d3 + g3 * h3)
                    G03[p, j, a], G03[p, j, a + 1], G03[p, j, a + 2], G03[p, j, a + 3] = (
                        e0 + g0 * w0, e1 + g1 * w1, e2 + g2 * w2, e3 + g3 * w3)
        for t in range(NS):
            G02[p, t] = m2 * G02[p, t] * D2[p, t]
    if bo >= 0:
        for t in range(NS):
            db1[t] = 0.0
        for p in range(P):
            for t in range(NS):
                db1[t] += G02[p, t]
    np.dot(XT, G02, dW1)
    # the rates: -eta_l m_l on the weights, -eta_1 on the biases
    s1, s2 = scales[0] * m1, scales[1] * m2
    for j in range(D):
        for t in range(NS):
            dW1[j, t] *= s1
    for j in range(N):
        for ci in range(C):
            for a in range(S):
                dW2[j, ci, a] *= s2
    if bo >= 0:
        for t in range(NS):
            db1[t] *= scales[0]
    for a in range(S):
        lossv[a] /= alpha[a] * alpha[a] * P


def slot_rows(lay):
    """The slot row of each entry of a member's state (``lay`` as the data tuple's): each
    weight matrix transposed (``W_l[i, j]`` at row ``offset + j rows + i``), biases as they
    are; an int64 array (n,)."""
    rows = []
    for o, r, c, _ in lay:
        rows.append(o + (np.arange(c)[None, :] * r + np.arange(r)[:, None]).ravel())
    n = int(lay[-1, 0] + lay[-1, 1] * lay[-1, 2])
    rest = np.arange(n, n + int(sum(r for _, r, _, b in lay if b >= 0)))
    return np.concatenate(rows + [rest]).astype(np.int64)


@njit(nogil=True)
def _swap_slots(a, b, slot_mem, pat, npat, S, f0, alpha):
    """Exchange slots ``a`` and ``b``: their members, switch patterns (``npat`` rows of
    stride ``S``), ``f0`` and ``alpha``."""
    slot_mem[a], slot_mem[b] = slot_mem[b], slot_mem[a]
    for q in range(npat):
        pat[q * S + a], pat[q * S + b] = pat[q * S + b], pat[q * S + a]
    for p in range(f0.shape[0]):
        for i in range(f0.shape[1]):
            f0[p, i, a], f0[p, i, b] = f0[p, i, b], f0[p, i, a]
    alpha[a], alpha[b] = alpha[b], alpha[a]


@njit(nogil=True)
def _restride(x, rows, S_old, S_new):
    """In place: the flat ``(rows, S_old)`` array ``x`` as ``(rows, S_new)``, its first
    ``S_new`` slots kept (``S_new <= S_old``)."""
    for q in range(rows):
        for a in range(S_new):
            x[q * S_new + a] = x[q * S_old + a]


@njit(nogil=True)
def batched_flow(y, K, ynew, t_eval, h0, out_y, mstate, mstats, max_steps, tab, low, ctl, pat,
                 data, work, rows, shist):
    """Advance every member ``b`` of ``y`` (B, n) from t = 0 onto the output times ``t_eval``
    (T,), the states there into ``out_y`` (B, T, n).

    ``K`` (B, s + 1, n) with ``K[b, 0] = f(y[b])``; ``pat`` (npat B4,) bool the switch
    patterns at ``y`` (slot b, stride B4 = B rounded up to a multiple of 4, holds member b on
    entry; ``data``'s ``f0`` and ``alpha`` have B4 slots too); ``h0`` (B,) the first
    steps; ``tab``, ``low`` and ``ctl`` as for ``_erk_kernels.make_erk_advance`` (kinked
    model: no cap, the plain controller); ``rows`` (n,) the slot row of each state entry
    (:func:`slot_rows`).  ``mstate`` (B, 8) float64 receives ``[t, h, kink rejections, calm
    steps, last crossing, time sliding, on the low pair, outputs reached]``, ``mstats`` (B, 6)
    int64 ``[status, evaluations, accepted, rejected, kinks, fallback steps]``.  ``work =
    (Ys, out, Hc, Dv, G1, G0, F, lossv, cnt)`` the flat slot arrays of :func:`batched_rhs`;
    ``shist[S]`` (B4 + 1,) counts the rounds that evaluated ``S`` slots.  Returns the rounds
    taken."""
    Ys, fout, Hc, Dv, G1, G0, F, lossv, cnt = work
    f0, alpha = data[3], data[8]
    B, n = y.shape
    T = t_eval.shape[0]
    atol, min_factor = ctl[0], MIN_FACTOR       # ctl: compiled.loop_control's
    ulps, kink_rej_max, calm_max, growth = MIN_STEP_ULPS, KINK_REJECTIONS, CALM_STEPS, KINK_GROWTH
    clip_eps = CLIP_EPS
    B4 = (B + 3) // 4 * 4
    npat = pat.shape[0] // B4
    t = np.zeros(B)
    h = h0.copy()
    h_try = np.zeros(B)
    stage = np.ones(B, dtype=np.int64)
    clipped = np.zeros(B, dtype=np.bool_)
    on_low = np.zeros(B, dtype=np.bool_)
    rejected = np.zeros(B, dtype=np.bool_)
    crossed_st = np.zeros(B, dtype=np.bool_)
    kink_rej = np.zeros(B)
    calm = np.zeros(B)
    last_cross = np.full(B, np.nan)
    sliding = np.zeros(B)
    k = np.zeros(B, dtype=np.int64)
    nfev = np.ones(B, dtype=np.int64) * 2
    acc_n = np.zeros(B, dtype=np.int64)
    rej_n = np.zeros(B, dtype=np.int64)
    kinks = np.zeros(B, dtype=np.int64)
    fb = np.zeros(B, dtype=np.int64)
    status = np.zeros(B, dtype=np.int64)
    slot_mem = np.arange(B)
    done = np.zeros(B, dtype=np.bool_)
    fresh = np.ones(B, dtype=np.bool_)       # an attempt after an accepted step (or the first)
    nact = B
    S = B4                                   # the slots' stride: the live members padded to 4
    rounds = 0
    for b in range(B):                       # outputs at t = 0
        while k[b] < T and t_eval[k[b]] <= 0.0:
            out_y[b, k[b]] = y[b]
            k[b] += 1
        if k[b] == T:
            done[b] = True
    while True:
        # the members that need an attempt begin one (the checks before a step)
        for a in range(nact):
            b = slot_mem[a]
            if done[b] or stage[b] != 1:
                continue
            ms = ulps * (np.nextafter(t[b], np.inf) - t[b])
            if fresh[b]:
                if h[b] < ms:
                    h[b] = ms
                fresh[b] = False
            if acc_n[b] + rej_n[b] >= max_steps:
                status[b] = -3
                done[b] = True
                continue
            if h[b] < ms:
                status[b] = -1
                done[b] = True
                continue
            tt = t_eval[k[b]]
            clipped[b] = h[b] >= tt - t[b] or t[b] + h[b] >= tt - clip_eps * abs(tt)
            h_try[b] = tt - t[b] if clipped[b] else h[b]
            crossed_st[b] = False
        # members that ended leave their slots to live ones
        a = 0
        while a < nact:
            if done[slot_mem[a]]:
                nact -= 1
                if a != nact:
                    _swap_slots(a, nact, slot_mem, pat, npat, S, f0, alpha)
                continue
            a += 1
        if nact == 0:
            break
        S_new = (nact + 3) // 4 * 4
        if S_new != S:
            _restride(pat, npat, S, S_new)
            S = S_new
        # each member's next stage state, into its slot
        for a in range(S):
            b = slot_mem[a]
            A, bw = (low[0], low[1]) if on_low[b] else (tab[0], tab[1])
            s = bw.shape[0]
            i = stage[b]
            w = bw if i == s else A[i]
            yb, kb, nb = y[b], K[b], ynew[b]
            for q in range(n):
                nb[q] = 0.0
            for j in range(i):
                c = w[j]
                if c != 0.0:
                    kj = kb[j]
                    for q in range(n):
                        nb[q] += c * kj[q]
            hb = h_try[b]
            for q in range(n):
                v = nb[q] * hb + yb[q]
                nb[q] = v
                Ys[rows[q] * S + a] = v
        for a in range(nact, S):                 # the padding: zero networks
            for q in range(n):
                Ys[q * S + a] = 0.0
        rounds += 1
        shist[S] += 1
        batched_rhs(Ys, fout, S, data, Hc, Dv, G1, G0, F, lossv)
        for a in range(S):
            cnt[a] = 0
        for q in range(npat):
            for a in range(S):
                cnt[a] += (Dv[q * S + a] == 1.0) != pat[q * S + a]
        for a in range(nact):
            b = slot_mem[a]
            kb = K[b]
            i = stage[b]
            for q in range(n):
                kb[i, q] = fout[rows[q] * S + a]
            tb = low if on_low[b] else tab
            A, bw, e, e3, use_e3, exponent, rtol = tb
            s = bw.shape[0]
            if cnt[a] > 0:
                crossed_st[b] = True
            if i < s:
                stage[b] = i + 1
                continue
            stage[b] = 1
            # the attempt is complete: its error norm (as _erk_kernels' _dense_attempt)
            yb, nb = y[b], ynew[b]
            e5 = 0.0
            e3n = 0.0
            for q in range(n):
                sc = atol + rtol * max(abs(yb[q]), abs(nb[q]))
                acc = 0.0
                acc3 = 0.0
                for j in range(s + 1):
                    if e[j] != 0.0:
                        acc += e[j] * kb[j, q]
                    if use_e3 and e3[j] != 0.0:
                        acc3 += e3[j] * kb[j, q]
                acc /= sc
                e5 += acc * acc
                if use_e3:
                    acc3 /= sc
                    e3n += acc3 * acc3
            ht = h_try[b]
            err = error_norm(e5, e3n, use_e3, ht, n)
            nfev[b] += s
            if not np.isfinite(err):
                rej_n[b] += 1
                rejected[b] = True
                h[b] = ht * min_factor
                continue
            crossed = cnt[a]
            if err >= 1.0:
                rej_n[b] += 1
                cr = crossed > 0 or crossed_st[b]
                low_now = on_low[b]
                if cr and not low_now:
                    kink_rej[b] += 1.0
                    if kink_rej[b] >= kink_rej_max:
                        on_low[b] = True
                        kink_rej[b] = 0.0
                        calm[b] = 0.0
                        low_now = True
                if cr and low_now:
                    h[b] = ht * kink_factor(err, True)
                else:
                    h[b] = ht * step_factor(err, (low if low_now else tab)[5], True)
                rejected[b] = True
                continue
            # accepted
            t_new = t_eval[k[b]] if clipped[b] else t[b] + ht
            acc_n[b] += 1
            low_now = on_low[b]
            if low_now:
                fb[b] += 1
            if crossed > 0:
                kinks[b] += crossed
                if calm[b] <= calm_max and not np.isnan(last_cross[b]):
                    sliding[b] += t_new - last_cross[b]
                last_cross[b] = t_new
                calm[b] = 0.0
                for q in range(npat):
                    pat[q * S + a] = Dv[q * S + a] == 1.0
            elif crossed_st[b]:
                calm[b] = 0.0
            else:
                calm[b] += 1.0
            if low_now and calm[b] >= calm_max:
                on_low[b] = False
                low_now = False
            kink_rej[b] = 0.0
            if low_now:
                if crossed > 0:
                    fac = kink_factor(err, rejected[b])
                else:
                    fac = step_factor(err, exponent, rejected[b])
                h[b] = ht * min(fac, growth)
            else:
                h[b] = ht * step_factor(err, tab[5], rejected[b], MAX_FACTOR)
            rejected[b] = False
            fresh[b] = True
            for q in range(n):
                yb[q] = nb[q]
                kb[0, q] = kb[s, q]
            if clipped[b]:
                t[b] = t_eval[k[b]]
                out_y[b, k[b]] = yb
                k[b] += 1
                if k[b] == T:
                    done[b] = True
            else:
                t[b] = t[b] + ht
    for b in range(B):
        mstate[b, 0] = t[b]
        mstate[b, 1] = h[b]
        mstate[b, 2] = kink_rej[b]
        mstate[b, 3] = calm[b]
        mstate[b, 4] = last_cross[b]
        mstate[b, 5] = sliding[b]
        mstate[b, 6] = 1.0 if on_low[b] else 0.0
        mstate[b, 7] = k[b]
        mstats[b, 0] = status[b]
        mstats[b, 1] = nfev[b]
        mstats[b, 2] = acc_n[b]
        mstats[b, 3] = rej_n[b]
        mstats[b, 4] = kinks[b]
        mstats[b, 5] = fb[b]
    return rounds
