#!/usr/bin/env bash
# A test cluster on one machine, for `lockstep hostcheck`: sshd "nodes" listening on 127.0.1.x loopback addresses,
# each started in its own UTS namespace so that `hostname` differs per node, with throw-away keys and an explicit ssh
# config, and Open MPI told to use that config and to stay on loopback. Several nodes are broken on purpose, one for
# each problem hostcheck diagnoses:
#
#   127.0.1.11  node1   healthy
#   127.0.1.12  node2   healthy
#   127.0.1.13  node3   healthy from here, but cannot ssh to node1 (its client config disables the key for it)
#   127.0.1.14  node4   host key not in known_hosts                       -> host_key_unknown
#   127.0.1.15  node5   our key not authorised                            -> auth_denied
#   127.0.1.16  node6   non-interactive PATH without MPI                  -> remote_mpi_missing
#   127.0.1.17  -       nothing listens                                   -> refused
#   127.0.1.18  -       accepts TCP, never speaks SSH                     -> timeout
#   127.0.1.19  node9   known_hosts holds another key                     -> host_key_changed
#   127.0.1.20  node10  the key for it is world-readable                  -> key_permissions
#   127.0.1.21  -       accepts TCP and closes at once                    -> connection_closed
#   127.0.1.22  node12  an orted on PATH that never reports back          (mpirun hang)
#   nosuchhost.invalid  does not resolve (RFC 6761)                       -> dns
#
# Usage:
#   cluster.sh run COMMAND [ARGS...]   start a cluster in a fresh directory, run COMMAND with LOCKSTEP_CLUSTER_DIR and
#                                      the Open MPI variables set, stop the cluster, return COMMAND's exit status
#   cluster.sh start DIR               start a cluster in DIR (then: source DIR/env)
#   cluster.sh stop DIR                stop it: every process it started, by PID
#
# Needs root (unshare --uts, sshd), /usr/sbin/sshd, ssh, ssh-keygen, unshare and python3; exits 77 (skipped) without.
# Only 127.0.0.0/8 addresses are used. Nothing outside DIR is changed, except creating /run/sshd (sshd's privilege
# separation directory) when it is missing; it is removed again at stop if it was created here.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=processes.sh
source "$here/processes.sh"
sshd_bin=/usr/sbin/sshd

healthy_nodes=(1 2 3)

skip() {
  echo "cluster.sh: skipped: $*" >&2
  exit 77
}

check_requirements() {
  [ "$(id -u)" -eq 0 ] || skip "needs root (unshare --uts and sshd)"
  [ -x "$sshd_bin" ] || skip "no $sshd_bin (install openssh-server)"
  for p in ssh ssh-keygen unshare python3 hostname; do
    command -v "$p" >/dev/null || skip "no $p on PATH"
  done
  unshare --uts true 2>/dev/null || skip "unshare --uts is not permitted here"
}

addr() { echo "127.0.1.$((10 + $1))"; }

# A port free on every node address (the nodes all listen on the same port).
pick_port() {
  python3 - <<'PY'
import random, socket, sys
for _ in range(200):
    port = random.randint(20000, 39999)
    ok = True
    for n in range(1, 13):
        s = socket.socket()
        try:
            s.bind((f"127.0.1.{10 + n}", port))
        except OSError:
            ok = False
        finally:
            s.close()
    if ok:
        print(port)
        sys.exit(0)
sys.exit("no free port found on 127.0.1.11-22")
PY
}

write_sshd_config() {  # node dir port [extra lines]
  local n=$1 dir=$2 port=$3 extra=${4:-}
  cat >"$dir/node$n/sshd_config" <<CFG
ListenAddress $(addr "$n"):$port
HostKey $dir/node$n/ssh_host_ed25519_key
PidFile $dir/node$n/sshd.pid
AuthorizedKeysFile $dir/node$n/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
MaxStartups 200
MaxSessions 100
LogLevel ERROR
$extra
CFG
}

# A PATH directory with the shell tools a session needs but no MPI: what a node sees when MPI is installed under a
# prefix that only login shells add to PATH.
write_tool_dir() {  # bin-dir
  local bin=$1 t
  mkdir -p "$bin"
  for t in sh bash dash uname hostname head sed tr cut cat sleep env ssh test true false ls id; do
    if command -v "$t" >/dev/null 2>&1; then ln -sf "$(command -v "$t")" "$bin/$t"; fi
  done
}

start_node() {  # node dir
  local n=$1 dir=$2
  # unshare without --fork execs its command, and sh execs sshd: the PID recorded is sshd's own.
  unshare --uts sh -c "hostname node$n && exec $sshd_bin -D -f $dir/node$n/sshd_config -E $dir/node$n/sshd.log" \
    </dev/null >/dev/null 2>&1 &
  echo "$! sshd node$n" >>"$dir/pids"
}

wait_listening() {  # address port seconds
  python3 - "$@" <<'PY'
import socket, sys, time
address, port, limit = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
end = time.monotonic() + limit
while time.monotonic() < end:
    try:
        socket.create_connection((address, port), timeout=0.5).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.05)
sys.exit(f"nothing listens on {address}:{port} after {limit} s")
PY
}

start_cluster() {
  local dir=$1
  check_requirements
  mkdir -p "$dir"
  dir="$(cd "$dir" && pwd)"
  if [ ! -d /run/sshd ]; then
    mkdir -p /run/sshd && chmod 755 /run/sshd
    touch "$dir/created_run_sshd"
  fi
  : >"$dir/pids"
  local port
  port=$(pick_port)
  echo "$port" >"$dir/port"

  ssh-keygen -q -t ed25519 -N '' -C lockstep-test-client -f "$dir/client_key"
  ssh-keygen -q -t ed25519 -N '' -C lockstep-test-other -f "$dir/other_key"
  ssh-keygen -q -t ed25519 -N '' -C lockstep-test-loose -f "$dir/loose_key"
  ssh-keygen -q -t ed25519 -N '' -C lockstep-test-impostor -f "$dir/impostor_host_key"
  chmod 644 "$dir/loose_key"  # ssh refuses to use it: node10's key_permissions
  : >"$dir/known_hosts"

  local n
  for n in 1 2 3 4 5 6 9 10 12; do
    mkdir -p "$dir/node$n"
    ssh-keygen -q -t ed25519 -N '' -C "node$n" -f "$dir/node$n/ssh_host_ed25519_key"
    cp "$dir/client_key.pub" "$dir/node$n/authorized_keys"
    local key entry
    key=$(cut -d' ' -f1,2 "$dir/node$n/ssh_host_ed25519_key.pub")
    entry="[$(addr "$n")]:$port"
    case $n in
      4) ;;  # never added: host_key_unknown
      9) echo "$entry $(cut -d' ' -f1,2 "$dir/impostor_host_key.pub")" >>"$dir/known_hosts" ;;
      *) echo "$entry $key" >>"$dir/known_hosts" ;;
    esac
  done
  cp "$dir/other_key.pub" "$dir/node5/authorized_keys"
  cp "$dir/loose_key.pub" "$dir/node10/authorized_keys"

  write_tool_dir "$dir/node6/bin"
  write_tool_dir "$dir/node12/bin"
  # node12: an orted that never reports back to mpirun (and ends by itself within two minutes).
  cat >"$dir/node12/bin/orted" <<'ORTED'
#!/bin/sh
i=0
while [ $i -lt 120 ]; do sleep 1; i=$((i + 1)); done
ORTED
  chmod 755 "$dir/node12/bin/orted"

  for n in 1 2 3 4 5 9 10; do write_sshd_config "$n" "$dir" "$port"; done
  write_sshd_config 6 "$dir" "$port" "SetEnv PATH=$dir/node6/bin"
  write_sshd_config 12 "$dir" "$port" "SetEnv PATH=$dir/node12/bin"

  # ssh takes the first value it finds for each option, so the exceptions come before `Host *`.
  cat >"$dir/ssh_config" <<CFG
# node3 cannot reach node1: on node3 (hostname node3) the key is not offered to 127.0.1.11.
Match originalhost $(addr 1) exec "test %L = node3"
    PubkeyAuthentication no
# node10: only the world-readable key, which ssh refuses to use.
Host $(addr 10)
    IdentityFile $dir/loose_key
Host *
    Port $port
    User root
    IdentityFile $dir/client_key
    IdentitiesOnly yes
    UserKnownHostsFile $dir/known_hosts
    GlobalKnownHostsFile /dev/null
    StrictHostKeyChecking yes
    CheckHostIP no
    BatchMode yes
    ConnectTimeout 10
CFG

  for n in 1 2 3 4 5 6 9 10 12; do start_node "$n" "$dir"; done
  python3 "$here/listener.py" silent "$(addr 8)" "$port" </dev/null >/dev/null 2>&1 &
  echo "$! listener-silent" >>"$dir/pids"
  python3 "$here/listener.py" close "$(addr 11)" "$port" </dev/null >/dev/null 2>&1 &
  echo "$! listener-close" >>"$dir/pids"

  for n in 1 2 3 4 5 6 8 9 10 11 12; do
    if ! wait_listening "$(addr "$n")" "$port" 15; then
      cat "$dir"/node*/sshd.log >&2 2>/dev/null || true
      return 1
    fi
  done

  cat >"$dir/env" <<ENV
export LOCKSTEP_CLUSTER_DIR=$dir
export OMPI_MCA_plm_rsh_agent="ssh -F $dir/ssh_config"
export OMPI_MCA_btl_tcp_if_include=lo
export OMPI_MCA_oob_tcp_if_include=lo
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ENV
  # What each hostfile name should be diagnosed with; "ok" for the healthy nodes.
  cat >"$dir/expected" <<EXP
$(addr 1) ok node1
$(addr 2) ok node2
$(addr 3) ok node3
$(addr 4) host_key_unknown node4
$(addr 5) auth_denied node5
$(addr 6) remote_mpi_missing node6
$(addr 7) refused -
$(addr 8) timeout -
$(addr 9) host_key_changed node9
$(addr 10) key_permissions node10
$(addr 11) connection_closed -
nosuchhost.invalid dns -
EXP
  cut -d' ' -f1 "$dir/expected" >"$dir/hostfile_all"
  printf '%s\n' "$(addr 1)" "$(addr 2)" >"$dir/hostfile_good"
  printf '%s slots=1\n' "$(addr 1)" "$(addr 12)" >"$dir/hostfile_hang"
  printf '%s\n' "$(addr 1)" "$(addr 8)" "$(addr 2)" >"$dir/hostfile_silent"
  echo "cluster.sh: ${#healthy_nodes[@]} healthy nodes and 9 broken ones on 127.0.1.11-22 port $port; source $dir/env" >&2
}

# The processes of this cluster: the recorded ones, everything below them, and any process whose command line names
# the cluster's directory (a session whose sshd parent ended first is adopted by init and leaves the tree).
cluster_processes() {  # dir
  recorded_processes "$1"
}

# After the processes: /run/sshd goes again if this cluster created it.
after_stop() {  # dir
  if [ -f "$1/created_run_sshd" ]; then
    rmdir /run/sshd 2>/dev/null || true
    rm -f "$1/created_run_sshd"
  fi
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
    run_with_cluster cluster.sh "${TMPDIR:-/tmp}/lockstep-cluster-XXXXXX" "$@"
    ;;
  *)
    echo "usage: cluster.sh run COMMAND [ARGS...] | start DIR | stop DIR" >&2
    exit 2
    ;;
esac
