#!/usr/bin/env bash
# The C interface and the Python/PyTorch layers side by side on 2 local ranks: bench_c_api (C vs C++) and
# python_side_by_side.py (lockstep Python vs mpi4py, the lockstep torch backend vs gloo, debug modes); CSVs and the
# printed tables go to bench/c_api/results/. Needs a build with benchmarks (build/ by default).
set -euo pipefail
cd "$(dirname "$0")/../.."
builddir=${1:-build}
out=bench/c_api/results
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_tcp_if_include=lo \
  OMPI_MCA_oob_tcp_if_include=lo LOCKSTEP_CONFIG_FILE='' OMP_NUM_THREADS=1
mpirun -n 2 "$builddir/bench/bench_c_api" --out "$out/c_vs_cpp_2.csv" | tee "$out/c_vs_cpp_2.txt"
PYTHONPATH="$builddir/bindings/python" mpirun -n 2 /usr/bin/python3 bench/c_api/python_side_by_side.py \
  --out "$out/python_2.csv" | tee "$out/python_2.txt"
