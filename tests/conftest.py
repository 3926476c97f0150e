"""Shared test configuration.

Hypothesis runs a deterministic profile by default (``derandomize=True``, no
deadline) so that CI is reproducible; set ``LINEARNETS_HYPOTHESIS_PROFILE=random``
for a nondeterministic exploration with more examples.

``backend="auto"`` compiles in-process here (``LINEARNETS_JIT=eager`` unless set): the
suite tests the compiled path whatever the state of the kernel cache, and leaves no
background warm-up running (tests/test_jit.py tests the first-run rule itself).

Ctrl-C reaches the suite's own process and its children: a suite started in the background
of a non-interactive shell (``cmd &``, ``nohup``) inherits SIGINT ignored, which would make
the interrupt tests (tests/sim/test_interrupt.py, tests/sweep/test_sweep_signals.py) fail
for want of a signal. Python's own handler is installed instead, and a caught signal is
reset to its default in every process this one starts, as in a terminal.
"""
import os
import signal
import sys

from hypothesis import HealthCheck, settings

os.environ.setdefault("LINEARNETS_JIT", "eager")

if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# tests/sweep/sweep_fixtures.py is imported by name in this process, in the sweep's worker
# processes and in ``python -m linearnets sweep`` subprocesses: its folder on both paths
_HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sweep")
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)
os.environ["PYTHONPATH"] = os.pathsep.join([_HERE] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                                                       if p and p != _HERE])

settings.register_profile(
    "default", derandomize=True, deadline=None, max_examples=50,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "random", derandomize=False, deadline=None, max_examples=300,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("LINEARNETS_HYPOTHESIS_PROFILE", "default"))
