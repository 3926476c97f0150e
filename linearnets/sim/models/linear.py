"""The deep linear network on sufficient statistics (numpy/CuPy; the numba kernels beside it).

``dW_l/dt = eta_l A_l^T G_l`` with ``A_l = W_L ... W_{l+1}``, ``G_l = E W_1^T ... W_{l-1}^T``,
``E = Syx - W Sxx`` (Atanasov et al. 2022, Sec. 3), on the flat state of :func:`pack`; the
stages of a step kept as rank-C factors (:class:`FactoredStages`, :class:`FactoredSlots`).
docs/simulator.md ("The linear network") derives the options' map and the factored forms.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from itertools import accumulate

import numpy as np
from scipy.linalg import qr
from scipy.linalg.blas import dgemm, dsyrk

from ... import backend as _backend
from ..methods import compiled
from ..methods.base import sumsq
from ..methods.erk import third_order_rest
from ..methods.tableaux import SSPRK104, SSPRK104_LOW_STORAGE
from . import _linear_kernels as lk
from ._linear_kernels import TRANSPOSED_PRODUCT_MAX_BYTES
from .base import Layout, Model, inverse_rates, register_model

__all__ = ["layer_offsets", "pack", "unpack", "FlowProblem", "make_problem", "chain_products",
           "chains", "velocity", "rhs", "times_transpose", "end_to_end_flat",
           "loss_from_end_to_end", "TRANSPOSED_PRODUCT_MAX_BYTES", "chain_layout",
           "numba_rhs_args", "StageLayout", "worth_factoring", "factored_is_faster",
           "FactoredStages", "FactoredSlots", "gemm_acc", "erk_ops", "FactoredStageOps",
           "LowStorageStages", "RosenbrockOps", "expressible", "linear_ntk", "LinearNet",
           "LinearNetNumba", "BLOCK_ENTRIES", "LOWSTORAGE_MAX_BYTES", "GRAM_MIN_REL",
           "ERROR_SLOTS", "ERROR_WEIGHTS"]

#: ``Sxx`` closer than this to the identity (max entry) counts as whitened.
WHITE_TOL = 16 * np.finfo(np.float64).eps
#: Entries of a factored layer handled per block by a step end.
BLOCK_ENTRIES = 131072
#: States larger than this (bytes) run SSPRK104 as factored Butcher stages where the layers
#: are worth factoring, smaller ones in low-storage form.
LOWSTORAGE_MAX_BYTES = 4 << 20
#: A layer's stiffness sums come from Gram matrices of its factors only where each is at
#: least this fraction of the size of its terms ``eta^2 |A|^2 |G|^2``.
GRAM_MIN_REL = 1e-9
#: Stages of SSPRK104's third-order companion (nonzero entries of ``bhat``), their weights,
#: and the slots: K_0 .. K_9 of the step, slot 10 for f(y_new).
ERROR_SLOTS = SSPRK104_LOW_STORAGE.error_slots
ERROR_WEIGHTS = SSPRK104_LOW_STORAGE.error_weights
_EPS = float(np.finfo(np.float64).eps)


# --- state layout, problem, right-hand side ------------------------------------------------
def layer_offsets(shapes):
    """Start offsets of each layer ``(N_l, N_{l-1})`` in the flat state, plus its size:
    int64 (L + 1,), layer ``i`` in ``y[offsets[i]:offsets[i + 1]]``."""
    return _cumulative([int(r) * int(c) for r, c in shapes])


def _cumulative(sizes):
    # [0, s_0, s_0 + s_1, ...] as int64 (a Python sum: a call's set-up makes many of these)
    return np.array(list(accumulate(sizes, initial=0)), dtype=np.int64)


def pack(weights):
    """Concatenate ``[W_1, ..., W_L]`` row-major into a new flat float64 vector (n,)."""
    return np.ascontiguousarray(
        np.concatenate([np.asarray(w, dtype=np.float64).ravel() for w in weights]))


def unpack(y, shapes, offsets=None):
    """Views ``[W_1, ..., W_L]`` into the flat state ``y`` (n,) (writes go through)."""
    offs = layer_offsets(shapes) if offsets is None else offsets
    return [y[offs[i]:offs[i + 1]].reshape(shapes[i]) for i in range(len(shapes))]


def times_transpose(G, W):
    """``G W^T`` (C x N_l) for ``G`` (C x N_{l-1}), ``W`` (N_l x N_{l-1}), computed as
    ``(W G^T)^T`` while ``W`` has at most ``TRANSPOSED_PRODUCT_MAX_BYTES`` (as the kernels)."""
    if 8 * W.size <= TRANSPOSED_PRODUCT_MAX_BYTES:
        return (W @ G.T).T
    return G @ W.T


@dataclass(frozen=True, eq=False)
class FlowProblem:
    """Everything a solver needs to integrate gradient flow of a linear network.

    Attributes
    ----------
    shapes : tuple of (int, int)
        Layer shapes ``(N_l, N_{l-1})``; ``shapes[0][1] = D``, ``shapes[-1][0] = C``.
    Sxx : ndarray, shape (D, D)
        Input second moment ``X^T X / P``.
    Syx : ndarray, shape (C, D)
        Input-output cross moment ``Y^T X / P``.
    eta_l : ndarray, shape (L,)
        Learning rate of each layer.
    X, Y : ndarray (P, D), ndarray (P, C)
        The samples, for the loss at output times only (:func:`loss_from_end_to_end`).
    offsets : ndarray of int64, shape (L + 1,)
        :func:`layer_offsets` (derived).
    white : bool
        Whether ``Sxx`` is the identity to within ``WHITE_TOL`` (derived).
    """

    shapes: tuple
    Sxx: np.ndarray
    Syx: np.ndarray
    eta_l: np.ndarray
    X: np.ndarray
    Y: np.ndarray
    offsets: np.ndarray = field(init=False)
    white: bool = field(init=False)
    _summary: list = field(init=False, repr=False)
    _layouts: dict = field(init=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "_summary", [])
        object.__setattr__(self, "_layouts", {})
        object.__setattr__(self, "offsets", layer_offsets(self.shapes))
        object.__setattr__(self, "white", _is_white(self.Sxx))

    def refill(self, X, Y):
        """This problem on new data ``X``, ``Y`` of the same shapes, in place: the statistics
        written into ``Sxx`` and ``Syx`` (so that a problem :meth:`retarget` made shares the
        new ``Sxx``), ``white`` and the loss summary formed again.  For a private problem
        only (the quick run's cache, ``sim.flow``)."""
        Sxx, Syx = statistics(X, Y)
        self.Sxx[...], self.Syx[...] = Sxx, Syx
        object.__setattr__(self, "X", X)
        object.__setattr__(self, "Y", Y)
        object.__setattr__(self, "_summary", [])
        object.__setattr__(self, "white", _is_white(Sxx))
        return self

    def retarget(self, Syx, eta_l):
        """This problem with another ``Syx`` (C, D) and ``eta_l`` (L,); what is derived from
        the shapes and ``Sxx`` is kept, not derived again."""
        new = copy.copy(self)
        object.__setattr__(new, "Syx", Syx)
        object.__setattr__(new, "eta_l", eta_l)
        object.__setattr__(new, "_summary", [])
        return new

    def layout_of(self, key, build):
        """``build(self)``, formed once per problem and ``key`` (the kernels' index arrays,
        read only)."""
        lay = self._layouts.get(key)
        if lay is None:
            lay = self._layouts[key] = build(self)
        return lay

    @property
    def size(self) -> int:
        """Length n of the flat state."""
        return int(self.offsets[-1])

    @property
    def max_width(self) -> int:
        return max(max(s) for s in self.shapes)

    @property
    def P(self) -> int:
        return int(self.X.shape[0])

    def loss_summary(self):
        """``(R, Z, res0)`` of ``[X | Y] = Q [[R, Z], [0, R_yy]]``, ``res0 = |R_yy|^2``, from
        one QR of the samples without forming Q (``2 P (D + C)^2`` FLOPs), on first use."""
        if not self._summary:
            P, D = self.X.shape
            Rxy = qr(np.hstack((self.X, self.Y)), mode="raw", overwrite_a=True,
                     check_finite=False)[1]
            K = min(P, D)
            self._summary[:] = (np.ascontiguousarray(Rxy[:K, :D]),
                                np.ascontiguousarray(Rxy[:K, D:]),
                                float(np.sum(Rxy[K:, D:] ** 2)))
        return tuple(self._summary)

    def rhs(self, y, out=None):
        """Reference right-hand side, see :func:`rhs`."""
        return rhs(y, self, out)


def _is_white(Sxx):
    """Whether ``Sxx`` is the identity to within ``WHITE_TOL``."""
    diag = Sxx.flat[::Sxx.shape[0] + 1]
    return bool(np.abs(diag - 1.0).max() <= WHITE_TOL
                and np.abs(Sxx - np.diag(diag)).max() <= WHITE_TOL)


def statistics(X, Y):
    """``(Sxx, Syx)`` of data ``X`` (P, D), ``Y`` (P, C), both float64 2-D: ``Sxx = X^T X / P``
    (exactly symmetric: syrk's upper triangle, mirrored) and ``Syx = Y^T X / P``."""
    P = X.shape[0]
    upper = dsyrk(1.0 / P, X.T)                  # the lower triangle is zero
    Sxx = np.add(upper, upper.T, order="C")
    Sxx.flat[::Sxx.shape[0] + 1] *= 0.5          # the diagonal counted twice: halved exactly
    return Sxx, np.ascontiguousarray(dgemm(1.0 / P, Y.T, X.T, trans_b=1))


def make_problem(shapes, X, Y, eta=1.0, lr_scale=None):
    """A :class:`FlowProblem` from data ``X`` (P, D), ``Y`` (P, C), both float64 2-D, with
    their :func:`statistics`."""
    Sxx, Syx = statistics(X, Y)
    scale = np.ones(len(shapes)) if lr_scale is None else np.asarray(lr_scale, dtype=np.float64)
    eta_l = np.ascontiguousarray(eta * scale, dtype=np.float64)
    return FlowProblem(tuple((int(r), int(c)) for r, c in shapes), Sxx, Syx, eta_l, X, Y)


def chain_products(Ws, Sxx, Syx, white=False):
    """``(At, G)``, the partial products of the gradient at layers ``Ws`` (module docstring):
    ``At[i] = (W_L ... W_{i+2})^T`` (N_{i+1} x C; ``At[L-1]`` is None) and ``G[i] = E W_1^T
    ... W_i^T`` (C x N_i), built in the order of ``_linear_kernels.chains`` (with ``white``
    the product with ``Sxx = I`` skipped).  Any array namespace."""
    L = len(Ws)
    At = [None] * L
    WT = None                       # (W_L ... W_{i+1})^T, down to W^T
    for i in range(L - 1, -1, -1):
        WT = Ws[i].T if WT is None else Ws[i].T @ WT
        if i > 0:
            At[i - 1] = WT
    G = [Syx - (WT.T if white else (Sxx @ WT).T)]
    for i in range(1, L):
        G.append(times_transpose(G[-1], Ws[i - 1]))
    return At, G


def chains(y, problem):
    """:func:`chain_products` at the flat state ``y`` (n,) of ``problem``."""
    return chain_products(unpack(y, problem.shapes, problem.offsets), problem.Sxx, problem.Syx,
                          problem.white)


def velocity(At, G, eta_l, dWs, xp=np):
    """Write ``dW_i = eta_i At[i] G[i]`` (``eta_i G[L-1]`` at the top) into the views ``dWs``."""
    L = len(dWs)
    for i in range(L):
        if i == L - 1:
            xp.multiply(G[i], eta_l[i], out=dWs[i])
        else:
            xp.matmul(At[i], G[i], out=dWs[i])
            if eta_l[i] != 1.0:
                dWs[i] *= eta_l[i]


def rhs(y, problem, out=None):
    """Gradient-flow velocity ``dy/dt`` (n,) at the flat state ``y`` (n,) of ``problem``
    (module docstring), written into ``out`` (n,) if given."""
    if out is None:
        out = np.empty_like(y)
    At, G = chains(y, problem)
    velocity(At, G, problem.eta_l, unpack(out, problem.shapes, problem.offsets))
    return out


def end_to_end_flat(y, shapes, offsets=None):
    """End-to-end map ``W_L ... W_1`` (C, D) of the flat state ``y``, multiplied from the top."""
    Ws = unpack(y, shapes, offsets)
    W = Ws[-1]
    for w in Ws[-2::-1]:
        W = W @ w
    return np.array(W, dtype=np.float64, copy=True)


def loss_from_end_to_end(W, problem):
    """Training loss ``(1/2P) |Y - X W^T|^2`` for end-to-end maps ``W`` (..., C, D): from the
    residual for a few maps, else from the thin-QR summary (``O(K D C)`` a map)."""
    W = np.asarray(W)
    C, D = W.shape[-2:]
    maps = math.prod(W.shape[:-2])
    if not problem._summary and maps * D * C < (D + C) ** 2:
        X, Y = problem.X, problem.Y
        R = Y[:, None, :] - (X @ W.reshape(maps * C, D).T).reshape(X.shape[0], maps, C)
        R *= R
        return (0.5 * R.sum(axis=(0, 2)) / X.shape[0]).reshape(W.shape[:-2])[()]
    R, Z, res0 = problem.loss_summary()
    M = Z - np.einsum("kd,...cd->...kc", R, W)
    return 0.5 * (res0 + np.sum(M * M, axis=(-2, -1))) / problem.P


def chain_layout(problem):
    """``(rows, cols, offs, aoff, goff)`` (int64): layer shapes, their offsets in the flat
    state, and those of ``A_i^T`` and ``G_i`` in the buffers of ``_linear_kernels.chains``
    (once per problem)."""
    return problem.layout_of("chains", _chain_layout)


def _chain_layout(problem):
    C = problem.Syx.shape[0]
    rows, cols = [r for r, _ in problem.shapes], [c for _, c in problem.shapes]
    return (np.array(rows, dtype=np.int64), np.array(cols, dtype=np.int64),
            np.ascontiguousarray(problem.offsets, dtype=np.int64),
            _cumulative([C * r for r in rows]), _cumulative([C * c for c in cols]))


def numba_rhs_args(problem):
    """The data tuple of ``_linear_kernels.rhs``, ``(Sxx, Syx, eta_l, lay, abuf, gbuf,
    scratch)``: the data, the :func:`chain_layout`, the products' buffers and scratch."""
    C, D = problem.Syx.shape
    lay = chain_layout(problem)
    aoff, goff = lay[3:]
    return (np.ascontiguousarray(problem.Sxx), np.ascontiguousarray(problem.Syx),
            np.ascontiguousarray(problem.eta_l, dtype=np.float64), lay, np.empty(aoff[-1]),
            np.empty(goff[-1]), (np.empty((D, C)), np.empty((D, C)),
                                 np.empty(2 * C * problem.max_width)))


# --- factored Butcher stages (numpy) --------------------------------------------------------
class StageLayout:
    """The factored/dense choice of every layer and the offsets of the stage storage
    (``ut``, ``vs``, ``kd`` blocks) for ``n_slots`` slots (docs/simulator.md)."""

    def __init__(self, problem, n_slots):
        shapes = problem.shapes
        L, C = len(shapes), problem.Syx.shape[0]
        self.L, self.C, self.S1 = L, C, n_slots
        self.rows, self.cols, self.offs, self.toff, self.goff = chain_layout(problem)
        fac = [l < L - 1 and min(r, c) > n_slots * C for l, (r, c) in enumerate(shapes)]
        self.factored = np.array(fac, dtype=np.int64)
        cum = _cumulative
        self.utoff = cum([n_slots * C * r if f else 0 for f, (r, _) in zip(fac, shapes)])
        self.vsoff = cum([n_slots * C * c if f else 0 for f, (_, c) in zip(fac, shapes)])
        self.kdoff = cum([0 if f else n_slots * r * c for f, (r, c) in zip(fac, shapes)])


def stage_layout(problem, n_slots):
    """The :class:`StageLayout` of ``problem`` for ``n_slots`` slots, formed once."""
    return problem.layout_of(("stages", n_slots), lambda p: StageLayout(p, n_slots))


def worth_factoring(problem, n_stages):
    """Whether any layer's stages are stored in factored form (:class:`StageLayout`)."""
    return bool(stage_layout(problem, n_stages + 1).factored.any())


def factored_is_faster(problem):
    """Whether SSPRK104 runs as factored Butcher stages rather than in low-storage form: a
    state over ``LOWSTORAGE_MAX_BYTES`` with layers worth factoring."""
    return (8 * problem.size > LOWSTORAGE_MAX_BYTES
            and worth_factoring(problem, SSPRK104.n_stages))


class FactoredStages:
    """The stage store of ``methods.erk.ExplicitRK`` with a layer's stages as rank-C factors
    (module docstring), on the :class:`StageLayout` ``lay``; the interface is that module's."""

    K = None        # no stage vectors

    def __init__(self, problem, lay):
        self.p, self.lay = problem, lay
        C, S1 = lay.C, lay.S1
        self.ut = [np.empty((S1 * C, r)) if f else None for f, r in zip(lay.factored, lay.rows)]
        self.vs = [np.empty((S1 * C, c)) if f else None for f, c in zip(lay.factored, lay.cols)]
        self.kd = [None if f else np.empty((S1, r * c))
                   for f, r, c in zip(lay.factored, lay.rows, lay.cols)]

    def stage(self, y, w, slot):
        """Store in ``slot`` the factors of ``f(y + sum_{j<k} w_j K_j)``, ``k = len(w)``."""
        lay, p = self.lay, self.p
        L, C = lay.L, lay.C
        k = w.size
        Ws = unpack(y, p.shapes, p.offsets)
        wr = np.repeat(w, C)          # one weight per row of a stacked factor block
        Wst = [Ws[l] if lay.factored[l] or not k else
               Ws[l] + (w @ self.kd[l][:k]).reshape(Ws[l].shape) for l in range(L)]

        def apply(l, X, right):       # X W_l^st, or X W_l^st^T
            out = times_transpose(X, Wst[l]) if right else X @ Wst[l]
            if k and lay.factored[l]:
                U, V = self.ut[l][:k * C], self.vs[l][:k * C]
                M = X @ (V if right else U).T
                M *= wr[None, :]
                out += M @ (U if right else V)
            return out

        A = [None] * L
        W = Wst[L - 1]                  # A_{L-2} = W_{L-1}^st, A_{l-1} = A_l W_l^st, down to W
        for l in range(L - 2, -1, -1):
            A[l] = W
            W = apply(l, W, False)
        G = p.Syx - (W if p.white else W @ p.Sxx)
        for l in range(L):
            if l > 0:
                G = apply(l - 1, G, True)
            eta = p.eta_l[l]
            if lay.factored[l]:
                self.ut[l][slot * C:(slot + 1) * C] = A[l] * eta
                self.vs[l][slot * C:(slot + 1) * C] = G
            elif l == L - 1:
                self.kd[l][slot] = (G * eta).ravel()
            else:
                self.kd[l][slot] = (A[l].T @ G).ravel() * eta

    def _gathered(self, l, w):
        """Layer l's slots with a nonzero weight: ``U^T`` scaled by w (N_l x q), V (q x N_{l-1})."""
        C = self.lay.C
        k = w.size
        wr = np.repeat(w, C)
        keep = wr != 0.0
        Ust = np.ascontiguousarray((self.ut[l][:k * C][keep] * wr[keep][:, None]).T)
        return Ust, np.ascontiguousarray(self.vs[l][:k * C][keep])

    def combination(self, w, out):
        """``out = sum_j w_j K_j`` over the first ``len(w)`` slots, a dense flat vector (n,)."""
        lay = self.lay
        for l in range(lay.L):
            o = out[lay.offs[l]:lay.offs[l + 1]]
            if lay.factored[l]:
                o[:] = _prod(self._gathered(l, w), 0, int(lay.rows[l])).ravel()
            else:
                o[:] = w @ self.kd[l][:w.size]
        return out

    def step_end(self, y, y_new, wb, we, we3, c3, rtol, atol):
        """``y_new = y + sum_j wb_j K_j`` and ``(e5, e3)``, the sums of ``(d / sc)^2`` for
        ``d = we K`` and ``d = we3 K + c3 wb K`` (0 if ``we3`` is None), in one pass."""
        lay = self.lay
        e5 = e3 = 0.0
        for l in range(lay.L):
            a, b = lay.offs[l], lay.offs[l + 1]
            yl, ynl = y[a:b], y_new[a:b]
            r, c = int(lay.rows[l]), int(lay.cols[l])
            if lay.factored[l]:
                gb, ge = self._gathered(l, wb), self._gathered(l, we)
                g3 = self._gathered(l, we3) if we3 is not None else None
                rb = max(1, BLOCK_ENTRIES // c)
                for i0 in range(0, r, rb):
                    i1 = min(r, i0 + rb)
                    sl = slice(i0 * c, i1 * c)
                    p3 = _prod(g3, i0, i1).ravel() if g3 is not None else None
                    e5, e3 = _finish_block(yl[sl], ynl[sl], _prod(gb, i0, i1).ravel(),
                                           _prod(ge, i0, i1).ravel(), p3, c3, rtol, atol, e5, e3)
            else:
                k = self.kd[l]
                p3 = we3 @ k[:we3.size] if we3 is not None else None
                e5, e3 = _finish_block(yl, ynl, wb @ k[:wb.size], we @ k[:we.size], p3, c3, rtol,
                                       atol, e5, e3)
        return e5, e3

    def stiffness_sums(self, s, wd):
        """``(num, dd, ref) = (|K_s - K_{s-1}|^2, |sum_{j<s} wd_j K_j|^2, |K_0|^2)``, a
        factored layer's from Gram matrices, ``dd`` floored at :func:`_gram_rounding`."""
        lay = self.lay
        C = lay.C
        wr, sg = np.repeat(wd, C), np.repeat([-1.0, 1.0], C)
        num = dd = ref = 0.0
        for l in range(lay.L):
            if lay.factored[l]:
                U, V = self.ut[l], self.vs[l]
                GU, GV = U[:s * C] @ U[:s * C].T, V[:s * C] @ V[:s * C].T
                ref += float(np.sum(GU[:C, :C] * GV[:C, :C]))
                dd += max(float(np.sum(np.outer(wr, wr) * GU * GV)),
                          _gram_rounding(GU, GV, wd, s, C, int(lay.rows[l] + lay.cols[l])))
                Ul, Vl = U[(s - 1) * C:(s + 1) * C], V[(s - 1) * C:(s + 1) * C]
                num += float(np.sum(np.outer(sg, sg) * (Ul @ Ul.T) * (Vl @ Vl.T)))
            else:
                k = self.kd[l]
                ref += sumsq(k[0])
                num += sumsq(k[s] - k[s - 1])
                dd += sumsq(wd @ k[:s])
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


def _gram_rounding(GU, GV, wd, s, C, width):
    """``(width + sC) eps (sum_j |wd_j| |U_j| |V_j|)^2``, the rounding of a Gram ``dd``."""
    sd = 0.0
    for j in range(s):
        b = slice(j * C, (j + 1) * C)
        sd += abs(wd[j]) * np.sqrt(np.trace(GU[b, b]) * np.trace(GV[b, b]))
    return (width + s * C) * _EPS * (sd * sd)


def _prod(g, i0, i1):
    """Rows ``i0:i1`` of ``U^T V`` for gathered factors ``g = (U^T, V)``."""
    Ust, V = g
    if V.shape[0] == 0:
        return np.zeros((i1 - i0, V.shape[1]))
    return Ust[i0:i1] @ V


def _finish_block(y, y_new, pb, pe, p3, c3, rtol, atol, e5, e3):
    """Write ``y_new = y + pb`` for one block and add its sums of scaled error squares."""
    np.add(y, pb, out=y_new)
    sc = atol + rtol * np.maximum(np.abs(y), np.abs(y_new))
    e5 += sumsq(pe / sc)
    if p3 is not None:
        e3 += sumsq((p3 + c3 * pb) / sc)
    return e5, e3


# --- SSPRK104's two registers on factored slots (numpy) -------------------------------------
def gemm_acc(Q, w, At, G):
    """``Q += w At G`` in place (C-ordered ``Q`` r x c, ``At`` r x k, ``G`` k x c)."""
    dgemm(w, G.T, At.T, beta=1.0, c=Q.T, overwrite_c=1)


def _inner(Ap, Aq, Gp, Gq):
    """``<Ap^T Gp, Aq^T Gq>_F = sum_ab (Ap^T Aq)_ab (Gp Gq^T)_ab``, from C x C products."""
    return float(np.sum((Ap.T @ Aq) * (Gp @ Gq.T)))


def _gram_sums(A1, G1, A2, G2, eta):
    """``(num, ref)`` of one layer from C x C Gram matrices, or None below ``GRAM_MIN_REL``."""
    nA1, nG1 = sumsq(A1), sumsq(G1)
    nA2, nG2 = sumsq(A2), sumsq(G2)
    e2 = eta * eta
    k11 = _inner(A1, A1, G1, G1)
    ref = e2 * k11
    num = e2 * (k11 - 2.0 * _inner(A1, A2, G1, G2) + _inner(A2, A2, G2, G2))
    scale = e2 * (np.sqrt(nA1 * nG1) + np.sqrt(nA2 * nG2)) ** 2
    if num >= GRAM_MIN_REL * scale and ref >= GRAM_MIN_REL * e2 * (nA1 * nG1):
        return num, ref
    return None


def _diff_sums(x1, x2, eta, num, ref):
    k1 = eta * x1
    return num + sumsq(k1 - eta * x2), ref + sumsq(k1)


class FactoredSlots:
    """The slot store of ``methods.ssp.LowStorageRK`` on the linear ``problem``: slot k holds
    ``A_i^T`` in ``at[k]`` and ``G_i`` in ``g[k]``, ``K_k = eta_i A_i^T G_i`` per layer."""

    K = None        # no stage vectors

    def __init__(self, problem, n_slots=SSPRK104_LOW_STORAGE.stages + 1):
        self.problem = problem
        self.C, self.L, self.eta_l = problem.Syx.shape[0], len(problem.shapes), problem.eta_l
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
        """The last slot (``f(y_new)``) becomes slot 0 of the next step."""
        self.at[0] = self.at[-1]
        self.g[0] = self.g[-1]

    def stage(self, q, k):
        """Store in slot k the factors of ``f(q)`` (:func:`chains`)."""
        At, G = chains(q, self.problem)
        for i in range(self.L):
            if i < self.L - 1:
                self.A(k, i)[:] = At[i]
            self.G(k, i)[:] = G[i]

    def add(self, q, c, k):
        """``q += c K_k``: layer i gets ``(c eta_i) A_i^T G_i`` (:func:`gemm_acc`)."""
        for i in range(self.L):
            w = c * self.eta_l[i]
            qi = q[self.offs[i]:self.offs[i + 1]]
            if i == self.L - 1:
                qi += w * self.G(k, i).ravel()
            else:
                gemm_acc(qi.reshape(int(self.rows[i]), int(self.cols[i])), w, self.A(k, i),
                         self.G(k, i))

    def error_sums(self, y, y_new, q1, h, rtol, atol):
        """``(e5, dd)``: ``e5 = sum ((y_new - y - h S) / sc)^2``, ``dd = |y_new - q1|^2``,
        ``S = sum_j ERROR_WEIGHTS_j K_{ERROR_SLOTS_j}``."""
        e5 = dd = 0.0
        for i in range(self.L):
            a = self.offs[i]
            ws = [float(w * self.eta_l[i]) for w in ERROR_WEIGHTS]
            r, cl = int(self.rows[i]), int(self.cols[i])
            if i == self.L - 1:
                rb, U = r, None
                V = sum(w * self.G(k, i) for k, w in zip(ERROR_SLOTS, ws))
            else:
                rb = max(1, BLOCK_ENTRIES // cl)
                U = np.hstack([self.A(k, i) * w for k, w in zip(ERROR_SLOTS, ws)])  # N_i x 4C
                V = np.vstack([self.G(k, i) for k in ERROR_SLOTS])                  # 4C x N_{i-1}
            for i0 in range(0, r, rb):
                sl = slice(a + i0 * cl, a + min(r, i0 + rb) * cl)
                P = (V if U is None else U[i0:i0 + rb] @ V).ravel()
                yi, yni = y[sl], y_new[sl]
                sc = atol + rtol * np.maximum(np.abs(yi), np.abs(yni))
                e5 += sumsq(((yni - yi) - h * P) / sc)
                dd += sumsq(yni - q1[sl])
        return e5, dd

    def stiffness_sums(self, last, prev):
        """``(num, ref) = (|K_last - K_prev|^2, |K_last|^2)``: Gram matrices where reliable,
        else multiplied out block by block."""
        num = ref = 0.0
        for i in range(self.L):
            eta = self.eta_l[i]
            if i == self.L - 1:
                num, ref = _diff_sums(self.G(last, i).ravel(), self.G(prev, i).ravel(), eta,
                                      num, ref)
                continue
            A1, G1, A2, G2 = self.A(last, i), self.G(last, i), self.A(prev, i), self.G(prev, i)
            gram = _gram_sums(A1, G1, A2, G2, eta)
            if gram is not None:
                g_num, g_ref = gram
                num, ref = num + g_num, ref + g_ref
                continue
            rb = max(1, BLOCK_ENTRIES // int(self.cols[i]))
            for i0 in range(0, int(self.rows[i]), rb):
                num, ref = _diff_sums((A1[i0:i0 + rb] @ G1).ravel(),
                                      (A2[i0:i0 + rb] @ G2).ravel(), eta, num, ref)
        return num, ref


# --- the operations of the compiled runners (methods/compiled.py) ---------------------------
def erk_ops(problem, tab, factored=None):
    """The explicit ops of ``tab``: :class:`FactoredStageOps` where a layer's stages are worth
    factoring (``factored`` True or False forces the choice), else dense stages."""
    if factored is None:
        factored = worth_factoring(problem, tab.n_stages)
    if factored:
        return FactoredStageOps(problem, tab)
    return compiled.DenseStageOps(lk.erk_advance, lk.rhs, numba_rhs_args(problem), problem.size)


class _LinearOps(compiled.DenseStageOps):
    """``methods.compiled.DenseStageOps`` with the stages in a store of the linear network's own
    (``data``; ``K`` unused) and ``rhs`` on :func:`numba_rhs_args` (no kinks, no stop event)."""

    stages_in_K = False

    def __init__(self, problem, advance):
        super().__init__(advance, lk.rhs, numba_rhs_args(problem), problem.size)
        self.f0, self.K = np.empty(self.n), np.empty((1, 1))


class FactoredStageOps(_LinearOps):
    """The explicit ops with rank-C factored stages (:class:`StageLayout`): the loop of
    ``make_erk_advance`` with the stage store of ``_linear_kernels`` (``factored_advance``)."""

    def __init__(self, problem, tab):
        super().__init__(problem, lk.factored_advance)
        self.tab, self.s = tab, tab.n_stages
        n, D = problem.size, problem.Sxx.shape[0]
        lay = stage_layout(problem, self.s + 1)
        C, mx, S1 = lay.C, problem.max_width, lay.S1
        ints = (lay.rows, lay.cols, lay.offs, lay.factored, lay.utoff, lay.vsoff, lay.kdoff,
                lay.toff, lay.goff)
        bufs = (np.empty(lay.utoff[-1]), np.empty(lay.vsoff[-1]), np.empty(lay.kdoff[-1]),
                np.empty(n), np.empty(lay.toff[-1]), np.empty(lay.goff[-1]), np.empty(D * C),
                np.empty(D * C), np.empty(S1 * C * C), np.empty(mx * C),
                np.empty(3 * S1 * C * mx), np.empty(3 * S1 * C * mx),
                np.empty(2 * (S1 * C) ** 2), np.empty(2 * C * mx))
        self.C, self.ints, self.bufs = C, ints, bufs
        self.data = (*self.rhs_data[:3], problem.white, ints, bufs,
                     np.empty(3 * max(BLOCK_ENTRIES, mx)), BLOCK_ENTRIES, np.empty(self.s + 1))
        self.e3 = third_order_rest(tab)

    def first(self, y):
        lk.stage(y, np.zeros(1), 0, 0, *self.data[:6])
        lk.combination(np.ones(1), 1, self.f0, self.C, self.ints, self.bufs)
        return self.f0

    def interpolate_many(self, thetas, y, y_new, h, batch):
        lk.combinations(h * self.tab.dense_weights(thetas), self.s + 1, y, batch, self.C,
                        self.ints, self.bufs)
        return batch

    def fsal(self):
        lk.stage_fsal(self.s, self.data)


class LowStorageStages(_LinearOps):
    """The ops of SSPRK104 in Ketcheson's two-register form (:class:`FactoredSlots`): the loop
    of ``make_erk_advance`` with the slot store of ``_linear_kernels`` (``ssp_advance``)."""

    def __init__(self, problem):
        super().__init__(problem, lk.ssp_advance)
        n, mx = problem.size, problem.max_width
        st = self.st = FactoredSlots(problem)
        blas = (lk.DGEMM, np.zeros(8, dtype=np.int32), np.zeros(2))
        self.sums = np.zeros(2)      # _linear_kernels.DD, REF
        self.data = (np.empty(n), np.empty(n), st.at, st.g, ERROR_SLOTS, ERROR_WEIGHTS,
                     np.empty(2 * max(BLOCK_ENTRIES, mx)), np.empty(2 * st.C * st.C),
                     GRAM_MIN_REL, blas, BLOCK_ENTRIES, self.sums, self.rhs_data)

    def first(self, y):
        st = self.st
        # f(y) with slot 0 as the product buffers: the factors stay there
        Sxx, Syx, eta_l, lay, _, _, scratch = self.rhs_data
        lk.rhs_flat(y, self.f0, Sxx, Syx, eta_l, lay, st.at[0], st.g[0], scratch)
        _, self.sums[lk.REF] = lk.slot_stiffness_sums(0, 0, self.data)
        return self.f0

    def interpolate_many(self, thetas, y, y_new, h, batch):
        """The cubic Hermite interpolant of ``methods.ssp.LowStorageRK`` (slots 0 and 10)."""
        lk.hermite_states(np.ascontiguousarray(thetas, dtype=np.float64), h, y, y_new, batch,
                          self.data)
        return batch

    def fsal(self):
        self.st.fsal()


class RosenbrockOps:
    """The ops of the Rosenbrock-W runner ``methods.compiled.rosw`` on the linear network:
    ``rhs(y, out, keep=True)`` keeps the products of ``y``, which :meth:`jvp` differentiates."""

    def __init__(self, problem):
        self.rosw_advance, self.nfev, self.njev = lk.rosw_advance, 0, 0
        self.metric = inverse_rates(problem, problem.eta_l)
        self.rhs_args, self.scratch_args = numba_rhs_args(problem), numba_rhs_args(problem)
        Sxx, _, eta_l, lay, abuf, gbuf, (_, _, tbuf) = self.rhs_args
        C, D = problem.Syx.shape
        largest = max(max(r * c, r * C, C * c) for r, c in problem.shapes)
        self.jvp_args = (Sxx, eta_l, lay, abuf, gbuf,
                         (np.empty_like(abuf), np.empty_like(gbuf), np.empty((D, C)),
                          np.empty((D, C)), tbuf, np.empty(max(largest, D * C))))
        self._y = None

    def rhs(self, y, out, keep=False):
        """Write ``dy/dt`` at ``y`` (n,) into ``out`` (n,) and return it."""
        self.nfev += 1
        lk.rhs_flat(y, out, *(self.rhs_args if keep else self.scratch_args))
        if keep:
            self._y = y
        return out

    def jvp(self, v, out):
        """Write ``J(y) v`` into ``out``, ``y`` the state of the last ``rhs(..., keep=True)``."""
        self.njev += 1
        lk.jvp_flat(v, out, self._y, *self.jvp_args)
        return out


# --- the model --------------------------------------------------------------------------------
def expressible(options, has_biases):
    """Whether the sufficient-statistics problem expresses a network with these options:
    linear activation, no biases, the squared loss (any alpha, m_l, centered, lr_scales)."""
    return options.activation == "linear" and not has_biases and options.loss == "mse"


def linear_ntk(ws, X1, X2):
    """The empirical NTK of ``x -> W_L ... W_1 x``, ``K_ij(x, x') = sum_l [A_l A_l^T]_ij (B_l
    x)^T (B_l x')`` with ``B_l = W_{l-1} ... W_1``: (P1, P2) for one output, else (P1, P2,
    C, C)."""
    L, C = len(ws), ws[-1].shape[0]
    tops = [None] * L
    A = np.eye(C)
    for l in range(L - 1, -1, -1):
        tops[l] = A
        A = A @ ws[l]
    K = np.zeros((X1.shape[0], X2.shape[0], C, C))
    H1, H2 = X1, X2
    for l in range(L):
        if l > 0:
            H1, H2 = H1 @ ws[l - 1].T, H2 @ ws[l - 1].T
        K += np.multiply.outer(H1 @ H2.T, tops[l] @ tops[l].T)
    return K[:, :, 0, 0].copy() if C == 1 else K


class LinearNet(Model):
    """A deep linear network (mse, any alpha, multipliers, centered, lr_scales) whose
    gradient depends on the data through ``Sxx`` and ``Syx'`` only; ``problem`` (after
    :meth:`prepare`) is the run's :class:`FlowProblem`, its right-hand side keeps the partial
    products that :meth:`linearize` differentiates (about two gradients: :attr:`jvp_cost`)."""

    name = "linear"
    linear = True
    smooth = True
    jvp_cost = 2.0

    @classmethod
    def handles(cls, options, has_biases):
        return 2 if expressible(options, has_biases) else 0

    @classmethod
    def shared(cls, shapes, X, Y, options, xp=np):
        return make_problem(shapes, X, Y)

    def __init__(self, weights, biases, options, xp=np):
        if biases is not None:
            raise ValueError("biases: the 'linear' model has no biases (the 'mlp' model has)")
        if not expressible(options, False):
            raise ValueError(f"the 'linear' model is linear with the squared loss, got "
                             f"activation={options.activation!r}, loss={options.loss!r}")
        self.xp = xp
        self.options = options
        self.shapes = tuple(w.shape for w in weights)
        self.L = len(weights)
        self.layout = Layout(self.shapes)
        self.y0 = self.layout.pack(weights, xp=xp)
        self.metric = inverse_rates(self.layout, options.lr_scales, xp)
        M = float(np.prod(options.multipliers))
        self.scale = options.alpha * M
        self.rates = options.eta * M * M * np.asarray(options.lr_scales, dtype=np.float64)
        self._W0 = (end_to_end_flat(self.layout.pack(weights), self.shapes)
                    if options.centered else None)
        self._kept = None

    def weights_of(self, y):
        return self.layout.unpack(y)

    def prepare(self, X, Y, shared=None):
        base = self.shared(self.shapes, X, Y, self.options) if shared is None else shared
        Syx = base.Syx / self.scale
        if self._W0 is not None:
            Syx = Syx + self._W0 @ base.Sxx
        self.base = base
        self._syy = 0.5 * float(np.sum(base.Y * base.Y)) / base.P
        self.problem = base.retarget(np.ascontiguousarray(Syx),
                                     np.ascontiguousarray(self.rates))
        xp = self.xp
        self._Sxx, self._Syx = xp.asarray(self.problem.Sxx), xp.asarray(self.problem.Syx)
        self._eta = [float(e) for e in self.rates]
        return self

    def refilled(self):
        """After the problem :meth:`prepare` shared was refilled in place
        (``FlowProblem.refill``): this model's statistics formed again as :meth:`prepare`
        forms them, into the same arrays.  False where the data's whiteness changed, which
        the compiled ops hold: then the model must be formed anew."""
        base, p = self.base, self.problem
        if base.white != p.white:
            return False
        np.divide(base.Syx, self.scale, out=p.Syx)
        if self._W0 is not None:
            p.Syx += self._W0 @ base.Sxx
        object.__setattr__(p, "X", base.X)
        object.__setattr__(p, "Y", base.Y)
        self._syy = 0.5 * float(np.sum(base.Y * base.Y)) / base.P
        return True

    def rhs(self, y, out=None):
        """``dy/dt`` at ``y`` (:func:`chain_products`, :func:`velocity` on ``xp``) into
        ``out``; its products are kept for :meth:`linearize`."""
        out = self.xp.empty_like(y) if out is None else out
        Ws = self.weights_of(y)
        At, G = chain_products(Ws, self._Sxx, self._Syx, self.problem.white)
        velocity(At, G, self._eta, self.layout.unpack(out), self.xp)
        self._kept = (y, Ws, At, G)
        return out

    def linearize(self, y):
        """``(v -> J(y) v, fresh)``: the exact Jacobian-vector product at ``y`` from the
        gradient's partial products there (those of the latest :meth:`rhs` if it was at this
        very array: ``fresh`` False).  With ``R_l = E W_1^T...W_{l-1}^T``::

            d(dW_l/dt) = eta_l (dA_l^T R_l + A_l^T dR_l),
            dA_{l-1} = dA_l W_l + A_l V_l  (dA_L = 0),  dW = dA_0,
            dE = -dW Sxx,  dR_1 = dE,  dR_{l+1} = dR_l W_l^T + R_l V_l^T,

        ``y`` must stay unchanged while the product is used."""
        xp = self.xp
        kept_y, Ws, At, G = self._kept or (None,) * 4
        fresh = kept_y is not y
        if fresh:
            Ws = self.weights_of(y)
            At, G = chain_products(Ws, self._Sxx, self._Syx, self.problem.white)
        L, eta, white, Sxx = self.L, self._eta, self.problem.white, self._Sxx
        out = xp.empty(self.layout.size)

        def jv(v):
            V, dWs = self.layout.unpack(v), self.layout.unpack(out)
            dAt = [None] * L
            dWT = None                  # d(W_L ... W_{i+1})^T, down to dW^T
            for i in range(L - 1, -1, -1):
                dWT = V[i].T if dWT is None else Ws[i].T @ dWT + V[i].T @ At[i]
                if i > 0:
                    dAt[i - 1] = dWT
            dG = -(dWT.T if white else (Sxx @ dWT).T)
            for i in range(L):
                if i > 0:
                    dG = times_transpose(dG, Ws[i - 1]) + G[i - 1] @ V[i - 1].T
                if i == L - 1:
                    xp.multiply(dG, eta[i], out=dWs[i])
                else:
                    # one product with inner dimension 2C: [dAt, At] [G; dG]
                    right = xp.concatenate((G[i], dG), axis=0)
                    if eta[i] != 1.0:
                        right *= eta[i]
                    xp.matmul(xp.concatenate((dAt[i], At[i]), axis=1), right, out=dWs[i])
            return out
        return jv, fresh

    def stores(self, kind, tab):
        """``(family, store)`` on numpy: factored Butcher stages where worth factoring,
        SSPRK104's two registers as factors unless :func:`factored_is_faster`."""
        p = self.problem
        if self.xp is not np:
            return kind, None
        if kind == "ssp" and not factored_is_faster(p):
            return "ssp", FactoredSlots(p)
        if kind in ("ssp", "erk") and worth_factoring(p, tab.n_stages):
            return "erk", FactoredStages(p, stage_layout(p, tab.n_stages + 1))
        return kind, None

    def _mapped(self, W):
        # W (..., C, D) of the weights -> the map of F
        return self.scale * (W - self._W0 if self._W0 is not None else W)

    def end_to_end(self, y):
        return self._mapped(end_to_end_flat(_backend.to_numpy(y), self.shapes,
                                            self.layout.offsets))

    def loss_of_map(self, F):
        """The loss of maps ``F`` (..., C, D): ``(1/(2 alpha^2 P)) |Y - X F^T|^2`` without
        cancellation (:func:`loss_from_end_to_end`)."""
        return loss_from_end_to_end(F, self.base) / self.options.alpha ** 2

    def loss_terms(self, F):
        """``(loss, size)`` (...) of maps ``F`` (..., C, D) from the statistics, ``(1/alpha^2)
        (1/2 tr F Sxx F^T - tr F Syx^T + 1/2 tr Syy)`` and the sum of the moduli of its
        terms: ``O(C D^2)`` a map, for the breakdown guard of every output."""
        b, lead = self.base, F.shape[:-2]
        f = F.reshape(-1, 1, F.shape[-2] * F.shape[-1])     # one row a map: two products
        quad = 0.5 * ((F @ b.Sxx).reshape(f.shape) @ f.transpose(0, 2, 1)).reshape(lead)
        lin = (f @ b.Syx.reshape(-1)).reshape(lead)
        a2 = self.options.alpha ** 2
        return (quad - lin + self._syy) / a2, (abs(quad) + abs(lin) + self._syy) / a2

    def loss(self, y):
        return float(self.loss_of_map(self.end_to_end(y)))

    def outputs(self, y, Xp):
        return np.asarray(Xp, dtype=np.float64) @ self.end_to_end(y).T

    def ntk(self, y, X1, X2):
        ws = [_backend.to_numpy(w) for w in self.weights_of(y)]
        return self.scale ** 2 * linear_ntk(ws, _backend.to_numpy(X1), _backend.to_numpy(X2))


class LinearNetNumba(LinearNet):
    """:class:`LinearNet` with its right-hand side (for the raw loop of a stop rule) and its
    observations compiled (``_linear_kernels.end_to_end``, ``balance_drift``, ``probe_ntk``)."""

    backend = "numba"

    def prepare(self, X, Y, shared=None):
        super().prepare(X, Y, shared)
        self._rhs_args = None        # the compiled rhs's data, formed on its first call
        self._lay = chain_layout(self.problem)[:3]
        return self

    def rhs(self, y, out=None):
        """``dy/dt`` at ``y`` by the kernel of the explicit loops' trial evaluations."""
        out = np.empty(self.layout.size) if out is None else out
        lk.rhs(np.ascontiguousarray(y, dtype=np.float64), out, self.descent_ops()[1])
        return out

    def descent_ops(self):
        """``(advance, data)``: the compiled gradient-descent loop on :meth:`rhs`'s kernel and
        its data tuple (``_descent_kernels``), formed on first use."""
        if self._rhs_args is None:
            self._rhs_args = numba_rhs_args(self.problem)
        return lk.gd_advance, self._rhs_args

    def compiled_ops(self, kind, tab, stop=None):
        """``(family, ops)``: the compiled loop of a method family and this model's ops on
        it (the choice of stages as :meth:`stores`)."""
        p = self.problem
        if kind == "rosw":
            return "rosw", RosenbrockOps(p)
        if kind == "ssp" and not factored_is_faster(p):
            return "ssp", LowStorageStages(p)
        return "erk", erk_ops(p, tab)

    def end_to_end(self, y):
        return self.end_to_end_many(np.asarray(y)[None])[0]

    def end_to_end_many(self, Ys):
        out = np.empty((Ys.shape[0],) + self.problem.Syx.shape)
        lk.end_to_end(np.ascontiguousarray(Ys, dtype=np.float64), *self._lay, out)
        return self._mapped(out)

    def conservation(self, y, first):
        rows = self._lay[0]
        if first:
            sq = [int(r) * int(r) for r in rows[:-1]]
            self._goffs = _cumulative(sq)
            self._gram = (np.empty(self._goffs[-1]), np.empty(self._goffs[-1]),
                          np.empty(max(sq, default=0)))
        g, g0, tmp = self._gram
        return float(lk.balance_drift(np.ascontiguousarray(y, dtype=np.float64), *self._lay,
                                      g, g0, self._goffs, first, tmp))

    def probe_ntk(self, Xp):
        C, Q = self.shapes[-1][0], Xp.shape[0]
        Xc = np.ascontiguousarray(Xp, dtype=np.float64)
        out = np.empty((Q, Q, C, C))

        def kernel(y):
            lk.probe_ntk(np.ascontiguousarray(y, dtype=np.float64), *self._lay, Xc, out)
            return self.scale ** 2 * (out[:, :, 0, 0] if C == 1 else out)
        return kernel


LinearNet.numba_model = LinearNetNumba

register_model("linear", LinearNet)
