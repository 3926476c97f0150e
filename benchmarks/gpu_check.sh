#!/usr/bin/env bash
# The checks of the CuPy backend that need a GPU, in one run from the repository root on
# a machine with CuPy and a CUDA device: the GPU tests (pytest -m gpu), then the large
# problem of bench_flow.py, which adds the cupy rows when a GPU is present.  Logs go to
# $OUT (default ./gpu_check_out).  Timeouts keep the whole run under 10 minutes.
set -o pipefail
out=${OUT:-gpu_check_out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
python3 -c "
import numpy, scipy, numba
from linearnets import backend as B
print('numpy', numpy.__version__, 'scipy', scipy.__version__, 'numba', numba.__version__,
      'gpu available:', B.gpu_available())
" 2>&1 | tee "$out/env.txt"
timeout 240 python3 -m pytest -q -m gpu -p no:cacheprovider tests/sim/test_cupy.py 2>&1 \
    | tee "$out/pytest_gpu.txt"
tests=$?
timeout 300 python3 benchmarks/bench_flow.py --quick --problems large 2>&1 \
    | tee "$out/bench_large.txt"
exit $tests
