"""numba's cache under processes that compile one function at once (numba issues #4807, #10128).

Each round: a fresh ``NUMBA_CACHE_DIR``; ``--procs`` writer processes start at one instant
and each compiles its share of 48 signatures (12 dtypes x 0-3 dimensions) of one cached
function ``f(x) = 2 x + 1``; then a reader process loads all 48 and compares each value
with its writer's.  A lost index update shows as a reader miss, an index entry pointing at
another signature's machine code as a wrong value or a crash of the reader.  With
``--lock`` every process applies ``linearnets._numba_cache.lock_cache`` to the function
(the lock the package's kernels are decorated with).

    python benchmarks/studies/study_cache_race.py [--procs 8] [--rounds 3] [--lock]

Measured (2 shared cores, 8 writers): without the lock, in two runs of 3 rounds, the reader
crashed twice ("can't unbox array from PyObject into native value": an entry holding
another signature's code) and missed 1, 1, 1 and 4 entries; with it, 4 rounds of 48 hits,
0 misses, 0 wrong.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
TYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64,
         np.float32, np.float64, np.complex64, np.complex128]
SAMPLES = [(t, nd) for t in TYPES for nd in range(4)]
KERNEL = "import numba\n\n\n@numba.njit(cache=True)\ndef f(x):\n    return x * 2 + 1\n"


def child(i, n, start, lock):
    """Compile (or load) this process's share of the signatures; print the values as JSON."""
    from kern import f
    if lock:
        sys.path.insert(0, ROOT)
        from linearnets._numba_cache import lock_cache
        lock_cache(f)
    while time.time() < start:
        time.sleep(0.001)
    out = {}
    for k, (t, nd) in enumerate(SAMPLES):
        if n == 0 or k % n == i:
            r = np.asarray(f(t(3) if nd == 0 else np.ones((2,) * nd, dtype=t)))
            out[f"{t.__name__}/{nd}"] = [str(r.dtype), repr(r.ravel().tolist())]
    print(json.dumps({"values": out, "hits": sum(f.stats.cache_hits.values()),
                      "misses": sum(f.stats.cache_misses.values())}))


def one_round(procs, lock):
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "kern.py"), "w") as fh:
            fh.write(KERNEL)
        env = dict(os.environ, NUMBA_CACHE_DIR=os.path.join(tmp, "cache"),
                   PYTHONPATH=tmp + os.pathsep + os.environ.get("PYTHONPATH", ""))
        start = time.time() + 15.0                # every writer imported before it starts

        def run(i, n, t0):
            return subprocess.Popen([sys.executable, __file__, "--child", str(i), str(n),
                                     str(t0)] + (["--lock"] if lock else []), env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        written = {}
        for p in [run(i, procs, start) for i in range(procs)]:
            out, _ = p.communicate()
            written.update(json.loads(out.strip().splitlines()[-1])["values"])
        reader = run(0, 0, 0.0)
        out, err = reader.communicate()
        if reader.returncode != 0:
            return f"reader crashed: {err.strip().splitlines()[-1]}"
        read = json.loads(out.strip().splitlines()[-1])
        wrong = sum(read["values"].get(k) != v for k, v in written.items())
        return f"hits {read['hits']}, misses {read['misses']}, wrong {wrong} of {len(written)}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--procs", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--lock", action="store_true")
    ap.add_argument("--child", nargs=3, default=None)
    args = ap.parse_args()
    if args.child:
        i, n, start = args.child
        return child(int(i), int(n), float(start), args.lock)
    for r in range(args.rounds):
        print(f"round {r + 1} ({'lock' if args.lock else 'no lock'}, {args.procs} writers): "
              f"{one_round(args.procs, args.lock)}", flush=True)


if __name__ == "__main__":
    main()
