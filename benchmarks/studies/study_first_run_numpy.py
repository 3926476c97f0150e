"""numpy against the compiled loop on small problems (a warm cache): what a first call costs when``backend="auto"`` runs it on numpy while the kernels compile in the background (docs/first_run.md).

Cases: the README tour's flow and gradient descent, ``method="auto"`` to t = 1e8 (bench_first_run's
"auto" case), and bench_mlp-sized ReLU / tanh nets (10-64-64-1, P = 200).  Best of 3 (compiled) and 2
(numpy) in one process, after one untimed compiled call.

    python benchmarks/studies/study_first_run_numpy.py [substring ...]
"""
import time
import sys
import numpy as np
import linearnets as ln
def tm(f, n=3):
    best = 1e9
    for _ in range(n):
        t0 = time.perf_counter(); r = f(); best = min(best, time.perf_counter() - t0)
    return best, r
X, y, beta = ln.scalar_teacher(P=40, D=10, s=2.0, seed=0)
weights = ln.init_balanced((10, 50, 50, 1), sigma=0.1, left=[[1.0]], right=beta[:, None])
t_eval = np.concatenate([[0.0], np.logspace(-1, 3, 60)])
cases = {
 "tour flow": lambda b: ln.gradient_flow(weights, X, y, t_eval, record=("modes",), backend=b),
 "tour gd": lambda b: ln.gradient_descent(weights, X, y, [0, 50, 100, 200], lr=0.05, record=("modes",), backend=b),
}
X2, y2, _ = ln.scalar_teacher(40, 10, 2.0)
w2 = ln.init_network((10, 20, 20, 1), 0.1)
cases["auto 1e8"] = lambda b: ln.gradient_flow(w2, X2, y2, [0.0, 1e8], method="auto", backend=b)
rng = np.random.default_rng(0)
Xm = rng.standard_normal((200, 10)); wm = ln.init_network((10, 64, 64, 1), 1.0, seed=1)
ym = np.maximum(Xm @ rng.standard_normal((10, 1)), 0)
for act in ("relu", "tanh"):
    cases[f"mlp {act} 10-64-64-1 t=10"] = (lambda a: lambda b: ln.gradient_flow(wm, Xm, ym, [0.0, 10.0], activation=a, backend=b, rtol=1e-6))(act)
only = sys.argv[1:]
for name, f in cases.items():
    if only and not any(o in name for o in only):
        continue
    f("numba")
    tb, rb = tm(lambda: f("numba"))
    tn, rn = tm(lambda: f("numpy"), 2)
    print(f"{name:28s} numba {tb*1e3:8.1f} ms  numpy {tn*1e3:8.1f} ms  ratio {tn/tb:6.1f}  nfev {rb.nfev}/{rn.nfev} backend {rb.backend}/{rn.backend}", flush=True)
