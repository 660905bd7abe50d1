#!/usr/bin/env bash
# The DDP training step side by side (bench/torch/ddp_step.py) on 2 local ranks: lockstep with asynchronous work,
# lockstep blocking, and gloo in the same job. The table goes to bench/torch/results/ddp_step_2.txt, the medians to
# its .csv. Needs a build of the Python package (build/ by default).
set -euo pipefail
cd "$(dirname "$0")/../.."
builddir=${1:-build}
out=bench/torch/results
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_tcp_if_include=lo \
  OMPI_MCA_oob_tcp_if_include=lo LOCKSTEP_CONFIG_FILE='' OMP_NUM_THREADS=1
PYTHONPATH="$builddir/bindings/python" mpirun -n 2 /usr/bin/python3 bench/torch/ddp_step.py \
  --out "$out/ddp_step_2.csv" "${@:2}" | tee "$out/ddp_step_2.txt"
