"""The ensemble axis: B initialisations of one architecture on one data set, in one call.

A phase diagram's points are often small networks run from many seeds (or many
output scales ``alpha``); run one at a time, each pays the fixed cost of a call
and, on the raw-sample path, Python's overhead per stage.  Here the B members
share one state array ``y`` (B, n) (each row a member's parameters, packed as in
:mod:`linearnets.sim.models.base`), and every stage of the stepper evaluates the
gradient of all unfinished members at once with batched matrix products
(``np.matmul`` on stacked (B, N, N) and (B, P, N) arrays).

Error control is per member
---------------------------
Each member keeps its own time, step size, output index and status, and takes
the steps a run of that member alone with the same stepper would take: the same
initial step (Hairer, Norsett & Wanner, *Solving ODEs I*, II.4), the same error
norm and step-size rule, the same switch to the low-order pair at kinks of a
ReLU-type network (:mod:`linearnets.sim.methods.base`), only with the stages of
all members computed together.  (Rounding differs from a separate run, since the
products are batched, so the steps need not agree bit for bit.)  A member that
has reached the last output time, or has failed, is dropped from the batch; the
others go on.  So every member meets its own tolerance whatever the others do,
and a stiff or slow member costs the batch only its own extra steps.

Linear networks: member by member
---------------------------------
A linear network's members run one after another through
:func:`~linearnets.sim.flow.prepare_flow` (one preparation per ``alpha``), each the run
``gradient_flow`` makes of it, on the loops of every method and backend (compiled on
numba, with the linear model's factored stages): the per-member work of those loops is
already most of a ``gradient_flow`` call (``benchmarks/bench_ensemble.py``, 10-16-1: the
compiled loop is ~3/4 of a ``prepare_flow(...).run`` and ~1/2 of a serial call), and a
batched loop of their own (gone) ran at 0.62x the serial speed.

Other networks (ReLU, Softplus, ...): member by member on numba
----------------------------------------------------------------
Where numba is installed and ``backend`` is not ``"numpy"``, an MLP ensemble runs its
members one after another through the raw-sample loop of ``gradient_flow`` on the
compiled MLP (``MLPNumba``), each member the run ``gradient_flow(backend="numba")``
makes of it; ``backend="numpy"`` (or no numba) takes the batched loop below, on numpy.
The rule is measured (``benchmarks/bench_ensemble.py --skip-linear --relu-rounds 2``,
B = 16, one run): the batched loop shares its stepping, so it pays for its slowest
member -- with ReLU 10-16-1 members taking 350 to 6,900 steps (one sliding along kinks)
it took 2x the time of serial compiled calls -- while member by member is serial calls'
speed whatever the spread (1.0x, within noise), and where all members take the same few
steps (ReLU 5-32-1, 40-70 steps) the batched loop gained only ~1.2x over them.

Models
------
* linear activation, no biases, squared loss (any ``alpha``, ``multipliers``,
  ``centered``, ``lr_scales``): :mod:`linearnets.sim.models.linear`, member by member;
* everything else: the MLP of :mod:`linearnets.sim.models.mlp` on raw samples
  (activations, biases, ``alpha``, ``centered``, ``mse`` / ``soft_hinge``), its
  backpropagation batched over members.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Optional

import numpy as np

from .._validation import as_float_array, check_positive
from . import flow as _flow
from .methods.base import FlowStatus
from .methods import STEPPERS
from .methods.base import (CALM_STEPS, KINK_GROWTH, KINK_REJECTIONS, MIN_FACTOR, error_norm,
                           kink_factor, step_factor)
from .models import parse_options
from .models.base import Layout
from .models.mlp import activation_functions, check_biases

__all__ = ["gradient_flow_ensemble", "EnsembleTrajectory", "ENSEMBLE_RECORDABLE", "warm"]

#: What ``record=`` can ask for on the ensemble path.
ENSEMBLE_RECORDABLE = ("weights", "outputs")

#: Default relative tolerance of the low-order pair at kinks: ``max(rtol, KINK_RTOL)``
#: (as ``linearnets.sim.general``).
KINK_RTOL = 1e-4
FALLBACK = "BS32"

# ----------------------------------------------------------------------------------------
# batched models: rhs(Ys (m, n), idx) -> (m, n) for the members idx (an index array or a
# slice), with per-member data (alpha, targets, f_0) selected by idx
# ----------------------------------------------------------------------------------------

def _views(Ys, layout):
    """Views (m, *shape) of each array of the layout into the rows of ``Ys`` (m, n)."""
    o = layout.offsets
    m = Ys.shape[0]
    return [Ys[:, o[i]:o[i + 1]].reshape((m,) + layout.shapes[i])
            for i in range(len(layout.shapes))]


class _BatchedMLP:
    """The MLP of :mod:`.models.mlp`, batched over members (per-member ``alpha``)."""

    def __init__(self, shapes, has_biases, options, alphas, X, Y, Y0):
        self.shapes = shapes
        self.L = len(shapes)
        self.has_biases = has_biases
        lay = list(shapes)
        if has_biases:
            lay += [(s[0],) for s in shapes[:-1]]
        self.layout = Layout(lay)
        self.options = options
        self.phi, self.dphi = activation_functions(options.activation, options.activation_param)
        self.m = [float(v) for v in options.multipliers]
        rates = [options.eta * float(s) for s in options.lr_scales]
        self.rates = rates + (rates[:-1] if has_biases else [])
        self.alpha = alphas.reshape(-1, 1, 1)
        self.smooth = options.activation not in ("relu", "leaky_relu")
        self.linear = options.activation == "linear" and not has_biases
        self.X = X
        self.Y = Y
        self.P = X.shape[0]
        self.pattern = None
        self._buffers = {}
        self.f0 = self.forward(Y0, X) if options.centered else None
        self.y0 = Y0

    def _buffer(self, tag, shape):
        # temporaries of the right-hand side, reused from call to call: a fresh array of a
        # few hundred kB costs page faults that take longer than the arithmetic on it
        key = (tag, shape)
        buf = self._buffers.get(key)
        if buf is None:
            buf = self._buffers[key] = np.empty(shape)
        return buf

    def forward(self, Ys, X, keep=False):
        vs = _views(Ys, self.layout)
        Ws, bs = vs[:self.L], (vs[self.L:] if self.has_biases else None)
        H, Z = [X], []
        h = X
        m = Ys.shape[0]
        for l in range(self.L - 1):
            shape = (m, X.shape[0], self.shapes[l][0])
            z = (np.matmul(h, Ws[l].transpose(0, 2, 1), out=self._buffer(("z", l), shape))
                 if keep else np.matmul(h, Ws[l].transpose(0, 2, 1)))
            if self.m[l] != 1.0:
                z *= self.m[l]
            if bs is not None:
                z += bs[l][:, None, :]
            Z.append(z)
            h = _phi_into(self.options, z, self._buffer(("h", l), shape) if keep else None)
            H.append(h)
        f = np.matmul(h, Ws[-1].transpose(0, 2, 1))
        if self.m[-1] != 1.0:
            f *= self.m[-1]
        return (f, Z, H, Ws) if keep else f

    def _F(self, f, idx):
        F = f - self.f0[idx] if self.f0 is not None else f
        return self.alpha[idx] * F

    def _dloss(self, F):
        if self.options.loss == "mse":
            return F - self.Y
        beta = self.options.loss_param
        return -self.Y * (0.5 * (1.0 + np.tanh(0.5 * beta * (1.0 - self.Y * F))))

    def rhs(self, Ys, idx):
        m = Ys.shape[0]
        out = np.empty_like(Ys)
        f, Z, H, Ws = self.forward(Ys, self.X, keep=True)
        if not self.smooth:
            self.pattern = np.concatenate([(z > 0).reshape(m, -1) for z in Z], axis=1)
        gs = _views(out, self.layout)
        G = self._dloss(self._F(f, idx)) * (1.0 / (self.alpha[idx] * self.P))
        L = self.L
        for l in range(L - 1, -1, -1):
            np.multiply(np.matmul(G.transpose(0, 2, 1), H[l]), -self.rates[l] * self.m[l],
                        out=gs[l])
            if self.has_biases and l < L - 1:
                gs[L + l][...] = G.sum(axis=1) * (-self.rates[L + l])
            if l > 0:
                G = np.matmul(G, Ws[l], out=self._buffer(("G", l), Z[l - 1].shape))
                if self.m[l] != 1.0:
                    G *= self.m[l]
                G *= _dphi_into(self.options, Z[l - 1], self._buffer(("d", l), G.shape))
        return out

    def loss(self, Ys, idx):
        F = self._F(self.forward(Ys, self.X), idx)
        if self.options.loss == "mse":
            terms = 0.5 * np.sum((self.Y - F) ** 2, axis=(1, 2))
        else:
            beta = self.options.loss_param
            u = beta * (1.0 - self.Y * F)
            terms = np.sum(np.maximum(u, 0.0) + np.log1p(np.exp(-np.abs(u))), axis=(1, 2)) / beta
        return terms / (self.alpha[idx].reshape(-1) ** 2 * self.P)

    def outputs(self, Ys, idx, Xo):
        F = self.forward(Ys, Xo)
        if self.options.centered:
            F = F - self.forward(self.y0[idx], Xo)
        return self.alpha[idx] * F

    def end_to_end(self, Ys, idx):
        Ws = _views(Ys, self.layout)[:self.L]
        W = _chain(Ws)
        if self.options.centered:
            W = W - _chain(_views(self.y0[idx], self.layout)[:self.L])
        return (self.alpha[idx] * float(np.prod(self.m))) * W


def _phi_into(options, z, out):
    """The activation of ``z``, written into ``out`` (a new array if None)."""
    name, a = options.activation, options.activation_param
    if out is None:
        out = np.empty_like(z)
    if name == "linear":
        out[...] = z
    elif name == "relu":
        np.maximum(z, 0.0, out=out)
    elif name == "leaky_relu":
        np.multiply(z, a, out=out)
        np.maximum(z, out, out=out)          # max(z, a z), 0 <= a < 1
    elif name == "tanh":
        np.tanh(z, out=out)
    else:                                    # softplus: max(z, 0) + log1p(e^{-b|z|}) / b
        np.abs(z, out=out)
        out *= -a
        np.exp(out, out=out)
        np.log1p(out, out=out)
        out /= a
        out += np.maximum(z, 0.0)
    return out


def _dphi_into(options, z, out):
    """The activation's derivative at ``z`` (``relu'(0) = 0``), written into ``out``."""
    name, a = options.activation, options.activation_param
    if name == "linear":
        out[...] = 1.0
    elif name == "relu":
        np.greater(z, 0.0, out=out)
    elif name == "leaky_relu":
        np.greater(z, 0.0, out=out)
        out *= 1.0 - a
        out += a
    elif name == "tanh":
        np.tanh(z, out=out)
        np.square(out, out=out)
        np.subtract(1.0, out, out=out)
    else:                                    # softplus: (1 + tanh(b z / 2)) / 2
        np.multiply(z, 0.5 * a, out=out)
        np.tanh(out, out=out)
        out += 1.0
        out *= 0.5
    return out


def _chain(Ws):
    W = Ws[0]
    for w in Ws[1:]:
        W = np.matmul(w, W)
    return W


# ----------------------------------------------------------------------------------------
# the batched embedded RK step and the per-member adaptive loop
# ----------------------------------------------------------------------------------------

class _BatchedERK:
    """One attempted step of an embedded explicit RK pair for m members at once, each with its
    own step ``h`` (m,): the arithmetic of :class:`~.methods.erk.ExplicitRK`, row by row."""

    def __init__(self, tableau, rtol, atol):
        self.tableau = tableau
        self.s = tableau.n_stages
        self.A = [np.asarray(tableau.A[i, :i], dtype=np.float64) for i in range(self.s)]
        self.b = np.asarray(tableau.b, dtype=np.float64)
        self.e = np.asarray(tableau.e, dtype=np.float64)
        self.e3 = None if tableau.e3 is None else np.asarray(tableau.e3, dtype=np.float64)
        self.rtol, self.atol = float(rtol), float(atol)
        self.exponent = -1.0 / (tableau.error_order + 1)
        self.n_evals = self.s

    def attempt(self, rhs, idx, y, f, h):
        m, n = y.shape
        s = self.s
        K = np.empty((s + 1, m, n))
        K[0] = f
        hc = h[:, None]
        Kf = K.reshape(s + 1, m * n)
        for i in range(1, s):
            dy = (self.A[i] @ Kf[:i]).reshape(m, n)
            K[i] = rhs(y + hc * dy, idx)
        y_new = y + hc * (self.b @ Kf[:s]).reshape(m, n)
        f_new = rhs(y_new, idx)
        K[s] = f_new
        scale = self.atol + self.rtol * np.maximum(np.abs(y), np.abs(y_new))
        e5 = (self.e @ Kf).reshape(m, n) / scale
        e3 = (self.e3 @ Kf).reshape(m, n) / scale if self.e3 is not None else e5
        err = error_norm(np.sum(e5 * e5, axis=1), np.sum(e3 * e3, axis=1), self.e3 is not None,
                         h, n)
        bad = ~(np.all(np.isfinite(y_new), axis=1) & np.all(np.isfinite(f_new), axis=1))
        err = np.where(bad, np.inf, err)
        return y_new, f_new, err

    def factor(self, err, after_rejection):
        return step_factor(err, self.exponent, after_rejection)


def _rms_rows(a):
    return np.sqrt(np.sum(a * a, axis=1) / a.shape[1]) if a.shape[1] else np.zeros(a.shape[0])


def _initial_steps(main, rhs, y0, f0, h_max):
    """Hairer-Norsett-Wanner II.4 per member (as ``Stepper.initial_step``); one evaluation."""
    scale = main.atol + np.abs(y0) * main.rtol
    d0 = _rms_rows(y0 / scale)
    d1 = _rms_rows(f0 / scale)
    with np.errstate(divide="ignore", invalid="ignore"):
        h0 = np.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / np.where(d1 > 0, d1, 1.0))
    h0 = np.minimum(h0, h_max)
    f1 = rhs(y0 + h0[:, None] * f0, slice(None))
    d2 = _rms_rows((f1 - f0) / scale) / h0
    q = main.tableau.error_order
    dm = np.maximum(d1, d2)
    with np.errstate(divide="ignore"):
        h1 = np.where((d1 <= 1e-15) & (d2 <= 1e-15), np.maximum(1e-6, h0 * 1e-3),
                      (0.01 / np.where(dm > 0, dm, 1.0)) ** (1.0 / (q + 1)))
    return np.minimum(np.minimum(100 * h0, h1), h_max)


def _integrate(net, y0, t_eval, main, low, max_steps, first_step, observe):
    """Per-member adaptive integration of all rows of ``y0`` (B, n) from t = 0 onto ``t_eval``;
    the rules of :func:`linearnets.sim.methods.base.integrate` (plain controller), member by
    member."""
    B, n = y0.shape
    eps = np.finfo(np.float64).eps
    T = t_eval.size
    t = np.zeros(B)
    y = np.array(y0, dtype=np.float64, copy=True)
    all_ = slice(None)
    f = net.rhs(y, all_)
    nfev = np.ones(B, dtype=np.int64)
    pat = None if net.pattern is None else net.pattern.copy()
    k = np.zeros(B, dtype=np.int64)
    nsteps = np.zeros(B, dtype=np.int64)
    nrej = np.zeros(B, dtype=np.int64)
    attempts = np.zeros(B, dtype=np.int64)
    kinks = np.zeros(B, dtype=np.int64)
    fb_steps = np.zeros(B, dtype=np.int64)
    sliding = np.zeros(B)
    status = [FlowStatus.SUCCESS] * B
    active = np.ones(B, dtype=bool)
    bad0 = ~np.all(np.isfinite(f), axis=1)
    for b in np.flatnonzero(bad0):
        status[b] = FlowStatus.NONFINITE
        active[b] = False

    def observe_reached(members):
        # every output time at or before the member's time (a step ends on at most one)
        while members.size:
            members = members[k[members] < T]
            members = members[t_eval[k[members]] <= t[members]]
            if members.size:
                observe(k[members], members, y[members])
                k[members] += 1

    observe_reached(np.flatnonzero(active))
    active &= k < T
    if not active.any():
        return dict(t=t, y=y, nfev=nfev, nsteps=nsteps, nrejected=nrej, status=status, k=k,
                    kinks=kinks, sliding=sliding, fallback_steps=fb_steps)
    if first_step is not None:
        h = np.full(B, min(first_step, float(t_eval[-1])))
    else:
        h = _initial_steps(main, net.rhs, y, f, float(t_eval[-1]))
        nfev += 1
    use_low = np.zeros(B, dtype=bool)
    kink_rej = np.zeros(B, dtype=np.int64)
    calm = np.zeros(B, dtype=np.int64)
    last_cross = np.full(B, np.nan)
    rejected = np.zeros(B, dtype=bool)
    nonfinite = np.zeros(B, dtype=bool)
    # a stage of an attempt may cross a switch that its end state does not (a step along
    # a kink, as methods.base.integrate): every evaluation compares each member's switch
    # pattern with its step's start
    stage_x = np.zeros(B, dtype=bool)
    members_all = np.arange(B)
    rhs = net.rhs
    if pat is not None and low is not None:
        def rhs(Ys, idx):
            out = net.rhs(Ys, idx)
            mem = members_all[idx]
            stage_x[mem] |= np.any(net.pattern != pat[mem], axis=1)
            return out
    while active.any():
        act = np.flatnonzero(active)
        # budget
        over = attempts[act] >= max_steps
        for b in act[over]:
            status[b] = FlowStatus.MAX_STEPS
            active[b] = False
        act = act[~over]
        target = t_eval[k[act]]
        ta, ha = t[act], h[act]
        clip = (ha >= target - ta) | (ta + ha >= target - 4 * eps * np.abs(target))
        t_new = np.where(clip, target, ta + ha)
        step = t_new - ta
        under = step <= 10 * eps * np.maximum(np.abs(ta), 1e-300)
        for b in act[under]:
            status[b] = FlowStatus.NONFINITE if nonfinite[b] else FlowStatus.STEP_UNDERFLOW
            active[b] = False
        act, t_new, step = act[~under], t_new[~under], step[~under]
        if act.size == 0:
            continue
        err = np.empty(act.size)
        y_new = np.empty((act.size, n))
        f_new = np.empty((act.size, n))
        crossed = np.zeros(act.size, dtype=np.int64)
        pat_new = None if pat is None else np.empty((act.size, pat.shape[1]), dtype=bool)
        lo_mask = use_low[act]
        for stepper, sel in ((main, ~lo_mask), (low, lo_mask)):
            if stepper is None or not sel.any():
                continue
            members = act[sel]
            idx = all_ if members.size == B else members
            stage_x[members] = False
            yn, fn, er = stepper.attempt(rhs, idx, y[members], f[members], step[sel])
            y_new[sel], f_new[sel], err[sel] = yn, fn, er
            nfev[members] += stepper.n_evals
            if pat is not None:
                pn = net.pattern
                pat_new[sel] = pn
                crossed[sel] = np.count_nonzero(pn != pat[members], axis=1)
        attempts[act] += 1
        fin = np.isfinite(err)
        # a non-finite trial: rejected, the step cut by MIN_FACTOR
        nf = act[~fin]
        nonfinite[nf] = True
        nrej[nf] += 1
        rejected[nf] = True
        h[nf] = step[~fin] * MIN_FACTOR
        nonfinite[act[fin]] = False
        acc = fin & (err <= 1.0)
        rej = fin & ~(err <= 1.0)
        # accepted steps
        a = act[acc]
        if a.size:
            t[a] = t_new[acc]
            y[a] = y_new[acc]
            f[a] = f_new[acc]
            nsteps[a] += 1
            fb_steps[a[use_low[a]]] += 1
            cr = crossed[acc]
            if pat is not None:
                c_idx = a[cr > 0]
                kinks[c_idx] += cr[cr > 0]
                slide = c_idx[(calm[c_idx] <= CALM_STEPS) & np.isfinite(last_cross[c_idx])]
                sliding[slide] += t[slide] - last_cross[slide]
                last_cross[c_idx] = t[c_idx]
                calm[c_idx] = 0
                pat[c_idx] = pat_new[acc][cr > 0]
                calm[a[(cr == 0) & stage_x[a]]] = 0      # a step along a kink is not calm
                calm[a[(cr == 0) & ~stage_x[a]]] += 1
                back = a[use_low[a] & (calm[a] >= CALM_STEPS)]
                use_low[back] = False
            kink_rej[a] = 0
            ea, sa, ra = err[acc], step[acc], rejected[a]
            lo = use_low[a]
            hm = sa * main.factor(ea, ra)
            if low is not None and lo.any():
                fl = np.where(cr > 0, kink_factor(ea, ra), low.factor(ea, ra))
                hm = np.where(lo, sa * np.minimum(fl, KINK_GROWTH), hm)
            h[a] = hm
            rejected[a] = False
            observe_reached(a)
            done = a[k[a] >= T]
            active[done] = False
        # rejected steps
        r = act[rej]
        if r.size:
            nrej[r] += 1
            cr = crossed[rej] + stage_x[r]
            if low is not None:
                bump = r[(cr > 0) & ~use_low[r]]
                kink_rej[bump] += 1
                sw = bump[kink_rej[bump] >= KINK_REJECTIONS]
                use_low[sw] = True
                kink_rej[sw] = 0
                calm[sw] = 0
            er, sr = err[rej], step[rej]
            lo = use_low[r]
            hr = sr * main.factor(er, True)
            if low is not None and lo.any():
                hl = np.where(cr > 0, kink_factor(er, True), low.factor(er, True))
                hr = np.where(lo, sr * hl, hr)
            h[r] = hr
            rejected[r] = True
    return dict(t=t, y=y, nfev=nfev, nsteps=nsteps, nrejected=nrej, status=status, k=k,
                kinks=kinks, sliding=sliding, fallback_steps=fb_steps)


# ----------------------------------------------------------------------------------------
# the result and the public function
# ----------------------------------------------------------------------------------------

@dataclass(frozen=True, eq=False)
class EnsembleTrajectory:
    """Result of :func:`gradient_flow_ensemble`: B trajectories with a leading member axis.

    Every array is owned and read-only.  A member that failed has NaN rows after its
    last reached output time, as a failed :class:`~linearnets.sim.flow.Trajectory`.

    Attributes
    ----------
    t : ndarray, shape (T,)
        The output times, since initialisation.
    loss : ndarray, shape (B, T)
        Each member's training loss ``(1/(alpha_b^2 P)) sum_mu l(F_b(x_mu), y_mu)``.
    end_to_end : ndarray, shape (B, T, C, D), or None
        ``x -> F_b(x)`` for linear activations without biases (None otherwise).
    outputs : ndarray, shape (B, T, Q, C), or None
        ``F_b`` on the probe inputs (the training inputs without a probe), with
        ``record=("outputs",)``.
    weights : tuple of ndarray (B, N_l, N_{l-1})
        Each member's final weights.
    biases : tuple of ndarray (B, N_l), or None
    weights_t, biases_t : tuple of ndarray (B, T, ...), or None
        With ``record=("weights",)``.
    weights0, biases0 : tuple of ndarray (B, ...), or None
        The parameters at t = 0.
    alpha : ndarray, shape (B,)
        Each member's output scale.
    t_last : ndarray, shape (B,)
        Time of each member's final weights (``t[-1]`` on success).
    nfev, nsteps, nrejected : ndarray of int, shape (B,)
        Per member: evaluations of its gradient, accepted and rejected steps.
    success : ndarray of bool, shape (B,)
    status : tuple of FlowStatus
    message : tuple of str
    kinks, fallback_steps : ndarray of int (B,); sliding_time : ndarray (B,)
        As :class:`~linearnets.sim.flow.Trajectory`, per member.
    method, backend, model : str
    """

    t: np.ndarray
    loss: np.ndarray
    end_to_end: Optional[np.ndarray]
    weights: tuple
    t_last: np.ndarray
    nfev: np.ndarray
    nsteps: np.ndarray
    nrejected: np.ndarray
    success: np.ndarray
    status: tuple
    message: tuple
    method: str
    backend: str
    model: str
    alpha: np.ndarray
    biases: Optional[tuple] = None
    weights_t: Optional[tuple] = None
    biases_t: Optional[tuple] = None
    outputs: Optional[np.ndarray] = None
    kinks: Optional[np.ndarray] = None
    sliding_time: Optional[np.ndarray] = None
    fallback_steps: Optional[np.ndarray] = None
    weights0: Optional[tuple] = None
    biases0: Optional[tuple] = None

    def __post_init__(self):
        for name in ("t", "loss", "end_to_end", "t_last", "nfev", "nsteps", "nrejected",
                     "success", "alpha", "outputs", "kinks", "sliding_time", "fallback_steps"):
            a = getattr(self, name)
            if a is not None:
                a.setflags(write=False)
        for group in (self.weights, self.biases, self.weights_t, self.biases_t, self.weights0,
                      self.biases0):
            for a in group or ():
                a.setflags(write=False)

    @property
    def n_members(self) -> int:
        """B, the number of members."""
        return int(self.loss.shape[0])

    @property
    def all_success(self) -> bool:
        """Whether every member reached the last output time."""
        return bool(np.all(self.success))

    def member(self, b):
        """Member ``b`` as a :class:`~linearnets.sim.flow.Trajectory` (copies)."""
        B = self.n_members
        if isinstance(b, bool) or not isinstance(b, numbers.Integral) or not -B <= b < B:
            raise ValueError(f"b must be an integer in [-{B}, {B}), got {b!r}")
        b = int(b) % B

        def pick(group):
            return None if group is None else tuple(np.array(a[b]) for a in group)
        return _flow.Trajectory(
            t=self.t.copy(), loss=np.array(self.loss[b]),
            end_to_end=None if self.end_to_end is None else np.array(self.end_to_end[b]),
            weights=pick(self.weights), t_last=float(self.t_last[b]), nfev=int(self.nfev[b]),
            nsteps=int(self.nsteps[b]), nrejected=int(self.nrejected[b]),
            success=bool(self.success[b]), status=self.status[b], message=self.message[b],
            method=self.method, backend=self.backend, weights_t=pick(self.weights_t),
            biases=pick(self.biases), biases_t=pick(self.biases_t),
            outputs=None if self.outputs is None else np.array(self.outputs[b]),
            kinks=int(self.kinks[b]), sliding_time=float(self.sliding_time[b]),
            fallback_steps=int(self.fallback_steps[b]), weights0=pick(self.weights0),
            biases0=pick(self.biases0))


def _stack_members(weights_list):
    """``(B, shapes, stacked)``: the members' weights as L stacked (B, N_l, N_{l-1}) arrays,
    from B networks ``[W_1, ..., W_L]`` or from L stacked arrays."""
    if (isinstance(weights_list, (list, tuple)) and weights_list
            and all(isinstance(w, np.ndarray) and w.ndim == 3 for w in weights_list)):
        stacked = []
        for i, w in enumerate(weights_list):
            a = as_float_array(w, f"weights_list[{i}]", ndim=(3,))
            stacked.append(np.ascontiguousarray(a))
        B = stacked[0].shape[0]
        for i, a in enumerate(stacked):
            if a.shape[0] != B:
                raise ValueError(f"weights_list[{i}] stacks {a.shape[0]} members, "
                                 f"weights_list[0] {B}")
            if i and a.shape[2] != stacked[i - 1].shape[1]:
                raise ValueError(f"weights_list[{i}] has shape {a.shape[1:]} but "
                                 f"weights_list[{i - 1}] has {stacked[i - 1].shape[1]} rows: "
                                 f"shapes must chain")
        if B < 1:
            raise ValueError("weights_list must hold at least one member")
        return B, tuple(a.shape[1:] for a in stacked), stacked
    try:
        members = list(weights_list)
    except TypeError as exc:
        raise ValueError("weights_list must be a sequence of networks [W_1, ..., W_L] (one per "
                         "member) or of L stacked (B, N_l, N_(l-1)) arrays") from exc
    if not members:
        raise ValueError("weights_list must hold at least one member")
    from .network import check_weights
    nets = [check_weights(w, f"weights_list[{b}]") for b, w in enumerate(members)]
    shapes = tuple(w.shape for w in nets[0])
    for b, net in enumerate(nets):
        sh = tuple(w.shape for w in net)
        if sh != shapes:
            raise ValueError(f"weights_list[{b}] has layer shapes {sh}, but weights_list[0] "
                             f"has {shapes}: every member must have the same architecture")
    stacked = [np.ascontiguousarray(np.stack([net[i] for net in nets]))
               for i in range(len(shapes))]
    return len(nets), shapes, stacked


def _stack_biases(biases_list, B, shapes):
    if biases_list is None:
        return None
    L = len(shapes)
    if (isinstance(biases_list, (list, tuple)) and len(biases_list) == L - 1 and L > 1
            and all(isinstance(b, np.ndarray) and b.ndim == 2 for b in biases_list)):
        out = []
        for i, b in enumerate(biases_list):
            a = as_float_array(b, f"biases_list[{i}]", ndim=(2,))
            if a.shape != (B, shapes[i][0]):
                raise ValueError(f"biases_list[{i}] must have shape ({B}, {shapes[i][0]}), "
                                 f"got {a.shape}")
            out.append(np.ascontiguousarray(a))
        return out
    try:
        members = list(biases_list)
    except TypeError as exc:
        raise ValueError("biases_list must be None, one bias list per member, or L - 1 stacked "
                         "(B, N_l) arrays") from exc
    if len(members) != B:
        raise ValueError(f"biases_list must have one entry per member (B = {B}), got "
                         f"{len(members)}")
    bs = [check_biases(m, shapes, name=f"biases_list[{b}]") for b, m in enumerate(members)]
    if any(b is None for b in bs):
        raise ValueError("biases_list: every member needs its biases (or pass biases_list=None)")
    return [np.ascontiguousarray(np.stack([b[i] for b in bs])) for i in range(L - 1)]


def _check_alphas(alpha, B):
    if isinstance(alpha, bool):
        raise ValueError(f"alpha must be a number > 0 or one per member (B = {B}), got {alpha!r}")
    try:
        a = np.asarray(alpha, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"alpha must be a number > 0 or one per member (B = {B})") from exc
    if a.ndim == 0:
        a = np.full(B, float(a))
    if a.ndim != 1 or a.size != B:
        raise ValueError(f"alpha must be a scalar or have shape ({B},) (one per member), got "
                         f"shape {a.shape}")
    if not np.all(np.isfinite(a)) or np.any(a <= 0):
        raise ValueError(f"alpha must be finite and > 0 for every member, got {a.tolist()}")
    return np.ascontiguousarray(a)


def gradient_flow_ensemble(weights_list, X, Y, t_eval, eta=1.0, rtol=1e-8, atol=1e-12,
                           backend="auto", *, method="auto", record=(), probe=None,
                           max_steps=None, first_step=None, activation="linear",
                           biases_list=None, multipliers=None, alpha=1.0, centered=False,
                           loss="mse", lr_scales=None, kink_rtol=None, model=None,
                           raise_on_failure=False):
    """Gradient flow of B initialisations of one network on one data set, in one call.

    Member b integrates ``d theta_b/dt = -eta lr_scales[l] dL_b/d theta_{b,l}`` from its
    own weights at t = 0 (time is measured from initialisation), with
    ``L_b(theta) = (1/(alpha_b^2 P)) sum_mu l(F_b(x_mu), y_mu)`` and
    ``F_b = alpha_b f(x; theta_b)`` (or ``alpha_b (f - f_{0,b})`` when centered): the
    network of :func:`linearnets.gradient_flow` (the package's conventions, "Beyond
    linear networks"; Chizat et al. 2019 and Geiger et al. 2019 for ``alpha``), one
    member per row of a (B, n) state.

    Error control is per member (:mod:`linearnets.sim.ensemble`): each member takes the
    steps, with the error norm, step-size rule and kink fallback, of a run of it alone
    by ``linearnets.sim.methods.integrate`` (the raw-sample loop of
    :func:`linearnets.gradient_flow`), so each meets its own ``rtol``/``atol``; the
    stages of all unfinished members are evaluated together, and finished or failed
    members drop out of the batch.  A linear network runs its members one after another
    through :func:`linearnets.prepare_flow` instead (its loops, compiled on numba, on the
    sufficient statistics: ``benchmarks/bench_ensemble.py``), each member the run
    ``gradient_flow`` itself makes.  Other networks (ReLU, Softplus, ...), where numba
    is installed and ``backend`` is not ``"numpy"``, run member by member through
    ``gradient_flow``'s compiled MLP: the batched loop pays for its slowest member, which
    made it up to 2x slower than serial calls (module docstring).

    Parameters
    ----------
    weights_list : sequence of B networks, or of L arrays (B, N_l, N_{l-1})
        Each member's ``[W_1, ..., W_L]`` at t = 0 (all with the same shapes), or the
        layers stacked over members; never modified.
    X : array_like, shape (P, D)
    Y : array_like, shape (P, C) or (P,)
        Shared by all members.
    t_eval : array_like, shape (T,)
        Strictly increasing output times since initialisation, all ``>= 0``.
    eta, rtol, atol : float
        As for :func:`linearnets.gradient_flow` (``100 eps <= rtol < 1``, ``0 < atol < 1``),
        the same for every member.
    backend : {"auto", "numpy", "numba"}
        Linear networks: the backend of ``prepare_flow``.  Other networks: ``"auto"`` and ``"numba"`` run
        member by member on the compiled MLP (``"auto"`` without numba, and ``"numpy"``:
        the batched loop on numpy).
    method : {"auto", "DOP853", "RK45", "SSPRK104", "BS32", "HE21"}
        ``"auto"`` (default): for a linear network ``gradient_flow``'s default (DOP853,
        switching to the L-stable ROS34PW2 where converged modes make the flow stiff),
        member by member; for other networks DOP853 (as ``gradient_flow``), member by
        member on numba, batched on numpy.
    record : collection of str
        Any of ``"weights"``, ``"outputs"``.
    probe : ndarray, shape (Q, D), optional
        Inputs on which ``"outputs"`` are recorded (training inputs by default).
    max_steps : int, optional
        Budget of attempted steps per member.
    first_step : float, optional
    activation, multipliers, centered, loss, lr_scales, kink_rtol
        As for :func:`linearnets.gradient_flow`, shared by all members.
    biases_list : None, sequence of B lists ``[b_1, ..., b_{L-1}]``, or L - 1 arrays (B, N_l)
        Each member's trained hidden biases at t = 0.
    alpha : float or array_like, shape (B,)
        Output scale, one for all or one per member (each > 0).
    model : {None, "linear", "mlp"}
        Force the batched model; by default a linear network without biases on the
        squared loss runs on sufficient statistics, everything else on raw samples.
    raise_on_failure : bool
        As for :func:`linearnets.gradient_flow`: a failed member warns once
        (:class:`~.flow.FlowWarning`) or, with True, raises :class:`~.flow.FlowError`
        (its ``trajectory`` the :class:`EnsembleTrajectory`).

    Returns
    -------
    EnsembleTrajectory
        ``t`` (T,), ``loss`` (B, T), ``end_to_end`` (B, T, C, D) (linear), ``outputs``
        (B, T, Q, C) (recorded), final ``weights`` per member, and per member ``nfev``,
        ``success``, ``message``; ``member(b)`` gives member b as a ``Trajectory``.

    Raises
    ------
    ValueError
        Members of different shapes (naming ``weights_list[b]``), ``alpha`` of the wrong
        length or not > 0, a ``biases_list`` entry of the wrong shape, and every bad
        argument :func:`linearnets.gradient_flow` rejects.

    Examples
    --------
    >>> import numpy as np, linearnets as ln
    >>> X, y, _ = ln.scalar_teacher(20, 3, 1.0)
    >>> nets = [ln.init_network((3, 4, 1), 0.1, seed=s) for s in range(8)]
    >>> ens = ln.gradient_flow_ensemble(nets, X, y, [10.0, 50.0])
    >>> ens.loss.shape, bool(ens.all_success and np.all(ens.loss[:, -1] < 1e-10))
    ((8, 2), True)
    """
    B, shapes, stacked = _stack_members(weights_list)
    L = len(shapes)
    X, Y = _flow.check_data(X, Y, shapes)
    D, C = shapes[0][1], shapes[-1][0]
    t_eval = _flow.check_t_eval(t_eval)
    eta = float(check_positive(eta, "eta", ndim=0))
    rtol, atol = _flow.check_tolerances(rtol, atol)
    max_steps = _flow.DEFAULT_MAX_STEPS if max_steps is None else _flow.check_max_steps(max_steps)
    if first_step is not None:
        first_step = float(check_positive(first_step, "first_step", ndim=0))
    kink_rtol = (max(rtol, KINK_RTOL) if kink_rtol is None
                 else float(check_positive(kink_rtol, "kink_rtol", ndim=0)))
    if backend not in ("auto", "numpy", "numba"):
        raise ValueError(f"backend must be 'auto', 'numpy' or 'numba' on the ensemble path, "
                         f"got {backend!r}")
    if not isinstance(method, str) or (method != "auto" and method not in STEPPERS):
        raise ValueError(f"method must be one of {('auto',) + tuple(STEPPERS)}, got {method!r}")
    options = parse_options(L, activation=activation, multipliers=multipliers, alpha=1.0,
                            centered=centered, loss=loss, lr_scales=lr_scales, eta=eta)
    alphas = _check_alphas(alpha, B)
    bs = _stack_biases(biases_list, B, shapes)
    if options.loss == "soft_hinge":
        if C != 1:
            raise ValueError(f"loss='soft_hinge' needs one output (C = 1), got C = {C}")
        if not np.all(np.abs(Y) == 1.0):
            raise ValueError("Y: loss='soft_hinge' needs labels +1 or -1")
    if record is None:
        rec = frozenset()
    else:
        rec = frozenset((record,) if isinstance(record, str) else record)
    bad = [r for r in rec if r not in ENSEMBLE_RECORDABLE]
    if bad:
        raise ValueError(f"record: unknown quantity {bad[0]!r}; choose from "
                         f"{ENSEMBLE_RECORDABLE}")
    if probe is not None:
        Xo = _flow.check_probe(probe, D, C)[0]
        rec = rec | {"outputs"}
    else:
        Xo = X
    linear_ok = options.activation == "linear" and bs is None and options.loss == "mse"
    if model is None:
        model = "linear" if linear_ok else "mlp"
    if model not in ("linear", "mlp"):
        raise ValueError(f"model must be None, 'linear' or 'mlp', got {model!r}")
    if model == "linear" and not linear_ok:
        raise ValueError("model='linear' needs activation='linear', no biases and loss='mse'")

    from .. import backend as _backend
    kinked = options.activation in ("relu", "leaky_relu")
    if (model == "mlp" and backend != "numpy" and _backend.numba_available()
            and (method != "auto" or kinked)):
        # (a smooth model's "auto" may switch a member to the Rosenbrock-W method, which
        # has no compiled loop on the MLP: those members run one after another below)
        return _report(_mlp_members(stacked, bs, shapes, X, Y, t_eval, options, alphas, rec,
                                    Xo, probe, method, rtol, atol, max_steps, first_step,
                                    kink_rtol), raise_on_failure)
    if model == "linear" or (backend != "numpy" and _backend.numba_available()):
        return _report(_members(stacked, bs, shapes, X, Y, t_eval, options, alphas, rec,
                                Xo if probe is not None else None, method, backend, rtol,
                                atol, max_steps, first_step, kink_rtol, model),
                       raise_on_failure)
    if backend == "numba" and not _backend.numba_available():
        raise ValueError("backend='numba' needs numba, which is not installed")
    Y0 = np.ascontiguousarray(np.concatenate(
        [a.reshape(B, -1) for a in stacked + list(bs or [])], axis=1))
    net = _BatchedMLP(shapes, bs is not None, options, alphas, X, Y, Y0)
    if t_eval[-1] > 0.0:
        with np.errstate(all="ignore"):
            _flow.check_horizon(float(t_eval[-1]), Y0, net.rhs(Y0, slice(None)), max_steps)
    T = t_eval.size
    nan = np.nan
    lossv = np.full((B, T), nan)
    e2e = np.full((B, T, C, D), nan) if net.linear else None
    outs = np.full((B, T, Xo.shape[0], C), nan) if "outputs" in rec else None
    lay_shapes = net.layout.shapes
    wt = (tuple(np.full((B, T) + s, nan) for s in lay_shapes)
          if "weights" in rec else None)

    def observe(ks, members, states):
        lossv[members, ks] = net.loss(states, members)
        if e2e is not None:
            e2e[members, ks] = net.end_to_end(states, members)
        if outs is not None:
            outs[members, ks] = net.outputs(states, members, Xo)
        if wt is not None:
            for arr, v in zip(wt, _views(states, net.layout)):
                arr[members, ks] = v

    name = "DOP853" if method == "auto" else method
    main = _BatchedERK(STEPPERS[name].tableau, rtol, atol)
    low = None if net.smooth else _BatchedERK(STEPPERS[FALLBACK].tableau, kink_rtol, atol)
    with np.errstate(over="ignore", invalid="ignore"):
        raw = _integrate(net, Y0, t_eval, main, low, max_steps, first_step, observe)
    status = tuple(raw["status"])
    success = np.array([s.success for s in status], dtype=bool)
    messages = []
    for b, s in enumerate(status):
        msg = s.message if s.success else f"{s.message} at t = {raw['t'][b]:.6g}"
        if raw["kinks"][b]:
            msg += (f"; {raw['kinks'][b]} kink crossings, {raw['sliding'][b]:.3g} time units "
                    f"sliding, {raw['fallback_steps'][b]} steps by {FALLBACK}")
        messages.append(msg)
    finals = _views(np.array(raw["y"], copy=True), net.layout)
    final_w = tuple(np.ascontiguousarray(a) for a in finals[:L])
    final_b = tuple(np.ascontiguousarray(a) for a in finals[L:]) if bs is not None else None
    t_last = np.where(success, float(t_eval[-1]), raw["t"])
    return _report(EnsembleTrajectory(
        t=t_eval.copy(), loss=lossv, end_to_end=e2e, weights=final_w, t_last=t_last,
        nfev=raw["nfev"], nsteps=raw["nsteps"], nrejected=raw["nrejected"], success=success,
        status=status, message=tuple(messages), method=method, backend="numpy", model=model,
        alpha=alphas, biases=final_b, weights_t=None if wt is None else wt[:L],
        biases_t=None if wt is None or bs is None else wt[L:], outputs=outs,
        kinks=raw["kinks"], sliding_time=raw["sliding"], fallback_steps=raw["fallback_steps"],
        weights0=tuple(np.array(a) for a in stacked),
        biases0=None if bs is None else tuple(np.array(a) for a in bs)), raise_on_failure)


def _report(ens, raise_on_failure):
    """The failure report of ``gradient_flow`` (:func:`~.flow.report_failure`) for an
    ensemble: one warning (or :class:`~.flow.FlowError`) naming the failed members."""
    bad = np.flatnonzero(~ens.success)
    summary = "; ".join(f"member {b}: {ens.message[b]}" for b in bad[:3])
    more = f" (and {bad.size - 3} more)" if bad.size > 3 else ""
    return _flow.report_failure(
        ens, f"{bad.size} of {ens.n_members} members: {summary}{more}" if bad.size else None,
        raise_on_failure)


def _members(stacked, bs, shapes, X, Y, t_eval, options, alphas, rec, probe, method, backend,
             rtol, atol, max_steps, first_step, kink_rtol, model):
    """The members one after another through :func:`~.flow.prepare_flow` (one preparation
    per ``alpha``): member b is the run ``gradient_flow`` makes of it."""
    from .flow import prepare_flow

    B = stacked[0].shape[0]
    trs, prepared = [], {}
    for b in range(B):
        a = float(alphas[b])
        pf = prepared.get(a)
        if pf is None:
            pf = prepared[a] = prepare_flow(
                X, Y, shapes, t_eval, options.eta, rtol, atol, backend, method=method,
                max_steps=max_steps, first_step=first_step, lr_scales=options.lr_scales,
                activation=(options.activation, options.activation_param)
                if options.activation_param is not None else options.activation,
                biases=bs is not None, multipliers=options.multipliers, alpha=a,
                centered=options.centered,
                loss=(options.loss, options.loss_param) if options.loss_param is not None
                else options.loss, kink_rtol=kink_rtol,
                record=tuple(r for r in ("weights", "outputs") if r in rec), model=model)
            if probe is not None:
                pf.Xo = probe      # outputs on the probe (no NTK there, as on this path)
        trs.append(pf.run([a_[b] for a_ in stacked],
                          None if bs is None else [a_[b] for a_ in bs], report=False))
    return _from_members(trs, t_eval, alphas, stacked, bs, model,
                         outs=np.stack([tr.outputs for tr in trs]) if "outputs" in rec else None,
                         weights_t="weights" in rec, method=method)

def _mlp_members(stacked, bs, shapes, X, Y, t_eval, options, alphas, rec, Xo, probe, method,
                 rtol, atol, max_steps, first_step, kink_rtol):
    """The MLP's members as the batch axis of its compiled loop: ``methods.compiled.erk_batch``
    on ``MLPNumba.batch_ops`` (every member the run ``gradient_flow(backend="numba")``
    makes of it, explicit methods, and ``"auto"`` at kinks, where it is the pair that
    ``methods.driver.auto_pair`` picks for rtol: the members' loops on threads, BLAS on one
    thread meanwhile)."""
    from threadpoolctl import threadpool_limits

    from .methods import compiled
    from .methods.base import StepperOptions
    from .methods.driver import FALLBACK as _FALLBACK
    from .methods.driver import METHODS, auto_pair
    from .methods.tableaux import TABLEAUX
    from .models.mlp import MLPNumba

    B, L = stacked[0].shape[0], len(shapes)
    T = t_eval.size
    C = shapes[-1][0]
    ws0 = [np.ascontiguousarray(a[0]) for a in stacked]
    b0 = None if bs is None else [np.ascontiguousarray(a[0]) for a in bs]
    net = MLPNumba(ws0, b0, options).prepare(X, Y)
    Y0 = np.ascontiguousarray(np.concatenate(
        [a.reshape(B, -1) for a in stacked + list(bs or [])], axis=1))
    name = auto_pair(rtol) if method == "auto" else method
    primary = METHODS[name][1]
    low = None if net.smooth else TABLEAUX[_FALLBACK]
    batched = _BatchedMLP(shapes, bs is not None, options, alphas, X, Y, Y0)
    if t_eval[-1] > 0.0:
        with np.errstate(all="ignore"):
            _flow.check_horizon(float(t_eval[-1]), Y0, batched.rhs(Y0, slice(None)), max_steps)
    ops = net.batch_ops(Y0, alphas)
    states = np.full((B, T, Y0.shape[1]), np.nan)

    def observe(k, members, ys):
        states[members, k] = ys

    opts = StepperOptions(rtol=rtol, atol=atol, max_steps=max_steps, first_step=first_step,
                          kink_rtol=kink_rtol)
    with threadpool_limits(1), np.errstate(over="ignore", invalid="ignore"):
        res = compiled.erk_batch(ops, Y0, t_eval, primary, opts, observe, fallback=low, t0=0.0,
                                 predictive=net.smooth, cap_safety=None if net.smooth else 0.0)
    lossv = np.full((B, T), np.nan)
    outs = np.full((B, T, Xo.shape[0], C), np.nan) if "outputs" in rec else None
    e2e = np.full((B, T, C, shapes[0][1]), np.nan) if batched.linear else None
    members = np.arange(B)
    with np.errstate(over="ignore", invalid="ignore"):
        for k in range(T):
            seen = members[np.isfinite(states[:, k, 0])]
            if seen.size:
                lossv[seen, k] = batched.loss(states[seen, k], seen)
                if outs is not None:
                    outs[seen, k] = batched.outputs(states[seen, k], seen, Xo)
                if e2e is not None:
                    e2e[seen, k] = batched.end_to_end(states[seen, k], seen)
    status = tuple(r.status for r in res)
    success = np.array([st.success for st in status], dtype=bool)
    finals = _views(np.stack([r.y_last for r in res]), net.layout)
    wt = _views(states.reshape(B * T, -1), net.layout) if "weights" in rec else None
    wt = None if wt is None else tuple(a.reshape((B, T) + a.shape[1:]) for a in wt)

    def ints(what):
        return np.array([getattr(r, what) for r in res], dtype=np.int64)
    return EnsembleTrajectory(
        t=t_eval.copy(), loss=lossv, end_to_end=e2e,
        weights=tuple(np.ascontiguousarray(a) for a in finals[:L]),
        t_last=np.array([float(t_eval[-1]) if r.status.success else r.t_last for r in res]),
        nfev=ints("nfev"), nsteps=ints("nsteps"), nrejected=ints("nrejected"), success=success,
        status=status, message=tuple(r.message for r in res), method=method, backend="numba",
        model="mlp", alpha=alphas,
        biases=None if bs is None else tuple(np.ascontiguousarray(a) for a in finals[L:]),
        weights_t=None if wt is None else wt[:L],
        biases_t=None if wt is None or bs is None else wt[L:], outputs=outs,
        kinks=ints("kinks"), sliding_time=np.array([r.sliding_time for r in res]),
        fallback_steps=ints("fallback_steps"), weights0=tuple(np.array(a) for a in stacked),
        biases0=None if bs is None else tuple(np.array(a) for a in bs))


def _from_members(trs, t_eval, alphas, stacked, bs, model, *, loss=None, e2e=None, outs=None,
                  final=None, weights_t=False, method=None):
    """The :class:`EnsembleTrajectory` of B member runs ``trs`` (``Trajectory``), with the
    member-by-member routes' own ``loss`` (B, T), ``end_to_end``, ``outputs`` and final
    weights where given (mapped back from a transformed problem), else the runs' own."""
    B = len(trs)

    def stacked_of(name, i):
        return np.stack([getattr(tr, name)[i] for tr in trs])

    L = len(stacked)
    if loss is None:
        loss = np.stack([tr.loss for tr in trs])
    if final is None:
        final = [stacked_of("weights", i) for i in range(L)]
    if e2e is None and trs[0].end_to_end is not None:
        e2e = np.stack([tr.end_to_end for tr in trs])
    final_b = None if bs is None else tuple(stacked_of("biases", i) for i in range(len(bs)))
    wt = tuple(stacked_of("weights_t", i) for i in range(L)) if weights_t else None
    bt = (tuple(stacked_of("biases_t", i) for i in range(len(bs)))
          if weights_t and bs is not None else None)
    status = tuple(tr.status for tr in trs)

    def ints(name):
        return np.array([getattr(tr, name) or 0 for tr in trs], dtype=np.int64)
    return EnsembleTrajectory(
        t=t_eval.copy(), loss=loss, end_to_end=e2e, weights=tuple(final),
        t_last=np.array([tr.t_last for tr in trs], dtype=np.float64),
        nfev=ints("nfev"), nsteps=ints("nsteps"), nrejected=ints("nrejected"),
        success=np.array([s.success for s in status], dtype=bool), status=status,
        message=tuple(tr.message for tr in trs), method=method, backend=trs[0].backend,
        model=model, alpha=alphas, biases=final_b, weights_t=wt, biases_t=bt, outputs=outs,
        kinks=ints("kinks"),
        sliding_time=np.array([tr.sliding_time or 0.0 for tr in trs], dtype=np.float64),
        fallback_steps=ints("fallback_steps"),
        weights0=tuple(np.array(a) for a in stacked),
        biases0=None if bs is None else tuple(np.array(a) for a in bs))


def warm():
    """Load (or compile, the first time) the kernels of the linear ensemble: a small run on
    ``backend="numba"`` (for ``linearnets._warmup`` and a sweep's worker warm-up)."""
    from .. import backend as _backend
    if not _backend.numba_available():
        return
    from ..data import scalar_teacher
    from .network import init_network
    X, y, _ = scalar_teacher(8, 3, 1.0, seed=0)
    nets = [init_network((3, 4, 1), 0.3, seed=s) for s in range(2)]
    gradient_flow_ensemble(nets, X, y, [0.5, 1.0], backend="numba")       # member by member
    gradient_flow_ensemble(nets, X, y, [0.5, 1.0], backend="numba", method="DOP853",
                           record=("weights",))                            # batched attempts
