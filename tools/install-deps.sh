#!/usr/bin/env bash
# Installs every Debian 12 package lockstep needs to build, test and benchmark.
# Idempotent: when everything is present it only checks and returns quickly.
set -euo pipefail

packages=(
  build-essential g++ pkg-config meson ninja-build git
  openmpi-bin libopenmpi-dev
  # MPICH beside Open MPI, for the build against it (meson -Dmpi=mpich, tests/sanitizers/run.sh mpich). Debian ranks
  # Open MPI's alternatives higher, so mpirun, mpicc and mpi.pc stay Open MPI's; MPICH's are mpiexec.mpich,
  # mpicc.mpich and mpich.pc.
  mpich libmpich-dev
  # A real MPI program the checking library runs under in the suite (tests/check/hpcc_test.py).
  hpcc
  libboost-log-dev libboost-test-dev
  # The symbolizer's backend (base/symbolizer.cpp: Boost.Stacktrace over libbacktrace).
  libboost-stacktrace-dev
  libeigen3-dev libyaml-cpp-dev libfmt-dev nlohmann-json3-dev libcli11-dev
  python3 clang-format
  # The format gate's Python formatter and linter and its shell script linter (tools/check-format.sh).
  black flake8 shellcheck
  openssh-server openssh-client pdsh python3-jsonschema
  # A real Slurm for the tests (tests/slurm/cluster.sh starts its own daemons with its own config and key).
  slurmctld slurmd slurm-client munge
  # The C interface's checks (Debian's DLPack 0.6 header, abidiff) and the Python package with the frameworks it is
  # tested under: Debian's python3 with numpy, torch 1.13 and mpi4py, bound with pybind11.
  libdlpack-dev abigail-tools
  python3-dev pybind11-dev python3-pybind11 python3-numpy python3-torch python3-mpi4py
  # pip install . of the package (meson-python, and the venv module its test installs into) and the type checker of
  # its stubs (tests/bindings/python/install_test.py, typing_test.py).
  python3-mesonpy python3-venv python3-pip mypy
  # meson uses it when it is there: the pip build of install_test.py then gets the objects the build tree compiled.
  ccache
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages: ${missing[*]}; run this script as root (it uses apt-get)" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
