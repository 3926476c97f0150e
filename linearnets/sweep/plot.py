"""``sweep plot``: the spec's own figure function, or a generic one, and the figure's table.

A spec names its figure in ``[sweep] plot = "module:callable"``; the callable
receives ``(df, spec, out)`` (the results frame, the :class:`SweepSpec`, the
figure path), writes the figure and may print a table. Without one, the first
numeric result field is drawn against the first axis, one line per value of
the second axis, averaged over the others.

Beside the figure ``NAME.png`` go ``NAME.csv``, its results table (the rows of
``[sweep] table = "module:callable"``, called with the results frame, or
without one the completed points), and ``NAME.provenance.json``: the package
version and git commit that drew them and the versions and commits that
computed the stored points.
"""
from __future__ import annotations

import collections
import datetime
import json
import os

import numpy as np

from .spec import resolve_function

__all__ = ["plot_sweep", "write_table"]


def plot_sweep(spec, df, out):
    """Draw ``df`` (from :func:`linearnets.sweep.results_frame`) into the file ``out``, and write
    its table and provenance beside it (:func:`write_table`)."""
    fig = _figure(spec, df, out)
    write_table(spec, df, out)
    return fig


def write_table(spec, df, out):
    """Write ``<out stem>.csv`` and ``<out stem>.provenance.json`` beside the figure ``out``.

    Parameters
    ----------
    spec : SweepSpec
    df : pandas.DataFrame
        The results frame (:func:`linearnets.sweep.results_frame`).
    out : str
        The figure's path.

    Returns
    -------
    (str, str)
        The paths of the CSV and of the provenance file.
    """
    import pandas as pd

    from .store import Store

    stem = os.path.splitext(out)[0]
    if spec.table:
        table = pd.DataFrame(resolve_function(spec.table)(df))
    else:
        done = df[df["status"] == "done"]
        table = done[[c for c in done.columns if c not in ("status", "error") and done[c].dtype != object]]
        table = table.reset_index()
    csv = stem + ".csv"
    table.to_csv(csv, index=False)
    made = collections.Counter()
    if os.path.exists(spec.store):
        with Store(spec.store, readonly=True) as st:
            keys = {k for k, _ in spec.points()}
            for k, r in st.rows().items():
                if k in keys and r["status"] == "done":
                    p = r["provenance"]
                    made[(p.get("package_version"), p.get("git_sha"), p.get("git_dirty"))] += 1
    info = dict(
        figure=os.path.basename(out), table=os.path.basename(csv),
        spec=os.path.relpath(spec.path, os.path.dirname(os.path.abspath(out))) if spec.path else None, sweep=spec.name,
        sweep_version=spec.version, points_done=int((df["status"] == "done").sum()), points=len(df),
        written=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        written_by=_drawn_by(spec),
        points_computed_by=[dict(package_version=v, git_sha=g, git_dirty=d, points=n)
                            for (v, g, d), n in made.most_common()])
    prov = stem + ".provenance.json"
    with open(prov, "w") as fh:
        json.dump(info, fh, indent=1, default=str)
        fh.write("\n")
    return csv, prov


def _drawn_by(spec):
    """Version and commit of the package, and whether its sources or the spec's own modules
    (``*.py``, ``*.toml`` beside it) differ from that commit."""
    from .engine import _git_dirty, provenance

    prov = provenance()
    dirty = prov["git_dirty"]
    if spec.path and dirty is not None:
        dirty = dirty or bool(_git_dirty(os.path.dirname(spec.path), ("*.py", "*.toml")))
    return dict(package_version=prov["package_version"], git_sha=prov["git_sha"], git_dirty=dirty,
                python=prov["python"])


def _figure(spec, df, out):
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
