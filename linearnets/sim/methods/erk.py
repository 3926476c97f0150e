"""Embedded explicit Runge-Kutta pairs over a Butcher tableau (any network, any backend).

:class:`ExplicitRK` advances any :class:`~linearnets.sim._tableaux.Tableau`
(stages ``K_i = f(y + h sum_j A_ij K_j)``, ``y_new = y + h sum b_i K_i``, error
``h sum e_i K_i`` with ``K_s = f(y_new)``, first same as last; DOP853's error norm
with its third-order companion); the named subclasses fix the tableau, and
``ExplicitRK(..., tableau=tab)`` takes any.  It is the numpy and CuPy stepper of every
model, the linear network's included (``_explicit.erk_solve``, ``_stiff.erk_run``), in
the one loop ``base.integrate``; its stiffness estimate and continuous extension serve
that loop's stability cap and dense output.  Besides
the pairs of ``_tableaux`` (RK45, DOP853, SSPRK104) two low-order pairs for kinks:

* ``BS32``: Bogacki & Shampine, Appl. Math. Lett. 2 (1989) 321-325, order 3 with
  an order-2 estimate (scipy's ``RK23``);
* ``HE21``: Heun's method with the Euler step as its order-1 estimate.
"""
from __future__ import annotations

import numpy as np

from .. import _tableaux
from .._tableaux import Tableau
from .base import Stepper, rms_norm, stiffness_estimate, sumsq

__all__ = ["ExplicitRK", "RK45", "DOP853", "SSPRK104", "BS32", "HE21", "STEPPERS",
           "BS32_TABLEAU", "HE21_TABLEAU"]


def _frozen(a):
    a = np.ascontiguousarray(a, dtype=np.float64)
    a.setflags(write=False)
    return a


BS32_TABLEAU = Tableau(
    "BS32", 3, 2,
    _frozen([[0, 0, 0], [1 / 2, 0, 0], [0, 3 / 4, 0]]),
    _frozen([2 / 9, 1 / 3, 4 / 9]),
    _frozen([0, 1 / 2, 3 / 4]),
    # b (with 0 for f(y_new)) minus the order-2 weights (7/24, 1/4, 1/3, 1/8)
    _frozen([2 / 9 - 7 / 24, 1 / 3 - 1 / 4, 4 / 9 - 1 / 3, -1 / 8]),
    stability_boundary=2.5127)
HE21_TABLEAU = Tableau(
    "HE21", 2, 1,
    _frozen([[0, 0], [1, 0]]),
    _frozen([1 / 2, 1 / 2]),
    _frozen([0, 1]),
    _frozen([1 / 2 - 1, 1 / 2, 0]),
    stability_boundary=2.0)


class ExplicitRK(Stepper):
    """An embedded explicit RK pair over the class's ``tableau`` (see the module docstring).

    ``tableau`` (keyword) sets the pair per instance; ``fun`` is an in-place right-hand
    side (:class:`~linearnets.sim.methods.base.Stepper`).  The stages live in ``K``
    (s + 1, n), ``K[s] = f(y_new)`` becoming ``K[0]`` of the next step on acceptance.
    Where the tableau has a real stability interval and its last stage sits at
    ``t + h`` the stepper estimates the stiffness (:meth:`stiffness`, for the stability
    cap of :func:`~linearnets.sim.methods.base.integrate`), and where it has a
    continuous extension it interpolates (:meth:`interpolate`).
    """

    def __init__(self, rhs, n, rtol, atol, xp=np, fun=None, *, tableau=None):
        if tableau is not None:
            self.tableau = tableau
        super().__init__(rhs, n, rtol, atol, xp, fun)
        tab = self.tableau
        s = tab.n_stages
        self.K = xp.empty((s + 1, self.n))
        self._k0, self._ks = self.K[0], self.K[s]
        self._A = [xp.asarray(tab.A[i, :i]) for i in range(s)]
        self._b = xp.asarray(tab.b)
        self._c = tab.c
        self._e = xp.asarray(tab.e)
        self._e3 = xp.asarray(tab.e3) if tab.e3 is not None else None
        if tab.stability_boundary > 0.0 and tab.c[-1] == 1.0:
            wd = tab.stiffness_weights
            self._wd = xp.asarray(wd)
            self._wsum = float(np.abs(wd).sum())
        else:
            self.stiffness = None
        if tab.dense_P is None:
            self.interpolate = None

    def evaluate(self, t, y):
        return self._eval(t, y, self._k0)

    def attempt(self, t, y, f, h):
        xp = self.xp
        K = self.K
        s = self.tableau.n_stages
        if f is not self._k0:
            self._k0[...] = f
        for i in range(1, s):
            self._eval(t + self._c[i] * h, y + K[:i].T @ (self._A[i] * h), K[i])
        y_new = y + K[:s].T @ (self._b * h)
        f_new = self._eval(t + h, y_new, self._ks)
        scale = self.atol + self.rtol * xp.maximum(xp.abs(y), xp.abs(y_new))
        if self._e3 is None:
            err = abs(h) * rms_norm((K.T @ self._e) / scale, xp)
        else:
            e5 = (K.T @ self._e) / scale
            e3 = (K.T @ self._e3) / scale
            n5 = float(xp.sum(e5 * e5))
            n3 = float(xp.sum(e3 * e3))
            err = 0.0 if n5 == 0.0 else abs(h) * n5 / np.sqrt((n5 + 0.01 * n3) * self.n)
        if not bool(xp.all(xp.isfinite(y_new))) or not bool(xp.all(xp.isfinite(f_new))):
            err = np.inf
        return y_new, f_new, err

    def accept(self, f_new):
        self._k0[...] = self._ks
        return self._k0

    def stiffness(self, h, y_new):
        """Hairer's estimate ``|f(y_new) - f(Y_{s-1})| / |y_new - Y_{s-1}|`` of the step
        just accepted (:func:`~linearnets.sim.methods.base.stiffness_estimate`)."""
        xp = self.xp
        K = self.K
        s = self.tableau.n_stages
        dv = K[s] - K[s - 1]
        dy = K[:s].T @ self._wd
        return stiffness_estimate(sumsq(dv, xp), sumsq(dy, xp), sumsq(K[0], xp), self._wsum, h,
                                  sumsq(y_new, xp))

    def interpolate(self, theta, y, y_new, h):
        """The state at ``t + theta h`` inside the step just accepted, ``y + h sum_j
        B_j(theta) K_j`` (``Tableau.dense_weights``)."""
        return y + self.K.T @ (self.xp.asarray(self.tableau.dense_weights(theta)) * h)


class RK45(ExplicitRK):
    tableau = _tableaux.RK45


class DOP853(ExplicitRK):
    tableau = _tableaux.DOP853


class SSPRK104(ExplicitRK):
    tableau = _tableaux.SSPRK104


class BS32(ExplicitRK):
    tableau = BS32_TABLEAU


class HE21(ExplicitRK):
    tableau = HE21_TABLEAU


#: Method name -> stepper class.
STEPPERS = {cls.tableau.name: cls for cls in (RK45, DOP853, SSPRK104, BS32, HE21)}
