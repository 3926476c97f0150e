"""Tests of backend selection."""
import numpy as np
import pytest

from linearnets import backend as B
from linearnets.sim.methods import METHODS


def test_check_backend():
    for name in B.BACKENDS:
        assert B.check_backend(name) == name
    for bad in ["torch", "", None, 3, "NUMPY"]:
        with pytest.raises(ValueError):
            B.check_backend(bad)


def test_resolve():
    assert B.resolve_backend("numpy") == "numpy"
    assert B.resolve_backend("numba") == "numba"
    assert B.resolve_backend("auto", max_width=10) == "numba"          # numba is required: no silent numpy
    assert B.resolve_backend("auto", max_width=10, available=("numpy",)) == "numpy"
    with pytest.raises(ValueError):
        B.resolve_backend("numba", available=("numpy",))


def test_cupy_detection_without_import():
    import sys
    installed = B.cupy_installed()
    if not installed:
        assert "cupy" not in sys.modules
        assert not B.gpu_available()
        with pytest.raises(ValueError, match="CuPy"):
            B.get_cupy()
        with pytest.raises(ValueError, match="CuPy"):
            B.resolve_backend("cupy")
    if not B.gpu_available():
        assert B.resolve_backend("auto", max_width=10**6) != "cupy"


def test_to_numpy():
    a = B.to_numpy([1, 2])
    assert a.dtype == np.float64 and np.array_equal(a, [1.0, 2.0])


def test_method_registry():
    """Every method is a family and a tableau; ``"auto"`` chooses among them."""
    assert {"RK45", "DOP853", "SSPRK104", "ROS34PW2", "BS32", "HE21", "auto"} <= set(METHODS)
    for name, (kind, tab) in METHODS.items():
        assert kind in ("erk", "ssp", "rosw", "auto")
        assert (tab is None) == (kind == "auto") and (tab is None or tab.name == name)
    import linearnets as ln
    with pytest.raises(ValueError, match="method"):
        ln.gradient_flow([np.ones((1, 2))], np.ones((3, 2)), np.ones(3), [0.0, 1.0],
                         method="Euler")
