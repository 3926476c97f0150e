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
from linearnets.sim import _cupy
from linearnets.sim.flow import gradient_flow
from linearnets.sim.network import init_network


def test_module_does_not_import_cupy():
    if not B.cupy_installed():
        assert "cupy" not in sys.modules


def test_unusable_cupy_is_a_clear_valueerror():
    if B.gpu_available():
        pytest.skip("a GPU is present")
    X, Y = teacher_task(20, 4, [1.0])
    ws = init_network((4, 3, 1), 0.1)
    for method in _cupy.METHODS:
        with pytest.raises(ValueError, match="(?i)cupy|gpu"):
            gradient_flow(ws, X, Y, [0.0, 1.0], backend="cupy", method=method)
    # the solver itself imports lazily and fails just as readably
    with pytest.raises(ValueError, match="(?i)cupy|gpu"):
        _cupy.make_solver("DOP853")(None, None, None, None, None)


def test_unknown_method_rejected():
    with pytest.raises(ValueError, match="method"):
        _cupy.make_solver("Euler")


def _gpu():
    cp = pytest.importorskip("cupy")
    try:
        if cp.cuda.runtime.getDeviceCount() < 1:
            pytest.skip("no CUDA device")
    except Exception as exc:  # driver missing, etc.
        pytest.skip(f"no usable CUDA device ({exc})")
    return cp


@pytest.mark.gpu
@pytest.mark.parametrize("method", _cupy.METHODS)
@pytest.mark.parametrize("sizes,svals,sigma,whiten", [
    ((6, 8, 8, 2), [1.0, 0.5], 0.1, True),
    ((20, 64, 64, 3), [1.0, 0.7, 0.4], 0.05, False),
])
def test_agrees_with_numpy(method, sizes, svals, sigma, whiten):
    _gpu()
    X, Y = teacher_task(200, sizes[0], svals, seed=3, whiten=whiten)
    ws = init_network(sizes, sigma, seed=4)
    t_eval = np.array([0.0, 1.0, 20.0, 80.0])
    kw = dict(rtol=1e-8, atol=1e-11, method=method)
    gpu = gradient_flow(ws, X, Y, t_eval, backend="cupy", **kw)
    cpu = gradient_flow(ws, X, Y, t_eval, backend="numpy", **kw)
    assert gpu.success and cpu.success and gpu.backend == "cupy"
    assert type(gpu.end_to_end) is np.ndarray and gpu.end_to_end.dtype == np.float64
    # same algorithm, same steps: only the rounding of the products differs
    scale = np.abs(cpu.end_to_end).max()
    assert np.abs(gpu.end_to_end - cpu.end_to_end).max() <= 1e-10 * scale
    for wg, wc in zip(gpu.weights, cpu.weights):
        assert type(wg) is np.ndarray
        assert np.abs(wg - wc).max() <= 1e-10 * np.abs(wc).max()
    np.testing.assert_allclose(gpu.loss, cpu.loss, rtol=1e-9, atol=1e-14)
