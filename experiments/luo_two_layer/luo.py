r"""Experiment 2: the two-layer ReLU phase diagram of Luo, Xu, Ma & Zhang (2021).

Network (their Sec. 3, bias as the weight of a constant input)::

    f(x) = (1/alpha) sum_k a_k relu(w_k . x + b_k),
    a_k ~ N(0, beta_a^2),   (w_k, b_k) ~ N(0, beta_w^2 I),

trained by gradient flow on R_S = (1/2n) sum_i (f(x_i) - y_i)^2 from t = 0 until
R_S <= ``loss_stop``. Here alpha = 1 and the width m sets the two scales,
beta_w = m^{e_w}, beta_a = m^{e_a}, with the exponents chosen so that the point
sits at the grid's (gamma, gamma') (``exponents``)::

    gamma  = lim -log(beta_a beta_w / alpha) / log m = -(e_a + e_w),
    gamma' = lim -log(beta_a / beta_w) / log m     = e_w - e_a.

gamma' > 0 means input weights larger than output weights. Oriented so, the
measurements agree with the paper's rule, which is the one
:func:`linearnets.phase_coordinates` applies (``paper_regime``): linear when
gamma < 1 or gamma' > gamma - 1, condensed when gamma > 1 and gamma' < gamma - 1,
critical on the boundary. The orientation is reconstructed, not read from the
text (the equations are not in the available paper text): the rescaling
argument gives it. With a_k and (w_k, b_k) of scales beta_a, beta_w the input
weights move at rate (beta_a/beta_w)^2 relative to the output weights; in the
lazy estimate RD(w) ~ m^{gamma - 1} when the input weights are the smaller ones,
and when they are the larger ones the output layer (in which f is linear) first
grows by m^{gamma - 1} and then drags the input weights by
RD(w) ~ m^{2(gamma - 1 - gamma')}: the boundaries gamma = 1 (gamma' <= 0) and
gamma' = gamma - 1 (gamma' >= 0) of the paper. ``linearnets.phase_coordinates``
takes the two-layer exponents in the paper's order, beta_1 = output layer:
(e_a, e_w).

One point (``point``) returns RD of the input layer, RD(w) = |theta_w(t*) -
theta_w(0)|_F / |theta_w(0)|_F with theta_w = (w, b) (``ln.relative_change``),
and of the output layer, at the stopping time t*. ``plot`` fits
``ln.rd_slope`` (slope of log RD on log m over the widths, standard error over
seeds, label linear / critical / condensed) per grid point, draws the heatmap with
the two boundaries and prints the table of measured vs paper regime.

Beside the RD slopes the table prints the slope over m of ``lazy_dist``, the distance of the
trained function on [-1, 1] from the infinite-width lazy prediction (``lazy_prediction`` with
the network's NTK at width m in the limit, ``theory/infinite_width.md``). Measured (m = 250
to 2000, 6 seeds): it shrinks in the linear regime (slopes -0.3 to -0.55 at gamma' = +0.5,
gamma <= 1; -0.31 and -0.10 at gamma' = 0, gamma = 0.5 and 0.75) and stops shrinking across
the critical line (+0.02 +- 0.02 at gamma = 1, gamma' = 0; +0.01 at gamma = 1.5, gamma' = 0.5;
positive beyond), which puts the line at gamma ~ 1 for gamma' <= 0 and gamma ~ 1.5 = 1 +
gamma' at gamma' = 0.5, the paper's boundaries. At gamma = 0.25 it does not shrink either:
there f_0 = O(m^(1/2 - gamma)) grows with m.

Cost: the default grid (300 points) took 33.4 worker-seconds (sum over points of finished -
started; 35.4 s wall, one worker, ``OMP_NUM_THREADS=1 python -m linearnets sweep run
spec.toml --jobs 1`` on a shared 2-core machine), 1/15.5 of the 518 worker-seconds before
the MLP ran in its compiled loop on numba; the table's labels are unchanged, the slopes
within 5e-4 and RD at the largest width within 0.11 %.

Data: 1-d, the four points x = (-1, -1/3, 1/3, 1), y = (0.6, -0.2, 0.1, 0.5)
(the paper fits four 1-d points; these values are this experiment's choice).
"""
from __future__ import annotations

import math

import numpy as np

X_DATA = np.array([[-1.0], [-1.0 / 3.0], [1.0 / 3.0], [1.0]])
Y_DATA = np.array([0.6, -0.2, 0.1, 0.5])
#: Where the trained function is compared with the infinite-width lazy prediction.
X_TEST = np.linspace(-1.0, 1.0, 41)[:, None]


def exponents(gamma, gamma_prime):
    """Width exponents ``(e_w, e_a)`` of beta_w and beta_a (alpha = 1) at (gamma, gamma').

    Parameters
    ----------
    gamma, gamma_prime : float

    Returns
    -------
    (float, float)
        ``e_w = -(gamma - gamma')/2``, ``e_a = -(gamma + gamma')/2``.
    """
    return -(gamma - gamma_prime) / 2.0, -(gamma + gamma_prime) / 2.0


def paper_regime(gamma, gamma_prime):
    """The paper's regime at (gamma, gamma'), from ``ln.phase_coordinates`` (see the module docstring)."""
    import linearnets as ln

    e_w, e_a = exponents(gamma, gamma_prime)
    # phase_coordinates (two layers): b = (output, input) = (e_a, e_w), gamma' = e_w - e_a
    return ln.phase_coordinates(0.0, [e_a, e_w])["regime"]


def point(gamma, gamma_prime, m, seed, loss_stop=1e-4, t_max=1e4, rtol=1e-4, kink_rtol=1e-3,
          atol=1e-10, max_steps=100_000):
    """One (gamma, gamma', width, seed) point: RD of both layers when R_S reaches ``loss_stop``.

    Parameters
    ----------
    gamma, gamma_prime : float
        Phase-diagram coordinates (module docstring).
    m : int
        Width, >= 2.
    seed : int
        Initialisation seed.
    loss_stop : float
        Stop once R_S = (1/2n) sum (f - y)^2 <= loss_stop (``stop=("loss", loss_stop)``).
    t_max : float
        Time limit. A run that has not reached ``loss_stop`` by then is stuck on a
        plateau (seen at gamma = 1.8, gamma' = -0.8, m = 250: R_S = 5e-3 from t ~ 300
        to 1e5, three points fitted and one not): RD is taken at t_max and
        ``converged = 0``.
    max_steps : int
        Step budget (a run that exhausts it raises).
    rtol, kink_rtol, atol : float
        Integrator tolerances (RD at rtol 1e-4, kink_rtol 1e-3 is within 0.2 % of
        rtol 1e-6, kink_rtol 1e-4 on the slowest points of the grid).

    Returns
    -------
    dict
        ``rd_w`` (input layer with bias), ``rd_a`` (output layer), ``t_stop`` (t_max if
        not converged), ``converged`` (1 or 0), ``loss_end``,
        ``loss0`` (R_S at t = 0), ``n_orient`` (``ln.condensation`` orientations of
        the final (w, b) among units whose |(w, b)| exceeds 10 % of the largest),
        ``nsteps``, ``lazy_dist`` (root-mean-square distance on ``X_TEST`` of the trained
        function from the infinite-width lazy prediction at t*, over that of the targets:
        ``linearnets.compare.infinite_width.zhou_lazy_distance``).
    """
    import linearnets as ln
    from linearnets.compare.infinite_width import zhou_lazy_distance
    from linearnets.parameterisations import zhou_parameterisation

    m = int(m)
    if m < 2:
        raise ValueError(f"m must be >= 2, got {m!r}")
    if not loss_stop > 0:
        raise ValueError(f"loss_stop must be > 0, got {loss_stop!r}")
    e_w, e_a = exponents(float(gamma), float(gamma_prime))
    p = zhou_parameterisation((1, m, 1), (m ** e_w, m ** e_a), 1.0, seed=seed, biases=True)
    t = np.array([0.0, t_max])
    tr = ln.gradient_flow(p.weights, X_DATA, Y_DATA, t, rtol=rtol, atol=atol, kink_rtol=kink_rtol,
                          stop=("loss", loss_stop), max_steps=max_steps, **p.flow_kwargs())
    if not tr.success:
        raise RuntimeError(f"gradient flow failed: {tr.message}")
    rd = ln.relative_change(p.weights, tr.weights, p.biases, tr.biases)
    W, b = np.asarray(tr.weights[0]), np.asarray(tr.biases[0])
    u = np.linalg.norm(np.column_stack([W, b]), axis=1)
    big = u > 0.1 * u.max()
    _, n_orient = ln.condensation(W[big], b[big], cosines=False)
    t_stop = float(tr.t_stop) if tr.t_stop is not None else float(t_max)
    lazy = zhou_lazy_distance(p, (m ** e_w, m ** e_a), tr.weights, tr.biases, t_stop, X_DATA, Y_DATA, X_TEST)
    return dict(rd_w=float(rd[0]), rd_a=float(rd[1]), lazy_dist=lazy,
                t_stop=t_stop,
                converged=float(tr.t_stop is not None), loss_end=float(tr.loss[-1]), loss0=float(tr.loss[0]),
                n_orient=float(n_orient), nsteps=float(tr.nsteps))


# -- figure and table (``python -m linearnets sweep plot spec.toml``) -------------------------------

def table(df, field="rd_w"):
    """One row per (gamma, gamma'): RD slope over widths (``ln.rd_slope``), measured and paper regime."""
    import linearnets as ln

    done = df[df["status"] == "done"]
    rows = []
    for (g, gp), sub in done.groupby(level=["gamma", "gamma_prime"]):
        piv = sub[field].unstack("seed")  # rows: widths, columns: seeds
        piv = piv.sort_index().dropna(axis=1)
        widths = piv.index.get_level_values("m").to_numpy(dtype=float)
        if piv.shape[0] < 2 or piv.shape[1] < 1:
            continue
        fit = ln.rd_slope(widths, piv.to_numpy())
        row = dict(gamma=float(g), gamma_prime=float(gp), slope=fit["slope"], stderr=fit["stderr"],
                   measured=fit["label"], paper=paper_regime(float(g), float(gp)),
                   rd_max_width=float(piv.iloc[-1].mean()), n_widths=int(piv.shape[0]),
                   n_seeds=int(piv.shape[1]), lazy_slope=math.nan, lazy_se=math.nan, lazy_max_width=math.nan)
        if "lazy_dist" in sub:
            lz = sub["lazy_dist"].unstack("seed").sort_index().dropna(axis=1)
            if lz.shape[0] >= 2 and lz.shape[1] >= 1:
                lfit = ln.rd_slope(lz.index.get_level_values("m").to_numpy(dtype=float), lz.to_numpy())
                row.update(lazy_slope=lfit["slope"], lazy_se=lfit["stderr"],
                           lazy_max_width=float(lz.iloc[-1].mean()))
        rows.append(row)
    return rows


def format_table(rows):
    """The table of :func:`table` as text, with the agreement fractions (plain and with gamma' mirrored)."""
    lines = ["gamma  gamma'  RD slope +- se    measured    paper (Luo et al.)  RD at largest m  agree"
             "  | lazy dist slope +- se  at largest m"]
    for r in rows:
        lines.append(f"{r['gamma']:5.2f}  {r['gamma_prime']:+5.2f}  {r['slope']:+.3f} +- {r['stderr']:.3f}"
                     f"  {r['measured']:10s}  {r['paper']:18s}  {r['rd_max_width']:.3g}"
                     f"  {'yes' if r['measured'] == r['paper'] else 'NO '}"
                     f"  | {r['lazy_slope']:+.3f} +- {r['lazy_se']:.3f}  {r['lazy_max_width']:.3g}")
    n = len(rows)
    agree = sum(r["measured"] == r["paper"] for r in rows)
    off = [r for r in rows if r["paper"] != "critical"]
    agree_off = sum(r["measured"] == r["paper"] for r in off)
    lines.append(f"agreement: {agree}/{n} = {agree / max(n, 1):.2f} of grid points; "
                 f"{agree_off}/{len(off)} off the boundaries; sign of the slope matches the paper's "
                 f"side on {sum((r['slope'] < 0) == (r['paper'] == 'linear') for r in off)}/{len(off)}")
    mirror = sum(r["measured"] == paper_regime(r["gamma"], -r["gamma_prime"]) for r in rows)
    lines.append(f"with gamma' mirrored (gamma' > 0 = output weights larger): agreement {mirror}/{n}")
    lines.append("lazy dist: RMS distance of the trained function on [-1, 1] from the infinite-width lazy "
                 "prediction (its NTK at width m); it shrinks with m (slope < 0) in the linear regime and "
                 "stops shrinking across the critical line")
    return "\n".join(lines)


def plot(df, spec, out):
    """Heatmap of the RD slope of the input layer over (gamma', gamma), with the paper's boundaries."""
    import matplotlib.pyplot as plt

    rows = table(df)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.4))
    if rows:
        gs = sorted({r["gamma"] for r in rows})
        gps = sorted({r["gamma_prime"] for r in rows})
        S = np.full((len(gs), len(gps)), np.nan)
        for r in rows:
            S[gs.index(r["gamma"]), gps.index(r["gamma_prime"])] = r["slope"]
        dg = (gs[1] - gs[0]) / 2 if len(gs) > 1 else 0.5
        dgp = (gps[1] - gps[0]) / 2 if len(gps) > 1 else 0.5
        lim = np.nanmax(np.abs(S))
        im = a1.imshow(S, origin="lower", cmap="coolwarm", vmin=-lim, vmax=lim, aspect="auto",
                       extent=(gps[0] - dgp, gps[-1] + dgp, gs[0] - dg, gs[-1] + dg))
        for r in rows:
            mark = {"linear": "o", "critical": "s", "condensed": "^"}[r["measured"]]
            a1.plot(r["gamma_prime"], r["gamma"], mark, mfc="none", mec="k", ms=6)
            a1.text(r["gamma_prime"], r["gamma"] - 0.45 * dg, f"{r['slope']:+.2f}", ha="center",
                    va="top", fontsize=6)
        fig.colorbar(im, ax=a1, label="RD slope  d log RD(w) / d log m")
        xl = np.array([gps[0] - dgp, gps[-1] + dgp])
        a1.plot([xl[0], 0.0], [1.0, 1.0], "k-", lw=1.5, label=r"$\gamma = 1$ ($\gamma' \leq 0$)")
        a1.plot([0.0, xl[1]], [1.0, 1.0 + xl[1]], "k--", lw=1.5, label=r"$\gamma' = \gamma - 1$")
        a1.set_xlim(*xl)
        a1.set_ylim(gs[0] - dg, gs[-1] + dg)
        a1.set_xlabel(r"$\gamma'$  (> 0: input weights larger)")
        a1.set_ylabel(r"$\gamma$")
        a1.set_title("RD slope of the input layer (o linear, s critical, ^ condensed);\n"
                     r"paper's boundaries: solid $\gamma = 1$ ($\gamma' \leq 0$), dashed $\gamma' = \gamma - 1$",
                     fontsize=8)
        done = df[df["status"] == "done"]
        for (g, gp), sub in done.groupby(level=["gamma", "gamma_prime"]):
            if gp != gps[len(gps) // 2]:
                continue
            mm = sub.groupby(level="m")["rd_w"].mean()
            a2.loglog(mm.index.to_numpy(dtype=float), mm.to_numpy(), "o-", label=fr"$\gamma$={g:g}")
        a2.set_xlabel("width m")
        a2.set_ylabel("RD(w) at the stop (mean over seeds)")
        a2.set_title(fr"$\gamma'$ = {gps[len(gps) // 2]:g}", fontsize=8)
        a2.legend(fontsize=7)
    fig.suptitle(f"Luo et al. (2021) two-layer ReLU phase diagram ({spec.name})", fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    print(format_table(rows))
    n_done, n = int((df["status"] == "done").sum()), len(df)
    print(f"({n_done} of {n} points done)")
    return fig
