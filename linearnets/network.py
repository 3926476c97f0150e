"""Networks: initialisation, forward map, end-to-end map, empirical NTK.

A network is a list ``[W_1, ..., W_L]`` with ``W_l`` of shape ``(N_l, N_{l-1})``,
``N_0 = D`` inputs and ``N_L = C`` outputs; it computes ``f(x) = W_L ... W_1 x``.
"""
from __future__ import annotations

import numpy as np

from . import _threads
from .options import parse_options
from ._validation import (array_list, as_float_array, check_depth, check_layer_sizes,
                          check_matrix, check_positive, ldexp_safe, pow2_normalise, rng_from_seed)

__all__ = ["init_network", "init_balanced", "forward", "end_to_end", "check_weights",
           "check_layer_sizes", "empirical_ntk"]


def check_biases(biases, shapes, name="biases"):
    """Validate ``[b_1, ..., b_{L-1}]`` (``b_l`` shape (N_l,)) against the weight shapes.

    Returns float64 copies, or None for ``biases=None``; ``ValueError`` naming
    ``biases`` for a wrong length, shape or a non-finite entry.
    """
    if biases is None:
        return None
    bs = array_list(biases, name, 1, "a list [b_1, ..., b_(L-1)] of 1-D arrays")
    L = len(shapes)
    if len(bs) != L - 1:
        raise ValueError(f"{name} must have L - 1 = {L - 1} entries (one per hidden layer), "
                         f"got {len(bs)}")
    out = [np.array(as_float_array(b, f"{name}[{i}]"), copy=True) for i, b in enumerate(bs)]
    for i, arr in enumerate(out):
        if arr.shape != (shapes[i][0],):
            raise ValueError(f"{name}[{i}] must have shape ({shapes[i][0]},), got {arr.shape}")
    return out


def widths_of(shapes):
    """The widths ``(D, N_1, ..., C)`` of the weight shapes ``(N_l, N_{l-1})`` (a diagonal
    network's ``(D,)``: ``(D, D, D)``)."""
    first, *_ = shapes
    return (first[-1],) + tuple(rows for rows, *_ in shapes)


def largest_layer(shapes):
    """The largest ``N_l N_{l-1}`` of the weight shapes (a layer's products per row)."""
    widths = widths_of(shapes)
    return max(a * b for a, b in zip(widths, widths[1:]))


def bias_shapes(shapes):
    """The shapes ``(N_l,)`` of the hidden biases ``b_1, ..., b_{L-1}``."""
    return [(rows,) for rows, *_ in shapes[:-1]]


def check_weights(weights, name="weights"):
    """C-contiguous float64 *copies* of the layers: a non-empty sequence of finite 2-D arrays
    whose shapes chain (``W_{l+1}.shape[1] == W_l.shape[0]``), else ``ValueError``."""
    ws = array_list(weights, name, 2, "a list of 2-D arrays [W_1, ..., W_L]")
    if not ws:
        raise ValueError(f"{name} must contain at least one layer")
    out = [np.array(check_matrix(w, f"{name}[{i}]"), dtype=np.float64, order="C", copy=True)
           for i, w in enumerate(ws)]
    for i in range(1, len(out)):
        if out[i].shape[1] != out[i - 1].shape[0]:
            raise ValueError(f"{name}[{i}] has shape {out[i].shape} but {name}[{i - 1}] has "
                             f"{out[i - 1].shape[0]} rows: shapes must chain")
    return out


def init_network(layer_sizes, sigma, seed=0):
    """Gaussian initialisation: every entry of ``W_l`` i.i.d. ``N(0, sigma^2 / N_{l-1})``.

    Parameters
    ----------
    layer_sizes : sequence of int
        ``(D, N_1, ..., N_{L-1}, C)``, depth ``L = len(layer_sizes) - 1``.
    sigma : float
        Scale, ``> 0``: entries of standard deviation ``sigma / sqrt(N_{l-1})``.
    seed : int >= 0, numpy.random.SeedSequence, Generator or None (fresh entropy)
        Reproducible: the same seed gives the same weights.

    Returns
    -------
    weights : list of ndarray (N_l, N_{l-1})

    Examples
    --------
    >>> ws = init_network((3, 5, 1), 0.1, seed=1)
    >>> [w.shape for w in ws]
    [(5, 3), (1, 5)]
    """
    sizes = check_layer_sizes(layer_sizes)
    sigma = float(check_positive(sigma, "sigma", ndim=0))
    rng = rng_from_seed(seed)
    return [sigma / np.sqrt(n_in) * rng.standard_normal((n_out, n_in))
            for n_in, n_out in zip(sizes[:-1], sizes[1:])]


def _orthonormal(rng, n, k):
    q, r = np.linalg.qr(rng.standard_normal((n, k)))
    return q * np.sign(np.where(np.diag(r) == 0, 1.0, np.diag(r)))


def init_balanced(layer_sizes, sigma, seed=0, rank=None, left=None, right=None):
    """Balanced small initialisation (Saxe, McClelland & Ganguli 2014).

    ``W_l = sigma R_l R_{l-1}^T`` with ``R_l`` (N_l, r) orthonormal columns: exactly balanced,
    ``W_{l+1}^T W_{l+1} = W_l W_l^T = sigma^2 R_l R_l^T``, and the end-to-end map
    ``sigma^L R_L R_0^T`` has r singular values ``c0 = sigma^L`` (docs/conventions.md,
    "Initialisation": not the ``sigma`` of :func:`init_network`).

    Parameters
    ----------
    layer_sizes : sequence of int
        ``(D, N_1, ..., C)``.
    sigma : float
        Per-layer scale (every nonzero singular value of every ``W_l``), ``> 0``.
    seed : int >= 0, numpy.random.SeedSequence, Generator or None (fresh entropy)
    rank : int, optional
        r, at most (and by default) the narrowest layer.
    left, right : array_like, shape (C, r) and (D, r), optional
        Orthonormal output and input directions ``R_L``, ``R_0`` (e.g. the task's u_alpha,
        v_alpha); random if omitted.

    Returns
    -------
    weights : list of ndarray (N_l, N_{l-1})

    Examples
    --------
    >>> u, v = np.array([[1.0]]), np.array([[0.6], [0.8]])
    >>> ws = init_balanced((2, 4, 1), 0.1, left=u, right=v)
    >>> np.round(end_to_end(ws), 12)
    array([[0.006, 0.008]])
    """
    sizes = check_layer_sizes(layer_sizes)
    sigma = float(check_positive(sigma, "sigma", ndim=0))
    rmax = min(sizes)
    for arr in (left, right):
        if arr is not None and rank is None:
            rank = np.shape(arr)[1] if np.ndim(arr) == 2 else 1
    r = rmax if rank is None else check_depth(rank, "rank")
    if r > rmax:
        raise ValueError(f"rank must be <= the narrowest layer ({rmax}), got {r}")
    rng = rng_from_seed(seed)
    R = [_orthonormal(rng, n, r) for n in sizes]

    for i, arr, nm in ((-1, left, "left"), (0, right, "right")):
        if arr is None:
            continue
        a = as_float_array(arr, nm, ndim=(1, 2))
        a = a.reshape(sizes[i], -1) if a.ndim == 1 else a
        if a.shape != (sizes[i], r):
            raise ValueError(f"{nm} must have shape ({sizes[i]}, {r}), got {a.shape}")
        if not np.allclose(a.T @ a, np.eye(r), atol=1e-10):
            raise ValueError(f"{nm} must have orthonormal columns")
        R[i] = a
    return [sigma * R[l + 1] @ R[l].T for l in range(len(sizes) - 1)]


def end_to_end(weights):
    """End-to-end map ``W_L … W_1``.

    Parameters
    ----------
    weights : list of ndarray (N_l, N_{l-1})

    Returns
    -------
    ndarray, shape (C, D)

    Examples
    --------
    >>> end_to_end([np.eye(2), 2 * np.eye(2)])
    array([[2., 0.],
           [0., 2.]])
    """
    W, e = _end_to_end_scaled(check_weights(weights))
    return ldexp_safe(W, e)


def _end_to_end_scaled(ws):
    """``(M, e)`` with ``W_L ... W_1 = M 2**e``: the product of the layers scaled exactly
    by powers of two, so that it cannot overflow on the way (docs/conventions.md, "Bad
    input and overflow")."""
    scaled = [pow2_normalise(w) for w in ws]
    W = scaled[-1][0]
    for w, _ in scaled[-2::-1]:
        W = W @ w
    return W, sum(e for _, e in scaled)


def forward(weights, X, *, activation="linear", biases=None, multipliers=None, alpha=1.0,
            centered=False, weights0=None, biases0=None):
    """The network's outputs ``F(x_mu)`` for the rows of ``X``, as the simulator defines them.

    ``h_0 = x``, ``z_l = m_l W_l h_{l-1} + b_l``, ``h_l = phi(z_l)`` for l < L, ``f(x) = m_L
    W_L h_{L-1}``; ``F = alpha f``, or ``F = alpha (f - f_0)`` when ``centered``, ``f_0`` the
    network of ``weights0`` and ``biases0`` (docs/conventions.md, "Beyond linear networks").
    The defaults give the linear network ``F(x) = W_L ... W_1 x``.  The simulator's own
    forward pass (``linearnets.sim.models.mlp.MLP``, that of ``record=("outputs",)``) computes
    it; the default linear network by its end-to-end map, scaled by powers of two so that it
    cannot overflow on the way.

    Parameters
    ----------
    weights : list of ndarray (N_l, N_{l-1})
        ``[W_1, ..., W_L]``, e.g. a :class:`~linearnets.Trajectory`'s ``weights``.
    X : array_like, shape (P, D)
    activation, biases, multipliers, alpha, centered
        As for :func:`linearnets.gradient_flow`: str or tuple, ``[b_1, ..., b_{L-1}]``
        (N_l,) or None, L floats > 0 or None, float > 0, bool.
    weights0, biases0 : list of ndarray, optional
        The parameters at t = 0 that ``f_0`` is computed from (``Trajectory.weights0`` and
        ``biases0``): required when ``centered`` (``biases0`` exactly when ``biases`` is
        given), refused otherwise.

    Returns
    -------
    ndarray, shape (P, C)

    Examples
    --------
    >>> forward([np.array([[1.0, 2.0]])], np.eye(2))
    array([[1.],
           [2.]])
    >>> ws = [np.array([[1.0], [-1.0]]), np.array([[1.0, 1.0]])]
    >>> forward(ws, np.array([[2.0]]), activation="relu", alpha=3.0)
    array([[6.]])
    """
    X = check_matrix(X, "X")
    ws = check_weights(weights)
    W1, *_ = ws
    if X.shape[1] != W1.shape[1]:
        raise ValueError(f"X has {X.shape[1]} columns but the network expects D={W1.shape[1]}")
    if (isinstance(activation, str) and activation == "linear" and biases is None
            and multipliers is None and not isinstance(alpha, bool) and alpha == 1.0
            and centered is False and weights0 is None and biases0 is None):
        W, e = _end_to_end_scaled(ws)
        Xs, ex = pow2_normalise(X)
        return ldexp_safe(Xs @ W.T, e + ex)
    from .sim.models.mlp import MLP

    shapes = tuple(w.shape for w in ws)
    options = parse_options(len(ws), activation=activation, multipliers=multipliers,
                            alpha=alpha, centered=centered)
    bs = check_biases(biases, shapes)
    if options.centered:
        if weights0 is None:
            raise ValueError("weights0: centered=True needs the weights at t = 0 (F = alpha "
                             "(f - f_0)), e.g. Trajectory.weights0")
        ws0 = check_weights(weights0, "weights0")
        if tuple(w.shape for w in ws0) != shapes:
            raise ValueError(f"weights0 must have the layer shapes of weights {shapes}, got "
                             f"{tuple(w.shape for w in ws0)}")
        if (biases0 is None) != (bs is None):
            raise ValueError("biases0: pass the biases at t = 0 exactly when biases are given")
        bs0 = check_biases(biases0, shapes, "biases0")
    elif weights0 is not None or biases0 is not None:
        raise ValueError("weights0, biases0: f_0 is read only when centered=True")
    else:
        ws0, bs0 = ws, bs
    net = MLP(ws0, bs0, options)
    return net.outputs(net.layout.pack(ws + (bs or [])), X)


# Empirical NTK of a deep linear network from partial products, ``K_ij(x, x') = sum_l
# [A_l A_l^T]_ij (B_l x)^T (B_l x')`` with ``A_l = W_L ... W_{l+1}`` (C, N_l) and ``B_l =
# W_{l-1} ... W_1`` (N_{l-1}, D) (docs/conventions.md: no 1/P, no learning rate).

def _ntk_blocks(ws, X1, X2):
    """The per-layer kernels' sum (P1, P2, C, C), scaled by powers of two against overflow."""
    C = ws[-1].shape[0]
    ws, ew = zip(*[pow2_normalise(w) for w in ws])
    ew = np.array(ew)
    (X1, e1), (X2, e2) = pow2_normalise(X1), pow2_normalise(X2)
    # layer l's kernel carries 2^(e1 + e2 + 2 sum_{k != l} e_k)
    expo = e1 + e2 + 2 * (int(ew.sum()) - ew)
    top = int(expo.max())
    tops = [np.eye(C)]          # tops[l] = W_L ... W_{l+2} (0-based: ws[L-1] ... ws[l+1])
    for w in ws[:0:-1]:
        tops.append(tops[-1] @ w)
    tops.reverse()
    K = np.zeros((X1.shape[0], X2.shape[0], C, C))
    H1, H2 = X1, X2
    for l, (w, A) in enumerate(zip(ws, tops)):
        K += ldexp_safe(np.multiply.outer(H1 @ H2.T, A @ A.T), int(expo[l]) - top)
        H1, H2 = H1 @ w.T, H2 @ w.T
    return ldexp_safe(K, top)


def empirical_ntk(weights, X1, X2, *, activation="linear", biases=None, multipliers=None,
                  alpha=1.0):
    """Empirical NTK ``K_ij(x, x') = sum_theta dF_i(x)/dtheta dF_j(x')/dtheta``.

    The default linear network's ``sum_l <df_i(x)/dW_l, df_j(x')/dW_l>_F`` from partial
    products; with the network keywords (docs/conventions.md, "Beyond linear networks") the
    NTK of ``F = alpha f`` over the weights and biases from the backpropagated ``delta_l =
    df/dz_l``, ``K = alpha^2 [m_L^2 h_{L-1}.h'_{L-1} I + sum_{l<L} (delta_l delta'_l^T)(m_l^2
    h_{l-1}.h'_{l-1} + 1_bias)]`` (``linearnets.sim.models.mlp``; centering leaves it alone).

    Parameters
    ----------
    weights : list of ndarray (N_l, N_{l-1})
        ``[W_1, ..., W_L]``.
    X1, X2 : array_like, shape (P1, D) and (P2, D)
    activation, biases, multipliers, alpha
        As for ``gradient_flow``: str or tuple, ``[b_1, ..., b_{L-1}]`` (N_l,) or None, L
        floats > 0 or None, float > 0.

    Returns
    -------
    ndarray
        (P1, P2) for one output, (P1, P2, C, C) for C > 1 outputs.

    Examples
    --------
    Depth one: the kernel is the Gram matrix of the inputs.

    >>> empirical_ntk([np.array([[1.0, 2.0]])], np.eye(2), np.eye(2))
    array([[1., 0.],
           [0., 1.]])
    """
    ws = check_weights(weights)
    W1, *_ = ws
    X1, X2, D = check_matrix(X1, "X1"), check_matrix(X2, "X2"), W1.shape[1]
    for X, nm in ((X1, "X1"), (X2, "X2")):
        if X.shape[1] != D:
            raise ValueError(f"{nm} has {X.shape[1]} columns but the network expects D={D}")
    widths = [D] + [w.shape[0] for w in ws]
    # the largest products: samples by a layer, and the (P1, N) @ (N, P2) Gram
    work = max(X1.shape[0], X2.shape[0]) * max(widths) * max(max(widths), X2.shape[0])
    with _threads.limited(work):
        return _ntk(ws, X1, X2, activation, biases, multipliers, alpha)


def _ntk(ws, X1, X2, activation, biases, multipliers, alpha):
    if (isinstance(activation, str) and activation == "linear" and biases is None
            and multipliers is None and not isinstance(alpha, bool) and alpha == 1.0):
        K = _ntk_blocks(ws, X1, X2)
        return K[:, :, 0, 0].copy() if K.shape[2] == 1 else K
    from .sim.models.mlp import MLP

    options = parse_options(len(ws), activation=activation, multipliers=multipliers,
                            alpha=alpha)
    bs = check_biases(biases, tuple(w.shape for w in ws))
    net = MLP(ws, bs, options)
    return net.ntk(net.y0, X1, X2)
