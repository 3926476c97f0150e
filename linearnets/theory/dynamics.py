"""Mode dynamics of deep linear networks: c(t), its inverse, time scales, loss curves."""
from __future__ import annotations

__all__ = ['mode_strength', 'mode_time', 'half_time', 'plateau_time', 'loss_curve']


def mode_strength(t, s, c0, depth=2, eta=1.0):
    raise NotImplementedError("not implemented yet")


def mode_time(c, s, c0, depth=2, eta=1.0):
    raise NotImplementedError("not implemented yet")


def half_time(s, c0, depth=2, eta=1.0):
    raise NotImplementedError("not implemented yet")


def plateau_time(s, c0, depth=2, eta=1.0):
    raise NotImplementedError("not implemented yet")


def loss_curve(t, s, c0, depth=2, eta=1.0):
    raise NotImplementedError("not implemented yet")
