#!/usr/bin/env python3
"""`lockstep launch` and `lockstep env --all-ranks` inside real Slurm allocations (salloc, sbatch) on the test
cluster of tests/slurm/cluster.sh: nodes n1, n2, n3 on this host, Slurm's default MpiDefault=none.

Usage: cluster.sh run python3 launch_test.py LOCKSTEP CHILD [TRAIN MPIRUN]
LOCKSTEP is the built program, CHILD tests/launch_child (with --allreduce an MPI program that prints its rank, the
size, the sum of the ranks and its Slurm node as one JSON line per rank). With TRAIN (examples/train/lockstep_train)
and MPIRUN, the training example runs with its default arguments through `lockstep launch` inside `salloc -N 2 -n 2`
and through plain mpirun on 2 local ranks, and the two runs must end at the same validation loss.
"""
import json
import os
import subprocess
import sys
import tempfile

FAILURES = []
TIMEOUT = 120  # seconds for one allocation; the cluster is idle, a job starts at once


def check(ok, what):
    print(("ok:   " if ok else "FAIL: ") + what, flush=True)
    if not ok:
        FAILURES.append(what)


def run(args, timeout=TIMEOUT):
    try:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        print(f"$ {' '.join(args)}  -> timed out after {timeout} s")
        return subprocess.CompletedProcess(args, 124, e.stdout or "", e.stderr or "")
    print(f"$ {' '.join(args)}  -> {proc.returncode}")
    if proc.stdout:
        print(proc.stdout[-4000:])
    if proc.stderr:
        print("stderr:", proc.stderr[-4000:])
    return proc


def rank_lines(stdout):
    lines = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    return sorted(lines, key=lambda line: line.get("mpi_rank", line["rank"]))


def check_job(lines, ranks, nodes, what):
    check([line["mpi_rank"] for line in lines] == list(range(ranks)), f"{what}: ranks 0..{ranks - 1}, each once")
    check(all(line["mpi_size"] == ranks for line in lines), f"{what}: MPI_Init gave every rank the size {ranks}")
    check(all(line["allreduce_sum"] == ranks * (ranks - 1) / 2 for line in lines), f"{what}: the allreduce is right")
    seen = sorted({line["node"] for line in lines})
    check(len(seen) == nodes, f"{what}: ranks ran on {nodes} Slurm nodes (got {seen})")


def validation_curve(path):
    """The per-epoch validation losses the training example wrote (hex floats, third column)."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [float.fromhex(line.split()[2]) for line in f if line.strip() and not line.startswith("#")]


def train_on_two_nodes(lockstep, train, mpirun, salloc):
    with tempfile.TemporaryDirectory() as tmp:
        on_slurm, local = os.path.join(tmp, "slurm"), os.path.join(tmp, "mpirun")
        p = run(
            salloc + ["-N", "2", "-n", "2", lockstep, "launch", "--", train, "--losses-file", on_slurm], timeout=300
        )
        check(p.returncode == 0, "the training example under salloc -N 2 -n 2 exits 0")
        p = run([mpirun, "-n", "2", "--oversubscribe", train, "--losses-file", local], timeout=300)
        check(p.returncode == 0, "the same training under mpirun -n 2 exits 0")
        slurm_curve, local_curve = validation_curve(on_slurm), validation_curve(local)
        check(
            len(slurm_curve) > 0 and len(slurm_curve) == len(local_curve),
            f"both runs trained the same number of epochs ({len(slurm_curve)} and {len(local_curve)})",
        )
        if slurm_curve and local_curve:
            a, b = slurm_curve[-1], local_curve[-1]
            check(
                abs(a - b) <= 1e-6 * max(abs(b), 1e-12),
                f"final validation loss on 2 Slurm nodes {a:.6f} equals mpirun's {b:.6f}",
            )


def main():
    lockstep, child = sys.argv[1], sys.argv[2]
    # The checks expect exactly the LOCKSTEP_* settings each case makes: none may come from the caller's shell.
    for name in [k for k in os.environ if k.startswith("LOCKSTEP_") and k != "LOCKSTEP_CONFIG_FILE"]:
        del os.environ[name]
    os.environ.pop("SLURM_MPI_TYPE", None)
    os.environ.setdefault("LOCKSTEP_CONFIG_FILE", "")
    if "SLURM_CONF" not in os.environ:
        print("SLURM_CONF is not set: run this under tests/slurm/cluster.sh run")
        return 2
    salloc = ["salloc", "--time=5"]

    # srun inside an allocation, no -n and no --mpi: SLURM_NTASKS gives the count, and srun gets the PMI plugin Open
    # MPI was built for. Without it every rank dies in MPI_Init (MpiDefault=none).
    p = run(salloc + ["-N", "2", "-n", "2", lockstep, "launch", "--", child, "--allreduce"])
    check(p.returncode == 0, "launch inside salloc -N 2 -n 2 exits 0")
    check_job(rank_lines(p.stdout), 2, 2, "salloc -N 2 -n 2")

    p = run(salloc + ["-N", "2", "-n", "2", lockstep, "launch", "--dry-run", "--json", "--", child])
    plan = json.loads(p.stdout) if p.returncode == 0 else {}
    check(plan.get("launcher") == "srun", "dry run: srun inside the allocation")
    check(
        plan.get("num_processes") == 2 and "SLURM_NTASKS" in plan.get("num_processes_source", ""),
        "dry run: 2 processes from SLURM_NTASKS",
    )
    pmi = plan.get("pmi") or {}
    check(
        pmi.get("plugin") == "pmix" and "--mpi=pmix" in plan.get("command", []),
        f"dry run: srun gets --mpi=pmix ({pmi})",
    )
    check(
        "ompi_info" in pmi.get("source", "") and "could not be asked" not in pmi.get("source", ""),
        "dry run: the choice names ompi_info, and srun --mpi=list was asked",
    )
    wrapper = os.path.join(os.path.dirname(os.path.realpath(lockstep)), "lockstep-rank-env")
    check(
        plan.get("command", [])[-5:] == [wrapper, "--from", "srun", "--", child]
        and "MASTER_PORT" in plan.get("forwarded", [])
        and "MASTER_ADDR" not in plan.get("environment", {}),
        "dry run: lockstep-rank-env runs in front of the program; MASTER_ADDR is left to the ranks",
    )

    # torchrun's variables on two Slurm nodes: srun's task and node ids, and the step's first node as MASTER_ADDR.
    show = (
        'echo "torch $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $GROUP_RANK $GROUP_WORLD_SIZE $MASTER_ADDR '
        '$MASTER_PORT $SLURMD_NODENAME"'
    )
    p = run(salloc + ["-N", "2", "-n", "2", lockstep, "launch", "--", "/bin/sh", "-c", show])
    rows = sorted(line.split()[1:] for line in p.stdout.splitlines() if line.startswith("torch "))
    check(
        p.returncode == 0
        and [row[:6] for row in rows] == [["0", "2", "0", "1", "0", "2"], ["1", "2", "0", "1", "1", "2"]],
        f"RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE per rank ({rows})",
    )
    check(
        len(rows) == 2
        and len({tuple(row[6:8]) for row in rows}) == 1
        and rows[0][6] == rows[0][8]
        and rows[0][7].isdigit(),
        "every rank has the same MASTER_ADDR (rank 0's node) and MASTER_PORT",
    )

    # The user's own --mpi wins, and a wrong one is explained.
    p = run(salloc + ["-N", "2", "-n", "2", lockstep, "launch", "--mpirun-args=--mpi=pmi2", "--", child, "--allreduce"])
    check(p.returncode != 0, "ranks started with srun --mpi=pmi2 fail (Debian's Open MPI has PMIx only)")
    check(
        "lockstep launch: the ranks failed in MPI_Init" in p.stderr
        and "'pmi2'" in p.stderr
        and "--mpi=pmix" in p.stderr,
        "the failure names the plugin used and the one to try",
    )

    # -n wins over SLURM_NTASKS.
    p = run(salloc + ["-N", "2", "-n", "2", lockstep, "launch", "-n", "1", "--", child, "--allreduce"])
    check(p.returncode == 0, "launch -n 1 inside the allocation exits 0")
    check_job(rank_lines(p.stdout), 1, 1, "launch -n 1")

    # salloc -N 2 alone: one rank per node, as srun itself would start.
    p = run(salloc + ["-N", "2", lockstep, "launch", "--", child, "--allreduce"])
    check(p.returncode == 0, "launch inside salloc -N 2 exits 0")
    check_job(rank_lines(p.stdout), 2, 2, "salloc -N 2")

    # A batch job: sbatch -N 2 -n 3 runs its script on the first node; launch takes SLURM_NTASKS from there.
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "job.out")
        p = run(
            [
                "sbatch",
                "--wait",
                "--time=5",
                "-N",
                "2",
                "-n",
                "3",
                "-o",
                out,
                "--wrap",
                f"{lockstep} launch -- {child} --allreduce",
            ]
        )
        text = open(out).read() if os.path.exists(out) else ""
        print(text[-4000:])
        check(p.returncode == 0, "sbatch -N 2 -n 3 job exits 0")
        check_job(rank_lines(text), 3, 2, "sbatch -N 2 -n 3")

    # env --all-ranks on a healthy two-node job: per-node and per-rank values differ, nothing job-wide does.
    p = run(salloc + ["-N", "2", "-n", "2", lockstep, "launch", "--", lockstep, "env", "--all-ranks", "--json"])
    report = json.loads(p.stdout) if p.stdout.startswith("{") else {"ranks": [], "differences": []}
    check(p.returncode == 0, "env --all-ranks exits 0 on a healthy two-node job")
    check(len(report["ranks"]) == 2, "both reports gathered")
    names = sorted(r["environment"].get("SLURMD_NODENAME", "") for r in report["ranks"])
    check(names == ["n1", "n2"], f"SLURMD_NODENAME is collected ({names})")
    scopes = {d["path"]: d["scope"] for d in report["differences"]}
    check(all(scope != "job" for scope in scopes.values()), f"no job-wide difference ({scopes})")
    check(scopes.get("environment.SLURMD_NODENAME") == "node", "SLURMD_NODENAME differs per node")
    check(
        any(path.startswith("environment.PMIX_SERVER_URI") and scope == "node" for path, scope in scopes.items()),
        "the PMIx server URIs differ per node",
    )
    check(scopes.get("environment.SLURM_PROCID") == "rank", "SLURM_PROCID differs per rank")

    # Open MPI's mpirun inside the allocation starts its daemons through srun: its session directories and daemon
    # URIs are per node too.
    p = run(
        salloc
        + [
            "-N",
            "2",
            "-n",
            "2",
            lockstep,
            "launch",
            "--launcher",
            "openmpi",
            "--",
            lockstep,
            "env",
            "--all-ranks",
            "--json",
        ]
    )
    report = json.loads(p.stdout) if p.stdout.startswith("{") else {"ranks": [], "differences": []}
    scopes = {d["path"]: d["scope"] for d in report["differences"]}
    check(p.returncode == 0 and len(report["ranks"]) == 2, "mpirun inside the allocation: env --all-ranks exits 0")
    check(all(scope != "job" for scope in scopes.values()), f"mpirun: no job-wide difference ({scopes})")
    check(
        scopes.get("environment.OMPI_MCA_orte_top_session_dir") == "node",
        "mpirun: Open MPI's session directories differ per node",
    )

    if len(sys.argv) > 4:
        train_on_two_nodes(lockstep, sys.argv[3], sys.argv[4], salloc)

    print(f"{len(FAILURES)} failed" if FAILURES else "all checks passed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
