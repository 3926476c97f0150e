"""The public gradient-flow integrator."""
from __future__ import annotations

__all__ = ['gradient_flow']


def gradient_flow(weights, X, Y, t_eval, eta=1.0, rtol=1e-8, atol=1e-12, backend='auto'):
    raise NotImplementedError("not implemented yet")
