"""First run against later runs: what a user waits for on an empty kernel cache.

Each case runs in a fresh Python process over an empty kernel cache
(``LINEARNETS_CACHE_DIR`` in a temporary folder):

* cold -- the default (``LINEARNETS_JIT`` unset): ``backend="auto"`` runs on numpy and
  starts the background warm-up (docs/first_run.md);
* warm-up done -- seconds from the cold process's start until that background warm-up
  has marked the cache complete (the benchmark waits for it: no process outlives it);
* warm -- the case again, now on the compiled kernels loaded from the cache;
* with ``--eager``: cold and warm with ``LINEARNETS_JIT=eager`` in another empty cache
  (compiling in-process, the rule before the background warm-up), and ``python -m
  linearnets warmup`` itself, cold and warm.

Cases: ``import`` (``import linearnets``), ``tour`` (README.md's python blocks),
``auto`` (``gradient_flow(..., method="auto")`` to t = 1e8, training to convergence
on ``scalar_teacher(40, 10, 2.0)``,
``init_network((10, 20, 20, 1), 0.1)``), ``warmup`` itself, and with ``--verify``
``python -m linearnets verify --no-figures`` (slow).  Prints seconds (wall clock of
the whole process, interpreter start included), the number of kernels each process
compiled and the one-minute load average at its start.

    python benchmarks/bench_first_run.py [--verify] [--eager] [--cases tour,auto]
"""
from __future__ import annotations

import argparse
import fcntl
import glob
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]

_REPORT = ("\nfrom linearnets import _numba_cache as _c\n"
           "import json as _j, sys as _s\n"
           "_s.stderr.write('@@' + _j.dumps({'compiles': _c.compile_count()}) + '\\n')\n")


def _tour_code():
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    return "\n".join(blocks)


_AUTO = """
import numpy as np
import linearnets as ln
X, y, b = ln.scalar_teacher(40, 10, 2.0)
traj = ln.gradient_flow(ln.init_network((10, 20, 20, 1), 0.1), X, y, [0.0, 1e8], method="auto")
assert traj.success, traj.message
"""


def _cases(verify):
    cases = {
        "import": [sys.executable, "-c", "import linearnets" + _REPORT],
        "tour": [sys.executable, "-c", _tour_code() + _REPORT],
        "auto": [sys.executable, "-c", _AUTO + _REPORT],
        "warmup": [sys.executable, "-m", "linearnets", "warmup", "--no-progress"],
    }
    if verify:
        cases["verify"] = [sys.executable, "-m", "linearnets", "verify", "--no-figures",
                           "--no-progress", "--out", "VERIFY_OUT"]
    return cases


def _run(cmd, cache, cwd, jit=None):
    env = dict(os.environ, LINEARNETS_CACHE_DIR=cache, MPLBACKEND="Agg",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("NUMBA_CACHE_DIR", None)
    env.pop("LINEARNETS_JIT", None)
    if jit:
        env["LINEARNETS_JIT"] = jit
    cmd = [c.replace("VERIFY_OUT", os.path.join(cwd, "verify")) for c in cmd]
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    compiles = None
    for line in proc.stderr.splitlines():
        if line.startswith("@@"):
            compiles = json.loads(line[2:])["compiles"]
    m = re.search(r"warmup: (\d+) kernels compiled", proc.stdout)
    if m:
        compiles = int(m.group(1))
    if proc.returncode not in (0, 1) or (proc.returncode == 1 and "verify" not in cmd):
        raise RuntimeError(f"{cmd[:3]} failed:\n{proc.stderr[-2000:]}")
    return seconds, compiles, load, t0


def _wait_warmer(cache, t0):
    """Wait until no background warm-up holds the cache's lock; seconds since ``t0`` and
    whether the cache is marked complete."""
    path = os.path.join(cache, "warmup.lock")
    if os.path.exists(path):
        fd = os.open(path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        finally:
            os.close(fd)
    return time.perf_counter() - t0, bool(glob.glob(os.path.join(cache, "warm-*")))


def _fmt(r):
    return f"{r[0]:.1f} s ({r[1]}, load {r[2]:.1f})"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--verify", action="store_true", help="time `verify` too (about 2-4 minutes cold)")
    ap.add_argument("--eager", action="store_true",
                    help="also LINEARNETS_JIT=eager (compile in-process) and `warmup` itself")
    ap.add_argument("--cases", default=None, help="comma-separated subset of the cases")
    args = ap.parse_args(argv)
    cases = _cases(args.verify)
    warm_cmd = cases.pop("warmup")
    if args.cases:
        cases = {k: cases[k] for k in args.cases.split(",") if k != "warmup"}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        if args.eager:
            warmed = os.path.join(tmp, "cache-warmup")
            w_cold, w_warm = _run(warm_cmd, warmed, tmp), _run(warm_cmd, warmed, tmp)
            print(f"warmup        cold {_fmt(w_cold)}  warm {_fmt(w_warm)}", flush=True)
        for name, cmd in cases.items():
            cache = os.path.join(tmp, f"cache-{name}")
            cold = _run(cmd, cache, tmp)
            done, marked = _wait_warmer(cache, cold[3])
            warm = _run(cmd, cache, tmp)
            rows.append((name, cold, done, marked, warm))
            print(f"{name:13s} cold {_fmt(cold)}  background warm-up done after {done:.1f} s "
                  f"(marked: {marked})  warm {_fmt(warm)}", flush=True)
            if args.eager:
                cache = os.path.join(tmp, f"cache-{name}-eager")
                e_cold = _run(cmd, cache, tmp, "eager")
                e_warm = _run(cmd, cache, tmp, "eager")
                print(f"{name + ' eager':13s} cold {_fmt(e_cold)}  warm {_fmt(e_warm)}", flush=True)
    print("\n| what | cold (kernels compiled, load) | background warm-up done | warm |\n|---|---|---|---|")
    for name, cold, done, marked, warm in rows:
        print(f"| {name} | {_fmt(cold)} | {done:.1f} s{'' if marked else ' (not marked)'} | "
              f"{_fmt(warm)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
