"""Speed of gradient_flow against scipy and gradient descent, all measured in the same run.

For each benchmark problem the score of a solver is the wall time to reach the
end-to-end map ``W(t_end)`` within ``TARGET`` relative error (max-abs error over
max-abs entry) of a tight-tolerance reference: tolerances are scanned from loose
to tight and the loosest that reaches the target, with the next tighter one
reaching it too, counts.  Beside every method/backend of ``gradient_flow`` the
table shows the baselines

* ``scipy RK45`` / ``scipy DOP853``: ``scipy.integrate.solve_ivp`` on the flat
  parameters with a plain numpy gradient (narrow-side product order, allocating);
* ``diffrax Tsit5`` / ``diffrax Dopri8`` with its I and PI 0.3/0.3 controllers (one row
  each): diffrax (JAX) on the same flow on the sufficient statistics, the vector field
  ``-jax.grad`` of the loss in Sxx, Syx, float64 (``jax_enable_x64``), the solve
  ``jax.jit``-compiled with rtol and atol traced and its compilation outside the times
  (``problems.diffrax_solve``, shared with ``bench_mlp.py``); ``nfev`` is steps x stages.
  Skipped where jax or diffrax is not installed (``--no-diffrax``: skipped anyway).  The
  summary gives the default call's speed-up over the fastest diffrax row;
* ``GD``: full-batch gradient descent on the raw samples (PyTorch float64 autograd
  if torch is importable -- a dependency of this script alone, not of the package; its
  CPU build is enough -- otherwise the same in numpy, labelled so), at the
  largest learning rate that reaches the target.  Its accuracy is found with the
  cheap sufficient-statistics iteration (the same iterates as GD on the samples,
  since a linear network's gradient depends on the data only through Sxx, Syx);
  its time is (t_end / lr) steps times the per-step time measured over a few
  hundred steps on the raw samples (an extrapolation where a full run would take minutes).

``DOP853, dense stages`` is the explicit stepper with every stage state formed as a
dense vector on the same problem, to show what the linear model's factored stages
(``linearnets.sim.models.linear``) save; ``RK45, no stability cap`` is RK45 with
the plain step-size controller (``STABILITY_SAFETY`` set to infinity), to show what the
stability cap saves where steps are limited by stability; ``SSPRK104, tableau stages``
runs SSPRK104 as a Butcher tableau, to show what its low-storage form
(``linearnets.sim.methods.ssp``, what ``gradient_flow`` runs) saves.
``rej`` counts rejected steps.  ``fixed cost of a call`` splits the fastest
``gradient_flow`` run into what a call costs before and after its stepping (timed on a
one-step run) and the loop's time per further evaluation.

A gradient table gives microseconds per gradient against the FLOP bound (the
FLOPs of one gradient in the cheapest product order divided by this machine's
float64 GEMM rate, best of several square products measured in this run) and
against the gradient's memory traffic alone (every weight read twice -- the chains from
the top and from the bottom need each W_l at different times -- and the gradient written
once), timed in this run by compiled kernels that move exactly those bytes on all cores
and do no other arithmetic: where the weights do not stay in one core's cache, no
implementation of the gradient that reads them in those two passes takes less.

Every side runs with BLAS on one thread by default (``--blas-threads``; both OpenBLAS builds
that numpy and scipy load, through threadpoolctl, torch's pool and XLA's CPU backend; the
FLOP bound's GEMM rate too).  ``--blas-threads default`` pins nothing: the package chooses its
own threads (``linearnets._threads``), the libraries and jax keep their pools, as a user's
call would run; the first line of the output says which.  ``--busy`` keeps one core busy
with an unrelated process for the whole run.  On a shared machine the libraries' own pools
make each evaluation several to tens of times dearer, by an amount that follows the load of
the moment, not the method or the tolerance.  On the large network (2 shared cores at a load
of 4-5, RK45 on numba, ``benchmarks/studies/study_blas_threads.py --rounds 2``, one
process): pinned, 5.9-6.1 ms
of CPU per evaluation at rtol 1e-2 and 5.8-6.0 ms at rtol 1e-8 (its first 50 steps);
unpinned, 50-69 ms and 48-166 ms (76-310 ms wall).

Problems (seeded): small (20-32-32-1, P=200, sigma=1e-3, whitened scalar teacher
s=1), medium (128-256-256-256-10, P=2000, sigma=0.03, singular values 1..0.5),
large (512-1024-1024-10, P=4000, sigma=0.03, singular values 1..0.5); t_end is
the first time on a grid at which the loss falls below 1e-6 of its start.

Usage::

    python benchmarks/bench_flow.py [--problems small,medium,large] [--quick]
        [--methods RK45,auto] [--backends numba] [--no-extras] [--ref-cache FILE]
        [--blas-threads N|default] [--busy] [--no-diffrax]

The default method with default threads against diffrax, idle and with one core busy (the
idle figure wants a quiet machine; the reference is computed once and kept)::

    python benchmarks/bench_flow.py --problems small,medium --quick --methods auto
        --blas-threads default --ref-cache /tmp/flow_ref [--busy]
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time

import numpy as np
from numba import njit, prange
from scipy.integrate import solve_ivp
from threadpoolctl import threadpool_limits

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import linearnets as ln  # noqa: E402
from linearnets import backend as B  # noqa: E402
from linearnets.data import scalar_teacher, teacher_task  # noqa: E402
from linearnets.sim.models import linear as lin  # noqa: E402
from linearnets.sim.methods import StepperOptions, base as _base, compiled as _compiled  # noqa: E402
from linearnets.sim.methods import integrate  # noqa: E402
from linearnets.sim.methods.erk import ExplicitRK  # noqa: E402
from linearnets.sim.methods.tableaux import TABLEAUX  # noqa: E402
from linearnets.sim.models import parse_options  # noqa: E402
from linearnets.sim.models.linear import LinearNet  # noqa: E402
from problems import busy_core, gemm_rate  # noqa: E402  one core busy; the GEMM rate
from problems import (DIFFRAX_CONTROLLERS, diffrax_available, diffrax_solve,  # noqa: E402
                      jax_x64, pin_xla_threads)
from linearnets.sim.flow import DEFAULT_METHOD  # noqa: E402

#: Relative accuracy of the end-to-end map at t_end that a run must reach.
TARGET = 1e-4
#: Tolerances tried, loosest first, half a decade apart (atol = ATOL_RATIO * rtol).
RTOLS = (1e-2, 3e-3, 1e-3, 3e-4, 1e-4, 3e-5, 1e-5, 3e-6, 1e-6, 3e-7, 1e-7, 3e-8, 1e-8)
#: Tolerances of a --quick run.
QUICK_RTOLS = RTOLS[:11]
ATOL_RATIO = 1e-3
#: Repetitions of runs shorter than a second (the best time counts): at least REPEATS,
#: and millisecond runs until REPEAT_TIME seconds are spent (at most MAX_REPEATS), so
#: that both sides of a ratio get many tries on a machine whose speed varies.
REPEATS, REPEAT_TIME, MAX_REPEATS = 3, 0.3, 50
#: Loss drop that defines t_end.
FIT_DROP = 1e-6

PROBLEMS = {
    # name: (layer sizes, P, sigma, teacher singular values, largest t searched for t_end)
    "small": ((20, 32, 32, 1), 200, 1e-3, (1.0,), 4000.0),
    "medium": ((128, 256, 256, 256, 10), 2000, 0.03, tuple(np.linspace(1.0, 0.5, 10)), 4000.0),
    "large": ((512, 1024, 1024, 10), 4000, 0.03, tuple(np.linspace(1.0, 0.5, 10)), 400.0),
}


def make(name):
    sizes, P, sigma, svals, tmax = PROBLEMS[name]
    if len(svals) == 1:
        X, y, _ = scalar_teacher(P, sizes[0], svals[0], seed=0)
        Y = y[:, None]
    else:
        X, Y = teacher_task(P, sizes[0], svals, seed=0)
    ws = ln.init_network(sizes, sigma, seed=1)
    return ws, X, Y, tmax


# ---------------------------------------------------------------------------------------------
def plain_gradient(shapes, Sxx, Syx):
    """The straightforward numpy gradient (narrow-side order, new arrays every call)."""
    offs = lin.layer_offsets(shapes)
    L = len(shapes)

    def f(t, y):
        Ws = [y[offs[i]:offs[i + 1]].reshape(shapes[i]) for i in range(L)]
        tops = [np.eye(shapes[-1][0])]
        for W in Ws[:0:-1]:
            tops.append(tops[-1] @ W)
        tops = tops[::-1]                      # tops[i] = W_L ... W_{i+2}
        E = Syx - (tops[0] @ Ws[0]) @ Sxx
        out, R = [], E
        for i in range(L):
            if i:
                R = R @ Ws[i - 1].T
            out.append((tops[i].T @ R).ravel())
        return np.concatenate(out)
    return f


def gradient_flops(shapes, white):
    C = shapes[-1][0]
    D = shapes[0][1]
    prods = sum(r * c for r, c in shapes[:-1])      # layers with a top product
    # A chain, R chain and the outer products: each C x N_l x N_{l-1} per layer below the top
    return 2 * C * (3 * prods) + (0 if white else 2 * C * D * D)


def cache_bytes():
    """Size of one core's L2 cache (from Linux sysfs), or 1 MiB where the system does not say."""
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for idx in sorted(os.listdir(base)):
            with open(os.path.join(base, idx, "level")) as f:
                if f.read().strip() != "2":
                    continue
            with open(os.path.join(base, idx, "size")) as f:
                text = f.read().strip().upper()
            mult = {"K": 1 << 10, "M": 1 << 20}.get(text[-1:], 1)
            return int(text.rstrip("KM")) * mult
    except (OSError, ValueError):
        pass
    return 1 << 20


@njit(parallel=True, fastmath=True)
def _read_pass(a):
    """Sum of the entries of a 2-D array, rows split over the threads: a read of ``a``."""
    total = 0.0
    for i in prange(a.shape[0]):
        row = 0.0
        for j in range(a.shape[1]):
            row += a[i, j]
        total += row
    return total


@njit(parallel=True, fastmath=True)
def _write_pass(u, v, out):
    """``out = u v^T``: a write of ``out`` (the rank-C gradients are written this way)."""
    for i in prange(out.shape[0]):
        c = u[i]
        for j in range(out.shape[1]):
            out[i, j] = c * v[j]


def traffic_floor(shapes, quick):
    """Seconds the gradient's memory traffic takes with nothing else done: each weight read
    twice and the gradient written once, by compiled kernels over all cores (best of
    several runs).  A measurement rather than an estimate from one bandwidth: these
    kernels use every core where a numpy copy uses one (on the machine of the README's
    figures the large network's weights are read and written at 48-50 GB/s, and copied
    at 25-29 GB/s)."""
    rng = np.random.default_rng(0)
    ws = [rng.standard_normal(s) for s in shapes]
    outs = [np.empty(s) for s in shapes]
    us = [rng.standard_normal(s[0]) for s in shapes]
    vs = [rng.standard_normal(s[1]) for s in shapes]

    def once():
        for _ in range(2):
            for w in ws:
                _read_pass(w)
        for u, v, out in zip(us, vs, outs):
            _write_pass(u, v, out)

    once()
    return min(time_once(once) for _ in range(20 if quick else 50))


def time_call(f, min_time=0.3):
    f()
    n, t = 0, 0.0
    t0 = time.perf_counter()
    while t < min_time:
        f()
        n += 1
        t = time.perf_counter() - t0
    return t / n


# ---------------------------------------------------------------------------------------------
def reference(ws, X, Y, tmax, backend):
    """t_end (first time on a fine grid with loss < FIT_DROP * loss0) and W(t_end), rtol 1e-9.

    A coarse pass brackets the crossing, a second pass resolves it to 1/200 of the bracket.
    """
    kw = dict(rtol=1e-9, atol=1e-13, backend=backend, method="DOP853")
    grid = np.linspace(0.0, tmax, 201)
    tr = ln.gradient_flow(ws, X, Y, grid, **kw)
    hit = np.nonzero(tr.loss <= FIT_DROP * tr.loss[0])[0]
    if not hit.size or hit[0] == 0:
        raise RuntimeError(f"loss did not drop by {FIT_DROP} before t={tmax}")
    fine = np.concatenate(([0.0], np.linspace(grid[hit[0] - 1], grid[hit[0]], 201)[1:]))
    tr = ln.gradient_flow(ws, X, Y, fine, **kw)
    k = int(np.nonzero(tr.loss <= FIT_DROP * tr.loss[0])[0][0])
    return float(fine[k]), tr.end_to_end[k], tr.loss[k] / tr.loss[0]


def rel_err(W, ref):
    return float(np.abs(W - ref).max() / np.abs(ref).max())


def scan(run, ref, rtols):
    """Loosest tolerance reaching TARGET whose next tighter tolerance reaches it too:
    (rtol, seconds, nfev, err, rejected steps or None), or the last try.

    Near the target the error at t_end is not monotone in rtol (local errors of both
    signs cancel by chance: RK45 on the small problem reaches 3.3e-5 at rtol 3e-3 but
    5.9e-4 at 1e-3), so one lucky tolerance does not count.  ``run(rtol)`` returns
    ``(W, nfev)`` or ``(W, nfev, nrej)``.
    """
    def measure(rtol):
        # best of a few repetitions for short runs: the machine may be shared
        dt, spent = np.inf, 0.0
        for i in range(MAX_REPEATS):
            t0 = time.perf_counter()
            W, nfev, *rej = run(rtol)
            took = time.perf_counter() - t0
            dt, spent = min(dt, took), spent + took
            if dt > 1.0 or (i + 1 >= REPEATS and spent >= REPEAT_TIME):
                break
        err = rel_err(W, ref)
        err = err if np.isfinite(err) else np.inf
        return (rtol, dt, nfev, err, rej[0] if rej else None)

    results = [measure(rtols[0])]
    for i in range(len(rtols)):
        if i + 1 < len(rtols):
            results.append(measure(rtols[i + 1]))
        if results[i][3] <= TARGET and (i + 1 == len(rtols) or results[i + 1][3] <= TARGET):
            return results[i], True
    return results[-1], False


def gd_baseline(ws, X, Y, t_end, Wref, problem, quick):
    """Largest learning rate meeting TARGET (found on sufficient statistics) and the
    extrapolated time of GD on the raw samples."""
    shapes = problem.shapes
    y0 = lin.pack(ws)
    buf = np.empty_like(y0)

    def gd_stats(lr):
        y = y0.copy()
        n = int(round(t_end / lr))
        for _ in range(n):
            y += lr * lin.rhs(y, problem, buf)
        return rel_err(lin.end_to_end_flat(y, shapes), Wref), n

    # GD is first order: err ~ c lr.  Halve from a stable start until the trend is clear.
    lr, budget = 0.2, (2e4 if quick else 1e5)
    tried = []
    while True:
        if t_end / lr > budget:
            break
        err, n = gd_stats(lr)
        tried.append((lr, err))
        if err <= TARGET or len(tried) >= 3:
            break
        lr /= 2
    finite = [(l, e) for l, e in tried if np.isfinite(e) and e < 1]
    if tried and tried[-1][1] <= TARGET:
        lr_ok, how = tried[-1][0], "run"
    elif finite:
        l, e = finite[-1]
        lr_ok, how = 0.9 * l * TARGET / e, "extrapolated (err ~ lr)"
    else:
        return None
    steps = int(np.ceil(t_end / lr_ok))
    # per-step time on the raw samples
    if importlib.util.find_spec("torch") is not None:
        import torch
        torch.set_default_dtype(torch.float64)
        Xt, Yt = torch.from_numpy(X), torch.from_numpy(Y)
        Wt = [torch.tensor(w, requires_grad=True) for w in ws]

        def step():
            out = Xt
            for w in Wt:
                out = out @ w.T
            loss = 0.5 * ((Yt - out) ** 2).sum() / X.shape[0]
            grads = torch.autograd.grad(loss, Wt)
            with torch.no_grad():
                for w, g in zip(Wt, grads):
                    w -= lr_ok * g
        label = "GD (PyTorch f64)"
    else:
        Wn = [w.copy() for w in ws]
        P = X.shape[0]

        def step():
            H = [X]
            for w in Wn:
                H.append(H[-1] @ w.T)
            G = (Y - H[-1]) / P
            for i in range(len(Wn) - 1, -1, -1):
                dW = G.T @ H[i]
                if i:
                    G = G @ Wn[i]
                Wn[i] += lr_ok * dW
        label = "GD (numpy, raw samples)"
    per_step = time_call(step, 0.5)
    return label, lr_ok, how, steps, per_step * steps, per_step


def diffrax_runs(problem, ws, t_end):
    """diffrax (JAX) on the same flow, on the sufficient statistics: ``(label, run)`` for
    ``Tsit5`` and ``Dopri8``, each with every controller of ``problems.DIFFRAX_CONTROLLERS``,
    where ``run(rtol)`` returns ``(W(t_end), evaluations, rejected steps)`` (``W`` NaN where
    the solve failed) like the other rows' runs.

    The vector field is ``-jax.grad`` of ``L = tr(W Sxx W^T) / 2 - tr(Syx W^T)``, ``W = W_L
    ... W_1`` formed from the top (the C-row partial products, as the package's chains;
    ``Sxx`` left out where the problem counts as whitened, as the package does), each layer's
    velocity times its rate ``eta_l``; float64, the solve ``jax.jit``-compiled with rtol and
    atol traced (``problems.diffrax_solve``), compiled here, outside the timed runs.
    Evaluations are steps x stages."""
    jax, jnp, _ = jax_x64()
    Sxx, Syx = jnp.asarray(problem.Sxx), jnp.asarray(problem.Syx)
    eta = [float(e) for e in problem.eta_l]

    def end_to_end(Ws):
        W = Ws[-1]
        for w in Ws[-2::-1]:
            W = W @ w
        return W

    def loss(Ws):
        W = end_to_end(Ws)
        return 0.5 * jnp.sum((W if problem.white else W @ Sxx) * W) - jnp.sum(Syx * W)

    grad = jax.grad(loss)

    def field(Ws):
        return [-e * g if e != 1.0 else -g for e, g in zip(eta, grad(Ws))]

    W0 = [jnp.asarray(w) for w in ws]
    out = []
    for solver in ("Tsit5", "Dopri8"):
        for label, pc, ic in DIFFRAX_CONTROLLERS:
            solve = diffrax_solve(field, W0, t_end, end_to_end, solver, pc, ic)
            solve(1e-3, 1e-3 * ATOL_RATIO)      # the compilation, untimed

            def run(rtol, solve=solve):
                W, steps, rej, ok = solve(rtol, rtol * ATOL_RATIO)
                return (W if ok else np.full_like(W, np.nan)), steps * solve.stages, rej
            out.append((f"diffrax {solver} {label}", run))
    return out


def fixed_cost(ws, X, Y, t_end, rows):
    """Split the fastest gradient_flow run that met the target into the fixed cost of a
    call (validation, sufficient statistics, start-up, outputs: a run so short that it
    takes one step) and the stepping loop's cost per further evaluation."""
    done = [r for r in rows if r[0].startswith("gradient_flow") and r[3]]
    if not done:
        return
    label, b, (rtol, dt, nfev, _, _), _ = min(done, key=lambda r: r[2][1])
    m = label.split()[-1]
    kw = dict(rtol=rtol, atol=rtol * ATOL_RATIO, backend=b, method=m)
    short = ln.gradient_flow(ws, X, Y, [0.0, 1e-9 * t_end], **kw)
    fixed = min(time_once(lambda: ln.gradient_flow(ws, X, Y, [0.0, 1e-9 * t_end], **kw))
                for _ in range(20))
    per = (dt - fixed) / max(nfev - short.nfev, 1)
    print(f"  fixed cost of a call ({m} on {b}, one step, {short.nfev} evaluations): "
          f"{fixed * 1e3:.3g} ms of its {dt * 1e3:.3g} ms; the loop then takes "
          f"{per * 1e6:.3g} us per evaluation", flush=True)


def time_once(f):
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


# ---------------------------------------------------------------------------------------------
def _model(problem, ws):
    """The linear model on exactly ``problem`` (its statistics and rates)."""
    opts = parse_options(len(problem.shapes), lr_scales=problem.eta_l)
    return LinearNet(ws, None, opts).prepare(problem.X, problem.Y, shared=problem)


def bench(name, quick, rate, only_methods=(), only_backends=(), extras=True, ref_cache=None,
          diffrax=True, threads="BLAS on 1 thread"):
    ws, X, Y, tmax = make(name)
    shapes = tuple(w.shape for w in ws)
    problem = lin.make_problem(shapes, X, Y)
    have_numba = B.numba_available()
    ref_backend = "numba" if have_numba else "numpy"
    t0 = time.perf_counter()
    cache = f"{ref_cache}.{name}.npz" if ref_cache else None
    if cache and os.path.exists(cache):
        with np.load(cache) as f:
            t_end, Wref, drop = float(f["t_end"]), f["Wref"], float(f["drop"])
    else:
        t_end, Wref, drop = reference(ws, X, Y, tmax, ref_backend)
        if cache:
            np.savez(cache, t_end=t_end, Wref=Wref, drop=drop)
    print(f"\n=== {name}: layers {'-'.join(str(s[1]) for s in shapes)}-{shapes[-1][0]}, "
          f"n = {problem.size} parameters, t_end = {t_end:.6g} (loss ratio {drop:.2e}; "
          f"reference {time.perf_counter() - t0:.1f} s)")

    # gradient cost against the FLOP bound
    white = problem.white
    flops = gradient_flops(shapes, white)
    bound = flops / rate
    y0 = lin.pack(ws)
    out = np.empty_like(y0)
    plain = plain_gradient(shapes, problem.Sxx, problem.Syx)
    net = _model(problem, ws)
    grads = [("plain numpy (baseline)", lambda: plain(0.0, y0)),
             ("linear.rhs (numpy reference)", lambda: lin.rhs(y0, problem, out)),
             ("LinearNet.rhs (xp, numpy)", lambda: net.rhs(y0, out))]
    net.rhs(y0, out)
    jv = net.linearize(y0)[0]
    grads.append(("LinearNet.linearize (jvp)", lambda: jv(y0)))
    if have_numba:
        from linearnets.sim.models import _linear_kernels as kern
        args = lin.numba_rhs_args(problem)
        try:
            kern.rhs_flat(y0, out, *args)
            grads.append(("numba kernel", lambda: kern.rhs_flat(y0, out, *args)))
        except Exception as exc:  # the kernel's signature belongs to another module
            print(f"  (numba kernel not timed: {exc})")
    # A gradient reads every weight twice and writes n numbers: where the weights do not
    # stay in a core's cache this traffic, not the FLOP rate, can set the time.
    in_cache = 8 * problem.size <= cache_bytes()
    mem_bound = None if in_cache else traffic_floor(shapes, quick)
    print(f"  gradient: {flops / 1e6:.3g} MFLOP, FLOP bound {bound * 1e6:.3g} us "
          f"at {rate / 1e9:.0f} GFLOP/s; " +
          ("weights fit in a core's cache, no traffic floor" if in_cache else
           f"traffic floor {mem_bound * 1e6:.3g} us ({mem_bound / bound:.2f}x the FLOP bound: "
           f"2 reads of {8 * problem.size / 1e6:.3g} MB of weights and 1 write, "
           f"{3 * 8 * problem.size / mem_bound / 1e9:.1f} GB/s)"))
    for label, f in grads:
        dt = time_call(f, 0.2 if quick else 0.5)
        mem = "" if in_cache else f", {mem_bound / dt:6.1%} of the traffic floor"
        print(f"    {label:30s} {dt * 1e6:10.1f} us   {bound / dt:6.1%} of the FLOP bound{mem}",
              flush=True)

    rows_out = []
    rtols = QUICK_RTOLS if quick else RTOLS
    print(f"  {'solver':28s} {'backend':8s} {'rtol':>7s} {'time (s)':>10s} {'vs RK45':>8s} "
          f"{'nfev':>8s} {'rej':>5s} {'us/eval':>9s} {'bound':>6s} {'error':>9s}", flush=True)

    def report(label, b, res, ok):
        rows_out.append((label, b, res, ok))
        rtol, dt, nfev, err, nrej = res
        rk45 = rows_out[0][2][1]
        flag = "" if ok else "  (target missed)"
        rej = "-" if nrej is None else str(nrej)
        print(f"  {label:28s} {b:8s} {rtol:7.0e} {dt:10.4f} {rk45 / dt:7.2f}x {nfev:8d} {rej:>5s} "
              f"{dt / nfev * 1e6:9.1f} {bound * nfev / dt:6.1%} {err:9.2e}{flag}", flush=True)

    # baselines: scipy on the plain gradient
    for m in ("RK45", "DOP853"):
        def run(rtol, m=m):
            with np.errstate(all="ignore"):  # a loose explicit run may blow up: it then fails
                s = solve_ivp(plain, (0.0, t_end), y0, method=m, rtol=rtol,
                              atol=rtol * ATOL_RATIO)
                W = lin.end_to_end_flat(s.y[:, -1], shapes)
            return (W if s.success else np.full_like(W, np.nan)), s.nfev
        res, ok = scan(run, Wref, rtols)
        report(f"scipy {m}", "numpy", res, ok)

    # baselines: diffrax (JAX, jit) on the sufficient statistics
    if diffrax and not diffrax_available():
        print("  (jax / diffrax not installed: diffrax rows skipped)")
    elif diffrax:
        for label, run in diffrax_runs(problem, ws, t_end):
            res, ok = scan(run, Wref, rtols)
            report(label, "jax", res, ok)

    # gradient_flow: every method on every available backend
    backends = ["numpy"] + (["numba"] if have_numba else []) + (["cupy"] if B.gpu_available() else [])
    backends = [b for b in backends if not only_backends or b in only_backends]
    methods = ["RK45", "Tsit5", "DOP853", "SSPRK104", "auto", "ROS34PW2"]
    if quick:
        methods = ["RK45", "Tsit5", "DOP853", "SSPRK104", "auto"]
    methods = [m for m in methods if not only_methods or m in only_methods]
    for m in methods:
        for b in backends:
            if b == "numba":  # compile (or load the cache) outside the timing
                ln.gradient_flow(ws, X, Y, [0.0, 1e-3], backend=b, method=m)

            def run(rtol, m=m, b=b):
                tr = ln.gradient_flow(ws, X, Y, [0.0, t_end], rtol=rtol, atol=rtol * ATOL_RATIO,
                                      backend=b, method=m)
                # a failed run leaves NaN at t_end and so misses the target
                return tr.end_to_end[-1], tr.nfev, tr.nrejected
            res, ok = scan(run, Wref, rtols)
            report(f"gradient_flow {m}", b, res, ok)
    # the defaults, as most calls run: method and backend left out, rtol scanned as above,
    # and the call with nothing but the data (rtol 1e-8, atol 1e-12)
    ln.gradient_flow(ws, X, Y, [0.0, 1e-3])  # compile (or load the cache) outside the timing

    def run(rtol):
        tr = ln.gradient_flow(ws, X, Y, [0.0, t_end], rtol=rtol, atol=rtol * ATOL_RATIO)
        return tr.end_to_end[-1], tr.nfev, tr.nrejected
    default_backend = ln.gradient_flow(ws, X, Y, [0.0, 1e-3]).backend
    res, ok = scan(run, Wref, rtols)
    report(f"default ({DEFAULT_METHOD})", default_backend, res, ok)

    def as_called():
        tr = ln.gradient_flow(ws, X, Y, [0.0, t_end])
        return tr.end_to_end[-1], tr.nfev, tr.nrejected
    W, nfev, nrej = as_called()
    dt = time_call(as_called, 0.3)
    err = rel_err(W, Wref)
    report("default, default rtol", default_backend, (1e-8, dt, nfev, err, nrej), err <= TARGET)
    fixed_cost(ws, X, Y, t_end, rows_out)
    if not extras:
        summary(rows_out, threads)
        return

    # the same RK45 without the stability cap (the plain step-size controller)
    b = "numba" if have_numba else "numpy"
    cap = _base.STABILITY_SAFETY
    _base.STABILITY_SAFETY = _compiled.STABILITY_SAFETY = np.inf
    try:
        def run(rtol):
            tr = ln.gradient_flow(ws, X, Y, [0.0, t_end], rtol=rtol, atol=rtol * ATOL_RATIO,
                                  backend=b, method="RK45")
            return tr.end_to_end[-1], tr.nfev, tr.nrejected
        res, ok = scan(run, Wref, rtols)
        report("RK45, no stability cap", b, res, ok)
    finally:
        _base.STABILITY_SAFETY = _compiled.STABILITY_SAFETY = cap

    def tableau_run(tab, factored):
        # the explicit stepper on ``tab`` with dense or factored stages, as gradient_flow
        # would run it on this backend
        def run(rtol):
            opts = StepperOptions(rtol=rtol, atol=rtol * ATOL_RATIO)
            keep = {}
            args = (y0, np.array([0.0, t_end]), tab, opts,
                    lambda k, y: keep.__setitem__("W", lin.end_to_end_flat(y, shapes)))
            if have_numba:
                raw = _compiled.erk(lin.erk_ops(problem, tab, factored=factored), *args, t0=0.0)
            else:
                store = (lin.FactoredStages(
                    problem, lin.StageLayout(problem, tab.n_stages + 1)) if factored else None)
                raw = integrate(None, *args[:2], lambda r, n, rt, at, xp: ExplicitRK(
                    r, n, rt, at, fun=net.rhs, tableau=tab, store=store), *args[3:],
                    control=_base.StepControl(predictive=True,
                                              cap_safety=_base.STABILITY_SAFETY))
            W = keep["W"] if raw.status.success else np.full_like(Wref, np.nan)
            return W, raw.nfev, raw.nrejected
        return run

    # the dense stage states beside the factored ones, same tableau
    b = "numba" if have_numba else "numpy"
    tab = TABLEAUX["DOP853"]
    if lin.worth_factoring(problem, tab.n_stages):
        res, ok = scan(tableau_run(tab, False), Wref, rtols)
        report("DOP853, dense stages", b, res, ok)

    # SSPRK104 as a Butcher tableau (factored stages where worth it) beside what
    # gradient_flow runs: its low-storage form, or these same factored stages on states
    # over linear.LOWSTORAGE_MAX_BYTES
    tab = TABLEAUX["SSPRK104"]
    res, ok = scan(tableau_run(tab, lin.worth_factoring(problem, tab.n_stages)),
                   Wref, rtols)
    report("SSPRK104, tableau stages", b, res, ok)

    gd = gd_baseline(ws, X, Y, t_end, Wref, problem, quick)
    if gd is None:
        print("  GD: no stable learning rate reached the target within the budget")
    else:
        label, lr, how, steps, total, per = gd
        best = min((r[2][1] for r in rows_out if r[0].startswith("gradient_flow") and r[3]),
                   default=np.nan)
        print(f"  {label}: lr = {lr:.3g} ({how}), {steps} steps x {per * 1e3:.3g} ms = "
              f"{total:.4g} s; best gradient_flow is {total / best:.0f}x faster")
    summary(rows_out, threads)


def summary(rows_out, threads):
    """Print the best gradient_flow row beside the default one, both against scipy's RK45,
    and the default's speed-up over the fastest diffrax row that reached the target
    (``threads``: how the run set its threads, printed with it)."""
    rk45 = rows_out[0][2][1]
    flows = [r for r in rows_out if r[0].startswith("gradient_flow") and r[3]]
    default = [r for r in rows_out if r[0].startswith("default (") and r[3]]
    if not flows or not default:
        return
    best = min(flows, key=lambda r: r[2][1])
    d = default[0]
    print(f"  best:    {best[0][len('gradient_flow '):]} on {best[1]}, {best[2][1]:.4g} s "
          f"({rk45 / best[2][1]:.2f}x scipy RK45)\n"
          f"  default: {d[0]} on {d[1]}, {d[2][1]:.4g} s ({rk45 / d[2][1]:.2f}x scipy RK45, "
          f"{d[2][1] / best[2][1]:.2f}x the best time)")
    dfx = [r for r in rows_out if r[0].startswith("diffrax") and r[3]]
    if dfx:
        b = min(dfx, key=lambda r: r[2][1])
        print(f"  default against diffrax ({threads}): diffrax's fastest, {b[0][8:]} at rtol "
              f"{b[2][0]:.0e}, {b[2][1]:.4g} s = {b[2][1] / d[2][1]:.2f}x the default's time "
              f"[target >= 1.5x]")
    elif any(r[0].startswith("diffrax") for r in rows_out):
        print("  default against diffrax: no diffrax row reached the target")


def blas_threads_arg(text):
    """``--blas-threads``: a thread count >= 1, or 0 / "default" (returned as 0)."""
    if text.strip().lower() == "default":
        return 0
    n = int(text)
    if n < 0:
        raise argparse.ArgumentTypeError(f"--blas-threads must be >= 0 or 'default', got {text}")
    return n


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--problems", default="small,medium,large")
    ap.add_argument("--quick", action="store_true", help="fewer methods and tolerances")
    ap.add_argument("--methods", default="", help="only these methods (comma-separated)")
    ap.add_argument("--backends", default="", help="only these backends (comma-separated)")
    ap.add_argument("--ref-cache", default=None,
                    help="keep each problem's reference in FILE.<problem>.npz and reuse it")
    ap.add_argument("--no-extras", action="store_true",
                    help="skip the rows without the cap, with dense or tableau stages, and GD")
    ap.add_argument("--blas-threads", type=blas_threads_arg, default=1, metavar="N|default",
                    help="threads of every BLAS library loaded, of torch and (N = 1) of XLA; "
                         "'default' (or 0): nothing pinned, the libraries' and jax's own "
                         "pools and the package's own choice of threads: what a user gets")
    ap.add_argument("--busy", action="store_true",
                    help="one core busy with an unrelated process for the whole run")
    ap.add_argument("--no-diffrax", dest="diffrax", action="store_false",
                    help="skip the diffrax (JAX) rows")
    args = ap.parse_args(argv)
    if args.blas_threads > 0:
        threadpool_limits(args.blas_threads)    # for the rest of the process
        if importlib.util.find_spec("torch") is not None:
            import torch                        # the GD baseline's own pool
            torch.set_num_threads(args.blas_threads)
        if args.blas_threads == 1:
            pin_xla_threads()                   # before jax is first imported
        threads = f"every side pinned to {args.blas_threads} BLAS thread(s)"
    else:
        threads = ("default threads: nothing pinned, the package choosing its own "
                   "(linearnets._threads), the libraries and jax their pools")
    names = [p.strip() for p in args.problems.split(",") if p.strip()]
    for p in names:
        if p not in PROBLEMS:
            ap.error(f"unknown problem {p!r}; choose from {', '.join(PROBLEMS)}")
    rate = gemm_rate()
    print(f"{threads}\nfloat64 GEMM rate {rate / 1e9:.1f} GFLOP/s with BLAS on "
          f"{args.blas_threads or 'its own number of'} thread(s); backends: numpy"
          f"{', numba' if B.numba_available() else ''}{', cupy' if B.gpu_available() else ''}; "
          f"target {TARGET:g} relative error of W(t_end)")
    split = (lambda a: tuple(x.strip() for x in a.split(",") if x.strip()))
    with busy_core(args.busy):
        print(f"one core busy with another process: {'yes' if args.busy else 'no'}; load "
              f"average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
        for p in names:
            bench(p, args.quick, rate, split(args.methods), split(args.backends),
                  not args.no_extras, args.ref_cache, args.diffrax, threads)


if __name__ == "__main__":
    main()
