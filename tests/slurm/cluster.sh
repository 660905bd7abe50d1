#!/usr/bin/env bash
# A real Slurm on one machine, for the tests that launch under srun, salloc and sbatch: munged with its own key and
# socket, one slurmctld and three slurmd "nodes" n1, n2, n3 on this host, each slurmd with its own port, spool
# directory and TmpFS (Slurm's PMIx plugin keeps its per-step files there, so steps on two "nodes" of one host must
# not share it). Everything lives under one directory and every daemon is stopped by PID.
#
#   slurm.conf   SlurmUser=root, MpiDefault=none (Slurm's default), select/cons_tres, proctrack/linuxproc,
#                task/none (no cgroups), no accounting; every address is 127.0.0.1
#   nodes        NodeName=nK NodeHostname=<this host> NodeAddr=127.0.0.1 Port=<free port>, CPUs as this machine
#                has, in one default partition "debug"
#
# Usage:
#   cluster.sh run COMMAND [ARGS...]   start a cluster in a fresh directory, run COMMAND with SLURM_CONF and
#                                      LOCKSTEP_SLURM_DIR set, stop the cluster, return COMMAND's exit status
#   cluster.sh start DIR               start a cluster in DIR (then: source DIR/env)
#   cluster.sh stop DIR                stop it: every daemon it started and every process they started, by PID
#
# Needs root and Debian's slurmctld, slurmd, slurm-client and munge packages (tools/install-deps.sh installs them);
# exits 77 (skipped) where they are missing and cannot be installed. Only 127.0.0.1 is used. Nothing outside DIR is
# read or changed: the daemons are given every path explicitly (no /etc/slurm, /etc/munge or /run/munge).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../cluster/processes.sh
source "$here/../cluster/processes.sh"
nodes=(n1 n2 n3)

skip() {
  echo "slurm cluster.sh: skipped: $*" >&2
  exit 77
}

have_packages() {
  local p
  for p in /usr/sbin/slurmctld /usr/sbin/slurmd /usr/bin/srun /usr/bin/salloc /usr/bin/sbatch /usr/bin/scontrol \
    /usr/sbin/munged /usr/bin/munge; do
    [ -x "$p" ] || return 1
  done
}

check_requirements() {
  [ "$(id -u)" -eq 0 ] || skip "needs root (slurmd runs as root)"
  command -v python3 >/dev/null || skip "no python3 on PATH"
  if ! have_packages; then
    # The packages are part of the project's dependencies; install them when this machine can.
    if [ -x "$here/../../tools/install-deps.sh" ]; then
      "$here/../../tools/install-deps.sh" >&2 || true
    fi
    have_packages || skip "Slurm or munge is not installed and could not be installed (tools/install-deps.sh)"
  fi
}

# Free TCP ports on 127.0.0.1: one for slurmctld, one per slurmd.
pick_ports() {  # count
  python3 - "$1" <<'PY'
import random, socket, sys
count, ports = int(sys.argv[1]), []
for _ in range(1000):
    if len(ports) == count:
        break
    port = random.randint(20000, 39999)
    if port in ports:
        continue
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
        ports.append(port)
    except OSError:
        pass
    finally:
        s.close()
if len(ports) < count:
    sys.exit("no free ports found on 127.0.0.1")
print(" ".join(map(str, ports)))
PY
}

wait_for() {  # seconds description command...
  local limit=$1 what=$2 i
  shift 2
  for ((i = 0; i < limit * 10; i++)); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.1
  done
  echo "slurm cluster.sh: $what not ready after $limit s" >&2
  return 1
}

# Every node idle: slurmd registered with slurmctld.
nodes_idle() {
  local states
  states=$(sinfo -h -N -o '%N %t' 2>/dev/null) || return 1
  [ "$(grep -c ' idle$' <<<"$states")" -eq "${#nodes[@]}" ]
}

show_logs() {  # dir
  local f
  for f in "$1"/munge/munged.log "$1"/slurmctld.log "$1"/slurmd.*.log; do
    [ -f "$f" ] || continue
    echo "--- $f" >&2
    tail -n 30 "$f" >&2
  done
}

start_cluster() {
  local dir=$1
  check_requirements
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  chmod 700 "$dir"
  : >"$dir/pids"
  local host cpus ports ctld_port
  host=$(hostname)
  cpus=$(nproc)
  read -r -a ports <<<"$(pick_ports $((1 + ${#nodes[@]})))"
  ctld_port=${ports[0]}

  # munge: a key of our own, its socket, log, pid and seed under DIR.
  mkdir -p "$dir/munge"
  chmod 700 "$dir/munge"
  head -c 1024 /dev/urandom >"$dir/munge/munge.key"
  chmod 400 "$dir/munge/munge.key"
  local socket=$dir/munge/munge.socket
  /usr/sbin/munged --foreground --force --socket="$socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" \
    --seed-file="$dir/munge/munged.seed" </dev/null >/dev/null 2>&1 &
  echo "$! munged" >>"$dir/pids"
  if ! wait_for 15 "munged" munge --socket="$socket" --no-input; then
    show_logs "$dir"
    return 1
  fi

  mkdir -p "$dir/state"
  : >"$dir/plugstack.conf"  # no SPANK plugins of this machine's /etc/slurm
  local n
  for n in "${nodes[@]}"; do mkdir -p "$dir/spool/$n" "$dir/tmp/$n"; done
  {
    cat <<CONF
ClusterName=lockstep
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$socket
CredType=cred/munge
StateSaveLocation=$dir/state
PlugStackConfig=$dir/plugstack.conf
SlurmdSpoolDir=$dir/spool/%n
TmpFS=$dir/tmp/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.%n.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SwitchType=switch/none
MpiDefault=none
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=10
CONF
    local i=1
    for n in "${nodes[@]}"; do
      echo "NodeName=$n NodeHostname=$host NodeAddr=127.0.0.1 Port=${ports[$i]} CPUs=$cpus State=UNKNOWN"
      i=$((i + 1))
    done
    echo "PartitionName=debug Nodes=$(IFS=,; echo "${nodes[*]}") Default=YES MaxTime=INFINITE State=UP"
  } >"$dir/slurm.conf"
  export SLURM_CONF=$dir/slurm.conf

  /usr/sbin/slurmctld -D -i -f "$dir/slurm.conf" </dev/null >>"$dir/slurmctld.out" 2>&1 &
  echo "$! slurmctld" >>"$dir/pids"
  if ! wait_for 30 "slurmctld" scontrol ping; then
    show_logs "$dir"
    return 1
  fi
  for n in "${nodes[@]}"; do
    /usr/sbin/slurmd -D -N "$n" -f "$dir/slurm.conf" </dev/null >>"$dir/slurmd.$n.out" 2>&1 &
    echo "$! slurmd $n" >>"$dir/pids"
  done
  if ! wait_for 60 "every slurmd" nodes_idle; then
    sinfo -N >&2 || true
    show_logs "$dir"
    return 1
  fi

  cat >"$dir/env" <<ENV
export LOCKSTEP_SLURM_DIR=$dir
export SLURM_CONF=$dir/slurm.conf
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_tcp_if_include=lo
export OMPI_MCA_oob_tcp_if_include=lo
ENV
  echo "slurm cluster.sh: slurmctld on 127.0.0.1:$ctld_port, nodes ${nodes[*]} on $host; source $dir/env" >&2
}

# The processes of this cluster: the recorded daemons, everything below them, any process whose command line names
# the cluster's directory, and every slurmstepd of this cluster with the tasks below it: slurmstepd leaves slurmd's
# tree (it daemonises), and is told apart from another cluster's by its SLURM_CONF=DIR/slurm.conf.
cluster_processes() {  # dir
  local dir=$1 pid comm
  recorded_processes "$dir"
  # Clients (salloc, srun, sbatch --wait) of this cluster would wait for its controller forever once it is gone.
  for comm in /proc/[0-9]*/comm; do
    case "$({ cat "$comm"; } 2>/dev/null)" in
      slurmstepd | salloc | srun | sbatch | sattach) ;;
      *) continue ;;
    esac
    pid=${comm#/proc/}
    pid=${pid%/comm}
    if { tr '\0' '\n' <"/proc/$pid/environ"; } 2>/dev/null | grep -qxF -- "SLURM_CONF=$dir/slurm.conf"; then
      echo "$pid"
      descendants "$pid"
    fi
  done
  return 0
}

case "${1:-}" in
  start)
    [ $# -eq 2 ] || { echo "usage: cluster.sh start DIR" >&2; exit 2; }
    start_cluster "$2"
    ;;
  stop)
    [ $# -eq 2 ] || { echo "usage: cluster.sh stop DIR" >&2; exit 2; }
    stop_cluster "$2"
    ;;
  run)
    shift
    [ $# -ge 1 ] || { echo "usage: cluster.sh run COMMAND [ARGS...]" >&2; exit 2; }
    run_with_cluster "slurm cluster.sh" "${TMPDIR:-/tmp}/lockstep-slurm-XXXXXX" "$@"
    ;;
  *)
    echo "usage: cluster.sh run COMMAND [ARGS...] | start DIR | stop DIR" >&2
    exit 2
    ;;
esac
