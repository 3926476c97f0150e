"""The first call of each model / method pair in a fresh process on an empty kernel cache (the default
``LINEARNETS_JIT``): seconds, kernels compiled in the process, and the backend that ran.

    LINEARNETS_CACHE_DIR=$(mktemp -d) python benchmarks/studies/study_first_calls.py [substring ...]

It starts the background warm-up as a user's first call would (docs/first_run.md); the diagonal
model is left out (it runs on numpy only).
"""
import time
import sys
t00 = time.perf_counter()
import numpy as np  # noqa: E402  (the import is timed)
import linearnets as ln  # noqa: E402
from linearnets import _numba_cache as C  # noqa: E402
print(f"import {time.perf_counter()-t00:.2f} s", flush=True)
X, y, beta = ln.scalar_teacher(40, 10, 2.0, seed=0)
w = ln.init_network((10, 20, 20, 1), 0.1, seed=0)
rng = np.random.default_rng(0)
Xm = rng.standard_normal((200, 10)); wm = ln.init_network((10, 64, 64, 1), 1.0, seed=1)
ym = np.maximum(Xm @ rng.standard_normal((10, 1)), 0)
calls = []
for m in ("RK45", "DOP853", "SSPRK104", "ROS34PW2", "auto"):
    calls.append((f"linear {m}", lambda m=m: ln.gradient_flow(w, X, y, [0.0, 10.0, 100.0], method=m)))
for act in ("relu", "tanh"):
    for m in ("RK45", "DOP853", "SSPRK104", "ROS34PW2", "auto"):
        calls.append((f"mlp {act} {m}", lambda m=m, act=act: ln.gradient_flow(wm, Xm, ym, [0.0, 1.0], method=m, activation=act, rtol=1e-6)))
calls.append(("ensemble linear", lambda: ln.gradient_flow_ensemble([w, ln.init_network((10, 20, 20, 1), 0.1, seed=1)], X, y, [0.0, 10.0])))
calls.append(("ensemble relu", lambda: ln.gradient_flow_ensemble([wm, ln.init_network((10, 64, 64, 1), 1.0, seed=2)], Xm, ym, [0.0, 1.0], activation="relu")))
calls.append(("descent linear", lambda: ln.gradient_descent(w, X, y, [0, 100], 0.05)))
calls.append(("descent tanh", lambda: ln.gradient_descent(wm, Xm, ym, [0, 100], 0.01, activation="tanh")))
calls.append(("mode_strength", lambda: ln.mode_strength(np.logspace(-2, 6, 50), 1.0, 1e-6, depth=4)))
calls.append(("infinite width tanh", lambda: ln.infinite_width_kernels(Xm[:20], Xm[:20], 2, activation="tanh")))
only = sys.argv[1:]
for name, f in calls:
    if only and not any(o in name for o in only):
        continue
    c0 = C.compile_count(); t0 = time.perf_counter()
    try:
        r = f(); b = getattr(r, "backend", "-")
    except Exception as e:
        b = f"ERROR {type(e).__name__}: {e}"
    print(f"{name:24s} {time.perf_counter()-t0:7.2f} s  compiled {C.compile_count()-c0:3d}  backend {b}", flush=True)
