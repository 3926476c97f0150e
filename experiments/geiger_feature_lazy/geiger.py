"""Experiment 1: feature vs lazy training (Geiger, Spigler, Jacot & Wyart 2019), on digits parity.

One point trains their fully connected network (``geiger_parameterisation``:
NTK parameterisation, Softplus with beta 5, ``n_hidden`` hidden layers of width
``h``, centred output ``F = alpha (f - f_0)``, soft hinge with beta_h 20, the
paper's clock: loss ``1/(alpha^2 P) sum l(F, y)``) by gradient flow until every
training margin ``y F >= 1`` (``stop="margin"``), with
``alpha = alpha_sqrt_h / sqrt(h)``, and returns

- ``drift``: the kernel drift ``|Theta_T - Theta_0|_F / |Theta_0|_F`` of the
  empirical NTK on ``n_kernel`` held-out (test) points, ``T`` the stop time;
- ``test_err``: the test error of ``sign F``;
- ``t_stop``: the time at which every margin reached 1;
- ``t1``: the first time at which the drift on the held-out points reaches
  ``T1_DRIFT`` = 1 (an order-one change of the kernel; log-log interpolation
  between output times), NaN when it never does (lazy points). Geiger et al.:
  in the feature regime the dynamics stay close to linear until
  ``t1 ~ alpha sqrt(h)``, where the kernel starts to move;
- ``F_test``: F on the test points (for Var F across seeds, ~ 1/h);
- ``lazy_dist``: the distance ‖F_test − F_test^lazy‖/‖F_test^lazy‖ at the stop from the
  linear model with the infinite-width NTK under the same soft hinge (``lazy_outputs``);
  measured at alpha sqrt(h) = 1e3, seed 0: 0.61 at h = 16, 0.27 at h = 64 (it falls with h
  at the lazy end, about as h^-1/2);
- ``nsteps``, ``cpu_s`` (CPU seconds of the point, for sizing the grid).

Data: scikit-learn's bundled ``load_digits`` (no download), labels the parity
of the digit (+1 even, -1 odd), standardised, projected on the top 10
principal components of the training set (their fully connected runs), split
once (a fixed permutation) into ``n_train`` training and ``n_test`` test points.

The claims checked by :func:`table` (the paper's Sec. on kernel evolution):
the drift collapses against ``alpha sqrt(h)`` across widths; in the lazy regime
``drift ~ 1/(alpha sqrt(h))`` (slope -1, NTK fluctuations); in the feature regime
``drift ~ (alpha sqrt(h))^{-a}`` with ``a = 2/(1 + 1/L)`` from their scaling
argument (L hidden layers: 1.5 for L = 3), measured by them as ``a ~ 1.7`` for
L = 5 and ``a ~ 1.25`` for L = 2; ``Var F ~ 1/h`` in both regimes; ``t1 ~ alpha sqrt(h)``.
"""
from __future__ import annotations

import math
import time

import numpy as np

#: Drift on the held-out points that defines t1 (an order-one relative change of the kernel).
T1_DRIFT = 1.0
#: Output times: log-spaced from T_MIN to t_max, OUT_PER_DECADE per decade.
T_MIN = 1e-7
OUT_PER_DECADE = 4
#: alpha sqrt(h) at or above LAZY_MIN are fitted for the lazy slope, at or below
#: FEATURE_MAX for the feature-regime exponent a and the t1 scaling (on digits parity the
#: drift falls through 1 near alpha sqrt(h) ~ 30: at 10 it is still ~3).
LAZY_MIN = 100.0
FEATURE_MAX = 0.1

_DATA = {}


def digits_parity(n_train, n_test, pca=10, split_seed=0):
    """``(Xtr, ytr, Xte, yte)``: standardised (PCA-``pca``) digits, labels +-1 by parity."""
    key = (n_train, n_test, pca, split_seed)
    if key not in _DATA:
        import linearnets as ln
        _DATA[key] = ln.load_digits(((0, 2, 4, 6, 8), (1, 3, 5, 7, 9)), n_train, n_test,
                                    pca=pca or None, seed=split_seed)
    return _DATA[key]


def lazy_outputs(p, t, Xtr, ytr, Xte, rtol=1e-9):
    """F on ``Xte`` at time ``t`` of the linear model with the infinite-width NTK (the lazy end).

    The network of ``geiger_parameterisation`` (W ~ N(0, 1), multipliers sigma_l/sqrt(N),
    sigma_1 = sigma, sigma_l = sigma c) is the "ntk" one of
    ``linearnets.theory.infinite_width.infinite_width_layer_kernels`` with weight scales sigma_l,
    and its NTK is sum_l sigma_l^2 W_l (the multiplier carries sigma_l into every gradient).
    Centred (F_0 = 0) and on the model's loss (1/(alpha^2 P)) sum l(F, y) with the soft hinge,
    the linear model moves as dF/dt = -(eta/P) K_f(x, X) l'(F(X), y); integrated to ``t``.
    """
    from scipy.integrate import solve_ivp
    from linearnets.theory.infinite_width import infinite_width_layer_kernels

    L = len(p.weights)
    fan = [w.shape[1] for w in p.weights]
    sig = np.array([m * math.sqrt(n) for m, n in zip(p.multipliers, fan)])
    Xall = np.vstack([Xtr, Xte])
    _, Wp, _ = infinite_width_layer_kernels(Xall, Xall, L, p.activation, sigmas=sig)
    K = np.tensordot(sig ** 2, Wp, axes=1)[:, :len(Xtr)]
    P = len(Xtr)
    beta = p.loss[1]

    def rhs(_, F):
        u = beta * (1.0 - ytr * F[:P])
        return (p.eta / P) * K @ (ytr * 0.5 * (1.0 + np.tanh(0.5 * u)))

    def jac(_, F):
        # d rhs / dF[:P] = -(eta beta / P) K diag(y^2 s'(u)), s the logistic; 0 for the test part
        s = 0.5 * (1.0 + np.tanh(0.5 * beta * (1.0 - ytr * F[:P])))
        J = np.zeros((len(F), len(F)))
        J[:, :P] = -(p.eta * beta / P) * K * (ytr * ytr * s * (1.0 - s))[None, :]
        return J

    sol = solve_ivp(rhs, (0.0, float(t)), np.zeros(len(Xall)), method="LSODA", jac=jac, rtol=rtol,
                    atol=1e-12)
    return sol.y[P:, -1]


def point(alpha_sqrt_h, h, seed, n_hidden=3, n_train=200, n_test=200, n_kernel=64, pca=10,
          t_max=1e8, rtol=1e-6, atol=1e-9):
    """One (alpha sqrt(h), h, seed) point of the feature/lazy diagram (see the module docstring)."""
    import linearnets as ln
    from linearnets.parameterisations import geiger_parameterisation

    cpu0 = time.process_time()
    Xtr, ytr, Xte, yte = digits_parity(n_train, n_test, pca)
    alpha = float(alpha_sqrt_h) / math.sqrt(h)
    sizes = (Xtr.shape[1],) + (int(h),) * n_hidden + (1,)
    p = geiger_parameterisation(sizes, alpha, seed=seed)
    n_out = int(round(OUT_PER_DECADE * math.log10(t_max / T_MIN))) + 1
    t = np.geomspace(T_MIN, t_max, n_out)
    tr = ln.gradient_flow(p.weights, Xtr, ytr, t, rtol=rtol, atol=atol, stop="margin",
                          record=("weights",), **p.flow_kwargs())
    if tr.t_stop is None:
        raise RuntimeError(f"margins not all >= 1 by t = {t_max:g}: {tr.message}")
    F_test = p.forward(Xte, weights=list(tr.weights))[:, 0]     # alpha (f - f_0), centred
    F_lazy = lazy_outputs(p, tr.t_stop, Xtr, ytr, Xte)
    lazy_dist = float(np.linalg.norm(F_test - F_lazy) / np.linalg.norm(F_lazy))
    Xk = Xte[:n_kernel]
    kw = p.ntk_kwargs()

    def ntk(ws):
        return np.asarray(ln.empirical_ntk(list(ws), Xk, Xk, **kw))

    K0 = ntk(p.weights)
    n0 = np.linalg.norm(K0)
    drift = float(np.linalg.norm(ntk(tr.weights) - K0) / n0)
    t1 = math.nan
    if drift >= T1_DRIFT:
        # the drift at the output times before the stop (later outputs hold the stopped state),
        # up to its first crossing of T1_DRIFT; the stop time itself closes the series
        ts, ds = [], []
        for k in np.flatnonzero(t < tr.t_stop):
            ds.append(np.linalg.norm(ntk([w[k] for w in tr.weights_t]) - K0) / n0)
            ts.append(t[k])
            if ds[-1] >= T1_DRIFT:
                break
        else:
            ts.append(tr.t_stop)
            ds.append(drift)
        t1 = ln.regimes.crossing_time(ts, ds, T1_DRIFT, log=True)
    return dict(drift=drift, lazy_dist=lazy_dist, test_err=float(np.mean(np.sign(F_test) != yte)),
                t_stop=float(tr.t_stop), t1=t1, F_test=F_test, nsteps=float(tr.nsteps),
                cpu_s=time.process_time() - cpu0)


def _slope(x, y):
    """Least-squares slope of log y against log x (NaN with fewer than 2 distinct finite x)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    if np.unique(x[ok]).size < 2:
        return math.nan
    return float(np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)[0])


def _geo_mean(s):
    v = np.asarray(s, dtype=float)
    v = v[np.isfinite(v) & (v > 0)]
    return float(np.exp(np.mean(np.log(v)))) if v.size else math.nan


def _f_stack(sub):
    """F on the test points of the seeds of ``sub``, (n_seeds, n_test)."""
    return np.stack([np.asarray(v, dtype=float) for v in sub["F_test"] if v is not None])


def _var_f(sub):
    """Var F across seeds, averaged over the test points (NaN with fewer than 2 seeds)."""
    import linearnets as ln
    F = _f_stack(sub)
    return ln.output_variance(F) if len(F) > 1 else math.nan


def var_slopes(done):
    """``{alpha sqrt(h): (slope, stderr)}``: log Var F against log h at each alpha sqrt(h)
    done at every width with >= 3 seeds (``ln.variance_slope``, jackknife over seeds)."""
    import linearnets as ln
    widths = sorted({int(v) for v in done.index.get_level_values("h")})
    out = {}
    if len(widths) < 2:
        return out
    for a in sorted({float(v) for v in done.index.get_level_values("alpha_sqrt_h")}):
        sel = done[done.index.get_level_values("alpha_sqrt_h") == a]
        Fs = []
        for h in widths:
            sub = sel[sel.index.get_level_values("h") == h]
            if len(sub) < 3:
                break
            Fs.append(_f_stack(sub))
        else:
            r = ln.variance_slope(widths, Fs)
            out[a] = (r["slope"], r["stderr"])
    return out


def table(df):
    """The measured claims, ``(per_width, overall)``.

    ``per_width``: one dict per h with the lazy slope of the drift against alpha sqrt(h)
    (fit over alpha sqrt(h) >= LAZY_MIN; paper -1), the feature-regime exponent ``a``
    (``drift ~ (alpha sqrt(h))^{-a}``, fit over alpha sqrt(h) <= FEATURE_MAX), the slope of
    t1 against alpha sqrt(h) there (paper +1), the test error at both ends and Var F at
    both ends.  Drift and t1 are geometric means over seeds.  ``overall``: the slopes of
    log Var F against log h at both ends (paper -1) and, with ``var_slopes``, at every
    alpha sqrt(h) with its standard error (:func:`var_slopes`), the collapse (the largest spread,
    in decades, of the drift across widths at one alpha sqrt(h), against the drift's
    range over the grid) and the exponents fitted on all widths together.
    """
    done = df[df["status"] == "done"]
    widths = sorted({int(v) for v in done.index.get_level_values("h")})
    rows, curves = [], {}
    for h in widths:
        sub = done.xs(h, level="h")
        g = sub.groupby(level="alpha_sqrt_h")
        a = np.array(sorted(g.groups), dtype=float)
        d = np.array([_geo_mean(g.get_group(v)["drift"]) for v in a])
        t1 = np.array([_geo_mean(g.get_group(v)["t1"]) for v in a])
        err = np.array([float(g.get_group(v)["test_err"].mean()) for v in a])
        curves[h] = (a, d, t1)
        lazy, feat = a >= LAZY_MIN, a <= FEATURE_MAX
        ld = _geo_mean(g.get_group(a[-1])["lazy_dist"]) if "lazy_dist" in sub else math.nan
        rows.append(dict(lazy_dist=ld,
            h=h, lazy_slope=_slope(a[lazy], d[lazy]), a_feature=-_slope(a[feat], d[feat]),
            t1_slope=_slope(a[feat], t1[feat]), err_feature=float(err[0]), err_lazy=float(err[-1]),
            var_F_feature=_var_f(g.get_group(a[0])), var_F_lazy=_var_f(g.get_group(a[-1])),
            a_min=float(a[0]), a_max=float(a[-1])))
    overall = {}
    if rows:
        hs = np.array([r["h"] for r in rows], dtype=float)
        overall["var_slope_lazy"] = _slope(hs, [r["var_F_lazy"] for r in rows])
        overall["var_slope_feature"] = _slope(hs, [r["var_F_feature"] for r in rows])
        overall["var_slopes"] = var_slopes(done)
        common = sorted(set.intersection(*(set(curves[h][0].tolist()) for h in widths)))
        spread = {"all": 0.0, "feature": 0.0, "lazy": 0.0}
        logs = []
        for v in common:
            ld = [math.log10(curves[h][1][list(curves[h][0]).index(v)]) for h in widths]
            for k, inside in (("all", True), ("feature", v <= FEATURE_MAX), ("lazy", v >= LAZY_MIN)):
                if inside:
                    spread[k] = max(spread[k], max(ld) - min(ld))
            logs += ld
        many = len(widths) > 1
        overall["collapse_spread_decades"] = spread["all"] if many else math.nan
        overall["collapse_spread_feature"] = spread["feature"] if many else math.nan
        overall["collapse_spread_lazy"] = spread["lazy"] if many else math.nan
        overall["drift_range_decades"] = (max(logs) - min(logs)) if logs else math.nan
        # the same curves against alpha itself (log-log interpolation onto common alphas)
        if many:
            la = {h: np.log10(curves[h][0]) - 0.5 * math.log10(h) for h in widths}
            ldr = {h: np.log10(curves[h][1]) for h in widths}
            lo, hi = max(la[h].min() for h in widths), min(la[h].max() for h in widths)
            grid = np.linspace(lo, hi, 50) if hi > lo else np.array([])
            vals = np.array([np.interp(grid, la[h], ldr[h]) for h in widths])
            overall["spread_vs_alpha_decades"] = float(np.max(np.ptp(vals, axis=0))) if grid.size else math.nan
        else:
            overall["spread_vs_alpha_decades"] = math.nan
        aa = np.concatenate([curves[h][0] for h in widths])
        dd = np.concatenate([curves[h][1] for h in widths])
        tt = np.concatenate([curves[h][2] for h in widths])
        overall["lazy_slope_all"] = _slope(aa[aa >= LAZY_MIN], dd[aa >= LAZY_MIN])
        overall["a_feature_all"] = -_slope(aa[aa <= FEATURE_MAX], dd[aa <= FEATURE_MAX])
        overall["t1_slope_all"] = _slope(aa[aa <= FEATURE_MAX], tt[aa <= FEATURE_MAX])
    return rows, overall


def table_rows(df):
    """The rows of :func:`table` for the CSV beside the figure: one per width, then one with
    ``h = "all"`` holding the fits over all widths and the scalars of ``overall`` (Var F slopes,
    collapse spreads)."""
    rows, overall = table(df)
    if not rows:
        return rows
    last = dict(h="all", lazy_slope=overall["lazy_slope_all"], a_feature=overall["a_feature_all"],
                t1_slope=overall["t1_slope_all"])
    last.update({k: v for k, v in overall.items() if not k.endswith("_all") and np.ndim(v) == 0
                 and not isinstance(v, dict)})
    return rows + [last]


def n_hidden_of(df):
    return int(df.attrs.get("fixed", {}).get("n_hidden", 3)) if hasattr(df, "attrs") else 3


def plot(df, spec, out):
    """Drift (the collapse), test error and t1 against alpha sqrt(h), and Var F against h; the table."""
    import matplotlib.pyplot as plt

    done = df[df["status"] == "done"]
    rows, overall = table(df)
    L = n_hidden_of(df)
    a_pred = 2.0 / (1.0 + 1.0 / L)
    fig, ((a1, a2), (a3, a4)) = plt.subplots(2, 2, figsize=(9, 7))
    for h in sorted({int(v) for v in done.index.get_level_values("h")}):
        sub = done.xs(h, level="h")
        g = sub.groupby(level="alpha_sqrt_h")
        a = np.array(sorted(g.groups), dtype=float)
        a1.loglog(a, [_geo_mean(g.get_group(v)["drift"]) for v in a], "o-", ms=3, label=f"h={h}")
        a2.semilogx(a, [g.get_group(v)["test_err"].mean() for v in a], "o-", ms=3, label=f"h={h}")
        a3.loglog(a, [_geo_mean(g.get_group(v)["t1"]) for v in a], "o-", ms=3, label=f"t1, h={h}")
        a3.loglog(a, [_geo_mean(g.get_group(v)["t_stop"]) for v in a], "x:", ms=4, color=a3.lines[-1].get_color())
    if rows:
        a = np.unique(done.index.get_level_values("alpha_sqrt_h").to_numpy(dtype=float))
        d_all = done["drift"].to_numpy(dtype=float)
        lazy, feat = a[a >= LAZY_MIN], a[a <= FEATURE_MAX]
        if lazy.size:
            ref = np.exp(np.mean(np.log(d_all[done.index.get_level_values("alpha_sqrt_h") >= LAZY_MIN])))
            a1.loglog(lazy, ref * math.exp(np.mean(np.log(lazy))) / lazy, "k:", label="slope -1")
        if feat.size:
            sel = done.index.get_level_values("alpha_sqrt_h") <= FEATURE_MAX
            ref = np.exp(np.mean(np.log(d_all[sel])))
            a1.loglog(feat, ref * (feat / math.exp(np.mean(np.log(feat)))) ** (-a_pred), "k--",
                      label=f"slope -{a_pred:.2f} (2/(1+1/L))")
            tref = [r for r in done["t1"].to_numpy(dtype=float) if np.isfinite(r) and r > 0]
            if tref:
                a3.loglog(feat, math.exp(np.mean(np.log(tref))) * feat / math.exp(np.mean(np.log(feat))),
                          "k:", label="slope +1")
        hs = np.array([r["h"] for r in rows], dtype=float)
        a4.loglog(hs, [r["var_F_lazy"] for r in rows], "o-", label=f"lazy, alpha sqrt(h) = {rows[0]['a_max']:g}")
        a4.loglog(hs, [r["var_F_feature"] for r in rows], "s-", label=f"feature, alpha sqrt(h) = {rows[0]['a_min']:g}")
        v0 = rows[0]["var_F_lazy"]
        if np.isfinite(v0):
            a4.loglog(hs, v0 * hs[0] / hs, "k:", label="1/h")
    for ax in (a1, a2, a3):
        ax.set_xlabel(r"$\alpha\sqrt{h}$")
        ax.legend(fontsize=6)
    a1.set_ylabel(r"$\|\Theta_T-\Theta_0\| / \|\Theta_0\|$")
    a2.set_ylabel("test error")
    a3.set_ylabel(r"$t_1$ (drift = 1; o) and $t_{stop}$ (x)")
    a4.set_xlabel("h")
    a4.set_ylabel("Var F across seeds")
    a4.legend(fontsize=6)
    fig.suptitle(f"Geiger et al. 2019 on digits parity: Softplus, {L} hidden layers, soft hinge",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=80)
    plt.close(fig)
    print(f"L = {L} hidden layers; fits: lazy over alpha sqrt(h) >= {LAZY_MIN:g}, feature over "
          f"alpha sqrt(h) <= {FEATURE_MAX:g} (geometric means over seeds)")
    print("h    lazy slope (paper -1)  a (pred 2/(1+1/L) = %.2f; theirs 1.25 L=2, 1.7 L=5)  "
          "t1 slope (paper +1)  err feature  err lazy  Var F feature  Var F lazy" % a_pred)
    for r in rows:
        print(f"{r['h']:<4d} {r['lazy_slope']:+.3f}                 {r['a_feature']:.3f}"
              f"                                                 {r['t1_slope']:+.3f}"
              f"               {r['err_feature']:.3f}        {r['err_lazy']:.3f}     "
              f"{r['var_F_feature']:.3g}        {r['var_F_lazy']:.3g}")
    if rows:
        hs = [r["h"] for r in rows]
        print("distance of F_test from the infinite-width lazy prediction at the largest alpha sqrt(h): "
              + ", ".join(f"h={r['h']}: {r['lazy_dist']:.3g}" for r in rows)
              + f"; slope over h {_slope(hs, [r['lazy_dist'] for r in rows]):+.2f} (lazy end: falls as the"
              " kernel's finite-width fluctuation, h^-1/2)")
    if overall:
        print(f"all widths: lazy slope {overall['lazy_slope_all']:+.3f}, a {overall['a_feature_all']:.3f}, "
              f"t1 slope {overall['t1_slope_all']:+.3f}")
        print(f"Var F vs h slope (paper -1): lazy {overall['var_slope_lazy']:+.3f}, feature "
              f"{overall['var_slope_feature']:+.3f}")
        vs = overall["var_slopes"]
        if vs:
            print("Var F vs h slope at each alpha sqrt(h) (+- jackknife s.e. over seeds): " + ", ".join(
                f"{a:g}: {m:+.2f}+-{e:.2f}" for a, (m, e) in vs.items()))
            m = np.array([v[0] for v in vs.values()])
            w = 1.0 / np.array([max(v[1], 1e-12) for v in vs.values()]) ** 2
            print(f"  inverse-variance mean over alpha sqrt(h): {np.sum(w * m) / np.sum(w):+.2f} "
                  f"+- {1 / math.sqrt(np.sum(w)):.2f} (optimistic: the alpha sqrt(h) values share "
                  f"their seeds)")
        print(f"collapse: largest spread of the drift across widths at one alpha sqrt(h) "
              f"{overall['collapse_spread_decades']:.2f} decades (feature regime "
              f"{overall['collapse_spread_feature']:.2f}, lazy {overall['collapse_spread_lazy']:.2f}) "
              f"of a {overall['drift_range_decades']:.1f}-decade range; at one alpha instead "
              f"{overall['spread_vs_alpha_decades']:.2f} decades")
    return fig


def depth_table(df):
    """``[{n_hidden, a, a_pred, t1_slope, n}]``: the feature-regime exponent a of the drift
    (fit over alpha sqrt(h) <= FEATURE_MAX, geometric means over seeds and widths) per depth."""
    done = df[df["status"] == "done"]
    out = []
    for L in sorted({int(v) for v in done.index.get_level_values("n_hidden")}):
        sub = done[done.index.get_level_values("n_hidden") == L]
        g = sub.groupby(level="alpha_sqrt_h")
        a = np.array(sorted(g.groups), dtype=float)
        d = np.array([_geo_mean(g.get_group(v)["drift"]) for v in a])
        t1 = np.array([_geo_mean(g.get_group(v)["t1"]) for v in a])
        feat = a <= FEATURE_MAX
        out.append(dict(n_hidden=L, a=-_slope(a[feat], d[feat]), a_pred=2.0 / (1.0 + 1.0 / L),
                        t1_slope=_slope(a[feat], t1[feat]), n=int(len(sub))))
    return out


#: Geiger et al.'s measured feature-regime exponents by number of hidden layers.
A_MEASURED = {2: 1.25, 5: 1.7}


def plot_depth(df, spec, out):
    """The drift against alpha sqrt(h) in the feature regime, one curve per depth; the table of a."""
    import matplotlib.pyplot as plt

    done = df[df["status"] == "done"]
    fig, ax = plt.subplots(figsize=(5, 3.8))
    for L in sorted({int(v) for v in done.index.get_level_values("n_hidden")}):
        sub = done[done.index.get_level_values("n_hidden") == L]
        g = sub.groupby(level="alpha_sqrt_h")
        a = np.array(sorted(g.groups), dtype=float)
        ax.loglog(a, [_geo_mean(g.get_group(v)["drift"]) for v in a], "o-", ms=3,
                  label=f"{L} hidden layers")
    ax.set_xlabel(r"$\alpha\sqrt{h}$")
    ax.set_ylabel(r"$\|\Theta_T-\Theta_0\| / \|\Theta_0\|$")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=80)
    plt.close(fig)
    print("L (hidden)  a measured here  a predicted 2/(1+1/L)  a measured by Geiger et al.  "
          "t1 slope (paper +1)  points")
    for r in depth_table(df):
        theirs = A_MEASURED.get(r["n_hidden"])
        print(f"{r['n_hidden']:<11d} {r['a']:.3f}            {r['a_pred']:.3f}                  "
              f"{theirs if theirs is not None else '-'!s:27s} {r['t1_slope']:+.3f}              {r['n']}")
    return fig


def lazy_rows(df):
    """The lazy end (``spec_lazy.toml``): per alpha sqrt(h), ``lazy_dist`` (geometric mean over
    seeds) at each width, and the slope of log lazy_dist against log h with its standard error
    (the per-seed slopes' spread over sqrt(seeds); h^-1/2 where the trained net is the
    infinite-width linear model up to its finite-width fluctuation, 0 where it stops shrinking)."""
    done = df[df["status"] == "done"]
    hs = sorted({int(v) for v in done.index.get_level_values("h")})
    rows = []
    for a in sorted({float(v) for v in done.index.get_level_values("alpha_sqrt_h")}):
        sel = done[done.index.get_level_values("alpha_sqrt_h") == a]
        row = dict(alpha_sqrt_h=a)
        per_seed = {}
        for h in hs:
            sub = sel[sel.index.get_level_values("h") == h]
            row[f"lazy_dist_h{h}"] = _geo_mean(sub["lazy_dist"])
            for seed, v in zip(sub.index.get_level_values("seed"), sub["lazy_dist"]):
                per_seed.setdefault(int(seed), []).append((h, float(v)))
        slopes = [_slope(*zip(*v)) for v in per_seed.values() if len(v) == len(hs)]
        slopes = [x for x in slopes if np.isfinite(x)]
        row["slope_h"] = _slope(hs, [row[f"lazy_dist_h{h}"] for h in hs])
        row["slope_se"] = float(np.std(slopes, ddof=1) / math.sqrt(len(slopes))) if len(slopes) > 1 else math.nan
        row["n_seeds"] = len(slopes)
        rows.append(row)
    return rows


def plot_lazy(df, spec, out):
    """lazy_dist against h, one curve per alpha sqrt(h), with the h^-1/2 guide; the table."""
    import matplotlib.pyplot as plt

    rows = lazy_rows(df)
    hs = sorted({int(k[len("lazy_dist_h"):]) for r in rows for k in r if k.startswith("lazy_dist_h")})
    fig, ax = plt.subplots(figsize=(5, 3.8))
    for r in rows:
        ax.loglog(hs, [r[f"lazy_dist_h{h}"] for h in hs], "o-", ms=3, label=f"alpha sqrt(h) = {r['alpha_sqrt_h']:g}")
    if rows:
        v0 = rows[-1][f"lazy_dist_h{hs[0]}"]
        ax.loglog(hs, v0 * np.sqrt(hs[0] / np.asarray(hs, dtype=float)), "k:", label="h^-1/2")
    ax.set_xlabel("h")
    ax.set_ylabel(r"$\|F - F^{lazy}_\infty\| / \|F^{lazy}_\infty\|$ (test points)")
    ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(out, dpi=80)
    plt.close(fig)
    print("alpha sqrt(h)  " + "  ".join(f"h={h:<6d}" for h in hs) + "  slope over h (+- s.e. over seeds)")
    for r in rows:
        print(f"{r['alpha_sqrt_h']:<14g} " + "  ".join(f"{r[f'lazy_dist_h{h}']:.4f}  " for h in hs)
              + f"{r['slope_h']:+.3f} +- {r['slope_se']:.3f} ({r['n_seeds']} seeds)")
    return fig
