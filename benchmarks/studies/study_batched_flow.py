"""The ensemble's batched flow, measured: all B members of a small ReLU net advanced by one
compiled loop (``batched_flow_kernels.py`` here: each member its own time, step,
stepper and accept/reject, the stage evaluations of all members in one kernel with the
member axis innermost), against B serial ``gradient_flow`` calls, same run, alternating
rounds, one BLAS thread.

Problems (as ``bench_ensemble.py``): ``relu`` 10-16-1, P = 40 (the sweep's point, sigma
0.5, 20 output times up to 40) and ``relu_biases`` 5-32-1 with hidden biases, P = 50,
y = tanh(x_1), 10 output times up to 5; rtol 1e-6, atol 1e-9, the default method (its pair
and its low-order pair at kinks, read from ``methods.driver``).

Printed per problem: the best CPU time (one thread; other processes' load leaves it nearly
alone) of the B serial calls and of the batched flow (the losses at the outputs included),
their ratio; the evaluations (the members' sum, the largest member's, the batched loop's
rounds); each side split into its gradient evaluations (serial: evaluations times one call of
the model's compiled gradient, timed alone; batched: the rounds at each number of slots times
one call of the batched kernel on that many, timed alone) and the rest (the step control,
stage states, Python); the lockstep bound, B serial calls over the slowest member's call
(a loop whose rounds take each member's next evaluation is at least as long as its slowest
member: the bound of a batched kernel whose round costs one serial evaluation however many
members it holds).  Then a table of the batched kernel's time per member-evaluation at 4, 8
and 16 slots against one call of the serial gradient and the FLOP bound (the multiply-adds
of one member's gradient at this machine's float64 GEMM rate, ``problems.gemm_rate``).
Then the largest deviation of a member's parameters at the output times (units of ``rtol
max|theta|``) and losses (``rtol loss(0)``): batched against serial, and each against a
tight reference run (``--ref-rtol``).

Usage::

    python benchmarks/studies/study_batched_flow.py [--rounds 3] [--cases relu relu_biases]
        [--ref-rtol 1e-8 --ref-kink-rtol 1e-6]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
from threadpoolctl import threadpool_limits

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..")]

import batched_flow_kernels as MB  # noqa: E402
import bench_ensemble as be  # noqa: E402

import linearnets as ln  # noqa: E402
from linearnets.sim.flow import KINK_RTOL  # noqa: E402
from linearnets.sim.methods import base as mb  # noqa: E402
from linearnets.sim.methods.compiled import loop_control, tableau_args  # noqa: E402
from linearnets.sim.methods.driver import FALLBACK, auto_pair  # noqa: E402
from linearnets.sim.methods.tableaux import TABLEAUX  # noqa: E402
from linearnets.sim.models import get_model, parse_options  # noqa: E402

B = be.B
TOL = be.TOL


class Batched:
    """The batched flow of B members of one architecture on one data set (kinked MLP, MSE)."""

    def __init__(self, inits, X, y, t_eval, activation="relu", rtol=1e-6, atol=1e-9):
        options = parse_options(len(inits[0][0]), activation=activation)
        w0, b0 = inits[0]
        model = get_model("mlp").numba_model(w0, b0, options).prepare(X, y)
        self.models = model
        d = model._data
        self.Bn = len(inits)
        self.n = model.layout.size
        self.y0 = np.stack([model.layout.pack(list(w) + list(b or [])) for w, b in inits])
        self.t_eval = np.asarray(t_eval, dtype=np.float64)
        rows = [r for r, _ in model.shapes]
        hidden = rows[:-1]
        self.hoffs = np.concatenate(([0], np.cumsum(hidden)))[:-1].astype(np.int64)
        nh, P, C = int(sum(hidden)), model.P, model.Y.shape[1]
        Bn = self.Bn
        B4 = (Bn + 3) // 4 * 4
        self.B4 = B4
        f0 = np.zeros((P, C, B4))
        ap = float(options.activation_param or 0.0)
        self.data = (d[0], np.ascontiguousarray(d[0].T), d[1], f0, d[3], d[4], d[5], ap,
                     np.ones(B4))
        self.rows = MB.slot_rows(d[3])
        self.npat = P * nh
        self.work = (np.empty(self.n * B4), np.empty(self.n * B4), np.empty(P * nh * B4),
                     np.empty(P * nh * B4), np.empty(P * C * B4), np.empty(P * nh * B4),
                     np.empty(P * C * B4), np.empty(B4), np.zeros(B4, dtype=np.int64))
        pair = auto_pair(rtol, smooth=False)
        self.tab_obj, low_obj = TABLEAUX[pair], TABLEAUX[FALLBACK]
        self.tab = tableau_args(self.tab_obj, rtol)
        self.low = tableau_args(low_obj, max(KINK_RTOL, rtol))
        self.ctl = loop_control(mb.StepperOptions(rtol=rtol, atol=atol), False)
        self.rtol, self.atol = rtol, atol
        self.s = max(self.tab_obj.n_stages, low_obj.n_stages)
        self.pair = pair

    def eval(self, Y):
        """``(f, pattern (npat, B), loss)`` at the members' states ``Y`` (B, n)."""
        Ys, out, Hc, Dv, G1, G0, F, lossv, _ = self.work
        nb = Y.shape[0]
        S = (nb + 3) // 4 * 4
        Ys[:self.n * S] = 0.0
        Ys[self.rows[:, None] * S + np.arange(nb)] = Y.T
        MB.batched_rhs(Ys, out, S, self.data, Hc, Dv, G1, G0, F, lossv)
        f = out[self.rows[:, None] * S + np.arange(nb)].T.copy()
        return f, Dv[:self.npat * S] == 1.0, lossv[:nb].copy()

    def run(self):
        """``(states at the outputs (B, T, n), losses (B, T), mstats, rounds)``."""
        Bn, n = self.Bn, self.n
        y = self.y0.copy()
        f0, pat, _ = self.eval(y)
        h0 = np.empty(Bn)
        # the first step of each member as the serial loop (one more evaluation, batched)
        sc = self.atol + np.abs(y) * self.rtol
        d0 = np.sqrt(np.mean((y / sc) ** 2, axis=1))
        d1 = np.sqrt(np.mean((f0 / sc) ** 2, axis=1))
        hh = np.where((d0 < 1e-5) | (d1 < 1e-5), 1e-6, 0.01 * d0 / d1)
        hh = np.minimum(hh, self.t_eval[-1])
        f1, _, _ = self.eval(y + hh[:, None] * f0)
        for b in range(Bn):
            h0[b] = mb.select_initial_step(lambda v, dt, b=b: f1[b], y[b], f0[b],
                                           float(self.t_eval[-1]), self.tab_obj.error_order,
                                           self.rtol, self.atol)
        K = np.empty((Bn, self.s + 1, n))
        K[:, 0] = f0
        T = self.t_eval.size
        out_y = np.full((Bn, T, n), np.nan)
        mstate = np.zeros((Bn, 8))
        mstats = np.zeros((Bn, 6), dtype=np.int64)
        self.shist = np.zeros(self.B4 + 1, dtype=np.int64)
        rounds = MB.batched_flow(y, K, np.empty_like(y), self.t_eval, h0, out_y, mstate, mstats,
                                 1_000_000, self.tab, self.low, self.ctl, pat, self.data,
                                 self.work, self.rows, self.shist)
        losses = np.empty((Bn, T))
        for k in range(T):
            losses[:, k] = self.eval(out_y[:, k])[2]
        self.data[3][...] = 0.0               # the slots' f0 and alpha, shuffled by the run
        self.data[8][...] = 1.0
        return out_y, losses, mstats, rounds

    def eval_time(self, S, reps=100):
        """CPU seconds per call of the evaluation kernel on ``S`` members (best of 5)."""
        Ys, out, Hc, Dv, G1, G0, F, lossv, _ = self.work
        nb, S = S, (S + 3) // 4 * 4
        Ys[:self.n * S] = 0.0
        Ys[self.rows[:, None] * S + np.arange(nb)] = self.y0[:nb].T
        best = np.inf
        for _ in range(5):
            t0 = time.thread_time()
            for _ in range(reps):
                MB.batched_rhs(Ys, out, S, self.data, Hc, Dv, G1, G0, F, lossv)
            best = min(best, (time.thread_time() - t0) / reps)
        return best


def _params(r, lay, T):
    """A serial run's parameters at its output times (T, n), packed as the model's state."""
    wt = [np.asarray(a) for a in r.weights_t] + [np.asarray(a) for a in (r.biases_t or [])]
    return np.stack([lay.pack([a[k] for a in wt]) for k in range(T)])


def one(name, rounds, ref_rtol, ref_kink):
    X, y, t, inits, kw = be.case(name)
    rtol = TOL["rtol"]
    bat = Batched(inits, X, y, t, rtol=rtol, atol=TOL["atol"])
    lay, T = bat.models.layout, t.size
    # accuracy: each member's serial run and a tight reference, the parameters at every output
    serial_r = [ln.gradient_flow(w, X, y, t, biases=b, backend="numba", record=("weights",),
                                 **kw, **TOL) for w, b in inits]
    ref_r = [ln.gradient_flow(w, X, y, t, biases=b, backend="numba", record=("weights",),
                              rtol=ref_rtol, atol=1e-14, kink_rtol=ref_kink, **kw)
             for w, b in inits] if ref_rtol else serial_r
    out_y, losses, mstats, nround = bat.run()
    # rows: batched - serial, serial - reference, batched - reference; columns: params, loss
    dev = np.zeros((3, 2))
    for b in range(len(inits)):
        st, rf = _params(serial_r[b], lay, T), _params(ref_r[b], lay, T)
        scale, l0 = rtol * np.max(np.abs(st)), rtol * serial_r[b].loss[0]
        for i, (u, v, lu, lv) in enumerate(((out_y[b], st, losses[b], serial_r[b].loss),
                                            (st, rf, serial_r[b].loss, ref_r[b].loss),
                                            (out_y[b], rf, losses[b], ref_r[b].loss))):
            if i == 0 or ref_r[b].success:   # a reference that spent its steps: left out
                dev[i] = np.fmax(dev[i], [np.max(np.abs(u - v)) / scale,
                                          np.max(np.abs(lu - lv)) / l0])
    failed = sum(not r.success for r in ref_r)
    if failed:
        print(f"({name}: {failed} of the {len(inits)} reference runs spent their steps and "
              "are not compared)")
    same = int(np.sum(np.array([r.nfev for r in serial_r]) == mstats[:, 1]))

    def serial():
        """CPU seconds of each member's serial call."""
        out = []
        for w, b in inits:
            t0 = time.process_time()
            ln.gradient_flow(w, X, y, t, biases=b, backend="numba", **kw, **TOL)
            out.append(time.process_time() - t0)
        return np.array(out)
    serial()
    bat.run()
    tm, tb = np.full(len(inits), np.inf), np.inf
    for _ in range(rounds):
        tm = np.minimum(tm, serial())
        t0 = time.process_time()
        bat.run()
        tb = min(tb, time.process_time() - t0)
    ts = float(tm.sum())
    fev = int(mstats[:, 1].sum())
    # the batched time in its evaluation kernel: the rounds at each number of slots, each
    # timed alone; the serial call's in the model's compiled gradient, timed alone
    te = sum(int(c) * bat.eval_time(S) for S, c in enumerate(bat.shist) if c and S)
    tr = serial_rhs_time(bat)
    print(f"| {name} ({bat.pair}) | {ts * 1e3:.0f} | {tb * 1e3:.0f} | {ts / tb:.2f}x | "
          f"{fev} / {int(mstats[:, 1].max())} / {nround} | {fev * tr * 1e3:.0f} "
          f"({fev * tr / ts:.0%}) | {te * 1e3:.0f} ({te / tb:.0%}) | {(ts - fev * tr) * 1e3:.0f} "
          f"| {(tb - te) * 1e3:.0f} | {same}/{B} | {ts / tm.max():.2f}x |", flush=True)
    return name, dev


def serial_rhs_time(bat, reps=300):
    """CPU seconds of one call of the model's compiled gradient (``_mlp_kernels.mlp_rhs``;
    best of 5)."""
    from linearnets.sim.models._mlp_kernels import mlp_rhs
    y, out = bat.y0[0].copy(), np.empty(bat.n)
    d = bat.models._data
    mlp_rhs(y, out, d)
    best = np.inf
    for _ in range(5):
        t0 = time.thread_time()
        for _ in range(reps):
            mlp_rhs(y, out, d)
        best = min(best, (time.thread_time() - t0) / reps)
    return best


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--cases", nargs="+", default=["relu", "relu_biases"])
    ap.add_argument("--ref-rtol", type=float, default=0.0,
                    help="rtol of reference runs (default none: batched against serial only)")
    ap.add_argument("--ref-kink-rtol", type=float, default=1e-5, help="their kink_rtol")
    args = ap.parse_args(argv)
    with threadpool_limits(1):
        print(f"load average {os.getloadavg()[0]:.2f}; B = {B}, one BLAS thread, rtol "
              f"{TOL['rtol']}, atol {TOL['atol']}; CPU time, best of {args.rounds} alternating "
              "rounds")
        print("| problem (pair) | serial ms | batched ms | speed-up | evaluations: sum / largest "
              "member / batched rounds | serial: in the gradient, ms (share) | batched: in the "
              "evaluation kernel, ms (share) | serial: the rest, ms | batched: the rest, ms | "
              "members with the serial evaluations | lockstep bound |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        devs = [one(name, args.rounds, args.ref_rtol, args.ref_kink_rtol) for name in args.cases]
        from problems import gemm_rate
        rate = gemm_rate()
        print(f"\nper member-evaluation, us CPU (GEMM {rate / 1e9:.1f} GFLOP/s, one thread)")
        print("| problem | serial gradient | batched, 4 slots | 8 slots | 16 slots | FLOP bound |")
        print("|---|---|---|---|---|---|")
        for name in args.cases:
            X, y, t, inits, kw = be.case(name)
            bat = Batched(inits, X, y, t)
            D, N = X.shape[1], bat.models.shapes[0][0]
            macs = X.shape[0] * (3 * N * D + 3 * N)
            print(f"| {name} | {serial_rhs_time(bat) * 1e6:.2f} | " + " | ".join(
                f"{bat.eval_time(S) / S * 1e6:.2f}" for S in (4, 8, 16))
                + f" | {2 * macs / rate * 1e6:.2f} |", flush=True)
        print(f"\nlargest deviation over the members and output times, parameters in units of "
              f"rtol max|theta|, losses in units of rtol loss(0) (reference: rtol "
              f"{args.ref_rtol:g}, kink_rtol {args.ref_kink_rtol:g}; none: the serial run)")
        print("| problem | batched - serial | serial - reference | batched - reference |")
        print("|---|---|---|---|")
        for name, dev in devs:
            print(f"| {name} | " + " | ".join(f"{d[0]:.2g} / {d[1]:.2g}" for d in dev) + " |")


if __name__ == "__main__":
    main()
