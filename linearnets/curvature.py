"""Curvature of the training loss (docs/descent.md, "Sharpness"): exact Hessian-vector
products from the MLP's R-op, the top of the Hessian's spectrum by Lanczos, and the
modified flow that gradient descent follows to second order (Barrett & Dherin 2021)."""
from __future__ import annotations

import numpy as np
from scipy.sparse.linalg import LinearOperator, eigsh

from . import backend as _backend
from ._validation import check_int

__all__ = ["HessianProducts", "ModifiedFlow", "top_eigenvalues", "DENSE_MAX"]

#: At most this many parameters: the Hessian is formed column by column (n exact products)
#: and diagonalised densely; above, Lanczos (``scipy.sparse.linalg.eigsh``).
DENSE_MAX = 64


class HessianProducts:
    """``v -> Λ^{1/2} H Λ^{1/2} v`` at the states of ``net``, a prepared model with a ``jvp``
    (the R-op: ``J(y) v = -R H(y) v``, ``R`` the rates ``eta lr_scales`` of each parameter, from
    ``net.options``): ``H`` the Hessian of the training loss in θ (weights and biases), ``Λ``
    the ``lr_scales`` (the identity by default), exact to rounding for smooth activations
    and, for ReLU-type ones, away from kinks (their pattern is frozen at the state)."""

    def __init__(self, net):
        if net.jvp is None:
            raise ValueError(f"sharpness: the {net.name!r} model has no exact Hessian-vector "
                             f"product (jvp)")
        self.net = net
        opts = net.options
        scales = np.asarray(opts.lr_scales, dtype=np.float64)
        per_array = list(scales) + (list(scales[:-1]) if net.biases_of(net.y0) is not None
                                    else [])
        sizes = np.diff(net.layout.offsets)
        lam = np.repeat(np.array(per_array[:len(sizes)]), sizes)
        self.root = np.sqrt(lam)                    # Λ^{1/2}
        self.inv = 1.0 / (opts.eta * self.root)     # (eta Λ^{1/2})^{-1}
        self.n = int(net.layout.size)

    def at(self, y):
        """The product at state ``y`` (n,) as a function of v (n,) -> (n,)."""
        net, xp = self.net, self.net.xp
        y = xp.asarray(y, dtype=xp.float64)
        root, inv = xp.asarray(self.root), xp.asarray(self.inv)
        out = xp.empty(self.n)

        def product(v):
            w = xp.asarray(np.ascontiguousarray(v, dtype=np.float64).reshape(-1)) * root
            return _backend.to_numpy(-(net.jvp(y, w, out) * inv))
        return product

    def dense(self, y):
        """The matrix (n, n), column by column (symmetrised: exact products agree to
        rounding)."""
        hv = self.at(y)
        H = np.empty((self.n, self.n))
        e = np.zeros(self.n)
        for i in range(self.n):
            e[i] = 1.0
            H[:, i] = hv(e)
            e[i] = 0.0
        return 0.5 * (H + H.T)


def top_eigenvalues(products, y, k=1, seed=0):
    """The ``k`` largest eigenvalues (descending) of :class:`HessianProducts` ``products`` at
    ``y``: dense below :data:`DENSE_MAX` parameters, Lanczos (``eigsh``, ``which="LA"``, to
    machine precision, a fixed start vector from ``seed``) above.  Where the products overflow
    (a state far out on a diverging run) the eigenvalues exceed the float64 range: +inf."""
    n = products.n
    k = check_int(k, "k", minimum=1, maximum=n)
    overflow = np.full(k, np.inf)
    if n <= DENSE_MAX or k >= n - 1:
        with np.errstate(over="ignore", invalid="ignore"):
            H = products.dense(y)
        return np.linalg.eigvalsh(H)[::-1][:k].copy() if np.isfinite(H).all() else overflow
    hv = products.at(y)
    op = LinearOperator((n, n), matvec=hv, dtype=np.float64)
    v0 = np.random.default_rng(seed).standard_normal(n)
    with np.errstate(over="ignore", invalid="ignore"):
        if not np.isfinite(hv(v0)).all():
            return overflow
    vals = eigsh(op, k=k, which="LA", tol=0.0, v0=v0, return_eigenvectors=False)
    return np.sort(vals)[::-1].copy()


class ModifiedFlow:
    """The model of the modified flow of gradient descent with step ``h`` (Barrett & Dherin
    2021, with rates): ``dθ/dt = f - (h / (2 eta)) J f``, ``f = -eta Λ grad L`` the flow's
    right-hand side and ``J f = eta^2 Λ H Λ grad L`` its exact directional derivative (the
    R-op): the backward error of Euler's step, that is
    ``-eta Λ grad L - (eta h / 2) Λ H Λ grad L``; every other member is the wrapped model's.
    No ``jvp`` of its own (a Rosenbrock method differentiates it by finite differences)."""

    jvp = None
    linearize = None
    descent_ops = None
    compiled_events = False

    def __init__(self, net, h):
        self._net, self._h = net, float(h)
        self._c = 0.5 * self._h / float(net.options.eta)

    def __getattr__(self, name):
        return getattr(self._net, name)

    def stores(self, kind, tab):            # the numpy loop on dense stages
        return kind, None

    def compiled_ops(self, kind, tab, stop=None):
        return kind, None

    def rhs(self, y, out=None):
        net = self._net
        f = net.rhs(y)
        jf = net.jvp(y, f) if net.jvp is not None else net.linearize(y)[0](f)
        out = net.xp.empty_like(f) if out is None else out
        out[...] = f - self._c * jf
        return out
