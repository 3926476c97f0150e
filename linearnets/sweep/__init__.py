"""Sweeps: a grid of independent calls ``fn(**params) -> dict``, stored as they complete.

:func:`sweep` runs on a local process pool by default or on a Dask cluster given its
scheduler address; an SQLite store on the driver's disk makes every run resumable.
The command line (``python -m linearnets sweep run | status | export | plot SPEC.toml``)
reads the same sweeps from TOML specs. The engine knows nothing of networks.

This module is callable: ``linearnets.sweep(fn, grid, ...)`` is ``linearnets.sweep.sweep(fn,
grid, ...)``, so ``ln.sweep(...)`` and ``ln.sweep.stream(...)`` (and ``import linearnets.sweep``)
all work as documented.
"""
import inspect
import sys
import types

from .engine import SweepInterrupted, results_frame, run_sweep, sweep, sweep_status
from .executors import MainGuardError
from .seeding import point_rng, point_seed_sequence, stream
from .spec import SpecError, load_spec

__all__ = ["sweep", "run_sweep", "results_frame", "sweep_status", "load_spec", "SpecError",
           "SweepInterrupted", "MainGuardError", "point_rng", "point_seed_sequence", "stream"]


class _CallableModule(types.ModuleType):
    """The module ``linearnets.sweep``, callable as its function :func:`sweep`."""

    def __call__(self, *args, **kwargs):
        return sweep(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
__signature__ = inspect.signature(sweep)
