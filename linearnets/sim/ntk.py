"""Empirical NTK of a deep linear network from partial products, ``K_ij(x, x') = sum_l
[A_l A_l^T]_ij (B_l x)^T (B_l x')`` with ``A_l = W_L ... W_{l+1}`` (C, N_l) and ``B_l =
W_{l-1} ... W_1`` (N_{l-1}, D) (docs/conventions.md: no 1/P, no learning rate)."""
from __future__ import annotations

import numpy as np

from .. import _threads
from .._validation import check_matrix, ldexp_safe, pow2_normalise
from .network import check_weights

__all__ = ["empirical_ntk"]


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
    from .models import parse_options
    from .models.mlp import MLP, check_biases

    options = parse_options(len(ws), activation=activation, multipliers=multipliers,
                            alpha=alpha)
    bs = check_biases(biases, tuple(w.shape for w in ws))
    net = MLP(ws, bs, options)
    return net.ntk(net.y0, X1, X2)
