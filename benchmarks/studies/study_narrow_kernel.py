"""Would hand-written loops make the gradient of a narrow network faster than BLAS calls?

``_kernels.rhs_flat`` forms the gradient ``dW_i = eta_i A_i^T G_i`` through ``np.dot``
(BLAS) on views of flat buffers, in the order of the numpy reference ``_rhs.rhs``.  On a narrow network each
of those products is a few hundred to a few thousand multiply-adds, and the cost of a
BLAS call itself, not its arithmetic, sets the time.  This script times, in compiled
loops (no Python between calls), ``rhs_flat`` beside :func:`hand_rhs`: the same partial
products written as loops over 2-D views, ordered so that the compiler can vectorise
them without reassociating sums (the top chain and the updates as ``row += s * row``;
the bottom chain's dot products in four interleaved partial sums).  It prints the time
per gradient of each, their ratio, and their difference in units of eps times the
largest entry (they round differently: the sums run in another order).

What it shows on this machine: the loops win only with one output, and only a little
(1.35-1.8x on the 20-32-32-1 and 10-50-50-50-1 networks over three runs; 1.9-2.1
against 3.3-3.6 us on the first, the small problem of ``bench_flow.py``), and lose 1.3-3.6x with 4
to 10 outputs, where BLAS's register blocking of the C-row products pays.  Not adopted:
the loops round differently from the numpy reference, whose steps the compiled
steppers reproduce exactly (the backends' agreement rests on that), and on the small
problem, where the gradient is about half of the 6.2 us an evaluation costs in the
stepping loop and none of the call's 0.5 ms fixed cost, they would save 1.3-1.6 us
of each of its 188 evaluations: the ratio to scipy's RK45 would rise from about 6x to
about 7x.

Usage::

    python benchmarks/studies/study_narrow_kernel.py
"""
from __future__ import annotations

import os
import sys
import time

import numpy as np
from numba import njit

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import linearnets as ln  # noqa: E402
from linearnets.data import teacher_task  # noqa: E402
from linearnets.sim.models import _linear_kernels as _kernels, linear as _rhs  # noqa: E402
from linearnets.sim.models.linear import chain_layout, numba_rhs_args  # noqa: E402

#: Networks timed (layer sizes, input first), narrowest first.
NETWORKS = ((20, 32, 32, 1), (8, 16, 16, 8), (10, 50, 50, 50, 1), (32, 64, 64, 4),
            (64, 128, 128, 10), (128, 256, 256, 10))
#: Gradient calls per timed loop for a network of 1,000 parameters (in inverse proportion
#: to the size for others, at least 100), and timed loops (the best counts).
CALLS, LOOPS = 100_000, 5
#: Largest difference of the two gradients allowed, in eps times the largest entry: they
#: sum the same O(1) products in other orders, which moves an entry by a few eps.
AGREE_EPS = 100.0


@njit(cache=True, inline="always")
def _times(A, W, out):
    """``out = A W`` (A: C x r, W: r x c) as row updates ``out[a] += A[a, p] W[p]``."""
    for a in range(out.shape[0]):
        for q in range(out.shape[1]):
            out[a, q] = 0.0
        for p in range(W.shape[0]):
            s = A[a, p]
            for q in range(W.shape[1]):
                out[a, q] += s * W[p, q]


@njit(cache=True)
def hand_rhs(y, out, Sxx, Syx, eta_l, rows, cols, offs, abuf, aoff, gbuf, goff, wend):
    """``dy/dt`` at ``y`` (n,) into ``out``: the gradient of ``_rhs.rhs`` in loops.

    Layout of ``models.linear.chain_layout``, except that ``A_i`` (C x rows[i], the product
    ``W_{L-1} ... W_{i+1}``) is stored untransposed; ``wend`` (C x D) is scratch for the
    end-to-end map.
    """
    L = rows.shape[0]
    C, D = Syx.shape
    if L == 1:
        wend[:, :] = y[offs[0]:offs[1]].reshape((C, D))
    else:
        top = y[offs[L - 1]:offs[L]]
        for m in range(C * rows[L - 2]):
            abuf[aoff[L - 2] + m] = top[m]
        for i in range(L - 3, -1, -1):
            _times(abuf[aoff[i + 1]:aoff[i + 2]].reshape((C, rows[i + 1])),
                   y[offs[i + 1]:offs[i + 2]].reshape((rows[i + 1], cols[i + 1])),
                   abuf[aoff[i]:aoff[i + 1]].reshape((C, rows[i])))
        _times(abuf[aoff[0]:aoff[1]].reshape((C, rows[0])),
               y[offs[0]:offs[1]].reshape((rows[0], cols[0])), wend)
    # G_0 = E = Syx - W Sxx (Sxx symmetric: rows of Sxx are its columns)
    E = gbuf[goff[0]:goff[1]].reshape((C, D))
    _times(wend, Sxx, E)
    for a in range(C):
        for d in range(D):
            E[a, d] = Syx[a, d] - E[a, d]
    # G_i = G_{i-1} W_{i-1}^T: dot products of rows
    for i in range(1, L):
        Gp = gbuf[goff[i - 1]:goff[i]].reshape((C, cols[i - 1]))
        Gi = gbuf[goff[i]:goff[i + 1]].reshape((C, cols[i]))
        W = y[offs[i - 1]:offs[i]].reshape((rows[i - 1], cols[i - 1]))
        n = cols[i - 1]
        main = n - n % 4
        for a in range(C):
            for r in range(rows[i - 1]):
                s0 = s1 = s2 = s3 = 0.0
                for k in range(0, main, 4):
                    s0 += Gp[a, k] * W[r, k]
                    s1 += Gp[a, k + 1] * W[r, k + 1]
                    s2 += Gp[a, k + 2] * W[r, k + 2]
                    s3 += Gp[a, k + 3] * W[r, k + 3]
                for k in range(main, n):
                    s0 += Gp[a, k] * W[r, k]
                Gi[a, r] = (s0 + s1) + (s2 + s3)
    # dW_i = eta_i A_i^T G_i (the top layer: eta G)
    for i in range(L):
        dW = out[offs[i]:offs[i + 1]].reshape((rows[i], cols[i]))
        Gi = gbuf[goff[i]:goff[i + 1]].reshape((C, cols[i]))
        eta = eta_l[i]
        if i == L - 1:
            for a in range(C):
                for q in range(cols[i]):
                    dW[a, q] = eta * Gi[a, q]
            continue
        Ai = abuf[aoff[i]:aoff[i + 1]].reshape((C, rows[i]))
        for p in range(rows[i]):
            for q in range(cols[i]):
                dW[p, q] = 0.0
            for a in range(C):
                s = eta * Ai[a, p]
                for q in range(cols[i]):
                    dW[p, q] += s * Gi[a, q]


@njit(cache=True)
def _loop_blas(n, y, out, Sxx, Syx, eta_l, lay, abuf, gbuf, scratch):
    for _ in range(n):
        _kernels.rhs_flat(y, out, Sxx, Syx, eta_l, lay, abuf, gbuf, scratch)


@njit(cache=True)
def _loop_hand(n, y, out, Sxx, Syx, eta_l, rows, cols, offs, abuf, aoff, gbuf, goff, wend):
    for _ in range(n):
        hand_rhs(y, out, Sxx, Syx, eta_l, rows, cols, offs, abuf, aoff, gbuf, goff, wend)


def _best(f, n):
    """Best time per call over LOOPS loops of n calls."""
    best = np.inf
    for _ in range(LOOPS):
        t0 = time.perf_counter()
        f(n)
        best = min(best, (time.perf_counter() - t0) / n)
    return best


def compare(sizes, seed=0):
    """``(us_blas, us_hand, diff)``: time per gradient of both kernels on a network
    of ``sizes`` away from its start (non-whitened data), and their largest
    difference in units of eps times the largest entry of the gradient."""
    C, D = sizes[-1], sizes[0]
    X, Y = teacher_task(4 * D, D, np.linspace(1.0, 0.5, min(C, D)), seed=seed, whiten=False)
    ws = ln.init_network(sizes, 0.5, seed=seed)
    problem = _rhs.make_problem([w.shape for w in ws], X, Y)
    y = _rhs.pack(ws)
    args = numba_rhs_args(problem)
    rows, cols, offs, aoff, goff = chain_layout(problem)
    hand_args = (args[0], args[1], args[2], rows, cols, offs, np.empty(aoff[-1]), aoff,
                 np.empty(goff[-1]), goff, np.empty((C, D)))
    ref, got = np.empty_like(y), np.empty_like(y)
    _kernels.rhs_flat(y, ref, *args)
    hand_rhs(y, got, *hand_args)
    diff = np.abs(got - ref).max() / (np.finfo(float).eps * np.abs(ref).max())
    if not diff <= AGREE_EPS:
        raise RuntimeError(f"the loops' gradient is {diff:.3g} eps from rhs_flat's on {sizes}")
    n = max(100, CALLS * 1000 // y.size)
    _loop_blas(1, y, ref, *args)
    _loop_hand(1, y, got, *hand_args)
    t_blas = _best(lambda k: _loop_blas(k, y, ref, *args), n)
    t_hand = _best(lambda k: _loop_hand(k, y, got, *hand_args), n)
    return t_blas * 1e6, t_hand * 1e6, diff


def main():
    print(f"{'network':22s} {'n':>7s} {'BLAS (us)':>10s} {'loops (us)':>11s} "
          f"{'BLAS / loops':>13s} {'difference (eps)':>17s}")
    for sizes in NETWORKS:
        b, h, d = compare(sizes)
        n = sum(a * c for a, c in zip(sizes[:-1], sizes[1:]))
        print(f"{'-'.join(map(str, sizes)):22s} {n:7d} {b:10.2f} {h:11.2f} {b / h:12.2f}x "
              f"{d:17.1f}", flush=True)


if __name__ == "__main__":
    main()
