"""Gradient flow of nonlinear networks: ``ln.gradient_flow`` against two baselines, same run.

Problems (issue 24):

- small:  10-64-64-1 ReLU, P = 200, squared loss (He init, a ReLU teacher);
- medium: 64-256-256-256-1 Softplus (beta 5), soft hinge (beta_h 20), Geiger et al.'s NTK
  parameterisation (``geiger_parameterisation``, alpha = 1, centred), P = 1000;
- large:  64-1024-1024-1 ReLU, P = 2000, squared loss, t_end = 0.02 (0.3 with ``--quick``).
  The horizon is short because the tight reference is the cost: DOP853 at rtol 1e-7
  (stability- and kink-bound, |lambda| ~ 761 at t = 0) took 479 evaluations of 0.7 s
  (one thread, a loaded machine) to t = 0.02, plus its 10x looser check; t_end = 2
  would be ~100x that.  ``--t-end large=T`` sets another.

Measured: the wall time to the outputs ``F`` on the training inputs at ``t_end`` within
``TARGET = 1e-4`` (max over outputs of the error, relative to ``max |F_ref|``) of a
tight reference (``ln.gradient_flow`` at rtol 1e-10, kink_rtol 1e-7 by default,
``--ref-rtol``/``--ref-kink-rtol`` otherwise: the low-order pair that crosses ReLU
kinks needs ~tol^(-1/2) steps, so a tighter kink tolerance is out of reach here; its
agreement with a run 10x looser in both is printed).  ``--ref-cache DIR`` keeps each
reference in an .npz keyed on the problem and its settings, so that a rerun (or a
reference computed apart) is not paid twice.  The package's scan sets ``kink_rtol =
rtol`` and runs ``backend="auto"`` (the compiled MLP where numba is installed), once for
each of ``--methods`` (default ``auto,SSPRK104,ROS34PW2``: "auto" is the explicit pair that
hands over to the Rosenbrock-W method where the stability cap holds its step,
``methods.driver.auto``, SSPRK104 on a model with kinks at rtol >= 1e-6; the reference,
DOP853 at its tight rtol, is independent of ROS34PW2's row); the numpy
reference of the model is timed at the rtol found, as a second row (not with
``--skip-numpy``).  Ratios are to the fastest package row that reached the target.  For the
package the loosest rtol in a scan that reaches it; for the baselines the largest step
(setting) that reaches it:

- GD: full-batch gradient descent ``theta -= dt grad L`` in PyTorch float64 autograd
  (optional dependency of this script: skipped without torch), ``dt`` searched by
  factors of 4; when a run meeting the target would exceed the step budget its dt
  is extrapolated from the measured error (GD's global error is O(dt)) and the time
  is steps x the timed per-step cost (marked "extrap.");
- gradientflow rule: the adaptive Euler rule of Geiger et al.'s ``gradientflow``
  package (start dt = 1; accept a trial step if max |dF| <= max_dout and
  |g - g'|^2/(|g||g'|) <= max_dgrad, with 0.1 (= their 0.1/alpha on f) and 1e-4;
  grow dt by 1.1 when both are below half their bound; otherwise dt /= 10 and retry),
  on the same numpy gradient (one forward pass gives F and the gradient), with both
  bounds tightened by s and s^2 until it reaches the target.

Also printed: one evaluation of the benchmark's numpy gradient and of the package's public
right-hand side ``PreparedFlow.rhs`` on numpy (the ``MLP`` model) and on numba (``MLPNumba``),
each against the same model's own ``rhs`` (best of 5 interleaved rounds, 1 on the large
problem; ``--rhs-only``: these lines alone, no reference), and on the large problem the FLOP
rate of a gradient evaluation against this machine's float64 GEMM rate measured in the same
run (target >= 50 %).

Budgets (``--gd-steps``, ``--rule-evals``, ``--pkg-steps``) bound each side's work; a side
that runs out is extrapolated as described above and marked so.  ``--t-end NAME=T``
changes a problem's horizon.

Measured (2 shared cores, every side on one thread, CPU seconds; ``OMP_NUM_THREADS=1
OPENBLAS_NUM_THREADS=1 python benchmarks/bench_mlp.py --only smooth,small --ref-rtol 1e-8
--ref-kink-rtol 1e-6 --methods auto,SSPRK104 --skip-numpy``, one run): on the smooth problem
"auto" (compiled) reaches 1e-4 in 0.463 s (err 4.5e-6), 2.60x faster than diffrax Tsit5
(1.205 s) and 4.21x than Dopri8 (1.951 s), both at their best controller (PID 0.3/0.3),
8.9x than GD (extrapolated); on the small ReLU problem SSPRK104 reaches it in 2.25 s, 1.59x
faster than diffrax Tsit5 (3.585 s) and 1.64x than Dopri8 (3.692 s), but GD is 2.9x faster
than the package (0.775 s, 1,600 steps at dt 2.5e-3).  The floor there: the small problem
slides along kinks from t = 0, every step of the package is a fallback step, and no setting
scanned reaches 1e-4 below ~4,000 evaluations, against GD's 1,600 of a torch step that
costs ~4.5x a compiled evaluation: >= 10x GD would need <= ~700 evaluations, which a method
that resolves the kinks does not reach on a sliding flow.  "auto" there is SSPRK104 (the
same evaluations at every rtol scanned): ``LINEARNETS_JIT=eager python
benchmarks/bench_mlp.py --only small --methods auto,SSPRK104 --ref-rtol 1e-8
--ref-kink-rtol 1e-6 --ref-cache DIR --skip-numpy --rule-evals 50`` (default threads,
load 12 on 2 cores, one run): "auto" 2.413 s at rtol 3e-4 (4,907 evaluations, err
6.8e-5), 2.30x faster than diffrax Tsit5 (5.540 s, I controller, rtol 3e-6) and 3.44x
than Dopri8 (8.302 s, PI 0.3/0.3, rtol 3e-4).  The reference at kink_rtol 1e-6 took 583,841
evaluations (self-agreement 2.5e-5).  One gradient evaluation against its FLOP bound
(``benchmarks/studies/study_mlp_rhs.py``, same conventions): 1.60x at width 256 (softplus,
P = 1000), 1.45x (tanh 256), 1.28x (ReLU 512), 1.21x at 1024 (P = 2000).

Run: ``python benchmarks/bench_mlp.py [--quick] [--only small,medium,large]``.  On a
shared machine pin every side to one thread (``OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1``):
multi-threaded BLAS under a load of 10 on 2 cores was measured 75x slower per gradient.
``--quick`` shrinks the medium and large networks (widths / 4, P / 2) and the horizons.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time

import numpy as np
from scipy.special import expit

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import linearnets as ln  # noqa: E402
from problems import busy_core, gemm_rate  # noqa: E402  one core busy; the GEMM rate
from problems import (DIFFRAX_CONTROLLERS, diffrax_available, diffrax_solve,  # noqa: E402
                      jax_x64, pin_xla_threads)

TARGET = 1e-4
RTOLS = (1e-3, 3e-4, 1e-4, 3e-5, 1e-5, 3e-6, 1e-6, 1e-7)
#: The clock of every timed side: with every side pinned to one thread
#: (``OMP_NUM_THREADS=1``) the CPU time of this process (all its threads: a baseline that
#: runs helper threads pays for them), which the load of other work on a shared machine
#: leaves nearly alone; wall time otherwise.
clock = time.process_time if os.environ.get("OMP_NUM_THREADS") == "1" else time.perf_counter


# ---------------------------------------------------------------------------- problems
def make(name, quick):
    rng = np.random.default_rng({"small": 0, "medium": 1, "large": 2, "smooth": 3}[name])
    biases = None
    if name == "small":
        sizes, act, P, loss, t_end = (10, 64, 64, 1), "relu", 200, "mse", 0.5 if quick else 4.0
    elif name == "smooth":
        sizes, act, P, loss, t_end = (10, 64, 64, 1), "tanh", 200, "mse", 50.0 if quick else 200.0
    elif name == "medium":
        h = 64 if quick else 256
        sizes, act, P, loss = (64, h, h, h, 1), ("softplus", 5.0), 500 if quick else 1000, \
            ("soft_hinge", 20.0)
        t_end = 20.0 if quick else 40.0
    else:
        h = 256 if quick else 1024
        sizes, act, P, loss = (64, h, h, 1), "relu", 1000 if quick else 2000, "mse"
        t_end = 0.3 if quick else 0.02
    X = rng.standard_normal((P, sizes[0]))
    if loss == "mse":
        teacher = ln.init_network((sizes[0], 8, 1), np.sqrt(2.0), seed=rng)
        y = np.maximum(X @ teacher[0].T, 0) @ teacher[1].T
        Y = y / y.std()
        if act == "tanh":                                              # Xavier, trained biases
            ws = ln.init_network(sizes, 1.0, seed=rng)
            biases = [np.zeros(n) for n in sizes[1:-1]]
        else:
            ws = ln.init_network(sizes, np.sqrt(2.0), seed=rng)         # He
        kw = dict(activation=act, loss=loss)
        if biases is not None:
            kw["biases"] = biases
    else:
        beta = rng.standard_normal(sizes[0])
        Y = np.sign(X @ beta + 0.3 * np.sin(3 * X[:, 0]))[:, None]
        p = ln.geiger_parameterisation(sizes, 1.0, act, seed=rng, loss=loss)
        ws = p.weights
        kw = p.flow_kwargs()
        kw.pop("eta")
        kw.pop("biases")
    return dict(name=name, sizes=sizes, X=X, Y=Y, ws=ws, kw=kw, t_end=t_end)


# ---------------------------------------------------------------------------- gradient
class NumpyGrad:
    """F and the flow's velocity -dL/dtheta from one forward pass (whole-batch GEMMs,
    three (P x N) by (N x N) products per hidden layer, as the package's model)."""

    def __init__(self, pb):
        kw = pb["kw"]
        self.X, self.Y = pb["X"], pb["Y"]
        self.shapes = [w.shape for w in pb["ws"]]
        self.L = len(self.shapes)
        act = kw.get("activation", "linear")
        self.act, self.a = (act if isinstance(act, tuple) else (act, None))
        self.m = list(kw.get("multipliers") or [1.0] * self.L)
        self.alpha = kw.get("alpha", 1.0)
        loss = kw.get("loss", "mse")
        self.loss, self.bh = (loss if isinstance(loss, tuple) else (loss, 20.0))
        self.bias_shapes = [(b.size,) for b in kw.get("biases") or ()]
        self.theta0 = np.concatenate([w.ravel() for w in pb["ws"]]
                                     + [b.ravel() for b in kw.get("biases") or ()])
        self.f0 = self._forward(self.theta0)[0] if kw.get("centered") else 0.0

    def unpack(self, th):
        out, k = [], 0
        for a, b in self.shapes:
            out.append(th[k:k + a * b].reshape(a, b))
            k += a * b
        bs = []
        for (a,) in self.bias_shapes:
            bs.append(th[k:k + a])
            k += a
        return out, bs

    def _phi(self, z):
        if self.act == "relu":
            return np.maximum(z, 0.0), (z > 0).astype(np.float64)
        if self.act == "softplus":
            return np.logaddexp(0.0, self.a * z) / self.a, expit(self.a * z)
        if self.act == "tanh":
            v = np.tanh(z)
            return v, 1.0 - v * v
        raise ValueError(self.act)

    def _forward(self, th):
        ws, bs = self.unpack(th)
        h, H, D = self.X, [self.X], []
        for l in range(self.L - 1):
            z = self.m[l] * (h @ ws[l].T)
            v, d = self._phi(z + bs[l] if bs else z)
            H.append(v)
            D.append(d)
            h = v
        return self.m[-1] * (h @ ws[-1].T), H, D, ws

    def outputs(self, th):
        return self.alpha * (self._forward(th)[0] - self.f0)

    def __call__(self, th):
        f, H, D, ws = self._forward(th)
        F = self.alpha * (f - self.f0)
        if self.loss == "mse":
            g = F - self.Y
        else:
            g = -self.Y * expit(self.bh * (1.0 - self.Y * F))
        G = g / (self.alpha * len(self.X))
        grads = [None] * self.L
        gbs = [None] * len(self.bias_shapes)
        for l in range(self.L - 1, -1, -1):
            grads[l] = self.m[l] * (G.T @ H[l])
            if l:
                G = (self.m[l] * (G @ ws[l])) * D[l - 1]
                if gbs:
                    gbs[l - 1] = G.sum(axis=0)
        return F, -np.concatenate([gw.ravel() for gw in grads] + gbs)

    def flops(self):
        """Multiply-adds x 2 of one evaluation: forward, weight gradients, back-propagation."""
        P = len(self.X)
        per = [2 * P * a * b for a, b in self.shapes]
        return 2 * sum(per) + sum(per[1:])


def package_rhs(pb, backend):
    """The package's public right-hand side, ``PreparedFlow.rhs`` of ``prepare_flow(...,
    backend=backend)`` at the initial state (the numpy ``MLP``, or on "numba" its compiled
    twin ``MLPNumba``), and the same model's own ``rhs`` (an internal interface, None if it
    changed): two callables, or None for a backend not installed."""
    try:
        from linearnets.sim.flow import prepare_flow
        kw = dict(pb["kw"])
        bs = kw.pop("biases", None)
        prep = prepare_flow(pb["X"], pb["Y"], tuple(w.shape for w in pb["ws"]), [pb["t_end"]],
                            backend=backend, biases=bs is not None, **kw)
        y = np.concatenate([w.ravel() for w in pb["ws"]] + list(bs or []))
        public = lambda: prep.rhs(y, pb["ws"], bs)  # noqa: E731
    except Exception:
        return None, None
    try:
        model = prep._net(pb["ws"], bs)     # the model rhs builds, on its own
        out = np.empty_like(y)
        return public, lambda: model.rhs(y, out)
    except Exception:
        return public, None


def time_pairs(pairs, rounds):
    """Per-call seconds of each callable of ``pairs`` (None: NaN), the best of ``rounds``
    interleaved rounds of :func:`time_call`."""
    best = [[np.inf] * len(p) for p in pairs]
    for _ in range(rounds):
        for b, p in zip(best, pairs):
            for i, f in enumerate(p):
                b[i] = min(b[i], time_call(f)) if f is not None else np.nan
    return best


# ---------------------------------------------------------------------------- helpers
def time_call(f, min_time=0.3):
    f()
    n, t0 = 0, clock()
    while True:
        f()
        n += 1
        t = clock() - t0
        if t >= min_time and n >= 3:
            return t / n


def err_of(F, Fref):
    return float(np.abs(F - Fref).max() / np.abs(Fref).max())


def reference(pb, rtol=1e-10, kink_rtol=1e-7, cache=None):
    """``(F_ref, agreement with a 10x looser run, seconds, info)``; from ``cache`` (a folder)
    when a reference of the same problem and settings is there."""
    key = (f"{pb['name']}-{'-'.join(map(str, pb['sizes']))}-P{len(pb['X'])}-t{pb['t_end']:g}"
           f"-r{rtol:g}-k{kink_rtol:g}")
    path = os.path.join(cache, f"ref-{key}.npz") if cache else None
    if path and os.path.exists(path):
        z = np.load(path)
        return z["F"], float(z["agree"]), float(z["seconds"]), dict(
            nfev=int(z["nfev"]), kinks=int(z["kinks"]), loss=float(z["loss"]), cached=True)
    t0 = clock()
    run = dict(backend="auto", record=("outputs",), max_steps=10 ** 7, **pb["kw"])
    tr = ln.gradient_flow(pb["ws"], pb["X"], pb["Y"], [pb["t_end"]], rtol=rtol,
                          atol=rtol * 1e-4, kink_rtol=kink_rtol, **run)
    if not tr.success:
        raise RuntimeError(f"reference failed: {tr.message}")
    check = ln.gradient_flow(pb["ws"], pb["X"], pb["Y"], [pb["t_end"]], rtol=10 * rtol,
                             atol=rtol * 1e-3, kink_rtol=10 * kink_rtol, **run)
    F = tr.outputs[-1]
    agree = err_of(check.outputs[-1], F)
    seconds = clock() - t0
    info = dict(nfev=tr.nfev, kinks=tr.kinks, loss=float(tr.loss[-1]), cached=False)
    if path:
        os.makedirs(cache, exist_ok=True)
        np.savez(path, F=F, agree=agree, seconds=seconds, **{k: v for k, v in info.items()
                                                              if k != "cached"})
    return F, agree, seconds, info


# ---------------------------------------------------------------------------- the runs
def package_run(pb, rtol, backend, max_steps, method="auto"):
    """``(seconds (best of 2 when under 2 s), trajectory)`` of one package run."""
    best = np.inf
    for _ in range(2):
        t0 = clock()
        tr = ln.gradient_flow(pb["ws"], pb["X"], pb["Y"], [pb["t_end"]], rtol=rtol,
                              backend=backend, record=("outputs",), kink_rtol=rtol,
                              max_steps=max_steps, method=method, **pb["kw"])
        best = min(best, clock() - t0)
        if best > 2.0:
            break
    return best, tr


def run_package(pb, Fref, max_steps=10 ** 6, method="auto", rtols=RTOLS):
    # untimed: the compiled loops of this method compile (or load) here, not in a timed run
    ln.gradient_flow(pb["ws"], pb["X"], pb["Y"], [1e-3 * pb["t_end"]], rtol=rtols[0],
                     backend="auto", record=("outputs",), kink_rtol=rtols[0], method=method,
                     **pb["kw"])
    rows = []
    for rtol in rtols:
        best, tr = package_run(pb, rtol, "auto", max_steps, method)
        e = err_of(tr.outputs[-1], Fref) if tr.success else np.inf
        rows.append((rtol, best, tr.nfev, e, getattr(tr, "kinks", 0), tr.backend))
        if e <= TARGET:
            return rows[-1], True, rows
        if not tr.success:
            break
    return rows[-1], False, rows


def run_gd_torch(pb, Fref, budget):
    if importlib.util.find_spec("torch") is None:
        return None
    import torch
    torch.set_default_dtype(torch.float64)
    kw = pb["kw"]
    X, Y = torch.from_numpy(pb["X"]), torch.from_numpy(pb["Y"])
    act = kw.get("activation")
    act, a = act if isinstance(act, tuple) else (act, None)
    m = list(kw.get("multipliers") or [1.0] * len(pb["ws"]))
    alpha = kw.get("alpha", 1.0)
    loss = kw.get("loss")
    lname, bh = loss if isinstance(loss, tuple) else (loss, None)
    phi = {"relu": torch.relu, "tanh": torch.tanh}.get(
        act, lambda z: torch.nn.functional.softplus(z, beta=a))
    P = X.shape[0]
    L = len(pb["ws"])

    def net(Ws):
        h = X
        for l, w in enumerate(Ws[:L - 1]):
            z = m[l] * (h @ w.T)
            h = phi(z + Ws[L + l] if len(Ws) > L else z)
        return m[-1] * (h @ Ws[L - 1].T)

    W0 = [torch.tensor(w) for w in pb["ws"]] + [torch.tensor(b) for b in kw.get("biases") or ()]
    with torch.no_grad():
        f0 = net(W0) if kw.get("centered") else torch.zeros(1)

    def loss_fn(Ws):
        F = alpha * (net(Ws) - f0)
        if lname == "mse":
            return 0.5 * ((Y - F) ** 2).sum() / (alpha ** 2 * P), F
        return torch.nn.functional.softplus(1 - Y * F, beta=bh).sum() / (alpha ** 2 * P), F

    def run(dt, n):
        Ws = [w.clone().requires_grad_(True) for w in W0]
        for k in range(n):
            step = min(dt, pb["t_end"] - k * dt)
            L, _ = loss_fn(Ws)
            gs = torch.autograd.grad(L, Ws)
            with torch.no_grad():
                for w, g in zip(Ws, gs):
                    w -= step * g
        with torch.no_grad():
            return (alpha * (net(Ws) - f0)).numpy()

    dt = pb["t_end"] / 25
    tried = []
    spent = 0
    while True:
        n = int(np.ceil(pb["t_end"] / dt - 1e-9))
        if spent + n > budget:
            break
        t0 = clock()
        F = run(dt, n)
        took = clock() - t0
        spent += n
        e = err_of(F, Fref) if np.all(np.isfinite(F)) else np.inf
        tried.append((dt, n, took, e))
        if e <= TARGET:
            return dict(setting=f"dt={dt:.2e}", time=took, evals=n, err=e, how="run")
        dt /= 4
    finite = [r for r in tried if np.isfinite(r[3]) and r[3] < 0.5]
    if not finite:
        return dict(setting="none stable", time=np.nan, evals=0, err=np.inf, how="-")
    dt1, n1, took1, e1 = finite[-1]
    dt_ok = 0.9 * dt1 * TARGET / e1
    n = int(np.ceil(pb["t_end"] / dt_ok))
    return dict(setting=f"dt={dt_ok:.2e}", time=took1 / n1 * n, evals=n,
                err=f"~{TARGET:.0e}", how=f"extrap. from dt={dt1:.1e} err={e1:.1e}")


def run_diffrax(pb, Fref, solver_name, rtols=RTOLS, max_steps=200_000):
    """diffrax (JAX) on the same flow: ``diffeqsolve`` with ``solver_name`` (``Tsit5`` or
    ``Dopri8``) and a ``PIDController`` (each of :data:`DIFFRAX_CONTROLLERS`), the vector
    field ``-jax.grad(L)`` in float64, the whole solve ``jax.jit``-compiled with rtol and
    atol as traced arguments (``problems.diffrax_solve``: one compilation per solver and
    controller, excluded from the times: every timed call runs compiled code), best of 2.
    For each controller the loosest rtol of the scan reaching the target; returns the
    faster, or None without jax and diffrax (an optional baseline: the package does not
    depend on them)."""
    if not diffrax_available():
        return None
    jax, jnp, _ = jax_x64()
    kw = pb["kw"]
    act = kw.get("activation", "linear")
    act, a = act if isinstance(act, tuple) else (act, None)
    phi = {"relu": jax.nn.relu, "tanh": jnp.tanh}.get(
        act, lambda z: jax.nn.softplus(a * z) / a)
    m = list(kw.get("multipliers") or [1.0] * len(pb["ws"]))
    alpha = kw.get("alpha", 1.0)
    loss = kw.get("loss", "mse")
    lname, bh = loss if isinstance(loss, tuple) else (loss, 20.0)
    X, Y = jnp.asarray(pb["X"]), jnp.asarray(pb["Y"])
    P, L = pb["X"].shape[0], len(pb["ws"])

    def net(p):
        Ws, bs = p
        h = X
        for l in range(L - 1):
            z = m[l] * (h @ Ws[l].T)
            h = phi(z + bs[l] if bs else z)
        return m[-1] * (h @ Ws[-1].T)

    p0 = ([jnp.asarray(w) for w in pb["ws"]], [jnp.asarray(b) for b in kw.get("biases") or ()])
    f0 = net(p0) if kw.get("centered") else 0.0

    def objective(p):
        F = alpha * (net(p) - f0)
        if lname == "mse":
            return 0.5 * jnp.sum((Y - F) ** 2) / (alpha ** 2 * P)
        return jnp.sum(jax.nn.softplus(bh * (1.0 - Y * F))) / bh / (alpha ** 2 * P)

    grad = jax.grad(objective)
    best = None
    for label, pc, ic in DIFFRAX_CONTROLLERS:
        solve = diffrax_solve(lambda p: jax.tree_util.tree_map(jnp.negative, grad(p)), p0,
                              pb["t_end"], lambda p: alpha * (net(p) - f0), solver_name, pc, ic,
                              max_steps)
        for rtol in rtols:
            args = (rtol, rtol * 1e-4)
            solve(*args)                                # compiles once per controller
            took = np.inf
            for _ in range(2):
                t0 = clock()
                F, steps, rej, ok = solve(*args)
                took = min(took, clock() - t0)
            e = err_of(F, Fref) if ok else np.inf
            print(f"  diffrax {solver_name} {label} rtol={rtol:.0e}: {took:.3f} s, steps "
                  f"{steps} ({rej} rejected), err {e:.1e}", flush=True)
            if e <= TARGET:
                row = dict(setting=f"{label}, rtol={rtol:.0e}", time=took,
                           evals=steps * solve.stages, err=e, how="run")
                if best is None or row["time"] < best["time"]:
                    best = row
                break
            if not ok or took > 60.0:
                break
    return best or dict(setting="none reached", time=np.nan, evals=0, err=np.inf,
                        how="NOT REACHED")


def run_gradientflow_rule(pb, Fref, grad, s, max_evals):
    """Geiger et al.'s adaptive Euler rule with bounds (0.1 s, 1e-4 s^2)."""
    max_dout, max_dgrad = 0.1 * s, 1e-4 * s * s
    t, dt, t_end = 0.0, 1.0, pb["t_end"]
    x = grad.theta0.copy()
    F, v = grad(x)
    evals = 1
    t0 = clock()
    while t < t_end and evals < max_evals:
        while True:
            step = min(dt, t_end - t)
            xn = x + step * v
            Fn, vn = grad(xn)
            evals += 1
            dout = float(np.abs(Fn - F).max())
            nv, nvn = np.linalg.norm(v), np.linalg.norm(vn)
            dgrad = 0.0 if nv == 0 or nvn == 0 else float(np.linalg.norm(v - vn) ** 2 / (nv * nvn))
            if dout <= max_dout and dgrad <= max_dgrad:
                if dout <= 0.5 * max_dout and dgrad <= 0.5 * max_dgrad:
                    dt *= 1.1
                break
            dt /= 10
            if evals >= max_evals:
                break
        x, F, v, t = xn, Fn, vn, t + step
    took = clock() - t0
    if t < t_end:
        return dict(setting=f"s={s:g}", time=took, evals=evals, err=np.inf,
                    how=f"budget out at t={t:.3g}")
    return dict(setting=f"s={s:g}", time=took, evals=evals, err=err_of(F, Fref), how="run")


# ---------------------------------------------------------------------------- main
def bench(name, quick, rate, args):
    pb = make(name, quick)
    if name in args.t_end:
        pb["t_end"] = args.t_end[name]
    print(f"\n== {name}: {'-'.join(map(str, pb['sizes']))}, P={len(pb['X'])}, "
          f"{pb['kw'].get('activation')}, {pb['kw'].get('loss')}, t_end={pb['t_end']}", flush=True)
    grad = NumpyGrad(pb)
    per_eval = time_call(lambda: grad(grad.theta0))
    (per_pkg, per_mnp), (per_nb, per_mnb) = time_pairs(
        [package_rhs(pb, "numpy"), package_rhs(pb, "numba")], 1 if name == "large" else 5)
    print(f"  one gradient: bench numpy {per_eval * 1e3:.3f} ms, PreparedFlow.rhs numpy "
          f"{per_pkg * 1e3:.3f} ms, numba {per_nb * 1e3:.3f} ms ({per_pkg / per_nb:.2f}x); "
          f"against the model's own rhs: numpy {per_mnp * 1e3:.3f} ms "
          f"({per_pkg / per_mnp:.3f}x, {(per_pkg - per_mnp) * 1e6:+.1f} us), numba "
          f"{per_mnb * 1e3:.3f} ms ({per_nb / per_mnb:.3f}x, {(per_nb - per_mnb) * 1e6:+.1f} us)",
          flush=True)
    if name == "large":
        fl = grad.flops()
        for label, t in (("numba", per_nb), ("numpy", per_pkg), ("bench numpy", per_eval)):
            print(f"  FLOP rate of a gradient ({label}): {fl / t / 1e9:.1f} GFLOP/s = "
                  f"{fl / t / rate:.0%} of GEMM ({rate / 1e9:.1f} GFLOP/s) [target >= 50 %]")
    if args.rhs_only:
        return []
    Fref, self_err, tref, info = reference(pb, args.ref_rtol, args.ref_kink_rtol,
                                           args.ref_cache)
    F0 = NumpyGrad(pb).outputs(NumpyGrad(pb).theta0)
    print(f"reference: rtol {args.ref_rtol:g}, kink_rtol {args.ref_kink_rtol:g} in {tref:.1f} s"
          f"{' (cached)' if info['cached'] else ''} (with its 10x looser check), agreement "
          f"{self_err:.1e}; nfev {info['nfev']}, kinks {info['kinks']}; "
          f"outputs moved {np.abs(Fref - F0).max() / np.abs(Fref).max():.2f} of max|F|, loss "
          f"{info['loss']:.3g}", flush=True)
    rows = []
    for method in args.methods.split(","):
        method = method.strip()
        label = method
        pkg, ok, scan = run_package(pb, Fref, args.pkg_steps or 10 ** 6, method)
        for r in scan:
            print(f"  package {label} rtol={r[0]:.0e} ({r[5]}): {r[1]:.3f} s, nfev {r[2]}, "
                  f"err {r[3]:.1e}, kinks {r[4]}", flush=True)
        rows.append((f"ln.gradient_flow {label} ({pkg[5]})", f"rtol={pkg[0]:.0e}", pkg[1],
                     pkg[2], pkg[3], "run" if ok else "NOT REACHED"))
        if not args.skip_numpy:
            t_np, tr_np = package_run(pb, pkg[0], "numpy", args.pkg_steps or 10 ** 6, method)
            e_np = err_of(tr_np.outputs[-1], Fref) if tr_np.success else np.inf
            rows.append((f"ln.gradient_flow {label} (numpy)", f"rtol={pkg[0]:.0e}", t_np,
                         tr_np.nfev, e_np, "run" if e_np <= TARGET else "NOT REACHED"))
    npkg = len(rows)
    if args.diffrax:
        if not diffrax_available():
            print("  (jax / diffrax not installed: diffrax baseline skipped)")
        else:
            for solver_name in ("Tsit5", "Dopri8"):
                dfx = run_diffrax(pb, Fref, solver_name)
                rows.append((f"diffrax {solver_name} (JAX, jit)", dfx["setting"], dfx["time"],
                             dfx["evals"], dfx["err"], dfx["how"]))
    budget = args.gd_steps or ((300 if quick else 3000) if name != "large"
                               else (40 if quick else 200))
    gd = run_gd_torch(pb, Fref, budget)
    if gd is None:
        print("  (torch not installed: GD baseline skipped)")
    else:
        rows.append(("GD (PyTorch f64)", gd["setting"], gd["time"], gd["evals"], gd["err"],
                     gd["how"]))
    max_evals = args.rule_evals or ((4000 if quick else 20000) if name != "large"
                                    else (300 if quick else 2000))
    for s in (1.0, 0.3, 0.1, 0.03, 0.01):
        est = run_gradientflow_rule(pb, Fref, grad, s, max_evals)
        print(f"  gradientflow rule {est['setting']}: {est['time']:.2f} s, {est['evals']} evals, "
              f"err {est['err']:.1e} ({est['how']})", flush=True)
        if est["err"] <= TARGET or est["how"] != "run":
            break
    if est["err"] <= TARGET:
        how = "run"
    elif est["how"] == "run":
        how = "NOT REACHED"
    else:  # ran out of evaluations: its time to t_end at the pace it had (a lower bound:
        # its step only shrank), the setting's accuracy not known
        t_at = max(float(est["how"].rsplit("=", 1)[1]), 1e-300)
        est["time"] *= pb["t_end"] / t_at
        est["evals"] = int(est["evals"] * pb["t_end"] / t_at)
        est["err"] = "?"
        how = f"extrap. from t={t_at:.3g} (lower bound)"
    rows.append(("gradientflow rule", est["setting"], est["time"], est["evals"], est["err"], how))
    reached = [r for r in rows[:npkg] if r[5] == "run"] or rows[:1]
    best = min(reached, key=lambda r: r[2])
    print(f"\n| {name} | setting | time (s) | evals | err | time / {best[0]} | target | note |")
    print("|---|---|---|---|---|---|---|---|")
    for label, setting, tm, ev, e, how in rows:
        ratio = tm / best[2] if np.isfinite(tm) else np.nan
        target = {"GD (PyTorch f64)": ">= 10x", "gradientflow rule": ">= 5x"}.get(
            label, ">= 1.5x" if label.startswith("diffrax") else "")
        es = e if isinstance(e, str) else f"{e:.1e}"
        print(f"| {label} | {setting} | {tm:.3f} | {ev} | {es} | {ratio:.3g}x | {target} | "
              f"{how} |")
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="small,smooth,medium,large")
    ap.add_argument("--ref-rtol", type=float, default=1e-10)
    ap.add_argument("--ref-kink-rtol", type=float, default=1e-7)
    ap.add_argument("--ref-cache", default=None, help="folder keeping the references (.npz)")
    ap.add_argument("--gd-steps", type=int, default=None, help="GD's step budget")
    ap.add_argument("--rule-evals", type=int, default=None, help="the rule's evaluation budget")
    ap.add_argument("--pkg-steps", type=int, default=None, help="the package's max_steps")
    ap.add_argument("--t-end", action="append", default=[], metavar="NAME=T")
    ap.add_argument("--methods", default="auto,SSPRK104,ROS34PW2",
                    help="the package's methods, each scanned over rtol")
    ap.add_argument("--no-diffrax", dest="diffrax", action="store_false",
                    help="skip the diffrax (JAX) rows")
    ap.add_argument("--rhs-only", action="store_true",
                    help="time one gradient evaluation of each side, nothing else")
    ap.add_argument("--skip-numpy", action="store_true",
                    help="no second row with the numpy model at the rtol found")
    ap.add_argument("--busy", action="store_true",
                    help="one core busy with an unrelated process for the whole run")
    args = ap.parse_args(argv)
    args.t_end = {k: float(v) for k, v in (item.split("=") for item in args.t_end)}
    if os.environ.get("OMP_NUM_THREADS") == "1":
        pin_xla_threads()     # XLA's CPU backend on one thread too
    if importlib.util.find_spec("torch") is not None:
        import torch
        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", torch.get_num_threads())))
    rate = gemm_rate()
    print(f"float64 GEMM rate: {rate / 1e9:.1f} GFLOP/s; numpy {np.__version__}; "
          f"torch {'yes' if importlib.util.find_spec('torch') else 'absent'}; diffrax "
          f"{'yes' if diffrax_available() else 'absent'}; times are "
          f"{'CPU' if clock is time.process_time else 'wall'} seconds")
    with busy_core(args.busy):
        print(f"one core busy with another process: {'yes' if args.busy else 'no'}; load "
              f"average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
        for name in args.only.split(","):
            bench(name.strip(), args.quick, rate, args)


if __name__ == "__main__":
    main()
