"""The linear model's compiled entry points into the generic stepping loops (numba).

The gradient flow of the deep linear network on its sufficient statistics,
``dW_l/dt = eta_l (W_L ... W_{l+1})^T (Syx - W Sxx) (W_{l-1} ... W_1)^T`` with
``W = W_L ... W_1`` (docs/conventions.md; Atanasov et al. 2022, Sec. 3),
is ``sim/_kernels.rhs_flat`` and its Jacobian-vector product ``sim/_kernels.jvp_flat``.
Here they get the model interface of the loops in ``methods/``, and the loops their
cached, module-level entry points:

* :func:`rhs` -- ``rhs(y, out, data)`` with ``data`` the tuple
  ``(Sxx, Syx, eta_l, rows, cols, offs, abuf, aoff, gbuf, goff, WT, SW, tbuf)``, the
  trailing arguments of ``rhs_flat`` (``_explicit.numba_rhs_args`` builds it);
* :func:`jvp` -- ``jvp(v, out, y, jdata)`` with ``jdata`` the trailing arguments of
  ``jvp_flat`` (``_stiff.CompiledFlow.jvp_args``), whose ``abuf``/``gbuf`` are those
  that ``rhs(y, ., data)`` filled;
* :func:`erk_advance` -- the adaptive embedded Runge-Kutta loop
  (``methods/_erk_kernels.make_erk_advance``) on :func:`rhs`;
* :func:`rosw_advance` -- the Rosenbrock-W loop
  (``methods/_rosw_kernels.make_rosw_advance``) on :func:`rhs` and :func:`jvp`;

``models/_linear_ops.py`` builds from these (and from the factored stages' kernels) the
operations that the runners of ``methods/compiled.py`` take.

The entry points are ``@njit(cache=True, nogil=True)`` functions of this module, so
numba caches each with the factory-built loop and the gradient compiled into it (a
loop that took its right-hand side as an argument would be recompiled in every
process).  The linear model's factored fast paths keep their own loops:
``_lowrank_kernels`` (rank-C factored stages) and ``_lowstorage_kernels`` (SSPRK104
in low-storage form).
"""
from __future__ import annotations

from ..._numba_cache import njit
from .._kernels import jvp_flat, rhs_flat
from ..methods._erk_kernels import make_erk_advance
from ..methods._rosw_kernels import make_rosw_advance

__all__ = ["rhs", "jvp", "erk_advance", "rosw_advance"]


@njit(cache=True, nogil=True)
def rhs(y, out, data):
    """``out = dy/dt`` at ``y`` (n,): ``_kernels.rhs_flat(y, out, *data)``."""
    rhs_flat(y, out, data[0], data[1], data[2], data[3], data[4], data[5], data[6], data[7],
             data[8], data[9], data[10], data[11], data[12])


@njit(cache=True, nogil=True)
def jvp(v, out, y, jdata):
    """``out = J(y) v``: ``_kernels.jvp_flat(v, out, y, *jdata)``."""
    jvp_flat(v, out, y, jdata[0], jdata[1], jdata[2], jdata[3], jdata[4], jdata[5], jdata[6],
             jdata[7], jdata[8], jdata[9], jdata[10], jdata[11], jdata[12], jdata[13], jdata[14])


_erk_loop = make_erk_advance(rhs)
_rosw_loop, _ = make_rosw_advance(rhs, jvp)


@njit(cache=True, nogil=True)
def erk_advance(y, K, y_new, th, t_target, t_out, stats, max_steps, tab, low, ctl, wd, stiff,
                pat, ybuf, data):
    """The embedded Runge-Kutta loop on the linear network (``_erk_kernels.make_erk_advance``
    documents the arguments and return codes; ``data`` as for :func:`rhs`)."""
    return _erk_loop(y, K, y_new, th, t_target, t_out, stats, max_steps, tab, low, ctl, wd,
                     stiff, pat, ybuf, data)


@njit(cache=True, nogil=True)
def rosw_advance(y, f0, U, work, th, stats, t_target, max_steps, a, c, mw, ew, gamma, ctl, base,
                 scratch, jv):
    """The Rosenbrock-W loop on the linear network (``_rosw_kernels.make_rosw_advance``
    documents the arguments and return codes; ``base``/``scratch`` as ``data`` of
    :func:`rhs`, ``jv`` as ``jdata`` of :func:`jvp`)."""
    return _rosw_loop(y, f0, U, work, th, stats, t_target, max_steps, a, c, mw, ew, gamma, ctl,
                      base, scratch, jv)
