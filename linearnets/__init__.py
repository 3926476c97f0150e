"""linearnets: closed-form theory and fast simulation of deep linear network learning dynamics.

The public surface is re-exported here; the implementation lives in
:mod:`linearnets.theory` (closed forms), :mod:`linearnets.sim` (gradient-flow
simulation) and :mod:`linearnets.compare` (theory against simulation).
"""
__version__ = "0.1.0"

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
from .sim.network import init_network

# --- simulation: integrator ------------------------------------------------------
from .sim.flow import gradient_flow

# --- simulation: NTK ---------------------------------------------------------------
from .sim.ntk import empirical_ntk

# --- comparison of theory and simulation ------------------------------------------
from .compare import (
    CHECKS,
    Comparison,
    compare_final_ntk,
    compare_half_time_scaling,
    compare_initial_moments,
    compare_kernel_gap,
    compare_kernel_path,
    compare_learning_curves,
    compare_mode_strengths,
    compare_phase_one,
    compare_silent_alignment,
    run_checks,
)
