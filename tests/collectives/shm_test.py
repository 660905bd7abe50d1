#!/usr/bin/env python3
"""Runs jobs of the shared-memory arena under mpirun and checks what they print, how they end, and that they leave
nothing in /dev/shm.

Usage:
  shm_test.py repeat MPIRUN SHM_PROGRAM NP
      `shm_program hash` twice, with arenas of different sizes: both runs print the same hashes (the same inputs give
      the same bits, run after run), and every process held the same bits in each run.
  shm_test.py hang MPIRUN SHM_PROGRAM NP skip|kill|small_skip|small_kill
      skip: the last rank leaves the loop while the others wait in an allreduce through the arena. kill: the last rank
      is killed (SIGKILL) while it waits in it; once under a plain mpirun (which ends the job itself), once with
      --enable-recovery (mpirun leaves the job alone, so the watchdog must end it). Every job ends within the timeout
      + 15 s, non-zero (under --enable-recovery mpirun returns 0 whatever happened: there the watchdog must say that it
      ends the job), with the watchdog's report where mpirun leaves it to the watchdog. small_skip, small_kill: the same
      with an allreduce of 16 bytes through the small-message path.
  shm_test.py mixed MPIRUN SHM_COLLECTIVES SHM_PROGRAM NP
      The last rank keeps its tensors private (LOCKSTEP_SHM_THRESHOLD=1EiB, the others 0): every collective of
      test_shm_collectives takes the MPI path with the same results. Then the last rank runs with LOCKSTEP_SHM=off: the
      job either works through MPI or stops at once with a ConfigError on every rank, never hangs.
  shm_test.py fallback MPIRUN SHM_PROGRAM LOCKSTEP_EXE
      shm off, an arena larger than /dev/shm (1EiB), a full segment, LOCKSTEP_CPU_MEMORY_LIMIT, one process alone on
      its node (auto and on), and the "shared memory" section of `lockstep env`.
  shm_test.py cluster MPIRUN SHM_COLLECTIVES SHM_PROGRAM
      Under tests/cluster/cluster.sh: test_shm_collectives on two nodes of two ranks (allreduce hierarchical, equal to
      the MPI path; Open MPI must see two nodes), then on 2 + 1 ranks; on two nodes of two ranks, one process whose
      segment is full (every node must take the MPI path), and a rank that skips a hierarchical allreduce.
"""
import os
import re
import signal
import subprocess
import sys
import time

TIMEOUT_SECONDS = 2  # LOCKSTEP_TIMEOUT of the hang jobs
GRACE_SECONDS = 15
FAILURES: list[str] = []


def check(ok: bool, what: str) -> None:
    print(("ok:   " if ok else "FAIL: ") + what, flush=True)
    if not ok:
        FAILURES.append(what)


def lockstep_entries() -> set[str]:
    """The entries of /dev/shm whose name says lockstep."""
    try:
        return {name for name in os.listdir("/dev/shm") if "lockstep" in name.lower()}
    except FileNotFoundError:
        return set()


def run_job(command: list[str], env: dict[str, str], limit: float) -> tuple[int | None, float, str]:
    """Runs a job; returns (exit code, or None when it was killed at `limit` seconds, seconds taken, output). Checks
    that it left nothing in /dev/shm: no new entry named for lockstep, and no arena object the job printed."""
    before = lockstep_entries()
    print("$ " + " ".join(command), flush=True)
    start = time.monotonic()
    proc = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )
    try:
        output, _ = proc.communicate(timeout=limit)
        code = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate()
        code = None
    seconds = time.monotonic() - start
    print(output)
    print(f"-> exit code {code} after {seconds:.1f} s", flush=True)
    # Another job may create and unlink an entry at this moment: only one that stays counts.
    new = lockstep_entries() - before
    if new:
        time.sleep(1.0)
        new &= lockstep_entries()
    check(not new, f"no lockstep entry left in /dev/shm (found {sorted(new)})")
    mappings = re.findall(r"^arena-mapping rank \d+: (.*)$", output, re.MULTILINE)
    for m in sorted(set(mappings)):
        check(
            m.startswith("/dev/shm/") and m.endswith(" (deleted)"),
            f"the arena is a /dev/shm object whose name was unlinked while the job ran ({m!r})",
        )
        path = m.removesuffix(" (deleted)")
        check(not os.path.exists(path), f"{path} is gone after the job")
    return code, seconds, output


def job_env(**extra: str) -> dict[str, str]:
    """The jobs test the arena's own path: the small-message path (tests/collectives/shm_small_test.py) is off
    unless `extra` turns it on."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOCKSTEP_SHM")}
    env.update({"LOCKSTEP_CONFIG_FILE": "", "LOCKSTEP_TIMEOUT": "60", "LOCKSTEP_SHM_SMALL_MAX": "0"})
    env.update(extra)
    return env


def hashes(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("hash ")]


def repeat(mpirun: str, program: str, np: int) -> None:
    runs = []
    for arena in ("64MiB", "96MiB"):
        code, _, output = run_job(
            [mpirun, "-n", str(np), "--oversubscribe", program, "hash"], job_env(LOCKSTEP_SHM_ARENA_SIZE=arena), 120
        )
        check(code == 0, f"the hash job with a {arena} arena exits 0 (got {code})")
        check("FAIL" not in output, "every check of the job passed")
        runs.append(hashes(output))
        check(len(runs[-1]) == 14, f"14 hash lines (got {len(runs[-1])})")
        check(f"shm_calls {14 + 1}" in output, "every call of the job went through the arena")
    check(runs[0] == runs[1], "both runs print the same hashes: the same inputs give the same bits")
    if runs[0] != runs[1]:
        for a, b in zip(runs[0], runs[1]):
            if a != b:
                print(f"  first:  {a}\n  second: {b}")


def hang(mpirun: str, program: str, np: int, mode: str) -> None:
    last = np - 1
    small = {"LOCKSTEP_SHM_SMALL_MAX": "32KiB"} if mode.startswith("small") else {}
    env = job_env(LOCKSTEP_TIMEOUT=str(TIMEOUT_SECONDS), **small)
    limit = TIMEOUT_SECONDS + GRACE_SECONDS
    launches = [["--enable-recovery"], []] if mode.endswith("kill") else [[]]
    for extra in launches:
        label = f"{mode}{' with --enable-recovery' if extra else ''}"
        code, seconds, output = run_job(
            [mpirun, *extra, "-n", str(np), "--oversubscribe", program, mode], env, limit + 10
        )
        if extra:
            # Under --enable-recovery Open MPI 4.1's mpirun returns 0 whatever its processes return: the watchdog's
            # own account of ending the job stands in for the exit status.
            check(
                code is not None and "Ending the job (exit code 124)" in output,
                f"{label}: the watchdog ends the job (mpirun's exit code {code})",
            )
        else:
            check(code not in (None, 0), f"{label}: the job exits non-zero (got {code})")
        check(seconds < limit, f"{label}: the job ends within {limit} s (took {seconds:.1f} s)")
        check("shm_calls before the hang: 2" in output, f"{label}: the first two allreduces went through the arena")
        if mode.endswith("skip"):
            check("collective timed out after" in output, "the watchdog reports the hang")
            check(f"Never arrived: Process {last}\n" in output, f"the report names rank {last} as never arrived")
            check("`lockstep::allreduce` #3" in output, "the report names the stuck call (allreduce #3)")
            check("shm_program.cpp:" in output, "the report gives the call site")
        elif extra:
            check(f"rank {last}: killing itself" in output, f"rank {last} was killed in the allreduce")
            check("collective timed out after" in output, "the watchdog reports the hang")
            check("`lockstep::allreduce` #3" in output, "the report names the stuck call (allreduce #3)")
            check("has exited or its node is unreachable" in output, f"the report says rank {last} does not answer")
        else:
            check(f"rank {last}: killing itself" in output, f"rank {last} was killed in the allreduce")
            check(
                "collective timed out after" in output or "exited on signal 9" in output,
                "the watchdog or mpirun reports the killed rank",
            )


def mixed(mpirun: str, collectives: str, program: str, np: int) -> None:
    env = job_env(LOCKSTEP_SHM_ARENA_SIZE="64MiB", LOCKSTEP_TEST_SHM_EXPECT="mixed")
    code, _, output = run_job(
        [
            mpirun,
            "--oversubscribe",
            "-n",
            str(np - 1),
            "-x",
            "LOCKSTEP_SHM_THRESHOLD=0",
            collectives,
            ":",
            "-n",
            "1",
            "-x",
            "LOCKSTEP_SHM_THRESHOLD=1EiB",
            collectives,
        ],
        env,
        300,
    )
    check("ConfigError" not in output, "ranks with different thresholds are not refused at start-up")
    check(code == 0, f"every collective takes the MPI path with the same results (exit {code})")

    # Thresholds 0 and 1 MiB: the larger decides for the communicator, so 256 KiB takes the MPI path everywhere and
    # 4 MiB the arena everywhere.
    code, _, output = run_job(
        [
            mpirun,
            "--oversubscribe",
            "-n",
            str(np - 1),
            "-x",
            "LOCKSTEP_SHM_THRESHOLD=0",
            program,
            "status",
            ":",
            "-n",
            "1",
            "-x",
            "LOCKSTEP_SHM_THRESHOLD=1MiB",
            program,
            "status",
        ],
        job_env(),
        60,
    )
    check(code == 0 and "FAIL" not in output, f"thresholds 0 and 1 MiB: the job runs (exit {code})")
    small = re.findall(r"^path rank (\d+): in_arena=(\d) shm_calls=(\d+)", output, re.MULTILINE)
    large = re.findall(r"^path4M rank (\d+): in_arena=(\d) shm_calls=(\d+)", output, re.MULTILINE)
    check(
        sorted(small) == [(str(r), "1" if r < np - 1 else "0", "0") for r in range(np)],
        f"thresholds 0 and 1 MiB: 256 KiB lies in the arena on the ranks with threshold 0 only, and takes the MPI "
        f"path everywhere ({sorted(small)})",
    )
    check(
        sorted(large) == [(str(r), "1", "1") for r in range(np)],
        f"thresholds 0 and 1 MiB: 4 MiB lies in the arena and goes through it everywhere ({sorted(large)})",
    )

    code, _, output = run_job(
        [
            mpirun,
            "--oversubscribe",
            "-n",
            str(np - 1),
            program,
            "status",
            ":",
            "-n",
            "1",
            "-x",
            "LOCKSTEP_SHM=off",
            program,
            "status",
        ],
        job_env(),
        60,
    )
    check(code is not None, "one rank with shm off: the job does not hang")
    if code == 0:
        found = re.findall(r"^path rank (\d+): in_arena=(\d) shm_calls=(\d+)", output, re.MULTILINE)
        check(
            len(found) == np and all(calls == "0" for _, _, calls in found),
            "one rank with shm off: every rank takes the MPI path",
        )
        check(f"status rank {np - 1}: active=0 mode=off" in output, "the rank with shm off has no arena")
    else:
        check(
            "ConfigError" in output and "LOCKSTEP_SHM" in output,
            f"one rank with shm off: a ConfigError naming LOCKSTEP_SHM (exit {code})",
        )


def statuses(output: str) -> dict[int, str]:
    return {int(m.group(1)): m.group(2) for m in re.finditer(r"^status rank (\d+): (.*)$", output, re.MULTILINE)}


def paths(output: str) -> dict[int, str]:
    return {int(m.group(1)): m.group(2) for m in re.finditer(r"^path rank (\d+): (.*)$", output, re.MULTILINE)}


def warnings_with(output: str, phrase: str) -> list[str]:
    return [line for line in output.splitlines() if phrase in line and "WARNING" in line]


def fallback(mpirun: str, program: str, lockstep: str) -> None:
    np = 2

    def status_job(label: str, ranks: int = np, **extra: str) -> tuple[dict[int, str], dict[int, str], str]:
        code, _, output = run_job(
            [mpirun, "-n", str(ranks), "--oversubscribe", program, "status"], job_env(**extra), 60
        )
        check(code == 0 and "FAIL" not in output, f"{label}: the job runs through MPI (exit {code})")
        s, p = statuses(output), paths(output)
        check(len(s) == ranks and len(p) == ranks, f"{label}: every rank printed its status")
        check(
            output.count("survivor after finalize: intact") == ranks,
            f"{label}: a tensor that outlives the runtime stays readable",
        )
        return s, p, output

    s, p, _ = status_job("shm off", LOCKSTEP_SHM="off")
    check(
        all("active=0 mode=off" in v and "reason='" in v and "shm is off" in v for v in s.values()),
        "shm off: inactive on every rank, the reason says shm is off",
    )
    check(
        all(v == "in_arena=0 shm_calls=0 shared_memory=0" for v in p.values()),
        "shm off: tensors are private, the allreduce takes the MPI path, shared_memory() is false",
    )

    s, p, output = status_job("LOCKSTEP_SHM_ARENA_SIZE=1EiB", LOCKSTEP_SHM_ARENA_SIZE="1EiB")
    check(
        all("active=0" in v and "/dev/shm has" in v and "LOCKSTEP_SHM_ARENA_SIZE" in v for v in s.values()),
        "1EiB: inactive on every rank, the reason says what /dev/shm has and names LOCKSTEP_SHM_ARENA_SIZE",
    )
    check(all(v.startswith("in_arena=0 shm_calls=0") for v in p.values()), "1EiB: the MPI path")
    lines = warnings_with(output, "/dev/shm has")
    check(1 <= len(lines) <= np, f"1EiB: logged as a WARNING, at most once per process (got {len(lines)})")
    check(all("LOCKSTEP_SHM_ARENA_SIZE" in line for line in lines), "1EiB: the WARNING names the variable")

    code, _, output = run_job(
        [mpirun, "-n", str(np), "--oversubscribe", program, "exhaust"], job_env(LOCKSTEP_SHM_ARENA_SIZE="1MiB"), 60
    )
    check(code == 0 and "FAIL" not in output, f"a full segment: blocks come from private memory (exit {code})")
    lines = warnings_with(output, "arena segment of this process is full")
    check(1 <= len(lines) <= np, f"a full segment: one WARNING per process at most (got {len(lines)})")

    code, _, output = run_job(
        [mpirun, "-n", str(np), "--oversubscribe", program, "limit"],
        job_env(LOCKSTEP_SHM_ARENA_SIZE="64MiB", LOCKSTEP_CPU_MEMORY_LIMIT="4MiB"),
        60,
    )
    check(
        code == 0 and "FAIL" not in output and output.count("OutOfMemoryError") >= np,
        f"LOCKSTEP_CPU_MEMORY_LIMIT caps arena blocks: OutOfMemoryError on every rank (exit {code})",
    )

    s, p, _ = status_job("one process, auto", ranks=1)
    check(
        s and "active=0 mode=auto" in s[0] and "reason=''" not in s[0],
        "auto, one process on its node: no arena, and a reason",
    )
    s, p, _ = status_job("one process, on", ranks=1, LOCKSTEP_SHM="on")
    check(s and "active=1 mode=on" in s[0] and p and "in_arena=1" in p[0], "on, one process on its node: an arena")

    def env_section(**extra: str) -> str:
        """The shared memory section of `lockstep env` ("" when there is none)."""
        proc = subprocess.run([lockstep, "env"], env=job_env(**extra), capture_output=True, text=True, timeout=60)
        text = proc.stdout
        at = text.lower().find("shared memory\n")
        section = text[at:].split("\n#", 1)[0] if at >= 0 and proc.returncode == 0 else ""
        print(f"$ {extra} lockstep env  -> {proc.returncode}\n{section or text[-3000:] + proc.stderr[-3000:]}")
        return section

    section = env_section()
    check("/dev/shm" in section, "`lockstep env` has a shared memory section that speaks of /dev/shm")
    check("off" in env_section(LOCKSTEP_SHM="off"), "`lockstep env` says when shm is off")
    check("1.00 MiB" in env_section(LOCKSTEP_SHM_THRESHOLD="1MiB"), "`lockstep env` gives the threshold")


def cluster(mpirun: str, collectives: str, program: str) -> None:
    if not os.environ.get("LOCKSTEP_CLUSTER_DIR"):
        print("shm_test.py cluster: run under tests/cluster/cluster.sh")
        sys.exit(2)
    common = [
        "LOCKSTEP_SHM_THRESHOLD=0",
        "LOCKSTEP_SHM_ARENA_SIZE=64MiB",
        "LOCKSTEP_TIMEOUT=60",
        "LOCKSTEP_CONFIG_FILE=",
        "LOCKSTEP_TEST_EXPECT_NODES=2",
    ]

    def node(address: str, ranks: int, *more: str) -> list[str]:
        # Each node publishes its own address for the watchdog (the nodes' host names do not resolve).
        exports = [x for v in [*common, f"LOCKSTEP_WATCHDOG_HOST={address}", *more] for x in ("-x", v)]
        return ["--host", f"{address}:{ranks}", "-n", str(ranks), *exports, collectives]

    env = job_env()
    # Two slots on each node, but the nodes share this machine's cores: without yielding, Open MPI's busy polling
    # makes every message between the nodes wait for a time slice (a minute for the allreduce case instead of 2 s).
    mpirun_yield = [mpirun, "--oversubscribe", "--mca", "mpi_yield_when_idle", "1"]
    code, _, output = run_job([*mpirun_yield, *node("127.0.1.11", 2), ":", *node("127.0.1.12", 2)], env, 400)
    sizes = re.findall(r"^rank (\d+): local_size (\d+), nodes (\d+)$", output, re.MULTILINE)
    print(f"MPI_COMM_TYPE_SHARED as Open MPI sees it: {sizes}")
    check(
        len(sizes) == 4 and all(ls == "2" and nodes == "2" for _, ls, nodes in sizes),
        "Open MPI sees two nodes of two processes (MPI_COMM_TYPE_SHARED)",
    )
    check(
        code == 0,
        f"2 nodes x 2 ranks: allreduce hierarchical and equal to the MPI path, every other op right " f"(exit {code})",
    )

    code, _, output = run_job(
        [*mpirun_yield, *node("127.0.1.11", 2, "LOCKSTEP_SHM=on"), ":", *node("127.0.1.12", 1, "LOCKSTEP_SHM=on")],
        env,
        400,
    )
    check(code == 0, f"2 + 1 ranks on two nodes: every op right (exit {code})")

    def program_node(address: str, mode: str, *settings: str) -> list[str]:
        exports = [
            x for v in [*settings, "LOCKSTEP_CONFIG_FILE=", f"LOCKSTEP_WATCHDOG_HOST={address}"] for x in ("-x", v)
        ]
        return ["--host", f"{address}:2", "-n", "2", *exports, program, mode]

    # Process 0 alone runs out of arena: its node cannot take the arena path, so the other node must not either.
    code, _, output = run_job(
        [
            *mpirun_yield,
            *program_node("127.0.1.11", "exhaust", "LOCKSTEP_SHM_ARENA_SIZE=1MiB"),
            ":",
            *program_node("127.0.1.12", "exhaust", "LOCKSTEP_SHM_ARENA_SIZE=1MiB"),
        ],
        env,
        120,
    )
    check(
        code == 0 and "FAIL" not in output,
        f"2 nodes x 2 ranks, one process's segment full: every process takes the MPI path, right results "
        f"(exit {code})",
    )

    # The last rank leaves the loop while the others wait in the hierarchical allreduce.
    limit = TIMEOUT_SECONDS + GRACE_SECONDS
    timeout = f"LOCKSTEP_TIMEOUT={TIMEOUT_SECONDS}"
    code, seconds, output = run_job(
        [
            *mpirun_yield,
            *program_node("127.0.1.11", "skip", timeout),
            ":",
            *program_node("127.0.1.12", "skip", timeout),
        ],
        env,
        limit + 10,
    )
    check(
        code not in (None, 0) and seconds < limit,
        f"a rank skips a hierarchical allreduce: the job ends non-zero within {limit} s (exit {code}, "
        f"{seconds:.1f} s)",
    )
    check(
        "collective timed out after" in output and "Never arrived: Process 3\n" in output,
        "the watchdog reports rank 3 as never arrived",
    )


def main() -> int:
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    args = sys.argv[2:]
    if mode == "repeat" and len(args) == 3:
        repeat(args[0], args[1], int(args[2]))
    elif mode == "hang" and len(args) == 4:
        hang(args[0], args[1], int(args[2]), args[3])
    elif mode == "mixed" and len(args) == 4:
        mixed(args[0], args[1], args[2], int(args[3]))
    elif mode == "fallback" and len(args) == 3:
        fallback(args[0], args[1], args[2])
    elif mode == "cluster" and len(args) == 3:
        cluster(args[0], args[1], args[2])
    else:
        print(__doc__)
        return 2
    print(f"{len(FAILURES)} check(s) failed" if FAILURES else "all checks passed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
