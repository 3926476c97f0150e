"""Named parameterisations of a fully connected network, as keywords of the one model.

A parameterisation is not a second model: it draws the weights and chooses the
``multipliers``, ``alpha``, ``lr_scales`` and the clock ``eta`` of the model of
:func:`linearnets.gradient_flow`, ``z_l = m_l W_l h_{l-1} + b_l``, ``h_l = phi(z_l)``, ``f(x) =
m_L W_L h_{L-1}``, ``F = alpha f`` (docs/conventions.md, "Beyond linear networks"; which
quantity each paper calls alpha: docs/parameterisations.md).  Every helper returns a
:class:`Parameterised`, whose ``flow_kwargs(**overrides)`` and ``ntk_kwargs(**overrides)``
are the keywords of ``gradient_flow`` and ``empirical_ntk`` (the overrides merged in) and
whose ``forward(X, **overrides)`` is the network's ``F``::

    p = init_parameterised((D, 256, 256, 1), "ntk", seed=0)
    traj = ln.gradient_flow(p.weights, X, Y, t, **p.flow_kwargs(activation="relu", alpha=10.0))
    F = p.forward(X, weights=traj.weights, activation="relu", alpha=10.0)
"""
from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from ._validation import check_nonnegative, check_positive, rng_from_seed
from .network import check_layer_sizes, init_network
from .options import ACTIVATIONS, named_choice

__all__ = [
    "Parameterised",
    "PARAMETERISATIONS",
    "init_parameterised",
    "zhou_parameterisation",
    "zhou_normalised",
    "geiger_parameterisation",
    "activation_normalisation",
]

PARAMETERISATIONS = ("standard", "ntk", "mean_field")


@dataclasses.dataclass(frozen=True)
class Parameterised:
    """Initial parameters and model keywords of a named parameterisation.

    Attributes
    ----------
    weights, biases : list of ndarray (N_l, N_{l-1}), list of ndarray (N_l,) for l < L or None
        The trained parameters at t = 0 (biases None: no biases).
    multipliers, alpha, lr_scales, centered : tuple (L,), float, tuple (L,) or None, bool
        The model's keywords: ``m_l``, ``F = alpha f`` (``alpha (f - f_0)`` centered).
    eta : float
        The clock: ``gradient_flow(..., eta=eta)`` reproduces the source's time.
    activation, loss : str or tuple, or None
        The source's activation and loss, where it fixes them (None: the caller's choice).
    name : str
    """

    weights: list
    biases: list | None
    multipliers: tuple
    alpha: float = 1.0
    lr_scales: tuple | None = None
    eta: float = 1.0
    centered: bool = False
    activation: object = None
    loss: object = None
    name: str = ""

    def flow_kwargs(self, **overrides):
        """Keywords for :func:`linearnets.gradient_flow` (``eta`` included), ``overrides``
        merged in (they win), so ``gradient_flow(w, X, Y, t, **p.flow_kwargs(alpha=10.0))``
        needs no second ``alpha``."""
        return self._kwargs(overrides, centered=self.centered, lr_scales=self.lr_scales,
                            eta=self.eta, loss=self.loss)

    def ntk_kwargs(self, **overrides):
        """Keywords for :func:`linearnets.empirical_ntk`, ``overrides`` merged in (they win)."""
        return self._kwargs(overrides)

    def forward(self, X, **overrides):
        """The outputs ``F`` (P, C) of this network on ``X`` (:func:`linearnets.forward`).

        Parameters
        ----------
        X : array_like, shape (P, D)
        **overrides
            Keywords of :func:`linearnets.forward` that replace this network's: ``weights``
            and ``biases`` (e.g. a trajectory's final ones; by default those at t = 0),
            ``activation``, ``multipliers``, ``alpha``, ``centered``. A centred network's
            ``f_0`` is that of this network's weights and biases at t = 0.

        Returns
        -------
        ndarray, shape (P, C)
        """
        from .network import forward
        kw = self._kwargs(overrides, centered=self.centered)
        weights = kw.pop("weights", self.weights)
        if kw.get("centered"):
            kw.setdefault("weights0", self.weights)
            kw.setdefault("biases0", self.biases)
        return forward(weights, X, **kw)

    def _kwargs(self, overrides, **more):
        """The model's keywords, less an activation or loss that the source leaves open, with
        ``overrides`` merged in."""
        kw = dict(biases=self.biases, multipliers=self.multipliers, alpha=self.alpha,
                  activation=self.activation, **more)
        kw = {k: v for k, v in kw.items() if v is not None or k not in ("activation", "loss")}
        kw.update(overrides)
        return kw


def _check_bool(value, name):
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def init_parameterised(layer_sizes, parameterisation="standard", sigma=1.0, seed=0, *,
                       biases=False, bias_std=0.0):
    """Draw a network in a named parameterisation.

    With the same ``seed`` the three share one set of standard normal draws ``G_l``,
    so at t = 0 they compute the same ``m_l W_l`` up to the output factor.

    ``"standard"`` (LeCun / He-style fan-in scaling, as :func:`init_network`): ``W_l = sigma
    G_l / sqrt(N_{l-1})`` ~ N(0, sigma^2/N_{l-1}), ``m_l = 1``.
    ``"ntk"`` (Jacot, Gabriel & Hongler 2018, eq. (1), ``alpha^(l+1) = W^(l) alpha~^(l) /
    sqrt(n_l)``): ``W_l = sigma G_l`` ~ N(0, sigma^2), ``m_l = 1/sqrt(N_{l-1})``.
    ``"mean_field"`` (Mei, Montanari & Nguyen 2018; Chizat & Bach 2018, ``f = (1/N) sum_i a_i
    phi(w_i . x)``): as ``"ntk"`` but ``m_L = 1/N_{L-1}``; for L = 2 with ``m_1 = 1/sqrt(D)``
    their two-layer model with inputs scaled by ``1/sqrt(D)``. Their particle clock runs
    ``N_{L-1}`` times faster (``eta = N_{L-1}``); ``eta`` here is 1, the package's clock.

    Parameters
    ----------
    layer_sizes : sequence of int, ``(D, N_1, ..., N_{L-1}, C)``
    parameterisation : {"standard", "ntk", "mean_field"}
    sigma : float
        Weight scale, ``> 0``.
    seed : int >= 0, numpy.random.SeedSequence, Generator or None (fresh entropy)
    biases : bool
        Trained hidden biases ``b_l`` (N_l,), l < L.
    bias_std : float
        Biases drawn ``N(0, bias_std^2)`` (0: zeros), ``>= 0``.

    Returns
    -------
    Parameterised
        ``multipliers`` (L,), ``alpha = 1``, ``lr_scales = None``, ``eta = 1``.

    Examples
    --------
    >>> p = init_parameterised((3, 4, 1), "ntk", seed=0)
    >>> p.multipliers == (1 / 3 ** 0.5, 0.5)
    True
    """
    sizes = check_layer_sizes(layer_sizes)
    if parameterisation not in PARAMETERISATIONS:
        raise ValueError(f"parameterisation must be one of {PARAMETERISATIONS}, "
                         f"got {parameterisation!r}")
    sigma = float(check_positive(sigma, "sigma", ndim=0))
    biases = _check_bool(biases, "biases")
    bias_std = float(check_nonnegative(bias_std, "bias_std", ndim=0))
    rng = rng_from_seed(seed)
    ws = init_network(sizes, sigma, seed=rng)
    fan_in = sizes[:-1]
    if parameterisation == "standard":
        mult = (1.0,) * len(ws)
    else:
        ws = [w * math.sqrt(n) for w, n in zip(ws, fan_in)]
        mult = tuple(1.0 / math.sqrt(n) for n in fan_in)
        if parameterisation == "mean_field":
            mult = mult[:-1] + (1.0 / fan_in[-1],)
    bs = [bias_std * rng.standard_normal(n) for n in sizes[1:-1]] if biases else None
    return Parameterised(weights=ws, biases=bs, multipliers=mult, name=parameterisation)


def zhou_parameterisation(layer_sizes, betas, alpha, seed=0, *, form="direct", biases=False):
    """Zhou et al. (2022)'s phase-diagram network on the model's keywords
    (docs/parameterisations.md).

    Their network (section 3, here for any depth; they study L = 3), trained by gradient
    flow on ``R_S = 1/(2n) sum_i (f_theta(x_i) - y_i)^2``::

        f_theta(x) = (1/alpha_Z) a^T sigma(W^[2] sigma(W^[1] x)),  sigma = ReLU,
        a_k ~ N(0, beta_3^2),  W^[2]_kk' ~ N(0, beta_2^2),  W^[1]_kk' ~ N(0, beta_1^2).

    On the model ``alpha = 1/alpha_Z`` (``F = f_theta``) and ``eta = 1/alpha_Z^2`` (the
    model's loss is ``1/alpha^2`` times theirs). ``form="direct"``: ``W_l ~ N(0, beta_l^2)``,
    ``m_l = 1``; ``form="init_network"``: ``W_l`` as :func:`init_network` draws them, ``m_l =
    beta_l sqrt(N_{l-1})`` and ``lr_scales = 1/m_l^2``: ``m_l W_l`` follows their flow exactly.

    Parameters
    ----------
    layer_sizes : sequence of int, ``(d, m_1, ..., m_{L-1}, 1)``
    betas : sequence of L positive floats
        ``(beta_1, ..., beta_L)``: per-layer init standard deviations (``beta_L`` of ``a``).
    alpha : float
        Their scaling factor ``alpha_Z > 0`` (the output is divided by it).
    seed : int >= 0, numpy.random.SeedSequence, Generator or None (fresh entropy)
    form : {"direct", "init_network"}
    biases : bool
        Their expanded-input biases ``b^[l]``, trained, drawn ``N(0, beta_l^2)``; ``form=
        "direct"`` only (a bias moves at its layer's rate).

    Returns
    -------
    Parameterised
        With ``activation="relu"`` and ``loss="mse"``.
    """
    sizes = check_layer_sizes(layer_sizes)
    L = len(sizes) - 1
    if sizes[-1] != 1:
        raise ValueError(f"layer_sizes must end with one output (Zhou et al.'s a^T), got {sizes}")
    betas = check_positive(betas, "betas", ndim=1)
    if betas.size != L:
        raise ValueError(f"betas needs {L} entries (one per layer), got {betas.size}")
    alpha_z = float(check_positive(alpha, "alpha", ndim=0))
    with np.errstate(over="ignore", under="ignore", divide="ignore"):
        eta = float(1.0 / np.float64(alpha_z) ** 2)
    if not (np.isfinite(eta) and eta > 0):
        raise ValueError(f"alpha = {alpha_z!r} is out of range: the clock's learning rate "
                         "1/alpha^2 over- or underflows float64")
    if form not in ("direct", "init_network"):
        raise ValueError(f"form must be 'direct' or 'init_network', got {form!r}")
    biases = _check_bool(biases, "biases")
    if biases and form != "direct":
        raise ValueError("biases need form='direct' (a bias moves at its layer's lr_scale)")
    rng = rng_from_seed(seed)
    g = init_network(sizes, 1.0, seed=rng)                # N(0, 1/N_{l-1})
    fan_in = sizes[:-1]
    if form == "direct":
        ws = [b * math.sqrt(n) * w for b, n, w in zip(betas, fan_in, g)]
        mult, lr = (1.0,) * L, None
    else:
        ws = g
        mult = tuple(float(b) * math.sqrt(n) for b, n in zip(betas, fan_in))
        lr = tuple(1.0 / m ** 2 for m in mult)
    bs = [float(b) * rng.standard_normal(n) for b, n in zip(betas[:-1], sizes[1:-1])] \
        if biases else None
    return Parameterised(weights=ws, biases=bs, multipliers=mult, alpha=1.0 / alpha_z,
                         lr_scales=lr, eta=eta, activation="relu", loss="mse",
                         name=f"zhou-{form}")


def zhou_normalised(betas, alpha):
    """The normalised flow of Zhou et al.'s ReLU network, from its homogeneity
    (docs/parameterisations.md).

    With ``theta_l = beta_l theta~_l`` (standard normal at t = 0), ``f_theta = kappa f~(theta~)``,
    ``kappa = prod_l beta_l / alpha_Z``, and gradient flow on ``R_S`` is ``d theta~_l/dt =
    -(kappa/beta_l^2) 1/n sum_i (kappa f~_i - y_i) d f~_i/d theta~_l``: a run is fixed, up to
    time, by ``kappa`` and the rate ratios ``(beta_L/beta_l)^2``.

    Parameters
    ----------
    betas : sequence of L positive floats
    alpha : float, ``> 0``

    Returns
    -------
    dict
        ``kappa`` (float), ``rates`` (L,) = ``kappa/beta_l^2``,
        ``rate_ratios`` (L,) = ``(beta_L/beta_l)^2``.
    """
    betas = check_positive(betas, "betas", ndim=1)
    alpha = float(check_positive(alpha, "alpha", ndim=0))
    kappa = float(np.prod(betas) / alpha)
    return {"kappa": kappa, "rates": kappa / betas ** 2,
            "rate_ratios": (betas[-1] / betas) ** 2}


@functools.lru_cache(maxsize=None)
def _grid():
    """Nodes and weights of the trapezoid rule for ``E[g(z)]``, z ~ N(0, 1): [-40, 40], h = 1e-3."""
    z, h = np.linspace(-40.0, 40.0, 80001, retstep=True)
    return z, np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi) * h


def activation_normalisation(activation):
    """``c = E[phi(z)^2]^{-1/2}`` for ``z ~ N(0, 1)``: Geiger et al.'s activation factor.

    Exact for linear (1), relu (sqrt 2) and leaky_relu a (sqrt(2/(1+a^2))); tanh and
    softplus by the trapezoid rule (step 1e-3 on [-40, 40], spectrally accurate here).

    Parameters
    ----------
    activation : str or tuple, as in :func:`linearnets.gradient_flow`

    Returns
    -------
    float
    """
    if isinstance(activation, list):
        activation = tuple(activation)
    name, par = named_choice(activation, ACTIVATIONS, "activation")   # the simulator's rule
    if name in ("linear", "relu", "leaky_relu"):        # E[phi^2] = (1 + a^2)/2, slope a
        a = {"linear": 1.0, "relu": 0.0}.get(name, par)
        return math.sqrt(2.0 / (1.0 + a * a))
    z, w = _grid()
    if name == "tanh":
        v = np.tanh(z)
    else:
        v = np.logaddexp(0.0, par * z) / par
    return float(1.0 / math.sqrt(np.dot(w, v * v)))


def geiger_parameterisation(layer_sizes, alpha, activation=("softplus", 5.0), sigma=1.0,
                            seed=0, *, loss=("soft_hinge", 20.0), clock="paper"):
    """Geiger, Spigler, Jacot & Wyart (2019)'s NTK-parameterised network with output scale
    alpha (docs/parameterisations.md).

    Their fully connected net (feature_lazy ``FC``): weights ``N(0, 1)``, layers ``z = W h /
    sqrt(fan_in)``, the activation normalised, ``c phi`` with ``E[(c phi(z))^2] = 1``
    (:func:`activation_normalisation`), ``f = W^L h / sqrt(h)``, trained centred, ``F = alpha
    (f - f_0)``, on the soft hinge: ``m_1 = sigma/sqrt(D)``, ``m_l = sigma c / sqrt(N_{l-1})``
    for l > 1, ``centered=True``. ``clock="paper"``: their loss ``1/(alpha^2 n) sum ell(F,
    y)`` is the model's, ``eta = 1``; ``clock="code"``: their code's ``1/(alpha n) sum ell(F,
    y)``, ``eta = alpha``.

    Parameters
    ----------
    layer_sizes : sequence of int, ``(D, h, ..., h, 1)``
    alpha : float, ``> 0``
    activation : str or tuple
        Default their Softplus with beta 5 (feature_lazy ``--spbeta``).
    sigma : float
        ``sigma_w``, ``> 0`` (1 in their experiments).
    seed : int >= 0, numpy.random.SeedSequence, Generator or None (fresh entropy)
    loss : str or tuple
        Default their soft hinge with beta_h = 20 (``--lossbeta``).
    clock : {"paper", "code"}

    Returns
    -------
    Parameterised
    """
    sizes = check_layer_sizes(layer_sizes)
    alpha = float(check_positive(alpha, "alpha", ndim=0))
    sigma = float(check_positive(sigma, "sigma", ndim=0))
    if clock not in ("paper", "code"):
        raise ValueError(f"clock must be 'paper' or 'code', got {clock!r}")
    c = activation_normalisation(activation)
    rng = rng_from_seed(seed)
    ws = [rng.standard_normal((n_out, n_in)) for n_in, n_out in zip(sizes[:-1], sizes[1:])]
    mult = tuple(sigma * (1.0 if l == 0 else c) / math.sqrt(n) for l, n in enumerate(sizes[:-1]))
    return Parameterised(weights=ws, biases=None, multipliers=mult, alpha=alpha,
                         eta=1.0 if clock == "paper" else alpha, centered=True,
                         activation=activation, loss=loss, name="geiger2019")
