"""The compiled loops' state by name: return codes, and the slots of the float64 and int64
arrays that a loop updates in place, one place for the kernels and their runners.

A kernel reads ``th[H]``, not ``th[1]``: numba folds a module-level int into a literal, so
the named slot costs nothing, and the package's cache key hashes this module with every
kernel that imports it (``_numba_cache.kernel_sources``).
"""
from __future__ import annotations

# -- return codes besides a FlowStatus code (0 success, -1 underflow, -2 non-finite, -3 budget)
#: An explicit loop holds an accepted step across an output time (dense output).
PENDING = 1
#: The stiffness test fired after an accepted step that did not end on the target.
STIFF = 2
#: The Rosenbrock-W hand-back test fired (the explicit pair would be cheaper).
NONSTIFF = 3
#: The stop event fired inside an accepted step.
STOPPED = 4

# -- th (float64): the loop's time, step and controller memory ---------------------------
#: time, proposed step, remembered stiffness estimate, the last accepted unclipped step and
#: its floored error (``base.accept_step``'s memory), and the call's target (the loop ends a
#: step there) and output time (an explicit loop holds the step that reaches it; infinite:
#: none), set by the runner before each call: every loop's first seven slots.
T, H, RHO, H_PREV, ERR_PREV, T_TARGET, T_OUT = range(7)
#: the explicit loop: a held step's length and end (PENDING), the counts of the stiffness
#: test, at kinks the stepper in use (0 primary, 1 fallback), the rejections across a
#: switch in a row, calm steps since the last crossing, the last crossing (NaN: none) and
#: the time spent sliding; where the stop fired, and the stop value at ``y``.
(H_STEP, T_NEW, N_STIFF, N_NONSTIFF, ACTIVE, KINK_REJ, CALM, LAST_CROSS, SLIDING, T_STOP,
 G) = range(7, 18)
TH_SIZE = 18
#: the Rosenbrock-W loop: accepted steps in a row on which the explicit pair was cheaper,
#: and the work counted at the last step.
N_CHEAPER, COST0 = 7, 8

# -- stats (int64): counters ---------------------------------------------------------------
#: evaluations, accepted and rejected steps, and the attempted steps at which the call
#: returns (set by the runner: the chunk's budget), every loop's; the explicit loop's
#: underflow after non-finite trials (0/1), capped steps, kink crossings and fallback steps.
NFEV, ACCEPTED, REJECTED, BUDGET = range(4)
#: The Rosenbrock-W loop's Jacobian-vector products.
NONFINITE_TRIALS, CAPPED, KINKS, FALLBACK_STEPS, NJEV = range(4, 9)
STATS_SIZE = 9

# -- a pair (tuple) as the explicit loop takes it (``compiled.tableau_args``) ---------------
#: the tableau's arrays, Hairer's third-order error weights where USE_E3, the controller's
#: exponent ``-1 / (error order + 1)`` and the pair's relative tolerance.  ``pairs = (tab,
#: low, late)``: the primary pair, the fallback at kinks for its first ``KINK_EARLY_STEPS``
#: accepted steps, and the fallback after them (``base.kink_tolerances``).
P_A, P_B, P_E, P_E3, P_USE_E3, P_EXPONENT, P_RTOL = range(7)

# -- ctl (float64): the explicit loop's settings (``compiled.loop_control``) ----------------
#: atol, and 1.0 for the predictive controller (the loops read ``base``'s constants as globals)
ATOL, PREDICTIVE = range(2)

# -- stiff (float64): the stability cap and stiffness test (``compiled.stiffness_args``) ---
BOUNDARY, CAP_SAFETY, WSUM, STIFF_STEPS, STIFF_HELD = range(5)

# -- the Rosenbrock-W loop's ctl (float64; ``compiled.rosw``) ------------------------------
R_EXPONENT, R_RTOL, R_ATOL, R_BOUNDARY, R_EXPLICIT_STAGES, R_SWITCH_STEPS = range(6)
#: rows of its ``work`` (n,) scratch: stage state, stage derivative, right-hand side, CG's
#: residual, direction and product, the error scale, and the metric where there is one.
W_Y, W_F, W_B, W_R, W_P, W_JV, W_SCALE, W_METRIC = range(8)
