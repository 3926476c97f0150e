"""The problems that several benchmarks time, defined once.

Every array is drawn from a fixed seed, so that two scripts, or two runs of one, time the
same problem.  Import it from a script in ``benchmarks/`` (its folder is on ``sys.path``
when the script runs) or ``benchmarks/studies/`` (which put ``benchmarks/`` there).

* The sweep's point (``bench_sweep.py``, ``bench_ensemble.py``): a 10-16-1 network on a
  scalar teacher (P = 40 samples, D = 10, s = 1, seed 0), linear from sigma = 0.01 over 20
  output times up to 400, or ReLU from sigma = 0.5 over 20 output times up to 40, where a
  member can slide along kinks for thousands of steps.
* :func:`gemm_rate`: this machine's float64 GEMM rate, measured in the calling run (the
  FLOP bound of ``bench_flow.py`` and ``bench_mlp.py``).
* :func:`busy_core`: one core kept busy by an unrelated process while a benchmark times (the
  ``--busy`` case of ``bench_flow.py`` and ``bench_mlp.py``), as a user's other work would.
"""
import contextlib
import subprocess
import sys
import time

import numpy as np

import linearnets as ln

#: Layer sizes, samples and the teacher's strength of the sweep's point.
SWEEP_SIZES = (10, 16, 1)
SWEEP_SAMPLES = 40
SWEEP_STRENGTH = 1.0
#: The linear point: initial scale and output times.
LINEAR_SIGMA = 0.01
LINEAR_T = np.geomspace(1.0, 400.0, 20)
#: The ReLU point (no biases): initial scale and output times.
RELU_SIGMA = 0.5
RELU_T = np.geomspace(0.1, 40.0, 20)


def sweep_data():
    """``(X, y)`` of the sweep's point: ``scalar_teacher(40, 10, 1.0, seed=0)``, shapes (40, 10), (40,)."""
    X, y, _ = ln.scalar_teacher(SWEEP_SAMPLES, SWEEP_SIZES[0], SWEEP_STRENGTH, seed=0)
    return X, y



def gemm_rate():
    """Best float64 GEMM rate (FLOP/s) of ``a @ a`` over 1024^2 and 2048^2 (3 tries each)."""
    best = 0.0
    for n in (1024, 2048):
        a = np.random.default_rng(0).standard_normal((n, n))
        a @ a
        for _ in range(3):
            t0 = time.perf_counter()
            a @ a
            best = max(best, 2 * n ** 3 / (time.perf_counter() - t0))
    return best


@contextlib.contextmanager
def busy_core(busy=True):
    """Keep one core busy with another Python process (a spin loop) inside the block."""
    if not busy:
        yield None
        return
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    time.sleep(0.3)                    # (the spinner up and running before any timing)
    try:
        yield spinner
    finally:
        spinner.kill()
        spinner.wait()
