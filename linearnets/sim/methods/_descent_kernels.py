"""Compiled gradient-descent loop, for any model (numba; nothing here knows networks).

Gradient descent is the explicit Euler method with a fixed step and no error control:
``y_{k+1} = y_k + lr f(y_k)`` with ``f = -R grad L`` the model's right-hand side at eta = 1
(``R`` the rates ``lr_scales``).  :func:`make_gd_advance` builds the loop around a model's
``rhs(y, out, data)`` (as ``_erk_kernels.make_erk_advance`` builds the adaptive loop); the
returned ``@njit(nogil=True)`` dispatcher is not cached by itself: a model calls it from a
module-level ``@njit(cache=True, nogil=True)`` entry point of its own module
(``models/_mlp_kernels.gd_advance``, ``models/_linear_kernels.gd_advance``).
:func:`make_sgd_advance` is the mini-batch loop: a model's ``load(data, full, idx)`` puts a
batch's samples into its data before each step (``models/_mlp_kernels.sgd_advance``).
"""
from __future__ import annotations

from ..._numba_cache import njit

__all__ = ["make_gd_advance", "make_sgd_advance", "euler_step"]


@njit(cache=True, nogil=True, inline="always")
def euler_step(y, g, lr):
    """``y <- y + lr g`` in place where every entry of the result is finite (True); else
    ``y`` untouched (False)."""
    size = y.shape[0]
    bad = 0.0                   # v - v is 0 for a finite v, NaN otherwise
    for i in range(size):
        v = y[i] + lr * g[i]
        bad += v - v
    if not bad == 0.0:
        return False
    for i in range(size):
        y[i] += lr * g[i]
    return True


def make_gd_advance(rhs):
    """``advance(y, g, n, lr, data) -> int``: up to ``n`` steps ``y <- y + lr rhs(y)`` in place
    (``g`` (n,) the scratch of the right-hand side); returns the steps taken, fewer than
    ``n`` where the next state would not be finite (``y`` is then the last finite state)."""

    @njit(nogil=True)
    def advance(y, g, n, lr, data):
        for k in range(n):
            rhs(y, g, data)
            if not euler_step(y, g, lr):
                return k
        return n

    return advance


def make_sgd_advance(rhs, load):
    """``advance(y, g, batches, lr, data, full) -> int``: a step on each row of ``batches``
    (m, b) (sample indices) in turn: ``load(data, full, idx)`` puts the samples ``idx`` of the
    full data ``full`` into the model's batch-sized ``data``, then the step of
    :func:`make_gd_advance`; returns the steps taken."""

    @njit(nogil=True)
    def advance(y, g, batches, lr, data, full):
        for k in range(batches.shape[0]):
            load(data, full, batches[k])
            rhs(y, g, data)
            if not euler_step(y, g, lr):
                return k
        return batches.shape[0]

    return advance
