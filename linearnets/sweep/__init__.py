"""Sweeps: a grid of independent calls ``fn(**params) -> dict``, stored as they complete.

:func:`sweep` (re-exported as ``linearnets.sweep``) runs on a local process
pool by default or on a Dask cluster given its scheduler address; an SQLite
store on the driver's disk makes every run resumable. The command line
(``python -m linearnets sweep run | status | export | plot SPEC.toml``) reads
the same sweeps from TOML specs. The engine knows nothing of networks.
"""
from .engine import results_frame, run_sweep, sweep, sweep_status
from .seeding import point_rng, point_seed_sequence, stream
from .spec import SpecError, load_spec

__all__ = ["sweep", "run_sweep", "results_frame", "sweep_status", "load_spec", "SpecError",
           "point_rng", "point_seed_sequence", "stream"]
