"""Bad and extreme input over the public API, class by class (docs/conventions.md, "Bad
input and overflow"): a clear ValueError naming the argument, or the documented result;
never a NaN, a numpy warning or a silently wrong answer.

The overflow tests use exact power-of-two scalings: every map checked here is
homogeneous in its inputs, and multiplying an input by 2^k multiplies a float64 result by
2^(k·degree) exactly wherever it stays in range, so the scaled result must equal the
scaled reference bit for bit, and be ±inf (with the reference's sign) or 0 exactly where
it leaves the range.  ``benchmarks/studies/study_bad_input.py`` sweeps a wider grid.
"""
import math
import os
import warnings

import numpy as np
import pytest

import linearnets as ln
from linearnets._validation import check_int, check_seed, ldexp_safe, pow2_normalise

RNG = np.random.default_rng(7)
X = ln.whitened_inputs(6, 3, seed=0)
X2 = RNG.standard_normal((4, 3))
BETA = np.array([0.6, 0.8, 0.0])
SYX = np.array([[1.0, 0.5, 0.0], [0.0, 0.3, 0.2]])
SIGMA = np.diag([1.0, 0.5, 0.25])
W1 = 0.1 * RNG.standard_normal((4, 3))
W2 = 0.1 * RNG.standard_normal((1, 4))


@pytest.fixture(autouse=True)
def _numpy_warnings_are_errors():
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with np.errstate(over="warn", divide="warn", invalid="warn"):
            yield


# ------------------------------------------------------------------------------ seeds

SEEDED = {
    "init_network": lambda seed: ln.init_network((3, 4, 1), 0.1, seed=seed),
    "init_balanced": lambda seed: ln.init_balanced((3, 4, 1), 0.1, seed=seed),
    "init_lambda_balanced": lambda seed: ln.init_lambda_balanced((3, 1, 1), 0.1, 0.1, seed=seed),
    "scalar_teacher": lambda seed: ln.scalar_teacher(6, 3, 1.0, seed=seed),
    "teacher_task": lambda seed: ln.teacher_task(6, 3, [1.0], seed=seed),
    "whitened_inputs": lambda seed: ln.whitened_inputs(6, 3, seed=seed),
    "init_parameterised": lambda seed: ln.init_parameterised((3, 4, 1), "ntk", seed=seed).weights,
    "zhou_parameterisation": lambda seed: ln.zhou_parameterisation(
        (3, 4, 4, 1), (1.0, 1.0, 1.0), 1.0, seed=seed).weights,
    "geiger_parameterisation": lambda seed: ln.geiger_parameterisation((3, 4, 1), 1.0,
                                                                       seed=seed).weights,
}
BAD_SEEDS = [-1, 1.5, "abc", math.nan, True, np.float64(2.0), [1, -2], []]


def _flat(out):
    if isinstance(out, np.ndarray):
        return [out]
    return [a for a in out if isinstance(a, np.ndarray)]


@pytest.mark.parametrize("name", sorted(SEEDED))
@pytest.mark.parametrize("seed", BAD_SEEDS, ids=repr)
def test_every_seed_argument_rejects_bad_seeds_naming_seed(name, seed):
    with pytest.raises(ValueError, match=r"^seed must be None, an int >= 0"):
        SEEDED[name](seed)


@pytest.mark.parametrize("name", sorted(SEEDED))
def test_every_seed_argument_takes_none_as_fresh_entropy(name):
    # as numpy.random.default_rng(None): two calls draw from fresh entropy (the chance that
    # two 63-bit seeds coincide is 2**-63)
    a, b = _flat(SEEDED[name](None)), _flat(SEEDED[name](None))
    assert all(np.all(np.isfinite(x)) for x in a + b)
    assert any(not np.array_equal(x, y) for x, y in zip(a, b))


def test_check_seed_none_draws_a_recordable_int():
    seeds = {check_seed(None) for _ in range(4)}
    assert len(seeds) == 4 and all(type(s) is int and 0 <= s < 2 ** 63 for s in seeds)
    # the drawn int reproduces the run
    s = check_seed(None)
    np.testing.assert_array_equal(ln.init_network((3, 4, 1), 0.1, seed=s)[0],
                                  ln.init_network((3, 4, 1), 0.1, seed=s)[0])


def test_compare_routines_record_the_seed_drawn_for_none():
    row = ln.compare_initial_moments(width=5, input_dim=6, n_samples=200, seed=None)
    seed = row.params["seed"]
    assert type(seed) is int and 0 <= seed < 2 ** 63
    again = ln.compare_initial_moments(width=5, input_dim=6, n_samples=200, seed=seed)
    assert again.error == row.error      # the same seed, the same draws, the same arithmetic


@pytest.mark.parametrize("name", sorted(SEEDED))
def test_every_seed_argument_takes_ints_seed_sequences_and_generators(name):
    f = SEEDED[name]
    ref = _flat(f(3))
    for same in (np.int64(3), np.random.SeedSequence(3), np.random.default_rng(3)):
        for a, b in zip(_flat(f(same)), ref):
            np.testing.assert_array_equal(a, b)   # one source, one process: the same draws
    assert any(not np.array_equal(a, b) for a, b in zip(_flat(f(4)), ref))


def test_check_seed_passes_a_generator_through():
    g = np.random.default_rng(1)
    assert check_seed(g) is g and check_seed(np.uint8(5)) == 5 and check_seed([1, 2]) == [1, 2]


# --------------------------------------------------------------- numbers are numbers

THREE = (3, np.int64(3), 3.0)
INTEGER_ARGS = [   # (label, call, argument, valid values)
    ("qr_initial_moments width", lambda v: ln.qr_initial_moments(v, 3, 0.1), "width", THREE),
    ("qr_initial_moments input_dim", lambda v: ln.qr_initial_moments(3, v, 0.1), "input_dim",
     THREE),
    ("final_alignment n", lambda v: ln.final_alignment(3, v), "n", THREE),
    ("final_alignment depth", lambda v: ln.final_alignment(v, 3), "depth", THREE),
    ("unwhitened_init_stats_expected width",
     lambda v: ln.unwhitened_init_stats_expected(v, 0.1, SIGMA, BETA), "width", THREE),
    ("intermediate_alignment n", lambda v: ln.intermediate_alignment([2.0, 1.0], 3, 0, n=v), "n",
     THREE),
    ("intermediate_alignment layer", lambda v: ln.intermediate_alignment([2.0, 1.0], 3, v, n=3),
     "layer", THREE + (0,)),
    ("intermediate_feature_matrix layer", lambda v: ln.intermediate_feature_matrix(SYX, 3, v),
     "layer", THREE + (0,)),
    ("mode_strength depth", lambda v: ln.mode_strength(1.0, 1.0, 0.1, depth=v), "depth", THREE),
    ("whitened_inputs P", lambda v: ln.whitened_inputs(v, 3), "P", THREE),
    ("teacher_task D", lambda v: ln.teacher_task(6, v, [1.0]), "D", THREE),
    ("init_network layer_sizes", lambda v: ln.init_network((3, v, 1), 0.1), "layer_sizes", THREE),
    ("init_balanced rank", lambda v: ln.init_balanced((3, 4, 1), 0.1, rank=v), "rank",
     (1, np.int64(1), 1.0, None)),
    ("prepare_flow layers", lambda v: ln.prepare_flow(X, X @ BETA, (3, v, 1), [0.0, 1.0]),
     "layers", THREE),
    ("gradient_flow max_steps",
     lambda v: ln.gradient_flow([W1, W2], X, X @ BETA, [0.0, 1.0], max_steps=v), "max_steps",
     (1000, np.int64(1000), 1000.0)),
]
NOT_INTEGERS = ["3", True, np.array([True]), 2.5, math.nan, None]


@pytest.mark.parametrize("label, call, arg, ok", INTEGER_ARGS, ids=[c[0] for c in INTEGER_ARGS])
@pytest.mark.parametrize("value", NOT_INTEGERS, ids=repr)
def test_integer_arguments_reject_strings_booleans_and_fractions(label, call, arg, ok, value):
    if value is None and None in ok:
        pytest.skip("None is this argument's documented default")
    with pytest.raises(ValueError, match=rf"^{arg}\b"):
        call(value)


@pytest.mark.parametrize("label, call, arg, ok", INTEGER_ARGS, ids=[c[0] for c in INTEGER_ARGS])
def test_integer_arguments_take_integral_floats_and_numpy_ints(label, call, arg, ok):
    for value in ok:
        call(value)


NUMBER_ARGS = [
    ("mode_strength s", lambda v: ln.mode_strength(1.0, v, 0.1), "s"),
    ("init_network sigma", lambda v: ln.init_network((3, 4, 1), v), "sigma"),
    ("final_ntk X1", lambda v: ln.final_ntk(v, X, BETA, 1.0, 2), "X1"),
    ("kernel_regression ridge", lambda v: ln.kernel_regression(np.eye(2), np.eye(2), [1.0, 2.0], v),
     "ridge"),
    ("gradient_flow eta", lambda v: ln.gradient_flow([W1, W2], X, X @ BETA, [0.0, 1.0], eta=v),
     "eta"),
    ("sufficient_statistics Y", lambda v: ln.sufficient_statistics(X, v), "Y"),
]


@pytest.mark.parametrize("label, call, arg", NUMBER_ARGS, ids=[c[0] for c in NUMBER_ARGS])
@pytest.mark.parametrize("value", ["1", True, None, [[True, False]]], ids=repr)
def test_strings_booleans_and_none_are_not_numbers(label, call, arg, value):
    with pytest.raises(ValueError, match=rf"^{arg} must be a real number"):
        call(value)


def test_check_int_bounds():
    assert check_int(np.int32(4), "k", minimum=1) == 4 and check_int(2.0, "k") == 2
    with pytest.raises(ValueError, match=r"^k must be an integer in \[0, 3\], got 4"):
        check_int(4, "k", maximum=3)


# ----------------------------------------------------------------- empty and degenerate

def test_loss_curve_over_no_modes_is_the_empty_sum():
    t = np.array([[0.0, 1.0, 5.0]])
    out = ln.loss_curve(t, s=[], c0=[])
    assert isinstance(out, np.ndarray) and out.shape == t.shape and np.all(out == 0.0)


def test_gradient_flow_with_no_inputs_or_outputs_names_the_data():
    with pytest.raises(ValueError, match=r"^X and Y need at least one column each"):
        ln.gradient_flow([np.zeros((4, 0)), W2], np.zeros((6, 0)), X @ BETA, [0.0, 1.0])
    with pytest.raises(ValueError, match=r"^X and Y need at least one column each"):
        ln.gradient_flow([W1, np.zeros((0, 4))], X, np.zeros((6, 0)), [0.0, 1.0])
    with pytest.raises(ValueError, match=r"^layers\[2\] must be an integer >= 1, got 0"):
        ln.prepare_flow(X, np.zeros((6, 0)), (3, 4, 0), [0.0, 1.0])


@pytest.mark.parametrize("kw", [dict(backend="numpy"), dict(backend="numba"),
                                dict(backend="numpy", activation="tanh")], ids=str)
def test_probe_with_no_rows_or_zero_targets_is_an_error(kw):
    ws, y = [W1, W2], X @ BETA
    with pytest.raises(ValueError, match=r"^probe inputs must hold at least one row"):
        ln.gradient_flow(ws, X, y, [0.0, 1.0], probe=(np.zeros((0, 3)), np.zeros(0)), **kw)
    with pytest.raises(ValueError, match=r"^probe targets .* are all zero"):
        ln.gradient_flow(ws, X, y, [0.0, 1.0], probe=(X2, np.zeros(4)), **kw)
    # targets present and non-zero: a finite alignment at every output
    tr = ln.gradient_flow(ws, X, y, [0.0, 1.0], probe=(X2, X2 @ BETA), **kw)
    assert np.all(np.isfinite(tr.ntk_alignment))


def test_unwhitened_phase1_log_scale_is_an_array_for_scalar_t():
    x0 = ln.unwhitened_init_stats(W1, W2, SIGMA, BETA)
    res = ln.unwhitened_phase1(0.5, SIGMA, BETA, 1.0, x0)
    assert isinstance(res.log_scale, np.ndarray) and res.log_scale.shape == ()
    both = ln.unwhitened_phase1([0.5], SIGMA, BETA, 1.0, x0)
    np.testing.assert_allclose(res.log_scale, both.log_scale[0], rtol=1e-15)
    np.testing.assert_allclose(res.stats, both.stats[0], rtol=1e-14)


# ---------------------------------------------------------------------- front doors

@pytest.mark.parametrize("fn", [None, math.nan, "abc", 5, lambda x: {"y": x}, "nosuch.module:f"],
                         ids=repr)
def test_sweep_names_fn(fn, tmp_path):
    with pytest.raises(ValueError, match=r"^fn"):
        ln.sweep(fn, grid={"x": [1.0]}, store=str(tmp_path / "s.sqlite"), progress=False)
    assert not os.path.exists(tmp_path / "s.sqlite")


@pytest.mark.parametrize("X_bad", [None, "abc", [[1.0, math.nan]]], ids=repr)
def test_prepare_flow_names_X(X_bad):
    with pytest.raises(ValueError, match=r"^X must"):
        ln.prepare_flow(X_bad, X @ BETA, (3, 4, 1), [0.0, 1.0])


# --------------------------------------------------------------------------- overflow

def _scaled_equal(got, ref, k):
    """``got == ref * 2^k`` exactly where that is in range, ±inf (sign of ref) or 0 beyond."""
    want = ldexp_safe(ref, k)
    assert not np.any(np.isnan(got))
    np.testing.assert_array_equal(got, want)


# (name, f(scale exponents...) -> result, degrees of homogeneity per scaled input, inputs)
HOMOGENEOUS = {
    "final_ntk X1, X2": (lambda a, b: ln.final_ntk(a, b, BETA, 2.0, 3), (1, 1), (X, X2)),
    "final_ntk_multi X1, X2": (lambda a, b: ln.final_ntk_multi(a, b, SYX, 3), (1, 1), (X, X2)),
    "aligned_ntk X1, X2": (lambda a, b: ln.aligned_ntk(a, b, SYX, [0.5, 0.1], 4), (1, 1), (X, X2)),
    "intermediate_kernel X1, X2": (lambda a, b: ln.intermediate_kernel(a, b, SYX, 3, 1), (1, 1),
                                   (X, X2)),
    "sufficient_statistics X": (lambda a: ln.sufficient_statistics(a, X @ BETA)[0], (2,), (X,)),
    "sufficient_statistics Y": (lambda a: ln.sufficient_statistics(X, a)[1], (1,), (X @ SYX.T,)),
    "forward X": (lambda a: ln.forward([W1, W2], a), (1,), (X,)),
    "forward weights": (lambda a, b: ln.forward([a, b], X), (1, 1), (W1, W2)),
    "end_to_end weights": (lambda a, b, c: ln.end_to_end([a, b, c]), (1, 1, 1),
                           (W1, RNG.standard_normal((4, 4)), W2)),
    "empirical_ntk X1, X2": (lambda a, b: ln.empirical_ntk([W1, W2], a, b), (1, 1), (X, X2)),
    "kernel_regression K_test_train, Y": (
        lambda a, b: ln.kernel_regression(X @ X.T + np.eye(6), a, b), (1, 1),
        (X2 @ X.T, X @ BETA)),
    "unwhitened_init_stats w2": (lambda a: ln.unwhitened_init_stats(W1, a, SIGMA, BETA)[0], (2,),
                                 (W2,)),
    "lambda_balanced_ntk X1": (lambda a: ln.lambda_balanced_ntk(
        [0.0, 1.0], *ln.init_lambda_balanced((3, 1, 1), 0.1, 0.1), BETA, a, X2), (1,), (X,)),
    "output_variance F": (lambda a: np.float64(ln.output_variance(a)), (2,),
                          (RNG.standard_normal((5, 3)),)),
}


@pytest.mark.parametrize("name", sorted(HOMOGENEOUS))
@pytest.mark.parametrize("k", [-1000, -600, -300, 300, 600, 1000])
def test_homogeneous_maps_scale_exactly_and_overflow_to_inf(name, k):
    """Inputs scaled by 2^k (|k| = 300: ~1e±90 per input, exact results in range; 600 and
    1000: ~1e±180, ~1e±300, results mostly out of range) give exactly the scaled result:
    bit for bit where representable, ±inf or 0 beyond, never NaN, no warning."""
    f, degrees, inputs = HOMOGENEOUS[name]
    ref = f(*inputs)
    # one input scaled at a time, then all together
    for i, deg in enumerate(degrees):
        args = list(inputs)
        args[i] = np.ldexp(np.asarray(inputs[i], dtype=float), k)
        _scaled_equal(f(*args), ref, k * deg)
    all_scaled = [np.ldexp(np.asarray(a, dtype=float), k) for a in inputs]
    _scaled_equal(f(*all_scaled), ref, k * sum(degrees))


def test_empirical_ntk_scales_per_layer():
    """Layer l's kernel is of degree 2 in every other layer: scaling one layer by 2^k
    multiplies the others' contributions by 4^k; the result is exact to rounding."""
    ws = [W1, RNG.standard_normal((4, 4)), W2]
    K0 = ln.empirical_ntk(ws, X, X2)
    for k in (-500, 500):
        big = [np.ldexp(w, k) for w in ws]
        _scaled_equal(ln.empirical_ntk(big, X, X2), K0, 4 * k)   # every layer's kernel: 2 (L-1) k
    K = ln.empirical_ntk([W1, np.ldexp(ws[1], 300), W2], X, X2)
    assert np.all(np.isfinite(K)) and not np.all(K == 0)


@pytest.mark.parametrize("s", [1e150, 1e300, 1e-300])
@pytest.mark.parametrize("depth", [1, 2, 3, 6])
def test_final_ntk_extreme_teacher_strength(s, depth):
    """s^{2-2/L} times the unit-strength kernel: finite where representable (exactly the
    prefactor to rounding), ±inf beyond, zeros of the bracket stay 0."""
    X1 = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.6, 0.8, 0.0]])
    K1 = ln.final_ntk(X1, X1, BETA, 1.0, depth)
    K = ln.final_ntk(X1, X1, BETA, s, depth)
    Km = ln.final_ntk_multi(X1, X1, s * BETA[None, :], depth)[:, :, 0, 0]
    log_prefactor = (2.0 - 2.0 / depth) * math.log(s)
    for got in (K, Km):
        assert not np.any(np.isnan(got))
        assert np.all(got[K1 == 0] == 0)
        if -660 < log_prefactor < 700:
            np.testing.assert_allclose(got, math.exp(log_prefactor) * K1, rtol=1e-12)
        else:
            assert np.all(np.isinf(got[K1 != 0]) == (log_prefactor > 0))


def test_trained_ntk_spike_and_initial_moments_overflow_to_inf():
    A, scale = ln.trained_ntk_spike(3, s=[1e300, 4.0])
    assert A == 2.0 and scale[0] == np.inf and scale[1] == pytest.approx(4.0 ** (4 / 3))
    q0, r0 = ln.qr_initial_moments(10, 5, 1e300)
    assert q0 == np.inf and r0 == np.inf
    q0, r0 = ln.qr_initial_moments(10, 5, 1e150)
    assert q0 == pytest.approx(0.5e300 * 3.0) and r0 == pytest.approx(1e300 / math.sqrt(5))


@pytest.mark.parametrize("depth", [1, 2, 3, 5])
def test_time_scales_leave_the_range_only_as_inf_or_zero(depth):
    """plateau_time and half_time at extreme s, c0, eta: the exact value where
    representable (against the log-space formula), +inf or 0 beyond, never a warning."""
    for s, c0, eta in [(1e150, 1e-3, 1e300), (1e-150, 1e-300, 1e-300), (1e300, 1e-300, 1e150),
                       (2.0, 1e-300, 1e-300), (1.0, 0.25, 1e-300)]:
        t = float(ln.plateau_time(s, c0, depth, eta))
        if depth == 1:
            log_t = math.log(math.log(2.0)) - math.log(eta)
        elif depth == 2:
            log_t = math.log(math.log(s) - math.log(c0)) - math.log(2 * eta) - math.log(s)
        else:
            log_t = (-(depth - 2) / depth * math.log(c0) - math.log(eta) - math.log(s)
                     - math.log(depth - 2))
        if log_t > 709.8:
            assert t == math.inf
        elif log_t < -745:
            assert t == 0.0
        else:
            assert t == pytest.approx(math.exp(log_t), rel=1e-12)
        th = ln.half_time(s, c0, depth, eta)
        assert not np.isnan(th) and th > 0 or th == 0.0


def test_partially_whitened_huge_gamma_and_scales():
    Xr = RNG.standard_normal((6, 3))
    s = np.linalg.svd(Xr, compute_uv=False)
    for gamma in (1e150, 1e300):
        out = ln.partially_whitened(Xr, gamma)
        assert not np.any(np.isnan(out))
        assert np.any(np.isinf(out)) == (s[0] > 1)
        small = ln.partially_whitened(Xr / (2 * s[0]), gamma)    # every s < 1: 0
        assert np.all(small == 0)
    def close(a, b):   # to the SVD's rounding, relative to the largest entry
        assert np.max(np.abs(a - b)) <= 1e-13 * np.max(np.abs(b))

    for k in (-1000, 1000):   # gamma = 1: X itself
        big = np.ldexp(Xr, k)
        close(ln.partially_whitened(big, 1.0), big)
    close(ln.partially_whitened(np.ldexp(Xr, 1000), 0.5), np.ldexp(ln.partially_whitened(Xr, 0.5), 500))


def test_loss_curve_and_modes_at_extreme_strengths():
    t = np.array([0.0, 1e-300, 1.0, 1e300])
    loss = ln.loss_curve(t, [1e300, 2e300], [1e-300, 1e-300], depth=3)
    assert loss[0] == np.inf and loss[-1] == 0.0 and not np.any(np.isnan(loss))
    loss = ln.loss_curve(t, [1e150, 2e150], [1e-3, 1e-3], depth=2)
    assert loss[0] == pytest.approx(0.5 * 5e300) and loss[-1] == 0.0
    res = ln.multimode_dynamics(t, 1e300 * SYX, 1e-300, depth=3, eta=1e300)
    assert not np.any(np.isnan(res.c)) and np.all(np.isfinite(res.c))


def test_unwhitened_family_overflow_is_named_or_inf():
    x0 = ln.unwhitened_init_stats(W1, W2, SIGMA, BETA)
    with pytest.raises(ValueError, match=r"^Sigma overflows"):
        ln.unwhitened_phase1([0.0, 1.0], 1e300 * SIGMA, BETA, 1.0, x0)
    with pytest.raises(ValueError, match=r"^t \(with s, eta, Sigma\): the weights overflow"):
        ln.unwhitened_kernel_matrix([0.0, 1e3], W1, W2, SIGMA, BETA, 1.0)
    with pytest.raises(ValueError, match=r"^W1, w2 \(with Sigma\): the weights overflow"):
        ln.unwhitened_linear_weights([0.0, 400.0], 1e300 * W1, 1e300 * W2, SIGMA, BETA, 1.0)
    stats = ln.unwhitened_init_stats_expected(4, 1e300, SIGMA, BETA)
    assert np.all(np.isinf(stats[[0, 3, 4, 5]])) and np.all(stats[1:3] == 0)
    A = ln.unwhitened_system_matrix(SIGMA, BETA, 1e300, eta=1e300)
    assert np.all((A == 0) | np.isinf(A)) and np.sum(A != 0) == 9
    M = ln.unwhitened_kernel_matrix([0.0, 1.0], np.ldexp(W1, 1000), np.ldexp(W2, 1000), SIGMA,
                                    BETA, 1e-300)
    assert not np.any(np.isnan(M)) and np.all(np.isinf(M[:, np.eye(3) == 1]))


def test_balanced_flow_at_extreme_task_and_weight_scales():
    """The exact flow is invariant under (Syx, lam, W W^T, eta t) -> scaled by 2^k, 2^k,
    2^k, 2^-k: at Syx ~ 1e300 it converges to Syx itself, and tiny weights (1e-100) escape
    from their plateau as the unit-scale problem does."""
    W1b, W2b = ln.init_lambda_balanced((3, 1, 1), 0.1, 0.1, seed=2)
    ref = ln.lambda_balanced_flow([0.0, 0.5, 2.0, 50.0], W1b, W2b, BETA)
    for k in (-900, 900):
        Wk = [np.ldexp(W1b, k // 2), np.ldexp(W2b, k // 2)]
        got = ln.lambda_balanced_flow(np.ldexp([0.0, 0.5, 2.0, 50.0], -k), *Wk, np.ldexp(BETA, k))
        for g, r in zip(got, ref):
            np.testing.assert_allclose(g, np.ldexp(r, k), rtol=1e-10, atol=0)
    W, A, B = ln.lambda_balanced_flow([2.0], W1b, W2b, 1e300 * BETA)
    np.testing.assert_allclose(W[0], 1e300 * BETA[None, :], rtol=0, atol=1e-12 * 1e300)
    tiny = ln.lambda_balanced_flow([2e200], np.ldexp(W1b, -330), np.ldexp(W2b, -330), BETA)[0]
    np.testing.assert_allclose(tiny[0], BETA[None, :], rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match=r"overflow") as err:
        ln.lambda_balanced_flow([1.0], 1e300 * W1b, 1e300 * W2b, BETA)
    assert "W1" in str(err.value)
    for sigma in (1e150, 1e300, 1e-300):
        Wa, Wb = ln.init_lambda_balanced((3, 1, 1), 0.1, sigma, seed=2)
        assert np.all(np.isfinite(Wa)) and np.all(np.isfinite(Wb))


def test_regime_diagnostics_are_scale_free():
    K0 = X @ X.T + np.eye(6)
    for k in (-1000, 1000):
        assert ln.kernel_drift(np.ldexp(K0, k), np.ldexp(1.5 * K0, k)) == pytest.approx(0.5)
        rd = ln.relative_change([np.ldexp(W1, k), W2], [np.ldexp(2 * W1, k), 3 * W2])
        np.testing.assert_allclose(rd, [1.0, 2.0], rtol=1e-14)
    assert ln.kernel_drift(np.ldexp(K0, -1000), np.ldexp(K0, 1000)) == np.inf
    cos, n = ln.condensation(np.ldexp(W1, -1000))
    cos1, n1 = ln.condensation(W1)
    np.testing.assert_allclose(cos, cos1, rtol=1e-12)
    assert n == n1
    assert ln.output_variance(1e300 * RNG.standard_normal((5, 3))) == np.inf
    # a tolerance below rounding (1 - eps == 1): every distinct unit its own orientation,
    # at once (the covering loop must progress when a unit's cosine with itself rounds < 1)
    for d in (2, 3):
        Wd = RNG.standard_normal((30, d))
        assert ln.condensation(Wd, eps=1e-300)[1] == 30


def test_kernel_regression_and_lazy_prediction_scale_free_in_the_kernel():
    K = X @ X.T + 0.5 * np.eye(6)
    Kt = X2 @ X.T
    y = X @ BETA
    f = ln.kernel_regression(K, Kt, y, ridge=0.1)
    t = np.array([0.0, 1.0, 1e10])
    Ftr, Fte = ln.lazy_prediction(t, K, Kt, y)
    for k in (-1000, 1000):
        np.testing.assert_allclose(ln.kernel_regression(np.ldexp(K, k), np.ldexp(Kt, k), y,
                                                        ridge=np.ldexp(0.1, k)), f, rtol=1e-13)
    for k in (-600, 600):   # K 2^k at times t 2^-k: the same flow
        a, b = ln.lazy_prediction(np.ldexp(t, -k), np.ldexp(K, k), np.ldexp(Kt, k), y)
        np.testing.assert_allclose(a, Ftr, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(b, Fte, rtol=1e-12, atol=1e-14)
    a, b = ln.lazy_prediction([0.0, 1e300], np.ldexp(K, 1000), np.ldexp(Kt, 1000), y)
    assert np.all(np.isfinite(a)) and np.all(np.isfinite(b))


def test_small_closed_forms_at_extreme_inputs():
    assert np.all(np.isfinite(ln.diagonal_q([1e300, -1e300])))
    assert ln.diagonal_q(1e308) == np.inf
    assert ln.diagonal_potential([0.1, 0.0], 1e-300) == pytest.approx(
        0.1 * (math.log(0.1) - 2 * math.log(1e-300)) - 0.1, rel=1e-12)
    assert ln.diagonal_potential([0.1, 0.0], 1e300) == 0.0
    d = ln.single_neuron_delta(np.array([1e300, 1.0]), np.array([[1e300, 0.0], [0.0, 1.0]]))
    assert d[0] == 0.0 and d[1] == 0.0
    assert ln.single_neuron_delta(1e300, [0.0, 1.0]) == np.inf
    with pytest.raises(ValueError, match=r"^a0, w0, beta"):
        ln.single_neuron_nu([0.0, 1.0], 1e300, [1.0, 0.0], [1.0, 0.0])
    M = ln.final_kernel_matrix_finite_sigma(W1, W2, BETA, 1e-300)
    assert np.all(np.isfinite(M))
    with pytest.raises(ValueError, match=r"^W1, w2"):
        ln.final_kernel_matrix_finite_sigma(1e300 * W1, 1e300 * W2, BETA, 1.0)
    # D >> P: kappa = D - P + O(1) (rounds to D), nothing learned off the spike
    assert ln.transfer_kappa(40.0, 1e300, 1.0) == pytest.approx(1e300, rel=1e-12)
    assert ln.transfer_error(40.0, 1e300, 1.0, 0.5) == pytest.approx(1.0, rel=1e-12)
    assert 0.0 < ln.transfer_error(40.0, 1e300, 1e300, 0.5) < 1.0


def test_pow2_normalise_is_exact():
    x = RNG.standard_normal(7) * 1e-200
    xs, e = pow2_normalise(x)
    assert 0.5 <= np.max(np.abs(xs)) < 1 and np.array_equal(np.ldexp(xs, e), x)
    assert pow2_normalise(np.zeros(3))[1] == 0 and pow2_normalise(np.zeros(0))[1] == 0


# ------------------------------------------------------------------ simulator horizons, alpha

@pytest.mark.parametrize("t_end", [1e150, 1e300])
@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_gradient_flow_horizon_no_step_budget_reaches_names_t_eval(t_end, backend):
    """t_eval ending past max_steps / eps time scales of the flow ran the whole budget
    (minutes) before it failed; it is a ValueError naming t_eval, raised before the run."""
    if backend == "numba":
        pytest.importorskip("numba")
    with pytest.raises(ValueError, match=r"^t_eval ends at"):
        ln.gradient_flow([W1, W2], X, X @ BETA, [0.0, 1.0, t_end], backend=backend)
    with pytest.raises(ValueError, match=r"^t_eval ends at"):
        ln.prepare_flow(X, X @ BETA, (3, 4, 1), t_end, backend=backend).run([W1, W2])


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_gradient_flow_huge_targets_name_t_eval(backend):
    """Targets scaled by 1e150 make the flow's time scale 1e-150: t_eval = 10 is then
    1e151 time scales, past any step budget (numba ran its whole budget)."""
    if backend == "numba":
        pytest.importorskip("numba")
    with pytest.raises(ValueError, match=r"^t_eval ends at"):
        ln.gradient_flow([W1, W2], X, 1e150 * (X @ BETA), [0.0, 1.0, 10.0], backend=backend)


def test_gradient_flow_reachable_horizon_still_runs():
    """A long but reachable horizon (the tour's kind, far past convergence) is not rejected."""
    tr = ln.gradient_flow([W1, W2], X, X @ BETA, [0.0, 1.0, 1e8], backend="numpy")
    assert tr.success and np.all(np.isfinite(tr.loss))


@pytest.mark.parametrize("t_end", [1e150, 1e300])
def test_gradient_flow_ensemble_horizon_names_t_eval(t_end):
    ws = [[W1, W2], [1.1 * W1, 1.1 * W2]]
    for kw in (dict(), dict(method="RK45", backend="numpy")):
        with pytest.raises(ValueError, match=r"^t_eval ends at"):
            ln.gradient_flow_ensemble(ws, X, X @ BETA, [0.0, t_end], **kw)


@pytest.mark.parametrize("alpha", [1e300, 1e-300, 1e101, 1e-101])
def test_alpha_outside_float_range_names_alpha(alpha):
    """alpha^2 overflowed (OverflowError) or 1/alpha^2 divided by zero (ZeroDivisionError)."""
    with pytest.raises(ValueError, match=r"^alpha must lie in"):
        ln.gradient_flow([W1, W2], X, X @ BETA, [0.0, 1.0], activation="relu",
                         backend="numpy", alpha=alpha)
    W3 = [W1, 0.3 * RNG.standard_normal((4, 4)), W2]
    with pytest.raises(ValueError, match=r"^alpha must lie in"):
        ln.empirical_ntk(W3, X, X2, activation="tanh", alpha=alpha)


def test_alpha_at_the_ends_of_its_range_is_finite():
    for alpha in (1e100, 1e-100):
        K = ln.empirical_ntk([W1, W2], X, X2, activation="tanh", alpha=alpha)
        assert np.all(np.isfinite(K))


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_mlp_ensemble_horizon_names_t_eval(backend):
    if backend == "numba":
        pytest.importorskip("numba")
    ws = [[W1, W2], [1.1 * W1, 1.1 * W2]]
    with pytest.raises(ValueError, match=r"^t_eval ends at"):
        ln.gradient_flow_ensemble(ws, X, X @ BETA, [0.0, 1e150], activation="relu",
                                  method="RK45", backend=backend)


# ------------------------------------------------- the classes of the adversarial sweep

@pytest.mark.parametrize("call", [
    lambda P: ln.whitened_inputs(P, 3), lambda P: ln.teacher_task(P, 3, [2.0, 1.0]),
    lambda P: ln.scalar_teacher(P, 3, 1.0)], ids=["whitened_inputs", "teacher_task",
                                                  "scalar_teacher"])
@pytest.mark.parametrize("P", [1e300, 10 ** 30, 2 ** 63], ids=repr)
def test_counts_beyond_int64_name_the_argument(call, P):
    with pytest.raises(ValueError, match=r"^P must be an integer >= 1 that fits in int64"):
        call(P)


@pytest.mark.parametrize("sizes", [None, math.nan, "abc", "341", 3, (3, 1.5, 1), (3, 1),
                                   (3, 1, 1, 1), (3, 0, 1), np.ones((3, 1))], ids=repr)
def test_layer_sizes_are_validated_by_one_rule(sizes):
    with pytest.raises(ValueError, match=r"^layer_sizes"):
        ln.init_lambda_balanced(sizes, 0.1, 0.1)
    if not isinstance(sizes, tuple) or len(sizes) == 3:   # (3, 1), (3, 1, 1, 1): init_network's
        with pytest.raises(ValueError, match=r"^layer_sizes"):
            ln.init_network(sizes, 0.1)


@pytest.mark.parametrize("call, names", [
    (lambda: ln.transfer_kappa(P=[10.0, 20.0], D=[5.0, 6.0, 7.0], A=1.0), "P, D, A, ridge"),
    (lambda: ln.transfer_error(P=[10.0, 20.0], D=5.0, A=1.0, alpha=[0.1, 0.2, 0.3]),
     "P, D, A, alpha, ridge, noise"),
    (lambda: ln.mode_strength([0.0, 1.0], [1.0, 2.0, 3.0], 1e-3), "t, s, c0, eta"),
    (lambda: ln.qr_trajectory([0.0, 1.0], [1.0, 2.0, 3.0], 1e-3, 0.0), "t, s, q0, r0, eta"),
], ids=["transfer_kappa", "transfer_error", "mode_strength", "qr_trajectory"])
def test_shapes_that_do_not_broadcast_name_every_argument(call, names):
    with pytest.raises(ValueError, match=rf"^arguments {names} cannot be broadcast together"):
        call()


def test_transfer_kappa_broadcasts_its_arguments():
    k = ln.transfer_kappa(P=[[10.0], [20.0]], D=[5.0, 30.0, 70.0], A=1.0)
    assert k.shape == (2, 3)
    assert k[1, 2] == ln.transfer_kappa(20.0, 70.0, 1.0)


@pytest.mark.parametrize("theta0, theta", [([], []), ([], [W1]), ([W1], [])])
def test_relative_change_of_no_layers_names_the_argument(theta0, theta):
    name = "theta0" if not len(theta0) else "theta"
    with pytest.raises(ValueError, match=rf"^{name} must hold at least one layer"):
        ln.relative_change(theta0, theta)


@pytest.mark.parametrize("act", [np.zeros(0), [], None, 5, ("relu",), ("softplus", -1.0),
                                 ("bogus", 1.0)], ids=repr)
def test_activation_normalisation_parses_activations_as_the_simulator(act):
    with pytest.raises(ValueError, match=r"^activation"):
        ln.activation_normalisation(act)
    assert ln.activation_normalisation(["softplus", 5.0]) == \
        ln.activation_normalisation(("softplus", 5.0))


def test_transfer_error_trained_at_a_tiny_s_names_no_internal_argument():
    # s^(2-2/L) underflows: the ridge relative to the kernel is beyond the float range,
    # where kernel regression predicts 0: the error is |w|^2 = 1 (to rounding)
    e = ln.transfer_error_trained(40.0, 100.0, 3, 1.0, s=1e-300, ridge=0.1)
    assert abs(float(e) - 1.0) <= 1e-12
    # ridge 0 stays 0 whatever the scale: the ridgeless error, 1 - P/D on isotropic...
    # ... of the spiked kernel, the same as at s = 1 (the scale drops out)
    assert ln.transfer_error_trained(40.0, 100.0, 3, 1.0, s=1e-300) == \
        ln.transfer_error_trained(40.0, 100.0, 3, 1.0, s=1.0)


def test_register_model_errors_name_its_arguments():
    with pytest.raises(ValueError, match=r"^register_model: cls must be a subclass"):
        ln.register_model("x", 5)
    for name in (5, "", None):
        with pytest.raises(ValueError, match=r"^register_model: name must be a non-empty"):
            ln.register_model(name, ln.Model)
