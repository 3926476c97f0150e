"""Gradient descent and stochastic gradient descent through the simulator's models, and the
sharpness of the training loss (docs/descent.md): the front end of the flow
(:mod:`.flow`: validation, the models, the trajectory) with a fixed-step loop in place of
the adaptive integrator."""
from __future__ import annotations

import math

import numpy as np

from .. import _threads
from .._progress import check_progress, progress_for
from .._validation import as_float_array, check_int, check_positive, check_seed
from ..curvature import HessianProducts, top_eigenvalues
from ..network import check_biases, check_weights, largest_layer
from .flow import PreparedFlow, _prepare, check_data, check_labels
from .methods import FlowStatus
from .methods.base import Result
from .models import get_model, parse_options

__all__ = ["gradient_descent", "sharpness", "minibatches", "BatchOrder", "check_steps",
           "PreparedDescent", "CHUNK"]


class BatchOrder:
    """The mini-batches of the contract, drawn in order (:func:`minibatches`): ``take(n)``
    gives the next ``n`` batches as an int64 array (n, b), one permutation per epoch."""

    def __init__(self, P, batch_size, seed=0):
        self.rng = np.random.default_rng(seed)
        self.P, self.b, self.count = P, batch_size, P // batch_size
        self.perm, self.j = None, self.count       # the epoch's permutation, next batch

    def take(self, n):
        b, out, k = self.b, np.empty((n, self.b), dtype=np.int64), 0
        while k < n:
            if self.j == self.count:
                self.perm, self.j = self.rng.permutation(self.P), 0
            m = min(n - k, self.count - self.j)
            out[k:k + m] = self.perm[self.j * b:(self.j + m) * b].reshape(m, b)
            k, self.j = k + m, self.j + m
        return out


def minibatches(P, batch_size, seed=0):
    """The mini-batches of the contract, step after step (an endless generator).

    ``rng = np.random.default_rng(seed)``; epoch e = 0, 1, ... draws ``perm =
    rng.permutation(P)`` (one call per epoch, in order) and yields ``perm[j*b:(j+1)*b]`` for
    j = 0 ... P//b - 1 (a last partial batch is dropped): step k uses batch k mod (P//b) of
    epoch k // (P//b).
    """
    order = BatchOrder(P, batch_size, seed)
    while True:
        yield order.take(1)[0]


#: Steps of one compiled call (a mini-batch call's indices: CHUNK x b ints); Ctrl-C
#: (``FlowInterrupted``) is seen between calls.
CHUNK = 4096


def check_steps(steps):
    """``steps`` as an int64 (T,) array: strictly increasing integers ``>= 0``."""
    arr = as_float_array(steps, "steps", ndim=(0, 1)).reshape(-1)
    if arr.size == 0:
        raise ValueError("steps must contain at least one step count")
    if np.any(arr != np.round(arr)) or np.any(arr < 0) or np.any(arr > 2.0 ** 62):
        raise ValueError(f"steps must be integers >= 0 (step counts), got {steps!r}")
    if arr.size > 1 and not np.all(np.diff(arr) > 0):
        raise ValueError("steps must be strictly increasing")
    return arr.astype(np.int64)


class PreparedDescent(PreparedFlow):
    """:class:`~.flow.PreparedFlow` whose run is gradient descent with step ``lr`` at the step
    counts ``steps`` (full batch, or the :func:`minibatches` of ``batch_size`` and ``seed``);
    no breakdown guard (a loss may rise: large steps), no horizon test."""

    what, breakdown_rise, horizon_test = "gradient descent", None, False

    def configure(self, steps, lr, batch_size, seed, sharpness_k):
        self.steps, self.lr = steps, lr
        self.batch_size, self.seed, self.sharpness_k = batch_size, seed, sharpness_k
        self.method = "GD" if batch_size is None else "SGD"
        return self

    def _advance(self, net, ws, bs):
        """``advance(y, n) -> steps taken`` for ``n <= CHUNK`` (fewer than n where the next
        state is not finite; ``y`` the last finite state, updated in place)."""
        xp, lr = self.xp, self.lr
        if self.batch_size is None and net.descent_ops is not None:
            loop, data = net.descent_ops()            # compiled: Python per CHUNK steps
            g = np.empty(net.layout.size)
            return lambda y, m: int(loop(y, g, m, lr, data))
        if self.batch_size is None:
            step_net, order = net, None
        else:
            cls = self.model
            if self.backend == "numba" and cls.name == "linear":
                # a batch's samples, not its statistics: the compiled loop of the MLP model
                cls = get_model("mlp").numba_model
            step_net = cls(ws, bs, self.options, xp=xp)
            order = BatchOrder(self.X.shape[0], self.batch_size, self.seed)
            Xd, Yd = self._data
            first = np.arange(self.batch_size)
            step_net.prepare(Xd[first], Yd[first])
            if step_net.batch_ops is not None:
                loop, data, full = step_net.batch_ops(self.X, self.Y)
                g = np.empty(net.layout.size)
                return lambda y, m: int(loop(y, g, order.take(m), lr, data, full))
        g = xp.empty(net.layout.size)

        def advance(y, n):
            for i in range(n):
                if order is not None:
                    idx = order.take(1)[0]
                    step_net.prepare(Xd[idx], Yd[idx])
                step_net.rhs(y, g)
                new = y + lr * g
                if not bool(xp.all(xp.isfinite(new))):
                    return i
                y[...] = new
            return n
        return advance

    def _integrate(self, net, ws, bs, observe):
        steps, lr, tick = self.steps, self.lr, observe.tick
        y = net.xp.array(net.y0, dtype=net.xp.float64, copy=True)
        advance = self._advance(net, ws, bs)
        done = 0

        def result(n_done, nfev, failure=None):
            status = FlowStatus.SUCCESS if failure is None else FlowStatus.NONFINITE
            message = (f"reached the last recorded step ({done})" if failure is None
                       else f"{status.message}: {failure}")
            return Result(n_done=n_done, t_last=done * lr, y_last=y, nfev=nfev, nsteps=done,
                          nrejected=0, status=status, message=message)
        for k, target in enumerate(steps):
            while done < target:               # Python between chunks: Ctrl-C, the bar
                m = min(int(target) - done, CHUNK)
                taken = advance(y, m)
                done += taken
                if taken < m:
                    return result(k, done + 1, f"the weights after step {done + 1} (t = "
                                  f"{(done + 1) * lr:.6g}) are not finite; the state of step "
                                  f"{done} is kept")
                if tick is not None:
                    tick(float(done))
            observe(k, y)
            with np.errstate(over="ignore", invalid="ignore"):
                loss = float(net.loss(y))
            if not math.isfinite(loss):        # the run ends at the recorded step it is in
                return result(k + 1, done, f"the training loss at step {done} (t = "
                              f"{done * lr:.6g}) is not finite (its weights are; they are kept)")
        return result(steps.size, done)

    def _bar(self, progress):
        return progress_for(progress, self.steps, label="step", desc=self.what)


def gradient_descent(weights, X, Y, steps, lr, *, batch_size=None, seed=0,
                     activation="linear", biases=None, multipliers=None, alpha=1.0,
                     centered=False, loss="mse", lr_scales=None, record=(), probe=None,
                     raise_on_failure=False, backend="auto", model=None, sharpness_k=1,
                     progress=None):
    """Train a network by gradient descent, full batch or mini-batch, from ``weights``.

    ``theta_{k+1} = theta_k - lr lr_scales[l-1] dL_{B_k}/dtheta_l(theta_k)`` with ``L_B =
    (1/(alpha^2 |B|)) sum_{mu in B} l(F(x_mu), y_mu)`` (docs/descent.md), through the models
    of :func:`linearnets.gradient_flow` and its network keywords: lr -> 0 with ``k lr = t``
    gives the flow at time t (eta = 1).

    Parameters
    ----------
    weights : list of ndarray (N_l, N_{l-1})
        ``[W_1, ..., W_L]`` at step 0; never modified.
    X, Y : array_like
        As for :func:`linearnets.gradient_flow` (integer labels (P,) for the cross entropy).
    steps : array_like of int, shape (T,)
        Strictly increasing step counts ``>= 0`` at which the state is recorded.
    lr : float
        The step ``> 0``.
    batch_size : int, optional
        None: full batch (every step on all P samples).  Otherwise ``1 <= batch_size <= P``:
        step k uses the batch :func:`minibatches` gives it: ``rng =
        np.random.default_rng(seed)``, one ``rng.permutation(P)`` per epoch, its batches in
        order, a last partial batch dropped.
    seed : int
        The seed of the batch order (mini-batch only).
    activation, biases, multipliers, alpha, centered, loss, lr_scales, model
        The network, as for :func:`linearnets.gradient_flow`.
    record, probe
        As for :func:`linearnets.gradient_flow`, and ``"sharpness"``: the
        ``sharpness_k`` largest eigenvalues of the full-batch loss's Hessian
        (:func:`sharpness`, with ``lr_scales``) at every recorded step, ``traj.sharpness``
        (T, sharpness_k).
    raise_on_failure : bool
        A run whose weights stop being finite raises :class:`~linearnets.FlowError`
        instead of warning (:class:`~linearnets.FlowWarning`).
    backend : {"auto", "numpy", "numba", "cupy"}
        numba: the steps between recorded steps run in compiled loops on the model's
        compiled gradient, Python between chunks of :data:`CHUNK` steps only (mini-batch:
        the MLP model, a linear network's too, its batches loaded in the loop).
    sharpness_k : int
        How many eigenvalues ``"sharpness"`` records.
    progress : None, True or False
        A bar over the steps, as :func:`linearnets.gradient_flow`'s over time (None: on a
        terminal once the run has lasted a few seconds).

    Returns
    -------
    Trajectory
        As :func:`linearnets.gradient_flow`'s, with ``steps`` (T,) and ``t = steps * lr``;
        ``loss`` is the full-training-set loss; ``method`` "GD" or "SGD"; ``nfev`` the
        gradients evaluated.  A divergent run has ``success`` False, the step in its
        message and NaN rows from the first recorded step it did not reach.

    Raises
    ------
    FlowInterrupted
        On Ctrl-C, with the steps recorded so far (``trajectory.steps`` included).

    Examples
    --------
    >>> from linearnets.data import scalar_teacher
    >>> from linearnets.network import init_network
    >>> X, y, beta = scalar_teacher(20, 3, 1.0)
    >>> ws = init_network((3, 4, 1), 0.1)
    >>> traj = gradient_descent(ws, X, y, [0, 10, 2000], lr=0.1, backend="numpy")
    >>> traj.t.tolist(), bool(traj.loss[-1] < 1e-10)
    ([0.0, 1.0, 200.0], True)
    """
    ws = check_weights(weights)
    shapes = tuple(w.shape for w in ws)
    X, Y = check_data(X, Y, shapes, loss)
    bs = check_biases(biases, shapes)
    steps = check_steps(steps)
    lr = float(check_positive(lr, "lr", ndim=0))
    if batch_size is not None:
        batch_size = check_int(batch_size, "batch_size", minimum=1, maximum=X.shape[0])
    seed = check_seed(seed)
    check_progress(progress)
    k = check_int(sharpness_k, "sharpness_k", minimum=1)
    prepared = _prepare(shapes, X, Y, {**locals(), "t_eval": steps * lr, "max_steps": 1},
                        PreparedDescent)
    return prepared.configure(steps, lr, batch_size, seed, k).run(ws, bs, progress=progress)


def sharpness(weights, X, Y, *, k=1, biases=None, activation="linear", multipliers=None,
              alpha=1.0, centered=False, loss="mse", lr_scales=None):
    """The ``k`` largest eigenvalues of the Hessian of the full-batch training loss in θ.

    ``L(θ) = (1/(alpha^2 P)) sum_mu l(F(x_mu), y_mu)`` with θ the weights and biases; with
    ``lr_scales`` Λ, the eigenvalues of ``Λ^{1/2} H Λ^{1/2}`` (those of ``Λ H``), which set
    the stability of gradient descent: a minimum is linearly stable iff ``lr λ_max < 2``
    (Cohen et al. 2021 call λ_max the sharpness).  Exact Hessian-vector products (the R-op
    of the backpropagation, Pearlmutter 1994; for ReLU-type activations the pattern of the
    state, away from kinks), Lanczos (``scipy.sparse.linalg.eigsh``) above
    :data:`~linearnets.curvature.DENSE_MAX` parameters, the Hessian formed column by
    column below.

    Parameters
    ----------
    weights, X, Y, biases, activation, multipliers, alpha, centered, loss, lr_scales
        As for :func:`linearnets.gradient_flow` (``centered``: ``f_0`` at these weights).
    k : int
        How many eigenvalues, ``1 <= k <= n`` (the number of parameters).

    Returns
    -------
    ndarray, shape (k,)
        Descending.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.eye(2); Y = np.array([1.0, 0.0])
    >>> float(sharpness([np.array([[0.0, 0.0]])], X, Y)[0])   # H = X^T X / P
    0.5
    """
    ws = check_weights(weights)
    shapes = tuple(w.shape for w in ws)
    X, Y = check_data(X, Y, shapes, loss)
    bs = check_biases(biases, shapes)
    options = parse_options(len(shapes), activation=activation, multipliers=multipliers,
                            alpha=alpha, centered=centered, loss=loss, lr_scales=lr_scales)
    check_labels(options, Y)
    net = get_model("mlp")(ws, bs, options).prepare(X, Y)
    with _threads.limited(X.shape[0] * largest_layer(shapes)):
        return top_eigenvalues(HessianProducts(net), net.y0, k)
