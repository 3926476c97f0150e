"""Prepare once, run many: :func:`prepare_flow` (the front end of ``flow.py``) and a warm-up."""
from __future__ import annotations

import numpy as np

from .flow import PreparedFlow, gradient_flow, prepare_flow

__all__ = ["prepare_flow", "PreparedFlow", "warm"]


def warm():
    """Load (or compile, the first time) the kernels of a small linear run, once per sweep
    worker (``[sweep] warmup = "linearnets.sim.prepared:warm"``)."""
    from ..data import scalar_teacher
    from ..network import init_network

    X, y, _ = scalar_teacher(8, 3, 1.0, seed=0)
    w = init_network((3, 4, 1), 0.3, seed=0)
    t = np.array([0.5, 1.0])
    gradient_flow(w, X, y, t, record=("ntk",))
    prepare_flow(X, y, (3, 4, 1), t).run(w)
