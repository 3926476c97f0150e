"""Speed of the exact mode dynamics against the ODE solve a user would otherwise write.

For depths 2, 4, 8: evaluate c(t) of one mode (s = 1, c0 = 1e-6, eta = 1) on N time
points spanning the plateau, the escape and the convergence (0 to 3 half-times), with

* ``linearnets.mode_strength`` (compiled kernel for L >= 3; also the numpy reference), and
* ``scipy.integrate.solve_ivp`` on dc/dt = eta L c^(2-2/L) (s - c) with ``t_eval``
  (DOP853, rtol 1e-12, atol 1e-15 * s: as tight as it usefully goes),

both timed in the same run (best of a few repeats), and print evaluations per second,
their ratio, and the largest relative difference between the two curves, next to the
condition number t |dc/dt| / c that bounds how well any method can agree.  solve_ivp
cannot reach the closed form's accuracy (~1e-15; it stops near 1e-9 here), so "equal
accuracy" favours the baseline.

Second table: N different modes (a sweep over c0), where the ODE needs one solve per
mode; its time is measured on a random sample of modes and scaled to N.

Run:  python3 benchmarks/bench_closed_forms.py [--n 1000000] [--repeat 3]
      python3 benchmarks/bench_closed_forms.py --accuracy   (errors against mpmath, solve_ivp)
"""
import argparse
import pathlib
import sys
import time

import numpy as np
from scipy.integrate import solve_ivp

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import linearnets as ln  # noqa: E402
from linearnets.theory import dynamics as dyn  # noqa: E402


def best_time(fn, repeat):
    best = np.inf
    out = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def ivp_curve(t, s, c0, L, eta):
    def rhs(_, c):
        return eta * L * c ** (2.0 - 2.0 / L) * (s - c)
    sol = solve_ivp(rhs, (0.0, t[-1]), [c0], method="DOP853", t_eval=t, rtol=1e-12,
                    atol=1e-15 * s)
    assert sol.success, sol.message
    return sol.y[0]


def rate(c, s, L, eta=1.0):
    """dc/dt = eta L c^(2-2/L) (s - c)."""
    return eta * L * c ** (2.0 - 2.0 / L) * (s - c)


def kappa_c(t, c, s, L, eta=1.0):
    """Condition number of c(t) with respect to t: t |dc/dt| / c."""
    return t * np.abs(rate(c, s, L, eta)) / c


def kappa_t(t, c, s, L, eta=1.0):
    """Condition number of t(c) with respect to c: c / (t |dc/dt|)."""
    return c / (t * abs(rate(c, s, L, eta)))


def ivp_log_curve(t_eval, s, c0, L, eta):
    """c(t) from d(log c)/dt = eta L c^(1-2/L) (s - c), DOP853 at rtol 1e-13."""
    def f(_, u):
        c = np.exp(u)
        return eta * L * c ** (1.0 - 2.0 / L) * (s - c)
    sol = solve_ivp(f, (0.0, t_eval[-1]), [np.log(c0)], method="DOP853", t_eval=t_eval,
                    rtol=1e-13, atol=1e-14)
    assert sol.success, sol.message
    return np.exp(sol.y[0])


def accuracy_table():
    """Max relative errors per depth against mpmath quadrature (30 digits) and solve_ivp."""
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "theory"))
    from _reference_modes import t_ref   # mpmath: the accuracy table's reference only

    modes = [(1.0, 1e-3), (2.5, 0.4), (1e-3, 1e-12), (1.0, 0.999), (1.0, 1.001), (0.5, 3.0),
             (3.0, 1e4)]
    fracs = [1e-6, 0.1, 0.5, 0.9, 0.999, 1 - 1e-7]
    print("Against mpmath quadrature of t(c) (30 digits), c = c0 + f (s - c0), "
          f"(s, c0) in {modes}, f in {fracs}:")
    print("  mode_time: max rel error where t is well conditioned (c/(t|dc/dt|) < 10)")
    print("  mode_strength: max rel error in c where kappa = t|dc/dt|/c < 10, and max backward")
    print("  error |t' - t|/t (c(t') == computed c, by quadrature) where kappa >= 10")
    print("  solve_ivp: max rel difference to DOP853 (rtol 1e-13) in log c, 3 modes x 300 times")
    print(f"{'depth':>5} {'mode_time':>10} {'c fwd':>10} {'c backward':>11} {'vs ivp':>10}")
    for L in (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 20):
        et = ec = eb = 0.0
        for s, c0 in modes:
            for f in fracs:
                c = c0 + (s - c0) * f
                t = float(t_ref(c, s, c0, L))
                if kappa_t(t, c, s, L) < 10:
                    et = max(et, abs(float(ln.mode_time(c, s, c0, depth=L)) - t) / t)
                cm = float(ln.mode_strength(t, s, c0, depth=L))
                if kappa_c(t, c, s, L) < 10:
                    ec = max(ec, abs(cm - c) / c)
                elif cm not in (s, c0):
                    eb = max(eb, abs(float(t_ref(cm, s, c0, L)) - t) / t)
        ei = 0.0
        for s, c0, eta in [(1.0, 1e-4, 1.0), (3.0, 0.5, 0.3), (0.7, 5.0, 2.0)]:
            t_end = (4.0 * float(ln.plateau_time(s, min(c0, s / 4), depth=L, eta=eta))
                     + 40.0 / (eta * s))
            tt = np.concatenate([[0.0], np.logspace(-6, np.log10(t_end), 300)])
            ref = ivp_log_curve(tt, s, c0, L, eta)
            ei = max(ei, np.max(np.abs(ln.mode_strength(tt, s, c0, depth=L, eta=eta) - ref) / ref))
        print(f"{L:>5} {et:10.1e} {ec:10.1e} {eb:11.1e} {ei:10.1e}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="time points per curve")
    ap.add_argument("--repeat", type=int, default=3, help="repeats (best time is kept)")
    ap.add_argument("--sample", type=int, default=300,
                    help="modes the per-mode ODE baseline is timed on (many-mode case)")
    ap.add_argument("--accuracy", action="store_true",
                    help="print the accuracy table against mpmath and solve_ivp instead")
    args = ap.parse_args(argv)
    if args.accuracy:
        accuracy_table()
        return
    s, c0, eta = 1.0, 1e-6, 1.0
    print(f"one mode, s = {s}, c0 = {c0}, eta = {eta}, N = {args.n} time points in [0, 3 t_half]")
    head = (f"{'depth':>5} {'closed form /s':>15} {'numpy ref /s':>13} {'solve_ivp /s':>13} "
            f"{'speed-up':>9} {'max rel diff':>13} {'max kappa':>10}")
    print(head)
    print("-" * len(head))
    for L in (2, 4, 8):
        t = np.linspace(0.0, 3.0 * float(ln.half_time(s, c0, depth=L, eta=eta)), args.n)
        ln.mode_strength(t[:16], s, c0, depth=L, eta=eta)          # compile / warm up
        tc, c = best_time(lambda: ln.mode_strength(t, s, c0, depth=L, eta=eta), args.repeat)
        if L >= 3:
            T = t * eta * s ** (2 - 2 / L)
            tn, _ = best_time(lambda: dyn._strength_core(T, np.full_like(t, s),
                                                         np.full_like(t, c0), L,
                                                         backend="numpy"), 1)
            numpy_rate = f"{args.n / tn:13.3g}"
        else:
            numpy_rate = f"{'(same)':>13}"
        ti, ref = best_time(lambda: ivp_curve(t, s, c0, L, eta), 1)
        rel = np.abs(c - ref) / ref
        kappa = t * eta * L * c ** (1 - 2 / L) * np.abs(s - c)
        print(f"{L:>5} {args.n / tc:15.3g} {numpy_rate} {args.n / ti:13.3g} {ti / tc:8.3g}x "
              f"{rel.max():13.2e} {kappa.max():10.2g}")
        print(f"      closed form {tc:.3f} s for {args.n} points; solve_ivp {ti:.2f} s; "
              f"max rel diff where kappa < 10: {rel[kappa < 10].max():.2e}")

    # Many modes: every point its own (c0, t), as in a sweep over initial scales.  The ODE
    # baseline needs one solve per mode; it is timed on a sample and scaled to N points.
    rng = np.random.default_rng(0)
    print()
    print(f"N = {args.n} modes, c0 log-uniform in [1e-8, 1e-2] s, t uniform in [0, 3 t_half(c0)]; "
          f"solve_ivp timed on {args.sample} of them")
    print(head)
    print("-" * len(head))
    for L in (2, 4, 8):
        c0s = s * 10.0 ** rng.uniform(-8, -2, args.n)
        ts = rng.uniform(0, 3, args.n) * ln.half_time(s, c0s, depth=L, eta=eta)
        ln.mode_strength(ts[:16], s, c0s[:16], depth=L, eta=eta)
        tc, c = best_time(lambda: ln.mode_strength(ts, s, c0s, depth=L, eta=eta), args.repeat)
        if L >= 3:
            T = ts * eta * s ** (2 - 2 / L)
            tn, _ = best_time(lambda: dyn._strength_core(T, np.full_like(ts, s), c0s, L,
                                                         backend="numpy"), 1)
            numpy_rate = f"{args.n / tn:13.3g}"
        else:
            numpy_rate = f"{'(same)':>13}"
        idx = rng.choice(args.n, args.sample, replace=False)
        t0 = time.perf_counter()
        ref = np.array([ivp_curve(np.array([0.0, ts[i]]), s, c0s[i], L, eta)[-1] for i in idx])
        ti = (time.perf_counter() - t0) * args.n / args.sample
        rel = np.abs(c[idx] - ref) / ref
        kappa = ts[idx] * eta * L * c[idx] ** (1 - 2 / L) * np.abs(s - c[idx])
        print(f"{L:>5} {args.n / tc:15.3g} {numpy_rate} {args.n / ti:13.3g} {ti / tc:8.3g}x "
              f"{rel.max():13.2e} {kappa.max():10.2g}")


if __name__ == "__main__":
    main()
