r"""The edge of stability (Cohen et al. 2021) on a tanh MLP trained by full-batch gradient descent.

Network: (D, width, width, 1), tanh, ``init_network(..., init_scale)`` (entries
N(0, init_scale²/fan-in)),
no biases; data: P Gaussian inputs, targets y = sin(2 w·x) + 0.3 tanh(x₂x₃) (a fixed
random unit w per seed); mse (the package's loss (1/2P) Σ (y − f)²); full-batch gradient
descent (``ln.gradient_descent``) for ``n_steps`` at step lr, the sharpness (the top
eigenvalue of the training loss's Hessian, ``record=("sharpness",)``, Lanczos on exact
Hessian-vector products) and the loss recorded every ``every`` steps.

Cohen et al.: the sharpness rises during training ("progressive sharpening") until it
reaches 2/lr, the stability limit of gradient descent on a quadratic, then hovers at or
just above 2/lr while the loss keeps decreasing over long times, non-monotonically.

A point returns the sharpness at the start and its maximum in units of 2/lr, the median
and the 10–90 % range of lr·S/2 over the second half of the run (how close it sits to
2/lr), the first step at which S ≥ 0.9·2/lr, the fraction of recorded intervals over
which the loss rose, and the loss at the start, the middle and the end; and the recorded
curves (small arrays) for the figure.
"""
from __future__ import annotations

import math
import warnings

import numpy as np


def _data(P, D, seed):
    rng = np.random.default_rng([int(seed), 7])
    X = rng.standard_normal((P, D))
    w = rng.standard_normal(D)
    w /= np.linalg.norm(w)
    Y = np.sin(2 * X @ w)[:, None] + 0.3 * np.tanh(X[:, 1:2] * X[:, 2:3])
    return X, Y


def point(lr, seed, P=64, D=8, width=64, n_steps=3000, every=10, init_scale=1.0):
    """One run of gradient descent with the sharpness along it."""
    import linearnets as ln

    X, Y = _data(P, D, seed)
    ws = ln.init_network((D, int(width), int(width), 1), float(init_scale), seed=int(seed) + 100)
    steps = np.arange(0, int(n_steps) + 1, int(every))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ln.FlowWarning)
        tr = ln.gradient_descent(ws, X, Y, steps, float(lr), activation="tanh", record=("sharpness",))
    S = tr.sharpness[:, 0]
    ratio = S * float(lr) / 2
    late = steps >= steps[-1] / 2
    ok = np.isfinite(ratio)
    reach = steps[ok & (ratio >= 0.9)]
    loss = tr.loss
    return dict(success=float(tr.success), S0_ratio=float(ratio[0]), S_max_ratio=float(np.nanmax(ratio)),
                late_median=float(np.nanmedian(ratio[late])), late_p10=float(np.nanpercentile(ratio[late], 10)),
                late_p90=float(np.nanpercentile(ratio[late], 90)),
                reach_step=float(reach[0]) if reach.size else math.nan,
                loss_up_fraction=float(np.mean(np.diff(loss[ok]) > 0)), loss0=float(loss[0]),
                loss_mid=float(loss[len(loss) // 2]), loss_end=float(loss[-1]),
                steps=steps.astype(float), sharpness=S, loss=loss)


def table(df):
    """Per lr: how close the sharpness sits to 2/lr late in training, and the loss."""
    done = df[df["status"] == "done"].reset_index()
    rows = []
    for lr, sub in done.groupby("lr"):
        rows.append(dict(lr=float(lr), two_over_lr=2 / float(lr), n_seeds=len(sub),
                         S0_ratio=float(sub["S0_ratio"].mean()), S_max_ratio=float(sub["S_max_ratio"].mean()),
                         late_median=float(sub["late_median"].mean()),
                         late_p10=float(sub["late_p10"].min()), late_p90=float(sub["late_p90"].max()),
                         reach_step=float(sub["reach_step"].mean()),
                         loss_up_fraction=float(sub["loss_up_fraction"].mean()),
                         loss0=float(sub["loss0"].mean()), loss_mid=float(sub["loss_mid"].mean()),
                         loss_end=float(sub["loss_end"].mean())))
    return rows


def format_table(rows):
    lines = ["    lr   2/lr   S0 lr/2  max S lr/2  late median (p10..p90)  reaches 0.9 at  loss rose  "
             "loss start -> mid -> end"]
    for r in rows:
        lines.append(f"{r['lr']:6.3f} {r['two_over_lr']:6.1f}  {r['S0_ratio']:7.3f}  {r['S_max_ratio']:10.3f}  "
                     f"{r['late_median']:6.3f} ({r['late_p10']:.3f}..{r['late_p90']:.3f})  "
                     f"{r['reach_step']:14.0f}  {r['loss_up_fraction']:9.2f}  "
                     f"{r['loss0']:.3g} -> {r['loss_mid']:.3g} -> {r['loss_end']:.3g}")
    return "\n".join(lines)


def plot(df, spec, out):
    """Sharpness (in units of 2/lr) and loss against the step, one colour per lr (seed 0)."""
    import matplotlib.pyplot as plt

    done = df[df["status"] == "done"].reset_index()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
    lrs = sorted(done["lr"].unique())
    cmap = plt.get_cmap("viridis")
    for i, lr in enumerate(lrs):
        r = done[(done["lr"] == lr)].sort_values("seed").iloc[0]
        col = cmap(0.85 * i / max(len(lrs) - 1, 1))
        a1.plot(r["steps"], r["sharpness"], color=col, lw=1, label=f"lr = {lr:g}")
        a1.axhline(2 / lr, color=col, ls="--", lw=1)
        a2.semilogy(r["steps"], r["loss"], color=col, lw=1, label=f"lr = {lr:g}")
    a1.set(xlabel="step", ylabel="sharpness (top Hessian eigenvalue)", yscale="log",
           title="sharpness; dashed: 2/lr")
    a2.set(xlabel="step", ylabel="training loss", title="loss (seed 0)")
    a1.legend(fontsize=7)
    a2.legend(fontsize=7)
    fig.suptitle("Edge of stability: tanh MLP, full-batch gradient descent (Cohen et al. 2021)", fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    print(format_table(table(df)))
    return fig
