"""Every tableau of the simulator's methods, stored as data: one module for all of them.

Explicit embedded pairs (:class:`Tableau`; one stepper, ``methods.erk.ExplicitRK``, and
one compiled loop advance any of them).  Conventions (those of Hairer-Norsett-Wanner and
of ``scipy.integrate``):

* stages ``K_i = f(y + h sum_{j<i} A_ij K_j)``, ``i = 0..s-1``; the step is
  ``y_new = y + h sum_i b_i K_i`` (local extrapolation: the higher order is kept);
* the error weights ``e`` have ``s + 1`` entries, the last one multiplying
  ``f(y_new)``, which every pair here evaluates anyway and reuses as the first
  stage of the next step (first same as last), so an attempted step costs ``s``
  right-hand-side evaluations;
* ``e3`` (DOP853 only) is the third-order companion estimate; the error norm is
  then ``|err5|^2 / sqrt(|err5|^2 + 0.01 |err3|^2)`` (Hairer's DOP853 norm),
  otherwise the plain RMS norm of ``h sum e_i K_i`` scaled by
  ``atol + rtol max(|y|, |y_new|)``.

The pairs: RK45 (Dormand & Prince, J. Comput. Appl. Math. 6 (1980) 19-26) and DOP853
(Hairer, Norsett & Wanner, *Solving ODEs I*, Sec. II.10), the digits those of
``scipy.integrate``; BS32 (Bogacki & Shampine, Appl. Math. Lett. 2 (1989) 321-325, order 3
with an order-2 estimate, scipy's ``RK23``) and HE21 (Heun's method with the Euler step as
its estimate), the low-order pairs at kinks; and SSPRK104, Ketcheson's ten-stage,
fourth-order strong-stability-preserving method (SIAM J. Sci. Comput. 30 (2008)
2113-2136), stored in its two-register low-storage form (:data:`SSPRK104_LOW_STORAGE`,
which ``methods/ssp.py`` and the compiled low-storage loop run) and expanded from it into
its Butcher tableau :data:`SSPRK104` (:func:`expand_low_storage`): ten right-hand sides a
step buy a real-axis stability interval of 13.92, 1.39 per evaluation against 0.55 (RK45)
and 0.53 (DOP853).  Its error estimate compares it with the third-order weights ``bhat``
on the same stages (they satisfy the four order-3 conditions, checked in the tests).

Continuous extensions (``dense_P``, for ``dense=True``): RK45's order-4 quartic (Shampine
1986, see ``_RK45_P``), and for SSPRK104 the cubic Hermite interpolant on the step's ends
and their derivatives (:func:`cubic_hermite`), order 3 like its error estimate.

The Rosenbrock-W method ROS34PW2 (:class:`RosenbrockW`; Rang & Angermann, BIT 45 (2005)
761-787), the stiff method of ``methods/rosw.py``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Tableau", "LowStorage", "RosenbrockW", "RK45", "DOP853", "SSPRK104", "BS32",
           "HE21", "SSPRK104_LOW_STORAGE", "ROS34PW2", "TABLEAUX", "cubic_hermite",
           "expand_low_storage"]


def _frozen(a):
    a = np.ascontiguousarray(a, dtype=np.float64)
    a.setflags(write=False)
    return a


@dataclass(frozen=True)
class Tableau:
    """An embedded explicit Runge-Kutta pair.

    Attributes
    ----------
    name : str
    order : int
        Order of the propagated solution.
    error_order : int
        Order of the error estimator: the local error scales as ``h**(error_order + 1)``.
    A : ndarray, shape (s, s)
        Strictly lower-triangular stage matrix.
    b : ndarray, shape (s,)
        Weights of the propagated solution.
    c : ndarray, shape (s,)
        Nodes.
    e : ndarray, shape (s + 1,)
        Error weights (last entry multiplies ``f(y_new)``).
    e3 : ndarray, shape (s + 1,) or None
        Companion third-order error weights (DOP853 error norm), or None.
    stability_boundary : float
        Length of the stability interval on the negative real axis: ``|R(z)| <= 1``
        for ``-stability_boundary <= z <= 0``, ``R(z) = 1 + z b^T (I - z A)^-1 1``
        the stability function (computed from the coefficients; checked in the tests).
        Gradient flow has a real spectrum (its Jacobian is minus a Hessian), so
        this is the boundary that caps ``h`` once some modes have converged.
    dense_P : ndarray, shape (s + 1, d), or None
        The continuous extension ``y(t + theta h) = y + h sum_j B_j(theta) K_j`` over the
        stages and ``K_s = f(y_new)``, ``B_j(theta) = sum_p dense_P[j, p] theta^(p+1)``
        (:meth:`dense_weights`); None when the pair has none that is used (see
        ``_RK45_P``).
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

    @property
    def n_stages(self) -> int:
        return self.b.shape[0]

    @property
    def stiffness_weights(self):
        """``b - A[s-1]`` (s,): ``y_new - Y_{s-1} = h sum_j w_j K_j``.

        The last stage and the new state both sit at ``t + h`` (``c[s-1] = 1``), so
        ``|f(y_new) - f(Y_{s-1})| / |y_new - Y_{s-1}|`` estimates the stiffness
        (Hairer's test, ``dopri5.f``/``dop853.f``); these weights give the denominator
        from the stored stages.
        """
        if self.c[-1] != 1.0:
            raise ValueError(f"{self.name}: the last stage is not at t + h")
        return self.b - self.A[-1]

    def dense_weights(self, theta):
        """``B_j(theta)`` of the continuous extension at ``0 <= theta <= 1``: (s + 1,) for a
        scalar ``theta``, (m, s + 1) for m of them (m,).

        ``B(0) = 0`` and ``B(1) = (b, 0)`` up to rounding.  Evaluated by Horner's rule in
        elementwise operations, so that the weights at one ``theta`` are the same numbers
        whether it comes alone or among others (the compiled steppers interpolate all
        outputs inside a step at once, the numpy reference one at a time; a matrix
        product could round differently with the batch's size).
        """
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
    q1, rows = np.zeros(s + 1), []
    q1[0] = 1.0
    for k in range(s - 1):
        rows.append(q1.copy())
        q1[k + 1] += ls.sub
        if k + 1 == ls.first:
            y = np.zeros(s + 1)
            y[0] = 1.0
            q2 = ls.mix[0] * y + ls.mix[1] * q1
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


_RK45_A = np.array([
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.2, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.075, 0.225, 0.0, 0.0, 0.0, 0.0],
    [0.9777777777777777, -3.7333333333333334, 3.5555555555555554, 0.0, 0.0, 0.0],
    [2.9525986892242035, -11.595793324188385, 9.822892851699436, -0.2908093278463649, 0.0, 0.0],
    [2.8462752525252526, -10.757575757575758, 8.906422717743473, 0.2784090909090909,
     -0.2735313036020583, 0.0],
])
_RK45_B = np.array([
    0.09114583333333333,
    0.0,
    0.44923629829290207,
    0.6510416666666666,
    -0.322376179245283,
    0.13095238095238096,
])
_RK45_C = np.array([
    0.0,
    0.2,
    0.3,
    0.8,
    0.8888888888888888,
    1.0,
])
_RK45_E = np.array([
    -0.0012326388888888888,
    0.0,
    0.0042527702905061394,
    -0.03697916666666667,
    0.05086379716981132,
    -0.0419047619047619,
    0.025,
])
_DOP853_A = np.array([
    [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.05260015195876773, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.0197250569845379, 0.0591751709536137, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.02958758547680685, 0.0, 0.08876275643042054, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.2413651341592667, 0.0, -0.8845494793282861, 0.924834003261792, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
     0.0, 0.0],
    [0.037037037037037035, 0.0, 0.0, 0.17082860872947386, 0.12546768756682242, 0.0, 0.0, 0.0, 0.0,
     0.0, 0.0, 0.0],
    [0.037109375, 0.0, 0.0, 0.17025221101954405, 0.06021653898045596, -0.017578125, 0.0, 0.0, 0.0,
     0.0, 0.0, 0.0],
    [0.03709200011850479, 0.0, 0.0, 0.17038392571223998, 0.10726203044637328,
     -0.015319437748624402, 0.008273789163814023, 0.0, 0.0, 0.0, 0.0, 0.0],
    [0.6241109587160757, 0.0, 0.0, -3.3608926294469414, -0.868219346841726, 27.59209969944671,
     20.154067550477894, -43.48988418106996, 0.0, 0.0, 0.0, 0.0],
    [0.47766253643826434, 0.0, 0.0, -2.4881146199716677, -0.590290826836843, 21.230051448181193,
     15.279233632882423, -33.28821096898486, -0.020331201708508627, 0.0, 0.0, 0.0],
    [-0.9371424300859873, 0.0, 0.0, 5.186372428844064, 1.0914373489967295, -8.149787010746927,
     -18.52006565999696, 22.739487099350505, 2.4936055526796523, -3.0467644718982196, 0.0, 0.0],
    [2.273310147516538, 0.0, 0.0, -10.53449546673725, -2.0008720582248625, -17.9589318631188,
     27.94888452941996, -2.8589982771350235, -8.87285693353063, 12.360567175794303,
     0.6433927460157636, 0.0],
])
_DOP853_B = np.array([
    0.054293734116568765,
    0.0,
    0.0,
    0.0,
    0.0,
    4.450312892752409,
    1.8915178993145003,
    -5.801203960010585,
    0.3111643669578199,
    -0.1521609496625161,
    0.20136540080403034,
    0.04471061572777259,
])
_DOP853_C = np.array([
    0.0,
    0.05260015195876773,
    0.0789002279381516,
    0.1183503419072274,
    0.2816496580927726,
    0.3333333333333333,
    0.25,
    0.3076923076923077,
    0.6512820512820513,
    0.6,
    0.8571428571428571,
    1.0,
])
_DOP853_E5 = np.array([
    0.01312004499419488,
    0.0,
    0.0,
    0.0,
    0.0,
    -1.2251564463762044,
    -0.4957589496572502,
    1.6643771824549864,
    -0.35032884874997366,
    0.3341791187130175,
    0.08192320648511571,
    -0.022355307863886294,
    0.0,
])
_DOP853_E3 = np.array([
    -0.18980075407240762,
    0.0,
    0.0,
    0.0,
    0.0,
    4.450312892752409,
    1.8915178993145003,
    -5.801203960010585,
    -0.4226823213237919,
    -0.1521609496625161,
    0.20136540080403034,
    0.02265179219836082,
    0.0,
])

# RK45's continuous extension (the quartic of Shampine, Math. Comp. 46 (1986) 135-150, as
# scipy.integrate's RK45.P, whose digits these are): order 4, free (it uses the stages and
# f(y_new) only), and bounded by 1 in modulus on the test equation wherever the stability
# cap lets a step go (h lam up to 0.9 of the stability interval; 1.08 at its end), so
# converged modes stay damped between steps (tests/sim/test_dense.py).
# DOP853's order-7 extension (dop853.f, three extra stages) is not used: on the escape of a
# saddle, where a step spans the escape's own time scale, scipy's dense output of DOP853 (the
# same coefficients) misses the flow by 160x rtol at rtol 1e-5 and by 2600x at 1e-8 inside
# steps whose end points meet the tolerance, where RK45's stays within 1.2 rtol
# (benchmarks/studies/study_dense_output.py).
_RK45_P = np.array([
    [1.0, -2.8535800653862835, 3.0717434641059005, -1.1270175653862835],
    [0.0, 0.0, 0.0, 0.0],
    [0.0, 4.023133379230305, -6.249321565289, 2.675424484351598],
    [0.0, -3.7324019615885042, 10.068970589843675, -5.685526961588504],
    [0.0, 2.5548038301849423, -6.399112377351017, 3.5219323679207912],
    [0.0, -1.3744241142186024, 3.272657752246729, -1.7672812570757455],
    [0.0, 1.3824689317781436, -3.764937863556287, 2.382468931778144],
])


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


BS32 = Tableau(
    "BS32", 3, 2,
    _frozen([[0, 0, 0], [1 / 2, 0, 0], [0, 3 / 4, 0]]),
    _frozen([2 / 9, 1 / 3, 4 / 9]),
    _frozen([0, 1 / 2, 3 / 4]),
    # b (with 0 for f(y_new)) minus the order-2 weights (7/24, 1/4, 1/3, 1/8)
    _frozen([2 / 9 - 7 / 24, 1 / 3 - 1 / 4, 4 / 9 - 1 / 3, -1 / 8]),
    stability_boundary=2.5127)
HE21 = Tableau(
    "HE21", 2, 1,
    _frozen([[0, 0], [1, 0]]),
    _frozen([1 / 2, 1 / 2]),
    _frozen([0, 1]),
    _frozen([1 / 2 - 1, 1 / 2, 0]),
    stability_boundary=2.0)

#: SSPRK(10,4): five Euler substeps of h/6, q2 = (q2 + 9 q1)/25, q1 = 15 q2 - 5 q1, four
#: more substeps, y_new = q2 + 3/5 q1 + h/10 f(q1); its third-order companion is
#: ``bhat = (0, 2/9, 0, 0, 5/18, 1/3, 0, 0, 0, 1/6)``.
SSPRK104_LOW_STORAGE = LowStorage(
    stages=10, first=5, sub=1.0 / 6.0, mix=(1.0 / 25.0, 9.0 / 25.0, 15.0, -5.0),
    last=(3.0 / 5.0, 1.0 / 10.0), error_slots=_frozen(np.array([1, 4, 5, 9])).astype(np.int64),
    error_weights=_frozen([2.0 / 9.0, 5.0 / 18.0, 1.0 / 3.0, 1.0 / 6.0]))
_SSP104_A, _SSP104_B, _SSP104_BHAT = expand_low_storage(SSPRK104_LOW_STORAGE)

# stability boundaries: the first root of |R(-x)| = 1, x > 0, rounded down (3.30657, 6.39365,
# 13.91704)
RK45 = Tableau("RK45", 5, 4, _frozen(_RK45_A), _frozen(_RK45_B), _frozen(_RK45_C), _frozen(_RK45_E),
               stability_boundary=3.3065, dense_P=_frozen(_RK45_P), dense_order=4)
DOP853 = Tableau("DOP853", 8, 7, _frozen(_DOP853_A), _frozen(_DOP853_B), _frozen(_DOP853_C),
                 _frozen(_DOP853_E5), _frozen(_DOP853_E3), stability_boundary=6.3936)
SSPRK104 = Tableau("SSPRK104", 4, 3, _frozen(_SSP104_A), _frozen(_SSP104_B),
                   _frozen([0.0, 1 / 6, 1 / 3, 0.5, 2 / 3, 1 / 3, 0.5, 2 / 3, 5 / 6, 1.0]),
                   _frozen(np.append(_SSP104_B - _SSP104_BHAT, 0.0)), stability_boundary=13.917,
                   dense_P=_frozen(_hermite_P(_SSP104_B)), dense_order=3)

#: Name -> explicit pair.
TABLEAUX = {t.name: t for t in (RK45, DOP853, SSPRK104, BS32, HE21)}


#: Rang & Angermann (2005), Table 3 (ROS34PW2).
ROS34PW2 = RosenbrockW(
    name="ROS34PW2", order=3, error_order=2, gamma=4.3586652150845900e-1,
    alpha=np.array([
        [0.0, 0.0, 0.0, 0.0],
        [8.7173304301691801e-1, 0.0, 0.0, 0.0],
        [8.4457060015369423e-1, -1.1299064236484185e-1, 0.0, 0.0],
        [0.0, 0.0, 1.0, 0.0]]),
    gamma_ij=np.array([
        [0.0, 0.0, 0.0, 0.0],
        [-8.7173304301691801e-1, 0.0, 0.0, 0.0],
        [-9.0338057013044082e-1, 5.4180672388095326e-2, 0.0, 0.0],
        [2.4212380706095346e-1, -1.2232505839045147, 5.4526025533510214e-1, 0.0]]),
    b=np.array([2.4212380706095346e-1, -1.2232505839045147, 1.5452602553351020,
                4.3586652150845900e-1]),
    bhat=np.array([3.7810903145819369e-1, -9.6042292212423178e-2, 0.5,
                   2.1793326075422950e-1]),
)
