"""``sweep plot``: the spec's own figure function, or a generic one.

A spec names its figure in ``[sweep] plot = "module:callable"``; the callable
receives ``(df, spec, out)`` (the results frame, the :class:`SweepSpec`, the
figure path), writes the figure and may print a table. Without one, the first
numeric result field is drawn against the first axis, one line per value of
the second axis, averaged over the others.
"""
from __future__ import annotations

import numpy as np

from .spec import resolve_function

__all__ = ["plot_sweep"]


def plot_sweep(spec, df, out):
    """Draw ``df`` (from :func:`linearnets.sweep.results_frame`) into the file ``out``."""
    if spec.plot:
        return resolve_function(spec.plot)(df, spec, out)
    import matplotlib.pyplot as plt

    done = df[df["status"] == "done"]
    fields = [c for c in df.columns if c not in ("status", "error", "attempts", "elapsed")
              and df[c].dtype != object]
    fig, ax = plt.subplots(figsize=(5, 3.6))
    if not fields or done.empty:
        ax.text(0.5, 0.5, "no completed points", ha="center", va="center")
    else:
        f = fields[0]
        names = list(df.index.names)
        x = names[0]
        if len(names) > 1:
            g = done.groupby(level=[x, names[1]])[f].mean()
            for val, sub in g.groupby(level=names[1]):
                ax.plot(sub.index.get_level_values(x), sub.values, "o-", label=f"{names[1]}={val:g}"
                        if isinstance(val, (int, float)) else f"{names[1]}={val}")
            ax.legend(fontsize=7)
        else:
            g = done.groupby(level=x)[f].mean()
            ax.plot(g.index.values, g.values, "o-")
        vals = np.asarray(done.index.get_level_values(x), dtype=float) if len(done) else np.array([1.0])
        if vals.min() > 0 and vals.max() / vals.min() > 100:
            ax.set_xscale("log")
        ax.set_xlabel(x)
        ax.set_ylabel(f)
    ax.set_title(spec.name)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return fig
