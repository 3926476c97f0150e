"""Numba kernels of the simulator (compiled with ``cache=True``; nothing else lives here).

* :func:`chains` / :func:`rhs_flat` -- the partial products of the gradient and the
  gradient-flow right-hand side on the flat state, the same narrow-side product
  order as the numpy references ``_rhs.chains`` / ``_rhs.rhs``;
* :func:`jvp_flat` -- the Jacobian-vector product of ``_stiff.Flow.jvp`` on the flat
  state, from the products :func:`rhs_flat` left (``_stiff.CompiledFlow``);
* :func:`end_to_end`, :func:`balance_drift`, :func:`probe_ntk` -- the end-to-end
  map, the conservation diagnostic and the empirical NTK of the flat state, for the
  observations of a numba run (``flow.gradient_flow``);
* :func:`erk_advance` -- the generic embedded Runge-Kutta stepper of
  ``_explicit.erk_solve``, advancing to one output time without returning to Python.

Every argument is a C-contiguous float64 (or int64) array or a scalar of fixed
type, so each kernel compiles to exactly one signature.  Products go through
``np.dot`` (BLAS) on contiguous views reshaped from the flat buffers.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ._rhs import TRANSPOSED_PRODUCT_MAX_BYTES

__all__ = ["times_transpose", "chains", "rhs_flat", "jvp_flat", "end_to_end", "balance_drift",
           "probe_ntk", "error_norm", "step_after_accept", "predictive_step", "accept_step", "sumsq", "stiffness_estimate",
           "stability_cap", "capped_step", "ACCEPTED", "REJECTED", "NONFINITE_TRIAL",
           "step_guard", "trial_step", "judge_step", "erk_advance", "stage_state", "hold_step",
           "exchange", "PENDING", "STIFF", "count_stiff", "stage_states", "end_to_end_many"]


@njit(cache=True)
def times_transpose(G, W, out, tbuf):
    """``out = G W^T`` (C x r) for ``G`` (C x c), ``W`` (r x c): ``_rhs.times_transpose``,
    the same branch and the same BLAS calls (``tbuf``: scratch of ``(r + c) C`` doubles)."""
    C, c = G.shape
    r = W.shape[0]
    if 8 * r * c <= TRANSPOSED_PRODUCT_MAX_BYTES:
        GT = tbuf[:c * C].reshape((c, C))
        for a in range(C):
            for i in range(c):
                GT[i, a] = G[a, i]
        OT = tbuf[c * C:(c + r) * C].reshape((r, C))
        np.dot(W, GT, OT)
        for a in range(C):
            for i in range(r):
                out[a, i] = OT[i, a]
    else:
        np.dot(G, W.T, out)


@njit(cache=True)
def chains(y, Sxx, Syx, rows, cols, offs, abuf, aoff, gbuf, goff, WT, SW, tbuf):
    """The partial products of the gradient at ``y`` (n,), as ``_rhs.chains``.

    ``rows[i], cols[i]`` are the shape of layer i (0-based), ``offs`` its offsets
    in ``y``; writes the transposed top products ``A_i^T`` (rows[i] x C) into
    ``abuf`` at offsets ``aoff`` (``i < L - 1``) and the bottom products ``G_i``
    (C x cols[i]) into ``gbuf`` at ``goff`` (``G_0 = E``); ``WT`` and ``SW`` are
    (D, C) scratch, ``tbuf`` scratch of ``2 C max(rows, cols)`` doubles for
    :func:`times_transpose`.
    """
    L = rows.shape[0]
    C = Syx.shape[0]
    D = Sxx.shape[0]
    # transposed top products A_i^T = (W_{L-1} ... W_{i+1})^T, A_{L-1} = I never formed
    if L > 1:
        At = abuf[aoff[L - 2]:aoff[L - 2] + C * rows[L - 2]].reshape((rows[L - 2], C))
        Wtop = y[offs[L - 1]:offs[L]].reshape((rows[L - 1], cols[L - 1]))
        At[:, :] = Wtop.T
        for i in range(L - 3, -1, -1):
            Ai = abuf[aoff[i]:aoff[i] + C * rows[i]].reshape((rows[i], C))
            Ap = abuf[aoff[i + 1]:aoff[i + 1] + C * rows[i + 1]].reshape((rows[i + 1], C))
            Wp = y[offs[i + 1]:offs[i + 2]].reshape((rows[i + 1], cols[i + 1]))
            np.dot(Wp.T, Ap, Ai)
        A0 = abuf[aoff[0]:aoff[0] + C * rows[0]].reshape((rows[0], C))
        W0 = y[offs[0]:offs[1]].reshape((rows[0], cols[0]))
        np.dot(W0.T, A0, WT)
    else:
        WT[:, :] = y[offs[0]:offs[1]].reshape((C, D)).T
    # E = Syx - (Sxx W^T)^T, stored as G_0
    np.dot(Sxx, WT, SW)
    E = gbuf[goff[0]:goff[0] + C * D].reshape((C, D))
    for a in range(C):
        for d in range(D):
            E[a, d] = Syx[a, d] - SW[d, a]
    # bottom products G_i = E W_0^T ... W_{i-1}^T
    for i in range(1, L):
        Gi = gbuf[goff[i]:goff[i] + C * cols[i]].reshape((C, cols[i]))
        Gp = gbuf[goff[i - 1]:goff[i - 1] + C * cols[i - 1]].reshape((C, cols[i - 1]))
        Wm = y[offs[i - 1]:offs[i]].reshape((rows[i - 1], cols[i - 1]))
        times_transpose(Gp, Wm, Gi, tbuf)


@njit(cache=True)
def rhs_flat(y, out, Sxx, Syx, eta_l, rows, cols, offs, abuf, aoff, gbuf, goff, WT, SW, tbuf):
    """Write ``dy/dt`` at ``y`` (n,) into ``out`` (n,): :func:`chains`, then
    ``dW_i = eta_i A_i^T G_i`` (``_rhs.rhs``)."""
    L = rows.shape[0]
    C = Syx.shape[0]
    chains(y, Sxx, Syx, rows, cols, offs, abuf, aoff, gbuf, goff, WT, SW, tbuf)
    for i in range(L):
        Gi = gbuf[goff[i]:goff[i] + C * cols[i]].reshape((C, cols[i]))
        dW = out[offs[i]:offs[i + 1]].reshape((rows[i], cols[i]))
        eta = eta_l[i]
        if i == L - 1:
            for a in range(rows[i]):
                for d in range(cols[i]):
                    dW[a, d] = Gi[a, d] * eta
        else:
            Ai = abuf[aoff[i]:aoff[i] + C * rows[i]].reshape((rows[i], C))
            np.dot(Ai, Gi, dW)
            for m in range(offs[i], offs[i + 1]):
                out[m] *= eta


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
def _add_into(out, P):
    """``out += P`` (2-D, same shape)."""
    for a in range(out.shape[0]):
        for b in range(out.shape[1]):
            out[a, b] += P[a, b]


@njit(cache=True)
def jvp_flat(v, out, y, Sxx, eta_l, rows, cols, offs, abuf, aoff, gbuf, goff, dabuf, dgbuf,
             dWT, dSW, tbuf, pbuf):
    """Write ``J(y) v`` into ``out`` (n,): ``_stiff.Flow.jvp`` on the flat state, with
    ``abuf``/``gbuf`` the partial products of ``y`` (``chains(y, ...)``, as
    :func:`rhs_flat` leaves them).  In the transposed layout of :func:`chains`:

        dA_i^T = W_{i+1}^T dA_{i+1}^T + V_{i+1}^T A_{i+1}^T,  dA_{L-2}^T = V_{L-1}^T,
        dW^T = W_0^T dA_0^T + V_0^T A_0^T,  dG_0 = -(Sxx dW^T)^T,
        dG_i = dG_{i-1} W_{i-1}^T + G_{i-1} V_{i-1}^T,
        d(dW_i) = eta_i (dA_i^T G_i + A_i^T dG_i)   (eta_i dG_i at the top),

    ``dabuf``/``dgbuf`` laid out as ``abuf``/``gbuf``, ``dWT``/``dSW`` (D, C) and
    ``pbuf`` (the largest layer) scratch, ``tbuf`` that of :func:`times_transpose`.
    """
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
            _add_into(dAi, P)
        np.dot(_layer(y, offs, rows, cols, 0).T, _top(dabuf, aoff, rows, 0, C), dWT)
        P = pbuf[:D * C].reshape((D, C))
        np.dot(_layer(v, offs, rows, cols, 0).T, _top(abuf, aoff, rows, 0, C), P)
        _add_into(dWT, P)
    else:
        dWT[:, :] = _layer(v, offs, rows, cols, 0).T
    np.dot(Sxx, dWT, dSW)
    dE = _bottom(dgbuf, goff, cols, 0, C)
    for a in range(C):
        for d in range(D):
            dE[a, d] = -dSW[d, a]
    for i in range(1, L):
        dGi = _bottom(dgbuf, goff, cols, i, C)
        times_transpose(_bottom(dgbuf, goff, cols, i - 1, C), _layer(y, offs, rows, cols, i - 1),
                        dGi, tbuf)
        P = pbuf[:C * cols[i]].reshape((C, cols[i]))
        times_transpose(_bottom(gbuf, goff, cols, i - 1, C), _layer(v, offs, rows, cols, i - 1),
                        P, tbuf)
        _add_into(dGi, P)
    for i in range(L):
        dW = _layer(out, offs, rows, cols, i)
        dGi = _bottom(dgbuf, goff, cols, i, C)
        if i == L - 1:
            dW[:, :] = dGi
        else:
            np.dot(_top(dabuf, aoff, rows, i, C), _bottom(gbuf, goff, cols, i, C), dW)
            P = pbuf[:rows[i] * cols[i]].reshape((rows[i], cols[i]))
            np.dot(_top(abuf, aoff, rows, i, C), dGi, P)
            _add_into(dW, P)
        dW *= eta_l[i]


@njit(cache=True)
def end_to_end(y, rows, cols, offs, out, buf):
    """``out = W_L ... W_1`` (C x D) of the flat state ``y``, multiplied from the top in
    the order of ``_rhs.end_to_end_flat``; ``buf``: scratch of ``2 C max(cols)`` doubles.

    The observations of a numba run form the end-to-end map here rather than in numpy:
    numpy's BLAS is another library with its own threads, which contend with the
    loop's (still spinning after a compiled call) for the cores -- on the large
    benchmark network a 1 ms product took 18 to 65 ms that way.
    """
    L = rows.shape[0]
    if L == 1:
        out[:, :] = _layer(y, offs, rows, cols, 0)
        return
    C = rows[L - 1]
    half = buf.shape[0] // 2
    cur = _layer(y, offs, rows, cols, L - 1)
    slot = 0
    for i in range(L - 2, 0, -1):
        nxt = buf[slot * half:slot * half + C * cols[i]].reshape((C, cols[i]))
        np.dot(cur, _layer(y, offs, rows, cols, i), nxt)
        cur = nxt
        slot = 1 - slot
    np.dot(cur, _layer(y, offs, rows, cols, 0), out)


@njit(cache=True)
def end_to_end_many(Ys, rows, cols, offs, out, buf):
    """:func:`end_to_end` of each row of ``Ys`` (m, n) into ``out[i]`` (C x D): the outputs
    of a step's continuous extension observed in one call."""
    for i in range(Ys.shape[0]):
        end_to_end(Ys[i], rows, cols, offs, out[i], buf)


@njit(cache=True)
def balance_drift(y, rows, cols, offs, gram, gram0, goffs, first, tmp):
    """``max_i |G_i - G_i(t_0)|_F`` over the balance Gram matrices
    ``G_i = W_{i+1}^T W_{i+1} - W_i W_i^T`` (N_i x N_i, i < L - 1) of the flat state ``y``:
    the conservation diagnostic of ``flow.gradient_flow``, for a numba run's observations
    (see :func:`end_to_end`).  ``gram``/``gram0`` hold the G_i at offsets ``goffs``; with
    ``first`` the G_i are stored in ``gram0`` (and 0 returned); ``tmp`` is scratch of the
    largest N_i^2.
    """
    L = rows.shape[0]
    drift = 0.0
    for i in range(L - 1):
        N = rows[i]
        G = gram[goffs[i]:goffs[i + 1]].reshape((N, N))
        Wi = _layer(y, offs, rows, cols, i)
        Wn = _layer(y, offs, rows, cols, i + 1)
        np.dot(Wn.T, Wn, G)
        T = tmp[:N * N].reshape((N, N))
        np.dot(Wi, Wi.T, T)
        acc = 0.0
        for m in range(goffs[i], goffs[i + 1]):
            g = gram[m] - tmp[m - goffs[i]]
            gram[m] = g
            if first:
                gram0[m] = g
            else:
                d = g - gram0[m]
                acc += d * d
        drift = max(drift, np.sqrt(acc))
    return drift


@njit(cache=True)
def probe_ntk(y, rows, cols, offs, Xp, out, abuf, tt, hbuf, hh):
    """``out`` (Q, Q, C, C) = the empirical NTK of the flat state ``y`` on the probe
    inputs ``Xp`` (Q, D), ``sum_l (H_l H_l^T) (x) (A_l A_l^T)`` with ``A_l = W_L ... W_{l+1}``
    and ``H_l = Xp W_1^T ... W_{l-1}^T``: ``ntk._ntk_blocks(ws, Xp, Xp)``, the same products
    in the same order, for a numba run's observations (see :func:`end_to_end`).
    Scratch: ``abuf`` of ``2 C max(cols)``, ``tt`` (L, C, C), ``hbuf`` of ``2 Q max(cols)``
    and ``hh`` (Q, Q).
    """
    L = rows.shape[0]
    C = rows[L - 1]
    Q = Xp.shape[0]
    for i in range(C):
        for j in range(C):
            tt[L - 1, i, j] = 1.0 if i == j else 0.0
    if L > 1:
        half = abuf.shape[0] // 2
        A = _layer(y, offs, rows, cols, L - 1)  # A_{L-2} (C x rows[L-2])
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
                v = hh[p, q]
                for a in range(C):
                    for b in range(C):
                        out[p, q, a, b] += v * tt[i, a, b]


@njit(cache=True)
def error_norm(e5, e3, use_e3, h, n):
    """``_explicit._error_norm`` from the scaled error sums: RMS, or Hairer's DOP853 norm."""
    if not use_e3:
        return abs(h) * np.sqrt(e5 / n)
    if e5 == 0.0 and e3 == 0.0:
        return 0.0
    return abs(h) * e5 / np.sqrt((e5 + 0.01 * e3) * n)


@njit(cache=True)
def step_after_accept(h, h_try, err, exponent, max_factor, safety, rejected, clipped):
    """``_explicit.step_after_accept`` for the compiled loops (same operations)."""
    factor = max_factor if err == 0.0 else min(max_factor, safety * err ** exponent)
    if rejected:
        factor = min(1.0, factor)
    h_next = h_try * factor
    if clipped and not rejected:
        h_next = max(h_next, h)
    return h_next


@njit(cache=True)
def predictive_step(h_next, h_try, err, exponent, h_prev, err_prev, safety, min_factor):
    """``_explicit.predictive_step`` for the compiled loops (same operations)."""
    if h_prev <= 0.0 or err == 0.0:
        return h_next
    h_pred = safety * h_try * (h_try / h_prev) * (err_prev / err / err) ** (-exponent)
    return min(h_next, max(h_pred, min_factor * h_try))


@njit(cache=True)
def accept_step(h, h_try, err, exponent, max_factor, safety, min_factor, rejected, clipped,
                th, min_err):
    """The step after an accepted ``h_try``, as in ``_explicit.adaptive_run``: the standard
    controller, then (unless ``clipped``) the predictive step from the previous accepted
    step ``th[3]`` and its floored error ``th[4]``, which this step then replaces."""
    h = step_after_accept(h, h_try, err, exponent, max_factor, safety, rejected, clipped)
    if not clipped:
        h = predictive_step(h, h_try, err, exponent, th[3], th[4], safety, min_factor)
        th[3] = h_try
        th[4] = max(err, min_err)
    return h


@njit(cache=True)
def sumsq(X):
    """``sum X^2`` left to right (``_explicit._sequential_sumsq``)."""
    acc = 0.0
    for v in X.ravel():
        acc += v * v
    return acc


@njit(cache=True)
def stiffness_estimate(num, dd, ref, wsum, h, yy, min_rel, ulps_eps):
    """``_explicit.stiffness_estimate`` for the compiled loops (same operations)."""
    rel2 = min_rel * min_rel
    if not (dd > rel2 * wsum * wsum * ref and num > rel2 * ref):
        return 0.0
    res = ulps_eps / h
    rho = np.sqrt(num / max(dd, res * res * yy)) / abs(h)
    return rho if np.isfinite(rho) else 0.0


@njit(cache=True)
def stability_cap(h_next, rho, stiff):
    """``_explicit.stability_cap``; ``stiff = [boundary, safety, memory, min_rel, wsum,
    state_ulps * eps]`` (``_explicit.stiffness_args``)."""
    if not (rho > 0.0 and stiff[0] > 0.0):
        return h_next
    return min(h_next, stiff[1] * stiff[0] / rho)


@njit(cache=True)
def count_stiff(h_capped, h_free, th, stiff, stats):
    """After an accepted step: ``stats[4]`` counts the steps the stability cap shortened
    (``h_capped < h_free``); the stiffness test of ``_stiff.erk_run``: ``th[7]`` counts
    such steps in a row, ``th[8]`` the uncapped ones since; ``stiff[6]``
    (NONSTIFF_RESET) uncapped steps reset the count.  True once it reaches ``stiff[7]``
    (the test is off where that is 0)."""
    if h_capped < h_free:
        stats[4] += 1
    if stiff[7] <= 0.0:
        return False
    if h_capped < h_free:
        th[8] = 0.0
        th[7] += 1.0
    else:
        th[8] += 1.0
        if th[8] == stiff[6]:
            th[7] = 0.0
    return th[7] >= stiff[7]


@njit(cache=True)
def capped_step(h, h_try, num, dd, ref, yy, th, stiff):
    """The next step after the stability cap: updates the remembered estimate ``th[2]``
    from the accepted step's sums (``_explicit.adaptive_run``; ``yy = |y_new|^2``) and
    caps ``h``."""
    rho = max(stiffness_estimate(num, dd, ref, stiff[4], h_try, yy, stiff[3], stiff[5]),
              stiff[2] * th[2])
    th[2] = rho
    return stability_cap(h, rho, stiff)


#: Verdicts of :func:`judge_step`.
ACCEPTED, REJECTED, NONFINITE_TRIAL = 0, 1, 2

#: Return code of a loop holding an accepted step across an output time (``_explicit.PENDING``).
PENDING = 1
#: Return code of a loop whose stiffness test fired (:func:`count_stiff`) after an
#: accepted step that did not end on ``t_target``: ``y``, ``K[0]`` and ``th`` hold its end.
STIFF = 2


@njit(cache=True)
def step_guard(h, min_step, stats, max_steps, nonfinite):
    """The checks before an attempted step of the compiled loops: -3 when the step budget
    ``max_steps`` is spent, -1 when ``h < min_step`` (``stats[3]`` then records whether
    non-finite trial steps drove it there), else 0."""
    if stats[1] + stats[2] >= max_steps:
        return -3
    if h < min_step:
        stats[3] = 1 if nonfinite else 0
        return -1
    return 0


@njit(cache=True)
def trial_step(t, h, t_target):
    """``(h_try, clipped)``: ``h``, shortened to land on ``t_target`` when it would pass it."""
    clipped = t + h >= t_target
    return (t_target - t if clipped else h), clipped


@njit(cache=True)
def judge_step(err, h, h_try, exponent, max_factor, safety, min_factor, rejected, clipped, th,
               min_err, stats):
    """``(verdict, h_next)`` after a trial step of error ``err``, as in
    ``_explicit.adaptive_run``: ACCEPTED with :func:`accept_step`, else the rejection is
    counted in ``stats[2]`` and the step shrunk (by ``min_factor`` after a non-finite trial)."""
    if not np.isfinite(err):
        stats[2] += 1
        return NONFINITE_TRIAL, h_try * min_factor
    if err < 1.0:
        return ACCEPTED, accept_step(h, h_try, err, exponent, max_factor, safety, min_factor,
                                     rejected, clipped, th, min_err)
    stats[2] += 1
    return REJECTED, h_try * max(min_factor, safety * err ** exponent)


@njit(cache=True)
def exchange(a, b):
    """Swap the contents of ``a`` and ``b`` (n,): a loop whose state and trial state swapped
    roles hands the step's start back in ``a`` and its end in ``b``."""
    for m in range(a.shape[0]):
        v = a[m]
        a[m] = b[m]
        b[m] = v


@njit(cache=True)
def hold_step(th, t, h, h_try, t_new, y, y_new, swapped):
    """Hand back an accepted step ``t -> t_new`` of length ``h_try``: record it in ``th``
    (``h``: the step proposed next) and return :data:`PENDING`, the step's start in ``y``
    and its end in ``y_new`` (exchanged first if the loop ``swapped`` their roles)."""
    th[0] = t
    th[1] = h
    th[5] = h_try
    th[6] = t_new
    if swapped:
        exchange(y, y_new)
    return PENDING


@njit(cache=True)
def stage_state(y, K, w, h, out):
    """``out = (sum_j w_j K_j) h + y`` over the nonzero ``w_j`` (``len(w)`` rows of ``K``),
    in the order of :func:`erk_advance`'s stages: the states of the continuous extension
    (``_explicit.erk_solve`` forms them the same way)."""
    n = y.shape[0]
    for m in range(n):
        out[m] = 0.0
    for j in range(w.shape[0]):
        a = w[j]
        if a != 0.0:
            for m in range(n):
                out[m] += a * K[j, m]
    for m in range(n):
        out[m] = out[m] * h + y[m]


@njit(cache=True)
def stage_states(y, K, W, h, out):
    """:func:`stage_state` for each row of ``W`` (m, s + 1) into the first m rows of
    ``out``: the outputs of a step's continuous extension in one call."""
    for i in range(W.shape[0]):
        stage_state(y, K, W[i], h, out[i])


@njit(cache=True)
def erk_advance(y, K, y_new, th, t_target, t_out, stats, max_steps, A, b, e, e3, use_e3, exponent,
                rtol, atol, safety, min_factor, max_factor, min_err, ulps, wd, stiff,
                Sxx, Syx, eta_l, rows, cols, offs, abuf, aoff, gbuf, goff, WT, SW, tbuf):
    """Advance ``y`` (n,) from ``th[0]`` to exactly ``t_target`` with adaptive steps.

    ``K`` (at least s+1 rows, n) holds stage derivatives, ``K[0] = f(y)`` on entry and exit;
    ``th = [t, h, rho, h_prev, err_prev, h_step, t_new, n_stiff, n_nonstiff]`` (time,
    proposed step, remembered stiffness estimate, the last accepted unclipped step and
    its floored error, see :func:`accept_step`; the pending step; the counts of the
    stiffness test, see :func:`count_stiff`) and
    ``stats = [nfev, accepted, rejected, nonfinite, capped]`` are updated in place
    (``nonfinite`` = 1 when an underflow followed non-finite trial steps); ``wd``
    are the tableau's stiffness weights and ``stiff`` the stability-cap constants
    (see :func:`stability_cap`).  Returns 0 on success, -1 step-size underflow,
    -3 step budget exhausted (codes of ``FlowStatus``); on failure ``y`` and ``th``
    hold the last accepted state.  An accepted step that ends at or after ``t_out``
    (dense output; infinite otherwise) returns :data:`PENDING` before its bookkeeping:
    ``y`` and ``K`` are still the step's, ``y_new`` its end state at
    ``th[6] = t_new``, ``th[5]`` its length; the caller completes it.  With the
    stiffness test on (``stiff[7] > 0``) a step after which it fires returns
    :data:`STIFF` unless it ended on ``t_target`` (then 0: the caller reads ``th[7]``).
    """
    s = b.shape[0]
    n = y.shape[0]
    t = th[0]
    h = th[1]
    nonfinite = False
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
                return code
            h_try, clipped = trial_step(t, h, t_target)
            for i in range(1, s + 1):
                stage_state(y, K, (b if i == s else A[i])[:i], h_try, y_new)
                rhs_flat(y_new, K[i], Sxx, Syx, eta_l, rows, cols, offs, abuf, aoff, gbuf, goff,
                         WT, SW, tbuf)
            stats[0] += s
            # error norm (RMS, or Hairer's DOP853 combination of err5 and err3)
            e5 = 0.0
            e3n = 0.0
            for m in range(n):
                sc = atol + rtol * max(abs(y[m]), abs(y_new[m]))
                acc = 0.0
                acc3 = 0.0
                for j in range(s + 1):  # zero weights skipped, as in the numpy stepper
                    if e[j] != 0.0:
                        acc += e[j] * K[j, m]
                    if use_e3 and e3[j] != 0.0:
                        acc3 += e3[j] * K[j, m]
                acc /= sc
                e5 += acc * acc
                if use_e3:
                    acc3 /= sc
                    e3n += acc3 * acc3
            err = error_norm(e5, e3n, use_e3, h_try, n)
            verdict, h = judge_step(err, h, h_try, exponent, max_factor, safety, min_factor,
                                    rejected, clipped, th, min_err, stats)
            if verdict == ACCEPTED:
                nonfinite = False
                break
            nonfinite = nonfinite or verdict == NONFINITE_TRIAL
            rejected = True
        stats[1] += 1
        # stiffness estimate from the accepted step's stages (_explicit.erk_solve)
        ref = 0.0
        num = 0.0
        dd = 0.0
        yy = 0.0
        for m in range(n):
            yy += y_new[m] * y_new[m]
            ref += K[0, m] * K[0, m]
            dv = K[s, m] - K[s - 1, m]
            num += dv * dv
            acc = 0.0
            for j in range(s):
                if wd[j] != 0.0:
                    acc += wd[j] * K[j, m]
            dd += acc * acc
        h_free = h
        h = capped_step(h, h_try, num, dd, ref, yy, th, stiff)
        stiff_now = count_stiff(h, h_free, th, stiff, stats)
        t_new = t_target if clipped else t + h_try
        if t_new >= t_out:
            return hold_step(th, t, h, h_try, t_new, y, y_new, False)
        for m in range(n):
            y[m] = y_new[m]
            K[0, m] = K[s, m]
        if clipped:
            th[0] = t_target
            th[1] = h
            return 0
        t = t + h_try
        if stiff_now:
            th[0] = t
            th[1] = h
            return STIFF
