"""Embedded explicit Runge-Kutta pairs over a Butcher tableau (any model, any backend).

:class:`ExplicitRK` advances any :class:`~.tableaux.Tableau` over a *stage store*,
:class:`DenseStages` or a model's (its operations: docs/simulator.md, "Module overviews").
"""
from __future__ import annotations

import math

import numpy as np

from . import tableaux as _tab
from .base import Stepper, error_norm, stiffness_estimate, sumsq

__all__ = ["ExplicitRK", "DenseStages", "third_order_rest", "STEPPERS"]


def third_order_rest(tab):
    """``e3 - b`` (s + 1,), or None: ``sum_j e3_j K_j`` is the step's ``sum_j b_j K_j``, already
    formed, plus ``sum_j (e3 - b)_j K_j`` (3 nonzero weights for DOP853)."""
    return None if tab.e3 is None else tab.e3 - np.append(tab.b, 0.0)


class DenseStages:
    """The stage store with every stage a row of ``K`` (s + 1, n); ``evaluate(y, out)`` is
    the right-hand side."""

    def __init__(self, evaluate, n, s, xp=np):
        self.evaluate, self.xp = evaluate, xp
        self.K = xp.empty((s + 1, n))

    def _sum(self, w):
        return self.K[:w.size].T @ self.xp.asarray(w)

    def stage(self, y, w, slot):
        self.evaluate(y + self._sum(w) if w.size else y, self.K[slot])

    def combination(self, w, out):
        out[...] = self._sum(w)
        return out

    def step_end(self, y, y_new, wb, we, we3, c3, rtol, atol):
        xp = self.xp
        d = self._sum(wb)
        xp.add(y, d, out=y_new)
        sc = atol + rtol * xp.maximum(xp.abs(y), xp.abs(y_new))
        e5 = sumsq(self._sum(we) / sc, xp)
        e3 = sumsq((self._sum(we3) + c3 * d) / sc, xp) if we3 is not None else 0.0
        return e5, e3

    def stiffness_sums(self, s, wd):
        K, xp = self.K, self.xp
        return sumsq(K[s] - K[s - 1], xp), sumsq(self._sum(wd), xp), sumsq(K[0], xp)

    def fsal(self, s):
        self.K[0] = self.K[s]


class ExplicitRK(Stepper):
    """An embedded explicit RK pair: ``K_i = f(y + h sum_j A_ij K_j)``, ``y_new = y + h sum b_i
    K_i``, error ``h sum e_i K_i`` with ``K_s = f(y_new)`` (HNW I, II.4).

    ``tableau`` (keyword, else the class's) sets the pair, ``store`` a model's stage store
    (:class:`DenseStages` by default).  :meth:`stiffness` exists where the tableau has a
    stability interval and its last stage at ``t + h``, :meth:`interpolate` where it has a
    continuous extension.
    """

    def __init__(self, rhs, n, rtol, atol, xp=np, fun=None, *, tableau=None, store=None):
        if tableau is not None:
            self.tableau = tableau
        super().__init__(rhs, n, rtol, atol, xp, fun)
        tab = self.tableau
        self.store = store if store is not None else DenseStages(
            lambda y, out: self._eval(0.0, y, out), self.n, tab.n_stages, xp)
        self._e3 = third_order_rest(tab)
        self._f0 = None       # the array whose derivative slot 0 holds
        if tab.stability_boundary > 0.0 and tab.c[-1] == 1.0:
            self._wd = tab.stiffness_weights
            self._wsum = float(np.abs(self._wd).sum())
        else:
            self.stiffness = None
        if tab.dense_P is None:
            self.interpolate = None

    def evaluate(self, t, y):
        st = self.store
        st.stage(y, np.zeros(0), 0)
        self._f0 = st.combination(np.ones(1), self.xp.empty_like(y))
        return self._f0

    def attempt(self, t, y, f, h):
        xp, tab, st = self.xp, self.tableau, self.store
        s = tab.n_stages
        if f is not self._f0:
            # slot 0 holds f(y) after evaluate or accept; a caller's own f(y) is copied in
            if f is None or not isinstance(st, DenseStages):
                raise ValueError("ExplicitRK: a model's stage store starts from its own f(y)")
            st.K[0] = f
            self._f0 = st.K[0]
        for i in range(1, s):
            st.stage(y, h * tab.A[i, :i], i)
        st.stage(y, h * tab.b, s)                  # f(y_new), y_new formed as in step_end
        y_new = xp.empty_like(y)
        e5, e3 = st.step_end(y, y_new, h * tab.b, tab.e, self._e3, 1.0 / h, self.rtol,
                             self.atol)
        err = error_norm(e5, e3, self._e3 is not None, h, self.n)
        f_new = st.K[s] if isinstance(st, DenseStages) else None
        if not (math.isfinite(e5) and math.isfinite(e3) and bool(xp.all(xp.isfinite(y_new)))):
            err = np.inf
        return y_new, f_new, err

    def accept(self, f_new):
        self.store.fsal(self.tableau.n_stages)
        K = self.store.K
        self._f0 = None if K is None else K[0]
        return self._f0

    def stiffness(self, h, y_new):
        """Hairer's estimate ``|f(y_new) - f(Y_{s-1})| / |y_new - Y_{s-1}|`` of the step
        just accepted (:func:`~linearnets.sim.methods.base.stiffness_estimate`)."""
        num, dd, ref = self.store.stiffness_sums(self.tableau.n_stages, self._wd)
        return stiffness_estimate(num, dd, ref, self._wsum, h, sumsq(y_new, self.xp))

    def interpolate(self, theta, y, y_new, h):
        """The state at ``t + theta h`` inside the step just accepted, ``y + h sum_j
        B_j(theta) K_j`` (``Tableau.dense_weights``)."""
        out = self.store.combination(h * self.tableau.dense_weights(theta),
                                     self.xp.empty_like(y))
        out += y
        return out


#: Method name -> stepper class (every explicit pair of ``tableaux.TABLEAUX``).
STEPPERS = {name: type(name, (ExplicitRK,), {"tableau": tab, "__doc__": f"{name}."})
            for name, tab in _tab.TABLEAUX.items()}
