"""``python -m linearnets sweep run | status | export | plot SPEC.toml``.

Errors in a spec (an unknown function, an unknown axis form, a missing store
folder, ...) print one line naming the problem and exit with status 2.  Ctrl-C
(SIGINT) during ``run`` prints one line, "interrupted: N of M points stored in STORE;
run the same command to resume", and exits with status 130.
"""
from __future__ import annotations

import os
import sys

__all__ = ["add_parser", "main"]


def add_parser(sub):
    """Add the ``sweep`` command (and its four subcommands) to an argparse subparsers object."""
    p = sub.add_parser("sweep", help="run, inspect, export and plot parameter sweeps (TOML specs)",
                       description="Parameter sweeps from a TOML spec, stored point by point in SQLite; "
                                   "re-running 'run' resumes.")
    ss = p.add_subparsers(dest="sweep_command", required=True, metavar="SUBCOMMAND")
    r = ss.add_parser("run", help="run the points not yet stored (resume)")
    r.add_argument("spec")
    r.add_argument("--full", action="store_true", help="the paper-sized grid ([full] table)")
    g = r.add_mutually_exclusive_group()
    g.add_argument("--jobs", type=int, default=None, metavar="N",
                   help="local worker processes (default: one per CPU; 0: in this process)")
    g.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT", help="a Dask scheduler address")
    r.add_argument("--retry-failed", action="store_true", help="run the failed points again")
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    s = ss.add_parser("status", help="counts of done / failed / pending points; lists the failed ones")
    s.add_argument("spec")
    s.add_argument("--full", action="store_true")
    e = ss.add_parser("export", help="write the results as CSV, parquet (pyarrow) or netCDF (xarray)")
    e.add_argument("spec")
    e.add_argument("--full", action="store_true")
    e.add_argument("--out", required=True, help="output file: .csv, .parquet or .nc")
    pl = ss.add_parser("plot", help="the spec's figure (its [sweep] plot function) and table")
    pl.add_argument("spec")
    pl.add_argument("--full", action="store_true")
    pl.add_argument("--out", default=None, help="figure file (default: next to the spec, NAME.png)")
    return p


def _export(df, out):
    ext = os.path.splitext(out)[1].lower()
    if ext == ".csv":
        flat = df.copy()
        for c in flat.columns:
            if flat[c].dtype == object and c not in ("status", "error"):
                flat[c] = [(" ".join(repr(float(x)) for x in v.ravel()) if hasattr(v, "ravel") else v)
                           for v in flat[c]]
        flat.to_csv(out)
    elif ext == ".parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise RuntimeError("parquet export needs pyarrow: pip install pyarrow") from None
        flat = df.copy()
        for c in flat.columns:
            if flat[c].dtype == object and c not in ("status", "error"):
                flat[c] = [(v.tolist() if hasattr(v, "tolist") else v) for v in flat[c]]
        flat.reset_index().to_parquet(out)
    elif ext in (".nc", ".netcdf"):
        try:
            import xarray  # noqa: F401
        except ImportError:
            raise RuntimeError("netCDF export needs xarray: pip install 'linearnets[data]'") from None
        arrays = [c for c in df.columns if df[c].dtype == object and c not in ("status", "error")]
        ds = df.drop(columns=arrays).to_xarray()
        for c in ("status", "error"):
            ds[c] = ds[c].astype(str)
        ds.attrs.update({k: str(v) for k, v in df.attrs.items() if k != "run"})
        if arrays:
            print(f"note: array-valued fields {arrays} are not written to netCDF (use CSV or parquet)",
                  file=sys.stderr)
        ds.to_netcdf(out)
    else:
        raise RuntimeError(f"unknown export format {ext!r} for {out!r} (use .csv, .parquet or .nc)")


def _run(args):
    from .engine import results_frame, run_sweep, sweep_status
    from .spec import load_spec

    spec = load_spec(args.spec, full=args.full)
    if args.sweep_command == "run":
        stats = run_sweep(spec, jobs=args.jobs, scheduler=args.scheduler, progress=not args.no_progress,
                          retry_failed=args.retry_failed)
        print(f"{spec.name}: {stats['done']}/{stats['total']} done, {stats['failed']} failed; "
              f"this run computed {stats['ran']} point(s) in {stats['elapsed']:.1f} s")
        return 0 if stats["failed"] == 0 else 1
    if args.sweep_command == "status":
        st = sweep_status(spec)
        print(f"{spec.name}: {st['total']} points: {st['done']} done, {st['failed']} failed, "
              f"{st['pending']} pending  (store {spec.store})")
        for params, err in st["failed_points"]:
            shown = {a.name: params[a.name] for a in spec.axes}
            print(f"  failed {shown}: {err.splitlines()[0] if err else ''}")
        return 0
    if args.sweep_command == "export":
        df = results_frame(spec)
        _export(df, args.out)
        print(f"wrote {len(df)} rows to {args.out}")
        return 0
    if args.sweep_command == "plot":
        import matplotlib
        if "matplotlib.pyplot" not in sys.modules:
            matplotlib.use("Agg")
        from .plot import plot_sweep
        out = args.out or os.path.join(os.path.dirname(spec.path), f"{spec.name}{'_full' if args.full else ''}.png")
        plot_sweep(spec, results_frame(spec), out)
        stem = os.path.splitext(out)[0]
        print(f"figure: {out}; table: {stem}.csv; provenance: {stem}.provenance.json")
        return 0
    raise AssertionError(args.sweep_command)  # pragma: no cover


def main(args):
    """Run a parsed ``sweep`` command; returns the exit status (2 for a bad spec)."""
    from .engine import SweepInterrupted
    from .spec import SpecError
    from .store import StoreLocked

    try:
        return _run(args)
    except SweepInterrupted as exc:   # Ctrl-C: one line, the shell's status for SIGINT
        print(exc, file=sys.stderr)
        return 130
    except KeyboardInterrupt:         # before any point ran (reading the spec, the imports)
        print(f"sweep {args.sweep_command}: interrupted", file=sys.stderr)
        return 130
    except (SpecError, StoreLocked, FileNotFoundError, RuntimeError) as exc:
        print(f"sweep {args.sweep_command}: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:  # bad values from the spec reaching the engine
        print(f"sweep {args.sweep_command}: {exc}", file=sys.stderr)
        return 2
