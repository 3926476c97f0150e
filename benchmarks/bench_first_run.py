"""First run against later runs: the time numba's compilation adds, and what warmup saves.

Each case runs in a fresh Python process, three times over one empty kernel cache
(``LINEARNETS_CACHE_DIR`` in a temporary folder):

* cold -- the first process compiles what it uses;
* warm -- a second process loads the same kernels from the cache;
* after warmup -- in a cache that ``python -m linearnets warmup`` filled (timed
  itself, cold and warm, first): the case should compile nothing.

Cases: ``import`` (``import linearnets``), ``tour`` (README.md's python blocks),
``auto`` (``gradient_flow(..., method="auto")`` to t = 1e8 on the network of
issue-style "train to convergence": ``scalar_teacher(40, 10, 2.0)``,
``init_network((10, 20, 20, 1), 0.1)``), ``warmup`` itself, and with ``--verify``
``python -m linearnets verify --no-figures`` (slow).  Prints seconds (wall clock of
the whole process, interpreter start included), the cold/warm ratio and the number
of kernels each process compiled.

    python benchmarks/bench_first_run.py [--verify] [--cases tour,auto]
"""
from __future__ import annotations

import argparse
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


def _run(cmd, cache, cwd):
    env = dict(os.environ, LINEARNETS_CACHE_DIR=cache, MPLBACKEND="Agg",
               PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("NUMBA_CACHE_DIR", None)
    cmd = [c.replace("VERIFY_OUT", os.path.join(cwd, "verify")) for c in cmd]
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
    return seconds, compiles


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--verify", action="store_true", help="time `verify` too (about 2-4 minutes cold)")
    ap.add_argument("--cases", default=None, help="comma-separated subset of the cases")
    args = ap.parse_args(argv)
    cases = _cases(args.verify)
    if args.cases:
        cases = {k: cases[k] for k in args.cases.split(",")}
    warm_cmd = cases.pop("warmup", _cases(False)["warmup"])
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        warmed = os.path.join(tmp, "cache-warmup")
        w_cold = _run(warm_cmd, warmed, tmp)
        w_warm = _run(warm_cmd, warmed, tmp)
        rows.append(("warmup", w_cold, w_warm, None))
        print(f"warmup   cold {w_cold[0]:7.1f} s ({w_cold[1]} compiled)  warm {w_warm[0]:6.1f} s "
              f"({w_warm[1]} compiled)  cold/warm {w_cold[0] / w_warm[0]:5.1f}x", flush=True)
        for name, cmd in cases.items():
            cache = os.path.join(tmp, f"cache-{name}")
            cold = _run(cmd, cache, tmp)
            warm = _run(cmd, cache, tmp)
            pre = _run(cmd, warmed, tmp)
            rows.append((name, cold, warm, pre))
            print(f"{name:8s} cold {cold[0]:7.1f} s ({cold[1]} compiled)  warm {warm[0]:6.1f} s "
                  f"({warm[1]} compiled)  cold/warm {cold[0] / warm[0]:5.1f}x  after warmup "
                  f"{pre[0]:6.1f} s ({pre[1]} compiled)", flush=True)
    print("\n| what | cold | warm | cold/warm | after warmup (kernels compiled) |\n|---|---|---|---|---|")
    for name, cold, warm, pre in rows:
        after = "—" if pre is None else f"{pre[0]:.1f} s ({pre[1]})"
        print(f"| {name} | {cold[0]:.1f} s | {warm[0]:.1f} s | {cold[0] / warm[0]:.1f}x | {after} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
