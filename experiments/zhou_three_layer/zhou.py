r"""Experiment 3: the three-layer ReLU phase diagram of Zhou et al. (2022).

Network (their Sec. 3, ``zhou_parameterisation``; biases as expanded inputs)::

    f(x) = (1/alpha) a^T relu(W2 relu(W1 x + b1) + b2),
    W1, b1 ~ N(0, beta_1^2),  W2, b2 ~ N(0, beta_2^2),  a ~ N(0, beta_3^2),

both hidden layers of width m, trained by gradient flow on
R_S = (1/2n) sum_i (f(x_i) - y_i)^2 from t = 0 until R_S <= ``loss_stop``.

Coordinates (their assumption beta_2 = B beta_3, here B = 1, so gamma_1 = 0). The
available paper text lost the equations that define gamma_2 and gamma_3; they are
**reconstructed** from its rescaling argument (as ``ln.phase_coordinates`` does for
three layers): with theta_l = beta_l theta~_l and ReLU's homogeneity,
f = kappa f~(theta~) with kappa = beta_1 beta_2 beta_3 / alpha, and layer l moves
at rate kappa / beta_l^2, so the flow is fixed, up to time, by kappa and the rate
ratios (beta_3/beta_1)^2, (beta_3/beta_2)^2::

    gamma_2 = lim -log(beta_1/beta_3) / log m,
    gamma_3 = lim -log(beta_1 beta_2 beta_3 / alpha) / log m.

Check against the paper's examples: NTK scaling (alpha ~ sqrt(m_1 m_2) = m,
beta_l = O(1)) is (gamma_2, gamma_3) = (0, 1), Xavier (beta_l ~ m^{-1/2},
alpha = 1) is (0, 3/2), and their Fig. 2 calls gamma_3 = 1, 1.5, 2 (gamma_2 = 0)
NTK-like, mean-field-like and condensed. Here alpha = 1 and the width sets
beta_l = m^{e_l} with e_2 = e_3 = (gamma_2 - gamma_3)/3, e_1 = e_3 - gamma_2.

One point returns RD of W^[1] (with b1), W^[2] (with b2) and a at the stopping
time (``ln.relative_change``), and the number of orientations of the final
input weights (``ln.condensation``). ``plot`` fits ``ln.rd_slope`` per layer and
grid point and draws (1) the gamma_2 = 0 slice, slopes of both hidden layers
against gamma_3; (2) each layer's regime on the (gamma_2, gamma_3) grid; (3) a
cosine-similarity heatmap of the input weights in the condensed regime (one
point re-run at the largest gamma_3). The table compares with the paper's
statements and with the lazy-order RD exponents of the same rescaling
(``lazy_slopes``).

The table's last column is the slope over m of ``lazy_dist``, the distance of the trained
function on [-1, 1] from the infinite-width lazy prediction (``lazy_prediction`` with the
network's NTK at width m in the limit, ``theory/infinite_width.md``). Measured on the
gamma_2 = 0 slice (``spec_lazy.toml``: m = 100 to 800, 3 seeds): -0.36 +- 0.10 at
gamma_3 = 0.9; +0.03 +- 0.10, +0.09 +- 0.07, +0.04 +- 0.03 at 1.2, 1.35, 1.5 (flat within
2 s.e.); +0.150 +- 0.004 at 1.8. The distance at m = 800 is 0.036-0.041 up to 1.35, 0.075
at 1.5 and 0.43 at 1.8. At these widths the column puts the line between gamma_3 = 0.9 and
1.8, not finer (the RD slope of W^[1] puts it near the paper's 1.5).

Data: 1-d, the four points x = (-1, -1/3, 1/3, 1), y = (0.6, -0.2, 0.1, 0.5)
(their Fig. 2 fits four 1-d points; these values are this experiment's choice).
"""
from __future__ import annotations

import math

import numpy as np

X_DATA = np.array([[-1.0], [-1.0 / 3.0], [1.0 / 3.0], [1.0]])
Y_DATA = np.array([0.6, -0.2, 0.1, 0.5])
#: Where the trained function is compared with the infinite-width lazy prediction.
X_TEST = np.linspace(-1.0, 1.0, 41)[:, None]

#: the paper's statements on the gamma_2 = 0 slice for W^[1] (Fig. 2: gamma_3 = 1 NTK-like, the
#: initial and final weights nearly the same; 1.5 mean-field-like (Xavier); 2 condensed; Fig. 4:
#: slopes of RD(W^[1]) over m growing from gamma_3 = 0.9 through 1.5 to 2.1)
PAPER_SLICE_CRITICAL = 1.5


def paper_slice_regime(gamma3, tol=1e-9):
    """The regime of W^[1] on the gamma_2 = 0 slice as the paper's Figs. 2 and 4 state it."""
    if abs(gamma3 - PAPER_SLICE_CRITICAL) <= tol:
        return "critical"
    return "linear" if gamma3 < PAPER_SLICE_CRITICAL else "condensed"


def exponents(gamma2, gamma3):
    """Width exponents ``(e_1, e_2, e_3)`` of beta_1, beta_2, beta_3 (alpha = 1, beta_2 = beta_3)."""
    e3 = (gamma2 - gamma3) / 3.0
    return e3 - gamma2, e3, e3


def lazy_slopes(gamma2, gamma3):
    r"""Lazy-order RD exponents ``(s_1, s_2, s_3)`` of W^[1], W^[2], a (a reconstruction).

    In the normalised flow (module docstring) h_1 = O(1), h_2 = O(sqrt m),
    f~ = O(m), |df~/dW~1| per entry O(sqrt m), |df~/dW~2| O(1), |df~/da~| O(sqrt m);
    the NTK is K ~ kappa^2 m^2 sum_l beta_l^{-2}, the fit takes T ~ 1/K and layer l
    moves by (kappa/beta_l^2) |df~/dtheta~_l| T, so with kappa = m^{-gamma_3}::

        s_1 = gamma_3 - 3/2 + 2 min(gamma_2, 0),
        s_2 = gamma_3 - 2 - 2 max(gamma_2, 0),
        s_3 = gamma_3 - 3/2 - 2 max(gamma_2, 0).

    Self-consistent (lazy) only while all three are < 0.
    """
    return (gamma3 - 1.5 + 2 * min(gamma2, 0.0), gamma3 - 2.0 - 2 * max(gamma2, 0.0),
            gamma3 - 1.5 - 2 * max(gamma2, 0.0))


def expected_regimes(gamma2, gamma3, tol=1e-9):
    """Regimes of (W^[1], W^[2]) that the lazy-order exponents imply; ``"?"`` where they do not decide.

    A layer is linear when its exponent is < 0 and no other exceeds 0 (the lazy picture
    holds), critical when its exponent is 0 and none exceeds 0, condensed when its own
    exponent is > 0 (it cannot stay lazy), else undecided.
    """
    s = lazy_slopes(gamma2, gamma3)
    out = []
    for l in (0, 1):
        others = max(v for i, v in enumerate(s) if i != l)
        if s[l] > tol:
            out.append("condensed")
        elif others > tol:
            out.append("?")
        elif s[l] < -tol:
            out.append("linear")
        else:
            out.append("critical")
    return tuple(out)


def angular_concentration(W, b, bins=72, top=3):
    """Share of the total norm of the units' (w, b) in the ``top`` fullest of ``bins`` angle bins.

    For 1-d inputs (w, b) is 2-D; condensed units gather at a few angles (share -> 1),
    random ones spread over the circle (share ~ top/bins).

    Parameters
    ----------
    W : (N, 1) array_like
    b : (N,) array_like

    Returns
    -------
    float
    """
    W = np.asarray(W, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if W.ndim != 2 or W.shape[1] != 1 or b.shape != (W.shape[0],):
        raise ValueError(f"W must be (N, 1) and b (N,), got {W.shape} and {b.shape}")
    u = np.hypot(W[:, 0], b)
    h, _ = np.histogram(np.arctan2(b, W[:, 0]), bins=bins, range=(-np.pi, np.pi), weights=u)
    return float(np.sort(h)[-top:].sum() / h.sum())


def _network(gamma2, gamma3, m, seed):
    from linearnets.parameterisations import zhou_parameterisation

    e1, e2, e3 = exponents(float(gamma2), float(gamma3))
    return zhou_parameterisation((1, m, m, 1), (m ** e1, m ** e2, m ** e3), 1.0, seed=seed, biases=True)


def train(gamma2, gamma3, m, seed, loss_stop=1e-4, t_max=1e4, rtol=1e-3, kink_rtol=1e-2, atol=1e-10,
          max_steps=100_000):
    """Initial parameters and the trajectory stopped at R_S <= ``loss_stop`` (see :func:`point`)."""
    import linearnets as ln

    m = int(m)
    if m < 2:
        raise ValueError(f"m must be >= 2, got {m!r}")
    if not loss_stop > 0:
        raise ValueError(f"loss_stop must be > 0, got {loss_stop!r}")
    p = _network(gamma2, gamma3, m, seed)
    tr = ln.gradient_flow(p.weights, X_DATA, Y_DATA, np.array([0.0, t_max]), rtol=rtol, atol=atol,
                          kink_rtol=kink_rtol, stop=("loss", loss_stop), max_steps=max_steps,
                          **p.flow_kwargs())
    if not tr.success:
        raise RuntimeError(f"gradient flow failed: {tr.message}")
    return p, tr


def point(gamma2, gamma3, m, seed, loss_stop=1e-4, t_max=1e4, rtol=1e-3, kink_rtol=1e-2, atol=1e-10,
          max_steps=100_000):
    """One (gamma_2, gamma_3, width, seed) point: RD of each layer when R_S reaches ``loss_stop``.

    Parameters
    ----------
    gamma2, gamma3 : float
        Phase-diagram coordinates (module docstring; gamma_1 = 0).
    m : int
        Width of both hidden layers, >= 2.
    seed : int
    loss_stop : float
        Stop once R_S <= loss_stop (``stop=("loss", loss_stop)``).
    t_max : float
        Time limit; a run stuck on a plateau gives RD at t_max and ``converged = 0``.
    rtol, kink_rtol, atol : float
        Integrator tolerances (RD at rtol 1e-3, kink_rtol 1e-2 within 0.3 % of
        rtol 1e-4, kink_rtol 1e-3 at m = 100, gamma_3 = 1.5 and 2.1, 10-90x fewer steps).
    max_steps : int
        Step budget (a run that exhausts it raises).

    Returns
    -------
    dict
        ``rd1`` (W^[1] with b1), ``rd2`` (W^[2] with b2), ``rd3`` (a), ``t_stop``
        (t_max if not converged), ``converged`` (1 or 0), ``loss_end``,
        ``loss0``, ``n_orient1`` (orientations of the final (W^[1], b1) rows among
        units above 10 % of the largest norm), ``nsteps``, ``lazy_dist`` (root-mean-square
        distance on ``X_TEST`` of the trained function from the infinite-width lazy prediction
        at the stop, over that of the targets: ``linearnets.compare.infinite_width.zhou_lazy_distance``).
    """
    import linearnets as ln
    from linearnets.compare.infinite_width import zhou_lazy_distance

    p, tr = train(gamma2, gamma3, m, seed, loss_stop, t_max, rtol, kink_rtol, atol, max_steps)
    rd = ln.relative_change(p.weights, tr.weights, p.biases, tr.biases)
    W, b = np.asarray(tr.weights[0]), np.asarray(tr.biases[0])
    u = np.linalg.norm(np.column_stack([W, b]), axis=1)
    big = u > 0.1 * u.max()
    _, n1 = ln.condensation(W[big], b[big], cosines=False)
    t_stop = float(tr.t_stop) if tr.t_stop is not None else float(t_max)
    m = int(m)
    betas = tuple(m ** e for e in exponents(float(gamma2), float(gamma3)))
    lazy = zhou_lazy_distance(p, betas, tr.weights, tr.biases, t_stop, X_DATA, Y_DATA, X_TEST)
    return dict(rd1=float(rd[0]), rd2=float(rd[1]), rd3=float(rd[2]), lazy_dist=lazy,
                t_stop=t_stop,
                converged=float(tr.t_stop is not None), loss_end=float(tr.loss[-1]),
                loss0=float(tr.loss[0]), n_orient1=float(n1), nsteps=float(tr.nsteps))


# -- figure and table (``python -m linearnets sweep plot spec.toml``) -------------------------------

def table(df):
    """One row per (gamma_2, gamma_3): RD slope and regime of W^[1] and W^[2] (``ln.rd_slope``)."""
    import linearnets as ln

    done = df[df["status"] == "done"]
    rows = []
    for (g2, g3), sub in done.groupby(level=["gamma2", "gamma3"]):
        r = dict(gamma2=float(g2), gamma3=float(g3))
        ok = True
        for f in ("rd1", "rd2"):
            piv = sub[f].unstack("seed").sort_index().dropna(axis=1)
            if piv.shape[0] < 2 or piv.shape[1] < 1:
                ok = False
                break
            fit = ln.rd_slope(piv.index.get_level_values("m").to_numpy(dtype=float), piv.to_numpy())
            r[f + "_slope"], r[f + "_se"], r[f + "_label"] = fit["slope"], fit["stderr"], fit["label"]
        if not ok:
            continue
        r["lazy1"], r["lazy2"], _ = lazy_slopes(float(g2), float(g3))
        r["expect1"], r["expect2"] = expected_regimes(float(g2), float(g3))
        r["n_orient1"] = float(sub["n_orient1"].groupby(level="m").mean().iloc[-1])
        r["lazy_slope"] = r["lazy_se"] = r["lazy_max_width"] = math.nan
        if "lazy_dist" in sub:
            lz = sub["lazy_dist"].unstack("seed").sort_index().dropna(axis=1)
            if lz.shape[0] >= 2 and lz.shape[1] >= 1:
                fit = ln.rd_slope(lz.index.get_level_values("m").to_numpy(dtype=float), lz.to_numpy())
                r.update(lazy_slope=fit["slope"], lazy_se=fit["stderr"], lazy_max_width=float(lz.iloc[-1].mean()))
        rows.append(r)
    return rows


def format_table(rows):
    """The table of :func:`table` as text, with the agreement counts and the points whose layers differ."""
    lines = ["gamma2  gamma3 | W1 slope +- se  lazy   measured   expected | W2 slope +- se  lazy   measured"
             "   expected | orientations W1 (largest m) | paper (gamma2 = 0, W1) | lazy dist slope +- se, at largest m"]
    for r in rows:
        paper = paper_slice_regime(r["gamma3"]) if abs(r["gamma2"]) < 1e-12 else ""
        lines.append(f"{r['gamma2']:+5.2f}  {r['gamma3']:5.2f} | {r['rd1_slope']:+.3f} +- {r['rd1_se']:.3f}"
                     f"  {r['lazy1']:+.2f}  {r['rd1_label']:9s}  {r['expect1']:9s}"
                     f"| {r['rd2_slope']:+.3f} +- {r['rd2_se']:.3f}  {r['lazy2']:+.2f}  {r['rd2_label']:9s}"
                     f"  {r['expect2']:9s}| {r['n_orient1']:5.1f} | {paper:9s}"
                     f"| {r['lazy_slope']:+.3f} +- {r['lazy_se']:.3f}, {r['lazy_max_width']:.3g}")
    dec = [(r[f"rd{l}_label"], r[f"expect{l}"]) for r in rows for l in (1, 2) if r[f"expect{l}"] != "?"]
    agree = sum(a == b for a, b in dec)
    lines.append(f"agreement with the lazy-order rule where it decides: {agree}/{len(dec)}"
                 f" = {agree / max(len(dec), 1):.2f} (layer-points)")
    sl = [r for r in rows if abs(r["gamma2"]) < 1e-12]
    lines.append(f"gamma2 = 0 slice, W^[1] against the paper's Figs. 2 and 4: "
                 f"{sum(r['rd1_label'] == paper_slice_regime(r['gamma3']) for r in sl)}/{len(sl)}")
    split = [r for r in rows if r["rd1_label"] != r["rd2_label"]]
    lines.append("points where W^[1] and W^[2] are in different regimes: "
                 + (", ".join(f"({r['gamma2']:+.2f}, {r['gamma3']:.2f}): W1 {r['rd1_label']}, "
                              f"W2 {r['rd2_label']}" for r in split) or "none"))
    lines.append("lazy dist: RMS distance of the trained function on [-1, 1] from the infinite-width lazy "
                 "prediction (its NTK at width m); it shrinks with m (slope < 0) in the linear regime and "
                 "stops shrinking across the critical line")
    return "\n".join(lines)


def plot(df, spec, out):
    """Three panels: the gamma_2 = 0 slice, the per-layer regime map, and a condensation heatmap."""
    import matplotlib.pyplot as plt

    import linearnets as ln

    rows = table(df)
    fig, axs = plt.subplots(1, 3, figsize=(15, 4.4))
    a1, a2, a3 = axs
    sl = sorted([r for r in rows if abs(r["gamma2"]) < 1e-12], key=lambda r: r["gamma3"])
    if sl:
        g3 = np.array([r["gamma3"] for r in sl])
        for l, mk in ((1, "o"), (2, "s")):
            a1.errorbar(g3, [r[f"rd{l}_slope"] for r in sl], yerr=[2 * r[f"rd{l}_se"] for r in sl],
                        fmt=mk + "-", capsize=3, label=fr"$W^{{[{l}]}}$ measured ($\pm 2$ se)")
            a1.plot(g3, [r[f"lazy{l}"] for r in sl], ":", color=a1.lines[-1].get_color(),
                    label=fr"$W^{{[{l}]}}$ lazy-order exponent")
        a1.axhline(0.0, color="k", lw=0.7)
        a1.axvline(1.5, color="grey", lw=0.7, ls="--")
        a1.set_xlabel(r"$\gamma_3$  ($\gamma_2 = 0$)")
        a1.set_ylabel("RD slope  d log RD / d log m")
        a1.legend(fontsize=7)
        a1.set_title("slice: NTK at 1, Xavier at 1.5", fontsize=8)
    if rows:
        for r in rows:
            for l, dx in ((1, -0.04), (2, 0.04)):
                lab = r[f"rd{l}_label"]
                a2.scatter(r["gamma2"] + dx, r["gamma3"], marker={"linear": "o", "critical": "s",
                                                                  "condensed": "^"}[lab],
                           c="C0" if l == 1 else "C3", s=40)
                a2.text(r["gamma2"] + dx * 3.2, r["gamma3"], f"{r[f'rd{l}_slope']:+.2f}", fontsize=5,
                        ha="center", va="center")
        g2s = np.linspace(min(r["gamma2"] for r in rows) - 0.2, max(r["gamma2"] for r in rows) + 0.2, 50)
        a2.plot(g2s, 1.5 - 2 * np.minimum(g2s, 0.0), "C0--", lw=1, label=r"$W^{[1]}$: lazy exponent 0")
        a2.plot(g2s, 2.0 + 2 * np.maximum(g2s, 0.0), "C3--", lw=1, label=r"$W^{[2]}$: lazy exponent 0")
        a2.plot(g2s, 1.5 + 2 * np.maximum(g2s, 0.0), "k:", lw=1, label="output layer: lazy exponent 0")
        for lab, mk in (("linear", "o"), ("critical", "s"), ("condensed", "^")):
            a2.scatter([], [], marker=mk, c="grey", label=lab)
        a2.set_ylim(min(r["gamma3"] for r in rows) - 0.45, max(r["gamma3"] for r in rows) + 0.2)
        a2.set_xlabel(r"$\gamma_2$")
        a2.set_ylabel(r"$\gamma_3$")
        a2.set_title(r"regime per layer (blue: $W^{[1]}$, red: $W^{[2]}$)", fontsize=8)
        a2.set_xlim(min(r["gamma2"] for r in rows) - 0.3, max(r["gamma2"] for r in rows) + 0.3)
        a2.legend(fontsize=5, loc="lower center", ncol=2, framealpha=0.9)
    # condensation picture: re-run the gamma_2 = 0 points at the smallest and largest gamma_3
    done = df[df["status"] == "done"]
    if len(done):
        g3s = sorted(set(float(v) for v in done.index.get_level_values("gamma3")))
        ms = sorted(set(int(v) for v in done.index.get_level_values("m")))
        mc = ms[min(1, len(ms) - 1)]
        kw = {k: v for k, v in spec.fixed.items() if k in ("loss_stop",)}
        a3.axis("off")
        for j, g3c in enumerate((g3s[0], g3s[-1])):
            p, tr = train(0.0, g3c, mc, 0, **kw)
            W, b = np.asarray(tr.weights[0]), np.asarray(tr.biases[0])
            u = np.linalg.norm(np.column_stack([W, b]), axis=1)
            order = np.argsort(np.arctan2(b, W[:, 0]))
            keep = order[u[order] > 0.1 * u.max()]
            cos, n = ln.condensation(W[keep], b[keep])
            share = angular_concentration(W, b)
            ax = a3.inset_axes([0.0 + 0.52 * j, 0.08, 0.46, 0.8])
            im = ax.imshow(cos, cmap="RdBu_r", vmin=-1, vmax=1)
            ax.set_title(fr"$\gamma_3$={g3c:g}: {len(keep)} units" + f"\ntop-3 angle share {share:.2f}", fontsize=6)
            ax.set_xticks([])
            ax.set_yticks([])
            print(f"condensation picture: gamma2 = 0, gamma3 = {g3c:g}, m = {mc}: {len(keep)} units above 10 % "
                  f"of the largest norm, {n} orientations (ln.condensation, eps = {ln.regimes.CONDENSE_EPS}), "
                  f"share of |(w, b)| in the 3 fullest of 72 angle bins {share:.3f}")
        fig.colorbar(im, ax=a3, label="cosine similarity of final (w, b) of $W^{[1]}$", shrink=0.8)
        a3.set_title(fr"$W^{{[1]}}$ after training, $\gamma_2 = 0$, m = {mc} (units sorted by angle)", fontsize=8)
    fig.suptitle(f"Zhou et al. (2022) three-layer ReLU phase diagram ({spec.name})", fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    print(format_table(rows))
    n_done, n = int((df["status"] == "done").sum()), len(df)
    print(f"({n_done} of {n} points done)")
    return fig
