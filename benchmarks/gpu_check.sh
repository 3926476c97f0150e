#!/usr/bin/env bash
# The checks of the CuPy backend that need a GPU, in one run from the repository root on
# a machine with CuPy and a CUDA device: the GPU tests (pytest -m gpu: the one numpy/CuPy
# loop on the device against numpy and against the compiled loops, linear and MLP), then
# the large problem of bench_flow.py, which adds the cupy rows when a GPU is present, and
# bench_mlp.py's smooth problem (the MLP's compiled loop against its numpy model and the
# baselines installed there).  Logs go to $OUT (default ./gpu_check_out).  Timeouts keep
# the whole run under 10 minutes.
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
timeout 220 python3 benchmarks/bench_flow.py --quick --problems large 2>&1 \
    | tee "$out/bench_large.txt"
OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 timeout 120 python3 benchmarks/bench_mlp.py --quick \
    --only smooth --methods auto 2>&1 | tee "$out/bench_mlp_smooth.txt"
exit $tests
