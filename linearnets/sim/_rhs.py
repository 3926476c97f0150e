"""State layout and the numpy reference right-hand side of linear-network gradient flow.

State layout
------------
The integrators advance one flat, C-contiguous float64 vector ``y`` holding
``W_1, ..., W_L`` one after the other, each in row-major order.  Layer ``l``
(0-based ``i = l - 1``) has shape ``shapes[i] = (N_l, N_{l-1})`` and occupies
``y[offsets[i]:offsets[i + 1]]``.  :func:`pack` builds such a vector (a copy),
:func:`unpack` returns reshaped *views* into it, so a right-hand side can write
``dW_l`` straight into its output vector.

Right-hand side
---------------
With ``W = W_L ... W_1`` (C x D) and ``E = Syx - W Sxx`` (C x D),

    dW_l/dt = eta_l (W_L ... W_{l+1})^T E (W_{l-1} ... W_1)^T .

Every chain is carried through the narrow side (C rows):

* top products ``A_l = W_L ... W_{l+1}`` (C x N_l), built downwards and stored
  transposed, ``A_{l-1}^T = W_l^T A_l^T`` (BLAS is markedly faster on this N x C
  layout than on ``A_l W_l`` with C << N), ``A_L = I_C``, so ``W^T = A_0^T``;
* ``E = Syx - (Sxx W^T)^T`` (Sxx is symmetric);
* bottom products ``G_l = E W_1^T ... W_{l-1}^T`` (C x N_{l-1}), built upwards,
  ``G_1 = E``, ``G_{l+1} = G_l W_l^T`` (:func:`times_transpose`: computed as
  ``(W_l G_l^T)^T`` where ``W_l`` fits in a core's cache);
* ``dW_l = eta_l A_l^T G_l`` (an N_l x C times C x N_{l-1} product).

That is O(L) matrix products, ``O(3 C sum_l N_l N_{l-1} + C D^2)`` flops per
gradient, never an N x D partial product, and nothing depends on the number of
samples P.  ``eta_l = eta * lr_scale[l]`` leaves room for per-layer learning rates.

This module is the readable reference: the numba kernel (``_kernels.py``) and
other backends implement the same formulas (with the same product order, though not
the same rounding: the backends agree to the integration tolerance, not bit for bit).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.linalg import qr
from scipy.linalg.blas import dgemm, dsyrk

__all__ = [
    "chains",
    "layer_offsets",
    "pack",
    "unpack",
    "FlowProblem",
    "make_problem",
    "rhs",
    "TRANSPOSED_PRODUCT_MAX_BYTES",
    "times_transpose",
    "end_to_end_flat",
    "loss_from_end_to_end",
]


def layer_offsets(shapes):
    """Start offsets of each layer in the flat state, plus the total size.

    Parameters
    ----------
    shapes : sequence of (int, int)
        ``(N_l, N_{l-1})`` for ``l = 1..L``.

    Returns
    -------
    offsets : ndarray of int64, shape (L + 1,)
        Layer ``i`` lives in ``y[offsets[i]:offsets[i + 1]]``.
    """
    sizes = [int(r) * int(c) for r, c in shapes]
    return np.concatenate(([0], np.cumsum(sizes, dtype=np.int64))).astype(np.int64)


def pack(weights):
    """Concatenate ``[W_1, ..., W_L]`` row-major into a new flat float64 vector (n,)."""
    return np.ascontiguousarray(
        np.concatenate([np.asarray(w, dtype=np.float64).ravel() for w in weights]))


def unpack(y, shapes, offsets=None):
    """Views ``[W_1, ..., W_L]`` into the flat state ``y`` (n,) (no copy; writes go through).

    ``offsets`` (from :func:`layer_offsets`) may be passed to skip recomputing them.
    """
    offs = layer_offsets(shapes) if offsets is None else offsets
    return [y[offs[i]:offs[i + 1]].reshape(shapes[i]) for i in range(len(shapes))]


#: ``Sxx`` closer than this to the identity (max entry) counts as whitened.
WHITE_TOL = 16 * np.finfo(np.float64).eps


#: Largest layer (in bytes) whose ``G W^T`` is computed as ``(W G^T)^T``.  With C = 10
#: rows in G, OpenBLAS runs ``W G^T`` 1.7x faster than ``G W^T`` while W sits in a
#: core's L2 cache (256 x 256: 26.7 vs 46.5 us), 1.06-1.3x up to 2 MiB, and 1-4 %
#: slower beyond (1024 x 1024: 651 vs 628 us); 2 MiB is the L2 size of the machines
#: measured.  ``benchmarks/studies/study_products.py`` prints both for every benchmark layer.
TRANSPOSED_PRODUCT_MAX_BYTES = 1 << 21


def times_transpose(G, W):
    """``G W^T`` (C x N_l) for ``G`` (C x N_{l-1}) and ``W`` (N_l x N_{l-1}).

    Computed as ``(W G^T)^T`` -- the same numbers, a faster BLAS call for a cached
    ``W`` -- when ``W`` has at most ``TRANSPOSED_PRODUCT_MAX_BYTES`` (the compiled
    kernels take the same branch).
    """
    if 8 * W.size <= TRANSPOSED_PRODUCT_MAX_BYTES:
        return (W @ G.T).T
    return G @ W.T


@dataclass(frozen=True, eq=False)
class FlowProblem:
    """Everything a solver needs to integrate gradient flow of a linear network.

    Attributes
    ----------
    shapes : tuple of (int, int)
        Layer shapes ``(N_l, N_{l-1})``; ``shapes[0][1] = D``, ``shapes[-1][0] = C``.
    Sxx : ndarray, shape (D, D)
        Input second moment ``X^T X / P``.
    Syx : ndarray, shape (C, D)
        Input-output cross moment ``Y^T X / P``.
    eta_l : ndarray, shape (L,)
        Learning rate of each layer (``eta`` times a per-layer multiplier).
    X, Y : ndarray (P, D), ndarray (P, C)
        The samples, held for the loss at output times only (:func:`loss_from_end_to_end`);
        the integrator never reads them.  ``P`` is their number.
    loss_R, loss_Z, loss_res0 : ndarray (K, D), ndarray (K, C), float
        Thin-QR summary of the data for an accurate loss at many output times,
        computed on first use (derived, see :func:`loss_from_end_to_end`).
    white : bool
        Whether ``Sxx`` is the identity to within ``WHITE_TOL`` (derived).
    """

    shapes: tuple
    Sxx: np.ndarray
    Syx: np.ndarray
    eta_l: np.ndarray
    X: np.ndarray
    Y: np.ndarray
    offsets: np.ndarray = field(init=False)
    white: bool = field(init=False)
    _summary: list = field(init=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "_summary", [])
        object.__setattr__(self, "offsets", layer_offsets(self.shapes))
        D = self.Sxx.shape[0]
        # whitened data: solvers may skip the C x D x D product with the identity (Sxx = I
        # up to the rounding of X^T X / P itself, below which the product resolves nothing)
        object.__setattr__(self, "white",
                           bool(np.max(np.abs(self.Sxx - np.eye(D))) <= WHITE_TOL))

    @property
    def depth(self) -> int:
        return len(self.shapes)

    @property
    def size(self) -> int:
        """Length n of the flat state."""
        return int(self.offsets[-1])

    @property
    def max_width(self) -> int:
        return max(max(s) for s in self.shapes)

    @property
    def P(self) -> int:
        return int(self.X.shape[0])

    def loss_summary(self):
        """``(R, Z, res0)``: one triangular factor of ``[X | Y] = Q [[R, Z], [0, R_yy]]``
        holds all three pieces (``X = Q_1 R``, ``Z = Q_1^T Y``, ``res0 = |R_yy|^2`` the part
        of Y outside the span of X) without forming Q and without cancellation.  Computed
        once, on first use: the QR of the (P, D + C) samples costs ``2 P (D + C)^2`` FLOPs,
        more than the rest of a short run's set-up."""
        if not self._summary:
            P, D = self.X.shape
            # scipy's LAPACK, for the reason given in make_problem ("raw": R is (K', D + C)
            # as numpy's reduced one, the Householder factors overwrite the stacked copy)
            Rxy = qr(np.hstack((self.X, self.Y)), mode="raw", overwrite_a=True,
                     check_finite=False)[1]
            K = min(P, D)
            self._summary.extend((np.ascontiguousarray(Rxy[:K, :D]),
                                  np.ascontiguousarray(Rxy[:K, D:]),
                                  float(np.sum(Rxy[K:, D:] ** 2))))
        return tuple(self._summary)

    @property
    def loss_R(self):
        return self.loss_summary()[0]

    @property
    def loss_Z(self):
        return self.loss_summary()[1]

    @property
    def loss_res0(self):
        return self.loss_summary()[2]

    def rhs(self, y, out=None):
        """Reference right-hand side, see :func:`rhs`."""
        return rhs(y, self, out)


def make_problem(shapes, X, Y, eta=1.0, lr_scale=None):
    """Build a :class:`FlowProblem` from data ``X`` (P, D), ``Y`` (P, C), both float64 2-D.

    The sufficient statistics are computed once here, so the integrator never
    touches the P samples; they are held for the loss at output times
    (:func:`loss_from_end_to_end`).
    """
    P, D = X.shape
    # Through scipy's BLAS, the library the compiled kernels call: numpy's is another
    # build with threads of its own, which would still spin when the kernels start and
    # contend with theirs for the cores (on the large network of bench_flow.py the fixed
    # cost of a call was 176-196 ms that way, 116 ms this way).  syrk forms the upper
    # triangle only: Sxx comes out exactly symmetric (used as Sxx^T too), for half the
    # FLOPs.
    upper = dsyrk(1.0 / P, X.T)
    Sxx = np.ascontiguousarray(np.triu(upper) + np.triu(upper, 1).T)
    Syx = np.ascontiguousarray(dgemm(1.0 / P, Y.T, X.T, trans_b=1))
    L = len(shapes)
    scale = np.ones(L) if lr_scale is None else np.asarray(lr_scale, dtype=np.float64)
    eta_l = np.ascontiguousarray(eta * scale, dtype=np.float64)
    return FlowProblem(tuple((int(r), int(c)) for r, c in shapes), Sxx, Syx, eta_l, X, Y)


def chain_products(Ws, Sxx, Syx, white=False):
    """The partial products of the gradient at layers ``Ws``: ``(At, G)``, two lists of L arrays.

    ``At[i] = (W_L ... W_{i+2})^T`` (N_{i+1} x C, 0-based layer i; ``At[L-1]``, the
    identity, is None) and ``G[i] = E W_1^T ... W_i^T`` (C x N_i, ``G[0] = E``), so that
    layer i moves by ``eta_i At[i] G[i]`` (``eta_i G[L-1]`` at the top).  The same
    products in the same order as the compiled ``_kernels.chains``, except that with
    ``white`` (``Sxx`` is the identity, ``FlowProblem.white``) the product with ``Sxx`` is
    skipped here.  Any array namespace (numpy or CuPy arrays alike).
    """
    L = len(Ws)
    At = [None] * L
    if L > 1:
        At[L - 2] = Ws[L - 1].T
        for i in range(L - 3, -1, -1):
            At[i] = Ws[i + 1].T @ At[i + 1]
        WT = Ws[0].T @ At[0]
    else:
        WT = Ws[0].T
    G = [Syx - (WT.T if white else (Sxx @ WT).T)]
    for i in range(1, L):
        G.append(times_transpose(G[-1], Ws[i - 1]))
    return At, G


def chains(y, problem):
    """:func:`chain_products` at the flat state ``y`` (n,) of ``problem``."""
    return chain_products(unpack(y, problem.shapes, problem.offsets), problem.Sxx, problem.Syx,
                          problem.white)


def velocity(At, G, eta_l, dWs, xp=np):
    """Write ``dW_i = eta_i At[i] G[i]`` (``eta_i G[L-1]`` at the top) into the views ``dWs``."""
    L = len(dWs)
    for i in range(L):
        if i == L - 1:
            xp.multiply(G[i], eta_l[i], out=dWs[i])
        else:
            xp.matmul(At[i], G[i], out=dWs[i])
            if eta_l[i] != 1.0:
                dWs[i] *= eta_l[i]


def rhs(y, problem, out=None):
    """Gradient-flow velocity ``dy/dt`` at state ``y`` (n,), narrow-side ordering.

    Parameters
    ----------
    y : ndarray, shape (n,)
        Flat state (see the module docstring).
    problem : FlowProblem
    out : ndarray, shape (n,), optional
        Written in place and returned if given.

    Returns
    -------
    dy : ndarray, shape (n,)
    """
    if out is None:
        out = np.empty_like(y)
    At, G = chains(y, problem)
    velocity(At, G, problem.eta_l, unpack(out, problem.shapes, problem.offsets))
    return out


def end_to_end_flat(y, shapes, offsets=None):
    """End-to-end map ``W_L ... W_1`` (C, D) of the flat state ``y``, multiplied from the top."""
    Ws = unpack(y, shapes, offsets)
    W = Ws[-1]
    for w in Ws[-2::-1]:
        W = W @ w
    return np.array(W, dtype=np.float64, copy=True)


def loss_from_end_to_end(W, problem):
    """Training loss ``(1/2P) |Y - X W^T|^2`` for end-to-end maps ``W`` (..., C, D).

    Nonnegative and accurate to the rounding of the residual's terms, without the
    ``tr Syy - 2 <W, Syx> + <W Sxx, W>`` cancellation: from the residual itself
    (``2 P D C`` FLOPs a map) for a few maps, from the thin-QR summary
    (``FlowProblem.loss_summary``, once ``2 P (D + C)^2``, then ``O(K D C)`` a map,
    independent of P) for many, whichever costs less; once the summary exists it is
    always used.
    """
    W = np.asarray(W)
    C, D = W.shape[-2:]
    maps = int(np.prod(W.shape[:-2], dtype=np.int64))
    if not problem._summary and maps * D * C < (D + C) ** 2:
        losses = np.empty(maps)
        for m, w in enumerate(W.reshape(maps, C, D)):
            # X w^T through scipy's BLAS (see make_problem), transposed views: no copies
            R = problem.Y - dgemm(1.0, problem.X.T, w.T, trans_a=1)
            losses[m] = 0.5 * float(np.sum(R * R)) / problem.P
        return losses.reshape(W.shape[:-2])[()]
    M = problem.loss_Z - np.einsum("kd,...cd->...kc", problem.loss_R, W)
    return 0.5 * (problem.loss_res0 + np.sum(M * M, axis=(-2, -1))) / problem.P
