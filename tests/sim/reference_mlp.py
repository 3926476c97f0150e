"""A naive, independent reference of the MLP model of docs/conventions.md ("Beyond linear networks").

Written to be obviously right rather than fast, and to share no code with
``linearnets.sim``: the forward pass, the loss, the gradient over the flattened
parameters (weights, then biases) by explicit per-sample backpropagation with
loops over samples and layers, the per-parameter Jacobian of the outputs, and a
trajectory by ``scipy.integrate.solve_ivp`` (DOP853, rtol 1e-12, atol 1e-14).

The model, for every activation phi (identity for "linear")::

    h_0 = x,  z_l = m_l W_l h_{l-1} + b_l,  h_l = phi(z_l)   (l < L; b_l = 0 without biases)
    f(x) = m_L W_L h_{L-1}
    F(x) = alpha f(x)   or   alpha (f(x) - f_0(x))   (centered; f_0 at the initial weights)
    L(theta) = 1/(alpha^2 P) sum_mu ell(F(x_mu), y_mu)
    ell_mse = 1/2 |y - F|^2,   ell_soft_hinge = log(1 + exp(beta_h (1 - y F))) / beta_h
    d theta_l / dt = -eta lr_scales[l-1] dL/d theta_l,   theta_l = (W_l, b_l)

A vectorised gradient (the same backpropagation with whole batches as matrix
products) is provided for speed (trajectories, benchmarks); the tests check it
against the loop version and both against central finite differences.
"""
from __future__ import annotations

import numpy as np
from scipy.integrate import solve_ivp
from scipy.special import expit

__all__ = ["parse_activation", "parse_loss", "RefMLP", "reference_flow", "RefFlow", "fd_grad",
           "kink_free_inputs"]


# --------------------------------------------------------------------------- activations
def parse_activation(activation):
    """``"relu"``, ``("leaky_relu", a)``, ``("softplus", beta)``... -> (name, parameter)."""
    if isinstance(activation, (tuple, list)):
        name, par = activation[0], float(activation[1])
    else:
        name, par = activation, None
    defaults = {"linear": None, "relu": None, "tanh": None, "leaky_relu": 0.01, "softplus": 1.0}
    if name not in defaults:
        raise ValueError(f"unknown activation {activation!r}")
    return name, (defaults[name] if par is None else par)


def phi(z, act):
    name, a = act
    if name == "linear":
        return z.copy()
    if name == "relu":
        return np.where(z > 0, z, 0.0)
    if name == "leaky_relu":
        return np.maximum(z, a * z)
    if name == "softplus":
        return np.logaddexp(0.0, a * z) / a
    if name == "tanh":
        return np.tanh(z)
    raise AssertionError(name)


def dphi(z, act):
    """phi'(z); at a kink (z = 0) the left slope, so relu'(0) = 0."""
    name, a = act
    if name == "linear":
        return np.ones_like(z)
    if name == "relu":
        return np.where(z > 0, 1.0, 0.0)
    if name == "leaky_relu":
        return np.where(z > 0, max(1.0, a), min(1.0, a))
    if name == "softplus":
        return expit(a * z)
    if name == "tanh":
        return 1.0 - np.tanh(z) ** 2
    raise AssertionError(name)


def parse_loss(loss):
    if isinstance(loss, (tuple, list)):
        name, par = loss[0], float(loss[1])
    else:
        name, par = loss, None
    if name == "mse":
        return ("mse", None)
    if name == "soft_hinge":
        return ("soft_hinge", 20.0 if par is None else par)
    raise ValueError(f"unknown loss {loss!r}")


def ell(F, y, loss):
    """Per-sample loss ell(F, y) for F, y of shape (C,)."""
    if loss[0] == "mse":
        return 0.5 * float(np.sum((y - F) ** 2))
    b = loss[1]
    return float(np.sum(np.logaddexp(0.0, b * (1.0 - y * F)) / b))


def dell(F, y, loss):
    """d ell / dF, shape of F."""
    if loss[0] == "mse":
        return F - y
    b = loss[1]
    return -y * expit(b * (1.0 - y * F))


# --------------------------------------------------------------------------- the model
class RefMLP:
    """The docs/conventions.md model with its options fixed; parameters travel as flat vectors.

    Parameters
    ----------
    weights : list of ndarray ``(N_l, N_{l-1})``
        The initial weights (the state at t = 0; they define f_0 when centered).
    biases : list of ndarray ``(N_l,)`` for l < L, or None
    """

    def __init__(self, weights, biases=None, *, activation="linear", multipliers=None,
                 alpha=1.0, centered=False, loss="mse", lr_scales=None, eta=1.0):
        self.w0 = [np.array(w, dtype=np.float64) for w in weights]
        self.L = len(self.w0)
        self.shapes = [w.shape for w in self.w0]
        self.has_bias = biases is not None
        self.b0 = ([np.array(b, dtype=np.float64).reshape(-1) for b in biases]
                   if self.has_bias else [np.zeros(s[0]) for s in self.shapes[:-1]])
        self.act = parse_activation(activation)
        self.m = [1.0] * self.L if multipliers is None else [float(v) for v in multipliers]
        self.alpha = float(alpha)
        self.centered = bool(centered)
        self.loss = parse_loss(loss)
        self.lr = [1.0] * self.L if lr_scales is None else [float(v) for v in lr_scales]
        self.eta = float(eta)
        assert len(self.m) == self.L and len(self.lr) == self.L
        self.theta0 = self.flatten(self.w0, self.b0)

    # ---- layout: [vec(W_1), ..., vec(W_L), b_1, ..., b_{L-1}] (biases only if trained)
    @property
    def size(self):
        n = sum(a * b for a, b in self.shapes)
        if self.has_bias:
            n += sum(s[0] for s in self.shapes[:-1])
        return n

    def flatten(self, ws, bs=None):
        parts = [np.asarray(w, dtype=np.float64).ravel() for w in ws]
        if self.has_bias:
            parts += [np.asarray(b, dtype=np.float64).ravel() for b in bs]
        return np.concatenate(parts)

    def unflatten(self, theta):
        ws, bs, k = [], [], 0
        for (a, b) in self.shapes:
            ws.append(theta[k:k + a * b].reshape(a, b))
            k += a * b
        for (a, _) in self.shapes[:-1]:
            if self.has_bias:
                bs.append(theta[k:k + a])
                k += a
            else:
                bs.append(np.zeros(a))
        assert k == theta.size
        return ws, bs

    def layer_scale_vector(self):
        """lr_scales[l-1] for every flat parameter of layer l (its W_l and b_l)."""
        parts = [np.full(a * b, self.lr[l]) for l, (a, b) in enumerate(self.shapes)]
        if self.has_bias:
            parts += [np.full(a, self.lr[l]) for l, (a, _) in enumerate(self.shapes[:-1])]
        return np.concatenate(parts)

    # ---- forward, one sample at a time, loops over layers
    def _forward_one(self, ws, bs, x):
        hs, zs = [np.asarray(x, dtype=np.float64)], []
        for l in range(self.L - 1):
            z = np.zeros(self.shapes[l][0])
            for i in range(self.shapes[l][0]):          # z_i = m_l sum_j W_ij h_j + b_i
                z[i] = self.m[l] * np.dot(ws[l][i], hs[-1]) + bs[l][i]
            zs.append(z)
            hs.append(phi(z, self.act))
        f = np.array([self.m[-1] * np.dot(ws[-1][i], hs[-1]) for i in range(self.shapes[-1][0])])
        return f, hs, zs

    def f(self, theta, X):
        """Raw network output f(x) (no alpha, not centered), shape (P, C), per-sample loops."""
        ws, bs = self.unflatten(theta)
        return np.array([self._forward_one(ws, bs, x)[0] for x in np.atleast_2d(X)])

    def f_vec(self, theta, X):
        """f by whole-batch matrix products, shape (P, C)."""
        return self._forward_vec(theta, X)[0]

    def _forward_vec(self, theta, X):
        ws, bs = self.unflatten(theta)
        h, hs, zs = np.asarray(X, dtype=np.float64), [], []
        hs.append(h)
        for l in range(self.L - 1):
            z = self.m[l] * h @ ws[l].T + bs[l]
            zs.append(z)
            h = phi(z, self.act)
            hs.append(h)
        return self.m[-1] * h @ ws[-1].T, hs, zs

    def F(self, theta, X, f0=None):
        """F = alpha f, or alpha (f - f_0) when centered (f_0: initial weights on X)."""
        f = self.f_vec(theta, X)
        if self.centered:
            f = f - (self.f_vec(self.theta0, X) if f0 is None else f0)
        return self.alpha * f

    def preactivations(self, theta, X):
        """The hidden pre-activations z_l, list of (P, N_l)."""
        return self._forward_vec(theta, X)[2]

    def min_abs_preactivation(self, theta, X):
        """min |z| over hidden units and samples, leaving out a unit whose whole input
        h_{l-1} is zero without biases (z = 0 there identically, no kink is crossed)."""
        _, hs, zs = self._forward_vec(theta, X)
        best = np.inf
        for l, z in enumerate(zs):
            live = np.any(hs[l] != 0, axis=1) if not self.has_bias else np.ones(len(z), bool)
            if np.any(live):
                best = min(best, float(np.min(np.abs(z[live]))))
        return best

    # ---- loss
    def loss_value(self, theta, X, Y):
        Y = np.asarray(Y, dtype=np.float64).reshape(len(X), -1)
        Fx = self.F(theta, X)
        return sum(ell(Fx[mu], Y[mu], self.loss) for mu in range(len(X))) / (self.alpha ** 2 * len(X))

    # ---- gradient, per sample, explicit loops over layers
    def grad(self, theta, X, Y):
        """dL/dtheta (flat), by backpropagation one sample at a time."""
        X = np.atleast_2d(X)
        Y = np.asarray(Y, dtype=np.float64).reshape(len(X), -1)
        ws, bs = self.unflatten(theta)
        f0 = self.f_vec(self.theta0, X) if self.centered else None
        gW = [np.zeros(s) for s in self.shapes]
        gb = [np.zeros(s[0]) for s in self.shapes[:-1]]
        P = len(X)
        for mu in range(P):
            f, hs, zs = self._forward_one(ws, bs, X[mu])
            Fm = self.alpha * (f - f0[mu] if self.centered else f)
            # dL/df_mu = 1/(alpha^2 P) * dell/dF * alpha
            delta = dell(Fm, Y[mu], self.loss) / (self.alpha * P)      # dL/df, (C,)
            for l in range(self.L - 1, -1, -1):
                # layer l+1 (0-based l): output o = m W h_{l}; dL/dW = m delta h^T
                gW[l] += self.m[l] * np.outer(delta, hs[l])
                if l == 0:
                    break
                back = self.m[l] * ws[l].T @ delta                    # dL/dh_{l}
                delta = back * dphi(zs[l - 1], self.act)               # dL/dz_{l}
                gb[l - 1] += delta
        return self.flatten(gW, gb)

    def grad_vec(self, theta, X, Y, f0=None):
        """dL/dtheta by whole-batch GEMMs (same maths as :meth:`grad`)."""
        X = np.asarray(X, dtype=np.float64)
        Y = np.asarray(Y, dtype=np.float64).reshape(len(X), -1)
        ws, _ = self.unflatten(theta)
        f, hs, zs = self._forward_vec(theta, X)
        if self.centered:
            f = f - (self.f_vec(self.theta0, X) if f0 is None else f0)
        Fx = self.alpha * f
        if self.loss[0] == "mse":
            g = Fx - Y
        else:
            b = self.loss[1]
            g = -Y * expit(b * (1.0 - Y * Fx))
        delta = g / (self.alpha * len(X))                                 # (P, C)
        gW = [None] * self.L
        gb = [None] * (self.L - 1)
        for l in range(self.L - 1, -1, -1):
            gW[l] = self.m[l] * delta.T @ hs[l]
            if l == 0:
                break
            delta = (self.m[l] * delta @ ws[l]) * dphi(zs[l - 1], self.act)
            gb[l - 1] = delta.sum(axis=0)
        return self.flatten(gW, gb)

    def rhs(self, theta, X, Y, f0=None):
        """d theta/dt = -eta lr_scales dL/dtheta."""
        return -self.eta * self.layer_scale_vector() * self.grad_vec(theta, X, Y, f0)

    # ---- Jacobian and NTK
    def jacobian(self, theta, X):
        """dF_i(x_mu)/dtheta, shape (P, C, n), per sample and output by backpropagation."""
        X = np.atleast_2d(X)
        ws, bs = self.unflatten(theta)
        C = self.shapes[-1][0]
        J = np.zeros((len(X), C, self.size))
        for mu in range(len(X)):
            _, hs, zs = self._forward_one(ws, bs, X[mu])
            for i in range(C):
                gW = [np.zeros(s) for s in self.shapes]
                gb = [np.zeros(s[0]) for s in self.shapes[:-1]]
                delta = np.zeros(C)
                delta[i] = self.alpha                                   # dF_i/df
                for l in range(self.L - 1, -1, -1):
                    gW[l] = self.m[l] * np.outer(delta, hs[l])
                    if l == 0:
                        break
                    delta = (self.m[l] * ws[l].T @ delta) * dphi(zs[l - 1], self.act)
                    gb[l - 1] = delta
                J[mu, i] = self.flatten(gW, gb)
        return J

    def jacobian_fd(self, theta, X, h=1e-6):
        """dF/dtheta by central finite differences of the per-sample forward pass."""
        n = self.size
        J = np.zeros((len(X), self.shapes[-1][0], n))
        for k in range(n):
            e = np.zeros(n)
            e[k] = h
            J[:, :, k] = self.alpha * (self.f(theta + e, X) - self.f(theta - e, X)) / (2 * h)
        return J

    def ntk(self, theta, X1, X2, jacobian=None):
        """K_ij(x, x') = sum_theta dF_i(x)/dtheta dF_j(x')/dtheta: (P1, P2) or (P1, P2, C, C)."""
        jac = self.jacobian if jacobian is None else jacobian
        J1, J2 = jac(theta, X1), jac(theta, X2)
        K = np.einsum("aik,bjk->abij", J1, J2)
        return K[:, :, 0, 0] if K.shape[2] == 1 else K


def kink_free_inputs(model, P, D, rng, margin=0.2, theta=None, max_tries=100000):
    """P standard normal inputs whose every live hidden pre-activation has |z| >= margin
    (rejection sampling, one sample at a time), for comparisons that must not meet a kink."""
    theta = model.theta0 if theta is None else theta
    rows = []
    for _ in range(max_tries):
        x = rng.standard_normal((1, D))
        if model.min_abs_preactivation(theta, x) >= margin:
            rows.append(x[0])
            if len(rows) == P:
                return np.array(rows)
    raise RuntimeError("no kink-free inputs found; lower the margin")


def fd_grad(model, theta, X, Y, h=1e-6):
    """Central finite differences of :meth:`RefMLP.loss_value`."""
    g = np.zeros_like(theta)
    for k in range(theta.size):
        e = np.zeros_like(theta)
        e[k] = h
        g[k] = (model.loss_value(theta + e, X, Y) - model.loss_value(theta - e, X, Y)) / (2 * h)
    return g


# --------------------------------------------------------------------------- trajectories
class RefFlow:
    """A reference trajectory: ``t`` (T,), ``theta`` (T, n), ``outputs`` F (T, Q, C),
    ``loss`` (T,), ``weights_t`` / ``biases_t`` (lists over layers of (T, ...)),
    ``min_abs_z`` (min |pre-activation| of a training input over [0, t_end] on a fine grid),
    ``sol`` (the solve_ivp result, dense)."""


def reference_flow(weights, X, Y, t_eval, eta=1.0, *, biases=None, activation="linear",
                   multipliers=None, alpha=1.0, centered=False, loss="mse", lr_scales=None,
                   probe=None, rtol=1e-12, atol=1e-14, kink_grid=2001):
    """Integrate the reference flow with ``solve_ivp(method="DOP853")`` from t = 0.

    ``weights`` (and ``biases``) are the state at t = 0; ``t_eval`` strictly
    increasing, >= 0.  Outputs are F on ``probe`` (default: the training inputs).
    """
    model = RefMLP(weights, biases, activation=activation, multipliers=multipliers, alpha=alpha,
                   centered=centered, loss=loss, lr_scales=lr_scales, eta=eta)
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64).reshape(len(X), -1)
    t_eval = np.asarray(t_eval, dtype=np.float64)
    f0 = model.f_vec(model.theta0, X)
    sol = solve_ivp(lambda t, th: model.rhs(th, X, Y, f0), (0.0, float(t_eval[-1])),
                    model.theta0, method="DOP853", rtol=rtol, atol=atol, t_eval=t_eval,
                    dense_output=True)
    if not sol.success:
        raise RuntimeError(sol.message)
    out = RefFlow()
    out.model, out.sol, out.t = model, sol, sol.t
    out.theta = sol.y.T.copy()
    Xp = X if probe is None else np.asarray(probe, dtype=np.float64)
    f0p = model.f_vec(model.theta0, Xp)
    out.outputs = np.array([model.F(th, Xp, f0p) for th in out.theta])
    out.loss = np.array([model.loss_value(th, X, Y) for th in out.theta])
    per = [model.unflatten(th) for th in out.theta]
    out.weights_t = [np.array([p[0][l] for p in per]) for l in range(model.L)]
    out.biases_t = ([np.array([p[1][l] for p in per]) for l in range(model.L - 1)]
                    if model.has_bias else None)
    out.nfev = sol.nfev
    if model.L > 1 and kink_grid:
        grid = np.linspace(0.0, float(t_eval[-1]), kink_grid)
        th = sol.sol(grid).T
        out.min_abs_z = min(model.min_abs_preactivation(t, X) for t in th)
    else:
        out.min_abs_z = np.inf
    return out
