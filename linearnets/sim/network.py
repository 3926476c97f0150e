"""Deep linear networks: initialisation, forward map, end-to-end map."""
from __future__ import annotations

__all__ = ['init_network']


def init_network(layer_sizes, sigma, seed=0):
    raise NotImplementedError("not implemented yet")
