"""Command-line entry points: ``python -m linearnets <command>``.

``verify`` runs every registered theory-versus-simulation comparison
(:data:`linearnets.compare.CHECKS`) at the sizes of ``--preset`` (``small``, the
default; ``full``; ``paper``, the source papers' figure sizes; ``--full`` is
``--preset full``) and seed ``--seed``, prints a table headed by the settings,
writes one PNG per row and a Markdown report to ``--out``, and exits with status 1
if any check fails or raises (a check that raises is a row marked ERROR with its
message; the others still run and the report is still written). Every row is one
registered check and carries its name in ``--list``, ``--only``, the table, the
figure and the report. A bad ``--only``, ``--backend``, ``--preset`` or ``--seed``
is a usage error (status 2).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

from .backend import BACKENDS

__all__ = ["main", "format_table", "write_report", "background_warmup"]

_HEADER = ("check", "theory", "simulation", "error", "tolerance", "result")


def _fmt(x):
    if isinstance(x, str):
        return x
    if x != x:  # NaN
        return "nan"
    if x in (float("inf"), float("-inf")):
        return "inf" if x > 0 else "-inf"
    return f"{x:.4g}"


def format_table(results, markdown=False, title=""):
    """The verify table as text (aligned columns) or as a Markdown table.

    Parameters
    ----------
    results : sequence of Comparison
    markdown : bool
    title : str, optional
        A first line above the column names (``verify`` puts its preset, seed and
        backend there).

    Returns
    -------
    str
    """
    rows = [tuple(_fmt(v) for v in r.row()) for r in results]
    if not markdown:
        # an ERROR row's message can be long: keep the table legible, the report has it whole
        rows = [r if len(r[1]) <= 60 else (r[0], r[1][:57] + "...") + r[2:] for r in rows]
    head = [title] if title else []
    if markdown:
        lines = head + ["| " + " | ".join(_HEADER) + " |", "|" + "---|" * len(_HEADER)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines)
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(_HEADER)]
    line = "  ".join(h.ljust(w) for h, w in zip(_HEADER, widths))
    out = head + [line, "-" * len(line)]
    out += ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    return "\n".join(out)


def write_report(results, out_dir, *, settings="", elapsed=None, figures=True, seed=None):
    """Write ``report.md`` and one ``NAME.png`` per result into ``out_dir``.

    ``seed`` (the seed every row ran with) goes into the report's title.

    Returns
    -------
    str
        Path of the report.
    """
    os.makedirs(out_dir, exist_ok=True)
    n_fail = sum(not r.passed for r in results)
    n_err = sum(r.status == "ERROR" for r in results)
    heading = "# linearnets verify: theory against simulation"
    if seed is not None:
        heading += f", seed {seed}"
    lines = [heading, ""]
    if settings:
        lines += [f"Settings: {settings}", ""]
    summary = f"{len(results) - n_fail} of {len(results)} checks passed"
    if n_err:
        summary += f" ({n_err} raised an error)"
    if elapsed is not None:
        summary += f" in {elapsed:.1f} s"
    lines += [summary + ".", "", format_table(results, markdown=True), ""]
    for r in results:
        lines += [f"## {r.name}: {r.title}", "", f"- result: **{r.status}**"]
        if r.exception:
            lines += [f"- the check raised: `{r.exception}`", ""]
            continue
        if r.inequality:
            measured = f"- tested {r.inequality}: {_fmt(r.theory)} vs {_fmt(r.simulation)}"
        else:
            measured = (f"- theory {_fmt(r.theory)}, simulation {_fmt(r.simulation)}, "
                        f"error {_fmt(r.error)}, tolerance {_fmt(r.tolerance)}")
        lines += [f"- quantity: {r.quantity}", measured,
                  "- parameters: " + ", ".join(f"{k}={_fmt(v) if isinstance(v, float) else v}"
                                                for k, v in r.params.items()),
                  f"- {r.notes}", ""]
        if figures:
            try:
                fig = r.plot()
                fig.savefig(os.path.join(out_dir, f"{r.name}.png"), dpi=110)
            except Exception as exc:  # noqa: BLE001  a figure that fails does not lose the report
                lines += [f"- figure failed: `{type(exc).__name__}: {exc}`", ""]
            else:
                lines += [f"![{r.name}]({r.name}.png)", ""]
    path = os.path.join(out_dir, "report.md")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines))
    return path


def _verify(args):
    from .compare import CHECKS, run_checks

    if args.list:
        width = max(len(n) for n in CHECKS)
        for c in CHECKS.values():
            print(f"{c.name:{width}s}  {c.description}")
        return 0
    names = None
    if args.only:
        names = list(dict.fromkeys(n for item in args.only for n in item))
    t0 = time.perf_counter()
    results = run_checks(names, preset=args.preset, seed=args.seed, backend=args.backend,
                         progress=not args.no_progress)
    elapsed = time.perf_counter() - t0
    settings = f"preset={args.preset}, seed={args.seed}, backend={args.backend}"
    print(format_table(results, title=f"linearnets verify: {settings}"))
    n_fail = sum(not r.passed for r in results)
    if not args.no_figures or args.out:
        path = write_report(results, args.out, settings=settings, elapsed=elapsed,
                            figures=not args.no_figures, seed=args.seed)
        print(f"\nreport: {path}")
    print(f"{len(results) - n_fail}/{len(results)} passed in {elapsed:.1f} s")
    return 1 if n_fail else 0


def _check_names(value):
    """argparse type of ``--only``: comma-separated registered check names (else a usage error)."""
    from .compare import CHECKS

    names = [n.strip() for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in CHECKS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown check(s) {', '.join(unknown) or repr(value)}; available: {', '.join(CHECKS)}")
    return names


def _seed(value):
    """argparse type of ``--seed``: an integer >= 0 (else a usage error)."""
    if not value.strip().isdigit():
        raise argparse.ArgumentTypeError(f"seed must be an integer >= 0, got {value!r}")
    return int(value)


def background_warmup(nice=10):
    """The body of ``python -m linearnets warmup --background``: hold the warm-up lock (the
    descriptor inherited from :func:`linearnets._jit.start_warmer`, else taken here; another holder: return
    at once), lower this process's priority, compile every kernel, write the marker.

    Returns the :func:`linearnets._warmup.warmup` summary, or None where another warm-up holds
    the lock or the cache is already complete.
    """
    from . import _numba_cache
    from ._warmup import warmup

    fd = os.environ.pop("LINEARNETS_WARMUP_LOCK_FD", None)
    fd = int(fd) if fd and fd.isdigit() else _numba_cache.warmup_lock()
    if fd is None or _numba_cache.is_warm():
        return None
    try:
        os.nice(nice)
    except (AttributeError, OSError):
        pass
    try:
        info = warmup(progress=False)
    except BaseException as exc:
        if not isinstance(exc, KeyboardInterrupt):   # a failure, not a kill: say so, once
            _numba_cache.mark_warm({"error": f"{type(exc).__name__}: {exc}"}, failed=True)
        raise
    else:
        _numba_cache.mark_warm({k: info[k] for k in ("compiled", "loaded", "seconds")})
        return info
    finally:
        os.close(fd)


def main(argv=None):
    """Entry point of ``python -m linearnets``; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m linearnets",
                                     description="Theory and simulation of deep linear networks.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    v = sub.add_parser("verify", help="check every closed form against simulation (table, figures, report)",
                       description="Run the theory-versus-simulation comparisons, print a table, "
                                   "write figures and a Markdown report; exit 1 if any check fails.")
    v.add_argument("--only", action="append", metavar="NAME", type=_check_names,
                   help="run only this check (repeatable or comma-separated); the names of --list")
    v.add_argument("--list", action="store_true", help="list the checks and exit")
    from .compare import PRESETS
    size = v.add_mutually_exclusive_group()
    size.add_argument("--preset", default="small", choices=PRESETS,
                      help="problem sizes: small (default, minutes), full (larger, slow), "
                           "paper (the source papers' figure sizes, slowest)")
    size.add_argument("--full", dest="preset", action="store_const", const="full",
                      help="the same as --preset full")
    v.add_argument("--backend", default="auto", choices=BACKENDS,
                   help="integrator backend (default: %(default)s)")
    v.add_argument("--seed", type=_seed, default=0,
                   help="random seed of the data and initialisations, an integer >= 0 (default: 0)")
    v.add_argument("--out", default="linearnets-report", help="output folder (default: %(default)s)")
    v.add_argument("--no-figures", action="store_true", help="skip the PNG figures")
    v.add_argument("--no-progress", action="store_true", help="no progress bar")
    w = sub.add_parser("warmup", help="compile every numba kernel once (first use compiles them otherwise)")
    w.add_argument("--no-progress", action="store_true", help="no progress bar")
    w.add_argument("--background", action="store_true",
                   help="quiet and at low priority, one at a time per cache (what backend='auto' "
                        "starts on a first run; docs/first_run.md)")
    from .sweep import cli as _sweep_cli
    _sweep_cli.add_parser(sub)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # usage errors (status 2) and --help (0) as a return value
        return exc.code if isinstance(exc.code, int) else 2
    if args.command == "verify":
        import matplotlib
        if "matplotlib.pyplot" not in sys.modules:
            matplotlib.use("Agg")
        return _verify(args)
    if args.command == "sweep":
        return _sweep_cli.main(args)
    if args.command == "warmup":
        from . import _numba_cache
        if args.background:
            background_warmup()
            return 0
        from ._warmup import warmup
        info = warmup(progress=not args.no_progress)
        _numba_cache.mark_warm({k: info[k] for k in ("compiled", "loaded", "seconds")})
        print(f"warmup: {info['compiled']} kernels compiled, {info['loaded']} loaded from the cache, "
              f"in {info['seconds']:.1f} s (cache: {info['cache_dir']})")
        return 0
    parser.error(f"unknown command {args.command}")  # pragma: no cover
