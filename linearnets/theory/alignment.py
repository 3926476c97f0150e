"""Phase I (early, small-initialisation) alignment dynamics of two-layer networks."""
from __future__ import annotations

__all__ = ['qr_trajectory', 'qr_initial_moments', 'qr_full_path']


def qr_trajectory(t, s, q0, r0, eta=1.0):
    raise NotImplementedError("not implemented yet")


def qr_initial_moments(width, input_dim, sigma):
    raise NotImplementedError("not implemented yet")


def qr_full_path(t, s, q0, r0=0.0, eta=1.0):
    raise NotImplementedError("not implemented yet")
