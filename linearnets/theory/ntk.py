"""Final neural tangent kernel of deep linear networks trained from small initialisation."""
from __future__ import annotations

__all__ = ['final_ntk', 'final_ntk_multi', 'final_alignment']


def final_ntk(X1, X2, beta, s, depth):
    raise NotImplementedError("not implemented yet")


def final_ntk_multi(X1, X2, Syx, depth):
    raise NotImplementedError("not implemented yet")


def final_alignment(depth, n):
    raise NotImplementedError("not implemented yet")
