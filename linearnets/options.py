"""The options of a network: activation, loss, output scale, centring, multipliers and
rates, as ``gradient_flow``, ``gradient_descent``, ``forward`` and the closed forms take them
(docs/conventions.md), validated once into :class:`ModelOptions`."""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Optional

import numpy as np

__all__ = ["ACTIVATIONS", "LOSSES", "CLASSIFICATION_LOSSES", "ModelOptions", "parse_options",
           "named_choice"]

#: Activation names and the default of their parameter (None: no parameter).
ACTIVATIONS = {"linear": None, "relu": None, "leaky_relu": 0.01, "softplus": 1.0, "tanh": None}

#: Loss names and the default of their parameter.
LOSSES = {"mse": None, "soft_hinge": 20.0, "logistic": None, "cross_entropy": None}
#: The losses of classification: labels, margins (docs/descent.md, "Losses").
CLASSIFICATION_LOSSES = ("soft_hinge", "logistic", "cross_entropy")


@dataclass(frozen=True)
class ModelOptions:
    """The validated options of a network (see :func:`parse_options`).

    Attributes
    ----------
    activation : str
        A key of :data:`ACTIVATIONS`.
    activation_param : float or None
        leaky_relu's slope ``a`` or softplus' ``beta``; None for the others.
    multipliers : ndarray (L,)
        Forward multipliers ``m_l`` (ones by default).
    alpha : float
        Output scale.
    centered : bool
        ``F = alpha (f - f_0)``, ``f_0`` the network at t = 0.
    loss : str
        A key of :data:`LOSSES`.
    loss_param : float or None
        The soft hinge's ``beta_h``; None for the others.
    lr_scales : ndarray (L,)
        Layer l moves with ``eta * lr_scales[l - 1]``.
    eta : float
        Learning rate.
    """

    activation: str = "linear"
    activation_param: Optional[float] = None
    multipliers: Optional[np.ndarray] = None
    alpha: float = 1.0
    centered: bool = False
    loss: str = "mse"
    loss_param: Optional[float] = None
    lr_scales: Optional[np.ndarray] = None
    eta: float = 1.0


def named_choice(value, table, argname):
    """``(name, param)`` from ``"name"`` or ``("name", param)`` against ``table``."""
    if isinstance(value, str):
        name, param = value, None
    elif isinstance(value, (tuple, list)) and len(value) == 2 and isinstance(value[0], str):
        name, param = value
    else:
        raise ValueError(f"{argname} must be a name from {tuple(table)} or a pair (name, "
                         f"parameter), got {value!r}")
    if name not in table:
        raise ValueError(f"{argname}: unknown {name!r}; choose from {tuple(table)}")
    default = table[name]
    if param is None:
        return name, default
    if default is None:
        raise ValueError(f"{argname}: {name!r} takes no parameter, got {param!r}")
    if (isinstance(param, bool) or not isinstance(param, numbers.Real)
            or not np.isfinite(param)):
        raise ValueError(f"{argname}: the parameter of {name!r} must be a finite number, "
                         f"got {param!r}")
    param = float(param)
    if name in ("softplus", "soft_hinge") and param <= 0:
        raise ValueError(f"{argname}: the beta of {name!r} must be > 0, got {param!r}")
    if name == "leaky_relu" and not 0 <= param < 1:
        raise ValueError(f"{argname}: the slope of 'leaky_relu' must be in [0, 1), got {param!r}")
    return name, param


def _positive_per_layer(value, depth, argname):
    if value is None:
        return np.ones(depth)
    try:
        arr = np.asarray(value, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{argname} must be {depth} positive floats") from exc
    if arr.size != depth:
        raise ValueError(f"{argname} must have one entry per layer ({depth}), got {arr.size}")
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"{argname} must be finite and > 0, got {arr.tolist()}")
    arr.setflags(write=False)
    return arr


#: ``alpha`` lies in ``[1 / MAX_ALPHA, MAX_ALPHA]``, where ``alpha^2`` and ``1 / alpha^2`` (the
#: output and loss scales) stay normal float64 numbers with room for the data.
MAX_ALPHA = 1e100


def parse_options(depth, *, activation="linear", multipliers=None, alpha=1.0, centered=False,
                  loss="mse", lr_scales=None, eta=1.0):
    """Validate the network keywords of ``gradient_flow`` into :class:`ModelOptions`.

    Raises ``ValueError`` naming the argument: an unknown activation or loss, a bad
    parameter, ``alpha``, ``multipliers`` or ``lr_scales`` not > 0 (or of the wrong
    length), ``alpha`` outside ``[1 / MAX_ALPHA, MAX_ALPHA]``, ``centered`` not a bool.
    """
    act, act_p = named_choice(activation, ACTIVATIONS, "activation")
    los, los_p = named_choice(loss, LOSSES, "loss")
    if (isinstance(alpha, bool) or not isinstance(alpha, numbers.Real) or not np.isfinite(alpha)
            or alpha <= 0):
        raise ValueError(f"alpha must be a finite number > 0, got {alpha!r}")
    if not 1.0 / MAX_ALPHA <= alpha <= MAX_ALPHA:
        raise ValueError(f"alpha must lie in [1e-100, 1e100] (MAX_ALPHA; alpha^2 and "
                         f"1/alpha^2 scale the loss), got {alpha!r}")
    if not isinstance(centered, (bool, np.bool_)):
        raise ValueError(f"centered must be True or False, got {centered!r}")
    if isinstance(eta, bool) or not isinstance(eta, numbers.Real) or not eta > 0:
        raise ValueError(f"eta must be > 0, got {eta!r}")
    return ModelOptions(activation=act, activation_param=act_p,
                        multipliers=_positive_per_layer(multipliers, depth, "multipliers"),
                        alpha=float(alpha), centered=bool(centered), loss=los, loss_param=los_p,
                        lr_scales=_positive_per_layer(lr_scales, depth, "lr_scales"),
                        eta=float(eta))
