"""The linear network's operations for the compiled runners of ``methods/compiled.py``.

The runners (``compiled.erk``, ``compiled.ssp``, ``compiled.rosw``) drive a compiled
stepping loop from Python and take a model's operations on it (``ops``; the module
docstring of ``methods/compiled.py`` lists them).  For the linear network on its
sufficient statistics (``_rhs.FlowProblem``) there is one class per loop:

* :func:`erk_ops` -- dense stages (``methods.compiled.DenseStages`` on the entry point
  ``_linear_kernels.erk_advance``), or :class:`FactoredStages` on wide networks (rank-C
  factored stages, ``_lowrank_kernels.lowrank_advance``);
* :class:`LowStorageStages` -- SSPRK104 in two-register form
  (``_lowstorage_kernels.ssp_advance``);
* :class:`CompiledFlow` -- the Rosenbrock-W loop (``_linear_kernels.rosw_advance``), with
  the right-hand side and Jacobian-vector product compiled.

A plain Python module (not a kernel module): importing it imports numba and the kernel
modules, which compile (or load their cache) on first use.
"""
from __future__ import annotations

import numpy as np

from . import _linear_stages as _ls
from .. import _lowrank_kernels as _lrk
from .. import _lowstorage_kernels as _lsk
from .._kernels import jvp_flat, rhs_flat
from ..methods import compiled
from ..methods.erk import third_order_rest
from . import _linear_kernels as lk
from .base import inverse_rates

__all__ = ["erk_ops", "FactoredStages", "LowStorageStages", "CompiledFlow"]


def erk_ops(problem, tab, factored=None):
    """The explicit ops of ``tab`` on the linear ``problem``: :class:`FactoredStages` where a
    layer's stages are worth factoring (``_lowrank.worth_factoring``; ``factored`` True or
    False forces the choice), else dense stages through ``_linear_kernels.erk_advance``."""
    if factored is None:
        factored = _ls.worth_factoring(problem, tab.n_stages)
    if factored:
        return FactoredStages(problem, tab)
    return compiled.DenseStages(lk.erk_advance, lk.rhs, _ls.numba_rhs_args(problem),
                                int(problem.offsets[-1]))


class FactoredStages:
    """The explicit ops of the linear network with rank-C factored stages (``_linear_stages.Layout``; the loop ``_lowrank_kernels.lowrank_advance``)."""

    detects_stiffness = True

    def __init__(self, problem, tab):
        self._kern, self._block = _lrk, _ls.BLOCK_ENTRIES
        self.tab = tab
        s = tab.n_stages
        self.s = s
        n = int(problem.offsets[-1])
        lay = _ls.Layout(problem, s + 1)
        C = self.C = lay.C
        self.ints = (lay.rows, lay.cols, lay.offs, lay.factored, lay.utoff, lay.vsoff, lay.kdoff,
                     lay.toff, lay.goff)
        mx = lay.max_dim
        self.bufs = (np.empty(lay.utoff[-1]), np.empty(lay.vsoff[-1]), np.empty(lay.kdoff[-1]),
                     np.empty(n), np.empty(lay.toff[-1]), np.empty(lay.goff[-1]),
                     np.empty(problem.Sxx.shape[0] * C), np.empty(problem.Sxx.shape[0] * C),
                     np.empty(lay.S1 * C * C), np.empty(lay.S1 * C * C), np.empty(mx * C),
                     np.empty(3 * lay.S1 * C * mx), np.empty(3 * lay.S1 * C * mx),
                     np.empty(2 * (lay.S1 * C) ** 2), np.empty(2 * C * mx))
        self.pbuf = np.empty(3 * max(self._block, mx))
        self.Sxx = np.ascontiguousarray(problem.Sxx)
        self.Syx = np.ascontiguousarray(problem.Syx)
        self.eta_l = np.ascontiguousarray(problem.eta_l, dtype=np.float64)
        self.white = problem.white
        self.rhs_args = _ls.numba_rhs_args(problem)
        self.use_e3 = tab.e3 is not None
        self.e3 = third_order_rest(tab) if self.use_e3 else np.zeros_like(tab.e)
        self.f0 = np.empty(n)
        self.wtmp, self.out = np.empty(s + 1), np.empty(n)

    def prepare(self, tab, low, options, predictive, cap_safety, stiff_steps, stiff_held=1.0):
        # (always the predictive controller; no kinks)
        self.ctl = compiled.control(tab, options, stiff_steps, cap_safety, stiff_held)

    def stop_value(self, y):
        return None

    def first(self, y):
        kern = self._kern
        kern.stage(y, np.zeros(1), 0, 0, self.Sxx, self.Syx, self.eta_l, self.white, self.ints,
                   self.bufs)
        kern.combination(np.ones(1), 1, self.f0, self.C, self.ints, self.bufs)
        return self.f0

    def rhs(self, v, out):
        lk.rhs(v, out, self.rhs_args)
        return out

    def advance(self, y, y_new, th, t_target, t_out, stats, budget):
        tab = self.tab
        return self._kern.lowrank_advance(
            y, y_new, self.pbuf, self._block, self.wtmp, th, t_target, t_out, stats, budget,
            tab.A, tab.b, tab.e, self.e3, self.use_e3, *self.ctl, self.Sxx, self.Syx, self.eta_l,
            self.white, self.ints, self.bufs)

    def interpolate(self, theta, y, y_new, h):
        self._kern.combination(h * self.tab.dense_weights(theta), self.s + 1, self.out, self.C,
                               self.ints, self.bufs)
        np.add(self.out, y, out=self.out)
        return self.out

    def interpolate_many(self, thetas, y, y_new, h, batch):
        self._kern.combinations(h * self.tab.dense_weights(thetas), self.s + 1, y, batch, self.C,
                                self.ints, self.bufs)
        return batch

    def fsal(self):
        self._kern.fsal(self.s, self.C, self.ints, self.bufs)


class LowStorageStages:
    """The ops of SSPRK104 in Ketcheson's two-register form on the linear network
    (``_linear_stages.Slots``; the loop ``_lowstorage_kernels.ssp_advance``)."""

    detects_stiffness = True

    def __init__(self, problem):
        ls = self._ls = _ls
        self._kern, self._block = _lsk, _ls.BLOCK_ENTRIES
        self.problem = problem
        n = int(problem.offsets[-1])
        st = self.st = ls.Slots(problem)
        mx = int(max(st.rows.max(), st.cols.max()))
        C = st.C
        self.rhs_args = args = _ls.numba_rhs_args(problem)
        self.Sxx, self.Syx, self.eta_l = args[0], args[1], args[2]
        self.WT, self.SW, self.tbuf = args[10], args[11], args[12]
        self.lay = (st.rows, st.cols, st.offs, st.aoff, st.goff)
        q = ls.ERROR_SLOTS.size
        self.pbuf = np.empty(2 * max(self._block, mx))
        self.ubuf, self.vbuf = np.empty(mx * q * C), np.empty(q * C * mx)
        self.gram = np.empty(2 * C * C)
        self.ibuf, self.dbuf = np.zeros(8, dtype=np.int32), np.zeros(2)
        self.f0 = np.empty(n)
        self.q1, self.q2, self.out = np.empty(n), np.empty(n), np.empty(n)
        self.ref0 = np.zeros(1)

    def prepare(self, tab, low, options, predictive, cap_safety, stiff_steps, stiff_held=1.0):
        # (always the predictive controller; no kinks)
        self.ctl = compiled.control(tab, options, stiff_steps, cap_safety, stiff_held)

    def stop_value(self, y):
        return None

    def first(self, y):
        st = self.st
        # f(y) through rhs_flat with slot 0 as its product buffers: the factors stay there
        rhs_flat(y, self.f0, self.Sxx, self.Syx, self.eta_l, st.rows, st.cols, st.offs,
                       st.at[0], st.aoff, st.g[0], st.goff, self.WT, self.SW, self.tbuf)
        self.ref0[0] = self._kern.stiffness_sums(
            st.at, st.g, 0, 0, self.eta_l, st.rows, st.cols, st.aoff, st.goff, self.pbuf,
            self._block, self.gram, self._ls.GRAM_MIN_REL)[1]     # |f(y)|^2
        return self.f0

    def rhs(self, v, out):
        lk.rhs(v, out, self.rhs_args)
        return out

    def advance(self, y, y_new, th, t_target, t_out, stats, budget):
        ls, st = self._ls, self.st
        exponent, rtol, atol, safety, min_factor, max_factor, min_err, ulps, _, stiff = self.ctl
        return self._kern.ssp_advance(
            y, y_new, self.q1, self.q2, st.at, st.g, th, self.ref0, t_target, t_out, stats,
            budget, ls.ERROR_SLOTS, ls.ERROR_WEIGHTS, exponent, rtol, atol, safety, min_factor,
            max_factor, min_err, ulps, stiff, self.pbuf, self.ubuf, self.vbuf, self.gram,
            ls.GRAM_MIN_REL, self._kern.DGEMM, self.ibuf, self.dbuf, self._block, self.Sxx,
            self.Syx, self.eta_l, *self.lay, self.WT, self.SW, self.tbuf)

    def interpolate(self, theta, y, y_new, h):
        return self._ls.hermite_state(theta, y, y_new, h, self.st, self.problem, self.out)

    def interpolate_many(self, thetas, y, y_new, h, batch):
        st = self.st
        self._kern.hermite_states(np.ascontiguousarray(thetas), h, y, y_new, batch, st.at, st.g,
                                  self.eta_l, *self.lay[:3], st.aoff, st.goff, self._kern.DGEMM,
                                  self.ibuf, self.dbuf)
        return batch

    def fsal(self):
        self.st.fsal()


class CompiledFlow:
    """The linear network's right-hand side and Jacobian-vector product in compiled kernels
    (``_kernels.rhs_flat``, ``_kernels.jvp_flat``), with the interface of ``_stiff.Flow``:
    the ops of the Rosenbrock-W runner ``methods.compiled.rosw`` (ROS34PW2 and the
    Rosenbrock phases of ``"auto"`` on numba).  ``rhs(y, out, keep=True)`` keeps the
    products of ``y``, which :meth:`jvp` then differentiates (the caller leaves ``y``
    unchanged meanwhile).

    ``rhs_args`` (the kept state's products), ``scratch_args`` (the other states') and
    ``jvp_args`` are the data tuples of ``_linear_kernels.rhs`` and ``_linear_kernels.jvp``,
    which the runner hands to the entry point ``_linear_kernels.rosw_advance``.
    """

    def __init__(self, problem):
        self.xp = np
        #: the model's cached entry point into the compiled Rosenbrock-W loop
        self.rosw_advance = lk.rosw_advance
        self.nfev = 0
        self.njev = 0
        # two sets of product buffers: those of the kept state, and scratch for the others
        self.n = int(problem.offsets[-1])
        self.metric = inverse_rates(problem, problem.eta_l)
        self.rhs_args = _ls.numba_rhs_args(problem)
        self.scratch_args = _ls.numba_rhs_args(problem)
        (Sxx, _, eta_l, rows, cols, offs, abuf, aoff, gbuf, goff, WT, SW,
         tbuf) = self.rhs_args
        C, D = problem.Syx.shape
        largest = max(max(r * c, r * C, C * c) for r, c in problem.shapes)
        self.jvp_args = (Sxx, eta_l, rows, cols, offs, abuf, aoff, gbuf, goff,
                         np.empty_like(abuf), np.empty_like(gbuf), np.empty((D, C)),
                         np.empty((D, C)), tbuf, np.empty(max(largest, D * C)))
        self._y = None

    def rhs(self, y, out, keep=False):
        """Write ``dy/dt`` at ``y`` (n,) into ``out`` (n,) and return it."""
        self.nfev += 1
        rhs_flat(y, out, *(self.rhs_args if keep else self.scratch_args))
        if keep:
            self._y = y
        return out

    def jvp(self, v, out):
        """Write ``J(y) v`` into ``out``, ``y`` the state of the last ``rhs(..., keep=True)``."""
        self.njev += 1
        jvp_flat(v, out, self._y, *self.jvp_args)
        return out
