"""SSPRK104 in Ketcheson's two-register low-storage form on a model's slot store.

Ketcheson, SIAM J. Sci. Comput. 30 (2008) 2113, Sec. 4.3 (:data:`~.tableaux.SSPRK104_LOW_STORAGE`)
over a *slot store* (docs/simulator.md, "Module overviews"); without one SSPRK104 runs as
``erk.ExplicitRK`` on its tableau.
"""
from __future__ import annotations

import math

import numpy as np

from .base import Stepper, error_norm, stiffness_estimate, sumsq
from .tableaux import SSPRK104, SSPRK104_LOW_STORAGE, cubic_hermite

__all__ = ["LowStorageRK"]


class LowStorageRK(Stepper):
    """SSPRK104 in two-register form over a model's slot store ``store``: a stage is one
    right-hand side and one update ``q1 += (h/6) K``; error ``y_new - y - h sum_j w_j
    K_{slot_j}`` (third-order weights), dense output the cubic Hermite."""

    tableau = SSPRK104

    def __init__(self, rhs, n, rtol, atol, xp=np, fun=None, *, store):
        super().__init__(rhs, n, rtol, atol, xp, fun)
        self.form, self.store = SSPRK104_LOW_STORAGE, store
        self._q1, self._q2 = xp.empty(self.n), xp.empty(self.n)
        self._wsum = float(np.abs(self.tableau.stiffness_weights).sum())
        self._dd = self._ref = 0.0

    def evaluate(self, t, y):
        st = self.store
        st.stage(y, 0)
        f = self.xp.zeros_like(y)
        st.add(f, 1.0, 0)
        self._ref = float(sumsq(f, self.xp))
        return f

    def attempt(self, t, y, f, h):
        xp, st, form = self.xp, self.store, self.form
        q1, q2, c = self._q1, self._q2, form.sub * h
        s, m0, m1, m2, m3 = form.stages, *form.mix
        q1[...] = y
        st.add(q1, c, 0)
        for k in range(1, s - 1):
            if k == form.first:
                xp.add(y * m0, q1 * m1, out=q2)
                xp.add(q2 * m2, q1 * m3, out=q1)
            st.stage(q1, k)
            st.add(q1, c, k)
        st.stage(q1, s - 1)
        y_new = q2 + q1 * form.last[0]
        st.add(y_new, h * form.last[1], s - 1)
        st.stage(y_new, s)
        e5, self._dd = st.error_sums(y, y_new, q1, h, self.rtol, self.atol)
        err = error_norm(e5, n=self.n)
        if not (math.isfinite(err) and bool(xp.all(xp.isfinite(y_new)))):
            err = np.inf
        return y_new, None, err

    def accept(self, f_new):
        """Slot 0 takes ``f(y_new)`` (no vector of it: the slot store keeps factors)."""
        self.store.fsal()

    def stiffness(self, h, y_new):
        """Hairer's estimate from the last stage (``|K_s - K_{s-1}| / |y_new - q1|``); the
        ``|K_0|^2`` of this step is ``|f(y_new)|^2`` of the last."""
        s = self.form.stages
        num, ref = self.store.stiffness_sums(s, s - 1)
        rho = stiffness_estimate(num, self._dd / h / h, self._ref, self._wsum, h,
                                 sumsq(y_new, self.xp))
        self._ref = ref
        return rho

    def interpolate(self, theta, y, y_new, h):
        """The cubic Hermite interpolant of the step just accepted at ``t + theta h``."""
        h01, h10, h11 = cubic_hermite(theta)
        out = (y_new - y) * h01
        out += y
        self.store.add(out, h * h10, 0)
        self.store.add(out, h * h11, self.form.stages)
        return out
