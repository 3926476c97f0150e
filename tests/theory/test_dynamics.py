"""Mode dynamics: exact c(t), its inverse t(c), time scales and loss curves.

Independent witnesses: scipy's solve_ivp on the ODE (in log c), and mpmath quadrature of
t(c) at 30 digits.  Near the escape from a long plateau c(t) is ill-conditioned in t, so
the tolerances on c carry the condition number kappa = t |dc/dt| / c, and those on t its
inverse: a result is accepted when it is exact for data perturbed by ~1e-13 relative.
"""
import math
import warnings

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, strategies as st
from scipy.integrate import solve_ivp

import linearnets as ln
from linearnets.theory import dynamics as dyn
from theory._reference_modes import t_ref

DEPTHS = [1, 2, 3, 4, 5, 6, 7, 8]
MANY_DEPTHS = [1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 20]


def rate(c, s, L, eta=1.0):
    return eta * L * c ** (2.0 - 2.0 / L) * (s - c)


def kappa_c(t, c, s, L, eta=1.0):
    """Condition number of c(t) with respect to t."""
    return t * np.abs(rate(c, s, L, eta)) / c


# ----------------------------------------------------------------- mpmath reference

mp.mp.dps = 30


def kappa_t(t, c, s, L, eta=1.0):
    """Condition number of t(c) with respect to c: c / (t |dc/dt|)."""
    return c / (t * abs(rate(c, s, L, eta)))


# ------------------------------------------------------------------- exact values

QUAD_MODES = [(1.0, 1e-3), (2.5, 0.4), (1e-3, 1e-12), (1.0, 0.999), (1.0, 1.001), (0.5, 3.0),
              (3.0, 1e4)]
QUAD_FRACS = [1e-6, 0.1, 0.5, 0.9, 0.999, 1 - 1e-7]


@pytest.mark.parametrize("L", [pytest.param(L, marks=pytest.mark.slow) if L in (5, 7, 8, 11, 20)
                               else L for L in MANY_DEPTHS])
def test_mode_time_matches_mpmath_quadrature(L):
    """Includes depths 6, 10, 12, where scipy's hyp2f1 is off by per cents near z=1."""
    worst = 0.0
    fast = L not in (5, 7, 8, 11, 20)
    for s, c0 in QUAD_MODES[::2] if fast else QUAD_MODES:
        for f in QUAD_FRACS:
            c = c0 + (s - c0) * f
            t_exact = t_ref(c, s, c0, L)
            te = float(t_exact)
            t = float(ln.mode_time(c, s, c0, depth=L))
            tol = 1e-13 * L * (1.0 + kappa_t(te, c, s, L))
            err = abs(t - te) / te
            worst = max(worst, err / tol)
            assert err <= tol, (s, c0, f, t, te, err, tol)
    print(f"L={L}: worst error / tolerance = {worst:.2g}")


@pytest.mark.parametrize("L", [pytest.param(L, marks=pytest.mark.slow) if L in (5, 7, 8, 11, 20)
                               else L for L in MANY_DEPTHS])
def test_mode_strength_matches_mpmath_inverse(L):
    """c(t_exact(c)) == c within the conditioning of c(t)."""
    fast = L not in (5, 7, 8, 11, 20)
    for s, c0 in [(1.0, 1e-3), (1e-3, 1e-12), (3.0, 1e4)] if fast else \
            [(1.0, 1e-3), (2.5, 0.4), (1e-3, 1e-12), (0.5, 3.0), (3.0, 1e4)]:
        for f in [1e-6, 0.1, 0.5, 0.9, 0.999]:
            c = c0 + (s - c0) * f
            te = float(t_ref(c, s, c0, L))
            got = float(ln.mode_strength(te, s, c0, depth=L))
            tol = 1e-13 * L * (1.0 + kappa_c(te, c, s, L))
            assert abs(got - c) / c <= tol, (s, c0, f, got, c)


def _ivp(t_eval, s, c0, L, eta):
    """Reference: d(log c)/dt = eta L c^(1-2/L) (s - c), DOP853 at rtol 1e-13."""
    def f(_, u):
        c = np.exp(u)
        return eta * L * c ** (1.0 - 2.0 / L) * (s - c)
    sol = solve_ivp(f, (0.0, t_eval[-1]), [math.log(c0)], method="DOP853", t_eval=t_eval,
                    rtol=1e-13, atol=1e-14)
    assert sol.success
    return np.exp(sol.y[0])


@pytest.mark.parametrize("L", DEPTHS)
@pytest.mark.parametrize("s,c0,eta", [(1.0, 1e-4, 1.0), (3.0, 0.5, 0.3), (0.7, 5.0, 2.0)])
def test_mode_strength_matches_solve_ivp(L, s, c0, eta):
    t_end = 4.0 * float(ln.plateau_time(s, min(c0, s / 4), depth=L, eta=eta)) + 40.0 / (eta * s)
    t = np.concatenate([[0.0], np.logspace(-6, math.log10(t_end), 300)])
    ref = _ivp(t, s, c0, L, eta)
    c = ln.mode_strength(t, s, c0, depth=L, eta=eta)
    # solve_ivp's own global error is ~1e-11 relative in c (its tolerance times the steps)
    tol = 1e-10 * (1.0 + kappa_c(t, ref, s, L, eta))
    np.testing.assert_array_less(np.abs(c - ref) / ref, tol)


def test_closed_forms_depth_1_and_2():
    t = np.array([0.0, 0.3, 2.0, 11.0])
    s, c0, eta = 2.0, 0.1, 0.7
    np.testing.assert_allclose(ln.mode_strength(t, s, c0, depth=1, eta=eta),
                               s + (c0 - s) * np.exp(-eta * t), rtol=1e-15)
    e = np.exp(2 * eta * s * t)
    np.testing.assert_allclose(ln.mode_strength(t, s, c0, depth=2, eta=eta),
                               s * e / (e - 1 + s / c0), rtol=1e-14)


# -------------------------------------------------------- inverse, limits, shape

@pytest.mark.parametrize("L", MANY_DEPTHS)
def test_round_trip(L):
    s, eta = 1.7, 0.9
    for c0 in [1e-9, 0.2, 1.5, 40.0]:
        tp = float(ln.plateau_time(s, min(c0, s / 4), depth=L, eta=eta))
        t = np.concatenate([np.logspace(-8, 0, 9) * tp, tp * np.linspace(1.1, 3.0, 5)])
        c = ln.mode_strength(t, s, c0, depth=L, eta=eta)
        keep = (c != s) & (c != c0)
        t2 = ln.mode_time(c[keep], s, c0, depth=L, eta=eta)
        tol = 1e-13 * L * (1.0 + kappa_t(t[keep], c[keep], s, L, eta))
        np.testing.assert_array_less(np.abs(t2 - t[keep]) / t[keep], tol)


@pytest.mark.parametrize("L", MANY_DEPTHS)
def test_t_zero_and_infinity(L):
    s = np.array([0.5, 2.0, 2.0, 1e3])
    c0 = np.array([1e-8, 5.0, 2.0, 1.0])
    np.testing.assert_array_equal(ln.mode_strength(0.0, s, c0, depth=L), c0)
    big = ln.mode_strength(1e12, s, c0, depth=L)
    np.testing.assert_allclose(big, s, rtol=4e-16)
    assert float(ln.mode_time(2.0, 2.0, 2.0, depth=L)) == 0.0
    assert float(ln.mode_time(0.3, 1.0, 0.3, depth=L)) == 0.0
    assert float(ln.mode_time(1.0, 1.0, 0.3, depth=L)) == np.inf


@pytest.mark.parametrize("L", [1, 2, 3, 4, 8])
def test_exponential_tail_of_the_loss_is_resolved(L):
    """Late times: s - c ~ K exp(-eta L s^(2-2/L) t), far below machine epsilon."""
    s, c0, eta = 1.3, 1e-3, 1.0
    lam = eta * L * s ** (2 - 2 / L)
    t0 = 20.0 / lam + float(ln.half_time(s, c0, depth=L, eta=eta))
    t = t0 + np.array([0.0, 30.0, 60.0, 120.0]) / lam
    loss = ln.loss_curve(t, s, c0, depth=L, eta=eta)
    assert np.all(loss > 0) and np.all(np.diff(loss) < 0)
    np.testing.assert_allclose(np.log(loss[1:] / loss[0]), -2 * lam * (t[1:] - t[0]), rtol=1e-9)


@pytest.mark.parametrize("L", [1, 2, 3, 5, 12])
def test_monotone_and_bounded(L):
    t = np.sort(np.concatenate([np.logspace(-8, 7, 400), np.linspace(0, 2e3, 400)]))
    for s, c0 in [(1.0, 1e-6), (1.0, 30.0)]:
        c = ln.mode_strength(t, s, c0, depth=L)
        d = np.diff(c)
        assert np.all(d >= 0) if c0 < s else np.all(d <= 0)
        assert np.all((c - c0) * (s - c0) >= 0) and np.all((s - c) * (s - c0) >= 0)


@pytest.mark.parametrize("L", [1, 2, 3, 4, 7])
def test_ode_residual_by_finite_differences(L):
    s, c0, eta = 1.0, 1e-3, 0.5
    tp = float(ln.plateau_time(s, c0, depth=L, eta=eta))
    t = np.linspace(0.05, 2.5, 40) * tp + 1.0
    h = 1e-5 / (eta * L * s ** (2 - 2 / L))
    c = ln.mode_strength(t, s, c0, depth=L, eta=eta)
    fd = (ln.mode_strength(t + h, s, c0, depth=L, eta=eta)
          - ln.mode_strength(t - h, s, c0, depth=L, eta=eta)) / (2 * h)
    f = rate(c, s, L, eta)
    # central-difference error h^2 |c'''| / 6 ~ 1e-10 |f|, rounding eps c / h, and the
    # backward error eps t |f| of each c divided by h: all well below 1e-7 max|f|
    scale = np.max(np.abs(f))
    np.testing.assert_allclose(fd, f, atol=1e-7 * scale, rtol=0)


def test_shapes_and_dtypes():
    c = ln.mode_strength(1.0, 2.0, 0.1, depth=3)
    assert isinstance(c, np.ndarray) and c.shape == () and c.dtype == np.float64
    t = np.linspace(0, 5, 7)[:, None]
    c = ln.mode_strength(t, np.array([1.0, 2.0, 3.0]), 0.01, depth=4)
    assert c.shape == (7, 3)
    np.testing.assert_array_equal(c[:, 1], ln.mode_strength(t[:, 0], 2.0, 0.01, depth=4))
    assert ln.mode_time(0.5, 1.0, [0.1, 0.2], depth=3).shape == (2,)
    assert ln.half_time(1.0, 0.1).shape == ()
    assert ln.plateau_time([1.0, 2.0], 0.1, depth=5).shape == (2,)
    assert ln.loss_curve(np.zeros((4, 2)), [1.0, 2.0], 0.1).shape == (4, 2)
    assert ln.loss_curve(0.5, 1.0, 0.1).shape == ()


def test_numba_kernel_matches_numpy_reference():
    rng = np.random.default_rng(3)
    n = 3000
    for L in [1, 2, 3, 4, 7, 12]:
        T = 10 ** rng.uniform(-8, 14, n)
        s = 10 ** rng.uniform(-6, 6, n)
        c0 = s * 10 ** rng.uniform(-30, 3, n)
        c1, g1, _ = dyn._strength_core(T, s, c0, L, backend="numba")
        c2, g2, _ = dyn._strength_core(T, s, c0, L, backend="numpy")
        np.testing.assert_allclose(c1, c2, rtol=1e-13)
        assert np.all(np.abs(g1 - g2) <= 1e-9 * np.abs(g2) + 1e-13 * s)


def test_newton_iteration_count_is_small():
    rng = np.random.default_rng(4)
    for L in [3, 5, 20]:
        T = 10 ** rng.uniform(-8, 14, 4000)
        s = 10 ** rng.uniform(-6, 6, 4000)
        c0 = s * 10 ** rng.uniform(-40, 4, 4000)
        _, _, it = dyn._strength_core(T, s, c0, L, backend="numpy")
        assert it <= 20


# --------------------------------------------------------------- time scales, loss

@pytest.mark.parametrize("L", [1, 2, 3, 4, 6, 10])
def test_half_time_is_mode_time_of_half(L):
    s, c0, eta = 2.0, 1e-5, 0.8
    th = ln.half_time(s, c0, depth=L, eta=eta)
    assert th == ln.mode_time(s / 2, s, c0, depth=L, eta=eta)
    kappa = kappa_c(th, s / 2, s, L, eta)
    c = ln.mode_strength(th, s, c0, depth=L, eta=eta)
    assert abs(c - s / 2) <= 1e-13 * L * (1 + kappa) * s / 2


#: (s, c0, L) -> t_1/2 at scales where eta s^(2-2/L) or the natural plateau time leaves the
#: float range, from ``theory._reference_modes.t_ref`` (mpmath quadrature of
#: dc/dt = L c^(2-2/L) (s - c), 30 digits; the same to 20 digits at 50):
#: ``test_extreme_half_times_are_the_quadratures`` recomputes them (slow).
EXTREME_HALF_TIMES = {
    (1e300, 1e-300, 20): 5.5555555555555551386e-32,
    (1e300, 1e-300, 3): 9.9999999999999993914e-201,
    (1e200, 1e-200, 5): 3.33333333333333347e-81,
    (1e300, 1e-300, 2): 6.9077552789821366895e-298,
}


@pytest.mark.parametrize("key", list(EXTREME_HALF_TIMES), ids=str)
def test_half_and_plateau_time_at_extreme_scales(key):
    """Where s^(2-2/L) and the natural time T overflow, t = T / (eta s^(2-2/L)) is taken
    from logarithms: exp of a logarithm of magnitude m carries a relative error ~ m eps,
    m <= 1400 here (log T and log s^(2-2/L) each below 700), so rtol 1400 * 4 eps; the
    plateau time differs from the half time by the relative (c0/s)^((L-2)/L) (L >= 3),
    1/log(s/c0) (L = 2)."""
    s, c0, L = key
    ref = EXTREME_HALF_TIMES[key]
    with np.errstate(over="raise", divide="raise", invalid="raise"):
        th = float(ln.half_time(s, c0, depth=L))
        tp = float(ln.plateau_time(s, c0, depth=L))
    assert abs(th / ref - 1.0) <= 1400 * 4 * np.finfo(float).eps
    gap = 1.0 / math.log(s / c0) if L == 2 else (c0 / s) ** ((L - 2) / L)
    assert abs(tp / ref - 1.0) <= 2 * gap + 1e-12


def test_half_time_scales_exactly_with_eta_at_extreme_scales():
    # t_1/2 is 1/eta times the eta = 1 value, also where eta s^(2-2/L) overflows
    for eta in (1e-300, 1e-200, 1e100):
        with np.errstate(over="raise", divide="raise", invalid="raise"):
            t = float(ln.half_time(1e300, 1e-300, depth=3, eta=eta))
        assert abs(t * eta / 9.9999999999999993914e-201 - 1) <= 1400 * 4 * np.finfo(float).eps
    # eta s^(2-2/L) = 1e300 * 1e-375 underflows in steps: t_ref = 4.9999733575012318863e+79
    t = float(ln.half_time(1e-250, 1e-260, depth=4, eta=1e300))
    assert abs(t / 4.9999733575012318863e+79 - 1) <= 1400 * 4 * np.finfo(float).eps
    # beyond the float range: inf and 0 without a warning
    with np.errstate(over="raise", divide="raise", invalid="raise"):
        assert ln.half_time(1e-300, 1e-310, depth=3, eta=1e-300) == np.inf
        assert ln.half_time(1e300, 1e-300, depth=2, eta=1e300) == 0.0


@pytest.mark.slow
@pytest.mark.parametrize("key", list(EXTREME_HALF_TIMES), ids=str)
def test_extreme_half_times_are_the_quadratures(key):
    s, c0, L = key
    assert abs(float(t_ref(s / 2, s, c0, L)) / EXTREME_HALF_TIMES[key] - 1) < 1e-15


@pytest.mark.parametrize("L", [1, 2, 3, 4, 5, 8])
def test_plateau_time_is_leading_term_of_half_time(L):
    """Relative error -> 0 at the predicted rate: c0/s (L=1), 1/log(s/c0) (L=2),
    (c0/s)^((L-2)/L) (L>=3); for L >= 3 the remainder tends to a constant K_L."""
    s, eta = 1.5, 0.6
    if L < 3:
        c0 = s * np.logspace(-4, -12, 3)
    else:   # (c0/s)^((L-2)/L) = 1e-4, 1e-6, 1e-8
        c0 = s * 10.0 ** (-np.array([4.0, 6.0, 8.0]) * L / (L - 2))
    th = ln.half_time(s, c0, depth=L, eta=eta)
    tp = ln.plateau_time(s, c0, depth=L, eta=eta)
    rel = np.abs(th - tp) / th
    x0 = c0 / s
    if L == 1:
        predicted = -np.log1p(-x0) / (np.log(2.0) + np.log1p(-x0))
        np.testing.assert_allclose(rel, predicted, rtol=1e-6, atol=1e-15)
    elif L == 2:
        predicted = np.abs(np.log1p(-x0)) / np.log(1 / x0 - 1)
        np.testing.assert_allclose(rel, predicted, rtol=1e-6, atol=1e-15)
    else:
        y = 0.5 ** (1 / L)
        phi = float(mp.quad(lambda u: u / (1 - u ** L), [0, y]))
        K = phi - y ** (2 - L) / (L - 2)
        # th - tp -> K / (eta s^(2-2/L)) with a correction O(y0^2) = O(x0^(2/L))
        rem = (th - tp) * eta * s ** (2 - 2 / L)
        assert np.all(np.abs(rem - K) <= 5 * x0 ** (2 / L) + 1e-12 * th * eta * s ** (2 - 2 / L))
        # rel = |K| / tau_half, tau_half = x0^(-(L-2)/L)/(L-2) + K + O(x0^(2/L))
        p = x0 ** ((L - 2) / L)
        ratio = rel / p
        A = abs(K) * (L - 2)
        tol = A * (2 * A * p + 5 * (L - 2) * x0 ** (2 / L)) + 1e-13 / p
        assert np.all(np.abs(ratio - A) <= tol), (ratio, A, tol)


def test_plateau_time_matches_paper_scaling():
    """c0 = sigma^L: t ~ sigma^(2-L) / (eta s (L-2)), i.e. the paper's L/(s(L-2)) sigma^(2-L)
    divided by L, the factor its ODE drops."""
    sigma, s, L = 1e-2, 2.0, 4
    paper = L / (s * (L - 2)) * sigma ** (2 - L)
    np.testing.assert_allclose(ln.plateau_time(s, sigma ** L, depth=L), paper / L, rtol=1e-14)


def test_loss_curve_sums_modes():
    s = np.array([3.0, 1.0, 0.2])
    c0 = np.array([1e-4, 1e-4, 2e-3])
    t = np.linspace(0, 40, 50)
    loss = ln.loss_curve(t, s, c0, depth=3, eta=0.5)
    c = ln.mode_strength(t[:, None], s, c0, depth=3, eta=0.5)
    np.testing.assert_allclose(loss, 0.5 * np.sum((s - c) ** 2, axis=1), rtol=1e-12, atol=1e-30)
    assert loss[0] == pytest.approx(0.5 * np.sum((s - c0) ** 2), rel=1e-15)


# -------------------------------------------------------------------- hypothesis

depths = st.integers(1, 12)
pos = st.floats(1e-3, 1e3)


@given(L=depths, s=pos, ratio=st.floats(1e-12, 1e4), eta=st.floats(0.01, 100.0),
       tfrac=st.floats(0.0, 5.0))
def test_property_bounds_and_round_trip(L, s, ratio, eta, tfrac):
    c0 = s * ratio
    tp = float(ln.plateau_time(s, min(c0, s / 4), depth=L, eta=eta))
    t = tfrac * tp
    c = float(ln.mode_strength(t, s, c0, depth=L, eta=eta))
    lo, hi = min(s, c0), max(s, c0)
    assert lo <= c <= hi
    if c not in (s, c0) and t > 0:
        t2 = float(ln.mode_time(c, s, c0, depth=L, eta=eta))
        assert abs(t2 - t) <= 1e-13 * L * t * (1 + kappa_t(t, c, s, L, eta))


@given(L=depths, s=pos, ratio=st.floats(1e-12, 1e4), t1=st.floats(0, 1e4), dt=st.floats(0, 1e4))
def test_property_monotone_in_time(L, s, ratio, t1, dt):
    c0 = s * ratio
    c1, c2 = ln.mode_strength([t1, t1 + dt], s, c0, depth=L)
    assert (c2 - c1) * (s - c0) >= 0


@given(L=st.integers(3, 20), s=st.floats(1e-6, 1e6), lx0=st.floats(-300, 5),
       t=st.floats(0, 1e12))
def test_property_extreme_inputs_finite_without_warnings(L, s, lx0, t):
    c0 = max(s * 10.0 ** lx0, 1e-300)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c = float(ln.mode_strength(t, s, c0, depth=L))
        loss = float(ln.loss_curve(t, s, c0, depth=L))
    assert np.isfinite(c) and np.isfinite(loss)
    assert min(s, c0) <= c <= max(s, c0)


# -------------------------------------------------------------------- extremes, errors

@pytest.mark.parametrize("L", [1, 2, 3, 4, 8, 13, 20])
def test_extreme_inputs(L):
    t = np.array([0.0, 1e-300, 1e-12, 1.0, 1e3, 1e6, 1e9, 1e12])[:, None]
    s = np.array([1e-6, 1e-6, 1.0, 1e6, 1e6, 1e-6])
    c0 = np.array([1e-300, 1e6, 1e-300, 1e-300, 1e150, 1e-6 * (1 + 1e-15)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c = ln.mode_strength(t, s, c0, depth=L)
        loss = ln.loss_curve(t[:, 0], s, c0, depth=L)
        tp = ln.plateau_time(s[c0 < s], c0[c0 < s], depth=L)     # defined for rising modes
        tm = ln.mode_time(np.sqrt(c0[2] * s[2]), s[2], c0[2], depth=L)
    assert np.all(np.isfinite(c)) and np.all(np.isfinite(loss)) and np.all(np.isfinite(tp))
    assert np.isfinite(tm) and tm > 0
    assert np.all((c >= np.minimum(s, c0)) & (c <= np.maximum(s, c0)))
    np.testing.assert_array_equal(c[0], c0)


BAD = [
    dict(t=-1.0), dict(t=np.nan), dict(t=np.inf), dict(s=0.0), dict(s=-1.0), dict(s=np.nan),
    dict(c0=0.0), dict(c0=-1e-3), dict(c0=np.inf), dict(eta=0.0), dict(eta=-2.0),
    dict(depth=0), dict(depth=2.5), dict(depth=True), dict(depth="3"), dict(depth=np.array([2])),
    dict(t=[1.0, 2.0], s=[1.0, 2.0, 3.0]), dict(t="x"), dict(s=1j),
]


@pytest.mark.parametrize("bad", BAD, ids=[str(b) for b in BAD])
def test_invalid_inputs_raise(bad):
    kw = dict(t=1.0, s=1.0, c0=0.1, depth=3, eta=1.0)
    kw.update(bad)
    pattern = "broadcast" if len(bad) > 1 else next(iter(bad))
    with pytest.raises(ValueError, match=pattern):
        ln.mode_strength(**kw)
    if "t" not in bad:
        for f in (ln.half_time, ln.plateau_time):
            args = {k: kw[k] for k in ("s", "c0", "depth", "eta")}
            with pytest.raises(ValueError):
                f(**args)
        with pytest.raises(ValueError):
            ln.loss_curve(1.0, **{k: kw[k] for k in ("s", "c0", "depth", "eta")})


@pytest.mark.parametrize("c,s,c0", [(0.05, 1.0, 0.1), (1.5, 1.0, 0.1), (0.5, 1.0, 3.0),
                                    (4.0, 1.0, 3.0), (0.5, 1.0, 1.0), (0.0, 1.0, 0.1),
                                    (-1.0, 1.0, 0.1), (np.nan, 1.0, 0.1)])
@pytest.mark.parametrize("L", [1, 2, 4])
def test_mode_time_rejects_unreachable_targets(c, s, c0, L):
    with pytest.raises(ValueError, match="c"):
        ln.mode_time(c, s, c0, depth=L)


def test_half_time_needs_c0_below_half():
    with pytest.raises(ValueError, match="s/2"):
        ln.half_time(1.0, 0.5)
    with pytest.raises(ValueError, match="s/2"):
        ln.half_time(1.0, [0.1, 2.0], depth=3)


def test_loss_curve_rejects_matrices_of_modes():
    with pytest.raises(ValueError, match="1-D"):
        ln.loss_curve(1.0, np.ones((2, 2)), 0.1)
    with pytest.raises(ValueError, match="broadcast"):
        ln.loss_curve(1.0, [1.0, 2.0], [0.1, 0.2, 0.3])


# -------------------------------------------------- t = 0 and overflow of the time unit

@given(L=st.integers(1, 8), ls=st.floats(-300, 300), lc0=st.floats(-300, 300), leta=st.floats(-300, 300),
       t=st.sampled_from([1e-300, 1e-6, 1.0, 50.0, 1e300]))
def test_property_t_zero_is_c0_exactly_and_overflow_of_the_time_unit_is_safe(L, ls, lc0, leta, t):
    """eta s^(2-2/L) may overflow (s = 1e300, L = 3): c(0) = c0 exactly, c finite and between c0 and s."""
    s, c0, eta = 10.0 ** ls, 10.0 ** lc0, 10.0 ** leta
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        c = ln.mode_strength([0.0, t], s, c0, depth=L, eta=eta)
        loss = ln.loss_curve([0.0, t], s, c0, depth=L, eta=eta)
    assert c[0] == c0
    assert np.isfinite(c[1]) and min(s, c0) <= c[1] <= max(s, c0)
    # the loss at t = 0 is (s - c0)^2 / 2, +inf only where that exceeds the float range
    exact0 = mp.mpf(0.5) * (mp.mpf(s) - mp.mpf(c0)) ** 2
    if exact0 > mp.mpf(np.finfo(float).max):
        assert loss[0] == np.inf
    else:
        assert abs(loss[0] - float(exact0)) <= 4 * np.finfo(float).eps * float(exact0)
    assert loss[1] >= 0 and not np.isnan(loss[1])


def test_issue_example_huge_s_at_t_zero():
    for L in (1, 2, 3, 4, 6):
        c = ln.mode_strength([0.0, 1.0, 50.0], s=1e300, c0=1e-3, depth=L)
        assert c[0] == 1e-3 and np.all(np.isfinite(c)) and c[-1] == 1e300
        assert float(ln.mode_time(1e-3, 1e300, 1e-3, depth=L)) == 0.0
    res = ln.multimode_dynamics([0.0, 1.0], [[1e300, 0.0], [0.0, 1e299]], [1e-3, 2e-3], depth=3)
    np.testing.assert_array_equal(res.c[0], [1e-3, 2e-3])
    assert np.all(np.isfinite(res.c))
    # a loss that itself overflows is +inf; one that does not is finite and exact
    assert ln.loss_curve(0.0, [1e300], [1e-3], depth=3) == np.inf
    np.testing.assert_allclose(ln.loss_curve(0.0, [1e150, 1e150], [1.0, 1.0], depth=3), 1e300, rtol=1e-15)


# -------------------------------------------------------------- plateau_time domain

@pytest.mark.parametrize("L", [1, 2, 3, 5])
def test_plateau_time_rejects_c0_at_or_above_s(L):
    """plateau_time(s=1, c0=2) used to return -0.35: the asymptote exists only for c0 < s."""
    for c0 in (2.0, 1.0, [0.1, 1.5]):
        with pytest.raises(ValueError, match="c0"):
            ln.plateau_time(1.0, c0, depth=L)
    assert float(ln.plateau_time(1.0, 0.999, depth=L)) > 0


@pytest.mark.parametrize("s, c0", [(1e300, 1e-300), (1e200, 1e-200), (1e-300, 1e-310),
                                   (1e150, 1e-150)])
def test_two_layer_strength_at_extreme_scales(s, c0):
    """L = 2: c(t) = s / (1 + ((s - c0)/c0) e^{-2 s t}), evaluated in 60-digit arithmetic, at
    times around the escape (2 s t up to 1400): c to a few ulps of the conditioning
    |d log c / d log t| = 2 s t (s - c)/s."""
    th = float(ln.half_time(s, c0, depth=2))
    for f in (0.5, 0.9, 0.99, 1.0, 1.01, 1.1):
        t = f * th
        with mp.workdps(60):
            S, C0, Tm = mp.mpf(s), mp.mpf(c0), mp.mpf(t)
            exact = S / (1 + (S - C0) / C0 * mp.exp(-2 * S * Tm))
            cond = float(2 * S * Tm * (S - exact) / S) + 1.0
        got = float(ln.mode_strength(t, s, c0, depth=2))
        assert abs(got - float(exact)) <= 16 * np.finfo(float).eps * cond * float(exact)


def test_deep_strength_before_the_escape_when_the_time_unit_overflows():
    """L = 3, s = 1e300: eta s^(4/3) overflows, the natural time of t = 1e-250 (1e150) does
    not; the plateau lasts ~1e200 of it, so c moved by dc ~ 3 c0^(4/3) s t = 3e-350 << c0."""
    assert ln.mode_strength(1e-250, 1e300, 1e-300, depth=3) == pytest.approx(1e-300, rel=1e-14)
    assert ln.mode_strength(1e-40, 1e300, 1e-300, depth=3) == pytest.approx(1e300, rel=1e-14)
