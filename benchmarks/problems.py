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
* The diffrax (JAX) baseline of ``bench_flow.py`` and ``bench_mlp.py``: :func:`diffrax_solve`
  compiles a solve of a flow given as a JAX vector field, with each of
  :data:`DIFFRAX_CONTROLLERS`; each script builds its own vector field and scans rtol under its
  own accuracy rule.  jax and diffrax are optional (:func:`diffrax_available`): the package
  depends on neither.
"""
import contextlib
import importlib.util
import os
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


def best_of(f, repeats, warm=False):
    """The least wall time of ``repeats`` calls of ``f()`` in seconds (``warm``: after one
    untimed call)."""
    if warm:
        f()
    out = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        f()
        out = min(out, time.perf_counter() - t0)
    return out


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


def diffrax_available():
    """Whether jax and diffrax can be imported."""
    return (importlib.util.find_spec("jax") is not None
            and importlib.util.find_spec("diffrax") is not None)


#: diffrax's step-size controllers tried (``PIDController(pcoeff, icoeff)``): its default I
#: controller, and a PI controller of its documentation for mildly stiff problems.
DIFFRAX_CONTROLLERS = (("I", 0.0, 1.0), ("PI 0.3/0.3", 0.3, 0.3))


def pin_xla_threads():
    """Run XLA's CPU backend (jax) on one thread: set in the environment, read when jax is
    first imported (a caller's own ``XLA_FLAGS`` wins)."""
    os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                                       "intra_op_parallelism_threads=1")


def jax_x64():
    """``(jax, jax.numpy, diffrax)`` with float64 enabled (``jax_enable_x64``)."""
    import diffrax
    import jax
    import jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    return jax, jnp, diffrax


def diffrax_solve(field, y0, t_end, observe, solver_name, pcoeff, icoeff, max_steps=200_000):
    """A compiled diffrax solve of ``dy/dt = field(y)`` from the pytree ``y0`` (float64 JAX
    arrays) over ``[0, t_end]``.

    ``diffeqsolve`` with ``diffrax.<solver_name>()`` (``Tsit5``, ``Dopri8``) and
    ``PIDController(rtol, atol, pcoeff, icoeff)``, saving ``y(t_end)`` alone, the whole solve
    ``jax.jit``-compiled with rtol and atol as traced arguments: one compilation, at the first
    call (call it once untimed), and every later call runs compiled code.

    Returns ``solve(rtol, atol) -> (observe(y(t_end)) as a numpy array, steps, rejected
    steps, success)``, waited for (``block_until_ready``); ``solve.stages`` is the solver's
    stages per step (steps x stages counts evaluations, FSAL stages included).
    """
    jax, jnp, diffrax = jax_x64()
    term = diffrax.ODETerm(lambda t, y, args: field(y))
    solver = getattr(diffrax, solver_name)()

    @jax.jit
    def compiled(rtol, atol):
        ctrl = diffrax.PIDController(rtol=rtol, atol=atol, pcoeff=pcoeff, icoeff=icoeff)
        sol = diffrax.diffeqsolve(term, solver, 0.0, t_end, None, y0, stepsize_controller=ctrl,
                                  max_steps=max_steps, saveat=diffrax.SaveAt(t1=True),
                                  throw=False)
        y1 = jax.tree_util.tree_map(lambda v: v[-1], sol.ys)
        return (observe(y1), sol.stats["num_steps"], sol.stats["num_rejected_steps"],
                sol.result == diffrax.RESULTS.successful)

    def solve(rtol, atol):
        out, steps, rej, ok = jax.block_until_ready(compiled(jnp.asarray(rtol),
                                                             jnp.asarray(atol)))
        return np.asarray(out), int(steps), int(rej), bool(ok)

    solve.stages = solver.tableau.num_stages if hasattr(solver, "tableau") else 1
    return solve
