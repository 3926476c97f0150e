"""Command-line entry points: ``python -m linearnets <command>``.

``verify`` runs every registered theory-versus-simulation comparison
(:data:`linearnets.compare.CHECKS`), prints a table, writes one PNG per row and
a Markdown report to ``--out``, and exits with status 1 if any check fails.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

__all__ = ["main", "format_table", "write_report"]

_HEADER = ("check", "theory", "simulation", "error", "tolerance", "result")


def _fmt(x):
    if isinstance(x, str):
        return x
    if x != x:  # NaN
        return "nan"
    if x in (float("inf"), float("-inf")):
        return "inf" if x > 0 else "-inf"
    return f"{x:.4g}"


def format_table(results, markdown=False):
    """The verify table as text (aligned columns) or as a Markdown table.

    Parameters
    ----------
    results : sequence of Comparison
    markdown : bool

    Returns
    -------
    str
    """
    rows = [tuple(_fmt(v) for v in r.row()) for r in results]
    if markdown:
        lines = ["| " + " | ".join(_HEADER) + " |", "|" + "---|" * len(_HEADER)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines)
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(_HEADER)]
    line = "  ".join(h.ljust(w) for h, w in zip(_HEADER, widths))
    out = [line, "-" * len(line)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(out)


def write_report(results, out_dir, *, settings="", elapsed=None, figures=True):
    """Write ``report.md`` and one ``NAME.png`` per result into ``out_dir``.

    Returns
    -------
    str
        Path of the report.
    """
    os.makedirs(out_dir, exist_ok=True)
    n_fail = sum(not r.passed for r in results)
    lines = ["# linearnets verify: theory against simulation", ""]
    if settings:
        lines += [f"Settings: {settings}", ""]
    summary = f"{len(results) - n_fail} of {len(results)} checks passed"
    if elapsed is not None:
        summary += f" in {elapsed:.1f} s"
    lines += [summary + ".", "", format_table(results, markdown=True), ""]
    for r in results:
        lines += [f"## {r.name}: {r.title}", "",
                  f"- result: **{'PASS' if r.passed else 'FAIL'}**",
                  f"- quantity: {r.quantity}",
                  f"- theory {_fmt(r.theory)}, simulation {_fmt(r.simulation)}, "
                  f"error {_fmt(r.error)}, tolerance {_fmt(r.tolerance)}",
                  "- parameters: " + ", ".join(f"{k}={_fmt(v) if isinstance(v, float) else v}"
                                                for k, v in r.params.items()),
                  f"- {r.notes}", ""]
        if figures:
            fig = r.plot()
            fig.savefig(os.path.join(out_dir, f"{r.name}.png"), dpi=110)
            lines += [f"![{r.name}]({r.name}.png)", ""]
    path = os.path.join(out_dir, "report.md")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines))
    return path


def _verify(args):
    from .compare import CHECKS, run_checks

    if args.list:
        for c in CHECKS.values():
            print(f"{c.name:18s} {c.description}")
        return 0
    names = None
    if args.only:
        names = [n for item in args.only for n in item.split(",") if n]
        unknown = [n for n in names if n not in CHECKS]
        if unknown:
            print(f"unknown check(s): {', '.join(unknown)}; available: {', '.join(CHECKS)}", file=sys.stderr)
            return 2
    t0 = time.perf_counter()
    results = run_checks(names, full=args.full, seed=args.seed, backend=args.backend,
                         progress=not args.no_progress)
    elapsed = time.perf_counter() - t0
    print(format_table(results))
    n_fail = sum(not r.passed for r in results)
    settings = (f"{'full (paper-sized)' if args.full else 'small'}, seed={args.seed}, "
                f"backend={args.backend}")
    if not args.no_figures or args.out:
        path = write_report(results, args.out, settings=settings, elapsed=elapsed,
                            figures=not args.no_figures)
        print(f"\nreport: {path}")
    print(f"{len(results) - n_fail}/{len(results)} passed in {elapsed:.1f} s")
    return 1 if n_fail else 0


def main(argv=None):
    """Entry point of ``python -m linearnets``; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m linearnets",
                                     description="Theory and simulation of deep linear networks.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    v = sub.add_parser("verify", help="check every closed form against simulation (table, figures, report)",
                       description="Run the theory-versus-simulation comparisons, print a table, "
                                   "write figures and a Markdown report; exit 1 if any check fails.")
    v.add_argument("--only", action="append", metavar="NAME",
                   help="run only this check (repeatable or comma-separated); see --list")
    v.add_argument("--list", action="store_true", help="list the checks and exit")
    v.add_argument("--full", action="store_true", help="paper-sized settings (slow)")
    v.add_argument("--backend", default="auto", help="integrator backend: auto, numpy, numba, cupy")
    v.add_argument("--seed", type=int, default=0, help="random seed (data and initialisation)")
    v.add_argument("--out", default="linearnets-report", help="output folder (default: %(default)s)")
    v.add_argument("--no-figures", action="store_true", help="skip the PNG figures")
    v.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    if args.command == "verify":
        import matplotlib
        if "matplotlib.pyplot" not in sys.modules:
            matplotlib.use("Agg")
        return _verify(args)
    parser.error(f"unknown command {args.command}")  # pragma: no cover
