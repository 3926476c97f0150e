r"""The catapult phase of a two-layer network (Lewkowycz et al. 2020) against the exact map.

Network: f(x) = W₂ φ(W₁ x), W₁ (m, D) with entries N(0, 1/D), W₂ (1, m) with entries
N(0, 1/m) (``init_network``), φ the identity or ReLU; one training sample x (‖x‖² = D on
average), target y, loss ½(f − y)² (the package's with P = 1), full-batch gradient descent
(``ln.gradient_descent``) at lr = η/λ₀, λ₀ the NTK of the sample at initialisation. The
point records λ₀, the NTK after ``n_steps`` (λ_∞, ``record=("ntk",)``), the final loss and
whether the run diverged (a ReLU net can instead switch every unit off: λ_∞ = 0, "dead"); for the linear net also λ_∞ of ``ln.catapult_map`` from the
run's own (f₀, λ₀, x_sq), which is exact at every width (``theory/catapult.md``).

What the papers state (their net is this linear one with input x/√n): as m → ∞, lazy
below η = 2 (λ_∞ = λ₀), catapult for 2 < η < 4 (the loss spikes, λ falls until
lr λ < 2 and training converges: lr λ_∞ < 2), divergence above 4; for wide ReLU nets
they measured the upper edge near η ≈ 12.

``plot`` draws lr·λ_∞ against η, one panel per activation, one colour per width, the
exact map's prediction dashed (linear), and the lines lr·λ_∞ = η (lazy) and 2; ``table``
gives per (activation, m) the largest η that converged, the edges of the measured phases
and, for the linear net, the largest deviation of the simulated λ_∞ from the map's.
"""
from __future__ import annotations

import math
import warnings

import numpy as np


def point(activation, eta, m, seed, D=10, y=1.0, n_steps=3000):
    """One run: NTK at the start and after ``n_steps``, the loss, divergence, the map's λ_∞."""
    import linearnets as ln

    m = int(m)
    rng = np.random.default_rng([int(seed), m])
    x = rng.standard_normal(D)
    ws = ln.init_network((D, m, 1), 1.0, seed=rng)
    X, Y = x[None, :], [[float(y)]]
    K0 = ln.empirical_ntk(ws, X, X, activation=activation)
    lam0 = float(np.asarray(K0).reshape(-1)[0])
    f0 = float(ln.forward(ws, X, activation=activation)[0, 0])
    lr = float(eta) / lam0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ln.FlowWarning)
        tr = ln.gradient_descent(ws, X, Y, [0, n_steps], lr, activation=activation, record=("ntk",), probe=X)
    diverged = not tr.success
    lam_end = math.inf if diverged else float(tr.ntk[-1, 0, 0])
    loss_end = math.inf if diverged else float(tr.loss[-1])
    out = dict(lam0=lam0, f0=f0, lr=lr, lam_end=lam_end, eta_end=lr * lam_end, loss_end=loss_end,
               diverged=float(diverged), eta_map=math.nan, lam_map=math.nan)
    if activation == "linear":
        _, lam_map = ln.catapult_map([n_steps], f0, lam0, float(y), lr, x_sq=float(x @ x))
        out.update(lam_map=float(lam_map[0]), eta_map=float(lr * lam_map[0]))
    return out


def _phase(r):
    if r["diverged"] or not math.isfinite(r["eta_end"]):
        return "divergent"
    if r["loss_end"] > 1e-8:
        return "dead" if r["eta_end"] == 0 else "unconverged"    # ReLU: every unit switched off
    return "lazy" if abs(r["eta_end"] / r["eta"] - 1) < 0.02 else "catapult"


def table(df):
    """Per (activation, m): where each phase was measured, and the linear net's deviation from the map."""
    done = df[df["status"] == "done"].reset_index()
    rows = []
    for (act, m), sub in done.groupby(["activation", "m"]):
        recs = sub.to_dict("records")
        for r in recs:
            r["phase"] = _phase(r)
        lazy = [r["eta"] for r in recs if r["phase"] == "lazy"]
        cat = [r["eta"] for r in recs if r["phase"] == "catapult"]
        div = [r["eta"] for r in recs if r["phase"] == "divergent"]
        dead = [r["eta"] for r in recs if r["phase"] == "dead"]
        cat_end = [r["eta_end"] for r in recs if r["phase"] == "catapult" and r["eta"] > 2]
        dev = [abs(r["eta_end"] - r["eta_map"]) for r in recs
               if act == "linear" and math.isfinite(r["eta_end"]) and math.isfinite(r["eta_map"])]
        rows.append(dict(activation=act, m=int(m), n_points=len(recs),
                         lazy_max=max(lazy) if lazy else math.nan,
                         catapult_min=min(cat) if cat else math.nan, catapult_max=max(cat) if cat else math.nan,
                         divergent_min=min(div) if div else math.nan, dead_min=min(dead) if dead else math.nan,
                         catapult_eta_end_max=max(cat_end) if cat_end else math.nan,
                         map_dev_max=max(dev) if dev else math.nan))
    return rows


def format_table(rows):
    head = ("activation      m  lazy up to  catapult from..to  divergent from  dead from  "
            "max lr*ntk_end (eta>2)  |lr*ntk - map| max")
    lines = [head]
    for r in rows:
        lines.append(f"{r['activation']:>10} {r['m']:>6}  {r['lazy_max']:10.2f}  {r['catapult_min']:7.2f} .. "
                     f"{r['catapult_max']:5.2f}  {r['divergent_min']:14.2f}  {r['dead_min']:9.2f}  "
                     f"{r['catapult_eta_end_max']:22.3f}  "
                     f"{r['map_dev_max']:.2e}")
    return "\n".join(lines)


def plot(df, spec, out):
    """lr·λ_∞ against lr·λ₀, per activation and width, with the exact map (linear) and the phase lines."""
    import matplotlib.pyplot as plt

    done = df[df["status"] == "done"].reset_index()
    acts = sorted(done["activation"].unique())
    fig, axes = plt.subplots(1, len(acts), figsize=(5.2 * len(acts), 4.2), squeeze=False)
    widths = sorted(done["m"].unique())
    cmap = plt.get_cmap("viridis")
    for ax, act in zip(axes[0], acts):
        sub = done[done["activation"] == act]
        for i, m in enumerate(widths):
            g = sub[sub["m"] == m].groupby("eta")
            e = g["eta_end"].median()
            col = cmap(0.85 * i / max(len(widths) - 1, 1))
            ax.plot(e.index, e.to_numpy(), "o-", ms=3, color=col, label=f"m = {m}")
            if act == "linear":
                mp = g["eta_map"].median()
                ax.plot(mp.index, mp.to_numpy(), "--", color=col, lw=1)
        emax = float(sub["eta"].max())
        ax.plot([0, 2], [0, 2], "k:", lw=1, label="lazy: lr λ∞ = lr λ₀")
        ax.axhline(2.0, color="0.5", lw=0.8)
        for b in (2.0, 4.0):
            ax.axvline(b, color="0.8", lw=0.8)
        ax.set(xlim=(0, emax * 1.02), ylim=(0, 4.2), xlabel=r"lr $\lambda_0$", ylabel=r"lr $\lambda_\infty$",
               title=f"{act} (dashed: catapult_map)" if act == "linear" else f"{act}; diverged: no marker")
        ax.legend(fontsize=7)
    fig.suptitle("Catapult: final NTK against the learning rate (Lewkowycz et al. 2020)", fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    rows = table(df)
    print(format_table(rows))
    return fig
