"""The linear kernels' one-row products in their own loops (``_linear_kernels.mul``,
``mul_t``, below ``SMALL_PRODUCT_MAX``) and the factored stages built on them, against
numpy: the products to rounding, the stages' factors to rounding, and whole compiled flows
to their tolerance against a tight scipy solution."""
import numpy as np
import pytest
from scipy.integrate import solve_ivp

from linearnets.data import teacher_task
from linearnets.sim.methods.tableaux import RK45
from linearnets.sim.models import linear as lin
from linearnets.network import init_network
from sim_helpers import erk, options

lk = pytest.importorskip("linearnets.sim.models._linear_kernels")

EPS = np.finfo(np.float64).eps

#: (m, k, n): one row on both sides of SMALL_DOT_MAX (256 multiply-adds) and SMALL_PRODUCT_MAX
#: (1024), widths that are and are not multiples of the loops' eight columns, several rows
SHAPES = [(1, 1, 5), (1, 7, 32), (1, 32, 7), (1, 16, 16), (1, 16, 17), (1, 20, 32), (1, 32, 32),
          (1, 32, 33), (1, 33, 19), (3, 4, 5), (2, 32, 20)]


def _flat(rng, size, off):
    """A buffer holding ``size`` random numbers from offset ``off`` (and noise around them)."""
    buf = rng.standard_normal(size + off + 3)
    return buf, buf[off:off + size].copy()


@pytest.mark.parametrize("m, k, n", SHAPES)
def test_products_match_numpy_and_take_the_loops_below_the_threshold(m, k, n):
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    a, A = _flat(rng, m * k, 2)
    b, B = _flat(rng, k * n, 5)
    for fn, Bm, most in ((lk.mul, B.reshape(k, n), lk.SMALL_PRODUCT_MAX),
                         (lk.mul_t, B.reshape(n, k).T, lk.SMALL_DOT_MAX)):
        small = m == 1 and k * n <= most
        assert lk.small_product(m, k, n, fn is lk.mul_t) == small
        out = np.full(m * n + 4, np.nan)
        looped = fn(a, 2, b, 5, m, k, n, out, 1)
        assert looped == small                      # the threshold selects the path
        ref = A.reshape(m, k) @ Bm
        bound = k * EPS * (np.abs(A.reshape(m, k)) @ np.abs(Bm))    # gamma_k |A| |B|
        got = out[1:1 + m * n].reshape(m, n)
        assert np.all(np.abs(got - ref) <= bound)
        assert np.isnan(out[0]) and np.all(np.isnan(out[1 + m * n:]))   # nothing outside


def test_the_thresholds_are_where_the_loops_stop():
    # one row at exactly the threshold's multiply-adds: loops; one more column: BLAS
    K = 8
    for dot, most in ((False, lk.SMALL_PRODUCT_MAX), (True, lk.SMALL_DOT_MAX)):
        n = most // K
        assert lk.small_product(1, K, n, dot) and not lk.small_product(1, K, n + 1, dot)
        assert not lk.small_product(2, 1, 1, dot) and not lk.small_product(1, 0, 4, dot)


#: (layer sizes, whitened inputs): C = 1 and C = 3, depth 1, 2 and 3; hidden layers wider than
#: RK45's 7 slots times C, so that depth 2 and 3 store factored stages
STAGE_PROBLEMS = [((12, 1), True), ((12, 1), False), ((12, 16, 1), True), ((12, 16, 1), False),
                  ((12, 16, 16, 1), True), ((12, 16, 16, 1), False), ((12, 3), False),
                  ((12, 24, 3), True), ((12, 24, 24, 3), False), ((12, 24, 24, 3), True)]


def _problem(sizes, white, seed=0):
    D, C = sizes[0], sizes[-1]
    X, Y = teacher_task(4 * D, D, np.linspace(1.0, 0.5, C), seed=seed, whiten=white)
    ws = init_network(sizes, 0.5, seed=seed)
    problem = lin.make_problem(tuple(w.shape for w in ws), X, Y)
    assert problem.white == white
    return ws, problem


@pytest.mark.parametrize("sizes, white", STAGE_PROBLEMS)
def test_compiled_stages_match_the_numpy_store(sizes, white):
    ws, problem = _problem(sizes, white)
    y = lin.pack(ws)
    ops = lin.erk_ops(problem, RK45, factored=True)
    lay = lin.stage_layout(problem, RK45.n_stages + 1)
    ref = lin.FactoredStages(problem, lay)
    Sxx, Syx, eta_l, wh, ints, bufs = ops.data[:6]
    h = 0.3
    for i in range(RK45.n_stages + 1):
        w = h * (RK45.A[i, :i] if i < RK45.n_stages else RK45.b)
        lk.stage(y, np.ascontiguousarray(w), i, i, Sxx, Syx, eta_l, wh, ints, bufs)
        ref.stage(y, w, i)
    ut, vs, kd = bufs[:3]
    got, want = [], []
    for l in range(lay.L):
        if lay.factored[l]:
            got += [ut[lay.utoff[l]:lay.utoff[l + 1]], vs[lay.vsoff[l]:lay.vsoff[l + 1]]]
            want += [ref.ut[l].ravel(), ref.vs[l].ravel()]
        else:
            got.append(kd[lay.kdoff[l]:lay.kdoff[l + 1]])
            want.append(ref.kd[l].ravel())
    got, want = np.concatenate(got), np.concatenate(want)
    # the same products summed in other orders: a few hundred eps of the largest entry
    assert np.abs(got - want).max() <= 1e3 * EPS * np.abs(want).max()


def _units(ys, ref, rtol, atol):
    """Global error in units of the requested (norm-wise) tolerance, as in test_lowrank."""
    return (np.abs(ys - ref).max(axis=1) / (atol + rtol * np.abs(ref).max(axis=1))).max()


@pytest.mark.parametrize("sizes, white", [((12, 16, 1), False), ((12, 16, 16, 1), True),
                                          ((12, 24, 24, 3), False)])
def test_compiled_factored_flows_reach_their_tolerance(sizes, white):
    ws, problem = _problem(sizes, white, seed=1)
    y0 = lin.pack(ws)
    t = np.concatenate(([0.0], np.logspace(-1, 1.5, 6)))
    rtol, atol = 1e-7, 1e-10
    ref = solve_ivp(lambda _, y: problem.rhs(y), (0.0, t[-1]), y0, method="DOP853", t_eval=t,
                    rtol=1e-13, atol=1e-15).y.T
    obs = []
    raw = erk(problem, y0, t, RK45, options(rtol=rtol, atol=atol),
              lambda k, y: obs.append(y.copy()), stages="factored", backend="numba")
    assert raw.status.success
    assert _units(np.array(obs), ref, rtol, atol) < 10
