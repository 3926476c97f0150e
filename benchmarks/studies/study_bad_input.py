"""Adversarial inputs over the public API: what each function does with bad or extreme input.

A grid of calls, per public function and argument: seeds (-1, 1.5, 'abc', NaN, True),
integers as strings, booleans and fractions, NaN/inf, values near 1e150-1e300, empty
arrays, wrong shapes, None; plus hand-written edge cases (empty mode lists, D = 0, empty
probes, the compare routines at the edges of their theory).  Every call runs in a worker
process with a time limit, and is classified as

ok
    returned a result with no NaN and no numpy RuntimeWarning, and the input was valid
    (an extreme but valid input may give +-inf, silently: the overflow rule of
    ``docs/conventions.md``);
clear
    raised ValueError / TypeError (or a subclass) whose message names the argument, or
    a simulation reported its own failure (FlowError / FlowWarning of gradient_flow);
unclear
    raised anything else, or an error that does not name the argument;
bad
    silently bad: accepted an invalid input, or returned NaN, or let a numpy
    RuntimeWarning out, or a result of the wrong type;
hang
    did not finish within the time limit (the worker is killed and restarted).

Run (from the repository root)::

    PYTHONPATH=$PWD python benchmarks/studies/study_bad_input.py             # the whole grid
    PYTHONPATH=$PWD python benchmarks/studies/study_bad_input.py --only loss_curve,final_ntk
    PYTHONPATH=$PWD python benchmarks/studies/study_bad_input.py --json out.json --show bad,unclear,hang

It prints the counts per class, then every call of the classes named by ``--show``
(default: unclear, bad, hang).  The counts do not depend on the machine's speed except
through ``hang`` (``--timeout``, default 30 s per call; 90 s for the compare routines).
"""
from __future__ import annotations

import argparse
import collections
import json
import math
import os
import re
import select
import subprocess
import sys
import tempfile
import time
import traceback
import warnings

import numpy as np

CLASSES = ("ok", "clear", "unclear", "bad", "hang")
DEFAULT_TIMEOUT = 30.0
COMPARE_TIMEOUT = 90.0

# --------------------------------------------------------------------------- data
# Valid inputs, built in the worker (cheap, deterministic).


def _data():
    import linearnets as ln
    rng = np.random.default_rng(12345)
    d = {}
    d["X"] = ln.whitened_inputs(6, 3, seed=0)
    d["X2"] = rng.standard_normal((4, 3))
    d["beta"] = np.array([0.6, 0.8, 0.0])
    d["Syx"] = np.array([[1.0, 0.5, 0.0], [0.0, 0.3, 0.2]])
    d["Syx1"] = np.array([[0.6, 0.8, 0.0]])
    d["y"] = d["X"] @ d["beta"]
    d["Y2"] = d["X"] @ d["Syx"].T
    d["W1"] = 0.1 * rng.standard_normal((4, 3))
    d["w2"] = 0.1 * rng.standard_normal(4)
    d["W2"] = 0.1 * rng.standard_normal((1, 4))
    d["W2c"] = 0.1 * rng.standard_normal((2, 4))
    d["Sigma"] = np.diag([1.0, 0.5, 0.25])
    d["weights"] = [d["W1"], d["W2"]]
    d["weights3"] = [d["W1"], 0.3 * rng.standard_normal((4, 4)), d["W2"]]
    Kx = d["X"] @ d["X"].T + 0.1 * np.eye(6)
    d["K"] = Kx
    d["Kt"] = d["X2"] @ d["X"].T
    d["t"] = np.array([0.0, 0.5, 2.0])
    return d


# ------------------------------------------------------------------------ palettes
# Each variant: (label, value or callable(base) -> value, expectation), expectation
# "reject" (the input is invalid: only a clear error is right) or "edge" (valid but
# extreme: a finite result, +-inf without a warning, or a clear error).

R, E = "reject", "edge"


def _scaled(f):
    return lambda b: _map_arrays(b, lambda a: a * f)


def _map_arrays(b, fn):
    if isinstance(b, (list, tuple)) and b and all(isinstance(x, np.ndarray) for x in b):
        return type(b)(fn(np.asarray(x, dtype=float)) for x in b)
    return fn(np.asarray(b, dtype=float))


def _with(value):
    def put(b):
        def one(a):
            a = np.array(a, dtype=float)
            if a.size:
                a.flat[0] = value
            return a
        return _map_arrays(b, one)
    return put


PALETTES = {
    # None: fresh entropy, as numpy.random.default_rng(None)
    "seed": [("-1", -1, R), ("1.5", 1.5, R), ("'abc'", "abc", R), ("nan", math.nan, R),
             ("True", True, R), ("np.int64(3)", np.int64(3), E), ("None", None, E),
             ("SeedSequence(1)", lambda b: np.random.SeedSequence(1), E),
             ("default_rng(1)", lambda b: np.random.default_rng(1), E)],
    "int": [("'3'", "3", R), ("True", True, R), ("2.5", 2.5, R), ("-1", -1, R), ("0", 0, R),
            ("nan", math.nan, R), ("inf", math.inf, R), ("None", None, R),
            ("array([True])", lambda b: np.array([True]), R)],
    "pos": [("'abc'", "abc", R), ("'1'", "1", R), ("True", True, R), ("nan", math.nan, R),
            ("inf", math.inf, R), ("-1.0", -1.0, R), ("0.0", 0.0, R), ("None", None, R),
            ("1e150", 1e150, E), ("1e300", 1e300, E), ("1e-300", 1e-300, E)],
    "nonneg": [("'abc'", "abc", R), ("'1'", "1", R), ("True", True, R), ("nan", math.nan, R),
               ("inf", math.inf, R), ("-1.0", -1.0, R), ("None", None, R), ("0.0", 0.0, E),
               ("1e150", 1e150, E), ("1e300", 1e300, E)],
    "real": [("'abc'", "abc", R), ("'1'", "1", R), ("True", True, R), ("nan", math.nan, R),
             ("inf", math.inf, R), ("None", None, R), ("1e300", 1e300, E),
             ("-1e300", -1e300, E)],
    "time": [("'abc'", "abc", R), ("nan", math.nan, R), ("-1", -1.0, R), ("None", None, R),
             ("True", True, R), ("[]", [], E), ("0-d 0.5", lambda b: np.array(0.5), E),
             ("1e150", 1e150, E), ("1e300", 1e300, E)],
    "array": [("None", None, R), ("'abc'", "abc", R), ("with nan", _with(math.nan), R),
              ("with inf", _with(math.inf), R), ("bool", lambda b: _map_arrays(b, lambda a: a > 0), R),
              ("x1e150", _scaled(1e150), E), ("x1e300", _scaled(1e300), E),
              ("x1e-300", _scaled(1e-300), E),
              ("zero rows", lambda b: _map_arrays(b, lambda a: a[:0]), E),
              ("3-D", lambda b: _map_arrays(b, lambda a: a[None, None]), R)],
    "weights": [("None", None, R), ("[]", [], R), ("'abc'", "abc", R),
                ("with nan", _with(math.nan), R), ("x1e150", _scaled(1e150), E),
                ("x1e300", _scaled(1e300), E), ("shapes do not chain", lambda b: [b[0], b[0]], R)],
    "str": [("'bogus'", "bogus", R), ("5", 5, R), ("None", None, R)],
    "bool": [("'yes'", "yes", R), ("nan", math.nan, R)],
    "fn": [("None", None, R), ("nan", math.nan, R), ("'abc'", "abc", R), ("5", 5, R)],
    # an index that may be 0 (a layer), an optional integer (None: its default)
    "int0": [("'3'", "3", R), ("True", True, R), ("2.5", 2.5, R), ("-1", -1, R),
             ("nan", math.nan, R), ("None", None, R), ("array([True])", lambda b: np.array([True]), R),
             ("0", 0, E)],
    "int?": [("'3'", "3", R), ("True", True, R), ("2.5", 2.5, R), ("-1", -1, R), ("0", 0, R),
             ("nan", math.nan, R), ("inf", math.inf, R)],
    # the compare routines run simulations: a short palette
    "c_int": [("'3'", "3", R), ("True", True, R), ("-1", -1, R), ("0", 0, R)],
    "c_pos": [("'abc'", "abc", R), ("nan", math.nan, R), ("-1.0", -1.0, R), ("0.0", 0.0, R)],
    "c_seq": [("'abc'", "abc", R), ("()", (), R), ("(nan,)", (math.nan,), R), ("(-1,)", (-1,), R)],
    "c_seed": [("-1", -1, R), ("1.5", 1.5, R), ("'abc'", "abc", R)],
    "c_str": [("'bogus'", "bogus", R)],
}

# "array?": None is the documented default; "array*": any number of dimensions
PALETTES["array?"] = [v for v in PALETTES["array"] if v[0] != "None"]
PALETTES["array*"] = [v for v in PALETTES["array"] if v[0] != "3-D"]
# an index or count that may be 0, None its default
PALETTES["int0?"] = [v for v in PALETTES["int0"] if v[0] != "None"]

# ------------------------------------------------------------------------ registry
# name -> (callable path, base kwargs (values or "@key" from _data, or callables of d),
#          {argument: palette})

A = "array"


def _registry():
    reg = {}

    def add(name, base, args, target=None, timeout=None):
        reg[name] = dict(target=target or name, base=base, args=args, timeout=timeout)

    # theory: mode dynamics
    add("mode_strength", dict(t="@t", s=1.0, c0=1e-3, depth=3, eta=1.0),
        dict(t="time", s="pos", c0="pos", depth="int", eta="pos"))
    add("mode_time", dict(c=0.5, s=1.0, c0=1e-3, depth=3, eta=1.0),
        dict(c="pos", s="pos", c0="pos", depth="int", eta="pos"))
    add("half_time", dict(s=1.0, c0=1e-3, depth=2, eta=1.0),
        dict(s="pos", c0="pos", depth="int", eta="pos"))
    add("plateau_time", dict(s=1.0, c0=1e-3, depth=3, eta=1.0),
        dict(s="pos", c0="pos", depth="int", eta="pos"))
    add("loss_curve", dict(t="@t", s=[2.0, 1.0], c0=[1e-3, 1e-3], depth=2, eta=1.0),
        dict(t="time", s="pos", c0="pos", depth="int", eta="pos"))
    # phase I
    add("qr_trajectory", dict(t="@t", s=1.0, q0=1e-3, r0=0.0, eta=1.0),
        dict(t="time", s="pos", q0="pos", r0="real", eta="pos"))
    add("qr_initial_moments", dict(width=10, input_dim=5, sigma=0.1),
        dict(width="int", input_dim="int", sigma="pos"))
    add("qr_full_path", dict(t="@t", s=1.0, q0=1e-3, r0=0.0, eta=1.0),
        dict(t="time", s="pos", q0="pos", r0="real", eta="pos"))
    # final NTK
    add("final_ntk", dict(X1="@X", X2="@X2", beta="@beta", s=2.0, depth=3),
        dict(X1=A, X2=A, s="pos", depth="int"))
    add("final_ntk_multi", dict(X1="@X", X2="@X2", Syx="@Syx", depth=3),
        dict(X1=A, X2=A, Syx=A, depth="int"))
    add("final_alignment", dict(depth=3, n=4), dict(depth="int", n="int"))
    add("kernel_regression", dict(K_train="@K", K_test_train="@Kt", Y="@y", ridge=0.0),
        dict(K_train=A, K_test_train=A, Y=A, ridge="nonneg"))
    add("kernel_alignment", dict(K="@K", y="@y"), dict(K=A, y=A))
    # multimode, intermediate, transfer
    add("aligned_ntk", dict(X1="@X", X2="@X2", Syx="@Syx", c=[0.5, 0.1], depth=3),
        dict(X1=A, X2=A, Syx=A, c="array*", depth="int"))
    add("multimode_dynamics", dict(t="@t", Syx="@Syx", c0=1e-3, depth=2, eta=1.0),
        dict(t="time", Syx=A, c0="pos", depth="int", eta="pos"))
    add("mode_learning_times", dict(s=[2.0, 1.0], c0=1e-3, depth=2, eta=1.0, fraction=0.5),
        dict(s="pos", c0="pos", depth="int", eta="pos", fraction="pos"))
    add("path_ntk", dict(t="@t", X1="@X", X2="@X2", Syx="@Syx", c0=1e-3, depth=2),
        dict(t="time", X1=A, X2=A, Syx=A, c0="pos", depth="int"))
    add("task_modes", dict(Syx="@Syx"), dict(Syx=A))
    add("final_kernel_matrix_finite_sigma", dict(W1="@W1", w2="@w2", beta="@beta", s=1.0),
        dict(W1=A, w2=A, beta=A, s="pos"))
    add("final_ntk_finite_sigma", dict(X1="@X", X2="@X2", W1="@W1", w2="@w2", beta="@beta", s=1.0),
        dict(X1=A, X2=A, W1=A, w2=A, s="pos"))
    add("intermediate_alignment", dict(singular_values=[2.0, 1.0], depth=3, layer=1),
        dict(singular_values="pos", depth="int", layer="int0"))
    add("intermediate_feature_matrix", dict(Syx="@Syx", depth=3, layer=1),
        dict(Syx=A, depth="int", layer="int0"))
    add("intermediate_kernel", dict(X1="@X", X2="@X2", Syx="@Syx", depth=3, layer=1),
        dict(X1=A, X2=A, Syx=A, depth="int", layer="int0"))
    add("trained_ntk_spike", dict(depth=3, s=1.0), dict(depth="int", s="pos"))
    add("transfer_kappa", dict(P=40.0, D=100.0, A=1.0, ridge=0.0),
        dict(P="pos", D="pos", A="nonneg", ridge="nonneg"))
    add("transfer_error", dict(P=40.0, D=100.0, A=1.0, alpha=1.0, ridge=0.0, noise=0.0),
        dict(P="pos", D="pos", A="nonneg", alpha="real", noise="nonneg"))
    add("transfer_error_trained", dict(P=40.0, D=100.0, depth=2, alpha=1.0, s=1.0),
        dict(P="pos", D="pos", depth="int", alpha="real", s="pos"))
    # unwhitened family
    add("unwhitened_init_stats", dict(W1="@W1", w2="@w2", Sigma="@Sigma", beta="@beta"),
        dict(W1=A, w2=A, Sigma=A))
    add("unwhitened_init_stats_expected", dict(width=4, sigma=0.1, Sigma="@Sigma", beta="@beta"),
        dict(width="int", sigma="pos", Sigma=A))
    add("unwhitened_system_matrix", dict(Sigma="@Sigma", beta="@beta", s=1.0, eta=1.0),
        dict(Sigma=A, s="pos", eta="pos"))
    add("unwhitened_phase1",
        dict(t="@t", Sigma="@Sigma", beta="@beta", s=1.0,
             init_stats=lambda d: __import__("linearnets").unwhitened_init_stats(
                 d["W1"], d["w2"], d["Sigma"], d["beta"]), eta=1.0),
        dict(t="time", Sigma=A, s="pos", init_stats=A, eta="pos"))
    add("unwhitened_linear_weights",
        dict(t="@t", W1="@W1", w2="@w2", Sigma="@Sigma", beta="@beta", s=1.0, eta=1.0),
        dict(t="time", W1=A, w2=A, Sigma=A, s="pos", eta="pos"))
    add("unwhitened_kernel_matrix",
        dict(t="@t", W1="@W1", w2="@w2", Sigma="@Sigma", beta="@beta", s=1.0, eta=1.0),
        dict(t="time", W1=A, w2=A, Sigma=A, s="pos", eta="pos"))
    # balanced, lazy, single neuron, diagonal, matching
    add("init_lambda_balanced", dict(layer_sizes=(3, 1, 1), lam=0.1, sigma=0.1, seed=0),
        dict(lam="real", sigma="pos", seed="seed"))
    add("lambda_balanced_flow",
        dict(t="@t", W1=lambda d: __import__("linearnets").init_lambda_balanced((3, 1, 1), 0.1, 0.1)[0],
             W2=lambda d: __import__("linearnets").init_lambda_balanced((3, 1, 1), 0.1, 0.1)[1],
             Syx="@Syx1", eta=1.0),
        dict(t="time", Syx=A, eta="pos"))
    add("lazy_prediction", dict(t="@t", K_train="@K", K_test_train="@Kt", Y="@y"),
        dict(t="time", K_train=A, K_test_train="array?", Y=A))
    add("single_neuron_delta", dict(a=0.1, w=[0.1, 0.2, 0.0]), dict(a="real", w="array*"))
    add("single_neuron_nu", dict(t="@t", a0=0.1, w0=[0.1, 0.2, 0.0], beta="@beta"),
        dict(t="time", a0="real", w0=A, beta=A))
    add("single_neuron_implicit_bias", dict(X="@X", y="@y", a0=1.0, w0=[0.1, 0.2, 0.0]),
        dict(X=A, y=A, a0="real", w0=A))
    add("diagonal_q", dict(z=[0.1, 1.0, 10.0]), dict(z="array*"))
    add("diagonal_potential", dict(beta=[0.1, 1.0, 0.0], alpha=0.1), dict(beta=A, alpha="pos"))
    add("diagonal_implicit_bias", dict(X=lambda d: d["X"][:2], y=lambda d: d["y"][:2], alpha=0.1),
        dict(X=A, y=A, alpha="pos"))
    add("matched_initial_conditions", dict(weights="@weights", Syx="@Syx1"),
        dict(weights="weights", Syx=A))
    # regimes
    add("kernel_drift", dict(K0="@K", K=lambda d: 1.1 * d["K"]), dict(K0=A, K="array*"))
    add("relative_change", dict(theta0="@weights", theta=lambda d: [1.1 * w for w in d["weights"]]),
        dict(theta0="weights", theta="weights"))
    add("condensation", dict(W="@W1"), dict(W=A, eps="pos"))
    add("scaling_exponent", dict(widths=[10.0, 20.0, 40.0], values=[1.0, 0.5, 0.25]),
        dict(widths="pos", values="pos"))
    add("rd_slope", dict(widths=[10.0, 20.0, 40.0], rd=[1.0, 0.5, 0.25]),
        dict(widths="pos", rd="pos", z="pos"))
    add("phase_coordinates", dict(alpha_exponent=0.5, beta_exponents=(0.5, 0.5, 0.5)),
        dict(alpha_exponent="real"))
    add("output_variance", dict(F=lambda d: np.random.default_rng(0).standard_normal((5, 3))),
        dict(F="array*"))
    add("infinite_width_kernels", dict(X1="@X", X2="@X2", depth=3, activation="relu"),
        dict(X1=A, X2=A, depth="int", activation="str", sigma="pos", alpha="pos", bias_std="nonneg"))
    # data
    add("whitened_inputs", dict(P=6, D=3, seed=0), dict(P="int", D="int", seed="seed"))
    add("teacher_task", dict(P=6, D=3, singular_values=[2.0, 1.0], seed=0),
        dict(P="int", D="int", singular_values="nonneg", seed="seed"))
    add("scalar_teacher", dict(P=6, D=3, s=1.0, seed=0),
        dict(P="int", D="int", s="nonneg", seed="seed"))
    add("load_digits", dict(classes=(0, 1), n_train=20, n_test=10, seed=0),
        dict(n_train="int?", n_test="int0?", pca="int?", seed="seed", labels="c_str",
             source="str"))
    add("partially_whitened", dict(X="@X2", gamma=0.5), dict(X=A, gamma="nonneg"))
    add("sufficient_statistics", dict(X="@X", Y="@Y2"), dict(X=A, Y=A))
    # networks
    add("init_network", dict(layer_sizes=(3, 4, 1), sigma=0.1, seed=0),
        dict(sigma="pos", seed="seed"))
    add("init_balanced", dict(layer_sizes=(3, 4, 1), sigma=0.1, seed=0),
        dict(sigma="pos", seed="seed", rank="int?"))
    add("init_parameterised", dict(layer_sizes=(3, 4, 1), parameterisation="ntk", sigma=1.0, seed=0),
        dict(parameterisation="str", sigma="pos", seed="seed"))
    add("zhou_parameterisation", dict(layer_sizes=(3, 4, 4, 1), betas=(1.0, 1.0, 1.0), alpha=1.0,
                                      seed=0),
        dict(alpha="pos", seed="seed", form="str"))
    add("geiger_parameterisation", dict(layer_sizes=(3, 4, 1), alpha=1.0, seed=0),
        dict(alpha="pos", sigma="pos", seed="seed", clock="str"))
    add("zhou_normalised", dict(betas=(1.0, 1.0, 1.0), alpha=1.0), dict(alpha="pos"))
    add("forward", dict(weights="@weights", X="@X"), dict(weights="weights", X=A))
    add("end_to_end", dict(weights="@weights3"), dict(weights="weights"))
    add("empirical_ntk", dict(weights="@weights3", X1="@X", X2="@X2"),
        dict(weights="weights", X1=A, X2=A))
    add("empirical_ntk[tanh]", dict(weights="@weights3", X1="@X", X2="@X2", activation="tanh"),
        dict(weights="weights", X1=A, alpha="pos", activation="str"), target="empirical_ntk")
    # simulation
    add("gradient_flow", dict(weights="@weights", X="@X", Y="@y", t_eval=[0.0, 1.0, 10.0],
                              backend="numpy"),
        dict(weights="weights", X=A, Y=A, t_eval="time", eta="pos", rtol="pos", atol="pos",
             backend="str", method="str", max_steps="int"))
    add("gradient_flow[numba]", dict(weights="@weights", X="@X", Y="@y", t_eval=[0.0, 1.0, 10.0],
                                     backend="numba"),
        dict(weights="weights", X=A, Y=A), target="gradient_flow")
    add("gradient_flow[relu]", dict(weights="@weights", X="@X", Y="@y", t_eval=[0.0, 1.0],
                                    activation="relu", backend="numpy"),
        dict(weights="weights", X=A, alpha="pos", activation="str", loss="str"),
        target="gradient_flow")
    add("prepare_flow", dict(X="@X", Y="@y", layers=(3, 4, 1), t_eval=[0.0, 1.0, 10.0],
                             backend="numpy"),
        dict(X=A, Y=A, t_eval="time", eta="pos"))
    add("gradient_flow_ensemble", dict(weights_list=lambda d: [d["weights"], [1.1 * w for w in d["weights"]]],
                                       X="@X", Y="@y", t_eval=[0.0, 1.0], backend="numpy"),
        dict(X=A, Y=A, t_eval="time"))
    add("sweep", dict(fn="builtins:dict", grid={"x": [1.0]},
                      store=lambda d: os.path.join(tempfile.mkdtemp(), "s.sqlite"), jobs=1,
                      progress=False),
        dict(fn="fn"))
    # compare routines (small sizes: each call runs simulations)
    C = COMPARE_TIMEOUT
    add("compare_mode_strengths", dict(depths=(2,), spectrum=(2.0, 1.0), D=3, N=4, P=6),
        dict(depths="c_seq", sigma="c_pos", D="c_int", seed="c_seed", backend="c_str"), timeout=C)
    add("compare_half_time_scaling", dict(depths=(2,), D=4, N=6, P=8),
        dict(depths="c_seq", D="c_int", s="c_pos", seed="c_seed", backend="c_str"), timeout=C)
    add("compare_final_ntk", dict(depths=(2,), sigmas=(0.1,), D=4, N=6, P=8),
        dict(depths="c_seq", sigmas="c_seq", D="c_int", s="c_pos", seed="c_seed"), timeout=C)
    add("compare_initial_moments", dict(width=5, input_dim=6, sigma=0.1, n_samples=200),
        dict(width="c_int", input_dim="c_int", sigma="c_pos", n_samples="c_int", seed="c_seed"),
        timeout=C)
    add("compare_phase_one", dict(D=6, N=5, P=12),
        dict(D="c_int", N="c_int", sigma="c_pos", s="c_pos", seed="c_seed"), timeout=C)
    add("compare_learning_curves", dict(sigmas=(0.1,), D=5, N=5, P=10),
        dict(sigmas="c_seq", D="c_int", eta="c_pos", seed="c_seed"), timeout=C)
    add("compare_silent_alignment", dict(D=5, N=5, P=10),
        dict(depth="c_int", sigma="c_pos", D="c_int", seed="c_seed"), timeout=C)
    add("compare_kernel_path", dict(D=5, N=5, P=4, n_test=6, n_probe=3),
        dict(sigma="c_pos", D="c_int", n_probe="c_int", seed="c_seed"), timeout=C)
    add("compare_kernel_gap", dict(gammas=(0.0, 1.0), Ps=(6,), D=6, N=6, n_test=6),
        dict(gammas="c_seq", Ps="c_seq", sigma="c_pos", depth="c_int", seed="c_seed"), timeout=C)
    add("compare_intermediate_kernels", dict(sigmas=(0.1,), spectrum=(2.0, 1.0), D=3, N=4, P=12),
        dict(depth="c_int", sigmas="c_seq", seed="c_seed"), timeout=C)
    add("compare_transfer", dict(P=10, D=20, As=(0.0, 1.0), alphas=(0.0,), n_draw=20, depths=(2,),
                                 net_D=4, net_N=6, net_P=8),
        dict(depths="c_seq", sigma="c_pos", n_draw="c_int", seed="c_seed"), timeout=C)
    add("compare_finite_sigma_ntk", dict(sigmas=(0.05,), D=3, N=5, P=12, n_probe=3),
        dict(sigmas="c_seq", D="c_int", seed="c_seed"), timeout=C)
    add("compare_path_ntk", dict(depths=(2,), spectrum=(2.0, 1.0), c0=(1e-3, 5e-3), D=3, N=4, P=12,
                                 n_probe=2, n_times=10, random_depths=(2,), sigmas=(0.02,),
                                 random_width=5),
        dict(depths="c_seq", n_times="c_int", seed="c_seed"), timeout=C)
    add("compare_unwhitened_phase1", dict(sigmas=(0.02,), D=3, N=4, P=60, n_times=10),
        dict(sigmas="c_seq", D="c_int", seed="c_seed"), timeout=C)
    add("run_checks", dict(names=["initial_moments"]),
        dict(names="c_seq", seed="c_seed", backend="c_str"), timeout=C)
    return reg


def _special_cases():
    """Hand-written edge cases: (label, function, kwargs builder, expectation, checker)."""
    cases = []

    def case(fn, label, build, expect, check=None, timeout=None, target=None):
        cases.append(dict(fn=fn, target=target or fn, arg=label.split("=")[0], label=label,
                          build=build, expect=expect, check=check, timeout=timeout))

    case("loss_curve", "s=[], c0=[]", lambda d: dict(t=d["t"], s=[], c0=[]), E,
         check=lambda r: isinstance(r, np.ndarray) and r.shape == (3,))
    case("gradient_flow", "X=(6, 0) [D = 0]",
         lambda d: dict(weights=[np.zeros((4, 0)), d["W2"]], X=np.zeros((6, 0)), Y=d["y"],
                        t_eval=[0.0, 1.0], backend="numpy"), E)
    case("gradient_flow", "probe=zero rows",
         lambda d: dict(weights=d["weights"], X=d["X"], Y=d["y"], t_eval=[0.0, 1.0],
                        backend="numpy", probe=(np.zeros((0, 3)), np.zeros(0))), E)
    case("gradient_flow", "probe=zero targets",
         lambda d: dict(weights=d["weights"], X=d["X"], Y=d["y"], t_eval=[0.0, 1.0],
                        backend="numpy", probe=(d["X2"], np.zeros(4))), E)
    case("gradient_flow", "probe=zero targets [numba]",
         lambda d: dict(weights=d["weights"], X=d["X"], Y=d["y"], t_eval=[0.0, 1.0],
                        backend="numba", probe=(d["X2"], np.zeros(4))), E)
    case("gradient_flow", "probe=zero targets [tanh]",
         lambda d: dict(weights=d["weights"], X=d["X"], Y=d["y"], t_eval=[0.0, 1.0],
                        backend="numpy", activation="tanh", probe=(d["X2"], np.zeros(4))), E)
    case("gradient_flow", "Y=zero columns",
         lambda d: dict(weights=[d["W1"], np.zeros((0, 4))], X=d["X"], Y=np.zeros((6, 0)),
                        t_eval=[0.0, 1.0], backend="numpy"), E)
    case("unwhitened_phase1", "t=0-d 0.5 (log_scale an array)",
         lambda d: dict(t=0.5, Sigma=d["Sigma"], beta=d["beta"], s=1.0,
                        init_stats=__import__("linearnets").unwhitened_init_stats(
                            d["W1"], d["w2"], d["Sigma"], d["beta"])), E,
         check=lambda r: isinstance(r.log_scale, np.ndarray))
    case("final_alignment", "n=array([True])", lambda d: dict(depth=3, n=np.array([True])), R)
    case("final_alignment", "n='3'", lambda d: dict(depth=3, n="3"), R)
    case("prepare_flow", "X=None", lambda d: dict(X=None, Y=d["y"], layers=(3, 4, 1),
                                                  t_eval=[0.0, 1.0]), R)
    case("prepare_flow", "layers=('3', 4, 1)", lambda d: dict(X=d["X"], Y=d["y"], layers=("3", 4, 1),
                                                            t_eval=[0.0, 1.0]), R)
    case("prepare_flow", "layers=(3.5, 4, 1)", lambda d: dict(X=d["X"], Y=d["y"], layers=(3.5, 4, 1),
                                                            t_eval=[0.0, 1.0]), R)
    case("init_network", "layer_sizes=(3, True, 1)",
         lambda d: dict(layer_sizes=(3, True, 1), sigma=0.1), R)
    case("init_network", "layer_sizes=('3', 4, 1)",
         lambda d: dict(layer_sizes=("3", 4, 1), sigma=0.1), R)
    case("intermediate_alignment", "n='3'",
         lambda d: dict(singular_values=[2.0, 1.0], depth=3, layer=1, n="3"), R)
    case("intermediate_alignment", "n=True",
         lambda d: dict(singular_values=[2.0, 1.0], depth=3, layer=1, n=True), R)
    case("intermediate_alignment", "layer=array([True])",
         lambda d: dict(singular_values=[2.0, 1.0], depth=3, layer=np.array([True])), R)
    case("relative_change", "theta0=x1e300",
         lambda d: dict(theta0=[1e300 * w for w in d["weights"]], theta=[1.1e300 * w for w in d["weights"]]), E)
    case("kernel_drift", "K0=x1e300 and K", lambda d: dict(K0=1e300 * d["K"], K=1.1e300 * d["K"]), E)
    for name in ("compare_half_time_scaling", "compare_final_ntk", "compare_mode_strengths"):
        case(name, "depths=(20,)", lambda d: dict(depths=(20,)), E, timeout=COMPARE_TIMEOUT)
    case("compare_final_ntk", "depths=(1,)", lambda d: dict(depths=(1,)), E, timeout=COMPARE_TIMEOUT)
    for name in ("compare_kernel_gap", "compare_silent_alignment", "compare_intermediate_kernels"):
        case(name, "depth=20", lambda d: dict(depth=20), E, timeout=COMPARE_TIMEOUT)
    case("compare_transfer", "depths=(20,)", lambda d: dict(depths=(20,)), E, timeout=COMPARE_TIMEOUT)
    for name in ("compare_phase_one", "compare_kernel_path", "compare_kernel_gap",
                 "compare_silent_alignment"):
        case(name, "sigma=10", lambda d: dict(sigma=10.0), E, timeout=COMPARE_TIMEOUT)
    # extreme scales, against 50-digit quadrature of the mode ODE dc/dt = L c^(2-2/L) (s - c)
    # (mpmath, ``tests/theory/test_dynamics.py``): a wrong finite value, 0 or inf is bad
    for fn in ("half_time", "plateau_time"):
        for s, c0, L, ref in ((1e300, 1e-300, 20, 5.5555555555555551e-32),
                              (1e300, 1e-300, 3, 9.9999999999999994e-201),
                              (1e200, 1e-200, 5, 3.3333333333333335e-81),
                              (1e300, 1e-300, 2, 6.9077552789821367e-298)):
            case(fn, f"s={s:g}, c0={c0:g}, depth={L}",
                 lambda d, s=s, c0=c0, L=L: dict(s=s, c0=c0, depth=L), E,
                 check=lambda r, ref=ref: abs(float(r) / ref - 1.0) < 1e-2)
    # counts that must be ints: a count beyond any array size
    for fn, base in (("whitened_inputs", dict(D=3)),
                     ("teacher_task", dict(D=3, singular_values=[2.0, 1.0])),
                     ("scalar_teacher", dict(D=3, s=1.0))):
        case(fn, "P=1e300", lambda d, base=base: dict(base, P=1e300), R)
        case(fn, "P=10**30", lambda d, base=base: dict(base, P=10 ** 30), R)
    for label, v in (("None", None), ("nan", math.nan), ("'abc'", "abc"), ("(3, 1.5, 1)", (3, 1.5, 1)),
                     ("(3, 1)", (3, 1))):
        case("init_lambda_balanced", f"layer_sizes={label}",
             lambda d, v=v: dict(layer_sizes=v, lam=0.1, sigma=0.1), R)
    # shapes that must broadcast
    case("transfer_kappa", "P=[10, 20], D=[5, 6, 7]",
         lambda d: dict(P=[10.0, 20.0], D=[5.0, 6.0, 7.0], A=1.0), R)
    case("transfer_error", "P=[10, 20], alpha=[0.1, 0.2, 0.3]",
         lambda d: dict(P=[10.0, 20.0], D=5.0, A=1.0, alpha=[0.1, 0.2, 0.3]), R)
    case("mode_strength", "t=[0, 1], s=[1, 2, 3]",
         lambda d: dict(t=[0.0, 1.0], s=[1.0, 2.0, 3.0], c0=1e-3), R)
    # empty inputs
    case("relative_change", "theta0=[], theta=[]", lambda d: dict(theta0=[], theta=[]), R)
    case("activation_normalisation", "activation=zeros(0)",
         lambda d: dict(activation=np.zeros(0)), R)
    case("activation_normalisation", "activation=[]", lambda d: dict(activation=[]), R)
    case("activation_normalisation", "activation=None", lambda d: dict(activation=None), R)
    # the message names the argument the user passed, not an internal one
    case("transfer_error_trained", "s=1e-300 [depth=3]",
         lambda d: dict(P=40.0, D=100.0, depth=3, alpha=1.0, s=1e-300, ridge=0.1), E)
    case("transfer_error_trained", "s=1e-300 [ridge=0]",
         lambda d: dict(P=40.0, D=100.0, depth=3, alpha=1.0, s=1e-300), E)
    case("register_model", "cls=5", lambda d: dict(name="x", cls=5), R)
    case("register_model", "name=5", lambda d: dict(name=5, cls=__import__("linearnets").Model), R)
    case("register_model", "name=''", lambda d: dict(name="", cls=__import__("linearnets").Model), R)
    case("run_checks", "names=5", lambda d: dict(names=5), R, timeout=COMPARE_TIMEOUT)
    case("run_checks", "backend='bogus'", lambda d: dict(names=["initial_moments"], backend="bogus"),
         R, timeout=COMPARE_TIMEOUT)
    case("run_checks", "seed=-1", lambda d: dict(names=["initial_moments"], seed=-1), R,
         timeout=COMPARE_TIMEOUT)
    return cases


def build_cases():
    """Every call of the study, in a fixed order: a list of dicts (fn, target, arg, label,
    build(d) -> kwargs, expect, check, timeout)."""
    cases = []
    for name, spec in _registry().items():
        base = spec["base"]
        cases.append(dict(fn=name, target=spec["target"], arg="-", label="valid call",
                          build=lambda d, base=base: {k: _resolve(v, d) for k, v in base.items()},
                          expect=E, check=None, timeout=spec["timeout"]))
        for arg, palette in spec["args"].items():
            for label, value, expect in PALETTES[palette]:
                def build(d, base=base, arg=arg, value=value, target=spec["target"]):
                    kw = {k: _resolve(v, d) for k, v in base.items()}
                    if callable(value) and not isinstance(value, type):
                        kw[arg] = value(kw[arg] if arg in kw else _default_of(target, arg))
                    else:
                        kw[arg] = value
                    return kw
                cases.append(dict(fn=name, target=spec["target"], arg=arg, label=f"{arg}={label}",
                                  build=build, expect=expect, check=None, timeout=spec["timeout"]))
    cases.extend(_special_cases())
    return cases


def _default_of(target, arg):
    import inspect
    import linearnets as ln
    p = inspect.signature(getattr(ln, target)).parameters[arg]
    return p.default


def _resolve(v, d):
    if isinstance(v, str) and v.startswith("@"):
        return d[v[1:]]
    if callable(v):
        return v(d)
    return v


# ------------------------------------------------------------------------- classify

def _has_nan(x, depth=0):
    if depth > 4 or x is None or isinstance(x, (str, bytes, bool)):
        return False
    if isinstance(x, np.ndarray):
        return x.dtype.kind in "fc" and bool(np.isnan(x).any())
    if isinstance(x, (float, np.floating)):
        return math.isnan(x)
    if isinstance(x, dict):
        return any(_has_nan(v, depth + 1) for v in x.values())
    if isinstance(x, (list, tuple)):
        return any(_has_nan(v, depth + 1) for v in x[:1000])
    if hasattr(x, "__dataclass_fields__"):   # a result object: its public fields
        return any(_has_nan(getattr(x, f), depth + 1) for f in x.__dataclass_fields__
                   if not f.startswith("_"))
    try:
        import pandas as pd
        if isinstance(x, pd.DataFrame):
            return bool(x.select_dtypes("number").isna().to_numpy().any())
    except ImportError:  # pragma: no cover
        pass
    return False


def _names_arg(msg, arg):
    arg = arg.split("[")[0].split("=")[0].strip()
    return re.search(r"(?<![A-Za-z0-9_])" + re.escape(arg) + r"(?![A-Za-z0-9_])", msg) is not None


def classify(case, outcome):
    """outcome: dict(kind="return"|"raise", ...) -> (class, detail)."""
    sim = case["target"] in ("gradient_flow", "gradient_flow_ensemble", "prepare_flow")
    if outcome["kind"] == "raise":
        et, msg = outcome["type"], outcome["message"]
        if sim and et in ("FlowError",):
            return "clear", f"{et}: {msg}"
        if outcome["is_value_or_type"] and _names_arg(msg, case["arg"]):
            return "clear", f"{et}: {msg}"
        return "unclear", f"{et}: {msg}"
    warns = outcome["warnings"]
    numpy_warns = [w for w in warns if w[0] == "RuntimeWarning"]
    if numpy_warns:
        return "bad", "numpy warning: " + numpy_warns[0][1]
    if outcome["nan"] and not (sim and any(w[0] == "FlowWarning" for w in warns)):
        return "bad", "NaN in the result"
    if sim and any(w[0] == "FlowWarning" for w in warns):
        return "clear", "FlowWarning: " + next(w[1] for w in warns if w[0] == "FlowWarning")
    if outcome.get("check") is False:
        return "bad", "result of the wrong type/shape: " + outcome["summary"]
    if case["expect"] == R:
        return "bad", "accepted: " + outcome["summary"]
    return "ok", outcome["summary"]


# ---------------------------------------------------------------------------- worker

def _summary(x):
    if isinstance(x, np.ndarray):
        with np.printoptions(threshold=4, edgeitems=1, precision=3):
            return f"ndarray{x.shape} {x.dtype}: {str(x)[:80]}"
    s = type(x).__name__
    try:
        r = repr(x)
    except Exception:  # noqa: BLE001
        r = "?"
    return f"{s}: {r[:80]}"


def worker():
    out = os.fdopen(os.dup(1), "w", buffering=1)
    devnull = open(os.devnull, "w")
    os.dup2(devnull.fileno(), 1)
    sys.stdout = devnull
    import linearnets as ln
    d = _data()
    cases = build_cases()
    out.write("ready\n")
    for line in sys.stdin:
        i = int(line)
        case = cases[i]
        fn = getattr(ln, case["target"], None)
        if fn is None:   # not in this version of the package
            out.write(json.dumps(dict(kind="missing", warnings=[])) + "\n")
            continue
        res = {}
        try:
            kw = case["build"](d)
        except Exception as exc:  # noqa: BLE001
            res = dict(kind="raise", type="BuildError", message=repr(exc), is_value_or_type=False)
            out.write(json.dumps(res) + "\n")
            continue
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                with np.errstate(divide="warn", over="warn", invalid="warn", under="ignore"):
                    r = fn(**kw)
            except BaseException as exc:  # noqa: BLE001
                if isinstance(exc, KeyboardInterrupt):
                    raise
                res = dict(kind="raise", type=type(exc).__name__, message=str(exc)[:300],
                           is_value_or_type=isinstance(exc, (ValueError, TypeError)),
                           where=traceback.format_exc().splitlines()[-3:-1])
            else:
                chk = None
                if case["check"] is not None:
                    try:
                        chk = bool(case["check"](r))
                    except Exception:  # noqa: BLE001
                        chk = False
                res = dict(kind="return", nan=_has_nan(r), summary=_summary(r), check=chk)
        res["warnings"] = [(w.category.__name__, str(w.message)[:200]) for w in caught]
        out.write(json.dumps(res, default=str) + "\n")


class Worker:
    def __init__(self):
        self.p = None

    def start(self):
        env = dict(os.environ)
        # the worker's stderr goes to a file, so that a failed start can say why
        self.err = tempfile.TemporaryFile(mode="w+")
        self.p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--worker"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.err, text=True, bufsize=1, env=env)
        line = self._read(600.0)
        if line != "ready":
            rc = self.p.poll()
            self.err.seek(0)
            tail = "".join(self.err.readlines()[-15:])
            self.kill()
            raise RuntimeError(f"worker did not start: {line!r} (exit status {rc}); its stderr:\n{tail}")

    def _read(self, timeout):
        r, _, _ = select.select([self.p.stdout], [], [], timeout)
        if not r:
            return None
        return self.p.stdout.readline().strip()

    def run(self, i, timeout):
        if self.p is None or self.p.poll() is not None:
            self.start()
        self.p.stdin.write(f"{i}\n")
        self.p.stdin.flush()
        line = self._read(timeout)
        if line is None or line == "":
            crashed = line == ""
            self.kill()
            return None if not crashed else dict(kind="raise", type="Crash", message="worker died",
                                                 is_value_or_type=False, warnings=[])
        return json.loads(line)

    def kill(self):
        if self.p is not None:
            self.p.kill()
            self.p.wait()
            self.p = None
            self.err.close()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", help="comma-separated function names")
    ap.add_argument("--skip", help="comma-separated function names to leave out")
    ap.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT)
    ap.add_argument("--json", help="write every call's class and detail here")
    ap.add_argument("--show", default="unclear,bad,hang")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker()
        return 0
    cases = build_cases()
    only = set(args.only.split(",")) if args.only else None
    skip = set(args.skip.split(",")) if args.skip else set()
    idx = [i for i, c in enumerate(cases)
           if (only is None or c["fn"] in only or c["target"] in only) and c["fn"] not in skip]
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover
        def tqdm(x, **k):
            return x
    w = Worker()
    rows = []
    missing = set()
    t0 = time.perf_counter()
    for i in tqdm(idx, desc="calls", unit="call", dynamic_ncols=True):
        c = cases[i]
        timeout = c["timeout"] or args.timeout
        outcome = w.run(i, timeout)
        if outcome is None:
            cls, detail = "hang", f"no result within {timeout:g} s"
        elif outcome["kind"] == "missing":
            missing.add(c["target"])
            continue
        else:
            cls, detail = classify(c, outcome)
        rows.append(dict(fn=c["fn"], call=c["label"], expect=c["expect"], cls=cls, detail=detail))
    w.kill()
    elapsed = time.perf_counter() - t0
    counts = collections.Counter(r["cls"] for r in rows)
    show = set(args.show.split(",")) if args.show else set()
    for r in rows:
        if r["cls"] in show:
            print(f"{r['cls']:8s} {r['fn']}({r['call']}): {r['detail'][:160]}")
    print()
    per_fn = collections.defaultdict(collections.Counter)
    for r in rows:
        per_fn[r["fn"]][r["cls"]] += 1
    print(f"{'function':36s}" + "".join(f"{c:>8s}" for c in CLASSES))
    for fn, cnt in per_fn.items():
        if any(cnt[c] for c in ("unclear", "bad", "hang")):
            print(f"{fn:36s}" + "".join(f"{cnt[c]:8d}" for c in CLASSES))
    print()
    if missing:
        print(f"not in this version (left out): {', '.join(sorted(missing))}")
    print(f"{len(rows)} calls in {elapsed:.0f} s: " + ", ".join(f"{counts[c]} {c}" for c in CLASSES))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(counts={c: counts[c] for c in CLASSES}, rows=rows), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
