"""Figure helpers of the verify rows (matplotlib, no pyplot state).

Figures are built with :class:`matplotlib.figure.Figure` directly, so they work
under any backend (Agg included) and never touch a global figure manager.
Simulation is drawn solid, theory dashed black, as in the papers' figures. Each
check's figure lives beside its check in the topic module and is named in its
registry entry; :meth:`~linearnets.compare.Comparison.plot` adds the title.
"""
from __future__ import annotations

import numpy as np

__all__ = ["THEORY", "figure", "colors", "title", "few_ticks", "value_ticks"]

#: Theory curves: dashed black (simulation is drawn solid, in colour).
THEORY = dict(color="k", ls="--", lw=1.2)


def figure(ncols=1, width=4.6, height=3.6):
    """A constrained-layout figure with ``ncols`` axes side by side -> (fig, 1-D array of axes)."""
    from matplotlib.figure import Figure
    fig = Figure(figsize=(width * ncols, height), layout="constrained")
    axes = fig.subplots(1, ncols)
    return fig, np.atleast_1d(axes)


def colors(n):
    """``n`` colours along viridis (simulated curves)."""
    from matplotlib import colormaps
    cmap = colormaps["viridis"]
    return [cmap(x) for x in np.linspace(0.0, 0.85, max(n, 1))]


def title(fig, res):
    """The figure's title: the row's title, status, and error against tolerance (or the inequality)."""
    import textwrap
    width = int(14 * fig.get_figwidth())
    if getattr(res, "inequality", ""):
        op = next((o for o in ("<=", ">=", "<", ">") if o in res.inequality), "<")
        text = f"{res.title}   [{res.status}: {res.inequality}: {res.theory:.3g} {op} {res.simulation:.3g}]"
    else:
        text = f"{res.title}   [{res.status}: error {res.error:.2g} / tol {res.tolerance:.2g}]"
    fig.suptitle("\n".join(textwrap.wrap(text, width)), fontsize=9)


def few_ticks(ax, axis="x", n=4):
    """At most ``n`` major tick labels on a linear axis (no overlapping labels)."""
    from matplotlib.ticker import MaxNLocator
    getattr(ax, f"{axis}axis").set_major_locator(MaxNLocator(n))


def value_ticks(ax, values, axis="x", fmt="{:g}"):
    """Ticks at exactly ``values`` (e.g. the simulated sigmas or the integer depths), no minor labels."""
    from matplotlib.ticker import FixedLocator, NullLocator
    values = np.asarray(values, float)
    a = getattr(ax, f"{axis}axis")
    a.set_major_locator(FixedLocator(values))
    a.set_minor_locator(NullLocator())
    getattr(ax, f"set_{axis}ticklabels")([fmt.format(v) for v in values])
