"""The linear network's stage stores on numpy: its stages kept as layer factors.

For a linear network every stage derivative is low rank in each layer:

    K_l = eta_l A_l^T G_l,    A_l = W_L ... W_{l+1}  (C x N_l),   G_l = E W_1^T ... W_{l-1}^T  (C x N_{l-1}),

so an s-stage step moves layer l by a matrix of rank at most s C.  The stores here keep a
stage as its factors and never form stage states densely; the methods that use them
(``methods/erk.py``, ``methods/ssp.py``) know nothing of networks.

:class:`FactoredStages` (Butcher stages, wide networks).  A stage is stored as its
factors ``(eta_l A_l, G_l)`` (``C (N_l + N_{l-1})`` numbers instead of ``N_l N_{l-1}``);
the right-hand side only multiplies the stage weights by C-row blocks,

    A W_l^st = A (W_l + sum_j w_j U_j V_j) = A W_l + ((A U) diag(w)) V,

one product with the stored ``W_l`` plus O(s C^2 N) for the correction, and the dense
state and the error estimate are formed once per step with one rank-``s C`` product per
layer.  Layers not worth factoring -- the top layer (``N_L = C``), and any layer with
``min(N_l, N_{l-1}) <= (s + 1) C`` -- keep dense stages.  (3.5-3.9x faster than dense
stages on the 512-1024-1024-10 network of ``benchmarks/bench_flow.py``.)

:class:`FactoredSlots` (SSPRK104's two-register form).  A stage derivative is
``K_i = eta_i A_i^T G_i`` per layer (the partial products of ``_rhs.chains``): the update
``q1 += (h/6) K`` is one rank-C product added into ``q1`` while the block stays in cache,
and the dense K is never stored.  The error estimate ``y_new - y - h S`` is one product
of rank 4C per layer, formed block by block inside the error norm; the stiffness sums
come from C x C Gram matrices of the factors where they are reliable.

``_lowrank_kernels`` and ``_lowstorage_kernels`` are the compiled twins (the same
operations in the same order, agreeing to the tolerance, not bit for bit).
"""
from __future__ import annotations

import numpy as np
from scipy.linalg.blas import dgemm

from .. import _rhs
from ..methods.base import sumsq
from ..methods.tableaux import SSPRK104, SSPRK104_LOW_STORAGE, cubic_hermite

__all__ = ["Layout", "FactoredStages", "FactoredSlots", "worth_factoring", "factored_is_faster",
           "chain_layout", "numba_rhs_args", "hermite_state", "BLOCK_ENTRIES", "LOWSTORAGE_MAX_BYTES",
           "GRAM_MIN_REL", "ERROR_SLOTS", "ERROR_WEIGHTS"]


def numba_rhs_args(problem):
    """The data tuple of the compiled linear right-hand side ``_kernels.rhs_flat`` (data,
    layout and scratch) for ``problem`` (``models/_linear_kernels.rhs``)."""
    shapes = problem.shapes
    C, D = problem.Syx.shape
    rows, cols, offs, aoff, goff = chain_layout(problem)
    return (np.ascontiguousarray(problem.Sxx), np.ascontiguousarray(problem.Syx),
            np.ascontiguousarray(problem.eta_l, dtype=np.float64), rows, cols, offs,
            np.empty(aoff[-1]), aoff, np.empty(goff[-1]), goff,
            np.empty((D, C)), np.empty((D, C)), np.empty(2 * C * max(max(sh) for sh in shapes)))


def chain_layout(problem):
    """``(rows, cols, offs, aoff, goff)`` (int64): layer shapes, their offsets in the flat
    state, and the offsets of the partial products ``A_i^T`` (rows[i] x C) and ``G_i``
    (C x cols[i]) in flat buffers, as ``_kernels.chains`` lays them out."""
    C = problem.Syx.shape[0]
    rows = np.array([r for r, _ in problem.shapes], dtype=np.int64)
    cols = np.array([c for _, c in problem.shapes], dtype=np.int64)
    offs = np.ascontiguousarray(problem.offsets, dtype=np.int64)
    aoff = np.concatenate(([0], np.cumsum(C * rows))).astype(np.int64)
    goff = np.concatenate(([0], np.cumsum(C * cols))).astype(np.int64)
    return rows, cols, offs, aoff, goff


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


class FactoredStages:
    """The stage store of ``methods.erk.ExplicitRK`` with a layer's stages as rank-C
    factors (module docstring); the interface is that module's."""

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
        """``(num, dd, ref)`` of ``methods.base.stiffness_estimate`` for the accepted step.

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


#: States larger than this (bytes) run SSPRK104 as factored Butcher stages
#: (``_lowrank``) where the layers are worth factoring.  The low-storage form reads and
#: writes the whole state at every stage, which is cheap while the state stays in a
#: core's cache and costs more than the factored stages' corrections once it does not
#: (``benchmarks/bench_flow.py``, same steps both ways: the 1.3 MB medium state 418
#: against 545 us per evaluation for the low-storage form, the 12.7 MB large state
#: 3.9 against 5.2 ms for the factored stages; this machine has 2 MB of L2 per core).
LOWSTORAGE_MAX_BYTES = 4 << 20

#: Stages of the third-order companion (nonzero entries of ``bhat``) and their weights.
ERROR_SLOTS = SSPRK104_LOW_STORAGE.error_slots
ERROR_WEIGHTS = SSPRK104_LOW_STORAGE.error_weights
#: Stage slots: K_0 .. K_9 of the step, slot 10 for f(y_new) (the next step's K_0).
N_SLOTS = SSPRK104_LOW_STORAGE.stages + 1
#: The stiffness sums of a layer come from Gram matrices of its factors only where each
#: is at least this fraction of the size of its terms (``eta^2 |A|^2 |G|^2``): their
#: rounding, about ``(N_l + N_{l-1} + C) eps`` of that size, then stays below 5e-4 of
#: them for layers up to 2000 wide -- plenty for a step-size cap with safety factor 0.9.
GRAM_MIN_REL = 1e-9


class Slots:
    """Flat storage of the stage factors, one row per slot, and the layout offsets.

    ``at[k]`` holds ``A_i^T`` (N_i x C) of every layer below the top at offsets
    ``aoff``; ``g[k]`` holds ``G_i`` (C x N_{i-1}) of every layer at ``goff``.
    """

    def __init__(self, problem, n_slots=N_SLOTS):
        self.C = problem.Syx.shape[0]
        self.rows, self.cols, self.offs, self.aoff, self.goff = chain_layout(problem)
        self.at = np.zeros((n_slots, self.aoff[-1]))
        self.g = np.zeros((n_slots, self.goff[-1]))

    def A(self, k, i):
        """``A_i^T`` of slot k, a view (N_i x C)."""
        return self.at[k, self.aoff[i]:self.aoff[i + 1]].reshape(int(self.rows[i]), self.C)

    def G(self, k, i):
        """``G_i`` of slot k, a view (C x N_{i-1})."""
        return self.g[k, self.goff[i]:self.goff[i + 1]].reshape(self.C, int(self.cols[i]))

    def fsal(self):
        """Slot 10 (``f(y_new)``) becomes slot 0 of the next step."""
        self.at[0] = self.at[10]
        self.g[0] = self.g[10]

    def stage(self, q, k, problem):
        """Store in slot k the factors of ``f(q)`` (``_rhs.chains``)."""
        At, G = _rhs.chains(q, problem)
        L = len(G)
        for i in range(L):
            if i < L - 1:
                self.A(k, i)[:] = At[i]
            self.G(k, i)[:] = G[i]


def gemm_acc(Q, w, At, G):
    """``Q += w At G`` in place (C-ordered ``Q`` r x c, ``At`` r x k, ``G`` k x c): one
    accumulating ``dgemm``, the column-major ``Q^T += w G^T At^T``, the same call as the
    compiled ``_lowstorage_kernels.gemm_acc``."""
    dgemm(w, G.T, At.T, beta=1.0, c=Q.T, overwrite_c=1)


def add_stage(q, c, st, k, problem):
    """``q += c K_k``: layer i gets ``(c eta_i) A_i^T G_i``, one accumulating rank-C
    product that reads and writes the layer once (the top layer elementwise)."""
    L = len(problem.shapes)
    for i in range(L):
        w = c * problem.eta_l[i]
        qi = q[st.offs[i]:st.offs[i + 1]]
        if i == L - 1:
            qi += w * st.G(k, i).ravel()
            continue
        gemm_acc(qi.reshape(int(st.rows[i]), int(st.cols[i])), w, st.A(k, i), st.G(k, i))


def _block_sums(y, y_new, q1, P, h, rtol, atol):
    sc = atol + rtol * np.maximum(np.abs(y), np.abs(y_new))
    d = ((y_new - y) - h * P) / sc
    v = y_new - q1
    return sumsq(d), sumsq(v)


def error_sums(y, y_new, q1, h, st, problem, rtol, atol):
    """``(e5, dd)``: ``e5 = sum ((y_new - y - h S) / sc)^2``, ``dd = |y_new - q1|^2``.

    ``S = sum_j ERROR_WEIGHTS_j K_{ERROR_SLOTS_j}`` (so ``y_new - y - h S`` is the
    step minus its third-order companion) and ``sc = atol + rtol max(|y|, |y_new|)``;
    below the top a layer's ``S`` is one product of rank 4C, formed in blocks of rows.
    """
    L = len(problem.shapes)
    e5 = dd = 0.0
    for i in range(L):
        a, b = st.offs[i], st.offs[i + 1]
        yi, yni, qi = y[a:b], y_new[a:b], q1[a:b]
        ws = [float(w * problem.eta_l[i]) for w in ERROR_WEIGHTS]
        if i == L - 1:
            P = np.zeros(b - a)
            for k, w in zip(ERROR_SLOTS, ws):
                P += w * st.G(k, i).ravel()
            s5, sd = _block_sums(yi, yni, qi, P, h, rtol, atol)
            e5, dd = e5 + s5, dd + sd
            continue
        r, cl = int(st.rows[i]), int(st.cols[i])
        U = np.hstack([st.A(k, i) * w for k, w in zip(ERROR_SLOTS, ws)])   # N_i x 4C
        V = np.vstack([st.G(k, i) for k in ERROR_SLOTS])                   # 4C x N_{i-1}
        rb = block_rows(cl)
        for i0 in range(0, r, rb):
            i1 = min(r, i0 + rb)
            sl = slice(i0 * cl, i1 * cl)
            s5, sd = _block_sums(yi[sl], yni[sl], qi[sl], (U[i0:i1] @ V).ravel(), h, rtol,
                                 atol)
            e5, dd = e5 + s5, dd + sd
    return e5, dd


def _diff_sums(x1, x2, eta):
    k1 = eta * x1
    d = k1 - eta * x2
    return sumsq(d), sumsq(k1)


def _inner(Ap, Aq, Gp, Gq):
    """``<Ap^T Gp, Aq^T Gq>_F = sum_ab (Ap^T Aq)_ab (Gp Gq^T)_ab``, from C x C products."""
    return float(np.sum((Ap.T @ Aq) * (Gp @ Gq.T)))


def _gram_sums(A1, G1, A2, G2, eta):
    """``(num, ref)`` of one layer from C x C Gram matrices, or None where cancellation
    may have spoilt them (either below ``GRAM_MIN_REL`` of the size of its terms)."""
    nA1, nG1 = sumsq(A1), sumsq(G1)
    nA2, nG2 = sumsq(A2), sumsq(G2)
    e2 = eta * eta
    k11 = _inner(A1, A1, G1, G1)
    ref = e2 * k11
    num = e2 * (k11 - 2.0 * _inner(A1, A2, G1, G2) + _inner(A2, A2, G2, G2))
    s1 = e2 * (nA1 * nG1)
    scale = e2 * (np.sqrt(nA1 * nG1) + np.sqrt(nA2 * nG2)) ** 2
    if num >= GRAM_MIN_REL * scale and ref >= GRAM_MIN_REL * s1:
        return num, ref
    return None


def stiffness_sums(st, last, prev, problem):
    """``(num, ref) = (|K_last - K_prev|^2, |K_last|^2)`` without forming the stages.

    A layer below the top uses C x C Gram matrices of the factors (``<A^T G, B^T H> =
    sum (A B^T) * (G H^T)``) where they are reliable, and multiplies the stages out
    block by block where not: when a residual the network cannot fit keeps ``G`` of
    order one while ``A^T G`` vanishes (a bottleneck narrower than the task's rank), the
    Gram form loses everything to cancellation (rounding of order ``eps |A|^2 |G|^2``)
    and the estimate would turn to noise.
    """
    L = len(problem.shapes)
    num = ref = 0.0
    for i in range(L):
        eta = problem.eta_l[i]
        if i == L - 1:
            a, b = _diff_sums(st.G(last, i).ravel(), st.G(prev, i).ravel(), eta)
            num, ref = num + a, ref + b
            continue
        cl = int(st.cols[i])
        A1, G1, A2, G2 = st.A(last, i), st.G(last, i), st.A(prev, i), st.G(prev, i)
        gram = _gram_sums(A1, G1, A2, G2, eta)
        if gram is not None:
            num, ref = num + gram[0], ref + gram[1]
            continue
        rb = block_rows(cl)
        for i0 in range(0, int(st.rows[i]), rb):
            i1 = i0 + rb
            a, b = _diff_sums((A1[i0:i1] @ G1).ravel(), (A2[i0:i1] @ G2).ravel(), eta)
            num, ref = num + a, ref + b
    return num, ref


def hermite_state(theta, y, y_new, h, st, problem, out):
    """The state at ``t + theta h`` inside the accepted step ``y -> y_new``, by the cubic
    Hermite interpolant on its ends and their derivatives (slots 0 and 10):

        y + h01 (y_new - y) + h h10 f(y) + h h11 f(y_new)    (``tableaux.cubic_hermite``),

    order 3 like the step's error estimate (the continuous extension ``SSPRK104.dense_P``
    of the tableau steppers, formed here from the factors).  Shared by the numpy and
    numba solvers.
    """
    h01, h10, h11 = cubic_hermite(theta)
    np.subtract(y_new, y, out=out)
    out *= h01
    out += y
    add_stage(out, h * h10, st, 0, problem)
    add_stage(out, h * h11, st, 10, problem)
    return out


def factored_is_faster(problem):
    """Whether SSPRK104 runs as factored Butcher stages rather than in low-storage form:
    a state over ``LOWSTORAGE_MAX_BYTES`` with layers worth factoring."""
    return (8 * problem.size > LOWSTORAGE_MAX_BYTES
            and worth_factoring(problem, SSPRK104.n_stages))




class FactoredSlots(Slots):
    """The slot store of ``methods.ssp.LowStorageRK`` on the linear ``problem`` (module
    docstring; the interface is that module's)."""

    def __init__(self, problem):
        super().__init__(problem)
        self.problem = problem

    def stage(self, q, k):
        Slots.stage(self, q, k, self.problem)

    def add(self, q, c, k):
        add_stage(q, c, self, k, self.problem)

    def error_sums(self, y, y_new, q1, h, rtol, atol):
        return error_sums(y, y_new, q1, h, self, self.problem, rtol, atol)

    def stiffness_sums(self, last, prev):
        return stiffness_sums(self, last, prev, self.problem)
