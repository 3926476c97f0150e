r"""The diagonal linear network β = w₊² − w₋², as a model of the general simulator.

f(x) = βᵀx with β = w₊ ⊙ w₊ − w₋ ⊙ w₋ (Woodworth et al. 2020, "Kernel and rich regimes
in overparametrized models"), trained on L = (1/2P)‖y − Xβ‖² (one output) by
dθ/dt = −η·lr_scale·∂L/∂θ:

    dw₊/dt = +2η₊ w₊ ⊙ g,   dw₋/dt = −2η₋ w₋ ⊙ g,   g = Xᵀ(y − Xβ)/P = Σxy − Σxx β,

(η± = η·lr_scales[0 or 1]) on Σxx (D × D) and Σxy (D,), computed once.  The NTK of f is
K(x, x′) = 4 Σ_i (w₊i² + w₋i²) x_i x′_i (no 1/P).  The state is [w₊, w₋] (D,) each.
"""
from __future__ import annotations

import numpy as np

from ..._validation import as_float_array, check_matrix, check_positive
from .base import Layout, Model, parse_options, register_model

__all__ = ["DiagonalNet", "diagonal_flow"]


class DiagonalNet(Model):
    """w₊, w₋ (D,) each; F(x) = (w₊² − w₋²)ᵀx; the squared loss (module docstring)."""

    name = "diagonal"
    linear = True
    smooth = True

    def __init__(self, weights, biases, options, xp=np):
        if biases is not None:
            raise ValueError("biases: the 'diagonal' model has no biases")
        if len(weights) != 2:
            raise ValueError(f"weights: the 'diagonal' model takes [w_plus, w_minus], got "
                             f"{len(weights)} arrays")
        wp, wm = (as_float_array(w, name, ndim=1)
                  for w, name in zip(weights, ("w_plus", "w_minus")))
        if wp.shape != wm.shape:
            raise ValueError(f"w_plus {wp.shape} and w_minus {wm.shape} must have the same shape")
        if (options.activation != "linear" or options.loss != "mse" or options.alpha != 1.0
                or options.centered or np.any(options.multipliers != 1.0)):
            raise ValueError("the 'diagonal' model takes only eta and lr_scales (activation="
                             "'linear', loss='mse', alpha=1, centered=False, no multipliers)")
        self.xp, self.options = np, options
        self.D = wp.size
        self.layout = Layout([(self.D,), (self.D,)])
        self.y0 = self.layout.pack([wp, wm])
        self.rates = 2.0 * options.eta * np.asarray(options.lr_scales, dtype=np.float64)

    def weights_of(self, y):
        return self.layout.unpack(y)

    def beta(self, y):
        wp, wm = self.layout.unpack(y)
        return wp * wp - wm * wm

    def prepare(self, X, Y):
        """The statistics of X (P, D) and y (P,) or (P, 1) (validated by the front end), and
        the data themselves for the loss from the residual (no cancellation)."""
        self._X, self._y = np.asarray(X, dtype=np.float64), np.array(Y, dtype=np.float64).ravel()
        self.Sxx, self.Sxy = self._X.T @ self._X / len(X), self._X.T @ self._y / len(X)
        return self

    def rhs(self, y, out=None):
        wp, wm = self.layout.unpack(y)
        g = self.Sxy - self.Sxx @ (wp * wp - wm * wm)
        if out is None:
            out = np.empty_like(y)
        dp, dm = self.layout.unpack(out)
        np.multiply(self.rates[0] * wp, g, out=dp)
        np.multiply(-self.rates[1] * wm, g, out=dm)
        return out

    def loss(self, y):
        r = self._y - self._X @ self.beta(y)
        return 0.5 * float(r @ r) / len(r)

    def end_to_end(self, y):
        return self.beta(y)[None, :]

    def outputs(self, y, Xp):
        return np.asarray(Xp, dtype=np.float64) @ self.beta(y)[:, None]

    def ntk(self, y, X1, X2):
        wp, wm = self.layout.unpack(y)
        return 4.0 * (np.asarray(X1) * (wp * wp + wm * wm)) @ np.asarray(X2).T


register_model("diagonal", DiagonalNet)


def diagonal_flow(X, y, t_eval, alpha=None, weights=None, eta=1.0, rtol=1e-10, atol=1e-14,
                  method="DOP853", lr_scales=None, max_steps=1_000_000, stop_loss=None):
    r"""Gradient flow of the diagonal linear network β = w₊² − w₋² on (1/2P)‖y − Xβ‖².

    Parameters
    ----------
    X, y : (P, D) array_like, (P,) array_like
    t_eval : (T,) array_like
        Strictly increasing times since initialisation, ≥ 0.
    alpha : float > 0, optional
        Woodworth's initialisation w₊(0) = w₋(0) = α·1 (β(0) = 0).
    weights : [w_plus (D,), w_minus (D,)], optional
        Explicit initial weights instead of ``alpha`` (exactly one of the two).
    eta, rtol, atol : float > 0
        Learning rate; the local error tolerances (as for :func:`linearnets.gradient_flow`).
    method : str
        A method of :func:`linearnets.gradient_flow` (``"DOP853"``, ``"RK45"``, ...).
    lr_scales, max_steps : (2,) floats > 0 or None, int
        Rates of w₊ and w₋ relative to eta; the budget of attempted steps.
    stop_loss : float > 0, optional
        Stop where the loss first falls to this value (located inside the step); every
        later output time gets that state (converged runs need no horizon guess).

    Returns
    -------
    Trajectory
        As :func:`linearnets.gradient_flow` returns it: ``end_to_end`` (T, 1, D) is β(t),
        ``weights`` the final ``(w₊, w₋)``; a failed run says so in ``success`` and
        ``message`` (no warning).
    """
    from ..flow import PreparedFlow, Recording, SolverOptions, StopRule, check_solver, check_t_eval
    X = check_matrix(X, "X")
    P, D = X.shape
    y = as_float_array(y, "y", ndim=1)
    if y.shape != (P,):
        raise ValueError(f"y must have shape ({P},), got {y.shape}")
    if (alpha is None) == (weights is None):
        raise ValueError("give exactly one of alpha and weights")
    if alpha is not None:
        a = float(check_positive(alpha, "alpha", ndim=0))
        weights = [np.full(D, a), np.full(D, a)]
    t_eval = check_t_eval(t_eval)
    options = parse_options(2, eta=float(check_positive(eta, "eta", ndim=0)), lr_scales=lr_scales)
    stop = None if stop_loss is None else StopRule(
        "loss", float(check_positive(stop_loss, "stop_loss", ndim=0)))
    solver = check_solver(SolverOptions(rtol=rtol, atol=atol, max_steps=max_steps,
                                        kink_rtol=rtol, method=method, backend="numpy"))
    return PreparedFlow(((D,), (D,)), X, y[:, None], DiagonalNet, options, solver,
                        Recording(t_eval, frozenset(), None, stop)).run(weights, report=False)
