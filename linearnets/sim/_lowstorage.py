"""SSPRK104 in Ketcheson's low-storage form, every stage derivative kept as layer factors.

The linear model's fast path for SSPRK104 (stage derivatives as layer factors, on the
sufficient statistics); the tableau form runs through the generic loops of ``methods/``.

Why
---
SSPRK104 is the method for the stretch where converged modes, not accuracy, cap
the step (ten stages, real stability interval 13.9).  Run as a Butcher tableau
(``_explicit``/``_lowrank``) its stage states cost O(s^2) work per step: every
stage state is ``y + h sum_{j<i} a_ij K_j`` over up to nine earlier stages, formed
densely or, in factored form, as corrections of rank up to 9C inside every
product of the chains.  On the 128-256-256-256-10 network of
``benchmarks/bench_flow.py`` that doubled the cost of a gradient.  But the method
has a two-register form (Ketcheson, SIAM J. Sci. Comput. 30 (2008) 2113, Sec. 4.3):

    q1 = q2 = y
    q1 <- q1 + (h/6) f(q1)                   five times   (K_0 .. K_4)
    q2 <- q2/25 + 9 q1/25,  q1 <- 15 q2 - 5 q1
    q1 <- q1 + (h/6) f(q1)                   four times   (K_5 .. K_8)
    y_new = q2 + 3/5 q1 + (h/10) f(q1)                    (K_9)

(expanded, it is the tableau ``_tableaux.SSPRK104``, checked in the tests), so
each stage is one right-hand side and one update ``q1 += (h/6) K``.  For a linear
network a stage derivative is ``K_i = eta_i A_i^T G_i`` per layer (rank C, the
partial products of ``_rhs.chains``): the update is one rank-C product added into
``q1`` block by block while the block stays in cache, and the dense K is never
stored.  A stage then costs its chains plus one rank-C product per layer.

Error estimate: the third-order weights ``bhat = (0, 2/9, 0, 0, 5/18, 1/3, 0, 0, 0,
1/6)`` on the same stages (``_tableaux``), and since every weight of the step is
1/10, ``h sum_j (b_j - bhat_j) K_j = y_new - y - h S`` with

    S = 2/9 K_1 + 5/18 K_4 + 1/3 K_5 + 1/6 K_9,

one product of rank 4C per layer, formed block by block inside the error norm
(the subtraction costs ``eps |y| / (atol + rtol |y|)`` of the tolerance, below 1e-3
for any rtol above 1e-13).  Stiffness estimate as in ``_explicit``: ``rho =
|f(y_new) - K_9| / |y_new - q1|``, the numerator multiplied out block by block
(see :func:`stiffness_sums` for why not from Gram matrices of the factors).  Step control, stability
cap, output times and failures are those of ``_explicit.adaptive_run``.  Dense output
(``options.dense``): the stages are gone by the end of a step, but its ends and their
derivatives are not (slots 0 and 10), and the cubic Hermite interpolant on them
(:func:`hermite_state`) is the tableau's own continuous extension ``SSPRK104.dense_P``.

This module is the numpy reference (plain numpy sums and products; its stepper runs in
the one adaptive loop ``methods.base.integrate`` through ``_explicit.adaptive_run``);
``_lowstorage_kernels.ssp_advance`` is its compiled twin (the same operations, agreeing
to the tolerance, not bit for bit).  Registered for ``"SSPRK104"`` on the numpy and numba
backends after ``_explicit`` (see ``_solvers._PLUGINS``), replacing the generic
steppers there, except on states larger than LOWSTORAGE_MAX_BYTES whose layers are
worth factoring: there the factored Butcher-tableau stepper of ``_lowrank`` runs
(the two take the same steps up to rounding).  The CuPy backend keeps the generic
``_stiff.erk_run``.
"""
from __future__ import annotations

import numpy as np
from scipy.linalg.blas import dgemm

from . import _explicit, _lowrank, _rhs
from ._lowrank import block_rows
from .methods.base import sumsq
from ._solvers import register_solver
from ._tableaux import SSPRK104, cubic_hermite

__all__ = ["ERROR_SLOTS", "ERROR_WEIGHTS", "N_SLOTS", "GRAM_MIN_REL", "LOWSTORAGE_MAX_BYTES",
           "Slots", "gemm_acc", "add_stage", "error_sums", "stiffness_sums", "ssp_trial",
           "hermite_state", "ssp_solve", "ssp_solve_numba", "factored_is_faster"]

#: States larger than this (bytes) run SSPRK104 as factored Butcher stages
#: (``_lowrank``) where the layers are worth factoring.  The low-storage form reads and
#: writes the whole state at every stage, which is cheap while the state stays in a
#: core's cache and costs more than the factored stages' corrections once it does not
#: (``benchmarks/bench_flow.py``, same steps both ways: the 1.3 MB medium state 418
#: against 545 us per evaluation for the low-storage form, the 12.7 MB large state
#: 3.9 against 5.2 ms for the factored stages; this machine has 2 MB of L2 per core).
LOWSTORAGE_MAX_BYTES = 4 << 20

#: Stages of the third-order companion (nonzero entries of ``bhat``) and their weights.
ERROR_SLOTS = np.array([1, 4, 5, 9], dtype=np.int64)
ERROR_WEIGHTS = np.array([2.0 / 9.0, 5.0 / 18.0, 1.0 / 3.0, 1.0 / 6.0])
#: Stage slots: K_0 .. K_9 of the step, slot 10 for f(y_new) (the next step's K_0).
N_SLOTS = 11
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
        self.rows, self.cols, self.offs, self.aoff, self.goff = _explicit.chain_layout(problem)
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


def ssp_trial(y, y_new, q1, q2, h, st, problem):
    """One SSPRK(10,4) step from ``y`` (slot 0 = factors of f(y)) into ``y_new``.

    Leaves K_0..K_9 in slots 0..9, ``f(y_new)`` in slot 10 and the last stage state in
    ``q1``.  The elementwise steps are written as the compiled loop computes them.
    """
    c6 = h / 6.0
    q1[:] = y
    add_stage(q1, c6, st, 0, problem)
    for k in range(1, 5):
        st.stage(q1, k, problem)
        add_stage(q1, c6, st, k, problem)
    np.add(y * 0.04, q1 * 0.36, out=q2)
    np.subtract(q2 * 15.0, q1 * 5.0, out=q1)
    for k in range(5, 9):
        st.stage(q1, k, problem)
        add_stage(q1, c6, st, k, problem)
    st.stage(q1, 9, problem)
    np.add(q2, q1 * 0.6, out=y_new)
    add_stage(y_new, h / 10.0, st, 9, problem)
    st.stage(y_new, 10, problem)


def hermite_state(theta, y, y_new, h, st, problem, out):
    """The state at ``t + theta h`` inside the accepted step ``y -> y_new``, by the cubic
    Hermite interpolant on its ends and their derivatives (slots 0 and 10):

        y + h01 (y_new - y) + h h10 f(y) + h h11 f(y_new)    (``_tableaux.cubic_hermite``),

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


def ssp_solve(problem, y0, t_eval, options, observe, tab=SSPRK104):
    """Integrate linear-network gradient flow with low-storage SSPRK104 (numpy).

    Same contract and step control as ``_explicit.erk_solve`` (see ``_solvers`` for
    the solver signature).

    Returns
    -------
    RawResult
    """
    rtol, atol = options.rtol, options.atol
    n = y0.size
    st = Slots(problem)
    y = np.array(y0, dtype=np.float64, copy=True)
    q1, q2 = np.empty(n), np.empty(n)
    last = {}

    def trial(y, y_new, h_try):
        ssp_trial(y, y_new, q1, q2, h_try, st, problem)
        e5, last["dd"] = error_sums(y, y_new, q1, h_try, st, problem, rtol, atol)
        return float(np.sqrt(e5 / n))

    def first():
        st.stage(y, 0, problem)
        return _rhs.rhs(y, problem)

    wsum = float(np.abs(tab.stiffness_weights).sum())

    def stiffness(h_try, y_new):
        # |K_0|^2 of this step is |f(y_new)|^2 of the last (the same factors)
        num, ref = stiffness_sums(st, 10, 9, problem)
        rho = _explicit.stiffness_estimate(num, last["dd"] / h_try / h_try, last["ref"], wsum,
                                           h_try, sumsq(y_new))
        last["ref"] = ref
        return rho

    out = np.empty(n)

    def interpolate(theta, y, y_new, h):
        return hermite_state(theta, y, y_new, h, st, problem, out)

    with np.errstate(all="ignore"):  # overflow is detected and reported, not warned
        early, h, nfev = _explicit._start(first, lambda v, out: _rhs.rhs(v, problem, out), y,
                                          t_eval, tab, options, observe)
        if early is not None:
            return early
        last["ref"] = stiffness_sums(st, 0, 0, problem)[1]
        return _explicit.adaptive_run(trial, st.fsal, y, h, nfev, t_eval, tab, options,
                                      observe, stiffness, interpolate)


def ssp_solve_numba(problem, y0, t_eval, options, observe, tab=SSPRK104):
    """The compiled twin of :func:`ssp_solve`: the runner ``methods.compiled.ssp`` on the
    two-register stages of ``models/_linear_ops.LowStorageStages``."""
    from .methods import compiled
    from .models import _linear_ops as lk  # compiled (or loaded) on first use
    res = compiled.ssp(lk.LowStorageStages(problem), y0, t_eval, tab, options, observe,
                       dense=options.dense)
    return _explicit.raw_result(res, options, tab.stability_boundary)


def factored_is_faster(problem):
    """Whether SSPRK104 runs as factored Butcher stages rather than in low-storage form:
    a state over ``LOWSTORAGE_MAX_BYTES`` with layers worth factoring."""
    return (8 * problem.size > LOWSTORAGE_MAX_BYTES
            and _lowrank.worth_factoring(problem, SSPRK104.n_stages))


def _by_size(low_storage, factored):
    def solver(problem, y0, t_eval, options, observe):
        if factored_is_faster(problem):
            return factored(problem, y0, t_eval, SSPRK104, options, observe)
        return low_storage(problem, y0, t_eval, options, observe)
    solver.__doc__ = (f"SSPRK104: ``{low_storage.__name__}``, or ``{factored.__name__}`` "
                      "where :func:`factored_is_faster`.")
    return solver


register_solver("SSPRK104", "numpy", _by_size(ssp_solve, _lowrank.lowrank_solve))
register_solver("SSPRK104", "numba", _by_size(ssp_solve_numba, _lowrank.lowrank_solve_numba))
