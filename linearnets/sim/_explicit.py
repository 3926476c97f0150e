"""Adaptive embedded explicit Runge-Kutta integration: one generic stepper for every tableau.

The numpy stepper (:func:`erk_solve`) is the reference; the numba backend runs
the same algorithm compiled (:func:`erk_compiled`: the loop of
``methods/_erk_kernels.make_erk_advance`` through a model's cached entry point, for the
linear network ``models/_linear_kernels.erk_advance``), one call per output
interval, so there is no Python per step.  On networks wide enough that a
layer's stage updates are cheaper kept as rank-C factors, both backends hand
the same tableau to the factored-stage stepper of ``_lowrank`` (same control,
same steps up to rounding; see :func:`linearnets.sim._lowrank.worth_factoring`).  Both share the initial-step
selection and the control constants below, and accumulate the stage sums and
the error norm in the same order without BLAS, and the numpy reference makes
its products through ``_rhs.blas_dot`` (the dgemm call numba makes), so the two
take the same accept/reject decisions on the same bits.  An adaptive code
amplifies any difference that flips one decision to the size of the tolerance,
and a flow escaping a saddle amplifies a last-bit difference on its own (on the
medium benchmark network two runs differing by 4e-14 at t = 550 differed by 2e-5
at t = 700), so identical arithmetic is what makes the backends agree.

Step-size control (Hairer-Norsett-Wanner I, II.4; as in ``scipy.integrate``):
an attempt with error norm ``err`` (RMS over components of the local error
divided by ``atol + rtol max(|y|, |y_new|)``) is accepted when ``err < 1``; the
next step is ``h * clip(SAFETY err^(-1/(q+1)), MIN_FACTOR, MAX_FACTOR)`` with q
the error-estimator order, and never grows right after a rejection.  After an
accepted step that follows another accepted one, the next step is also held to
Gustafsson's predictive step (Gustafsson 1994; Hairer-Wanner II, Sec. IV.8, as in
``radau5.f``), ``SAFETY h (h / h_prev) (err_prev / err^2)^(1/(q+1))``: where the
local error grows from step to step, as on a flow accelerating out of a saddle
(``s' ~ s^(2-2/L)`` blows up in finite time but for the saturation), the standard
controller proposes a step that the next attempt rejects -- on the small problem of
``benchmarks/bench_flow.py`` RK45 rejected 18 of 65 attempts at rtol 3e-5, nearly
every step of the escape, and needs 188 evaluations instead of 284 with the
predictive step, at the same global error.  Output
times are hit exactly: a step that would pass ``t_eval[k]`` is shortened to end
there, and the step proposed before shortening is kept for the next interval.
With ``options.dense`` (tableaux with a continuous extension, ``Tableau.dense_P``:
RK45, SSPRK104) only the last output time ends a step: the outputs inside an accepted step are
evaluated from its stages before they are recycled (:func:`observe_step`; the
compiled loops return :data:`PENDING` and leave that to the caller).
Stability cap: once some modes of a network have converged, the step is limited
by stability rather than accuracy, and the plain controller keeps growing the
step past the stability boundary and getting it rejected (17 % and 27 % of the
attempts of RK45 on the medium and large problems of ``benchmarks/bench_flow.py``).
After every accepted step the stiffness is estimated as in Hairer's stiffness
test (``dopri5.f``, *Solving ODEs II* IV.2),
``rho = |f(y_new) - f(Y_{s-1})| / |y_new - Y_{s-1}|`` from the last stage, which sits
at ``t + h`` too; the largest recent estimate (decaying by STIFFNESS_MEMORY per
step) caps the next step at ``STABILITY_SAFETY * boundary / rho``, the boundary
being the tableau's real-axis stability interval (the spectrum of gradient flow
is real).  The state difference is formed as ``h sum_j w_j K_j`` and floored at the
resolution of the states, ``eps |y_new|`` (STIFFNESS_STATE_ULPS): where the gradient
is at rounding level it would otherwise divide rounding by rounding.  The cap is a
continuous function of the estimate, so steppers whose estimates differ by rounding
take the same steps up to rounding.
A non-finite error norm (a trial stage overflowed) counts as a rejection with
factor MIN_FACTOR; if that drives the step to underflow the run ends with
``FlowStatus.STEP_UNDERFLOW`` and says so.  ``FlowStatus.NONFINITE`` means the
right-hand side at an accepted state (the initial one) is not finite.
"""
from __future__ import annotations

import math

import numpy as np

from . import _rhs
from ._solvers import FlowStatus, RawResult, register_solver
from ._tableaux import TABLEAUX

__all__ = ["SAFETY", "MIN_FACTOR", "MAX_FACTOR", "PREDICTIVE_MIN_ERR", "MIN_STEP_ULPS",
           "STABILITY_SAFETY", "STIFFNESS_MEMORY", "STIFFNESS_MIN_REL", "STIFFNESS_STATE_ULPS",
           "stiffness_estimate",
           "stability_cap", "predictive_step", "NO_PREVIOUS_STEP", "accept_step",
           "select_initial_step",
           "error_norm", "erk_solve", "adaptive_run", "erk_fixed", "solve_numpy", "solve_numba",
           "compiled_result", "compiled_start", "erk_compiled", "chain_layout", "PENDING", "observe_step",
           "interpolates", "dense_target", "complete_pending", "STIFF", "NONSTIFF_RESET",
           "DENSE_BATCH_BYTES", "dense_batch_rows", "INTERRUPT_STEPS", "INTERRUPT_WORK",
           "MIN_CHUNK_STEPS",
           "chunk_budget", "advance_in_chunks", "stiff_fired"]

#: Safety factor on the optimal step-size change.
SAFETY = 0.9
#: Memory for the interpolated states that a compiled stepper forms in one call when a
#: step holds many output times (``dense=True``), in bytes (:func:`dense_batch_rows`).
DENSE_BATCH_BYTES = 1 << 22
#: Smallest step-size reduction factor after a rejection.
MIN_FACTOR = 0.2
#: Largest step-size growth factor after an acceptance.
MAX_FACTOR = 10.0
#: Floor on the previous step's error in the predictive controller (``radau5.f``):
#: a tiny previous error says nothing about how fast the error grows.
PREDICTIVE_MIN_ERR = 1e-2
#: A step shorter than this many ulps of t is an underflow.
MIN_STEP_ULPS = 10.0
#: Fraction of the estimated stability limit ``boundary / rho`` a step may grow to.
STABILITY_SAFETY = 0.9
#: Decay per accepted step of the remembered stiffness estimate (the estimate is a
#: lower bound that varies with the direction of the last step; remembering the
#: recent maximum stops the step from probing past the boundary every few steps).
#: ``benchmarks/study_stability_cap.py`` varies this and STABILITY_SAFETY on the medium
#: benchmark problem: no pair saves more than 4 % of SSPRK104's evaluations there, and
#: never forgetting (1.0) costs RK45 18-35 % more evaluations: the cap then keeps the
#: largest estimate ever made.
STIFFNESS_MEMORY = 0.95
#: A stiffness estimate counts only when the two differences it divides are larger
#: than this fraction of the derivatives they are formed from; below, the rounding
#: of a difference of nearly equal stages would dominate.
STIFFNESS_MIN_REL = 1e-6
#: Two states closer than this many rounding units of the state (``eps |y|``) are one
#: point to working precision, and the difference of their derivatives is rounding: the
#: state difference of the estimate is floored there.  (Hairer's form divides by the
#: difference of the two rounded stage states, which has this floor by itself; the
#: steppers here form it as ``h sum_j w_j K_j``, which does not, and once the gradient
#: is at rounding level -- a residual a bottleneck cannot fit -- a stage derivative
#: differing in its last bits over a difference of 1e-19 capped the step at 1/600.)
STIFFNESS_STATE_ULPS = 1.0
#: Work of one call of a compiled stepping loop: at most INTERRUPT_STEPS attempted steps
#: and at most INTERRUPT_WORK state entries times stages (``n s`` a step), at least
#: MIN_CHUNK_STEPS steps.  The loops return to Python that often and resume where they
#: stopped (:func:`advance_in_chunks`), so that a KeyboardInterrupt (Ctrl-C), which Python
#: delivers only between its own bytecodes, lands within a fraction of a second (measured
#: on a loaded 2-core machine: 0.1-0.5 s, small and 300-wide networks) rather than at the
#: next output time; a return costs microseconds against milliseconds of stepping.
INTERRUPT_STEPS = 1000
INTERRUPT_WORK = 1 << 23
MIN_CHUNK_STEPS = 2
#: Non-stiff steps that reset the count of the stiffness test (Hairer's ``nonsti``;
#: ``SolverOptions.stiff_steps``, ``_stiff.erk_run``).
NONSTIFF_RESET = 6
_EPS = float(np.finfo(np.float64).eps)


def step_after_accept(h, h_try, err, exponent, max_factor, rejected, clipped):
    """Next step size after an accepted step of size ``h_try`` (scaled error ``err`` < 1).

    The standard controller ``h_try * SAFETY * err**exponent``, capped by ``max_factor``
    and by 1 right after a rejection. ``h`` is the step planned before it was shortened
    to land on an output time (``clipped``): such a step says nothing against ``h``.
    Shared by every adaptive stepper (the numba kernel mirrors it line for line).
    """
    factor = max_factor if err == 0.0 else min(max_factor, SAFETY * err ** exponent)
    if rejected:
        factor = min(1.0, factor)
    h_next = h_try * factor
    if clipped and not rejected:
        h_next = max(h_next, h)
    return h_next


def predictive_step(h_next, h_try, err, exponent, h_prev, err_prev):
    """``h_next`` held to Gustafsson's predictive step after an accepted step ``h_try``.

    ``h_pred = SAFETY h_try (h_try / h_prev) (err_prev / err^2)^(-exponent)``
    (Gustafsson 1994; Hairer-Wanner II, Sec. IV.8, as in ``radau5.f``), with ``h_prev``
    and ``err_prev`` the previous accepted step and its error (floored at
    ``PREDICTIVE_MIN_ERR``); it extrapolates the growth of the error from one step to
    the next, and is never below ``MIN_FACTOR h_try``.  Unchanged when there is no
    previous step (``h_prev == 0``) or ``err == 0``.  The result is the smaller of the
    two, so a step never grows faster than under the standard controller.
    """
    if h_prev <= 0.0 or err == 0.0:
        return h_next
    h_pred = SAFETY * h_try * (h_try / h_prev) * (err_prev / err / err) ** (-exponent)
    return min(h_next, max(h_pred, MIN_FACTOR * h_try))


#: The memory of :func:`accept_step` before the first accepted step.
NO_PREVIOUS_STEP = (0.0, 0.0)


def accept_step(h, h_try, err, exponent, max_factor, rejected, clipped, memory):
    """Next step after an accepted ``h_try``: :func:`step_after_accept`, then
    :func:`predictive_step` from ``memory = (h_prev, err_prev)``.

    Returns ``(h_next, memory)``, the memory now holding this step and its error
    floored at ``PREDICTIVE_MIN_ERR``; a step shortened onto an output time
    (``clipped``) predicts nothing and leaves the memory as it was.  Shared by every
    adaptive stepper (``_kernels.accept_step`` is the compiled twin).
    """
    h_next = step_after_accept(h, h_try, err, exponent, max_factor, rejected, clipped)
    if clipped:
        return h_next, memory
    return (predictive_step(h_next, h_try, err, exponent, *memory),
            (h_try, max(err, PREDICTIVE_MIN_ERR)))


def stiffness_estimate(num, dd, ref, wsum, h, yy):
    """Hairer's stiffness estimate ``rho`` from squared norms of stage differences.

    ``num = |K_s - K_{s-1}|^2`` (``K_s = f(y_new)``), ``dd = |sum_j w_j K_j|^2`` with
    ``w = tab.stiffness_weights`` (so ``|y_new - Y_{s-1}| = h sqrt(dd)``), ``ref =
    |K_0|^2``, ``wsum = sum_j |w_j|`` and ``yy = |y_new|^2``.  Returns
    ``sqrt(num / dd) / h``, or 0 when either difference is below ``STIFFNESS_MIN_REL``
    of its scale (no information); the state difference counts as at least
    ``STIFFNESS_STATE_ULPS eps |y_new|``, the resolution of the states themselves.
    """
    rel2 = STIFFNESS_MIN_REL * STIFFNESS_MIN_REL
    if not (dd > rel2 * wsum * wsum * ref and num > rel2 * ref):
        return 0.0
    res = STIFFNESS_STATE_ULPS * _EPS / h
    rho = math.sqrt(num / max(dd, res * res * yy)) / abs(h)
    return rho if math.isfinite(rho) else 0.0


def stability_cap(h_next, rho, boundary):
    """``h_next`` limited to ``STABILITY_SAFETY * boundary / rho``; unchanged when
    ``rho`` is 0 (no estimate) or the tableau states no ``boundary`` (0).

    For a symmetric Jacobian the estimate is a Rayleigh-type lower bound on the
    spectral radius, so the cap is never below ``STABILITY_SAFETY`` times the true
    stability limit of the step.
    """
    if not (rho > 0.0 and boundary > 0.0):
        return h_next
    return min(h_next, STABILITY_SAFETY * boundary / rho)


def step_after_reject(h_try, err, exponent):
    """Next step size after a rejected step (``err`` >= 1, or not finite)."""
    return h_try * (MIN_FACTOR if not math.isfinite(err) else max(MIN_FACTOR, SAFETY * err ** exponent))


def _rms(x):
    # array methods, so that a cupy array works too (one scalar comes to the host)
    return math.sqrt(float((x * x).mean())) if x.size else 0.0


def select_initial_step(fun, t0, y0, f0, t_end, error_order, rtol, atol, xp=np):
    """Initial step size (Hairer-Norsett-Wanner I, Sec. II.4, as in scipy).

    Parameters
    ----------
    fun : callable ``fun(y) -> dy``
    t0, t_end : float
    y0, f0 : ndarray, shape (n,)
        Initial state and ``fun(y0)``.
    error_order : int
    rtol, atol : float
    xp : module, optional
        Array module of ``y0`` (numpy, or cupy on the GPU backend).

    Returns
    -------
    h : float
        The step, and uses one extra evaluation of ``fun``.
    """
    interval = t_end - t0
    scale = atol + xp.abs(y0) * rtol
    d0 = _rms(y0 / scale)
    d1 = _rms(f0 / scale)
    h0 = 1e-6 if (d0 < 1e-5 or d1 < 1e-5) else 0.01 * d0 / d1
    h0 = min(h0, interval)
    if not h0 > 0.0:
        # d1 / d0 overflowed the resolution of float64 (weights so large that the flow's
        # time scale is below 1e-300): the stepper reports the step-size underflow
        return 0.0
    f1 = fun(y0 + h0 * f0)
    d2 = _rms((f1 - f0) / scale) / h0
    if not math.isfinite(d2):
        return h0
    if d1 <= 1e-15 and d2 <= 1e-15:
        h1 = max(1e-6, h0 * 1e-3)
    else:
        h1 = (0.01 / max(d1, d2)) ** (1.0 / (error_order + 1))
    return min(100 * h0, h1, interval)


def _start(evaluate_f0, fun, y, t_eval, tab, options, observe):
    """Evaluate ``f0 = evaluate_f0()``, observe ``t_eval[0]`` and choose the first step.

    ``fun(v, out)`` is a dense right-hand side for the initial-step selection.
    Returns ``(early, h, nfev)``: ``early`` is the finished RawResult when the run
    ends here (non-finite right-hand side, or a single output time), else None.
    """
    t = float(t_eval[0])
    f0 = evaluate_f0()
    nfev = 1
    observe(0, y)
    if not np.all(np.isfinite(f0)):
        return (RawResult(1, t, y, nfev, 0, 0, FlowStatus.NONFINITE,
                          _failure_message(FlowStatus.NONFINITE, t, 0.0, options.max_steps)),
                0.0, nfev)
    if t_eval.size == 1:
        return RawResult(1, t, y, nfev, 0, 0, FlowStatus.SUCCESS, FlowStatus.SUCCESS.message), 0.0, nfev
    if options.first_step is not None:
        return None, float(options.first_step), nfev
    h = select_initial_step(lambda v: fun(v, np.empty_like(v)), t, y, f0,
                            float(t_eval[-1]), tab.error_order, options.rtol, options.atol)
    return None, h, nfev + 1


def _combine(w, K, out, tmp):
    """``out = sum_j w_j K_j`` over the nonzero weights, accumulated in stage order.

    Written as elementwise operations (no BLAS, no fused multiply-add) so that the
    compiled stepper, which accumulates in the same order, gets bit-identical sums.
    """
    out[:] = 0.0
    for j, a in enumerate(w):
        if a != 0.0:
            np.multiply(K[j], a, out=tmp)
            out += tmp
    return out


def _sequential_sumsq(v):
    # a left-to-right sum (np.sum is pairwise): the order of the compiled stepper
    return float(np.cumsum(v * v)[-1]) if v.size else 0.0


def error_norm(e5, e3, use_e3, h, n):
    """Error norm of a step from its sums of scaled squared error estimates.

    The RMS norm ``|h| sqrt(e5 / n)``, or with a second (third-order) estimate
    Hairer's DOP853 norm ``|h| e5 / sqrt((e5 + 0.01 e3) n)``.
    """
    if not use_e3:
        return abs(h) * math.sqrt(e5 / n)
    if e5 == 0.0 and e3 == 0.0:
        return 0.0
    return abs(h) * e5 / math.sqrt((e5 + 0.01 * e3) * n)


def _error_norm(tab, K, h, scale, tmp, acc):
    """Error norm of a step (see the module docstring); bit-identical to the numba kernel."""
    e5 = _sequential_sumsq(_combine(tab.e, K, acc, tmp) / scale)
    e3 = _sequential_sumsq(_combine(tab.e3, K, acc, tmp) / scale) if tab.e3 is not None else 0.0
    return error_norm(e5, e3, tab.e3 is not None, h, scale.size)


def _min_step(t):
    return MIN_STEP_ULPS * (np.nextafter(t, np.inf) - t)


def _failure_message(status, t, h, max_steps, nonfinite=False, rho=0.0, boundary=0.0):
    """The message of a failed run; ``rho`` (the remembered stiffness estimate) and the
    tableau's ``boundary`` tell whether an exhausted budget went on stability-capped steps."""
    if status is FlowStatus.MAX_STEPS:
        msg = f"{status.message} ({max_steps} attempted steps) at t={t:.6g}"
        # the cap sets h * rho = STABILITY_SAFETY * boundary exactly (up to rounding)
        if rho > 0.0 and boundary > 0.0 and h * rho >= 0.999 * STABILITY_SAFETY * boundary:
            msg += (f"; the step (h={h:.3g}) was held at the stability limit of converged "
                    f"modes (stiffness {rho:.3g}): method='auto' switches to the L-stable "
                    f"ROS34PW2 there")
        return msg
    if status is FlowStatus.NONFINITE:
        return f"{status.message} at t={t:.6g}"
    why = "; the rejected trial steps overflowed (non-finite stages)" if nonfinite else ""
    return f"{status.message} at t={t:.6g} (h={h:.3g}{why})"


#: Return code of the compiled loops for an accepted step that reaches the next output
#: time in dense mode: its stages are kept for the caller to interpolate, and the caller
#: then completes the step (:func:`observe_step`).
PENDING = 1
#: Return code of the compiled loops whose stiffness test fired
#: (``SolverOptions.stiff_steps``, ``_kernels.count_stiff``).
STIFF = 2


def dense_batch_rows(n):
    """Interpolated states (rows of n numbers) formed per call of an ``interpolate_many``:
    as many as fit in DENSE_BATCH_BYTES, at least one."""
    return max(1, DENSE_BATCH_BYTES // (8 * max(n, 1)))


def observe_step(k, t_eval, t, h_step, t_new, y_new, interpolate, observe,
                 interpolate_many=None):
    """Observe every output time in ``(t, t_new]`` of the accepted step ``t -> t_new``;
    returns the next output index.

    Outputs before ``t_new`` come from the continuous extension, ``interpolate(theta)``
    being the state at ``t + theta h_step``; an output at ``t_new`` itself is the
    step's own ``y_new``.  ``interpolate_many(thetas)``, where given, forms the states
    of up to :func:`dense_batch_rows` outputs at once as the rows of an array (the
    compiled steppers: one call for the outputs of a step instead of one each), the
    same numbers as ``interpolate`` one at a time; they are then observed by
    ``observe.many(k, states)`` where ``observe`` has that attribute (``flow`` forms
    their end-to-end maps in one call), else one at a time.
    """
    T = t_eval.size
    inner = k
    if interpolate_many is not None:
        end = k + int(np.searchsorted(t_eval[k:], t_new, side="right"))  # t_eval[end-1] <= t_new
        inner = end - 1 if end > k and float(t_eval[end - 1]) == t_new else end
    if inner - k > 1:
        rows = dense_batch_rows(y_new.size)
        many = getattr(observe, "many", None)
        while k < inner:
            stop = min(inner, k + rows)
            states = interpolate_many((t_eval[k:stop] - t) / h_step)[:stop - k]
            if many is not None:
                many(k, states)
            else:
                for i in range(stop - k):
                    observe(k + i, states[i])
            k = stop
    while k < T and t_eval[k] <= t_new:
        tk = float(t_eval[k])
        observe(k, y_new if tk == t_new else interpolate((tk - t) / h_step))
        k += 1
    return k


def interpolates(options, tab):
    """Whether outputs are interpolated: dense output asked for, and ``tab`` has a
    continuous extension."""
    return options.dense and tab.dense_P is not None


def dense_target(t_eval, k, options, tab):
    """``(t_target, t_out)`` for the compiled loops: without dense output every output
    time ends a step (``t_out`` infinite); with it only the last does, and the loop
    returns :data:`PENDING` after the step that reaches ``t_out = t_eval[k]``."""
    if interpolates(options, tab):
        return float(t_eval[-1]), float(t_eval[k])
    return float(t_eval[k]), math.inf


def complete_pending(k, t_eval, th, y, y_new, interpolate, observe, fsal,
                     interpolate_many=None):
    """After a compiled loop returned :data:`PENDING`: observe the outputs inside the held
    step (:func:`observe_step`, ``interpolate(theta)``, ``interpolate_many(thetas)``), then
    complete the step as the loop would have -- ``y`` takes ``y_new``, ``fsal()`` moves
    ``f(y_new)`` into the first stage slot, the time becomes ``th[6]``.  Returns the next
    output index."""
    k = observe_step(k, t_eval, float(th[0]), float(th[5]), float(th[6]), y_new, interpolate,
                     observe, interpolate_many)
    y[:] = y_new
    fsal()
    th[0] = th[6]
    return k


def erk_solve(fun, y0, t_eval, tab, options, observe):
    """Integrate ``dy/dt = fun(y)`` with the embedded pair ``tab``, hitting every ``t_eval``.

    Parameters
    ----------
    fun : callable ``fun(y, out) -> out``
        Autonomous right-hand side; writes into ``out`` (n,).
    y0 : ndarray, shape (n,)
    t_eval : ndarray, shape (T,)
        Strictly increasing; ``t_eval[0]`` is the start time.
    tab : Tableau
    options : SolverOptions
    observe : callable ``observe(k, y)``

    Returns
    -------
    RawResult
    """
    rtol, atol = options.rtol, options.atol
    s = tab.n_stages
    n = y0.size
    y = np.array(y0, dtype=np.float64, copy=True)
    K = np.empty((s + 1, n))
    tmp = np.empty(n)
    acc = np.empty(n)
    buf = np.empty(n)

    def trial(y, y_new, h_try):
        for i in range(1, s + 1):
            _combine(tab.b if i == s else tab.A[i, :i], K, y_new, tmp)
            y_new *= h_try
            y_new += y
            fun(y_new, K[i])
        scale = atol + rtol * np.maximum(np.abs(y), np.abs(y_new))
        return _error_norm(tab, K, h_try, scale, tmp, acc)

    def accepted():
        K[0] = K[s]

    wd = tab.stiffness_weights
    wsum = float(np.abs(wd).sum())

    def stiffness(h_try, y_new):
        ref = _sequential_sumsq(K[0])
        num = _sequential_sumsq(np.subtract(K[s], K[s - 1], out=acc))
        dd = _sequential_sumsq(_combine(wd, K, acc, tmp))
        return stiffness_estimate(num, dd, ref, wsum, h_try, _sequential_sumsq(y_new))

    def interpolate(theta, y, y_new, h):
        # y + h sum_j B_j(theta) K_j, in the order of the trial stages (bit-equal to numba)
        _combine(tab.dense_weights(theta), K, buf, tmp)
        np.multiply(buf, h, out=buf)
        np.add(buf, y, out=buf)
        return buf

    with np.errstate(all="ignore"):  # overflow is detected and reported, not warned
        early, h, nfev = _start(lambda: fun(y, K[0]), fun, y, t_eval, tab, options, observe)
        if early is not None:
            return early
        return adaptive_run(trial, accepted, y, h, nfev, t_eval, tab, options, observe,
                            stiffness, interpolate)


def adaptive_run(trial, accepted, y, h, nfev, t_eval, tab, options, observe, stiffness=None,
                 interpolate=None):
    """The adaptive loop shared by the numpy steppers, from ``t_eval[0]`` with first step ``h``.

    ``trial(y, y_new, h_try) -> err`` computes one attempted step of ``tab.n_stages``
    evaluations into ``y_new`` and returns its error norm; ``stiffness(h_try, y_new) ->
    rho`` (optional) estimates the stiffness from the stages of the step just accepted, and
    ``accepted()`` is then called (first-same-as-last bookkeeping).  Step control,
    stability cap, output times and failures as described in the module docstring.
    ``interpolate(theta, y, y_new, h)`` evaluates the continuous extension of the step
    just accepted (from ``y`` to ``y_new`` with step ``h``); it is used when
    ``options.dense`` is set and the tableau has one (:func:`observe_step`).

    Returns
    -------
    RawResult
    """
    s = tab.n_stages
    T = t_eval.size
    t = float(t_eval[0])
    exponent = -1.0 / (tab.error_order + 1)
    nsteps = nrej = ncapped = 0
    k = 1
    status = FlowStatus.SUCCESS
    nonfinite = False
    rho_mem = 0.0
    memory = NO_PREVIOUS_STEP  # the last accepted unclipped step (accept_step)
    y_new = np.empty_like(y)
    dense = interpolate is not None and interpolates(options, tab)
    while k < T:
        # with dense output only the last output time ends a step
        t_target = float(t_eval[-1] if dense else t_eval[k])
        min_step = _min_step(t)
        h = max(h, min_step)
        rejected = False
        while True:
            if nsteps + nrej >= options.max_steps:
                status = FlowStatus.MAX_STEPS
                break
            if h < min_step:
                status = FlowStatus.STEP_UNDERFLOW
                break
            h_try = h
            clipped = t + h >= t_target
            if clipped:
                h_try = t_target - t
            err = trial(y, y_new, h_try)
            nfev += s
            if not np.isfinite(err):
                nonfinite = True
                nrej += 1
                h = h_try * MIN_FACTOR
                rejected = True
                continue
            if err < 1.0:
                h, memory = accept_step(h, h_try, err, exponent, MAX_FACTOR, rejected, clipped,
                                        memory)
                nonfinite = False
                break
            nrej += 1
            h = step_after_reject(h_try, err, exponent)
            rejected = True
        if status is not FlowStatus.SUCCESS:
            break
        nsteps += 1
        if stiffness is not None:
            rho_mem = max(stiffness(h_try, y_new), STIFFNESS_MEMORY * rho_mem)
            h_free = h
            h = stability_cap(h, rho_mem, tab.stability_boundary)
            ncapped += h < h_free
        if dense:
            # the outputs inside the step, while y and the stages are still the step's
            t_new = t_target if clipped else t + h_try
            k = observe_step(k, t_eval, t, h_try, t_new, y_new,
                             lambda theta: interpolate(theta, y, y_new, h_try), observe)
            y, y_new = y_new, y
            accepted()
            t = t_new
            continue
        y, y_new = y_new, y
        accepted()
        if clipped:
            t = t_target
            observe(k, y)
            k += 1
        else:
            t = t + h_try
    msg = (status.message if status.success
           else _failure_message(status, t, h, options.max_steps, nonfinite, rho_mem,
                                 tab.stability_boundary if stiffness is not None else 0.0))
    return RawResult(k, t, y, nfev, nsteps, nrej, status, msg, ncapped=ncapped)


def erk_fixed(fun, y0, t_grid, tab):
    """Fixed-step integration on the grid ``t_grid`` (no error control); returns y at t_grid[-1].

    For convergence-order checks only (``fun(y, out) -> out``).
    """
    s = tab.n_stages
    y = np.array(y0, dtype=np.float64, copy=True)
    K = np.empty((s, y.size))
    ys = np.empty_like(y)
    for t0, t1 in zip(t_grid[:-1], t_grid[1:]):
        h = t1 - t0
        fun(y, K[0])
        for i in range(1, s):
            ys[:] = y + h * (tab.A[i, :i] @ K[:i])
            fun(ys, K[i])
        y = y + h * (tab.b @ K)
    return y


def solve_numpy(tab):
    """Build the numpy-backend solver for tableau ``tab`` (see ``_solvers`` for the signature)."""
    def solver(problem, y0, t_eval, options, observe):
        from . import _lowrank
        if _lowrank.worth_factoring(problem, tab.n_stages):
            return _lowrank.lowrank_solve(problem, y0, t_eval, tab, options, observe)
        return erk_solve(lambda y, out: _rhs.rhs(y, problem, out), y0, t_eval, tab, options,
                         observe)
    solver.__doc__ = (f"{tab.name} on the numpy backend (stages in factored form where that "
                      "saves work, see ``_lowrank``).")
    return solver


def chain_layout(problem):
    """``(rows, cols, offs, aoff, goff)`` (int64): layer shapes, their offsets in the flat
    state, and the offsets of the partial products ``A_i^T`` (rows[i] x C) and ``G_i``
    (C x cols[i]) in flat buffers, as ``_kernels.chains`` lays them out."""
    C = problem.Syx.shape[0]
    rows = np.array([r for r, _ in problem.shapes], dtype=np.int64)
    cols = np.array([c for _, c in problem.shapes], dtype=np.int64)
    offs = np.ascontiguousarray(problem.offsets, dtype=np.int64)
    aoff = np.concatenate(([0], np.cumsum(C * rows))).astype(np.int64)
    goff = np.concatenate(([0], np.cumsum(C * cols))).astype(np.int64)
    return rows, cols, offs, aoff, goff


def numba_rhs_args(problem):
    """The trailing arguments of ``_kernels.rhs_flat`` (data, layout and scratch) for ``problem``:
    the data tuple of the linear model's compiled loops (``models/_linear_kernels.rhs``)."""
    shapes = problem.shapes
    C, D = problem.Syx.shape
    rows, cols, offs, aoff, goff = chain_layout(problem)
    return (np.ascontiguousarray(problem.Sxx), np.ascontiguousarray(problem.Syx),
            np.ascontiguousarray(problem.eta_l, dtype=np.float64), rows, cols, offs,
            np.empty(aoff[-1]), aoff, np.empty(goff[-1]), goff,
            np.empty((D, C)), np.empty((D, C)), np.empty(2 * C * max(max(sh) for sh in shapes)))


def stiffness_args(tab, stiff_steps=0):
    """``(wd, stiff)`` for the compiled loops: the tableau's stiffness weights and
    ``[boundary, STABILITY_SAFETY, STIFFNESS_MEMORY, STIFFNESS_MIN_REL, sum |wd|,
    STIFFNESS_STATE_ULPS eps, NONSTIFF_RESET, stiff_steps]`` (``stiff_steps`` 0: no
    stiffness test, ``SolverOptions.stiff_steps``)."""
    wd = np.ascontiguousarray(tab.stiffness_weights, dtype=np.float64)
    stiff = np.array([tab.stability_boundary, STABILITY_SAFETY, STIFFNESS_MEMORY,
                      STIFFNESS_MIN_REL, float(np.abs(wd).sum()), STIFFNESS_STATE_ULPS * _EPS,
                      NONSTIFF_RESET, stiff_steps], dtype=np.float64)
    return wd, stiff


def compiled_start(first, rhs_args, y, t_eval, tab, options, observe, rhs=None):
    """:func:`_start` for a compiled loop: ``first()`` evaluates ``f(y)`` into the loop's
    own storage, the initial-step selection uses ``rhs(v, out, rhs_args)`` (a model's
    compiled right-hand side and its data tuple), by default the linear network's
    ``_kernels.rhs_flat(v, out, *rhs_args)``.

    Returns ``(early, th, stats)``: the loop's state ``th = [t, h, rho, h_prev,
    err_prev, h_step, t_new, n_stiff, n_nonstiff]`` (``h_step, t_new``: the step a
    :data:`PENDING` return holds; the last two: the counts of the stiffness test) and
    counters ``stats = [nfev, accepted, rejected, nonfinite, capped]``, unless the run ends
    here (``early``, as in :func:`_start`).
    """
    if rhs is None:
        from . import _kernels as kern  # numba compiles (or loads its cache) on first use only

        def dense_rhs(v, out):
            kern.rhs_flat(v, out, *rhs_args)
            return out
    else:
        def dense_rhs(v, out):
            rhs(v, out, rhs_args)
            return out

    with np.errstate(all="ignore"):
        early, h, nfev = _start(first, dense_rhs, y, t_eval, tab, options, observe)
    th = np.array([float(t_eval[0]), h, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
    stats = np.array([nfev, 0, 0, 0, 0], dtype=np.int64)
    return early, th, stats


def erk_compiled(advance, rhs, data, y0, t_eval, tab, options, observe):
    """The numba twin of :func:`erk_solve` for any model: Python only at output times.

    ``advance`` is the model's cached entry point into the loop of
    ``methods._erk_kernels.make_erk_advance``, ``rhs(y, out, data)`` its compiled
    right-hand side (called from here for the first evaluation and the initial step)
    and ``data`` the tuple both take.  Same contract as :func:`erk_solve` (a RawResult).
    """
    from .methods import _erk_kernels as ek  # numba compiles (or loads its cache) on first use

    rtol, atol = float(options.rtol), float(options.atol)
    s = tab.n_stages
    n = y0.size
    T = t_eval.size
    y = np.array(y0, dtype=np.float64, copy=True)
    K = np.empty((s + 1, n))

    def first():
        rhs(y, K[0], data)
        return K[0]

    early, th, stats = compiled_start(first, data, y, t_eval, tab, options, observe, rhs=rhs)
    if early is not None:
        return early
    use_e3 = tab.e3 is not None
    e3 = tab.e3 if use_e3 else np.zeros_like(tab.e)
    y_new = np.empty(n)
    out = np.empty(n)
    wd, stiff = stiffness_args(tab, options.stiff_steps)

    def interpolate(theta):
        ek.stage_state(y, K, tab.dense_weights(theta), th[5], out)
        return out

    # the states of the outputs inside a step (observe_step passes at most this many)
    batch = np.empty((dense_batch_rows(n), n)) if interpolates(options, tab) else None

    def interpolate_many(thetas):
        ek.stage_states(y, K, tab.dense_weights(thetas), th[5], batch)
        return batch

    def fsal():
        K[0] = K[s]

    code = 0
    k = 1
    while k < T:
        t_target, t_out = dense_target(t_eval, k, options, tab)
        code = advance_in_chunks(
            lambda budget: advance(
                y, K, y_new, th, t_target, t_out, stats, budget, tab.A, tab.b, tab.e, e3, use_e3,
                -1.0 / (tab.error_order + 1), rtol, atol, SAFETY, MIN_FACTOR, MAX_FACTOR,
                PREDICTIVE_MIN_ERR, MIN_STEP_ULPS, wd, stiff, data),
            stats, options.max_steps, n, s)
        if code == PENDING:
            k = complete_pending(k, t_eval, th, y, y_new, interpolate, observe, fsal,
                                 interpolate_many)
            code = 0
            continue
        if code != 0:
            break
        observe(k, y)
        k += 1
        if stiff_fired(options, th):
            code = STIFF
            break
    return compiled_result(code, k, y, th, stats, options, tab.stability_boundary)


def _erk_numba(problem, y0, t_eval, tab, options, observe):
    """:func:`erk_compiled` on the linear network: the entry point
    ``models._linear_kernels.erk_advance`` with the data tuple :func:`numba_rhs_args`."""
    from .models import _linear_kernels as lk  # numba compiles (or loads its cache) on first use

    return erk_compiled(lk.erk_advance, lk.rhs, numba_rhs_args(problem), y0, t_eval, tab,
                        options, observe)


def chunk_budget(attempted, max_steps, n, s):
    """The step budget of one compiled call after ``attempted`` steps (accepted plus
    rejected) of a run with budget ``max_steps``, state size ``n`` and ``s`` evaluations a
    step: at most :data:`INTERRUPT_STEPS` steps and :data:`INTERRUPT_WORK` entries times
    stages more (at least :data:`MIN_CHUNK_STEPS`), never past ``max_steps``."""
    chunk = max(MIN_CHUNK_STEPS, min(INTERRUPT_STEPS, INTERRUPT_WORK // max(1, int(n) * int(s))))
    return min(int(max_steps), int(attempted) + chunk)


def advance_in_chunks(advance, counts, max_steps, n, s):
    """Run a compiled stepping loop in chunks: ``advance(budget)`` calls it with a step
    budget (it returns ``FlowStatus.MAX_STEPS.code`` once ``counts[1] + counts[2]``, its
    accepted plus rejected steps, reach ``budget``, with its state in place to resume) and
    is called again until it returns anything else or the run's own ``max_steps`` is spent.
    Between calls Python runs, and a pending KeyboardInterrupt is raised there."""
    exhausted = FlowStatus.MAX_STEPS.code
    while True:
        budget = chunk_budget(counts[1] + counts[2], max_steps, n, s)
        code = advance(budget)
        if code != exhausted or budget >= max_steps:
            return code


def stiff_fired(options, th):
    """Whether the stiffness test of a compiled loop (``th[7]``, ``_kernels.count_stiff``)
    has reached ``options.stiff_steps`` (a loop returning 0 on an output time leaves the
    count for its caller to read)."""
    return options.stiff_steps > 0 and th[7] >= options.stiff_steps


def compiled_result(code, k, y, th, stats, options, boundary=0.0):
    """The RawResult of a compiled loop from its return code, ``th = [t, h, rho, ...]`` and
    ``stats = [nfev, accepted, rejected, nonfinite, capped]``; ``k`` output times reached,
    ``boundary`` the tableau's stability boundary (for the message).  :data:`STIFF`
    gives a successful result with ``stiff=True`` and the proposed step ``th[1]``."""
    stiff = code == STIFF
    status = FlowStatus.SUCCESS if stiff else _STATUS_BY_CODE[code]
    t, h = float(th[0]), float(th[1])
    msg = (status.message if status.success
           else _failure_message(status, t, h, options.max_steps, bool(stats[3]), float(th[2]),
                                 boundary))
    return RawResult(k, t, y, int(stats[0]), int(stats[1]), int(stats[2]), status, msg,
                     stiff=stiff, h_next=h, ncapped=int(stats[4]))


_STATUS_BY_CODE = {st.code: st for st in FlowStatus}


def solve_numba(tab):
    """Build the numba-backend solver for tableau ``tab``: one compiled call per output interval."""
    def solver(problem, y0, t_eval, options, observe):
        from . import _lowrank
        if _lowrank.worth_factoring(problem, tab.n_stages):
            return _lowrank.lowrank_solve_numba(problem, y0, t_eval, tab, options, observe)
        return _erk_numba(problem, y0, t_eval, tab, options, observe)
    solver.__doc__ = (f"{tab.name} on the numba backend (whole stepping loop compiled; stages "
                      "in factored form where that saves work, see ``_lowrank``).")
    return solver


for _name, _tab in TABLEAUX.items():
    register_solver(_name, "numpy", solve_numpy(_tab))
    register_solver(_name, "numba", solve_numba(_tab))
