"""What every topic of :mod:`linearnets.compare` shares: tolerances, the flow helper,
log-log slopes, initial conditions and argument validation (crossing times are
:func:`linearnets.regimes.crossing_time`).

Imports run one way: the topic modules import this module and the registry; this
module imports only the closed forms (:mod:`linearnets.theory`), the simulator
(:mod:`linearnets.sim`) and the validators.
"""
from __future__ import annotations

import functools
import inspect
from collections.abc import Mapping

import numpy as np

from .._validation import (as_float_array, check_depth, check_int, check_nonnegative, check_positive,
                           fresh_seed)
from ..backend import check_backend
from ..sim.flow import gradient_flow
from ..theory.dynamics import half_time

# --- named constants ---------------------------------------------------------
#: Safety factor on an error the theory predicts only up to an O(1) constant
#: (``error <= SAFETY * predicted_scale``). The prediction sets the scaling;
#: the factor only absorbs the unknown order-one prefactor.
SAFETY = 10.0
#: Monte Carlo: number of standard errors allowed between sample and exact moment.
Z_SCORE = 4.0
#: Integration tolerances used by every comparison (the integrator is then a
#: much better witness than the O(sigma^2) effects we test).
RTOL = 1e-9
ATOL = 1e-13
#: The integrator's global error on short, non-stiff runs, in units of its rtol
#: (a few hundred steps, each with local error <= rtol, on a contracting flow).
GLOBAL_RTOL_FACTOR = 100.0
#: Converged when the loss has fallen below this fraction of its initial value.
CONVERGED = 1e-12
#: Horizon guess only: random initialisations escape like a balanced one with
#: c0 ~ sigma^L; training is extended (doubling) until converged anyway.
_C0_GUESS = 0.25
#: Number of time points per simulated curve.
N_TIMES = 400
#: Smallest tolerance on the fitted log-log slope of an O(sigma^p) error (the fit itself is not exact).
MIN_SLOPE_TOL = 0.25
#: Longest plateau a comparison sets up, in units of 1/(eta s) (s the weakest mode it must
#: learn). From a small initialisation the plateau lasts ~ c0^(2/L - 1) ~ sigma^(2-L) / (eta s);
#: past the escape the flow needs steps of ~1/(eta s), which a float64 time axis resolves
#: only while t eps << 1/(eta s). Measured: a plateau of 3e13/(eta s) (depth 14 from sigma 0.1)
#: runs; at 6e19 (depth 20) the step falls below the resolution of t at t = 2e16.
MAX_PLATEAU = 1e12
#: Deepest network the comparisons run (every depth-taking routine rejects more): a random
#: start's mode strength ~ sigma^L spreads over decades as L grows (a product of L random
#: layers), so the plateau estimate behind every horizon stops holding. Measured at depth 10:
#: mode_strengths 3.6 s, final_ntk 0.5 s, transfer 1.0 s, half_time_scaling 11 s, all passing; at
#: depth 20 the step falls below the resolution of t (t = 1e16-1e34) or a run takes minutes.
MAX_DEPTH = 10


# =============================================================================
# the flow
# =============================================================================
def _flow(weights, X, Y, t, eta=1.0, backend="auto", *, record=None, rtol=RTOL, **kw):
    """:func:`~linearnets.gradient_flow` at the comparisons' tolerances (:data:`RTOL`, :data:`ATOL`;
    a check whose error scale shrinks may pass a smaller ``rtol``).

    A failed run raises :class:`~linearnets.FlowError` (a RuntimeError, "gradient flow
    failed: ..."), never a warning; keywords that are None are not passed on.
    """
    kw = {k: v for k, v in kw.items() if v is not None}
    if record:
        kw["record"] = tuple(record)
    return gradient_flow(weights, X, Y, t, eta=eta, rtol=rtol, atol=ATOL, backend=backend,
                         raise_on_failure=True, **kw)


def _train_to_convergence(w0, X, Y, eta, backend, t_guess, record=None, n=N_TIMES, max_doublings=8):
    """Train until the loss is below ``CONVERGED`` times its initial value (doubling the horizon).

    Uses ``method="auto"``: past convergence the converged modes make the flow
    stiff (the slowest data direction of an ill-conditioned ``Sxx`` sets a
    horizon ~ 1/lambda_min), where the explicit DOP853 step is held at its
    stability limit and can exhaust its step budget; ``auto`` switches to the
    L-stable ROS34PW2 there and keeps DOP853 elsewhere.
    """
    t_end = t_guess
    loss0 = None
    for _ in range(max_doublings):
        t = np.linspace(0.0, t_end, n)
        traj = _flow(w0, X, Y, t, eta, backend, record=record, method="auto")
        loss0 = traj.loss[0]
        if traj.loss[-1] <= CONVERGED * loss0:
            return traj
        t_end *= 2.0
    return traj


def _sizes(D, N, C, depth):
    """``layer_sizes`` of a depth-``depth`` network of width N from D inputs to C outputs."""
    return (D,) + (N,) * (depth - 1) + (C,)


def _fmt_array(a, digits=2):
    """Compact text for a small array in the notes (significant digits, any magnitude)."""
    return np.array2string(np.asarray(a), separator=", ", max_line_width=10_000,
                           formatter={"float_kind": lambda x: f"{x:.{digits}g}"}).replace("\n", "")


# =============================================================================
# initial conditions, projections, slopes
# =============================================================================
def _weights_at(traj, k):
    """The weights [W_1 .. W_L] at output time ``k`` of a run with ``record=("weights",)``."""
    return [np.asarray(w[k]) for w in traj.weights_t]


def _mode_projection(E2E, U, S, Vt):
    """c_alpha(t) = u_alpha^T W(t) v_alpha for E2E of shape (T, C, D)."""
    return np.einsum("ca,tcd,ad->ta", U, np.asarray(E2E), Vt)


def _loglog_slope(x, y):
    """Least-squares slope of log y against log x."""
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def _slope_or(sig, err, default):
    """:func:`_loglog_slope`, or ``default`` for a single point."""
    return _loglog_slope(sig, err) if len(sig) > 1 else default


def _two_layer_qr(weights, beta):
    """q = (|a|^2 + |W beta|^2)/2 and r = a . W beta for a scalar-output two-layer net."""
    W, a = np.asarray(weights[0]), np.asarray(weights[1])[0]
    Wb = W @ beta
    return 0.5 * (a @ a + Wb @ Wb), float(a @ Wb)


def _balanced_aligned_init(layer_sizes, U, V, c0, seed):
    """Weights with W_L...W_1 = U diag(c0) V^T exactly and every layer balanced.

    Layer l carries the singular values c0**(1/L) along random orthonormal
    hidden frames, so the modes decouple exactly (the initial condition under
    which the mode dynamics are exact, Saxe et al. 2014).
    """
    rng = np.random.default_rng(seed)
    L = len(layer_sizes) - 1
    r = len(c0)
    u = np.asarray(c0, float) ** (1.0 / L)
    frames = [V]
    for n in layer_sizes[1:-1]:
        q, _ = np.linalg.qr(rng.standard_normal((n, r)))
        frames.append(q)
    frames.append(U)
    return [(frames[l + 1] * u) @ frames[l].T for l in range(L)]


def _small_init(c0, s, arg, bound=None):
    """Raise ``ValueError`` naming ``arg`` unless the initial mode strength ``c0 < bound`` (default s/2).

    The theories compared here describe the escape from a small initialisation: a mode
    that starts at or above s/2 (or at ``bound``) has no plateau to escape.
    """
    bound = 0.5 * s if bound is None else bound
    if not c0 < bound:
        raise ValueError(f"{arg} is not a small initialisation: the initial mode strength ~{c0:.3g} must be "
                         f"< {bound:.3g} (the theory describes the escape from a small initialisation)")


def _check_plateau(s, c0, depth, eta, arg):
    """Up front, for a run that starts from mode strength ``c0`` at ``depth``: a small
    initialisation (:func:`_small_init`) whose plateau ``half_time(s, c0)`` is within
    :data:`MAX_PLATEAU` / (eta s); else ``ValueError`` naming ``arg``. Returns the half time."""
    _small_init(c0, s, arg)
    t = float(half_time(s, c0, depth=depth, eta=eta))
    if not t * eta * s <= MAX_PLATEAU:
        raise ValueError(f"{arg}: at depth {depth} the plateau lasts t ~ {t:.3g} = {t * eta * s:.2g}/(eta s), "
                         f"beyond MAX_PLATEAU = {MAX_PLATEAU:.0e}/(eta s) (the plateau grows as sigma^(2-L)): "
                         "take a larger sigma or a smaller depth")
    return t


def _half_time_or_zero(s, c0, depth, eta):
    """``half_time`` for a mode that still has to rise through s/2, else 0 (horizon estimates)."""
    return float(half_time(s, c0, depth=depth, eta=eta)) if c0 < 0.5 * s else 0.0


# --- argument validation at the boundary of every public compare_* ----------------
def _as_seq(value, name, min_len=1):
    """``value`` as a 1-D array of at least ``min_len`` entries (a string is not a sequence)."""
    if isinstance(value, (str, bytes)) or np.ndim(value) != 1 or np.size(value) < min_len:
        what = "non-empty" if min_len == 1 else f"at least {min_len}-entry"
        raise ValueError(f"{name} must be a {what} 1-D sequence, got {value!r}")
    return np.asarray(value)


def _items(value, name, min_len=1):
    return [v.item() if isinstance(v, np.generic) else v for v in _as_seq(value, name, min_len)]


def _check_depth_range(value, name):
    L = check_depth(value, name)
    if L > MAX_DEPTH:
        raise ValueError(f"{name}: depth {L} is beyond MAX_DEPTH = {MAX_DEPTH}, the deepest the comparisons are "
                         "measured to run (at depth 20 the step falls below the resolution of t, or a run takes "
                         "minutes)")
    return L


def _check_sigma_map(value, name):
    for L, sg in value.items():                      # {depth: sigmas}
        check_depth(L, f"{name} (a mapping depth -> sigmas): a key")
        check_positive(_as_seq(sg, name), name, ndim=1)


def _check_As(value, name):
    A = as_float_array(_as_seq(value, name), name, ndim=1)
    if np.any(~(A > -1)):
        raise ValueError(f"{name} must be > -1 (a positive-definite kernel), got {value!r}")


def _check_unit_interval(value, name):
    a = as_float_array(_as_seq(value, name), name, ndim=1)
    if np.any(np.abs(a) > 1):
        raise ValueError(f"{name} must lie in [-1, 1], got {value!r}")


def _check_digits(value, name):
    d = _items(value, name)
    if len(d) != 2 or any(isinstance(c, bool) or not isinstance(c, (int, np.integer)) or not 0 <= c <= 9
                          for c in d) or d[0] == d[1]:
        raise ValueError(f"{name} must be two different digits 0-9, got {value!r}")


def _check_activation(value, name):
    if value not in ("linear", "relu"):
        raise ValueError(f"{name} must be 'linear' or 'relu' (the homogeneous networks the theory covers), "
                         f"got {value!r}")


#: How each argument of a public ``compare_*`` is validated, by kind.
_KINDS = {
    "count": lambda v, n, m=1: check_int(v, n, m),
    "seed": lambda v, n: check_int(v, n, 0),
    "depth": lambda v, n: _check_depth_range(v, n),
    "depths": lambda v, n: [_check_depth_range(L, n) for L in _items(v, n)],
    "counts": lambda v, n, m=1: [check_int(k, n, 1) for k in _items(v, n, m)],
    "positive": lambda v, n: check_positive(v, n, ndim=0),
    "nonnegative": lambda v, n: check_nonnegative(v, n, ndim=0),
    "positive_seq": lambda v, n, m=1: (_check_sigma_map(v, n) if isinstance(v, Mapping)
                                       else check_positive(_as_seq(v, n, m), n, ndim=1)),
    "nonnegative_seq": lambda v, n: check_nonnegative(_as_seq(v, n), n, ndim=1),
    "real_seq": lambda v, n: as_float_array(_as_seq(v, n), n, ndim=1),
    "spikes": _check_As,
    "unit_interval_seq": _check_unit_interval,
    "digits": _check_digits,
    "activation": _check_activation,
    "backend": lambda v, n: check_backend(v),
}
#: The kind of every argument name the comparisons use (a routine may override one:
#: ``_check_args(locals(), alphas=("positive_seq", 2))``); ``(kind, extra)`` passes
#: ``extra`` on (the smallest count, or the shortest sequence).
_RULES = {
    **{n: ("count", 1) for n in ("D", "N", "P", "C", "Q", "width", "input_dim", "n_test", "net_D", "net_N",
                                 "net_P", "random_width", "P_under", "D_under", "n_draws")},
    **{n: ("count", 2) for n in ("n_samples", "n_draw", "n_times", "n_probe")},
    "n_seeds": ("count", 3),
    "seed": ("seed",),
    "depth": ("depth",), "depths": ("depths",), "random_depths": ("depths",),
    "Ps": ("counts",), "widths": ("counts", 2),
    **{n: ("positive",) for n in ("s", "eta", "sigma", "t_max", "t_end", "eta_a", "eta_w", "a0", "w_scale",
                                  "alpha", "rtol")},
    "ridge": ("nonnegative",),
    **{n: ("positive_seq",) for n in ("sigmas", "spectrum", "multi_spectrum", "c0", "scales")},
    "gammas": ("nonnegative_seq",),
    "As": ("spikes",),
    "alphas": ("unit_interval_seq",),
    "lams": ("real_seq",),
    "classes": ("digits",),
    "activation": ("activation",),
    "backend": ("backend",),
}
#: Arguments whose default None means "the routine picks" (not validated when None).
_OPTIONAL = ("sigmas", "scales", "alphas")


def _seeded(fn):
    """Decorator of a ``compare_*`` taking ``seed``: ``seed=None`` is fresh entropy, as for
    ``numpy.random.default_rng(None)``, drawn here as an int (:func:`fresh_seed`) and passed
    on, so that the row's ``params`` record the seed the run used and it can be repeated."""
    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def run(*args, **kwargs):
        bound = sig.bind(*args, **kwargs)
        if bound.arguments.get("seed", sig.parameters["seed"].default) is None:
            bound.arguments["seed"] = fresh_seed()
        return fn(*bound.args, **bound.kwargs)
    return run


def _check_args(args, **overrides):
    """Validate the arguments of a public ``compare_*`` by name (call with ``locals()`` first thing).

    Every message names the comparison's own argument, before anything is simulated.
    ``overrides`` gives an argument a kind of its own (``name=kind`` or ``name=(kind, extra)``,
    the kinds of :data:`_KINDS`) where the name means something else than in :data:`_RULES`.
    """
    for name, value in args.items():
        rule = overrides.get(name, _RULES.get(name))
        if rule is None or (value is None and name in _OPTIONAL):
            continue
        kind, *extra = (rule,) if isinstance(rule, str) else rule
        _KINDS[kind](value, name, *extra)


def _require(condition, message):
    """Raise ``ValueError(message)`` unless ``condition``."""
    if not condition:
        raise ValueError(message)


def _check_sigmas(sigmas):
    """``sigmas`` as a non-empty 1-D float array > 0, largest first."""
    s = check_positive(sigmas, "sigmas")
    if s.ndim != 1 or s.size < 1:
        raise ValueError("sigmas must be a non-empty 1-D sequence")
    return np.sort(s)[::-1]
