"""Experiment 1: feature vs lazy training (Geiger, Spigler, Jacot & Wyart 2019), on digits parity.

One point trains their fully connected network (``geiger_parameterisation``:
NTK parameterisation, Softplus, ``n_hidden`` hidden layers of width ``h``,
centred output ``F = alpha (f - f_0)``, soft hinge) until every training margin
``y F >= 1`` (``stop="margin"``), with ``alpha = alpha_sqrt_h / sqrt(h)``, and
returns

- ``drift``: the kernel drift ``|Theta_T - Theta_0|_F / |Theta_0|_F`` of the
  empirical NTK on ``n_kernel`` held-out points;
- ``test_err``: the test error of ``sign F``;
- ``t_stop``: the time at which every margin reached 1 (their t_1 ~ alpha sqrt(h)
  in the feature regime);
- ``F_test``: F on the test points (for Var F across seeds, ~ 1/h).

Data: scikit-learn's bundled ``load_digits`` (no download), labels the parity
of the digit (+1 even, -1 odd), standardised, projected on the top 10
principal components of the training set (their fully connected runs), split
once (a fixed permutation) into ``n_train`` training and ``n_test`` test points.
"""
from __future__ import annotations

import math

import numpy as np

_DATA = {}


def digits_parity(n_train, n_test, pca=10, split_seed=0):
    """``(Xtr, ytr, Xte, yte)``: standardised (PCA-``pca``) digits, labels +-1 by parity."""
    key = (n_train, n_test, pca, split_seed)
    if key not in _DATA:
        from sklearn.datasets import load_digits
        d = load_digits()
        X = d.data.astype(np.float64)
        y = np.where(d.target % 2 == 0, 1.0, -1.0)
        perm = np.random.default_rng(split_seed).permutation(len(y))
        if n_train + n_test > len(y):
            raise ValueError(f"n_train + n_test must be <= {len(y)}, got {n_train + n_test}")
        tr, te = perm[:n_train], perm[n_train:n_train + n_test]
        mu, sd = X[tr].mean(0), X[tr].std(0)
        sd[sd == 0] = 1.0
        Xs = (X - mu) / sd
        if pca:
            _, _, Vt = np.linalg.svd(Xs[tr], full_matrices=False)
            Xs = Xs @ Vt[:pca].T
            Xs /= np.sqrt((Xs[tr] ** 2).sum(1).mean())  # unit mean squared norm
            Xs *= math.sqrt(pca)
        _DATA[key] = (Xs[tr], y[tr], Xs[te], y[te])
    return _DATA[key]


def point(alpha_sqrt_h, h, seed, n_hidden=3, n_train=200, n_test=200, n_kernel=64, pca=10,
          t_max=1e8, rtol=1e-6, atol=1e-9):
    """One (alpha sqrt(h), h, seed) point of the feature/lazy diagram (see the module docstring)."""
    import linearnets as ln
    from linearnets.sim.parameterisations import geiger_parameterisation

    Xtr, ytr, Xte, yte = digits_parity(n_train, n_test, pca)
    alpha = float(alpha_sqrt_h) / math.sqrt(h)
    sizes = (Xtr.shape[1],) + (int(h),) * n_hidden + (1,)
    p = geiger_parameterisation(sizes, alpha, seed=seed)
    t = np.geomspace(1e-3, t_max, 45)
    tr = ln.gradient_flow(p.weights, Xtr, ytr, t, rtol=rtol, atol=atol, stop="margin",
                          record=("outputs",), probe=Xte, **p.flow_kwargs())
    if tr.t_stop is None:
        raise RuntimeError(f"margins not all >= 1 by t = {t_max:g}: {tr.message}")
    F_test = np.asarray(tr.outputs)[-1, :, 0]
    Xk = Xte[:n_kernel]
    K0 = np.asarray(ln.empirical_ntk(p.weights, Xk, Xk, **p.ntk_kwargs()))
    kw = p.ntk_kwargs()
    kw["biases"] = tr.biases
    KT = np.asarray(ln.empirical_ntk(list(tr.weights), Xk, Xk, **kw))
    return dict(drift=float(np.linalg.norm(KT - K0) / np.linalg.norm(K0)),
                test_err=float(np.mean(np.sign(F_test) != yte)), t_stop=float(tr.t_stop),
                F_test=F_test, nsteps=float(tr.nsteps))


def table(df):
    """Per width: the lazy slope of drift vs alpha sqrt(h) (paper: -1) and the feature-regime exponent."""
    done = df[df["status"] == "done"]
    rows = []
    for h, sub in done.groupby(level="h"):
        g = sub.groupby(level="alpha_sqrt_h")["drift"].mean()
        a = g.index.to_numpy(dtype=float)
        d = g.to_numpy()
        lazy = a >= 10.0
        slope = float(np.polyfit(np.log(a[lazy]), np.log(d[lazy]), 1)[0]) if lazy.sum() >= 2 else math.nan
        err = sub.groupby(level="alpha_sqrt_h")["test_err"].mean()
        # Var F across seeds, averaged over test points, at the largest alpha sqrt(h) (lazy)
        top = sub.xs(a.max(), level="alpha_sqrt_h")["F_test"]
        var_f = float(np.mean(np.var(np.stack(list(top)), axis=0))) if len(top) > 1 else math.nan
        rows.append(dict(h=int(h), lazy_slope=slope, err_lazy=float(err.iloc[-1]), err_feature=float(err.iloc[0]),
                         var_F_lazy=var_f))
    return rows


def plot(df, spec, out):
    """Drift and test error against alpha sqrt(h), one curve per h (the collapse)."""
    import matplotlib.pyplot as plt

    done = df[df["status"] == "done"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4))
    for h, sub in done.groupby(level="h"):
        g = sub.groupby(level="alpha_sqrt_h")[["drift", "test_err"]].mean()
        a = g.index.to_numpy(dtype=float)
        a1.loglog(a, g["drift"], "o-", label=f"h={h}")
        a2.semilogx(a, g["test_err"], "o-", label=f"h={h}")
    if len(done):
        a = np.unique(done.index.get_level_values("alpha_sqrt_h").to_numpy(dtype=float))
        ref = a[a >= 10]
        if ref.size:
            a1.loglog(ref, ref[0] / ref * float(done["drift"].max()) / 10, "k:", label="slope -1")
    a1.set_xlabel(r"$\alpha\sqrt{h}$")
    a1.set_ylabel(r"$\|\Theta_T-\Theta_0\| / \|\Theta_0\|$")
    a1.legend(fontsize=7)
    a2.set_xlabel(r"$\alpha\sqrt{h}$")
    a2.set_ylabel("test error")
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    print("h  lazy slope (paper -1)  test err lazy  test err feature  Var F (lazy)")
    for r in table(df):
        print(f"{r['h']}  {r['lazy_slope']:+.3f}  {r['err_lazy']:.3f}  {r['err_feature']:.3f}  {r['var_F_lazy']:.3g}")
    return fig
