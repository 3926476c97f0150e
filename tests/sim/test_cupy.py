"""The CuPy backend agrees with numpy (runs only where CuPy and a CUDA GPU are present).

The device-independent part of the backend (lazy import, readable errors, the
xp-generic steppers with numpy standing in for CuPy) is tested without a GPU
here and in ``test_stiff.py``.
"""
import sys

import numpy as np
import pytest

from linearnets import backend as B
from linearnets.data import teacher_task
from sim_helpers import fake_cupy

#: The methods every backend runs (the CuPy one in the one numpy/CuPy loop).
METHODS = ("RK45", "DOP853", "SSPRK104", "ROS34PW2", "auto")
from linearnets.sim.flow import gradient_flow
from linearnets.network import init_network


def test_module_does_not_import_cupy():
    if not B.cupy_installed():
        assert "cupy" not in sys.modules


def test_unusable_cupy_is_a_clear_valueerror():
    if B.gpu_available():
        pytest.skip("a GPU is present")
    X, Y = teacher_task(20, 4, [1.0])
    ws = init_network((4, 3, 1), 0.1)
    for method in METHODS:
        with pytest.raises(ValueError, match="(?i)cupy|gpu"):
            gradient_flow(ws, X, Y, [0.0, 1.0], backend="cupy", method=method)
    with pytest.raises(ValueError, match="(?i)cupy|gpu"):
        gradient_flow(ws, X, Y, [0.0, 1.0], backend="cupy", activation="tanh")


def _gpu():
    cp = pytest.importorskip("cupy")
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device")
    except Exception as exc:  # driver missing, etc.
        pytest.skip(f"no usable CUDA device ({exc})")
    return cp


#: Problems of the agreement tests: (layer sizes, teacher singular values, sigma, whiten).
PROBLEMS = [((6, 8, 8, 2), [1.0, 0.5], 0.1, True),
            ((20, 64, 64, 3), [1.0, 0.7, 0.4], 0.05, False)]
T_EVAL = np.array([0.0, 1.0, 20.0, 80.0])
#: rtol of the agreement tests.  The runs reach t = 80, long after these networks have
#: converged, where the gradient is rounding noise and so is what the stiffness estimate
#: reads: different rounding can change a step decision.  It does even on one BLAS:
#: SSPRK104 on the first problem at rtol 1e-8 takes one rejection more as numpy's
#: low-storage stepper than as the generic stepper these backends share, and the two
#: then differ by 4e-10.  At rtol 1e-10 every explicit run and "auto" is within 2.5e-11
#: of the exact flow on these problems (against DOP853 at rtol 1e-13), so two runs agree
#: to 1e-10 whatever they decide.  ROS34PW2 needs 3e5 evaluations there and runs at 1e-8,
#: where its error is below 4e-9: the same decisions give agreement to rounding, others
#: agreement to 2 rtol.
RTOL = {"ROS34PW2": 1e-8}
RTOL_EXPLICIT = 1e-10


def _agreement(method, sizes, svals, sigma, whiten):
    X, Y = teacher_task(200, sizes[0], svals, seed=3, whiten=whiten)
    ws = init_network(sizes, sigma, seed=4)
    rtol = RTOL.get(method, RTOL_EXPLICIT)
    kw = dict(rtol=rtol, atol=rtol * 1e-3, method=method)
    gpu = gradient_flow(ws, X, Y, T_EVAL, backend="cupy", **kw)
    cpu = gradient_flow(ws, X, Y, T_EVAL, backend="numpy", **kw)
    assert gpu.success and cpu.success and gpu.backend == "cupy"
    assert type(gpu.end_to_end) is np.ndarray and gpu.end_to_end.dtype == np.float64
    # the backends round differently: their agreement is that of two runs each within
    # the tolerance of the flow, whatever steps their rounding decides
    bound = 1e-10 if method not in RTOL else 2 * rtol
    scale = np.abs(cpu.end_to_end).max()
    assert np.abs(gpu.end_to_end - cpu.end_to_end).max() <= bound * scale
    for wg, wc in zip(gpu.weights, cpu.weights):
        assert type(wg) is np.ndarray
        assert np.abs(wg - wc).max() <= bound * np.abs(wc).max()
    # the loss is quadratic in the residual, which near convergence is itself of the
    # size of the difference: compare it on the scale of the initial loss
    assert np.abs(gpu.loss - cpu.loss).max() <= 2 * bound * cpu.loss[0]


@pytest.mark.gpu
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("sizes,svals,sigma,whiten", PROBLEMS)
def test_agrees_with_numpy(method, sizes, svals, sigma, whiten):
    _gpu()
    _agreement(method, sizes, svals, sigma, whiten)


@pytest.mark.parametrize("method", [m if m != "ROS34PW2" else
                                    pytest.param(m, marks=pytest.mark.slow)
                                    for m in METHODS])
@pytest.mark.parametrize("sizes,svals,sigma,whiten", PROBLEMS)
def test_agreement_test_with_numpy_standin(monkeypatch, method, sizes, svals, sigma, whiten):
    """The GPU agreement test's whole path, with numpy standing in for CuPy: the
    loop on CuPy's namespace (dense stages) against numpy's (factored, low-storage)."""
    fake_cupy(monkeypatch)
    _agreement(method, sizes, svals, sigma, whiten)


@pytest.mark.parametrize("method", ["DOP853", "ROS34PW2"])
@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_mlp_with_numpy_standin(monkeypatch, method, activation):
    """The MLP on CuPy's namespace, numpy standing in: the device test's path."""
    fake_cupy(monkeypatch)
    _mlp_agreement(method, activation)


@pytest.mark.gpu
@pytest.mark.parametrize("method", ["DOP853", "ROS34PW2"])
@pytest.mark.parametrize("activation", ["tanh", "softplus", "relu"])
def test_mlp_agrees_with_numpy(method, activation):
    """A nonlinear network with biases on the device: the numpy reference on CuPy's
    namespace against numpy.  Each run is within a few rtol of the flow (a few kink_rtol
    where a ReLU net crosses kinks, ``test_rosw_general``), whatever steps its rounding
    decides, so they agree to 100 of the larger tolerance, of the outputs' size (the
    ReLU runs at kink_rtol 1e-5: it slides for most of the horizon, and sliding
    stretches need ~kink_rtol^-1/2 steps; 27,104 and 27,137 evaluations)."""
    _gpu()
    _mlp_agreement(method, activation)


@pytest.mark.gpu
@pytest.mark.parametrize("method", ["DOP853", "SSPRK104"])
@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_mlp_agrees_with_the_compiled_loop(method, activation):
    """The device's loop against the MLP's compiled loop (``backend="numba"``: kinks and
    step control inside ``_erk_kernels.make_erk_advance``), at the tolerance of
    :func:`test_mlp_agrees_with_numpy`: two independent error-controlled runs."""
    _gpu()
    _mlp_agreement(method, activation, reference="numba")


@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_mlp_compiled_with_numpy_standin(monkeypatch, activation):
    """The path of :func:`test_mlp_agrees_with_the_compiled_loop`, numpy standing in."""
    fake_cupy(monkeypatch)
    _mlp_agreement("DOP853", activation, reference="numba")


def _mlp_agreement(method, activation, reference="numpy"):
    rng = np.random.default_rng(0)
    ws = init_network((3, 6, 6, 1), 1.0, seed=1)
    X, Y = rng.standard_normal((15, 3)), rng.standard_normal((15, 1))
    bs = [0.3 * rng.standard_normal(6), 0.3 * rng.standard_normal(6)]
    rtol = 1e-8
    kink_rtol = 1e-5 if activation == "relu" else rtol
    kw = dict(activation=activation, biases=bs, method=method, rtol=rtol, atol=rtol * 1e-3,
              kink_rtol=kink_rtol, record=("outputs", "weights"))
    t_eval = np.array([0.0, 0.5, 2.0])
    gpu = gradient_flow(ws, X, Y, t_eval, backend="cupy", **kw)
    cpu = gradient_flow(ws, X, Y, t_eval, backend=reference, **kw)
    assert gpu.success and cpu.success and gpu.backend == "cupy"
    assert type(gpu.outputs) is np.ndarray and gpu.outputs.dtype == np.float64
    size = np.abs(cpu.outputs).max()
    assert np.abs(gpu.outputs - cpu.outputs).max() <= 100 * kink_rtol * size
