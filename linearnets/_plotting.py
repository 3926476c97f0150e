"""Figures for :class:`linearnets.compare.Comparison` (matplotlib, no pyplot state).

Figures are built with :class:`matplotlib.figure.Figure` directly, so they work
under any backend (Agg included) and never touch a global figure manager.
Simulation is drawn solid, theory dashed black, as in the paper's figures.
"""
from __future__ import annotations

import numpy as np

__all__ = ["plot"]

_THEORY = dict(color="k", ls="--", lw=1.2)


def _figure(ncols=1, width=4.6, height=3.6):
    from matplotlib.figure import Figure
    fig = Figure(figsize=(width * ncols, height), layout="constrained")
    axes = fig.subplots(1, ncols)
    return fig, np.atleast_1d(axes)


def _colors(n):
    from matplotlib import colormaps
    cmap = colormaps["viridis"]
    return [cmap(x) for x in np.linspace(0.0, 0.85, max(n, 1))]


def _title(fig, res):
    import textwrap
    width = int(14 * fig.get_figwidth())
    if getattr(res, "inequality", ""):
        op = next((o for o in ("<=", ">=", "<", ">") if o in res.inequality), "<")
        text = f"{res.title}   [{res.status}: {res.inequality}: {res.theory:.3g} {op} {res.simulation:.3g}]"
    else:
        text = f"{res.title}   [{res.status}: error {res.error:.2g} / tol {res.tolerance:.2g}]"
    fig.suptitle("\n".join(textwrap.wrap(text, width)), fontsize=9)


def _few_ticks(ax, axis="x", n=4):
    """At most ``n`` major tick labels on a linear axis (no overlapping labels)."""
    from matplotlib.ticker import MaxNLocator
    getattr(ax, f"{axis}axis").set_major_locator(MaxNLocator(n))


def _value_ticks(ax, values, axis="x", fmt="{:g}"):
    """Ticks at exactly ``values`` (e.g. the simulated sigmas or the integer depths), no minor labels."""
    from matplotlib.ticker import FixedLocator, NullLocator
    values = np.asarray(values, float)
    a = getattr(ax, f"{axis}axis")
    a.set_major_locator(FixedLocator(values))
    a.set_minor_locator(NullLocator())
    getattr(ax, f"set_{axis}ticklabels")([fmt.format(v) for v in values])


def _learning_curve(res):
    a = res.arrays
    fig, (ax, ax2) = _figure(2)
    for col, sig, t, ls, lt in zip(_colors(len(a["sigmas"])), a["sigmas"], a["t"], a["loss_sim"],
                                   a["loss_theory"]):
        ax.plot(t, ls, color=col, lw=2.5, alpha=0.8, label=fr"$\sigma$={sig:g}")
        ax.plot(t, lt, **_THEORY)
    ax.plot([], [], **_THEORY, label="theory")
    ax.set(xlabel="t", ylabel="loss", title="two-layer learning curves")
    ax.legend(fontsize=8)
    sig, err = a["sigmas"], a["errors"]
    ax2.loglog(sig, err, "o-", label="max |loss error| / (s²/2)")
    ax2.loglog(sig, a["tolerances"], "s:", color="gray", label="tolerance")
    ax2.loglog(sig, err[-1] * (sig / sig[-1]) ** 2, **_THEORY, label=r"$\propto\sigma^2$")
    ax2.set(xlabel=r"$\sigma$", ylabel="error", title=f"slope {res.simulation:.2f} (theory 2)")
    ax2.legend(fontsize=8)
    return fig


def _phase_one(res):
    a = res.arrays
    fig, (ax, ax2) = _figure(2)
    t = a["t"]
    for ax_, lg in ((ax, True), (ax2, False)):
        ax_.plot(t, a["q_sim"], lw=2.5, alpha=0.7, label="q (sim)")
        ax_.plot(t, a["r_sim"], lw=2.5, alpha=0.7, label="r (sim)")
        ax_.plot(t, a["q_full"], **_THEORY, label="full path")
        ax_.plot(t, a["r_full"], **_THEORY)
        w = a["window"]
        ax_.plot(t[w], a["q_phase1"][w], color="r", ls=":", lw=1.5, label="phase I")
        ax_.plot(t[w], a["r_phase1"][w], color="r", ls=":", lw=1.5)
        ax_.set_xlabel("t")
    ax.set(ylabel="q, r", title="linear scale")
    ax2.set_yscale("log")
    ax2.set(title="log scale (phase I is exponential)")
    ax.legend(fontsize=8)
    return fig


def _initial_moments(res):
    a = res.arrays
    fig, (ax, ax2) = _figure(2)
    ax.hist(a["q0"], bins=60, density=True, alpha=0.7)
    ax.axvline(float(a["q_mean_theory"]), **_THEORY, label="E[q0] theory")
    ax.axvline(float(np.mean(a["q0"])), color="C1", label="sample mean")
    ax.set(xlabel="q0", title="q0 over initialisations")
    ax.legend(fontsize=8)
    r0 = a["r0"]
    ax2.hist(r0, bins=60, density=True, alpha=0.7)
    sd = float(a["r_std_theory"])
    x = np.linspace(r0.min(), r0.max(), 200)
    ax2.plot(x, np.exp(-0.5 * (x / sd) ** 2) / (sd * np.sqrt(2 * np.pi)), **_THEORY,
             label="N(0, std theory²)")
    ax2.set(xlabel="r0", title="r0 over initialisations")
    ax2.legend(fontsize=8)
    for a_ in (ax, ax2):
        _few_ticks(a_, "x", 4)
        a_.ticklabel_format(axis="x", style="sci", scilimits=(-2, 3))
    return fig


def _mode_strengths(res):
    a = res.arrays
    depths = a["depths"]
    fig, axes = _figure(len(depths), width=3.2, height=3.2)
    for ax, L, t, cs, ct in zip(axes, depths, a["t"], a["c_sim"], a["c_theory"]):
        for k, col in enumerate(_colors(cs.shape[1])):
            ax.plot(t, cs[:, k], color=col, lw=3, alpha=0.6, label=fr"$s_{k + 1}$={a['spectrum'][k]:g}")
            ax.plot(t, ct[:, k], **_THEORY)
        ax.set(xlabel="t", title=f"L = {L}")
    axes[0].set_ylabel(r"$c_\alpha(t)$")
    axes[0].legend(fontsize=7)
    return fig


def _half_time(res):
    a = res.arrays
    fig, (ax, ax2) = _figure(2)
    for col, L, sg, th, p, coef in zip(_colors(len(a["depths"])), a["depths"], a["sigmas"], a["half_times"],
                                        a["theory_exponent"], a["coef"]):
        if L == 2:
            ax2.semilogx(sg, th, "o", color=col, label="L=2 (sim)")
            # theory slope -1/(eta s) in ln sigma, intercept by least squares
            ax2.semilogx(sg, p * np.log(sg) + np.mean(th - p * np.log(sg)), **_THEORY,
                         label=r"theory: slope $-1/(\eta s)$ in $\ln\sigma$")
        else:
            ax.loglog(sg, th, "o", color=col, label=f"L={L} (sim)")
            # theory exponent, amplitude and offset refitted with the exponent fixed
            M = np.stack([sg ** p, np.ones_like(sg)], axis=1)
            c, *_ = np.linalg.lstsq(M, th, rcond=None)
            ss = np.geomspace(sg.min(), sg.max(), 50)
            ax.loglog(ss, c[0] * ss ** p + c[1], color=col, ls="--",
                      label=fr"$A\sigma^{{{p:g}}}+B$")
    # both panels on a sigma axis: the exponents in the legend are those of sigma;
    # ticks on the 1-2-5 sequence only (the default minor labels overlap)
    for a_ in (ax, ax2):
        lo, hi = (min(np.min(x) for x in a["sigmas"]), max(np.max(x) for x in a["sigmas"]))
        k = np.arange(np.floor(np.log10(lo)) - 1, np.ceil(np.log10(hi)) + 1)
        nice = np.sort(np.outer([1.0, 2.0, 5.0], 10.0 ** k).ravel())
        _value_ticks(a_, nice[(nice >= lo * 0.999) & (nice <= hi * 1.001)], "x", "{:g}")
    ax.set(xlabel=r"$\sigma$", ylabel=r"$t_{1/2}$", title=r"$L\geq 3$: $t_{1/2}\sim\sigma^{2-L}$")
    ax2.set(xlabel=r"$\sigma$", ylabel=r"$t_{1/2}$", title=r"$L=2$: $t_{1/2}\sim\ln(1/\sigma)/s$")
    for a_ in (ax, ax2):
        if a_.get_legend_handles_labels()[0]:
            a_.legend(fontsize=7)
        else:
            a_.set_axis_off()
    return fig


def _final_ntk(res):
    a = res.arrays
    fig, (ax, ax2) = _figure(2)
    d = a["depths"]
    for j, (col, sig) in enumerate(zip(_colors(len(a["sigmas"])), a["sigmas"])):
        ax.plot(d, a["alignment_sim"][:, j], "o", color=col, ms=7, label=fr"sim $\sigma$={sig:g}")
        ax2.semilogy(d, a["kernel_error"][:, j], "o-", color=col, label=fr"$\sigma$={sig:g}")
        ax2.axhline(a["tolerances"][j], color=col, ls=":", lw=1,
                    label=fr"tolerance SAFETY$\,\sigma^2$, $\sigma$={sig:g}")
    dd = np.arange(1, d.max() + 1)
    n = res.params["n"]
    ax.plot(dd, dd / np.sqrt(dd ** 2 + n - 1.0), **_THEORY, label=r"$L/\sqrt{L^2+n-1}$")
    ax.set(xlabel="depth L", ylabel="final kernel-target alignment", title=f"final alignment (n={n})")
    ax.legend(fontsize=8)
    ax2.set(xlabel="depth L", ylabel=r"$\|K-K_{th}\|_F/\|K_{th}\|_F$", title="final NTK error")
    ax2.legend(fontsize=7)
    for a_ in (ax, ax2):
        _value_ticks(a_, np.arange(1, d.max() + 1) if a_ is ax else d, "x", "{:.0f}")
    return fig


def _silent(res):
    a = res.arrays
    fig, axes = _figure(3, width=3.6)
    t = a["t"]
    A, nrm, loss = a["alignment"], a["kernel_norm"], a["loss"]
    axes[0].plot(t, loss / loss[0], lw=2.5, alpha=0.7, label="sim")
    if "loss_theory" in a:
        axes[0].plot(t, a["loss_theory"] / a["loss_theory"][0], **_THEORY, label="theory")
    axes[0].set(xlabel="t", ylabel="loss / initial", title="loss")
    axes[1].semilogy(t, nrm / nrm[-1], lw=2.5, alpha=0.7)
    axes[1].set(xlabel="t", ylabel=r"$\|K\|_F$ / final", title="kernel norm")
    axes[2].plot(t, A, lw=2.5, alpha=0.7, label="sim")
    if "alignment_theory" in a:
        axes[2].plot(t, a["alignment_theory"], **_THEORY, label="theory")
    axes[2].axhline(float(a["final_alignment"]), color="gray", ls=":", lw=1, label="final (theory)")
    axes[2].set(xlabel="t", ylabel="kernel-target alignment", title="alignment")
    for ax in axes:
        ax.axvline(float(a["t_align"]), color="C2", ls="-.", lw=1,
                   label=r"$t_A$: alignment at 90% of final")
        ax.axvline(float(a["t_loss"]), color="C3", ls="-.", lw=1, label=r"$t_L$: loss down 10%")
    t_show = 2.5 * np.nanmax([float(a["t_align"]), float(a["t_loss"])])
    if np.isfinite(t_show) and t_show < t[-1]:
        for ax in axes:
            ax.set_xlim(0.0, t_show)
    axes[2].legend(fontsize=7)
    axes[0].legend(fontsize=7)
    for ax in axes:
        _few_ticks(ax, "x", 4)
    return fig


def _kernel_gap(res):
    a = res.arrays
    fig, (ax,) = _figure(1, width=6.0)
    for P, col in zip(np.unique(a["P"]), ("C0", "C1", "C2")):
        m = a["P"] == P
        ax.semilogy(a["gamma"][m], np.maximum(a["gap_final"][m], 1e-16), "o-", color=col,
                    label=f"final NTK, P={int(P)}")
        ax.semilogy(a["gamma"][m], np.maximum(a["gap_initial"][m], 1e-16), "s:", color=col,
                    label=f"initial NTK, P={int(P)}")
        ax.semilogy(a["gamma"][m], a["tolerance"][m], color=col, ls="--", lw=0.8,
                    label=f"tolerance, P={int(P)}")
    ax.set(xlabel=r"anisotropy $\gamma$ ($X_\gamma=US^\gamma V^T$)", ylabel="relative test gap to NN",
           title=f"NN vs kernel regression (D={res.params['D']})")
    ax.legend(fontsize=7)
    return fig


def _kernel_path(res):
    a = res.arrays
    fig, (ax,) = _figure(1, width=5.2)
    ax.semilogy(a["t"], np.maximum(a["gaps"], 1e-16), "o-", label="kernel regression with K(t)")
    ax.semilogy(a["t"], a["tolerances"], **_THEORY, label="tolerance: SAFETY x eps(t)")
    lin = float(a["t"][1])
    ax.set_xscale("symlog", linthresh=lin)
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator
    # t = 0 and the decades above the linear part only (the default symlog
    # locator puts a decade label on top of the label of 0)
    k0 = int(np.ceil(np.log10(lin) + 0.5))
    k1 = int(np.floor(np.log10(float(a["t"][-1]))))
    ax.xaxis.set_major_locator(FixedLocator([0.0] + [10.0 ** k for k in range(k0, k1 + 1)]))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_major_formatter(FuncFormatter(
        lambda x, _: "0" if x == 0 else f"$10^{{{int(round(np.log10(x)))}}}$"))
    ax.set(xlabel="t", ylabel="relative gap to pseudo-inverse", title="App. G: same function along the flow")
    ax.legend(fontsize=8)
    return fig


_PLOTTERS = {
    "learning_curve": _learning_curve,
    "phase_one": _phase_one,
    "initial_moments": _initial_moments,
    "mode_strengths": _mode_strengths,
    "half_time_scaling": _half_time,
    "final_ntk": _final_ntk,
    "silent_alignment": _silent,
    "kernel_gap": _kernel_gap,
    "kernel_path": _kernel_path,
}


def plot(res):
    """Figure for a :class:`~linearnets.compare.Comparison`, dispatched on its ``kind``."""
    if getattr(res, "exception", ""):
        raise ValueError(f"{res.name} raised ({res.exception}); an ERROR row has no figure")
    if res.kind not in _PLOTTERS:
        raise ValueError(f"no figure for kind {res.kind!r}; known: {', '.join(_PLOTTERS)}")
    fig = _PLOTTERS[res.kind](res)
    _title(fig, res)
    return fig
