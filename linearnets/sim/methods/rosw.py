"""A Rosenbrock-W stepper, ROS34PW2 (Rang & Angermann, BIT 45 (2005) 761), for any model
and array namespace (docs/simulator.md, "Methods" and "Module overviews")."""
from __future__ import annotations

import math

import numpy as np

from .base import Stepper, error_norm
from .tableaux import ROS34PW2 as ROS34PW2_TABLEAU

__all__ = ["RosenbrockWStepper", "ROS34PW2", "ROSENBROCK", "KRYLOV_TOL", "MAX_KRYLOV",
           "FAILED_SOLVE_ERR"]

#: A Krylov solve stops when the RMS of its residual over ``atol + rtol |y|`` is below this.
KRYLOV_TOL = 1e-1
#: Products allowed in one Krylov solve; more rejects the step.
MAX_KRYLOV = 60
#: The error norm of a step whose Krylov solve failed: finite, far above 1 (a rejection).
FAILED_SOLVE_ERR = 1e3

_U = np.finfo(np.float64).eps


def _vdot(xp, a, b):
    return float(xp.vdot(a, b))


class RosenbrockWStepper(Stepper):
    """ROS34PW2 on ``rhs(t, y)`` with Krylov (CG) stage solves (docs/simulator.md, "Module
    overviews").  Class attributes, set by :meth:`bind`:

    jvp : callable ``jvp(y, v) -> J(y) v`` or None
        None: forward finite differences of ``rhs`` (unless ``linearize``).
    linearize : callable ``linearize(y) -> (v -> J(y) v, fresh)`` or None
        A model's exact product frozen at ``y``; ``fresh``: it evaluated the gradient's
        products at ``y`` (one evaluation), else it reused its latest right-hand side's.
    metric : ndarray (n,) or None
        Positive weights ``M`` with ``M J`` symmetric (None: the identity).
    JVP_COST : float
        A product's cost in right-hand sides (1 for a forward difference).
    EVALUATE_REJECTED : bool
        Evaluate ``f(y_new)`` of a rejected step too (a kink model's switch pattern).
    """

    tableau = ROS34PW2_TABLEAU
    n_evals = 0
    MAX_FACTOR = 5.0
    JVP_COST = 1.0
    EVALUATE_REJECTED = True
    jvp = None
    linearize = None
    metric = None
    krylov_tol = KRYLOV_TOL
    max_krylov = MAX_KRYLOV

    @classmethod
    def bind(cls, jvp=None, metric=None, linearize=None, **attrs):
        """A subclass with ``jvp``, ``linearize``, ``metric`` (and class attributes such as
        ``JVP_COST``) bound: what ``integrate`` instantiates."""
        attrs.update(jvp=staticmethod(jvp) if jvp is not None else None, metric=metric,
                     linearize=staticmethod(linearize) if linearize is not None else None)
        return type(cls.__name__, (cls,), attrs)

    def __init__(self, rhs, n, rtol, atol, xp=np, fun=None):
        super().__init__(rhs, n, rtol, atol, xp, fun=fun)
        self._a, self._c, self._m, self._e = self.tableau.transformed()
        self._g = float(self.tableau.gamma)
        self._ct = [float(v) for v in self.tableau.alpha.sum(axis=1)]
        self._M = None if self.metric is None else xp.asarray(self.metric, dtype=xp.float64)
        if self._M is not None and self._M.shape != (self.n,):
            raise ValueError(f"metric: expected shape ({self.n},), got {self._M.shape}")
        #: evaluations (right-hand sides and Krylov products) of the last attempt
        self.n_evals = self.tableau.n_stages
        self._fi = xp.empty(self.n)
        #: the largest Rayleigh quotient of ``-J`` met since the last accepted step
        self.rho = 0.0
        self.n_rhs = self.n_jvp = self.n_failed = 0

    def _freeze(self, t, y, f):
        """``(v -> J v, evaluations made)`` at the base point ``(t, y)``, ``f = rhs(t, y)``."""
        xp = self.xp
        if self.linearize is not None:
            Jv, fresh = self.linearize(y)
            return Jv, int(fresh)
        if self.jvp is not None:
            return (lambda v: self.jvp(y, v)), 0
        ny = math.sqrt(_vdot(xp, y, y))
        num = math.sqrt(_U * (1.0 + ny))
        buf = xp.empty_like(y)

        def fd(v):
            nv = math.sqrt(_vdot(xp, v, v))
            if nv == 0.0:
                return xp.zeros_like(v)
            eps = num / nv
            return (self._eval(t, y + eps * v, buf) - f) * (1.0 / eps)
        return fd, 0

    def _dot(self, a, b):
        if self._M is None:
            return _vdot(self.xp, a, b)
        return float(self.xp.sum(self._M * a * b))

    def _solve(self, Jv, hg, b, scale):
        """CG in the ``metric`` inner product on ``(I - hg J) x = b``: ``(x or None, products)``;
        raises :attr:`rho` to the largest Rayleigh quotient ``-<p, J p>_M / <p, p>_M`` met."""
        xp = self.xp
        n = b.size
        x = b.copy()
        Jx = Jv(x)
        xx = self._dot(x, x)
        if xx > 0.0:
            self._raise_rho(-self._dot(x, Jx) / xx)
        r = Jx * hg                          # b - (x - hg J x) with x = b
        its = 1

        def small(res):
            v = res / scale
            s = _vdot(xp, v, v)
            return math.isfinite(s) and math.sqrt(s / n) <= self.krylov_tol
        if small(r):
            return x, its
        p = r.copy()
        rr = self._dot(r, r)
        pp = rr
        while its < self.max_krylov:
            Ap = p - hg * Jv(p)
            its += 1
            pAp = self._dot(p, Ap)
            if not (pAp > 0.0 and math.isfinite(pAp)):
                return None, its
            self._raise_rho((pAp - pp) / (hg * pp))
            alpha = rr / pAp
            x += alpha * p
            r -= alpha * Ap
            if small(r):
                return x, its
            rr_new = self._dot(r, r)
            if not math.isfinite(rr_new):
                return None, its
            p *= rr_new / rr
            p += r
            rr = rr_new
            pp = self._dot(p, p)
        return None, its

    def _raise_rho(self, q):
        if math.isfinite(q) and q > self.rho:
            self.rho = q

    @property
    def cost(self) -> float:
        """The work so far in right-hand-side units: ``n_rhs + JVP_COST n_jvp``."""
        return self.n_rhs + self.JVP_COST * self.n_jvp

    def accept(self, f_new):
        """The step is accepted: the Rayleigh-quotient estimate :attr:`rho` starts afresh."""
        self.rho = 0.0
        return f_new

    def attempt(self, t, y, f, h):
        xp = self.xp
        a, c, m, e, g = self._a, self._c, self._m, self._e, self._g
        hg = h * g
        scale = self.atol + self.rtol * xp.abs(y)
        Jv, nrhs = self._freeze(t, y, f)
        njvp = 0
        U = []
        for i in range(self.tableau.n_stages):
            if i == 0:
                fi = f
            else:
                Yi = y.copy()
                for j in range(i):
                    if a[i, j] != 0.0:
                        Yi += a[i, j] * U[j]
                fi = self._eval(t + h * self._ct[i], Yi, self._fi)
                nrhs += 1
            b = fi * hg
            for j in range(i):
                if c[i, j] != 0.0:
                    b += (g * c[i, j]) * U[j]
            x, its = self._solve(Jv, hg, b, scale)
            njvp += its
            if x is None:
                self._count(nrhs, njvp)
                self.n_failed += 1
                return y, f, FAILED_SOLVE_ERR
            U.append(x)
        y_new = y.copy()
        errv = xp.zeros_like(y)
        for i in range(len(U)):
            y_new += m[i] * U[i]
            errv += e[i] * U[i]
        if not bool(xp.all(xp.isfinite(y_new))):
            self._count(nrhs, njvp)
            return y_new, None, np.inf
        v = errv / (self.atol + self.rtol * xp.maximum(xp.abs(y), xp.abs(y_new)))
        err = error_norm(_vdot(xp, v, v), n=self.n)
        f_new = None
        if err < 1.0 or self.EVALUATE_REJECTED:
            f_new = self.evaluate(t + h, y_new)
            nrhs += 1
        self._count(nrhs, njvp)
        if f_new is not None and not bool(xp.all(xp.isfinite(f_new))):
            return y_new, f_new, np.inf
        return y_new, f_new, err

    def _count(self, nrhs, njvp):
        self.n_evals = nrhs + int(round(self.JVP_COST * njvp))
        self.n_rhs += nrhs
        self.n_jvp += njvp


#: ROS34PW2 (Rang & Angermann 2005), and method name -> Rosenbrock-W stepper class (bind a
#: model's ``jvp``/``metric`` with ``cls.bind`` before handing it to ``integrate``).
ROS34PW2 = RosenbrockWStepper
ROSENBROCK = {"ROS34PW2": ROS34PW2}
