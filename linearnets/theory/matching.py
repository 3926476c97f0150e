r"""Initial conditions of the closed forms read off given two-layer weights.

:func:`~linearnets.mode_strength` and :func:`~linearnets.loss_curve` describe an
aligned, balanced start (each mode's weights already in its rank-one subspace).
A random start (``init_network``) is neither: at t = 0 the network's mode strength
``r_α = u_αᵀ W_2 W_1 v_α`` is O(σ²) and of either sign, and the first phase of
training aligns the weights before the mode grows (Atanasov, Bordelon & Pehlevan,
ICLR 2022, Sec. 3.1).  On whitened data each mode α of Σyx = Σ_α s_α u_α v_αᵀ then
follows the two-layer q/r system with

    q_α = ½ (‖W_2ᵀ u_α‖² + ‖W_1 v_α‖²),        r_α = u_αᵀ W_2 W_1 v_α,

up to O(σ²) relative corrections (the coupling of the modes through the weights'
components outside their own directions): :func:`~linearnets.qr_full_path` with
(q0, r0) gives (q, r) for all t, r being the mode strength.  Along that path
p = q + r obeys ṗ = η(2sp − p² + δ²) with δ² = q0² − r0², i.e. c = (q + r)/2 is the
depth-2 sigmoid (:func:`~linearnets.mode_strength`) with

    c0 = (q0 + r0)/2 > 0,

shifted by δ² = O(σ⁴), which is negligible once the mode has grown.  So a
random start is compared with the depth-2 closed forms through c0 = (q0 + r0)/2,
not through the (possibly negative) initial mode strength r0.  Derivation:
``theory/qr_full_path.md``.
"""
from __future__ import annotations

import numpy as np

from .._validation import check_matrix, ldexp_safe, pow2_normalise
from .multimode import task_modes

__all__ = ["matched_initial_conditions"]


def matched_initial_conditions(weights, Syx, *, rcond=None):
    r"""The matched (q0, r0, c0) of every task mode, read off two-layer weights.

    For ``weights = [W_1, W_2]`` and the task's modes Σyx = Σ_α s_α u_α v_αᵀ
    (thin SVD, numerically nonzero singular values only, as
    :func:`~linearnets.task_modes`):

    .. math::

        q_{0,α} = \tfrac12\left(\|W_2^\top u_α\|^2 + \|W_1 v_α\|^2\right), \quad
        r_{0,α} = u_α^\top W_2 W_1 v_α, \quad
        c_{0,α} = \tfrac12 (q_{0,α} + r_{0,α}).

    Then, on whitened data (Σxx = I), ``qr_full_path(t, s[a], q0[a], r0[a], eta)``
    gives the mode's (q, r) for all t (r = ``traj.modes[:, a]`` of
    ``gradient_flow(..., record=("modes",))``), and
    ``mode_strength(t, s[a], c0[a], depth=2, eta=eta)`` the sigmoid that
    (q + r)/2 follows, both to O(σ²) relative accuracy for a random start of
    scale σ (exact for weights in the modes' aligned rank-one subspaces).
    Source: Atanasov, Bordelon & Pehlevan (ICLR 2022), App. C.1, C.4–C.5;
    derivation in ``theory/qr_full_path.md``; conventions in ``docs/conventions.md``.

    Parameters
    ----------
    weights : sequence of two ndarrays
        ``[W_1, W_2]``, ``W_1`` of shape (N, D), ``W_2`` of shape (C, N): the state at t = 0.
    Syx : array_like, shape (C, D)
        Σyx = YᵀX/P of the task (e.g. from :func:`~linearnets.sufficient_statistics`).
    rcond : float in [0, 1), optional
        Relative tolerance of the numerical rank, as in :func:`~linearnets.task_modes`.

    Returns
    -------
    dict
        ``"s"`` (r,) descending singular values; ``"u"`` (C, r) and ``"v"`` (D, r)
        the singular vectors; ``"q0"``, ``"r0"``, ``"c0"`` (r,) per mode
        (``q0 >= |r0|``, so ``c0 >= 0``; ``c0 > 0`` unless ``r0 = -q0`` exactly).

    Raises
    ------
    ValueError
        If ``weights`` is not two finite 2-D arrays with chained shapes, or ``Syx`` is
        not a finite non-zero (C, D) array matching them.

    Examples
    --------
    >>> import linearnets as ln
    >>> X, y, beta = ln.scalar_teacher(P=40, D=5, s=2.0, seed=0)
    >>> weights = ln.init_network((5, 50, 1), sigma=0.01, seed=0)
    >>> m = ln.matched_initial_conditions(weights, y[:, None].T @ X / 40)
    >>> bool(m["c0"][0] > 0), bool(m["q0"][0] >= abs(m["r0"][0]))
    (True, True)
    """
    try:
        ws = list(weights)
    except TypeError:
        raise ValueError("weights must be a sequence [W_1, W_2] of 2-D arrays") from None
    if len(ws) != 2:
        raise ValueError(f"weights must be a two-layer network [W_1, W_2] (the q/r system "
                         f"is two-layer theory), got {len(ws)} layers")
    W1 = check_matrix(ws[0], "weights[0]")
    W2 = check_matrix(ws[1], "weights[1]")
    if W2.shape[1] != W1.shape[0]:
        raise ValueError(f"weights do not chain: W_1 {W1.shape}, W_2 {W2.shape}")
    Syx = check_matrix(Syx, "Syx")
    if Syx.shape != (W2.shape[0], W1.shape[1]):
        raise ValueError(f"Syx must have shape (C, D) = {(W2.shape[0], W1.shape[1])} "
                         f"of the weights, got {Syx.shape}")
    s, U, V = task_modes(Syx) if rcond is None else task_modes(Syx, rcond=rcond)
    # q0, r0 are quadratic in the weights: both layers at unit scale (one exact power of
    # two 2^e), 2^(2e) back on at the end (exact where representable, +-inf beyond, no NaN)
    e = pow2_normalise(np.concatenate([W1.ravel(), W2.ravel()]))[1]
    a = np.ldexp(W2, -e).T @ U       # (N, r): W_2ᵀ u_α
    w = np.ldexp(W1, -e) @ V         # (N, r): W_1 v_α
    q0 = 0.5 * (np.sum(a * a, axis=0) + np.sum(w * w, axis=0))
    r0 = np.sum(a * w, axis=0)       # u_αᵀ W_2 W_1 v_α
    q0, r0, c0 = ldexp_safe(q0, 2 * e), ldexp_safe(r0, 2 * e), ldexp_safe(0.5 * (q0 + r0), 2 * e)
    return {"s": np.asarray(s, dtype=np.float64), "u": np.asarray(U, dtype=np.float64),
            "v": np.asarray(V, dtype=np.float64), "q0": q0, "r0": r0, "c0": c0}
