"""Embedded Runge-Kutta stepping with the stages of a linear network kept in factored form.

The linear model's fast path for the explicit pairs on wide networks (rank-C factored
stages, on the sufficient statistics); every other model, and the linear one on narrow
networks, steps through the generic loops of ``methods/`` (``methods.compiled.erk``).

Why
---
For a linear network every stage derivative is low rank in each layer:

    K_l = eta_l A_l^T G_l,    A_l = W_L ... W_{l+1}  (C x N_l),   G_l = E W_1^T ... W_{l-1}^T  (C x N_{l-1}),

so an s-stage step moves layer l by a matrix of rank at most s*C.  The generic
stepper (``_explicit.erk_solve``) forms every stage state densely,
``y + h sum_j a_ij K_j``: O(s^2 n) memory traffic per step, which on wide
networks costs several times the gradient itself.  Here a stage is stored as
its factors ``(eta_l A_l, G_l)`` (``C (N_l + N_{l-1})`` numbers instead of
``N_l N_{l-1}``) and stage states are never formed.  The right-hand side only
multiplies the stage weights by C-row blocks, and

    A W_l^st = A (W_l + sum_j w_j U_j V_j) = A W_l + ((A U) diag(w)) V

costs one product with the stored ``W_l`` plus O(s C^2 N) for the correction.
The dense state is updated once per step with one rank-``s C`` product per
layer (a GEMM, running at the BLAS rate), and the error estimate is formed the
same way, so the per-step vector traffic drops from O(s^2 n) to O(n).

Layers whose stages are not worth factoring -- the top layer (``N_L = C``),
and any layer with ``min(N_l, N_{l-1}) <= (s + 1) C`` -- keep dense stages and
are combined elementwise as in the generic stepper.

The error control, the step-size controller, output-time handling and failure
reporting are those of ``_explicit.erk_solve`` (the same loop); only the rounding
of the stage states differs, so the two steppers take the same steps except where
an error norm sits within rounding of 1.

This module is the numpy reference (plain numpy products and sums, its stepper run by
the one adaptive loop ``methods.base.integrate`` through ``_explicit.adaptive_run``);
``_lowrank_kernels.lowrank_advance`` (driven by ``methods.compiled.erk`` on
``models/_linear_ops.FactoredStages``) is its compiled twin (the same operations in the
same order, agreeing to the tolerance, not bit for bit).
"""
from __future__ import annotations

import numpy as np

from . import _explicit, _rhs
from .methods.base import sumsq

__all__ = ["Layout", "worth_factoring", "third_order_rest", "lowrank_solve",
           "lowrank_solve_numba"]


class Layout:
    """Sizes, offsets and the factored/dense choice of every layer, plus the stage storage.

    Storage for ``S1 = s + 1`` stage slots (slot ``s`` is ``f(y_new)``, reused as
    slot 0 of the next step):

    * factored layer l: ``ut`` block (S1*C, N_l) holding ``eta_l A_l`` per slot,
      ``vs`` block (S1*C, N_{l-1}) holding ``G_l`` per slot;
    * dense layer l: ``kd`` block (S1, N_l N_{l-1}) holding ``K_l`` per slot.
    """

    def __init__(self, problem, n_slots):
        shapes = problem.shapes
        L = len(shapes)
        C = problem.Syx.shape[0]
        self.L, self.C, self.S1 = L, C, n_slots
        self.rows = np.array([r for r, _ in shapes], dtype=np.int64)
        self.cols = np.array([c for _, c in shapes], dtype=np.int64)
        self.offs = np.ascontiguousarray(problem.offsets, dtype=np.int64)
        fac = [l < L - 1 and min(r, c) > n_slots * C for l, (r, c) in enumerate(shapes)]
        self.factored = np.array(fac, dtype=np.int64)
        ut = [n_slots * C * r if f else 0 for f, (r, _) in zip(fac, shapes)]
        vs = [n_slots * C * c if f else 0 for f, (_, c) in zip(fac, shapes)]
        kd = [0 if f else n_slots * r * c for f, (r, c) in zip(fac, shapes)]
        cum = lambda a: np.concatenate(([0], np.cumsum(a))).astype(np.int64)  # noqa: E731
        self.utoff, self.vsoff, self.kdoff = cum(ut), cum(vs), cum(kd)
        self.toff = cum(C * self.rows)      # A_l (C x N_l)
        self.goff = cum(C * self.cols)      # G_l (C x N_{l-1})
        self.max_dim = int(max(max(s) for s in shapes))


def worth_factoring(problem, n_stages):
    """Whether any layer's stages are stored in factored form (else the generic stepper is as good)."""
    C = problem.Syx.shape[0]
    return any(l < len(problem.shapes) - 1 and min(r, c) > (n_stages + 1) * C
               for l, (r, c) in enumerate(problem.shapes))


class _Stages:
    """The numpy implementation of the stage storage and the factored right-hand side."""

    def __init__(self, problem, lay):
        self.p, self.lay = problem, lay
        C, S1 = lay.C, lay.S1
        self.ut = [np.empty((S1 * C, r)) if f else None for f, r in zip(lay.factored, lay.rows)]
        self.vs = [np.empty((S1 * C, c)) if f else None for f, c in zip(lay.factored, lay.cols)]
        self.kd = [None if f else np.empty((S1, r * c))
                   for f, r, c in zip(lay.factored, lay.rows, lay.cols)]

    def _weights(self, w):
        # one weight per row/column of a stacked factor block
        return np.repeat(w, self.lay.C)

    def stage(self, y, w, slot):
        """Store in ``slot`` the factors of ``f(y + sum_{j<k} w_j K_j)``, ``k = len(w)``.

        All chains are carried as C-row blocks: ``A_l = W_L ... W_{l+1}`` (C x N_l)
        built downwards, ``A_{l-1} = A_l W_l``, and ``G_l`` (C x N_{l-1}) built
        upwards, ``G_{l+1} = G_l W_l^T``; a factored layer's stage weight enters as

            A W^st = A W + ((A U) * w) V,      G W^st^T = G W^T + ((G V^T) * w) U^T

        with ``U^T`` (k C x N_l) and ``V`` (k C x N_{l-1}) its stacked stage factors.
        """
        lay, p = self.lay, self.p
        L, C = lay.L, lay.C
        k = w.size
        Ws = _rhs.unpack(y, p.shapes, p.offsets)
        wr = self._weights(w)
        Wst = [None] * L
        for l in range(L):
            if not lay.factored[l]:
                Wst[l] = Ws[l] + (w @ self.kd[l][:k]).reshape(Ws[l].shape) if k else Ws[l]

        def apply_left(l, A):       # A W_l^st
            if not lay.factored[l]:
                return A @ Wst[l]
            out = A @ Ws[l]
            if k:
                M = A @ self.ut[l][:k * C].T
                M *= wr[None, :]
                out += M @ self.vs[l][:k * C]
            return out

        def apply_right(l, G):      # G W_l^st^T
            if not lay.factored[l]:
                return _rhs.times_transpose(G, Wst[l])
            out = _rhs.times_transpose(G, Ws[l])
            if k:
                N = G @ self.vs[l][:k * C].T
                N *= wr[None, :]
                out += N @ self.ut[l][:k * C]
            return out

        A = [None] * L
        if L > 1:
            A[L - 2] = Wst[L - 1]
            for l in range(L - 2, 0, -1):
                A[l - 1] = apply_left(l, A[l])
            W = apply_left(0, A[0])
        else:
            W = Wst[0]
        G = p.Syx - (W if p.white else W @ p.Sxx)
        for l in range(L):
            if l > 0:
                G = apply_right(l - 1, G)
            eta = p.eta_l[l]
            if lay.factored[l]:
                self.ut[l][slot * C:(slot + 1) * C] = A[l] * eta
                self.vs[l][slot * C:(slot + 1) * C] = G
            elif l == L - 1:
                self.kd[l][slot] = (G * eta).ravel()
            else:
                self.kd[l][slot] = (A[l].T @ G).ravel() * eta

    def combination(self, w, out):
        """``out = sum_j w_j K_j`` over the first ``len(w)`` slots, as a dense flat vector (n,)."""
        lay = self.lay
        k = w.size
        wr = self._weights(w)
        for l in range(lay.L):
            o = out[lay.offs[l]:lay.offs[l + 1]]
            if lay.factored[l]:
                # only the slots with a nonzero weight (DOP853: 8 of 13), so the
                # product has rank 8 C rather than 13 C
                keep = wr != 0.0
                Us = self.ut[l][:k * lay.C][keep] * wr[keep][:, None]
                o[:] = (Us.T @ self.vs[l][:k * lay.C][keep]).ravel()
            else:
                o[:] = w @ self.kd[l][:k]
        return out

    def _gathered(self, l, w):
        """Slots of layer l with a nonzero weight: ``(U^T scaled by w)`` (N_l x q), V (q x N_{l-1})."""
        C = self.lay.C
        k = w.size
        wr = self._weights(w)
        keep = wr != 0.0
        Ust = np.ascontiguousarray((self.ut[l][:k * C][keep] * wr[keep][:, None]).T)
        return Ust, np.ascontiguousarray(self.vs[l][:k * C][keep])

    def step_end(self, y, y_new, wb, we, we3, c3, rtol, atol):
        """``y_new = y + sum_j wb_j K_j`` and the scaled error sums of two estimates.

        Returns ``(e5, e3)``, the sums over components of ``(d / sc)^2`` for
        ``d = sum_j we_j K_j`` and ``d = sum_j we3_j K_j + c3 sum_j wb_j K_j`` (0 if
        ``we3`` is None), with ``sc = atol + rtol max(|y|, |y_new|)``.  One pass over
        the state: a factored layer is processed in blocks of ``block_rows`` rows whose
        products stay in cache, instead of writing dense vectors and reading them back.
        (DOP853's third-order weights are ``b`` plus three nonzeros, so passing the
        difference as ``we3`` with ``c3 = 1/h`` makes its product rank 3C instead of 8C.)
        """
        lay = self.lay
        e5 = e3 = 0.0
        for l in range(lay.L):
            a, b = lay.offs[l], lay.offs[l + 1]
            yl, ynl = y[a:b], y_new[a:b]
            r, c = int(lay.rows[l]), int(lay.cols[l])
            if lay.factored[l]:
                gb, ge = self._gathered(l, wb), self._gathered(l, we)
                g3 = self._gathered(l, we3) if we3 is not None else None
                rb = block_rows(c)
                for i0 in range(0, r, rb):
                    i1 = min(r, i0 + rb)
                    sl = slice(i0 * c, i1 * c)
                    pb = (_prod(gb, i0, i1)).ravel()
                    pe = (_prod(ge, i0, i1)).ravel()
                    p3 = (_prod(g3, i0, i1)).ravel() if g3 is not None else None
                    e5, e3 = _finish_block(yl[sl], ynl[sl], pb, pe, p3, c3, rtol, atol, e5, e3)
            else:
                k = self.kd[l]
                pb = wb @ k[:wb.size]
                pe = we @ k[:we.size]
                p3 = we3 @ k[:we3.size] if we3 is not None else None
                e5, e3 = _finish_block(yl, ynl, pb, pe, p3, c3, rtol, atol, e5, e3)
        return e5, e3

    def stiffness_sums(self, s, wd):
        """``(num, dd, ref)`` of ``_explicit.stiffness_estimate`` for the accepted step.

        ``num = |K_s - K_{s-1}|^2``, ``dd = |sum_{j<s} wd_j K_j|^2``, ``ref = |K_0|^2``,
        each summed layer by layer.  A factored layer's ``|sum_j U_j^T V_j|^2`` is
        ``sum_pq w_p w_q (U U^T)_pq (V V^T)_pq`` over the stacked factor rows: Gram
        matrices of at most sC rows, never the dense N_l x N_{l-1} difference; its
        ``dd`` is floored at its rounding (:func:`_gram_rounding`).
        """
        lay = self.lay
        C = lay.C
        wr = self._weights(wd)
        sg = self._weights(np.array([-1.0, 1.0]))
        num = dd = ref = 0.0
        for l in range(lay.L):
            if lay.factored[l]:
                U, V = self.ut[l], self.vs[l]
                GU, GV = _gram(U[:s * C]), _gram(V[:s * C])
                ref += float(np.sum(GU[:C, :C] * GV[:C, :C]))
                dd += max(float(np.sum(np.outer(wr, wr) * GU * GV)),
                          _gram_rounding(GU, GV, wd, s, C, int(lay.rows[l] + lay.cols[l])))
                GU, GV = _gram(U[(s - 1) * C:(s + 1) * C]), _gram(V[(s - 1) * C:(s + 1) * C])
                num += float(np.sum(np.outer(sg, sg) * GU * GV))
            else:
                k = self.kd[l]
                ref += sumsq(k[0])
                d = k[s] - k[s - 1]
                num += sumsq(d)
                d = wd @ k[:s]
                dd += sumsq(d)
        return num, dd, ref

    def fsal(self, s):
        """Slot ``s`` (the derivative at the accepted state) becomes slot 0."""
        C = self.lay.C
        for l in range(self.lay.L):
            if self.lay.factored[l]:
                self.ut[l][:C] = self.ut[l][s * C:(s + 1) * C]
                self.vs[l][:C] = self.vs[l][s * C:(s + 1) * C]
            else:
                self.kd[l][0] = self.kd[l][s]


#: Entries of a factored layer handled per block by the step end (3 blocks of this
#: many doubles, 768 kB, stay in a core's cache).
BLOCK_ENTRIES = 131072


def block_rows(cols):
    """Rows of a layer with ``cols`` columns processed per block by the step end."""
    return max(1, BLOCK_ENTRIES // cols)


def _gram(X):
    """``X X^T``."""
    return X @ X.T


def _gram_rounding(GU, GV, wd, s, C, width):
    """The rounding of the Gram form of ``dd = |sum_j wd_j K_j|^2`` of a factored layer
    (``GU``, ``GV``: slots 0..s-1; ``width = N_l + N_{l-1}``): ``(width + sC) eps (sum_j
    |wd_j| |U_j| |V_j|)^2``, with ``|U_j|^2``, ``|V_j|^2`` the traces of the slots'
    diagonal blocks.

    dd is floored there.  Its terms cancel where the stages differ by little or where
    each ``A_l^T G_l`` is far smaller than ``|A_l| |G_l|`` (a residual the network cannot
    fit, behind a bottleneck narrower than the task's rank), and a dd rounded towards
    zero turned the estimate into noise that capped the step (measured: the SSPRK104
    tableau on a 100-400-3-4 network took 5,688 steps where dense stages take 1,303,
    and 1,362 with the floor).  Floored, dd is at least half its exact value, so the
    estimate is at most sqrt(2) too large; the numerator's rounding, of the same
    relative size, can then raise it to about ``2 / (h sum_j |wd_j|)`` at most, a cap
    of at least 3.3 h for these tableaux: harmless.
    """
    sd = 0.0
    for j in range(s):
        a = j * C
        du = float(np.sum(np.diagonal(GU)[a:a + C]))
        dv = float(np.sum(np.diagonal(GV)[a:a + C]))
        sd += abs(wd[j]) * np.sqrt(du * dv)
    return (width + s * C) * _EPS * (sd * sd)


_EPS = float(np.finfo(np.float64).eps)


def _prod(g, i0, i1):
    Ust, V = g
    if V.shape[0] == 0:
        return np.zeros((i1 - i0, V.shape[1]))
    return Ust[i0:i1] @ V


def _finish_block(y, y_new, pb, pe, p3, c3, rtol, atol, e5, e3):
    """Write ``y_new = y + pb`` for one block and add its sums of scaled error squares."""
    np.add(y, pb, out=y_new)
    sc = atol + rtol * np.maximum(np.abs(y), np.abs(y_new))
    q = pe / sc
    e5 += sumsq(q)
    if p3 is not None:
        q = (p3 + c3 * pb) / sc
        e3 += sumsq(q)
    return e5, e3


def lowrank_solve(problem, y0, t_eval, tab, options, observe):
    """Integrate linear-network gradient flow with tableau ``tab``, stages factored (numpy).

    Same contract and the same step control as ``_explicit.erk_solve`` (see
    ``_solvers`` for the solver signature).

    Returns
    -------
    RawResult
    """
    rtol, atol = options.rtol, options.atol
    s = tab.n_stages
    n = y0.size
    st = _Stages(problem, Layout(problem, s + 1))
    e3_rest = third_order_rest(tab)
    y = np.array(y0, dtype=np.float64, copy=True)

    def trial(y, y_new, h_try):
        for i in range(1, s + 1):
            st.stage(y, h_try * (tab.b if i == s else tab.A[i, :i]), i)
        e5, e3 = st.step_end(y, y_new, h_try * tab.b, tab.e, e3_rest, 1.0 / h_try, rtol, atol)
        return _explicit.error_norm(e5, e3, tab.e3 is not None, h_try, n)

    def first():
        st.stage(y, np.zeros(0), 0)
        return st.combination(np.ones(1), np.empty(n))

    wd = tab.stiffness_weights
    wsum = float(np.abs(wd).sum())

    def stiffness(h_try, y_new):
        return _explicit.stiffness_estimate(*st.stiffness_sums(s, wd), wsum, h_try,
                                            sumsq(y_new))

    buf = np.empty(n)

    def interpolate(theta, y, y_new, h):
        # y + sum_j (h B_j(theta)) K_j, as the step forms y_new
        st.combination(h * tab.dense_weights(theta), buf)
        np.add(buf, y, out=buf)
        return buf

    with np.errstate(all="ignore"):  # overflow is detected and reported, not warned
        early, h, nfev = _explicit._start(first, lambda v, out: _rhs.rhs(v, problem, out), y,
                                          t_eval, tab, options, observe)
        if early is not None:
            return early
        return _explicit.adaptive_run(trial, lambda: st.fsal(s), y, h, nfev, t_eval, tab,
                                      options, observe, stiffness, interpolate)


def lowrank_solve_numba(problem, y0, t_eval, tab, options, observe):
    """The compiled twin of :func:`lowrank_solve`: the runner ``methods.compiled.erk`` on
    the factored stages of ``models/_linear_ops.FactoredStages``."""
    from .methods import compiled
    from .models import _linear_ops as lk  # compiled (or loaded) on first use only
    res = compiled.erk(lk.FactoredStages(problem, tab), y0, t_eval, tab, options, observe,
                       dense=options.dense, stiff_steps=options.stiff_steps)
    return _explicit.raw_result(res, options, tab.stability_boundary)


def third_order_rest(tab):
    """``e3 - b`` (s + 1,): the second error estimate minus the step's own weights, or None.

    ``sum_j e3_j K_j = sum_j b_j K_j + sum_j (e3 - b)_j K_j``, and the first sum is
    the step itself, already formed; for DOP853 the rest has 3 nonzero weights.
    """
    if tab.e3 is None:
        return None
    return np.ascontiguousarray(tab.e3 - np.append(tab.b, 0.0))
