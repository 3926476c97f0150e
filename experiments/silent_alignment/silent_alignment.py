"""Experiment 4: silent alignment across sigma x depth for deep linear networks.

One point trains a depth-L linear network of width N from init scale sigma on a
whitened scalar teacher y = s beta.x (D inputs, P samples) and records, along the
flow, the kernel-target alignment A(t) = y^T K y / (|K|_F |y|^2) of the empirical
NTK and the loss. It returns

- ``t_align``: A reaches 90% of its final value ``final_alignment(L, min(P, D))``
  (= L / sqrt(L^2 + n - 1));
- ``t_loss``: the loss has fallen by 10%;
- ``ratio = t_loss / t_align`` (> 1: the kernel aligns before the loss moves,
  the silent alignment effect of Atanasov, Bordelon & Pehlevan 2022);
- ``ratio_model``: the same ratio predicted by the rank-one path model of the
  kernel, K(t) = K_0 + (c(t)^{2-2/L} - c_0^{2-2/L}) X (I + (L-1) beta beta^T) X^T
  (the paper's Eq. 7 for L = 2 with c = q; its final-NTK form, Sec. 4 / App. E,
  for deeper nets), with c(t) the mode strength ``mode_strength(t, s, c0, L)``
  (dc/dt = L c^{2-2/L}(s - c)) and K_0 the measured initial NTK. The one free
  number, the effective c_0 of a random initialisation, is fixed by the
  measured loss time (``mode_time(c_L, s, c0, L) = t_loss``), so the model
  predicts when the kernel aligns given when the loss moves.

The paper's claims (Sec. 3-4, App. C, E.1): for L = 2 the alignment time is
O(1/s), independent of sigma, while the loss time grows like log(1/sigma)/s, so
the ratio grows without bound as sigma -> 0; for L > 2 both times scale as
sigma^{2-L}, with alignment still first (ratio > 1, Fig. 3).
"""
from __future__ import annotations

import math

import numpy as np

import linearnets as ln
from linearnets.data import scalar_teacher

N_TIMES = 400
C0_GUESS = 0.25  # horizon guess only: c0 ~ 0.25 sigma^L


def _model_alignment(t, X, y, beta, K0, s, c0, L):
    """A(t) of the rank-one path model (vectorised over t)."""
    B = X @ (np.eye(X.shape[1]) + (L - 1) * np.outer(beta, beta)) @ X.T
    c = np.asarray(ln.mode_strength(t, s, c0, depth=L))
    g = c ** (2.0 - 2.0 / L) - c0 ** (2.0 - 2.0 / L)
    yy = y @ y
    a0, ab = y @ K0 @ y, y @ B @ y
    k00, k0b, kbb = np.sum(K0 * K0), np.sum(K0 * B), np.sum(B * B)
    norm = np.sqrt(np.maximum(k00 + 2 * g * k0b + g * g * kbb, 0.0))
    return (a0 + g * ab) / (norm * yy)


def _calibrated_c0(t_loss, s, L, c_L):
    """The c0 for which the mode's 10%-loss time equals the measured one (bisection in log c0)."""
    lo, hi = math.log(1e-300), math.log(0.999 * c_L)
    f = lambda lc: float(ln.mode_time(c_L, s, math.exp(lc), depth=L)) - t_loss  # decreasing in c0
    if f(hi) > 0 or f(lo) < 0:
        return math.nan
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if f(mid) > 0:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12:
            break
    return math.exp(0.5 * (lo + hi))


def point(depth, sigma, seed, D=20, N=20, P=40, s=1.0, rtol=1e-8, atol=1e-12, backend="auto", method="auto"):
    """One (depth, sigma, seed) point: alignment and loss times, their ratio and the model's ratio.

    Parameters
    ----------
    depth : int
        L >= 2.
    sigma : float
        Init scale: W_l entries N(0, sigma^2 / N_{l-1}) (``init_network``).
    seed : int
        Data (``scalar_teacher(P, D, s, seed)``) and init (``seed + 1``).
    D, N, P, s : int, int, int, float
        Input dimension, width, samples, teacher strength.
    method : str
        Integrator (default ``"auto"``: deep networks at small sigma have converged
        directions long before the target mode escapes, where an explicit method's
        step is held at its stability limit).

    Returns
    -------
    dict
        ``t_align, t_loss, ratio, ratio_model, t_align_model, c0_eff, final_alignment, A_end``.
    """
    L = int(depth)
    if L < 2:
        raise ValueError(f"depth must be >= 2, got {depth!r}")
    if not sigma > 0:
        raise ValueError(f"sigma must be > 0, got {sigma!r}")
    X, y, beta = scalar_teacher(P, D, s, seed=seed)
    w0 = ln.init_network((D,) + (N,) * (L - 1) + (1,), sigma, seed=seed + 1)
    c_L = s * (1.0 - math.sqrt(0.9))  # (s - c)^2 / 2 down by 10%
    t_end = 1.5 * float(ln.mode_time(c_L, s, C0_GUESS * sigma ** L, depth=L)) + 4.0 / s
    A_final = float(ln.final_alignment(L, min(P, D)))
    for _ in range(6):
        t = np.linspace(0.0, t_end, N_TIMES)
        tr = ln.gradient_flow(w0, X, y, t, rtol=rtol, atol=atol, backend=backend, method=method,
                              record=("ntk",))
        if not tr.success:
            raise RuntimeError(f"gradient flow failed: {tr.message}")
        loss = np.asarray(tr.loss)
        A = np.asarray(tr.ntk_alignment)
        t_loss = ln.regimes.crossing_time(t, -loss, -0.9 * loss[0])
        t_align = ln.regimes.crossing_time(t, A, 0.9 * A_final)
        if math.isfinite(t_loss) and math.isfinite(t_align):
            break
        t_end *= 2.0
    K0 = np.asarray(ln.empirical_ntk(w0, X, X))
    c0 = _calibrated_c0(t_loss, s, L, c_L) if math.isfinite(t_loss) else math.nan
    if math.isfinite(c0):
        A_model = _model_alignment(t, X, y, beta, K0, s, c0, L)
        t_align_model = ln.regimes.crossing_time(t, A_model, 0.9 * A_final)
    else:
        t_align_model = math.nan
    return dict(t_align=t_align, t_loss=t_loss, ratio=t_loss / t_align, ratio_model=t_loss / t_align_model,
                t_align_model=t_align_model, c0_eff=c0, final_alignment=A_final, A_end=float(A[-1]),
                nsteps=float(tr.nsteps))


# -- figure and table (``python -m linearnets sweep plot spec.toml``) -------------------------------

def _slope(x, y):
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    if ok.sum() < 2:
        return math.nan
    return float(np.polyfit(np.log(x[ok]), np.log(y[ok]), 1)[0])


def table(df):
    """Rows per depth: fitted exponents of t_align, t_loss in sigma, the ratio at the smallest sigma, model."""
    done = df[df["status"] == "done"]
    rows = []
    for L, sub in done.groupby(level="depth"):
        g = sub.groupby(level="sigma")[["t_align", "t_loss", "ratio", "ratio_model"]].mean()
        sig = g.index.to_numpy(dtype=float)
        smin = sig.min()
        if L == 2:
            # t_loss ~ log(1/sigma): its slope in ln(sigma); t_align: O(1/s), no sigma dependence
            slope_L = float(np.polyfit(np.log(sig), g["t_loss"].to_numpy(), 1)[0]) if len(sig) > 1 else math.nan
            paper_A, paper_L = "0 (O(1/s))", "d t_L/d ln(sigma) = -1/s"
        else:
            slope_L = _slope(sig, g["t_loss"].to_numpy())
            paper_A, paper_L = f"{2 - L}", f"{2 - L}"
        rows.append(dict(depth=int(L), slope_align=_slope(sig, g["t_align"].to_numpy()), paper_align=paper_A,
                         slope_loss=slope_L, paper_loss=paper_L,
                         ratio_smallest_sigma=float(g.loc[smin, "ratio"]),
                         model_smallest_sigma=float(g.loc[smin, "ratio_model"]),
                         frac_silent=float((sub["ratio"] > 1).mean()),
                         max_model_err=float(np.nanmax(np.abs(sub["ratio_model"] / sub["ratio"] - 1)))))
    return rows


def format_table(rows, s=1.0):
    head = ("L", "t_A exponent", "paper", "t_L exponent", "paper", "t_L/t_A (min sigma)", "model",
            "t_A<t_L", "|model/meas-1| max")
    lines = ["  ".join(head)]
    for r in rows:
        lines.append("  ".join([f"{r['depth']}", f"{r['slope_align']:+.3f}", r["paper_align"],
                                f"{r['slope_loss']:+.3f}", r["paper_loss"],
                                f"{r['ratio_smallest_sigma']:.3f}", f"{r['model_smallest_sigma']:.3f}",
                                f"{100 * r['frac_silent']:.0f}%", f"{r['max_model_err']:.3f}"]))
    return "\n".join(lines)


def plot(df, spec, out):
    """Two panels: t_align and t_loss against sigma per depth; t_loss / t_align with the model's curve."""
    import matplotlib.pyplot as plt

    done = df[df["status"] == "done"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (L, sub) in enumerate(done.groupby(level="depth")):
        col = colors[i % len(colors)]
        g = sub.groupby(level="sigma")
        m = g[["t_align", "t_loss", "ratio", "ratio_model"]].mean()
        sd = g[["ratio"]].std().fillna(0.0)
        sig = m.index.to_numpy(dtype=float)
        a1.loglog(sig, m["t_align"], "o-", color=col, label=f"L={L}: $t_A$ (alignment 90%)")
        a1.loglog(sig, m["t_loss"], "s--", color=col, mfc="none", label=f"L={L}: $t_L$ (loss -10%)")
        if L > 2:  # the paper's scaling sigma^{2-L}, through the smallest-sigma loss time
            k = np.argmin(sig)
            a1.loglog(sig, m["t_loss"].iloc[k] * (sig / sig[k]) ** (2 - L), ":", color=col, lw=1)
        a2.errorbar(sig, m["ratio"], yerr=sd["ratio"], fmt="o", color=col, label=f"L={L} measured")
        a2.plot(sig, m["ratio_model"], "-", color=col, label=f"L={L} rank-one path model")
    a1.set_xlabel(r"init scale $\sigma$")
    a1.set_ylabel("time")
    a1.legend(fontsize=6)
    a1.set_title(r"times (dotted: $\sigma^{2-L}$)")
    a2.set_xscale("log")
    a2.axhline(1.0, color="k", lw=0.7)
    a2.set_xlabel(r"init scale $\sigma$")
    a2.set_ylabel(r"$t_L / t_A$")
    a2.set_title("silent alignment: > 1 means the kernel aligns first")
    a2.legend(fontsize=6)
    fig.suptitle(f"silent alignment across sigma x depth ({spec.name})", fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    rows = table(df)
    print(format_table(rows))
    n_done, n = int((df["status"] == "done").sum()), len(df)
    print(f"({n_done} of {n} points done)")
    return fig
