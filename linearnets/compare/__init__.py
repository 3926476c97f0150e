"""Theory against simulation: every closed form checked on the same grid as the integrator.

Each ``compare_*`` routine takes physical parameters, simulates gradient flow
from :func:`linearnets.init_network` (or, where stated, from a task-aligned
balanced initialisation), evaluates the closed forms on the same time grid with
initial conditions read off the *simulated* initial weights — so there is no free
parameter — and returns a frozen :class:`Comparison`. Its ``tolerance`` is the
size of the error the theory itself predicts (``O(sigma^2)`` corrections, the
integrator's error control, a Monte Carlo standard error ...), multiplied by a
named safety constant (:data:`SAFETY`); ``passed`` says whether the measured
``error`` is within it.

Layout (imports run one way: this table -> topic modules -> ``common``,
``registry``, ``plotting`` -> :mod:`linearnets.theory`, :mod:`linearnets.sim`,
:mod:`linearnets.regimes`):

- :mod:`~linearnets.compare.modes` — learning curves, mode strengths, half times, many outputs;
- :mod:`~linearnets.compare.alignment` — phase I, initial moments, silent alignment;
- :mod:`~linearnets.compare.ntk` — the final NTK (at finite sigma, per layer), kernel regression with it;
- :mod:`~linearnets.compare.transfer` — transfer with the learned kernel;
- :mod:`~linearnets.compare.unwhitened` — phase I on non-whitened inputs;
- :mod:`~linearnets.compare.regimes` — lazy and rich: balanced flows, lazy limit, implicit biases, Var F;
- :mod:`~linearnets.compare.infinite_width` — finite networks against the infinite-width NTK (at t = 0 and trained);
- :mod:`~linearnets.compare.descent` — gradient descent against the closed forms of the discrete step;
- :mod:`~linearnets.compare.common` — tolerances, the flow helper ``_flow``, log-log slopes,
  initial conditions, argument validation (crossing times: :func:`linearnets.regimes.crossing_time`);
- :mod:`~linearnets.compare.registry` — :class:`Comparison`, :class:`Check`, :data:`CHECKS`,
  :func:`run_checks`; :mod:`~linearnets.compare.plotting` — figure helpers.

The registry :data:`CHECKS` maps a name to a :class:`Check` (name, description, run,
plot, presets); ``python -m linearnets verify [--preset small|full|paper]`` runs them
all, or a selection, through :func:`run_checks`. Its one table is at the end of this
file.

How to add a check
------------------
1. Write one function in the topic's module (or a new module beside them):
   ``compare_thing(..., seed=0, backend="auto") -> Comparison``, its docstring stating
   the theory, the range of arguments it covers (validated up front, before anything is
   simulated, with a ValueError naming the argument: ``common._check_args(locals())`` for
   the types and sizes, ``common._small_init`` and ``common._check_plateau`` for a small
   initialisation whose plateau fits ``MAX_PLATEAU``) and how the tolerance follows from
   the theory; and its figure ``plot_thing(row) -> matplotlib.figure.Figure``
   (from the row's ``arrays`` and ``params``; the helpers of :mod:`.plotting`).
2. Add one entry to the table below::

       Check("thing", "one line for --list", topic.compare_thing, topic.plot_thing,
             presets=dict(full=dict(D=50, N=50))),

   ``small`` is the default size; ``full`` and ``paper`` fall back to the next smaller
   preset when missing. The row is named after the check in ``--list``, ``--only``,
   the table, the figure ``thing.png`` and the report.
3. Export ``compare_thing`` from :mod:`linearnets` (``__init__`` and ``__all__``), and
   test that the row passes and that it fails when its theory is made wrong.

Conventions (see docs/conventions.md): ``X`` is (P, D), loss ``(1/2P) sum ||y - f||^2``,
whitened data ``X.T X / P = I``; the mode strength of the network is
``c_alpha = u_alpha^T W_L ... W_1 v_alpha`` for the SVD ``Syx = sum s u v^T``.
"""
from __future__ import annotations

import numpy as np

from . import alignment, descent, infinite_width, modes, ntk, regimes, transfer, unwhitened
from .alignment import compare_initial_moments, compare_phase_one, compare_silent_alignment
from .common import ATOL, RTOL, SAFETY, Z_SCORE
from .descent import (
    compare_catapult,
    compare_gd_mode_map,
    compare_gd_stability,
    compare_lazy_gd,
    compare_logistic_max_margin,
    compare_modified_flow,
)
from .infinite_width import compare_infinite_width_lazy, compare_ntk_at_init
from .modes import compare_half_time_scaling, compare_learning_curves, compare_mode_strengths, compare_path_ntk
from .ntk import (
    compare_final_ntk,
    compare_finite_sigma_ntk,
    compare_intermediate_kernels,
    compare_kernel_gap,
    compare_kernel_path,
)
from .regimes import (
    compare_balanced_ntk_drift,
    compare_diagonal_bias,
    compare_laziness_ratio,
    compare_lazy_limit,
    compare_lambda_balanced,
    compare_output_variance,
    compare_relu_kernel_gap,
    compare_single_neuron,
)
from .registry import CHECKS, PRESETS, Check, Comparison, Skipped, register, run_checks
from .transfer import compare_transfer
from .unwhitened import compare_unwhitened_phase1

__all__ = [
    "Comparison", "Skipped", "Check", "CHECKS", "PRESETS", "register", "run_checks",
    "SAFETY", "Z_SCORE", "RTOL", "ATOL",
    "compare_learning_curves", "compare_phase_one", "compare_initial_moments", "compare_mode_strengths",
    "compare_half_time_scaling", "compare_final_ntk", "compare_silent_alignment", "compare_kernel_gap",
    "compare_kernel_path", "compare_unwhitened_phase1", "compare_path_ntk", "compare_intermediate_kernels",
    "compare_transfer", "compare_finite_sigma_ntk", "compare_lambda_balanced", "compare_balanced_ntk_drift",
    "compare_lazy_limit", "compare_single_neuron", "compare_diagonal_bias", "compare_laziness_ratio",
    "compare_output_variance", "compare_relu_kernel_gap", "compare_ntk_at_init", "compare_infinite_width_lazy",
    "compare_gd_mode_map", "compare_gd_stability", "compare_catapult", "compare_lazy_gd",
    "compare_logistic_max_margin", "compare_modified_flow",
]

_PAPER = dict(D=30, N=50, P=60)          # Atanasov et al. (2022), Figs. 3, E.1, E.3
_SKLEARN = {"sklearn.datasets": "scikit-learn is not installed (pip install linearnets[data]); "
                                "the digits ship with it"}

# =============================================================================
# the registry: one entry per row of ``verify``, in the order of its table
# =============================================================================
register(
    # --- the core theory (Saxe et al. 2014; Atanasov, Bordelon & Pehlevan 2022) ---
    Check("learning_curve", "two-layer loss vs Saxe sigmoid; error ~ sigma^2 (Fig. C.2)",
          modes.compare_learning_curves, modes.plot_learning_curve,
          presets=dict(full=dict(sigmas=np.geomspace(0.1, 0.001, 5), D=50, N=50, P=100))),
    Check("phase_one", "phase I q(t), r(t) vs qr_trajectory / qr_full_path (Fig. C.3)",
          alignment.compare_phase_one, alignment.plot_phase_one,
          presets=dict(small=dict(D=25, N=10, P=50, sigma=0.01))),
    Check("initial_moments", "qr_initial_moments vs Monte Carlo over initialisations (App. C)",
          alignment.compare_initial_moments, alignment.plot_initial_moments,
          presets=dict(small=dict(width=10, input_dim=25, sigma=0.1, n_samples=2000),
                       full=dict(width=10, input_dim=25, sigma=0.1, n_samples=20000))),
    Check("mode_strengths", "deep multi-output mode strengths, depths 2-6",
          modes.compare_mode_strengths, modes.plot_mode_strengths,
          presets=dict(full=dict(_PAPER, spectrum=(4.0, 3.0, 2.0, 1.0), sigma=0.2))),
    Check("half_time_scaling", "half-time scaling with sigma, L = 2..5 (Fig. 3)",
          modes.compare_half_time_scaling, modes.plot_half_time_scaling,
          presets=dict(full=_PAPER,
                       # Fig. 3: sigma^2 from 1e-5 to 1e-1 for L = 2, 1e-4 to 1e-2 for L = 3
                       paper=dict(_PAPER, sigmas={2: np.sqrt(np.geomspace(1e-5, 1e-1, 9)),
                                                  3: np.sqrt(np.geomspace(1e-4, 1e-2, 7)),
                                                  4: np.sqrt(np.geomspace(1e-2, 6e-2, 5)),
                                                  5: np.sqrt(np.geomspace(1e-2, 6e-2, 5))}))),
    Check("final_ntk", "final NTK and alignment vs depth (Figs. E.1, E.3)",
          ntk.compare_final_ntk, ntk.plot_final_ntk,
          presets=dict(full=dict(_PAPER, sigmas=(0.2, 0.1, 0.05)))),
    Check("silent_alignment", "two layers: alignment precedes the loss drop, t_L/t_A vs theory (Fig. 2)",
          alignment.compare_silent_alignment, alignment.plot_silent_alignment,
          presets=dict(full=dict(D=50, N=50, P=100), paper=dict(D=50, N=50, P=100, sigma=1e-3))),
    Check("silent_alignment_L3", "three layers: ordering t_A < t_L (App. E.1)",
          alignment.compare_silent_alignment, alignment.plot_silent_alignment,
          presets=dict(small=dict(depth=3, sigma=0.1), full=dict(depth=3, sigma=0.1, D=50, N=50, P=100))),
    Check("kernel_gap", "trained network vs kernel regression with its final NTK, X_gamma (App. G)",
          ntk.compare_kernel_gap, ntk.plot_kernel_gap,
          presets=dict(full=dict(gammas=(0.0, 0.25, 0.5, 0.75, 1.0)),
                       paper=dict(gammas=(0.0, 0.25, 0.5, 0.75, 1.0), Ps=(50, 25), D=50, N=50))),
    Check("kernel_path", "kernel regression with K(t) at any t = pseudo-inverse (App. G)",
          ntk.compare_kernel_path, ntk.plot_kernel_path,
          presets=dict(full=dict(n_probe=16), paper=dict(D=50, N=50, P=25, n_probe=16))),
    # --- the extended closed forms (Atanasov et al. 2022, App. C.3, E.3, F, H) ----
    Check("unwhitened_phase1", "unwhitened phase I: six statistics ~ sigma^2, kernel along Sigma beta (App. C.3)",
          unwhitened.compare_unwhitened_phase1, unwhitened.plot_unwhitened_phase1,
          presets=dict(full=dict(sigmas=np.geomspace(0.01, 0.00125, 4), D=20, N=50, P=2000, n_times=200))),
    Check("path_ntk", "many outputs: modes and NTK along the path, learning order and times (App. H)",
          modes.compare_path_ntk, modes.plot_path_ntk,
          presets=dict(full=dict(_PAPER, depths=(2, 3, 4), spectrum=(4.0, 3.0, 2.0, 1.0),
                                 c0=(1e-3, 3e-3, 1e-2, 2e-2), n_probe=6, n_times=100, random_depths=(2, 3),
                                 sigmas=(0.02, 0.01, 0.005, 0.0025), random_width=50))),
    Check("intermediate_kernels", "layer-l kernels of a trained deep network, error ~ sigma^2 (App. E.3)",
          ntk.compare_intermediate_kernels, ntk.plot_intermediate_kernels,
          presets=dict(full=dict(_PAPER, depth=4, sigmas=(0.1, 0.05, 0.025, 0.0125),
                                 spectrum=(4.0, 3.0, 2.0, 1.0)))),
    Check("transfer", "transfer error vs Monte Carlo kernel regression; trained-NTK spike A = L - 1 (App. F)",
          transfer.compare_transfer, transfer.plot_transfer,
          presets=dict(full=dict(P=70, D=200, As=(0.0, 0.5, 1.0, 2.0, 4.0, 9.0), n_draw=1000, depths=(2, 3, 4),
                                 sigma=0.03, net_D=30, net_N=50, net_P=60))),
    Check("finite_sigma_ntk", "final NTK at finite sigma: error sigma^3 vs sigma^2 (App. H.2)",
          ntk.compare_finite_sigma_ntk, ntk.plot_finite_sigma_ntk,
          presets=dict(full=dict(_PAPER, sigmas=np.geomspace(0.04, 0.005, 4), n_probe=20))),
    # --- lazy and rich (Dominé et al. 2024; Kunin et al. 2024; Woodworth et al. 2020; Geiger et al. 2019) ---
    Check("lambda_balanced", "lambda-balanced exact flow vs gradient flow, lambda in {-2, 0, 2} (Dominé et al.)",
          regimes.compare_lambda_balanced, regimes.plot_lambda_balanced,
          presets=dict(full=dict(lams=(-4.0, -2.0, -0.5, 0.0, 0.5, 2.0, 4.0), D=8, N=6, C=6, P=64, n_times=200))),
    Check("balanced_ntk_drift", "NTK drift of lambda-balanced networks ~ 1/lambda",
          regimes.compare_balanced_ntk_drift, regimes.plot_balanced_ntk_drift,
          presets=dict(full=dict(lams=(16.0, 32.0, 64.0, 128.0, 256.0, 512.0), D=6, N=5, C=5, P=24))),
    Check("lazy_limit", "centered linear network -> lazy_prediction, distance and NTK drift ~ 1/alpha",
          regimes.compare_lazy_limit, regimes.plot_lazy_limit,
          presets=dict(full=dict(alphas=(32.0, 64.0, 128.0, 256.0, 512.0), N=200, D=20, P=10, Q=10))),
    Check("lazy_limit_relu", "centered ReLU network -> lazy_prediction, distance and NTK drift ~ 1/alpha",
          regimes.compare_lazy_limit, regimes.plot_lazy_limit,
          presets=dict(small=dict(activation="relu"),
                       full=dict(N=200, D=20, P=10, Q=10, activation="relu"))),
    Check("single_neuron", "single neuron, eta_a != eta_w: exact nu(t), delta, implicit bias (Kunin et al.)",
          regimes.compare_single_neuron, regimes.plot_single_neuron,
          presets=dict(full=dict(D=20, P=60, n_times=200))),
    Check("diagonal_bias", "diagonal network: flow limit = Woodworth's implicit bias, alpha from l2 to l1",
          regimes.compare_diagonal_bias, regimes.plot_diagonal_bias,
          presets=dict(full=dict(alphas=np.geomspace(10.0, 1e-4, 11), P=10, D=40))),
    Check("laziness_ratio", "laziness ratio ~ sigma^{-L}, linear L = 2, 3 (silent alignment App. I)",
          regimes.compare_laziness_ratio, regimes.plot_laziness_ratio,
          presets=dict(full=dict(depths=(2, 3, 4), sigmas=(0.2, 0.1, 0.05, 0.025), N=16))),
    Check("laziness_ratio_relu", "laziness ratio ~ sigma^{-L}, ReLU L = 2, 3 (silent alignment App. I)",
          regimes.compare_laziness_ratio, regimes.plot_laziness_ratio,
          presets=dict(small=dict(activation="relu"),
                       full=dict(depths=(2, 3, 4), sigmas=(0.2, 0.1, 0.05, 0.025), N=16, activation="relu"))),
    Check("output_variance", "Var F across seeds ~ 1/h, trained centered network (Geiger et al. 2019)",
          regimes.compare_output_variance, regimes.plot_output_variance,
          presets=dict(full=dict(widths=(16, 32, 64, 128, 256, 512), n_seeds=64))),
    Check("relu_kernel_gap",
          "ReLU net = kernel machine of its final NTK at small sigma, digits X_gamma (Fig. 4)",
          regimes.compare_relu_kernel_gap, regimes.plot_relu_kernel_gap, requires=_SKLEARN,
          presets=dict(full=dict(gammas=(0.25, 0.5, 0.75, 1.0), sigmas=(1.0, 1e-1, 1e-2, 1e-3), n_draws=10))),
    # --- the infinite-width limit (Jacot et al. 2018; Lee et al. 2019) -----------------
    Check("ntk_at_init", "empirical NTK of 'ntk' networks -> infinite_width_kernels, error ~ m^-1/2",
          infinite_width.compare_ntk_at_init, infinite_width.plot_ntk_at_init,
          presets=dict(full=dict(widths=(64, 256, 1024, 4096, 8192), reps=8))),
    Check("infinite_width_lazy", "wide 'ntk' ReLU net under gradient flow -> lazy_prediction(K_inf), ~ m^-1/2",
          infinite_width.compare_infinite_width_lazy, infinite_width.plot_infinite_width_lazy,
          presets=dict(full=dict(widths=(128, 512, 2048, 8192, 32768), reps=8))),
    # --- the discrete step (Lewkowycz et al. 2020; Soudry et al. 2018; Barrett & Dherin 2021) --
    Check("gd_mode_map", "GD on a balanced, aligned deep linear net = gd_mode_strength, exact to rounding",
          descent.compare_gd_mode_map, descent.plot_gd_mode_map,
          presets=dict(full=dict(depth=4, n_steps=2000))),
    Check("gd_stability", "onset of oscillation of GD bracketed by lr* = 2/(L s^(2-2/L)), L = 2, 3",
          descent.compare_gd_stability, descent.plot_gd_stability,
          presets=dict(full=dict(depths=(2, 3, 4), fractions=(0.9, 0.99, 1.01, 1.1)))),
    Check("catapult", "two-layer net, one sample: GD = catapult_map; lazy / catapult / divergent at large width",
          descent.compare_catapult, descent.plot_catapult,
          presets=dict(full=dict(widths=(4, 64, 1024), etas=(0.5, 1.5, 2.5, 3.0, 3.5, 4.5, 6.0)))),
    Check("lazy_gd", "wide 'ntk' ReLU net under GD -> lazy_prediction_gd(K_inf), distance ~ m^-1/2",
          descent.compare_lazy_gd, descent.plot_lazy_gd,
          presets=dict(full=dict(widths=(128, 512, 2048, 8192, 32768), reps=8))),
    Check("logistic_max_margin", "logistic loss: direction -> max_margin_direction like 1/log t (Soudry et al.)",
          descent.compare_logistic_max_margin, descent.plot_logistic_max_margin,
          presets=dict(full=dict(n_steps=1_000_000))),
    Check("modified_flow", "GD vs flow O(h), vs modified flow O(h^2), tanh MLP (Barrett & Dherin)",
          descent.compare_modified_flow, descent.plot_modified_flow),
)
