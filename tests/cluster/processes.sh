# shellcheck shell=bash
# Process handling shared by the test clusters (tests/cluster/cluster.sh: sshd nodes; tests/slurm/cluster.sh: Slurm),
# sourced by both. Processes are found through /proc and ended by PID, never by name, so that nothing outside the
# cluster is touched. The sourcing script defines start_cluster DIR, cluster_processes DIR (the PIDs to end, one per
# line; it may call read_process_tree and descendants) and check_requirements.

# `children` maps a PID to its children. The command name in /proc/PID/stat may hold spaces: the parent PID is the
# second field after its closing parenthesis.
declare -A children=()
read_process_tree() {
  local stat line rest pid ppid
  children=()
  for stat in /proc/[0-9]*/stat; do
    { line=$(<"$stat"); } 2>/dev/null || continue
    rest=${line##*) }
    ppid=${rest#* }
    ppid=${ppid%% *}
    pid=${stat#/proc/}
    pid=${pid%/stat}
    children[$ppid]+=" $pid"
  done
}

# Every PID below $1; fill `children` with read_process_tree first.
descendants() {
  local child
  for child in ${children[$1]:-}; do
    echo "$child"
    descendants "$child"
  done
}

# The processes recorded in DIR/pids, everything below them, and any process whose command line names DIR (one
# adopted by init when its parent ended first has left the tree). Fills `children` on the way.
recorded_processes() {  # dir
  local dir=$1 pid rest cmdline
  read_process_tree
  while read -r pid rest; do
    [ -n "$pid" ] || continue
    kill -0 "$pid" 2>/dev/null && echo "$pid"
    descendants "$pid"
  done <"$dir/pids"
  for cmdline in /proc/[0-9]*/cmdline; do
    pid=${cmdline#/proc/}
    pid=${pid%/cmdline}
    [ "$pid" = "$$" ] && continue
    # A process may end between the glob and the read: the redirection's own error is silenced too.
    if { tr '\0' ' ' <"$cmdline"; } 2>/dev/null | grep -qF -- "$dir/"; then echo "$pid"; fi
  done
  return 0
}

# This process and its ancestors, which no stop may end (a harness that runs `cluster.sh stop` may carry the
# cluster's variables).
ancestors() {
  local pid=$$ line rest
  while [ "$pid" -gt 1 ] 2>/dev/null; do
    echo "$pid"
    { line=$(<"/proc/$pid/stat"); } 2>/dev/null || break
    rest=${line##*) }
    pid=${rest#* }
    pid=${pid%% *}
  done
}

# Ends the cluster in DIR by PID: TERM, up to 5 s, then KILL; rounds repeat while cluster_processes finds new ones (a
# session or job step that started while the first round ran), at most 5 rounds.
stop_cluster() {  # dir
  local dir=$1 pid all alive
  [ -f "$dir/pids" ] || return 0
  for _ in 1 2 3 4 5; do
    mapfile -t all < <(cluster_processes "$dir" | sort -u | grep -vxF -f <(ancestors))
    [ "${#all[@]}" -gt 0 ] || break
    kill -TERM "${all[@]}" 2>/dev/null || true
    for _ in $(seq 50); do
      alive=0
      for pid in "${all[@]}"; do
        if kill -0 "$pid" 2>/dev/null; then alive=1; fi
      done
      if [ "$alive" -eq 0 ]; then break; fi
      sleep 0.1
    done
    kill -KILL "${all[@]}" 2>/dev/null || true
    for pid in "${all[@]}"; do wait "$pid" 2>/dev/null || true; done
  done
  : >"$dir/pids"
  after_stop "$dir"
}

# Starts a cluster in a new directory, runs COMMAND with the cluster's variables, stops the cluster and removes the
# directory on any exit. The exit status is COMMAND's: a failure while tearing down is reported and does not replace
# it (under `set -e` a failing command in an EXIT trap would become the script's status).
run_with_cluster() {  # label directory-template command...
  local label=$1 template=$2
  shift 2
  check_requirements
  cluster_dir=$(mktemp -d "$template")
  cluster_child=""
  # shellcheck disable=SC2317 # run by the EXIT trap below, which shellcheck does not see as a call
  cleanup() {
    set +e
    if [ -n "$cluster_child" ]; then kill -TERM "$cluster_child" 2>/dev/null; fi
    stop_cluster "$cluster_dir" || echo "$label: stopping the cluster failed (status $?)" >&2
    for _ in 1 2 3; do
      rm -rf "$cluster_dir" 2>/dev/null && break
      sleep 0.5
    done
    if [ -e "$cluster_dir" ]; then echo "$label: could not remove $cluster_dir" >&2; fi
  }
  trap cleanup EXIT
  trap 'exit 143' TERM
  trap 'exit 130' INT
  start_cluster "$cluster_dir"
  # shellcheck disable=SC1091
  source "$cluster_dir/env"
  local status=0
  "$@" &
  cluster_child=$!
  wait "$cluster_child" || status=$?
  cluster_child=""
  exit "$status"
}

# What a cluster script does once its processes are gone (it may define this again after sourcing).
after_stop() { :; }
