"""Every tableau of the simulator's methods, stored as data (docs/simulator.md, "Module
overviews", for the conventions and sources)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.integrate as _scipy_ivp

__all__ = ["Tableau", "LowStorage", "RosenbrockW", "RK45", "DOP853", "SSPRK104", "BS32",
           "HE21", "TSIT5", "SSPRK104_LOW_STORAGE", "ROS34PW2", "TABLEAUX", "cubic_hermite",
           "expand_low_storage"]


def _frozen(a):
    a = np.ascontiguousarray(a, dtype=np.float64)
    a.setflags(write=False)
    return a


@dataclass(frozen=True)
class Tableau:
    """An embedded explicit Runge-Kutta pair (conventions: docs/simulator.md, "Module overviews").

    Attributes
    ----------
    name : str
    order, error_order : int
        Orders of the propagated solution and of the error estimator (the local error
        scales as ``h**(error_order + 1)``).
    A, b, c : ndarray, shapes (s, s), (s,), (s,)
        Strictly lower-triangular stage matrix, weights of the solution, nodes.
    e, e3 : ndarray, shape (s + 1,), e3 or None
        Error weights (the last entry multiplies ``f(y_new)``); DOP853's third-order
        companion weights of its error norm.
    stability_boundary : float
        ``|R(z)| <= 1`` for ``-stability_boundary <= z <= 0``, ``R(z) = 1 + z b^T (I - z
        A)^-1 1`` (checked in the tests): it caps ``h`` on gradient flow's real spectrum.
    dense_P : ndarray, shape (s + 1, d), or None
        The continuous extension ``y(t + theta h) = y + h sum_j B_j(theta) K_j`` (``K_s =
        f(y_new)``), ``B_j(theta) = sum_p dense_P[j, p] theta^(p+1)`` (:meth:`dense_weights`).
    dense_order : int
        Its order: the interpolation error on a step is ``O(h^(dense_order + 1))``.
    """

    name: str
    order: int
    error_order: int
    A: np.ndarray
    b: np.ndarray
    c: np.ndarray
    e: np.ndarray
    e3: "np.ndarray | None" = None
    stability_boundary: float = 0.0
    dense_P: "np.ndarray | None" = None
    dense_order: int = 0

    def __post_init__(self):
        fields = vars(self)
        for name in ("A", "b", "c", "e", "e3", "dense_P"):
            if fields[name] is not None:
                object.__setattr__(self, name, _frozen(fields[name]))

    @property
    def n_stages(self) -> int:
        return self.b.shape[0]

    @property
    def stiffness_weights(self):
        """``b - A[s-1]`` (s,): ``y_new - Y_{s-1} = h sum_j w_j K_j``, the denominator of
        Hairer's stiffness estimate (``dopri5.f``; needs ``c[s-1] = 1``)."""
        if self.c[-1] != 1.0:
            raise ValueError(f"{self.name}: the last stage is not at t + h")
        return self.b - self.A[-1]

    def dense_weights(self, theta):
        """``B_j(theta)`` of the continuous extension at ``0 <= theta <= 1``: (s + 1,) for a
        scalar ``theta``, (m, s + 1) for m of them (m,); ``B(0) = 0``, ``B(1) = (b, 0)`` up to
        rounding.  Horner's rule elementwise: the same numbers alone or among others."""
        if self.dense_P is None:
            raise ValueError(f"{self.name} has no continuous extension")
        th = np.asarray(theta, dtype=np.float64)[..., None]
        P = self.dense_P
        acc = P[:, -1] * th
        for p in range(P.shape[1] - 2, -1, -1):
            acc = (acc + P[:, p]) * th
        return np.ascontiguousarray(acc)


@dataclass(frozen=True)
class LowStorage:
    """A two-register explicit Runge-Kutta method (Ketcheson 2008, Sec. 4.3)::

        q1 = q2 = y
        q1 <- q1 + sub h f(q1)                       ``first`` times
        q2 <- mix[0] y + mix[1] q1,  q1 <- mix[2] q2 + mix[3] q1
        q1 <- q1 + sub h f(q1)                       until stage ``stages - 2``
        y_new = q2 + last[0] q1 + last[1] h f(q1)    (the last stage)

    with an embedded estimate from ``error_weights`` on the stages ``error_slots``:
    ``h sum_j (b_j - bhat_j) K_j = y_new - y - h sum_j w_j K_{slot_j}``, every ``b_j``
    being the same ``last[1]``.
    """

    stages: int
    first: int
    sub: float
    mix: tuple
    last: tuple
    error_slots: np.ndarray
    error_weights: np.ndarray


def expand_low_storage(ls):
    """``(A, b, bhat)`` of the Butcher form of a :class:`LowStorage` method: the recurrence
    run on the coefficients of each register over ``(y, K_0, ..., K_{s-1})``."""
    s = ls.stages
    q1, rows = np.eye(s + 1)[0], []
    for k in range(s - 1):
        rows.append(q1.copy())
        q1[k + 1] += ls.sub
        if k + 1 == ls.first:
            q2 = ls.mix[0] * np.eye(s + 1)[0] + ls.mix[1] * q1
            q1 = ls.mix[2] * q2 + ls.mix[3] * q1
    rows.append(q1.copy())
    b = q2 + ls.last[0] * q1
    b[s] += ls.last[1]
    bhat = np.zeros(s)
    bhat[ls.error_slots] = ls.error_weights
    return np.array(rows)[:, 1:], b[1:], bhat


@dataclass(frozen=True)
class RosenbrockW:
    """A Rosenbrock(-W) method in the standard form (Hairer-Wanner II, IV.7)

        (I - h gamma J) k_i = h f(y + sum_j alpha_ij k_j) + h J sum_{j<i} gamma_ij k_j,
        y_new = y + sum_i b_i k_i,   embedded  y_hat = y + sum_i bhat_i k_i .

    The stepper uses the equivalent form without products by J on the right:
    ``U_i = sum_j Gamma_ij k_j`` (``Gamma = gamma_ij + gamma I``),

        (I - h gamma J) U_i = h gamma f(y + sum_j a_ij U_j) + gamma sum_{j<i} c_ij U_j,
        a = alpha Gamma^-1,  c = diag(1/gamma) - Gamma^-1,  m = b Gamma^-1 .
    """

    name: str
    order: int
    error_order: int
    gamma: float
    alpha: np.ndarray
    gamma_ij: np.ndarray
    b: np.ndarray
    bhat: np.ndarray

    @property
    def n_stages(self):
        return self.b.size

    def transformed(self):
        """``(a, c, m, e)``: stage, coupling, solution and error weights of the U-form."""
        Gam = self.gamma_ij + self.gamma * np.eye(self.n_stages)
        Gi = np.linalg.inv(Gam)
        # clean the rounding residue off the structural zeros (the stepper skips zeros)
        a = np.tril(self.alpha @ Gi, -1)
        c = np.tril(np.diag(1.0 / np.diag(Gam)) - Gi, -1)
        m = self.b @ Gi
        e = (self.b - self.bhat) @ Gi
        return a, c, m, e


def cubic_hermite(theta):
    """``(h01, h10, h11)``: the cubic Hermite weights of ``y_new - y``, ``h f(y)`` and
    ``h f(y_new)`` at ``theta``: ``y(t + theta h) ~ y + h01 (y_new - y) + h (h10 f(y) + h11
    f(y_new))``, exact for cubics, so of order 3."""
    u = 1.0 - theta
    return theta * theta * (3.0 - 2.0 * theta), theta * u * u, -theta * theta * u


def _hermite_P(b):
    """:func:`cubic_hermite` on a tableau's stages (``y_new - y = h sum_j b_j K_j``, K_0 =
    f(y), K_s = f(y_new)) as ``dense_P`` rows (coefficients of theta, theta^2, theta^3)."""
    s = b.size
    P = np.zeros((s + 1, 3))
    P[:s] = np.outer(b, [0.0, 3.0, -2.0])      # h01 = 3 theta^2 - 2 theta^3
    P[0] += [1.0, -2.0, 1.0]                   # h10 = theta - 2 theta^2 + theta^3
    P[s] = [0.0, -1.0, 1.0]                    # h11 = -theta^2 + theta^3
    return P


# BS32: e is b (with 0 for f(y_new)) minus the order-2 weights (7/24, 1/4, 1/3, 1/8)
BS32 = Tableau("BS32", 3, 2, [[0, 0, 0], [1 / 2, 0, 0], [0, 3 / 4, 0]], [2 / 9, 1 / 3, 4 / 9],
               [0, 1 / 2, 3 / 4], [2 / 9 - 7 / 24, 1 / 3 - 1 / 4, 4 / 9 - 1 / 3, -1 / 8],
               stability_boundary=2.5127)
HE21 = Tableau("HE21", 2, 1, [[0, 0], [1, 0]], [1 / 2, 1 / 2], [0, 1], [1 / 2 - 1, 1 / 2, 0],
               stability_boundary=2.0)

#: SSPRK(10,4): five Euler substeps of h/6, q2 = (q2 + 9 q1)/25, q1 = 15 q2 - 5 q1, four
#: more substeps, y_new = q2 + 3/5 q1 + h/10 f(q1); its third-order companion is
#: ``bhat = (0, 2/9, 0, 0, 5/18, 1/3, 0, 0, 0, 1/6)``.
SSPRK104_LOW_STORAGE = LowStorage(
    stages=10, first=5, sub=1.0 / 6.0, mix=(1.0 / 25.0, 9.0 / 25.0, 15.0, -5.0),
    last=(3.0 / 5.0, 1.0 / 10.0), error_slots=_frozen(np.array([1, 4, 5, 9])).astype(np.int64),
    error_weights=_frozen([2.0 / 9.0, 5.0 / 18.0, 1.0 / 3.0, 1.0 / 6.0]))
_SSP104_A, _SSP104_B, _SSP104_BHAT = expand_low_storage(SSPRK104_LOW_STORAGE)

# RK45 (Dormand & Prince 1980) with Shampine's (1986) quartic extension and DOP853 (HNW I,
# II.10): scipy.integrate's coefficients.  Stability boundaries: the first root of
# |R(-x)| = 1, x > 0, rounded down (3.30657, 6.39365, 13.91704).
_R, _D = _scipy_ivp.RK45, _scipy_ivp.DOP853
RK45 = Tableau("RK45", 5, 4, np.pad(_R.A, ((0, 0), (0, 1))), _R.B, _R.C, _R.E,
               stability_boundary=3.3065, dense_P=_R.P, dense_order=4)
DOP853 = Tableau("DOP853", 8, 7, _D.A, _D.B, _D.C, _D.E5, _D.E3, stability_boundary=6.3936)
SSPRK104 = Tableau("SSPRK104", 4, 3, _SSP104_A, _SSP104_B,
                   [0.0, 1 / 6, 1 / 3, 0.5, 2 / 3, 1 / 3, 0.5, 2 / 3, 5 / 6, 1.0],
                   np.append(_SSP104_B - _SSP104_BHAT, 0.0), stability_boundary=13.917,
                   dense_P=_hermite_P(_SSP104_B), dense_order=3)

# Tsit5 (Tsitouras 2011, "Runge-Kutta pairs of order 5(4) satisfying only the first column
# simplifying assumption", Comput. Math. Appl. 62, 770-775) and its order-4 continuous
# extension (ibid.; the b_i(theta) below in factored form, b_7 on f(y_new)).  Real
# stability boundary 3.50684 (first root of |R(-x)| = 1, rounded down as the others).
_T5_A = np.zeros((6, 6))
_T5_A[1, 0] = 0.161
_T5_A[2, :2] = [-0.00848065549235698854443,
                0.335480655492356988544]
_T5_A[3, :3] = [2.89715305710549343213,
                -6.35944848997507484315,
                4.36229543286958141102]
_T5_A[4, :4] = [5.32586482843925660443,
                -11.7488835640628278777,
                7.49553934288983620830,
                -0.0924950663617552492565]
_T5_A[5, :5] = [5.86145544294642002866,
                -12.9209693178471092917,
                8.15936789857615864318,
                -0.0715849732814009972245,
                -0.0282690503940683829090]
_T5_B = np.array([0.0964607668180652295182,
                  0.01,
                  0.479889650414499574775,
                  1.37900857410374189319,
                  -3.29006951543608067990,
                  2.32471052409977398242])
# the embedded order-4 weights (the last on f(y_new))
_T5_BHAT = np.array([0.0946807557658394580748,
                     0.00918356554034325309678,
                     0.487770528424761570786,
                     1.23429756693047898566,
                     -2.70771234998352545488,
                     1.86662841817058703575,
                     1.0 / 66.0])


def _tsit5_dense_P():
    """Tsitouras's b_i(theta), each a polynomial of degree 4 without a constant term, as
    ``dense_P`` rows (coefficients of theta .. theta^4)."""
    P = np.polynomial.polynomial
    rows = [-1.0530884977290216 * P.polyfromroots([0.0, 1.3299890189751412]),
            0.1017 * P.polyfromroots([0.0, 0.0]),
            2.490627285651252793 * P.polyfromroots([0.0, 0.0]),
            -16.54810288924490272 * P.polyfromroots([0.0, 0.0, 1.21712927295533244,
                                                     0.61620406037800089]),
            47.37952196281928122 * P.polyfromroots([0.0, 0.0, 1.203071208372362603,
                                                    0.658047292653547382]),
            -34.87065786149660974 * P.polyfromroots([0.0, 0.0, 1.2, 2.0 / 3.0]),
            2.5 * P.polyfromroots([0.0, 0.0, 1.0, 0.6])]
    rows[0] = P.polymul(rows[0], [0.7139816917074209, -1.4364028541716351, 1.0])
    rows[1] = P.polymul(rows[1], [1.2949852507374631, -2.1966568338249754, 1.0])
    rows[2] = P.polymul(rows[2], [1.57803468208092486, -2.38535645472061657, 1.0])
    dense = np.array([np.pad(r, (0, 5 - r.size))[1:] for r in rows])
    # the published roots carry 16-19 digits: set B(1) = (b, 0) exactly (a change of the
    # theta^4 coefficients below 1e-14)
    dense[:, -1] += np.append(_T5_B, 0.0) - dense.sum(axis=1)
    return dense


TSIT5 = Tableau("Tsit5", 5, 4, _T5_A, _T5_B, _T5_A.sum(axis=1),
                np.append(_T5_B, 0.0) - _T5_BHAT, stability_boundary=3.5068,
                dense_P=_tsit5_dense_P(), dense_order=4)

#: Name -> explicit pair.
TABLEAUX = {t.name: t for t in (RK45, DOP853, SSPRK104, BS32, HE21, TSIT5)}


#: Rang & Angermann (2005), Table 3 (ROS34PW2).
ROS34PW2 = RosenbrockW(
    name="ROS34PW2", order=3, error_order=2, gamma=4.3586652150845900e-1,
    alpha=np.array([[0.0, 0.0, 0.0, 0.0], [8.7173304301691801e-1, 0.0, 0.0, 0.0],
                    [8.4457060015369423e-1, -1.1299064236484185e-1, 0.0, 0.0],
                    [0.0, 0.0, 1.0, 0.0]]),
    gamma_ij=np.array([
        [0.0, 0.0, 0.0, 0.0], [-8.7173304301691801e-1, 0.0, 0.0, 0.0],
        [-9.0338057013044082e-1, 5.4180672388095326e-2, 0.0, 0.0],
        [2.4212380706095346e-1, -1.2232505839045147, 5.4526025533510214e-1, 0.0]]),
    b=np.array([2.4212380706095346e-1, -1.2232505839045147, 1.5452602553351020,
                4.3586652150845900e-1]),
    bhat=np.array([3.7810903145819369e-1, -9.6042292212423178e-2, 0.5,
                   2.1793326075422950e-1]))
