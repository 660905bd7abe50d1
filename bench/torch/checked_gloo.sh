#!/usr/bin/env bash
# What lockstep's checks cost a torch job on gloo (bench/torch/checked_gloo.py) on 2 local ranks: plain gloo, the
# checking backend lockstep_gloo with debug mode on and with the watchdog only, and gloo under
# TORCH_DISTRIBUTED_DEBUG=DETAIL, in the same job, at 4 B and 4 KiB. The table goes to
# bench/torch/results/checked_gloo_2.txt, the medians to checked_gloo_2.csv. Needs a build of the Python package
# (build/ by default).
set -euo pipefail
cd "$(dirname "$0")/../.."
builddir=${1:-build}
out=bench/torch/results
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_tcp_if_include=lo \
  OMPI_MCA_oob_tcp_if_include=lo LOCKSTEP_CONFIG_FILE='' OMP_NUM_THREADS=1
PYTHONPATH="$builddir/bindings/python" mpirun -n 2 /usr/bin/python3 bench/torch/checked_gloo.py \
  --out "$out/checked_gloo_2.csv" | tee "$out/checked_gloo_2.txt"
