"""A model from outside the package: registered in one line, run end to end through
``gradient_flow`` on the numpy loop and on the compiled one (the "adding a model" checklist
of ``linearnets/sim/models/base.py``), against the exact solution of its linear flow."""
import numba
import numpy as np
import pytest
import scipy.linalg

import linearnets as ln
from linearnets.sim.methods import compiled
from linearnets.sim.methods._erk_kernels import make_erk_advance
from linearnets.sim.models import Layout, Model, register_model


@numba.njit
def _toy_rhs(y, out, data):                 # dW/dt = eta (Syx - W Sxx), W flat (C*D,)
    Sxx, Syx, eta = data
    C, D = Syx.shape
    W = y.reshape(C, D)
    out[:] = (eta * (Syx - W @ Sxx)).reshape(-1)


class Toy(Model):                           # one layer, F(x) = W x, the squared loss
    name = "toy"

    def __init__(self, weights, biases, options, xp=np):
        self.eta, self.layout = options.eta, Layout([np.shape(weights[0])])
        self.y0 = self.layout.pack(weights)

    def prepare(self, X, Y):
        self.X, self.Y = X, Y
        self.data = (X.T @ X / len(X), Y.T @ X / len(X), self.eta)
        return self

    def rhs(self, y, out=None):
        Sxx, Syx, eta = self.data
        dW = eta * (Syx - self.weights_of(y)[0] @ Sxx)
        return dW.reshape(-1) if out is None else np.copyto(out, dW.reshape(-1)) or out

    def loss(self, y):
        return 0.5 * float(np.mean(np.sum((self.Y - self.outputs(y, self.X)) ** 2, axis=1)))

    def outputs(self, y, Xp):
        return Xp @ self.weights_of(y)[0].T

    def ntk(self, y, X1, X2):
        return X1 @ X2.T

    def weights_of(self, y):
        return self.layout.unpack(y)


class ToyNumba(Toy):                        # the compiled loop around the compiled rhs
    def compiled_ops(self, kind, tab, stop=None):
        if kind == "rosw":
            return kind, None
        return "erk", compiled.DenseStageOps(_ADVANCE[0], _toy_rhs, self.data, self.y0.size)


_ADVANCE = []
Toy.numba_model = ToyNumba
register_model("toy", Toy)


@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_toy_model_runs_end_to_end(backend):
    if backend == "numba" and not _ADVANCE:
        _ADVANCE.append(make_erk_advance(_toy_rhs))     # compiled once, not cached
    rng = np.random.default_rng(0)
    X, Y = rng.standard_normal((20, 3)), rng.standard_normal((20, 2))
    W0 = 0.1 * rng.standard_normal((2, 3))
    t = np.linspace(0.0, 3.0, 7)
    rtol = 1e-9
    traj = ln.gradient_flow([W0], X, Y, t, rtol=rtol, atol=1e-12, backend=backend,
                            model="toy", method="RK45")
    assert traj.success and traj.backend == backend
    Sxx, Syx = X.T @ X / 20, Y.T @ X / 20
    W_star = np.linalg.solve(Sxx, Syx.T).T
    W_end = W_star + (W0 - W_star) @ scipy.linalg.expm(-Sxx * t[-1])
    assert np.max(np.abs(traj.weights[0] - W_end)) <= 100 * rtol * np.max(np.abs(W_end))
    assert np.all(np.diff(traj.loss) <= 0)
