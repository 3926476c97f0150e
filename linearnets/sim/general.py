"""The general simulator: a model and a stepping method composed into a trajectory.

:func:`gradient_flow` here runs every network of the contract (docs/conventions.md, "Beyond
linear networks") that the sufficient-statistics loops of ``flow.py`` cannot:
nonlinear activations, biases, the soft hinge loss, stop rules, on raw samples
through a model of :mod:`linearnets.sim.models` and a stepper of
:mod:`linearnets.sim.methods`.  A linear network whose options the
sufficient-statistics problem expresses (any ``alpha``, ``multipliers``,
``centered``, ``lr_scales``; see :mod:`.models.linear`) goes instead through
:func:`linear_fast_path`: the compiled linear loops on mapped targets and rates,
with the observations mapped back.

``flow.gradient_flow`` validates nothing of this itself: it sends such calls here.
"""
from __future__ import annotations

import dataclasses
import numbers

import numpy as np

from .. import backend as _backend
from .._validation import check_positive
from . import flow as _flow
from .methods import STEPPERS, StepperOptions, integrate
from .methods.rosw import ROSENBROCK
from .models import get_model, parse_options
from .models.linear import expressible, linear_mapping
from .models.mlp import check_biases
from .network import check_weights

__all__ = ["gradient_flow", "needs_general", "linear_fast_path", "GENERAL_RECORDABLE",
           "KINK_RTOL", "FALLBACK", "ROSENBROCK_FALLBACK", "general_methods", "stepper_for"]

#: What ``record=`` can ask for on this path (``"modes"``/``"conservation"`` linear only).
GENERAL_RECORDABLE = ("weights", "outputs", "ntk", "modes", "conservation")

#: Default relative tolerance of the low-order stepper at kinks: ``max(rtol, KINK_RTOL)``.
KINK_RTOL = 1e-4

#: The low-order pair used at kinks by the explicit methods.
FALLBACK = "BS32"

#: The stepper used at kinks by a Rosenbrock-W primary ("same": the primary itself at
#: ``kink_rtol``; None: no switch; or a method name).  BS32, as for the explicit methods:
#: measured cheaper than "same" and than no switch both on a small sliding ReLU flow and on
#: a stiff wide one (docs/benchmarks_mlp.md, "Kinks under ROS34PW2").  It is
#: stability-bound, but only for the fallback's stretches (``CALM_STEPS`` calm steps
#: bring the Rosenbrock method back).
ROSENBROCK_FALLBACK = "BS32"

#: The Jacobian-vector product of a Rosenbrock primary: ``"finite_differences"`` (one
#: gradient a product, the compiled one on numba) or ``"model"`` (the model's exact
#: ``jvp`` where it has one: ``MLP.jvp``, numpy, about two gradients a product).  Finite
#: differences by default: on bench_mlp's large problem the exact product made the run
#: 1.6x slower for the same steps (docs/benchmarks_mlp.md).
ROSENBROCK_JVP = "finite_differences"


def general_methods():
    """The method names of the general path (``"auto"`` is DOP853 there)."""
    return tuple(STEPPERS) + tuple(ROSENBROCK) + ("auto",)


def stepper_for(name, net):
    """``(primary, fallback)`` stepper classes of method ``name`` for model ``net`` (the
    fallback only for a piecewise-smooth model): a Rosenbrock-W method gets the model's
    ``metric`` (its inverse rates) and, with ``ROSENBROCK_JVP = "model"``, the model's
    ``jvp`` bound (otherwise finite differences)."""
    if name in ROSENBROCK:
        jvp = getattr(net, "jvp", None) if ROSENBROCK_JVP == "model" else None
        primary = ROSENBROCK[name].bind(jvp=jvp, metric=net.metric)
        if ROSENBROCK_FALLBACK == "same":
            low = primary
        elif ROSENBROCK_FALLBACK is None:
            low = None
        else:
            low = STEPPERS.get(ROSENBROCK_FALLBACK) or ROSENBROCK.get(ROSENBROCK_FALLBACK)
    else:
        primary = STEPPERS[name]
        low = STEPPERS[FALLBACK]
    return primary, (None if net.smooth else low)


def needs_general(activation="linear", biases=None, multipliers=None, alpha=1.0,
                  centered=False, loss="mse", stop=None, record=()):
    """Whether a call leaves the plain linear path of ``flow.py`` (any non-default network
    keyword except ``lr_scales``, which the linear path takes as per-layer rates, a stop
    rule, or ``"outputs"`` recorded)."""
    rec = (record,) if isinstance(record, str) else tuple(record or ())
    return (not (isinstance(activation, str) and activation == "linear") or biases is not None
            or multipliers is not None or not (isinstance(alpha, numbers.Real) and alpha == 1.0
                                               and not isinstance(alpha, bool))
            or centered is not False or not (isinstance(loss, str) and loss == "mse")
            or stop is not None or "outputs" in rec)


def _check_stop(stop, options):
    if stop is None:
        return None
    if isinstance(stop, str) and stop == "margin":
        if options.loss != "soft_hinge":
            raise ValueError("stop='margin' needs loss='soft_hinge'")
        return ("margin", 1.0)
    if (isinstance(stop, tuple) and len(stop) == 2 and stop[0] == "loss"
            and isinstance(stop[1], numbers.Real) and not isinstance(stop[1], bool)
            and np.isfinite(stop[1]) and stop[1] >= 0):
        return ("loss", float(stop[1]))
    raise ValueError(f"stop must be None, 'margin' or ('loss', value >= 0), got {stop!r}")


def _check_labels(Y, options):
    if options.loss != "soft_hinge":
        return
    if Y.shape[1] != 1:
        raise ValueError(f"loss='soft_hinge' needs one output (C = 1), got C = {Y.shape[1]}")
    if not np.all(np.abs(Y) == 1.0):
        raise ValueError("Y: loss='soft_hinge' needs labels +1 or -1")


def _record_set(record):
    return _flow._check_record(record, GENERAL_RECORDABLE)


def _check_data(weights, X, Y):
    ws = check_weights(weights)
    X, Y = _flow._check_data(X, Y, tuple(w.shape for w in ws))
    return ws, X, Y


def linear_fast_path(weights, X, Y, t_eval, eta, rtol, atol, backend, *, options, record,
                     probe, **kw):
    """A linear network with options on the sufficient-statistics loops of ``flow.py``.

    Runs ``flow.gradient_flow`` on the targets ``Y'`` and rates ``eta M^2 lr_scales`` of
    :func:`~.models.linear.linear_mapping` and maps the observations back: loss times
    ``M^2``, ``end_to_end`` = ``alpha M (W - W_0 if centered)``, the NTK times
    ``(alpha M)^2``, the outputs ``F = X_p end_to_end^T``, the modes along the SVD of the
    original ``Syx``.
    """
    ws, X, Y = _check_data(weights, X, Y)
    rec = _record_set(record)
    Yp, eta_l, scale = linear_mapping(ws, X, Y, options)
    M2 = float(np.prod(options.multipliers)) ** 2
    inner = set(rec) - {"outputs", "modes"}
    if probe is None and "ntk" in rec:
        probe = (X, Y)
    traj = _flow.gradient_flow(ws, X, Yp, t_eval, eta * M2, rtol, atol, backend,
                               record=tuple(sorted(inner)), probe=probe,
                               lr_scales=options.lr_scales, **kw)
    W0 = ws[-1]
    for w in ws[-2::-1]:
        W0 = W0 @ w
    e2e = traj.end_to_end - W0 if options.centered else traj.end_to_end
    e2e = scale * e2e
    upd = dict(loss=M2 * traj.loss, end_to_end=e2e, weights0=tuple(ws))
    if traj.ntk is not None:
        upd.update(ntk=scale ** 2 * traj.ntk, ntk_norm=scale ** 2 * traj.ntk_norm)
    if "outputs" in rec:
        Xo = X if probe is None else _flow._check_probe(probe, X.shape[1], Y.shape[1])[0]
        upd["outputs"] = np.einsum("qd,tcd->tqc", Xo, e2e)
    if "modes" in rec:
        Syx = Y.T @ X / X.shape[0]
        U, s, Vt = np.linalg.svd(Syx, full_matrices=False)
        upd.update(modes=np.einsum("ca,tcd,ad->ta", U, e2e, Vt), mode_s=s, mode_u=U,
                   mode_v=Vt.T.copy())
    for a in upd.values():
        if isinstance(a, np.ndarray):
            a.setflags(write=False)
    return dataclasses.replace(traj, **upd)


def gradient_flow(weights, X, Y, t_eval, eta=1.0, rtol=1e-8, atol=1e-12, backend="auto", *,
                  method="DOP853", record=(), probe=None, max_steps=None, first_step=None,
                  dense=False, activation="linear", biases=None, multipliers=None, alpha=1.0,
                  centered=False, loss="mse", lr_scales=None, stop=None, kink_rtol=None,
                  model=None):
    """Gradient flow of any network of the contract; see ``flow.gradient_flow``.

    The extra ``model`` (a registered model name) forces a model; by default a linear
    network whose options the sufficient statistics express without a stop rule takes
    :func:`linear_fast_path`, another linear one with the squared loss the ``"linear"``
    model, everything else the ``"mlp"`` model.

    Methods: the explicit pairs of ``methods.erk.STEPPERS`` (``"auto"`` is DOP853 here:
    no switching rule has been measured safe on this path) and the Rosenbrock-W
    ``"ROS34PW2"`` of ``methods.rosw`` (Rang & Angermann 2005), whose stage systems
    ``(I - h gamma J) x = b`` are solved by CG in the model's ``metric`` (its inverse per-parameter rates), with
    the model's ``jvp`` or finite differences of ``rhs``: not limited by stability, so the
    choice for stiff networks (a fast layer through ``lr_scales``, converged directions
    of a wide net; ``tests/test_rosw_general.py``), dearer per step on non-stiff ones (3
    stage evaluations plus one per Krylov product; order 3).  Its products are finite
    differences of the (compiled, on numba) gradient unless ``ROSENBROCK_JVP = "model"``.  At kinks of ReLU-type
    networks every method falls back to ``FALLBACK`` (BS32) at ``kink_rtol``
    (``ROSENBROCK_FALLBACK`` for ROS34PW2: measured cheaper than the Rosenbrock method
    itself at ``kink_rtol`` and than no switch, docs/benchmarks_mlp.md); accuracy there is
    ``O(kink_rtol)`` as described in ``methods.base``.
    """
    ws, X, Y = _check_data(weights, X, Y)
    L = len(ws)
    options = parse_options(L, activation=activation, multipliers=multipliers, alpha=alpha,
                            centered=centered, loss=loss, lr_scales=lr_scales,
                            eta=float(check_positive(eta, "eta", ndim=0)))
    shapes = tuple(w.shape for w in ws)
    bs = check_biases(biases, shapes)
    _check_labels(Y, options)
    stop_rule = _check_stop(stop, options)
    rec = _record_set(record)
    max_steps = _flow.DEFAULT_MAX_STEPS if max_steps is None else _flow._check_max_steps(max_steps)
    kw = dict(method=method, max_steps=max_steps, first_step=first_step, dense=dense)
    if model is None and stop_rule is None and expressible(options, bs):
        return linear_fast_path(ws, X, Y, t_eval, options.eta, rtol, atol, backend,
                                options=options, record=rec, probe=probe, **kw)
    t_eval = _flow._check_t_eval(t_eval)
    if t_eval[0] < 0:
        raise ValueError(f"t_eval must be >= 0 (time since initialisation), got {t_eval[0]!r}")
    rtol = float(check_positive(rtol, "rtol", ndim=0))
    atol = float(check_positive(atol, "atol", ndim=0))
    if rtol < _flow.MIN_RTOL:
        raise ValueError(f"rtol must be >= {_flow.MIN_RTOL:.3g} (rounding limit), got {rtol!r}")
    if first_step is not None:
        first_step = float(check_positive(first_step, "first_step", ndim=0))
    kink_rtol = (max(rtol, KINK_RTOL) if kink_rtol is None
                 else float(check_positive(kink_rtol, "kink_rtol", ndim=0)))
    if dense:
        raise ValueError("dense=True is available on the linear sufficient-statistics path "
                         "only (this network steps onto every output time: dense=False)")
    name = "DOP853" if method == "auto" else method
    if not isinstance(name, str) or name not in STEPPERS and name not in ROSENBROCK:
        raise ValueError(f"method must be one of {general_methods()} for this "
                         f"network, got {method!r}")
    _backend.check_backend(backend)
    if model is None:
        model = "linear" if expressible(options, bs) else "mlp"
    cls = get_model(model)
    if backend == "cupy":
        xp = _backend.get_cupy()
        concrete = "cupy"
    else:
        xp = np
        concrete = "numpy"
        if backend == "numba" and not _backend.numba_available():
            raise ValueError("backend='numba' needs numba, which is not installed")
        # a model's compiled twin (the MLP's MLPNumba): on "numba", and on "auto" where
        # numba is installed (measured faster on every bench_mlp problem: study_mlp_rhs.py);
        # a model without one runs its numpy reference and the trajectory says numpy
        compiled = getattr(cls, "numba_model", None)
        if compiled is not None and backend in ("numba", "auto") and _backend.numba_available():
            cls = compiled
            concrete = "numba"
    net = cls(ws, bs, options, xp=xp) if cls.name != "linear" else cls(ws, bs, options)
    if net.xp is not xp:
        concrete = "numpy"
        xp = np
    if ("modes" in rec or "conservation" in rec) and not net.linear:
        bad = "modes" if "modes" in rec else "conservation"
        raise ValueError(f"record: {bad!r} exists only for a linear network (activation="
                         f"'linear', no biases), got activation={options.activation!r}")
    net.prepare(X, Y)
    D, C = X.shape[1], Y.shape[1]
    if probe is not None or "ntk" in rec:
        Xp, Yp = _flow._check_probe(probe if probe is not None else (X, Y), D, C)
        rec = rec | {"ntk"}
    else:
        Xp, Yp = None, None
    Xo = X if probe is None else _flow._check_probe(probe, D, C)[0]

    T = t_eval.size
    nan = np.nan
    lossv = np.full(T, nan)
    e2e = np.full((T, C, D), nan) if net.linear else None
    wt = tuple(np.full((T,) + s, nan) for s in shapes) if "weights" in rec else None
    bt = (tuple(np.full((T, s[0]), nan) for s in shapes[:-1])
          if "weights" in rec and bs is not None else None)
    outs = np.full((T, Xo.shape[0], C), nan) if "outputs" in rec else None
    if "ntk" in rec:
        Q = Xp.shape[0]
        ntk = np.full((T, Q, Q) if C == 1 else (T, Q, Q, C, C), nan)
        ntk_norm = np.full(T, nan)
        ntk_align = np.full(T, nan) if Yp is not None else None
        yflat = Yp.reshape(-1) if Yp is not None else None
        Xp_dev = xp.asarray(Xp)
    else:
        ntk = ntk_norm = ntk_align = None
    if "modes" in rec:
        U, s_modes, Vt = np.linalg.svd(Y.T @ X / X.shape[0], full_matrices=False)
        V = Vt.T.copy()
        modes = np.full((T, s_modes.size), nan)
    else:
        U = s_modes = V = modes = None
    cons = np.full(T, nan) if "conservation" in rec else None
    gram0 = []
    Xo_dev = xp.asarray(Xo) if outs is not None else None
    to_np = _backend.to_numpy if xp is not np else (lambda a: a)

    def observe(k, y):
        lossv[k] = net.loss(y)
        if e2e is not None:
            e2e[k] = to_np(net.end_to_end(y))
            if modes is not None:
                modes[k] = np.einsum("ca,cd,da->a", U, e2e[k], V)
        if wt is not None:
            for i, w in enumerate(net.weights_of(y)):
                wt[i][k] = to_np(w)
            for i, b in enumerate(net.biases_of(y) or ()):
                bt[i][k] = to_np(b)
        if outs is not None:
            outs[k] = to_np(net.outputs(y, Xo_dev))
        if cons is not None:
            W = [to_np(w) for w in net.weights_of(y)]
            grams = [W[i + 1].T @ W[i + 1] - W[i] @ W[i].T for i in range(L - 1)]
            if not gram0:
                gram0.append(grams)
            cons[k] = max((np.linalg.norm(g - g0) for g, g0 in zip(grams, gram0[0])),
                          default=0.0)
        if ntk is not None:
            K = to_np(net.ntk(y, Xp_dev, Xp_dev))
            ntk[k] = K
            ntk_norm[k] = np.linalg.norm(K)
            if ntk_align is not None:
                Kmat = K if C == 1 else K.transpose(0, 2, 1, 3).reshape(Q * C, Q * C)
                denom = ntk_norm[k] * (yflat @ yflat)
                ntk_align[k] = (yflat @ Kmat @ yflat) / denom if denom > 0 else nan

    if stop_rule is None:
        stop_fn = None
    elif stop_rule[0] == "margin":
        stop_fn = lambda y: 1.0 - float(xp.min(net.margins(y)))  # noqa: E731
    else:
        value = stop_rule[1]
        stop_fn = lambda y: net.loss(y) - value  # noqa: E731
    opts = StepperOptions(rtol=rtol, atol=atol, max_steps=max_steps, first_step=first_step,
                          kink_rtol=kink_rtol)
    with np.errstate(over="ignore", invalid="ignore"):
        primary, low = stepper_for(name, net)
        raw = integrate(lambda t, y: net.rhs(y), net.y0, t_eval, primary, opts, observe,
                        fallback=low,
                        switches=None if net.smooth else net.switches, stop=stop_fn, xp=xp)
    y_last = to_np(raw.y_last)
    host = net.layout.unpack(np.array(y_last, dtype=np.float64, copy=True))
    final_w = tuple(np.array(a, copy=True) for a in host[:L])
    final_b = tuple(np.array(a, copy=True) for a in host[L:]) if bs is not None else None
    t_last = float(t_eval[-1]) if raw.status.success else float(raw.t_last)
    traj = _flow.Trajectory(
        t=t_eval.copy(), loss=lossv, end_to_end=e2e, weights=final_w, t_last=t_last,
        nfev=int(raw.nfev), nsteps=int(raw.nsteps), nrejected=int(raw.nrejected),
        success=raw.status.success, status=raw.status, message=raw.message, method=name,
        backend=concrete, weights_t=wt, modes=modes, mode_s=s_modes, mode_u=U, mode_v=V,
        conservation=cons, ntk=ntk, ntk_norm=ntk_norm, ntk_alignment=ntk_align, dense=False,
        biases=final_b, biases_t=bt, outputs=outs, t_stop=raw.t_stop, kinks=int(raw.kinks),
        sliding_time=float(raw.sliding_time), fallback_steps=int(raw.fallback_steps),
        weights0=tuple(ws), biases0=tuple(bs) if bs is not None else None)
    return traj
