r"""Phase I (early, small-initialisation) alignment dynamics of two-layer networks.

Two-layer linear network ``f(x) = W_2 W_1 x`` (``W_1`` of shape (N, D), ``W_2`` of
shape (1, N)) trained by gradient flow on whitened inputs (Σxx = I) with a scalar
teacher y = s β·x, ‖β‖ = 1, so that Σyx = s βᵀ.  Write ``a = W_2ᵀ`` (N,).  The
NTK is K(x, x′) = xᵀ M x′ with M = W_1ᵀ W_1 + ‖a‖² I, and the two scalars

    q = ½ βᵀ M β = ½ (‖a‖² + ‖W_1 β‖²),        r = aᵀ W_1 β = W_2 W_1 β

(the kernel's weight on the task direction, and the network's learned coefficient
along β) obey, after dropping the terms cubic in the weights from the gradient flow
(quartic in dq/dt and dr/dt),

    dq/dt = 2ηs r,        dr/dt = 2ηs q.

Both are quadratic in the weights, so this linear system is exact at O(σ²); the
neglected terms are O(σ⁴ e^{4ηst}).  Source: Atanasov, Bordelon & Pehlevan
(ICLR 2022), Sec. 3.1 and App. C.1, C.5; derivation in ``theory/phase1_qr.md``
and ``theory/qr_full_path.md``.

Every network satisfies q ≥ |r| (AM–GM and Cauchy–Schwarz), so the functions here
require q0 > 0 and |r0| ≤ q0.
"""
from __future__ import annotations

import numpy as np

from .._validation import (as_float_array, broadcast_args, check_int_array, check_nonnegative,
                           check_positive)

__all__ = ['qr_trajectory', 'qr_initial_moments', 'qr_full_path']

# below this value of 2ηst, q and r are evaluated directly from cosh and sinh (exact at
# t = 0, no cancellation between the growing and the decaying exponential); above it,
# from the two exponentials in log-space.
_DIRECT_TAU = 1.0


def _check_qr(q0, r0):
    q0 = check_positive(q0, "q0")
    r0 = as_float_array(r0, "r0")
    q0b, r0b = broadcast_args(q0=q0, r0=r0)
    if np.any(np.abs(r0b) > q0b):
        raise ValueError("r0 must satisfy |r0| <= q0 (q >= |r| holds for every two-layer "
                         "network, by AM-GM and Cauchy-Schwarz)")
    return q0, r0


def _scaled_exp(c, x):
    """c·e^x for c >= 0 and any real or infinite x, computed as exp(log c + x).

    Returns +inf (without a warning) where the value exceeds the float range, and 0
    where c == 0 whatever x is.
    """
    c, x = np.broadcast_arrays(c, x)
    positive = c > 0
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        val = np.exp(np.log(np.where(positive, c, 1.0)) + x)
    return np.where(positive, val, 0.0)


def _log(x):
    with np.errstate(divide="ignore"):
        return np.log(x)


def _logsumexp(*terms):
    out = terms[0]
    for term in terms[1:]:
        out = np.logaddexp(out, term)
    return out


def _as_output(*arrays):
    """float64 arrays (0-d for scalar input), with their own memory."""
    return tuple(np.array(a, dtype=np.float64) for a in arrays)


def qr_trajectory(t, s, q0, r0, eta=1.0):
    r"""Phase-I solution of the linearised q/r system of a two-layer network.

    .. math::

        q(t) = q_0 \cosh(2\eta s t) + r_0 \sinh(2\eta s t), \qquad
        r(t) = r_0 \cosh(2\eta s t) + q_0 \sinh(2\eta s t),

    the exact solution of dq/dt = 2ηs r, dr/dt = 2ηs q, where
    q = ½(‖W_2‖² + ‖W_1 β‖²) and r = W_2 W_1 β (see the module docstring).  It
    describes gradient flow from small initialisation (σ² ≪ s) on whitened data
    with a scalar teacher y = s β·x up to O(σ⁴ e^{4ηst}), i.e. while q ≪ s: the
    alignment phase t ≲ log(s/q0)/(2ηs).  For the whole path use
    :func:`qr_full_path`.

    Parameters
    ----------
    t : array_like, t >= 0
        Time.
    s : array_like, s > 0
        Teacher strength (singular value of Σyx).
    q0 : array_like, q0 > 0
        Initial q.
    r0 : array_like, |r0| <= q0
        Initial r.
    eta : array_like, eta > 0, optional
        Learning rate.

    Returns
    -------
    q, r : ndarray of float64, broadcast shape of the arguments
        0-d arrays for scalar input.  Values beyond the float range are +inf (the
        exponential growth is unbounded); q = (p0 e^{τ} + m0 e^{−τ})/2 with
        p0 = q0 + r0 >= 0, m0 = q0 − r0 >= 0 is evaluated in log-space, so there is
        no overflow for tiny q0 and large t.

    Raises
    ------
    ValueError
        If t < 0, s <= 0, q0 <= 0, |r0| > q0, eta <= 0, or any input is NaN/inf.

    Notes
    -----
    Source: Atanasov, Bordelon & Pehlevan (2022), Sec. 3.1 and App. C.1.  The
    derivation (with a sympy check) is in ``theory/phase1_qr.md``.

    Examples
    --------
    >>> import linearnets as ln
    >>> q, r = ln.qr_trajectory(0.5, s=1.0, q0=1e-4, r0=0.0)
    >>> bool(abs(q - 1e-4 * np.cosh(1.0)) < 1e-15), bool(abs(r - 1e-4 * np.sinh(1.0)) < 1e-15)
    (True, True)
    """
    t = check_nonnegative(t, "t")
    s = check_positive(s, "s")
    q0, r0 = _check_qr(q0, r0)
    eta = check_positive(eta, "eta")
    t, s, q0, r0, eta = broadcast_args(t=t, s=s, q0=q0, r0=r0, eta=eta)
    with np.errstate(over="ignore"):
        tau = 2.0 * eta * s * t          # may be +inf for astronomically large t
    p0, m0 = q0 + r0, q0 - r0            # both >= 0: the growing / decaying combinations
    grow = _scaled_exp(0.5 * p0, tau)
    decay = _scaled_exp(0.5 * m0, -tau)
    small = tau < _DIRECT_TAU
    tau_s = np.where(small, tau, 0.0)
    ch, sh = np.cosh(tau_s), np.sinh(tau_s)
    with np.errstate(invalid="ignore"):
        # far: two non-negative terms for q; r's difference only cancels near r = 0
        q = np.where(small, q0 * ch + r0 * sh, grow + decay)
        r = np.where(small, r0 * ch + q0 * sh, grow - decay)
    return _as_output(q, r)


def qr_initial_moments(width, input_dim, sigma):
    r"""Mean of q0 and standard deviation of r0 under the standard Gaussian init.

    With every entry of W_l drawn i.i.d. N(0, σ²/N_{l−1}) (so W_1 ~ N(0, σ²/D),
    W_2 ~ N(0, σ²/N)) and a fixed unit β:

    .. math::

        \mathbb{E}\,q_0 = \tfrac12\big(\mathbb{E}\|W_2\|^2 + \mathbb{E}\|W_1\beta\|^2\big)
                        = \frac{\sigma^2}{2}\Big(1 + \frac{N}{D}\Big), \qquad
        \mathbb{E}\,r_0 = 0, \qquad
        \operatorname{std} r_0 = \frac{\sigma^2}{\sqrt{D}}.

    (r0 = Σ_i a_i (W_1β)_i is a sum of N products of independent centred Gaussians
    of variances σ²/N and σ²/D.)  For reference, var q0 = σ⁴(1/N + N/D²)/2.

    Parameters
    ----------
    width : array_like of positive integers
        Hidden width N.
    input_dim : array_like of positive integers
        Input dimension D.
    sigma : array_like, sigma > 0
        Initialisation scale σ.

    Returns
    -------
    q0_mean, r0_std : ndarray of float64, broadcast shape
        0-d arrays for scalar input.

    Raises
    ------
    ValueError
        If width or input_dim is not a positive integer, sigma <= 0, or an input is
        NaN/inf.

    Notes
    -----
    Source: Atanasov, Bordelon & Pehlevan (2022), App. C.1 (their large-D
    statement; the formulas here are exact for every N and D).  Derivation and a
    symbolic Gaussian-moment check: ``theory/phase1_qr.md``.

    Examples
    --------
    >>> import linearnets as ln
    >>> q0, r0_std = ln.qr_initial_moments(width=100, input_dim=50, sigma=0.1)
    >>> round(float(q0), 12), round(float(r0_std), 12)
    (0.015, 0.001414213562)
    """
    n = check_int_array(width, "width", minimum=1)
    d = check_int_array(input_dim, "input_dim", minimum=1)
    sigma = check_positive(sigma, "sigma")
    n, d, sigma = broadcast_args(width=n, input_dim=d, sigma=sigma)
    with np.errstate(over="ignore"):   # +inf where sigma^2 exceeds the float range
        sig2 = sigma * sigma
        q0_mean = 0.5 * sig2 * (1.0 + n / d)
        r0_std = sig2 / np.sqrt(d)
    return _as_output(q0_mean, r0_std)


def qr_full_path(t, s, q0, r0=0.0, eta=1.0):
    r"""q(t) and r(t) over the whole of training: phase I matched to phase II.

    Exact solution of the aligned two-layer mode system

    .. math::

        \dot q = 2\eta\, r\,(s - r), \qquad \dot r = 2\eta\, q\,(s - r),

    which is the gradient flow of any two-layer network whose weights lie in the
    aligned rank-one subspace W_1 = â w βᵀ, W_2 = a âᵀ (then q = (a² + w²)/2,
    r = a w); for a general small initialisation it holds up to the same O(σ²)
    corrections as phase I.  With p = q + r, m = q − r the system conserves
    p m = δ² = q0² − r0² and p obeys the Riccati equation
    ṗ = η(−p² + 2sp + δ²); with λ = √(s² + δ²), E = e^{−2ηλt},

    .. math::

        p(t) = \frac{p_0\,[(\lambda+s) + (\lambda-s)E] + \delta^2 (1-E)}
                    {p_0 (1-E) + (\lambda+s)E + (\lambda-s)}, \qquad
        m(t) = \frac{m_0\,[(\lambda-s) + (\lambda+s)E] + \delta^2 (1-E)}
                    {m_0 (1-E) + (\lambda-s)E + (\lambda+s)},

    q = (p + m)/2, r = (p − m)/2.  Every term is non-negative; both are evaluated
    in log-space.  Limits: t = 0 gives (q0, r0); t → ∞ gives q → √(s² + δ²),
    r → s (the network learns the teacher exactly); for q0 ≪ s and
    e^{2ηst} ≪ s/q0 it reduces to :func:`qr_trajectory`.  For r0 = 0 it agrees
    with the matched formula of the paper (App. C.5),
    q = 2s cosh(2ηst)/(e^{2ηst} − 1 + 2s/q0), r = 2s sinh(2ηst)/(…), up to
    O(q0²/s): q + r is the Saxe sigmoid with c0 = q0/2 in both.

    Parameters
    ----------
    t : array_like, t >= 0
        Time.
    s : array_like, s > 0
        Teacher strength.
    q0 : array_like, q0 > 0
        Initial q = ½(‖W_2‖² + ‖W_1β‖²).
    r0 : array_like, |r0| <= q0, optional
        Initial r = W_2 W_1 β (default 0, its mean under random init).
    eta : array_like, eta > 0, optional
        Learning rate.

    Returns
    -------
    q, r : ndarray of float64, broadcast shape of the arguments
        0-d arrays for scalar input; always finite.  r is accurate to a few ulps
        of q (it is the difference p − m).

    Raises
    ------
    ValueError
        If t < 0, s <= 0, q0 <= 0, |r0| > q0, eta <= 0, or any input is NaN/inf.

    Notes
    -----
    Source: Atanasov, Bordelon & Pehlevan (2022), App. C.4–C.5.  Derivation and
    sympy check: ``theory/qr_full_path.md``.

    Examples
    --------
    >>> import linearnets as ln
    >>> q, r = ln.qr_full_path([0.0, 1e6], s=2.0, q0=1e-3)
    >>> np.allclose(q, [1e-3, np.sqrt(4.0 + 1e-6)]), np.allclose(r, [0.0, 2.0])
    (True, True)
    """
    t = check_nonnegative(t, "t")
    s = check_positive(s, "s")
    q0, r0 = _check_qr(q0, r0)
    eta = check_positive(eta, "eta")
    t, s, q0, r0, eta = broadcast_args(t=t, s=s, q0=q0, r0=r0, eta=eta)

    # Everything in units of s and as logarithms (no under- or overflow for tiny q0,
    # huge q0/s or huge t): x0 = p0/s, y0 = m0/s, d2 = δ²/s² = x0·y0,
    # Λ = λ/s = √(1 + d2), Λ − 1 = d2/(1 + Λ).
    log_s = np.log(s)
    log_x0 = _log(q0 + r0) - log_s
    log_y0 = _log(q0 - r0) - log_s
    log_d2 = log_x0 + log_y0
    log_lam = 0.5 * np.logaddexp(0.0, log_d2)
    log_1p_lam = np.logaddexp(0.0, log_lam)
    log_lm1 = log_d2 - log_1p_lam
    with np.errstate(over="ignore"):
        arg = 2.0 * eta * t * np.exp(log_lam + log_s)   # 2ηλt, may be +inf
    log_e = -arg                                        # log E
    log_1me = _log(-np.expm1(-arg))                     # log(1 − E), −inf at t = 0

    log_num_p = _logsumexp(log_x0 + log_1p_lam, log_x0 + log_lm1 + log_e, log_d2 + log_1me)
    log_den_p = _logsumexp(log_x0 + log_1me, log_1p_lam + log_e, log_lm1)
    log_num_m = _logsumexp(log_y0 + log_lm1, log_y0 + log_1p_lam + log_e, log_d2 + log_1me)
    log_den_m = _logsumexp(log_y0 + log_1me, log_lm1 + log_e, log_1p_lam)
    with np.errstate(over="ignore", invalid="ignore"):
        # p ≡ 0 when p0 = 0 (r0 = −q0), m ≡ 0 when m0 = 0 (r0 = q0)
        p = np.where(q0 + r0 > 0, np.exp(log_num_p - log_den_p + log_s), 0.0)
        m = np.where(q0 - r0 > 0, np.exp(log_num_m - log_den_m + log_s), 0.0)
    q = 0.5 * (p + m)
    r = 0.5 * (p - m)
    return _as_output(q, r)
