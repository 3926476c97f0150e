"""The ensemble axis: B initialisations of one architecture on one data set, in one call
(docs/simulator.md, "The ensemble")."""
from __future__ import annotations

import dataclasses
import threading
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Optional

import numpy as np

from .. import _threads
from .._progress import check_progress, progress_for
from .._validation import check_int, check_positive
from ..network import check_biases, check_weights
from . import flow as _flow
from .methods import STEPPERS, FlowStatus
from .methods.compiled import batch_threads

__all__ = ["gradient_flow_ensemble", "EnsembleTrajectory", "ENSEMBLE_RECORDABLE", "warm"]

#: What ``record=`` can ask for on the ensemble path: what a flow records, the sharpness aside.
ENSEMBLE_RECORDABLE = tuple(r for r in _flow.RECORDABLE if r != "sharpness")


@dataclass(frozen=True, eq=False)
class EnsembleTrajectory:
    """Result of :func:`gradient_flow_ensemble`: B trajectories with a leading member axis.

    Every array is owned and read-only.  A member that failed has NaN rows after its
    last reached output time, as a failed :class:`~linearnets.sim.flow.Trajectory`.

    Attributes
    ----------
    t : ndarray, shape (T,)
        The output times, since initialisation.
    loss, end_to_end, outputs, weights, biases, weights_t, biases_t, weights0, biases0
    t_last, nfev, nsteps, nrejected, success, kinks, sliding_time, fallback_steps
    ntk, ntk_norm, ntk_alignment, modes, mode_s, mode_u, mode_v, conservation
        The fields of :class:`~linearnets.sim.flow.Trajectory`, stacked over the members
        (a leading axis B; tuples of such arrays), None where not recorded: ``loss`` (B,
        T) the training loss ``(1/(alpha_b^2 P)) sum_mu l(F_b(x_mu), y_mu)``,
        ``end_to_end`` (B, T, C, D) for linear activations without biases.
    status, message : tuple of FlowStatus, tuple of str
    alpha : ndarray, shape (B,)
        Each member's output scale.
    t_stop : ndarray, shape (B,), or None
        With ``stop=``: the time each member met the stop (NaN where it did not).
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
    ntk: Optional[np.ndarray] = None
    ntk_norm: Optional[np.ndarray] = None
    ntk_alignment: Optional[np.ndarray] = None
    modes: Optional[np.ndarray] = None
    mode_s: Optional[np.ndarray] = None
    mode_u: Optional[np.ndarray] = None
    mode_v: Optional[np.ndarray] = None
    conservation: Optional[np.ndarray] = None
    t_stop: Optional[np.ndarray] = None

    __post_init__ = _flow.Trajectory.__post_init__        # every array read-only

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
        b = check_int(b, "b", minimum=-B, maximum=B - 1) % B

        def pick(name):
            a = getattr(self, name)
            if isinstance(a, tuple):
                return tuple(np.array(x[b]) for x in a)
            if name == "t_stop":
                return None if a is None or np.isnan(a[b]) else float(a[b])
            return None if a is None else a[b].item() if a.ndim == 1 else np.array(a[b])
        return _flow.Trajectory(t=self.t.copy(), status=self.status[b], message=self.message[b],
                                method=self.method, backend=self.backend,
                                **{name: pick(name) for name in _STACKED})


#: The fields of :class:`EnsembleTrajectory` that stack the members' ``Trajectory`` fields.
_STACKED = tuple(f.name for f in dataclasses.fields(EnsembleTrajectory)
                 if f.name not in ("t", "status", "message", "method", "backend", "model", "alpha"))


def _members(arg, name, what, ndim, count=None, shapes=None, B=None):
    """``arg`` as a list of one entry per member, at least one (B where given): a sequence
    of them, or ``count`` (or any number of) arrays (B, ...) of ``ndim`` dimensions stacked
    over the members, ``a[b]`` of shape ``shapes[i]`` where given."""
    try:
        members = list(arg)
    except TypeError as exc:
        raise ValueError(f"{name} must be a sequence of {what}") from exc
    if (members and count in (None, len(members))
            and all(isinstance(a, np.ndarray) and a.ndim == ndim for a in members)):
        n = len(members[0])
        for i, a in enumerate(members):
            if a.shape[0] != n:
                raise ValueError(f"{name}[{i}] stacks {a.shape[0]} members, {name}[0] {n}")
            if shapes is not None and a.shape[1:] != shapes[i]:
                raise ValueError(f"{name}[{i}] must have shape ({n}, {shapes[i][0]}), got "
                                 f"{a.shape}")
        members = [list(layers) for layers in zip(*members)]
    if not members or B not in (None, len(members)):
        raise ValueError(f"{name} must have one entry per member (at least one"
                         f"{'' if B is None else f'; B = {B}'}), got {len(members)}")
    return members


def _stack_members(weights_list, biases_list):
    """``(shapes, nets, biases)``: the members' validated weights and biases (None each
    without), copies, from :func:`_members`."""
    members = _members(weights_list, "weights_list", "networks [W_1, ..., W_L] (one per "
                       "member) or of L stacked (B, N_l, N_(l-1)) arrays", 3)
    nets = [check_weights(w, f"weights_list[{b}]") for b, w in enumerate(members)]
    shapes = tuple(w.shape for w in nets[0])
    for b, net in enumerate(nets):
        sh = tuple(w.shape for w in net)
        if sh != shapes:
            raise ValueError(f"weights_list[{b}] has layer shapes {sh}, but weights_list[0] "
                             f"has {shapes}: every member must have the same architecture")
    if biases_list is None:
        return shapes, nets, [None] * len(nets)
    members = _members(biases_list, "biases_list", "bias lists (one per member) or of L - 1 "
                       "stacked (B, N_l) arrays", 2, len(shapes) - 1, [(r,) for r, _ in shapes],
                       len(nets))
    bs = [check_biases(m, shapes, name=f"biases_list[{b}]") for b, m in enumerate(members)]
    if any(b is None for b in bs):
        raise ValueError("biases_list: every member needs its biases (or pass biases_list=None)")
    return shapes, nets, bs


def gradient_flow_ensemble(weights_list, X, Y, t_eval, eta=1.0, rtol=1e-8, atol=1e-12,
                           backend="auto", *, method="auto", record=(), probe=None,
                           max_steps=None, first_step=None, activation="linear",
                           biases_list=None, multipliers=None, alpha=1.0, centered=False,
                           loss="mse", lr_scales=None, kink_rtol=None, model=None,
                           stop=None, raise_on_failure=False, dense=False, gd_lr=None,
                           progress=None):
    """Gradient flow of B initialisations of one network on one data set, in one call.

    Member b integrates ``d theta_b/dt = -eta lr_scales[l] dL_b/d theta_{b,l}`` from its
    own weights at t = 0 (time is measured from initialisation), with
    ``L_b(theta) = (1/(alpha_b^2 P)) sum_mu l(F_b(x_mu), y_mu)`` and
    ``F_b = alpha_b f(x; theta_b)`` (or ``alpha_b (f - f_{0,b})`` when centered): the
    network of :func:`linearnets.gradient_flow` (the package's conventions, "Beyond
    linear networks"; Chizat et al. 2019 and Geiger et al. 2019 for ``alpha``).

    Each member is the run ``gradient_flow`` makes of it, so each meets its own
    ``rtol``/``atol``; on numba the members run on threads (docs/simulator.md, "The
    ensemble").

    Parameters
    ----------
    weights_list : sequence of B networks, or of L arrays (B, N_l, N_{l-1})
        Each member's ``[W_1, ..., W_L]`` at t = 0 (all with the same shapes), or the
        layers stacked over members; never modified.
    X, Y, t_eval, eta, rtol, atol
        As for :func:`linearnets.gradient_flow`, shared by all members.
    backend : {"auto", "numpy", "numba"}
    method : {"auto", "DOP853", "RK45", "Tsit5", "SSPRK104", "BS32", "HE21"}
    record : collection of str
        Any of ``"weights"``, ``"outputs"``, ``"ntk"``, ``"modes"``, ``"conservation"``,
        member by member (a ``probe`` records ``"outputs"`` and the NTK).
    probe, max_steps, first_step, activation, multipliers, centered, loss, lr_scales
    kink_rtol, stop, dense, gd_lr, model, raise_on_failure, progress
        As for :func:`linearnets.gradient_flow`, for each member (``max_steps`` None: its
        default; a stop ends each member where it meets it, ``"relative_loss"`` against that
        member's loss at t = 0; ``model`` None, ``"linear"`` or ``"mlp"``); a failed member
        warns once (:class:`~.flow.FlowWarning`) or raises :class:`~.flow.FlowError`, its
        ``trajectory`` the :class:`EnsembleTrajectory`; one bar for the ensemble, at the
        mean of the members' positions.
    biases_list : None, sequence of B lists ``[b_1, ..., b_{L-1}]``, or L - 1 arrays (B, N_l)
        Each member's trained hidden biases at t = 0.
    alpha : float or array_like, shape (B,)
        Output scale, one for all or one per member (each > 0).

    Returns
    -------
    EnsembleTrajectory
        ``t`` (T,), ``loss`` (B, T), ``end_to_end`` (B, T, C, D) (linear), ``outputs``
        (B, T, Q, C) (recorded), final ``weights`` per member, and per member ``nfev``,
        ``success``, ``message``; ``member(b)`` gives member b as a ``Trajectory``.

    Raises
    ------
    FlowInterrupted
        On Ctrl-C: its ``trajectory`` is the :class:`EnsembleTrajectory` of what was
        computed (finished members whole, the others up to the interrupt, NaN after, and
        ``success`` False; members that had not started are NaN throughout).
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
    shapes, nets, biases = _stack_members(weights_list, biases_list)
    B = len(nets)
    X, Y = _flow.check_data(X, Y, shapes, loss)
    check_progress(progress)
    alphas = check_positive(alpha, "alpha", ndim=(0, 1))
    if alphas.ndim == 1 and alphas.size != B:
        raise ValueError(f"alpha must be a scalar or have shape ({B},) (one per member), got "
                         f"shape {alphas.shape}")
    alphas = np.array(np.broadcast_to(alphas, (B,)), dtype=np.float64)
    for name, value, allowed in (("backend", backend, ("auto", "numpy", "numba")),
                                 ("method", method, ("auto",) + tuple(STEPPERS)),
                                 ("model", model, (None, "linear", "mlp"))):
        if not (value is None or isinstance(value, str)) or value not in allowed:
            raise ValueError(f"{name} must be one of {allowed} on the ensemble path, got "
                             f"{value!r}")
    record = tuple(_flow.check_record(record, ENSEMBLE_RECORDABLE)
                   | (set() if probe is None else {"outputs"}))
    max_steps = _flow.DEFAULT_MAX_STEPS if max_steps is None else max_steps
    given = {**locals(), "biases": biases_list}
    flows = {a: _flow._prepare(shapes, X, Y, {**given, "alpha": a})
             for a in dict.fromkeys(map(float, alphas))}
    pf, *_ = flows.values()
    threaded = pf.backend == "numba" and B > 1
    bar = progress_for(progress, pf.t_eval, members=B)
    cancel, idle, running = threading.Event(), threading.Condition(), [0]

    def run(b):
        with idle:                    # a member queued behind an interrupt does not start
            if cancel.is_set():
                return
            running[0] += 1

        def tick(t):
            # the bar, and the stop on Ctrl-C, which Python delivers to the main thread only
            if cancel.is_set():
                raise KeyboardInterrupt
            if bar is not None:
                bar.update(t, b)
        try:
            trs[b] = flows[float(alphas[b])]._run(nets[b], biases[b], tick)
        except KeyboardInterrupt as exc:      # a FlowInterrupted keeps what the member computed
            trs[b] = getattr(exc, "trajectory", None)
            raise
        finally:
            with idle:
                running[0] -= 1
                idle.notify_all()
    trs, interrupt = [None] * B, None
    try:
        # on numba, members on threads, each on one BLAS thread (none changes the libraries'
        # setting); on numpy, one after the other
        with ExitStack() as scope:
            if threaded:
                scope.enter_context(_threads.threads(1))
                scope.enter_context(_threads.limited(0))
            pool = scope.enter_context(ThreadPoolExecutor(batch_threads(B) if threaded else 1))
            futures = []
            try:               # (Ctrl-C may come while the first member starts its thread)
                for b in range(B):
                    futures.append(pool.submit(run, b))
                wait(futures)
            except KeyboardInterrupt as exc:
                # the running members stop at their next chunk; wait for them all, also one
                # whose thread the interrupt caught starting (its future never returned)
                interrupt = exc
                with idle:
                    cancel.set()
                    idle.wait_for(lambda: running[0] == 0)
            for f in futures:
                exc = None if f.cancelled() else f.exception()
                if exc is not None and not isinstance(exc, KeyboardInterrupt):
                    raise exc
        if bar is not None and interrupt is None:
            bar.update_all(float(pf.t_eval[-1]))
    finally:
        if bar is not None:
            bar.close()
    if interrupt is not None:
        template = next((tr for tr in trs if tr is not None), None)
        if template is None:
            raise interrupt
        trs = [tr if tr is not None else _unstarted(template, nets[b], biases[b])
               for b, tr in enumerate(trs)]
    first, *_ = trs

    def stack(name):
        if name == "t_stop":
            return None if stop is None else np.array([tr.t_stop for tr in trs], float)  # None: NaN
        value = getattr(first, name)
        if isinstance(value, tuple):
            return tuple(np.stack(a) for a in zip(*(getattr(tr, name) for tr in trs)))
        return None if value is None else np.array([getattr(tr, name) for tr in trs])
    ens = EnsembleTrajectory(
        t=first.t.copy(), status=tuple(tr.status for tr in trs),
        message=tuple(tr.message for tr in trs), method=method, backend=first.backend,
        model=pf.model.name, alpha=alphas, **{name: stack(name) for name in _STACKED})
    if interrupt is not None:
        raise _flow.FlowInterrupted(
            f"gradient flow ensemble interrupted (KeyboardInterrupt): {np.sum(ens.success)} "
            f"of {B} members finished, the outputs of the others up to the interrupt are kept",
            ens) from None
    bad = np.flatnonzero(~ens.success)
    summary = "; ".join(f"member {b}: {ens.message[b]}" for b in bad[:3])
    more = f" (and {bad.size - 3} more)" if bad.size > 3 else ""
    return _flow.report_failure(
        ens, f"{bad.size} of {B} members: {summary}{more}" if bad.size else None,
        raise_on_failure)


def _unstarted(template, ws, bs):
    """The trajectory of a member that an interrupt kept from starting: ``template``'s
    fields, NaN, with this member's parameters at t = 0."""
    def nan(a):
        if isinstance(a, tuple):
            return tuple(np.full_like(x, np.nan) for x in a)
        return np.full_like(a, np.nan) if isinstance(a, np.ndarray) else a
    st, bs = FlowStatus.INTERRUPTED, None if bs is None else tuple(bs)
    fields = {name: nan(getattr(template, name)) for name in _STACKED
              if name not in ("mode_s", "mode_u", "mode_v")}     # (the task's, shared)
    fields.update(weights=tuple(ws), weights0=tuple(ws), t_last=0.0, nfev=0, nsteps=0,
                  nrejected=0, success=False, kinks=0, sliding_time=0.0, fallback_steps=0,
                  biases=bs, biases0=bs, t_stop=None, status=st,
                  message=f"{st.message} before this member started")
    return dataclasses.replace(template, **fields)


def warm():
    """Load (or compile, the first time) the kernels of the linear ensemble: a small run on
    ``backend="numba"`` (for ``linearnets._warmup`` and a sweep's worker warm-up)."""
    from ..data import scalar_teacher
    from ..network import init_network
    X, y, _ = scalar_teacher(8, 3, 1.0, seed=0)
    nets = [init_network((3, 4, 1), 0.3, seed=s) for s in range(2)]
    gradient_flow_ensemble(nets, X, y, [0.5, 1.0], backend="numba")
    gradient_flow_ensemble(nets, X, y, [0.5, 1.0], backend="numba", method="DOP853",
                           record=("weights",))
