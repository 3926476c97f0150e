"""Compiled gradient-descent loop, for any model (numba; nothing here knows networks).

Gradient descent is the explicit Euler method with a fixed step and no error control:
``y_{k+1} = y_k + lr f(y_k)`` with ``f = -R grad L`` the model's right-hand side at eta = 1
(``R`` the rates ``lr_scales``).  :func:`make_gd_advance` builds the loop around a model's
``rhs(y, out, data)`` (as ``_erk_kernels.make_erk_advance`` builds the adaptive loop); the
returned ``@njit(nogil=True)`` dispatcher is not cached by itself: a model calls it from a
module-level ``@njit(cache=True, nogil=True)`` entry point of its own module
(``models/_mlp_kernels.gd_advance``, ``models/_linear_kernels.gd_advance``).
"""
from __future__ import annotations

from ..._numba_cache import njit

__all__ = ["make_gd_advance", "GD_ADVANCE_ARGS"]

#: The arguments of a loop built by :func:`make_gd_advance`, in order.
GD_ADVANCE_ARGS = ("y", "g", "n", "lr", "data")


def make_gd_advance(rhs):
    """``advance(y, g, n, lr, data) -> int``: up to ``n`` steps ``y <- y + lr rhs(y)`` in place
    (``g`` (n,) the scratch of the right-hand side); returns the steps taken, fewer than
    ``n`` where the next state would not be finite (``y`` is then the last finite state)."""

    @njit(nogil=True)
    def advance(y, g, n, lr, data):
        size = y.shape[0]
        for k in range(n):
            rhs(y, g, data)
            bad = 0.0                   # v - v is 0 for a finite v, NaN otherwise
            for i in range(size):
                v = y[i] + lr * g[i]
                bad += v - v
            if not bad == 0.0:
                return k
            for i in range(size):
                y[i] += lr * g[i]
        return n

    return advance
