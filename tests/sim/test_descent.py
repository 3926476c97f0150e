"""gradient_descent: against hand-written loops (full batch and the contract's mini-batches),
the batch order, the flow as lr -> 0, divergence, recordings and bad input."""
import warnings

import numpy as np
import pytest

import linearnets as ln
from linearnets.sim import descent
from linearnets.sim.descent import BatchOrder, minibatches
from linearnets.network import init_network

BACKENDS = ["numpy", "numba"]


# --- independent hand-written gradients -----------------------------------------------------
def _tanh_mlp_grad(W1, b1, W2, X, Y, alpha, loss):
    """dL/d(W1, b1, W2) of F = alpha W2 tanh(W1 x + b1), L = (1/(alpha^2 P)) sum l."""
    P = X.shape[0]
    Z = X @ W1.T + b1
    H = np.tanh(Z)
    F = alpha * (H @ W2.T)
    if loss == "mse":
        dF = F - Y
    else:                                  # logistic, labels +-1
        dF = -Y / (1.0 + np.exp(Y * F))
    G = dF / (alpha * P)                   # dL/df
    gW2 = G.T @ H
    GZ = (G @ W2) * (1.0 - H ** 2)
    return GZ.T @ X, GZ.sum(axis=0), gW2


def _tanh_mlp_loss(W1, b1, W2, X, Y, alpha, loss):
    F = alpha * (np.tanh(X @ W1.T + b1) @ W2.T)
    terms = 0.5 * (F - Y) ** 2 if loss == "mse" else np.logaddexp(0.0, -Y * F)
    return terms.sum() / (alpha ** 2 * X.shape[0])


def _linear_grad(Ws, X, Y):
    """dL/dW_l of F = W3 W2 W1 x, L = (1/2P) |Y - X W^T|^2."""
    W1, W2, W3 = Ws
    E = (X @ W1.T @ W2.T @ W3.T - Y) / X.shape[0]          # (P, C)
    return [(E @ W3 @ W2).T @ X, (E @ W3).T @ (X @ W1.T), E.T @ (X @ W1.T @ W2.T)]


def _tanh_problem(loss="mse", P=16, D=3, N=7, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((P, D))
    Y = rng.standard_normal((P, 1)) if loss == "mse" else np.sign(rng.standard_normal((P, 1)))
    W1, W2 = init_network((D, N, 1), 1.0, seed=seed + 1)
    b1 = 0.2 * rng.standard_normal(N)
    return X, Y, W1, b1, W2


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("loss", ["mse", "logistic"])
def test_full_batch_tanh_mlp_against_hand_written_loop(backend, loss):
    """GD on a tanh MLP with a bias, alpha = 2 and per-layer rates, against a hand-written
    loop on a hand-written gradient: the same arithmetic up to the order of sums, 1e-10."""
    X, Y, W1, b1, W2 = _tanh_problem(loss)
    lr, alpha, scales = 0.3, 2.0, (1.0, 0.5)
    steps = np.array([0, 1, 7, 40])
    tr = ln.gradient_descent([W1, W2], X, Y, steps, lr, activation="tanh", biases=[b1],
                             alpha=alpha, lr_scales=scales, loss=loss, backend=backend,
                             record=("weights",))
    assert tr.success and tr.backend == backend and tr.method == "GD"
    a, b, c = W1.copy(), b1.copy(), W2.copy()
    k = 0
    for s in range(steps[-1] + 1):
        if s in steps:
            ref = [a, c]
            for got, want in zip((tr.weights_t[0][k], tr.weights_t[1][k]), ref):
                assert np.max(np.abs(got - want)) <= 1e-10 * np.max(np.abs(want))
            assert np.max(np.abs(tr.biases_t[0][k] - b)) <= 1e-10 * np.max(np.abs(b))
            assert abs(tr.loss[k] - _tanh_mlp_loss(a, b, c, X, Y, alpha, loss)) <= \
                1e-10 * tr.loss[k]
            k += 1
        gA, gb, gC = _tanh_mlp_grad(a, b, c, X, Y, alpha, loss)
        a, b, c = a - lr * scales[0] * gA, b - lr * scales[0] * gb, c - lr * scales[1] * gC
    np.testing.assert_array_equal(tr.t, steps * lr)
    np.testing.assert_array_equal(tr.steps, steps)
    assert tr.nfev == steps[-1] and tr.t_last == steps[-1] * lr


@pytest.mark.parametrize("backend", BACKENDS)
def test_full_batch_linear_net_against_hand_written_loop(backend):
    """A deep linear net (the sufficient-statistics model) against a hand-written loop on the
    raw samples' gradient, 1e-10; end-to-end map and modes recorded."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((30, 4))
    Y = X @ rng.standard_normal((4, 2))
    ws = init_network((4, 5, 5, 2), 0.5, seed=3)
    lr, steps = 0.05, np.array([0, 3, 100])
    tr = ln.gradient_descent(ws, X, Y, steps, lr, backend=backend,
                             record=("weights", "modes", "outputs"))
    assert tr.success
    cur = [w.copy() for w in ws]
    k = 0
    for s in range(steps[-1] + 1):
        if s in steps:
            for l in range(3):
                assert np.max(np.abs(tr.weights_t[l][k] - cur[l])) <= \
                    1e-10 * np.max(np.abs(cur[l]))
            W = cur[2] @ cur[1] @ cur[0]
            assert np.max(np.abs(tr.end_to_end[k] - W)) <= 1e-10 * np.max(np.abs(W))
            np.testing.assert_allclose(tr.outputs[k], X @ W.T, rtol=1e-9, atol=1e-12)
            k += 1
        cur = [w - lr * g for w, g in zip(cur, _linear_grad(cur, X, Y))]


def test_minibatch_order_is_the_contracts():
    """Integers, exactly: one permutation per epoch from default_rng(seed), batches in order,
    the last partial batch dropped."""
    P, b, seed = 10, 3, 7
    got = [next(g) for g in [minibatches(P, b, seed)] for _ in range(8)]
    rng = np.random.default_rng(seed)
    want = []
    for _ in range(3):
        perm = rng.permutation(P)
        want += [perm[j * b:(j + 1) * b] for j in range(P // b)]
    for g_, w_ in zip(got, want[:8]):
        np.testing.assert_array_equal(g_, w_)
    assert all(len(g_) == b for g_ in got)
    order = BatchOrder(P, b, seed)           # in chunks, as the compiled loop takes them
    np.testing.assert_array_equal(np.concatenate([order.take(5), order.take(1),
                                                  order.take(3)]), np.array(want[:9]))


def test_compiled_sgd_in_chunks_against_numpy(monkeypatch):
    """The compiled mini-batch loop, its batches taken CHUNK = 3 at a time (a chunk ends
    inside an epoch and at recorded steps), against the numpy loop: 1e-10."""
    monkeypatch.setattr(descent, "CHUNK", 3)
    X, Y, W1, b1, W2 = _tanh_problem("logistic", P=17)
    for batch in (5, None):                  # (and the full-batch loop in chunks)
        kw = dict(activation="tanh", biases=[b1], loss="logistic", alpha=0.5, centered=True,
                  batch_size=batch, seed=3, record=("weights",))
        a = ln.gradient_descent([W1, W2], X, Y, [0, 4, 11, 12, 25], 0.2, backend="numpy", **kw)
        b = ln.gradient_descent([W1, W2], X, Y, [0, 4, 11, 12, 25], 0.2, backend="numba", **kw)
        for wa, wb in zip(a.weights_t + a.biases_t, b.weights_t + b.biases_t):
            assert np.max(np.abs(wa - wb)) <= 1e-10 * np.max(np.abs(wa))
        np.testing.assert_allclose(b.loss, a.loss, rtol=1e-10)


@pytest.mark.parametrize("backend", BACKENDS)
def test_sgd_against_hand_written_loop(backend):
    """SGD (batch 4 of P = 18: 4 batches an epoch, 2 samples dropped) on a linear net and a
    tanh MLP against hand-written loops with the contract's batch order, 1e-10."""
    rng = np.random.default_rng(2)
    P, b, seed, lr = 18, 4, 11, 0.1
    X = rng.standard_normal((P, 3))
    Y = X @ rng.standard_normal((3, 1))
    ws = init_network((3, 4, 4, 1), 0.7, seed=1)
    steps = np.array([0, 5, 13])
    tr = ln.gradient_descent(ws, X, Y, steps, lr, batch_size=b, seed=seed, backend=backend,
                             record=("weights",))
    assert tr.success and tr.method == "SGD"
    rng_b = np.random.default_rng(seed)
    cur, k, perm = [w.copy() for w in ws], 0, None
    for s in range(steps[-1] + 1):
        if s in steps:
            for l in range(3):
                assert np.max(np.abs(tr.weights_t[l][k] - cur[l])) <= \
                    1e-10 * np.max(np.abs(cur[l]))
            k += 1
            if k == steps.size:
                break
        j = s % (P // b)
        if j == 0:
            perm = rng_b.permutation(P)
        idx = perm[j * b:(j + 1) * b]
        cur = [w - lr * g for w, g in zip(cur, _linear_grad(cur, X[idx], Y[idx]))]
    # full-batch loss recorded (every sample)
    W = cur[2] @ cur[1] @ cur[0]
    assert abs(tr.loss[-1] - 0.5 * np.sum((Y - X @ W.T) ** 2) / P) <= 1e-10 * tr.loss[-1]

    Xt, Yt, W1, b1, W2 = _tanh_problem("mse", P=P)
    tr = ln.gradient_descent([W1, W2], Xt, Yt, [13], lr, batch_size=b, seed=seed,
                             activation="tanh", biases=[b1], backend=backend)
    rng_b = np.random.default_rng(seed)
    a, bb, c = W1.copy(), b1.copy(), W2.copy()
    for s in range(13):
        j = s % (P // b)
        if j == 0:
            perm = rng_b.permutation(P)
        idx = perm[j * b:(j + 1) * b]
        gA, gb, gC = _tanh_mlp_grad(a, bb, c, Xt[idx], Yt[idx], 1.0, "mse")
        a, bb, c = a - lr * gA, bb - lr * gb, c - lr * gC
    assert np.max(np.abs(tr.weights[0] - a)) <= 1e-10 * np.max(np.abs(a))
    assert np.max(np.abs(tr.biases[0] - bb)) <= 1e-10 * np.max(np.abs(bb))


def test_small_steps_approach_the_flow():
    """|theta_GD(k) - theta_GF(k lr)| = O(lr): halving lr twice divides it by 4 (slope 1
    within 10 %)."""
    X, Y, W1, b1, W2 = _tanh_problem("mse")
    kw = dict(activation="tanh", biases=[b1], backend="numpy", record=("weights",))
    T = 2.0
    gf = ln.gradient_flow([W1, W2], X, Y, [0.0, T], rtol=1e-12, atol=1e-14, **kw)
    errs = []
    lrs = [0.02, 0.01, 0.005]
    for lr in lrs:
        gd = ln.gradient_descent([W1, W2], X, Y, [round(T / lr)], lr, **kw)
        errs.append(max(np.max(np.abs(a[-1] - b[-1])) for a, b in
                        zip(gd.weights_t, gf.weights_t)))
    slopes = np.diff(np.log(errs)) / np.diff(np.log(lrs))
    assert np.all(np.abs(slopes - 1.0) < 0.1), slopes


@pytest.mark.parametrize("backend", BACKENDS)
def test_divergence_is_reported(backend):
    """A step far beyond 2 / sharpness: success False, the step in the message, NaN rows
    after, the last finite state kept; FlowError with raise_on_failure."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((10, 3))
    Y = X @ np.ones((3, 1))
    ws = init_network((3, 4, 1), 0.5, seed=0)
    with pytest.warns(ln.FlowWarning, match="after step"):
        tr = ln.gradient_descent(ws, X, Y, [0, 2, 1000], 50.0, backend=backend,
                                 record=("weights",))
    assert not tr.success and tr.status is ln.FlowStatus.NONFINITE
    assert np.isfinite(tr.loss[:2]).all() and np.isnan(tr.loss[2])
    assert all(np.isfinite(w).all() for w in tr.weights)
    n = int(round(tr.t_last / 50.0))
    assert f"after step {n + 1} " in tr.message
    with pytest.raises(ln.FlowError):
        ln.gradient_descent(ws, X, Y, [1000], 50.0, backend=backend, raise_on_failure=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_loss_beyond_the_float_range_ends_the_run(backend):
    """Outputs of 1e160: the squared loss overflows while the weights and the gradient are
    still finite; the run ends at that recorded step (success False, later rows NaN)."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((10, 3))
    Y = X @ np.ones((3, 1))
    ws = [1e160 * rng.standard_normal((1, 3))]
    with pytest.warns(ln.FlowWarning, match="training loss at step 0"):
        tr = ln.gradient_descent(ws, X, Y, [0, 5, 10], 1e-3, backend=backend)
    assert not tr.success and tr.status is ln.FlowStatus.NONFINITE
    assert tr.loss[0] == np.inf and np.isnan(tr.loss[1:]).all()
    assert all(np.isfinite(w).all() for w in tr.weights)


def test_compiled_and_numpy_agree_on_a_long_run():
    """Full-batch numba (one compiled loop between records) against numpy, 500 steps."""
    X, Y, W1, b1, W2 = _tanh_problem("logistic")
    kw = dict(activation="tanh", biases=[b1], loss="logistic", record=("weights",))
    a = ln.gradient_descent([W1, W2], X, Y, [500], 0.5, backend="numpy", **kw)
    b = ln.gradient_descent([W1, W2], X, Y, [500], 0.5, backend="numba", **kw)
    for wa, wb in zip(a.weights, b.weights):
        assert np.max(np.abs(wa - wb)) <= 1e-10 * np.max(np.abs(wa))


@pytest.mark.parametrize("kw, match", [
    (dict(steps=[3, 2]), "steps"), (dict(steps=[-1]), "steps"), (dict(steps=[0.5]), "steps"),
    (dict(steps=[]), "steps"), (dict(lr=0.0), "lr"), (dict(lr=np.nan), "lr"),
    (dict(batch_size=11), "batch_size"), (dict(batch_size=0), "batch_size"),
    (dict(record=("speed",)), "record"), (dict(seed=-1), "seed"),
])
def test_bad_input_raises(kw, match):
    X = np.ones((10, 2))
    Y = np.ones(10)
    args = dict(steps=[0, 1], lr=0.1)
    args.update(kw)
    with pytest.raises(ValueError, match=match):
        ln.gradient_descent(init_network((2, 3, 1), 0.5), X, Y, args.pop("steps"),
                            args.pop("lr"), **args)


def test_success_does_not_warn():
    X = np.eye(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tr = ln.gradient_descent(init_network((3, 2, 1), 0.5), X, np.ones(3), [0, 5], 0.1)
    assert tr.success


def test_numba_steps_never_call_the_python_gradient(monkeypatch):
    """On numba the steps run in the compiled loops: the models' Python rhs/gradient entry
    points are never called (full batch and mini-batch, linear net and MLP)."""
    from linearnets.sim.models.linear import LinearNetNumba
    from linearnets.sim.models.mlp import MLPNumba

    def forbidden(*args, **kwargs):
        raise AssertionError("a step went through Python")
    for cls in (MLPNumba, LinearNetNumba):
        monkeypatch.setattr(cls, "rhs", forbidden)
    monkeypatch.setattr(MLPNumba, "gradient", forbidden)
    X, Y, W1, b1, W2 = _tanh_problem("mse")
    for kw in (dict(), dict(activation="tanh", biases=[b1]), dict(batch_size=5),
               dict(activation="tanh", biases=[b1], batch_size=5)):
        tr = ln.gradient_descent([W1, W2], X, Y, [0, 20, 50], 0.05, backend="numba", **kw)
        assert tr.success and tr.backend == "numba" and tr.nfev == 50
