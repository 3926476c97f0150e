"""Golden trajectories of the linear network's compiled and numpy paths.

The files in ``tests/golden/`` hold trajectories recorded by this module
(``python tests/sim/test_golden.py`` rewrites them): depth 2, 3 and 4 networks,
narrow ones (every stage a dense vector: the generic compiled loops) and a wide one
(stages in factored form), each run by RK45, DOP853, ``auto`` and ROS34PW2 on the
numpy and the numba backends.  A change to the stepping loops that keeps the
algorithm keeps these trajectories up to the integration error: every run is
compared with its recording at ``GOLDEN_RTOLS`` times its ``rtol``, relative to the
largest entry of the recorded quantity (not bit for bit, not step for step: a
rounding difference may flip one step's acceptance, which moves the solution by
the order of the local error the controller allows, ``rtol``).  The output times are
compared the same way, entry by entry: ``np.logspace`` itself rounds one ulp apart
under numpy's SIMD paths (AVX-512 against the baseline), so a recording holds its
times only to rounding; within one process a run returns exactly the ``t_eval`` it
was given.
"""
import os
import sys

import numpy as np
import pytest

import linearnets as ln
from linearnets.backend import numba_available
from linearnets.data import teacher_task

GOLDEN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")

#: Allowed difference from a recording, in units of the run's rtol (times the largest
#: recorded entry).  Rounding-level changes stay far below; a changed algorithm (another
#: controller constant, a wrong stage weight) moves the result by many rtol.
GOLDEN_RTOLS = 20.0

RTOL = 1e-6
ATOL = 1e-9

#: name -> (layer sizes, sigma, t_eval); the Syx singular values are 1..0.5.
PROBLEMS = {
    # every hidden layer narrower than (stages + 1) C: the dense-stage loops
    "d2_small": ((4, 6, 2), 0.3, np.logspace(-1, 3, 9)),
    "d3_small": ((5, 7, 7, 2), 0.3, np.logspace(-1, 3, 9)),
    "d4_medium": ((12, 20, 20, 20, 3), 0.2, np.logspace(-1, 3, 9)),
    # wider than 14 C: the factored (rank-C) stages of the explicit pairs
    "d3_wide": ((16, 40, 40, 1), 0.2, np.logspace(-1, 2.5, 8)),
}
METHODS = ("RK45", "DOP853", "auto", "ROS34PW2")
BACKENDS = ("numpy", "numba")


def _data(sizes, seed=0):
    D, C = sizes[0], sizes[-1]
    P = 3 * D
    X, Y = teacher_task(P, D, np.linspace(1.0, 0.5, C), seed=seed)[:2]
    return X, Y


def run(name, method, backend):
    """The recorded run: a Trajectory."""
    sizes, sigma, t_eval = PROBLEMS[name]
    X, Y = _data(sizes)
    weights = ln.init_network(sizes, sigma, seed=1)
    return ln.gradient_flow(weights, X, Y, t_eval, rtol=RTOL, atol=ATOL, backend=backend,
                            method=method, raise_on_failure=True)


def _path(name, method, backend):
    return os.path.join(GOLDEN_DIR, f"{name}-{method}-{backend}.npz")


def _cases():
    for name in PROBLEMS:
        for method in METHODS:
            for backend in BACKENDS:
                yield name, method, backend


def _fields(traj):
    return {"t": traj.t, "loss": traj.loss, "end_to_end": traj.end_to_end,
            "weights": np.concatenate([w.ravel() for w in traj.weights]),
            "nfev": np.array(traj.nfev), "nsteps": np.array(traj.nsteps),
            "nrejected": np.array(traj.nrejected)}


def rel_difference(a, b):
    """``max |a - b| / max |b|``."""
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


@pytest.mark.parametrize("name, method, backend", list(_cases()))
def test_trajectory_matches_its_recording(name, method, backend):
    if backend == "numba" and not numba_available():
        pytest.skip("numba not installed")
    gold = np.load(_path(name, method, backend))
    traj = run(name, method, backend)
    assert traj.success and traj.backend == backend
    # Within the process: the run returns exactly the times it was asked for.
    np.testing.assert_array_equal(traj.t, PROBLEMS[name][2])
    # Against the recording (possibly another CPU's np.logspace): entry by entry.
    assert traj.t.shape == gold["t"].shape
    t_err = float(np.max(np.abs(traj.t - gold["t"]) / np.abs(gold["t"])))
    assert t_err <= GOLDEN_RTOLS * RTOL, ("t", t_err / RTOL)
    for field in ("end_to_end", "weights", "loss"):
        got = _fields(traj)[field]
        assert got.shape == gold[field].shape
        err = rel_difference(got, gold[field])
        assert err <= GOLDEN_RTOLS * RTOL, (field, err / RTOL)


def test_recordings_differ_from_a_changed_algorithm():
    """The tolerance is tight enough to see a run at a 100x looser rtol (a changed
    controller would move the solution as much)."""
    sizes, sigma, t_eval = PROBLEMS["d3_small"]
    X, Y = _data(sizes)
    weights = ln.init_network(sizes, sigma, seed=1)
    loose = ln.gradient_flow(weights, X, Y, t_eval, rtol=100 * RTOL, atol=100 * ATOL,
                             backend="numpy", method="RK45")
    gold = np.load(_path("d3_small", "RK45", "numpy"))
    assert rel_difference(loose.end_to_end, gold["end_to_end"]) > GOLDEN_RTOLS * RTOL


def agreement():
    """``{case: (max relative difference in units of RTOL, nfev now, nfev recorded)}``."""
    out = {}
    for case in _cases():
        gold = np.load(_path(*case))
        traj = run(*case)
        errs = [rel_difference(_fields(traj)[f], gold[f]) / RTOL
                for f in ("end_to_end", "weights", "loss")]
        out[case] = (max(errs), traj.nfev, int(gold["nfev"]))
    return out


def record():
    """Write the recordings (run from a checkout whose trajectories are the reference)."""
    os.makedirs(GOLDEN_DIR, exist_ok=True)
    for case in _cases():
        traj = run(*case)
        np.savez(_path(*case), **_fields(traj))
        print(*case, traj.nfev, traj.nsteps, traj.nrejected, traj.message)


if __name__ == "__main__":
    if sys.argv[1:] == ["--record"]:
        record()
    else:
        for case, (err, nfev, nfev0) in agreement().items():
            print(f"{'-'.join(case):28s} max diff {err:9.2e} rtol   nfev {nfev:7d} (recorded {nfev0})")
