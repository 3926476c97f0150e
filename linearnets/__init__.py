"""linearnets: closed-form theory and fast simulation of deep linear network learning dynamics.

The public surface is re-exported here (:data:`__all__`); the implementation lives in
:mod:`linearnets.theory` (closed forms), :mod:`linearnets.sim` (gradient-flow
simulation), :mod:`linearnets.regimes` (diagnostics), :mod:`linearnets.compare` (theory
against simulation) and :mod:`linearnets.sweep` (sweeps; the module is itself callable:
``ln.sweep(fn, grid, ...)`` is :func:`linearnets.sweep.sweep`).
"""
from ._version import __version__  # noqa: F401  (the package's version)

# one notice on stderr when this package's first numba kernel compiles (and a count of them)
from . import _numba_cache

_numba_cache.install()

# --- theory: mode dynamics -------------------------------------------------
from .theory.dynamics import (
    half_time,
    loss_curve,
    mode_strength,
    mode_time,
    plateau_time,
)

# --- theory: phase I alignment -----------------------------------------------
from .theory.alignment import qr_full_path, qr_initial_moments, qr_trajectory

# --- theory: final NTK -------------------------------------------------------
from .theory.ntk import final_alignment, final_ntk, final_ntk_multi

# --- theory: kernels ---------------------------------------------------------
from .theory.kernels import kernel_alignment, kernel_regression

# --- simulation ----------------------------------------------------------------
from .network import empirical_ntk, end_to_end, forward, init_balanced, init_network

# --- simulation: integrator ------------------------------------------------------
from .sim.flow import gradient_flow

# --- simulation: NTK ---------------------------------------------------------------

# --- simulation: networks, trajectories, data helpers, backends (extensions) ------
from .sim.flow import FlowError, FlowInterrupted, FlowStatus, FlowWarning, Trajectory
from .data import (
    load_digits,
    partially_whitened,
    scalar_teacher,
    sufficient_statistics,
    teacher_task,
    whitened_inputs,
)

# --- theory: extensions (unwhitened phase I, many outputs, intermediate kernels, transfer) ---
from .theory.unwhitened import (
    unwhitened_init_stats,
    unwhitened_init_stats_expected,
    unwhitened_kernel_matrix,
    unwhitened_linear_weights,
    unwhitened_phase1,
    unwhitened_system_matrix,
)
from .theory.intermediate import (
    intermediate_alignment,
    intermediate_feature_matrix,
    intermediate_kernel,
)
from .theory.transfer import (
    trained_ntk_spike,
    transfer_error,
    transfer_error_trained,
    transfer_kappa,
)
from .theory.multimode import (
    aligned_ntk,
    final_kernel_matrix_finite_sigma,
    final_ntk_finite_sigma,
    mode_learning_times,
    multimode_dynamics,
    path_ntk,
    task_modes,
)

# --- theory: initial conditions of the closed forms read off given weights --------
from .theory.matching import matched_initial_conditions

# --- comparison of theory and simulation (the rows of ``python -m linearnets verify``) ------
from .compare import (
    CHECKS,
    Comparison,
    compare_balanced_ntk_drift,
    compare_diagonal_bias,
    compare_final_ntk,
    compare_finite_sigma_ntk,
    compare_catapult,
    compare_gd_mode_map,
    compare_gd_stability,
    compare_lazy_gd,
    compare_logistic_max_margin,
    compare_modified_flow,
    compare_half_time_scaling,
    compare_infinite_width_lazy,
    compare_initial_moments,
    compare_intermediate_kernels,
    compare_kernel_gap,
    compare_kernel_path,
    compare_laziness_ratio,
    compare_lazy_limit,
    compare_lambda_balanced,
    compare_learning_curves,
    compare_mode_strengths,
    compare_ntk_at_init,
    compare_output_variance,
    compare_path_ntk,
    compare_phase_one,
    compare_relu_kernel_gap,
    compare_silent_alignment,
    compare_single_neuron,
    compare_transfer,
    compare_unwhitened_phase1,
    run_checks,
)

# --- sweeps: grids of independent runs, stored point by point ---------------------------
# the subpackage, callable as its function sweep(): ln.sweep(...) and ln.sweep.stream(...) both work
from . import sweep
from .sim.prepared import PreparedFlow, prepare_flow

# --- regimes, lazy and rich: exact crossover theory and diagnostics ---------------
from .theory.lazy import lazy_prediction
from .theory.infinite_width import infinite_width_kernels
from .theory.balanced import init_lambda_balanced, lambda_balanced_flow, lambda_balanced_ntk
from .theory.single_neuron import single_neuron_delta, single_neuron_implicit_bias, single_neuron_nu
from .theory.diagonal import diagonal_implicit_bias, diagonal_potential, diagonal_q

# --- theory: the discrete step (gradient descent's exact answers) ---------------------
from .theory.discrete import (
    catapult_map,
    gd_mode_strength,
    gd_stability_threshold,
    lazy_prediction_gd,
    max_margin_direction,
)
from .regimes import (
    condensation,
    kernel_drift,
    laziness_ratio,
    output_variance,
    phase_coordinates,
    rd_slope,
    relative_change,
    scaling_exponent,
    variance_slope,
)

# --- simulation: the general simulator (models and stepping methods apart) ------------
from .sim.models import Model, ModelOptions, model_names, register_model

# --- simulation: named parameterisations (standard, NTK, mean field, Zhou et al., Geiger et al.) ---
from .parameterisations import (
    Parameterised,
    activation_normalisation,
    geiger_parameterisation,
    init_parameterised,
    zhou_normalised,
    zhou_parameterisation,
)

# --- simulation: the ensemble axis (B initialisations of one network in one call) ------
from .sim.ensemble import EnsembleTrajectory, gradient_flow_ensemble

# --- simulation: gradient descent, mini-batches, the sharpness of the loss ------------
from .sim.descent import gradient_descent, sharpness

# --- the BLAS threads of every call (one for small products, free cores for large) -----
from ._threads import threads

#: The public names, exactly (``from linearnets import *``; tests check it against the namespace).
__all__ = [
    "half_time",
    "loss_curve",
    "mode_strength",
    "mode_time",
    "plateau_time",
    "qr_full_path",
    "qr_initial_moments",
    "qr_trajectory",
    "final_alignment",
    "final_ntk",
    "final_ntk_multi",
    "kernel_alignment",
    "kernel_regression",
    "init_network",
    "gradient_flow",
    "empirical_ntk",
    "end_to_end",
    "forward",
    "init_balanced",
    "FlowError",
    "FlowInterrupted",
    "FlowStatus",
    "FlowWarning",
    "Trajectory",
    "load_digits",
    "partially_whitened",
    "scalar_teacher",
    "sufficient_statistics",
    "teacher_task",
    "whitened_inputs",
    "unwhitened_init_stats",
    "unwhitened_init_stats_expected",
    "unwhitened_kernel_matrix",
    "unwhitened_linear_weights",
    "unwhitened_phase1",
    "unwhitened_system_matrix",
    "intermediate_alignment",
    "intermediate_feature_matrix",
    "intermediate_kernel",
    "trained_ntk_spike",
    "transfer_error",
    "transfer_error_trained",
    "transfer_kappa",
    "aligned_ntk",
    "final_kernel_matrix_finite_sigma",
    "final_ntk_finite_sigma",
    "mode_learning_times",
    "multimode_dynamics",
    "path_ntk",
    "task_modes",
    "matched_initial_conditions",
    "CHECKS",
    "Comparison",
    "compare_balanced_ntk_drift",
    "compare_diagonal_bias",
    "compare_final_ntk",
    "compare_finite_sigma_ntk",
    "compare_catapult",
    "compare_gd_mode_map",
    "compare_gd_stability",
    "compare_lazy_gd",
    "compare_logistic_max_margin",
    "compare_modified_flow",
    "compare_half_time_scaling",
    "compare_infinite_width_lazy",
    "compare_initial_moments",
    "compare_intermediate_kernels",
    "compare_kernel_gap",
    "compare_kernel_path",
    "compare_laziness_ratio",
    "compare_lazy_limit",
    "compare_lambda_balanced",
    "compare_learning_curves",
    "compare_mode_strengths",
    "compare_ntk_at_init",
    "compare_output_variance",
    "compare_path_ntk",
    "compare_phase_one",
    "compare_relu_kernel_gap",
    "compare_silent_alignment",
    "compare_single_neuron",
    "compare_transfer",
    "compare_unwhitened_phase1",
    "run_checks",
    "sweep",
    "PreparedFlow",
    "prepare_flow",
    "lazy_prediction",
    "infinite_width_kernels",
    "init_lambda_balanced",
    "lambda_balanced_flow",
    "lambda_balanced_ntk",
    "single_neuron_delta",
    "single_neuron_implicit_bias",
    "single_neuron_nu",
    "diagonal_implicit_bias",
    "diagonal_potential",
    "diagonal_q",
    "gd_mode_strength",
    "gd_stability_threshold",
    "catapult_map",
    "lazy_prediction_gd",
    "max_margin_direction",
    "condensation",
    "kernel_drift",
    "laziness_ratio",
    "output_variance",
    "phase_coordinates",
    "rd_slope",
    "relative_change",
    "scaling_exponent",
    "variance_slope",
    "Model",
    "ModelOptions",
    "model_names",
    "register_model",
    "Parameterised",
    "activation_normalisation",
    "geiger_parameterisation",
    "init_parameterised",
    "zhou_normalised",
    "zhou_parameterisation",
    "EnsembleTrajectory",
    "gradient_flow_ensemble",
    "gradient_descent",
    "sharpness",
    "threads",
]
