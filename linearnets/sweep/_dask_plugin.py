"""The Dask worker plugin (imported only when a scheduler address is given)."""
from __future__ import annotations

from distributed.diagnostics.plugin import WorkerPlugin

from ._worker import init_worker


class SweepWorkerPlugin(WorkerPlugin):
    """Limit BLAS / numba threads to one and run the sweep's warm-up once per worker.

    Dask's nanny sets ``OMP_NUM_THREADS`` and friends, not ``NUMBA_NUM_THREADS``.
    """

    name = "linearnets-sweep"

    def __init__(self, warmup=None):
        self.warmup = warmup

    def setup(self, worker):
        init_worker(self.warmup)
