#!/usr/bin/env bash
# The DDP training step side by side (bench/torch/ddp_step.py) on 2 local ranks: lockstep with asynchronous work,
# lockstep blocking, and gloo in the same job, at a batch of 64 (compute-bound) and of 8 (communication a larger
# share). The tables go to bench/torch/results/ddp_step_2_batchB.txt, the medians to the .csv files. Needs a build of
# the Python package (build/ by default).
set -euo pipefail
cd "$(dirname "$0")/../.."
builddir=${1:-build}
out=bench/torch/results
mkdir -p "$out"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_tcp_if_include=lo \
  OMPI_MCA_oob_tcp_if_include=lo LOCKSTEP_CONFIG_FILE='' OMP_NUM_THREADS=1
for batch in 64 8; do
  PYTHONPATH="$builddir/bindings/python" mpirun -n 2 /usr/bin/python3 bench/torch/ddp_step.py --batch "$batch" \
    --samples "$([ "$batch" = 8 ] && echo 21 || echo 15)" --out "$out/ddp_step_2_batch$batch.csv" | tee "$out/ddp_step_2_batch$batch.txt"
done
