"""Prepare once, run many: :func:`prepare_flow` (the front end of ``flow.py``) and a warm-up.

A phase diagram runs thousands of small networks of one architecture on one data set;
:func:`prepare_flow` validates the arguments and summarises the data once, and
:meth:`PreparedFlow.run` integrates from each initialisation, the very run that
``gradient_flow`` makes (``gradient_flow`` is ``prepare_flow(...).run(weights)``).
"""
from __future__ import annotations

import numpy as np

from .flow import PreparedFlow, gradient_flow, prepare_flow

__all__ = ["prepare_flow", "PreparedFlow", "warm"]


def warm():
    """Load (or compile, the first time) the kernels of a small linear run: a sweep's worker warm-up.

    ``[sweep] warmup = "linearnets.sim.prepared:warm"`` in a spec runs it once per
    worker, so the first point of each worker does not pay for loading the
    compiled kernels.
    """
    from ..data import scalar_teacher
    from .network import init_network

    X, y, _ = scalar_teacher(8, 3, 1.0, seed=0)
    w = init_network((3, 4, 1), 0.3, seed=0)
    t = np.array([0.5, 1.0])
    gradient_flow(w, X, y, t, record=("ntk",))
    prepare_flow(X, y, (3, 4, 1), t).run(w)
