#!/usr/bin/env python3
"""Runs the real `lockstep` program (launch, config, env, test) and checks what it prints and how it exits.

Usage: launch_test.py LOCKSTEP CHILD CASE [NP]
LOCKSTEP is the built program, CHILD tests/launch_child (prints each rank's settings as one JSON line).
Every case uses real processes, real mpirun and real files in a temporary directory.
"""
import json
import os
import pty
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

FAILURES = []


def check(ok, what):
    print(("ok:   " if ok else "FAIL: ") + what)
    if not ok:
        FAILURES.append(what)


def run(args, env=None, input_text=None, timeout=120):
    proc = subprocess.run(
        args,
        env=env if env is not None else os.environ.copy(),
        input=input_text,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    print(f"$ {' '.join(args)}  -> {proc.returncode}")
    if proc.stdout:
        print(proc.stdout[-3000:])
    if proc.stderr:
        print("stderr:", proc.stderr[-3000:])
    return proc


def child_lines(stdout):
    return sorted((json.loads(line) for line in stdout.splitlines() if line.startswith("{")), key=lambda j: j["rank"])


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def without_slurm(env):
    """The environment with no Slurm allocation in it (the test may run inside one)."""
    return {k: v for k, v in env.items() if not k.startswith("SLURM_")}


def open_mpi_pmix():
    """Whether the Open MPI on PATH says (ompi_info) it was built with PMIx: srun then needs --mpi=pmix."""
    try:
        text = subprocess.run(["ompi_info", "--parsable"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return any(line.startswith(("mca:pmix:ext", "mca:pmix:pmix")) for line in text.splitlines())


def rank_env_program(lockstep):
    """lockstep-rank-env, which launch puts in front of the program: built and installed next to lockstep."""
    return os.path.join(os.path.dirname(os.path.realpath(lockstep)), "lockstep-rank-env")


def case_dry_run(lockstep, child, tmp, _):
    # A job id of the user's is kept (the launcher's own, launch-<its pid>, is checked below).
    env = without_slurm(dict(os.environ, LOCKSTEP_SEED="7", LOCKSTEP_JOB_ID="job-7"))
    env = {k: v for k, v in env.items() if k not in ("MASTER_ADDR", "MASTER_PORT")}
    hosts = write(os.path.join(tmp, "hosts"), "# rank 0 runs here\n\nnode7 slots=2\nnode8 slots=2\n")
    wrapper = rank_env_program(lockstep)
    base = [
        lockstep,
        "launch",
        "--dry-run",
        "--json",
        "-n",
        "4",
        "--npernode",
        "2",
        "--hostfile",
        hosts,
        "--debug",
        "--log-level",
        "info",
        "--timeout",
        "30",
        "--mpirun-args",
        "--tag-output --bind-to 'core'",
    ]
    flags = "LOCKSTEP_DEBUG_MODE,LOCKSTEP_LOG_LEVEL,LOCKSTEP_TIMEOUT"
    expected_env = {
        "LOCKSTEP_DEBUG_MODE": "1",
        "LOCKSTEP_LOG_LEVEL": "info",
        "LOCKSTEP_TIMEOUT": "30",
        "LOCKSTEP_SEED": "7",
        "LOCKSTEP_LAUNCHER_FLAGS": flags,
        "LOCKSTEP_CONFIG_FILE": "",
        "LOCKSTEP_JOB_ID": "job-7",
    }
    forwarded = sorted(expected_env)

    p = run(base + ["--launcher", "openmpi", "--", child, "--debug", "x"], env)
    plan = json.loads(p.stdout)
    cmd = plan["command"]
    check(p.returncode == 0 and plan["launcher"] == "openmpi", "openmpi dry run succeeds")
    # torch's rendezvous: rank 0's host (the hostfile's first), and a port free here, forwarded after LOCKSTEP_*.
    port = plan["environment"].get("MASTER_PORT", "")
    check(port.isdigit() and 0 < int(port) < 65536, f"MASTER_PORT is a port: {port!r}")
    rendezvous = {"MASTER_ADDR": "node7", "MASTER_PORT": port}
    head = ["mpirun"] + (["--allow-run-as-root"] if os.geteuid() == 0 else [])
    xs = [w for name in forwarded + ["MASTER_ADDR", "MASTER_PORT"] for w in ("-x", name)]
    check(
        cmd
        == head
        + ["-np", "4", "--hostfile", hosts, "--map-by", "ppr:2:node"]
        + xs
        + ["--tag-output", "--bind-to", "core", wrapper, "--from", "openmpi", "--", child, "--debug", "x"],
        f"openmpi command: {cmd}",
    )
    check(plan["pmi"] is None and plan["num_nodes"] is None, "mpirun: no PMI plugin, no node count")
    check(
        plan["environment"] == dict(expected_env, **rendezvous),
        "openmpi: every LOCKSTEP_* variable with its value, and the rendezvous",
    )
    check(plan["master_addr_source"] == "first host of the hostfile " + hosts, "MASTER_ADDR's source is named")
    check(plan["forwarded"] == forwarded + ["MASTER_ADDR", "MASTER_PORT"], "MASTER_ADDR and MASTER_PORT forwarded")

    p = run(base + ["--launcher", "hydra", child], env)
    cmd = json.loads(p.stdout)["command"]
    values = dict(expected_env, MASTER_ADDR="node7")
    genv = [w for name in forwarded + ["MASTER_ADDR"] for w in ("-genv", name, values[name])]
    check(
        cmd[: 7 + len(genv)] == ["mpirun", "-n", "4", "-f", hosts, "-ppn", "2"] + genv
        and cmd[7 + len(genv) : 9 + len(genv)] == ["-genv", "MASTER_PORT"]
        and cmd[10 + len(genv) :] == ["--tag-output", "--bind-to", "core", wrapper, "--from", "hydra", "--", child],
        f"hydra command: {cmd}",
    )

    # Without a hostfile, every rank is on this node; the user's MASTER_ADDR and MASTER_PORT are kept as they are.
    short = [lockstep, "launch", "--dry-run", "--json", "--launcher", "openmpi"]
    plan = json.loads(run(short + [child], env).stdout)
    check(plan["environment"]["MASTER_ADDR"] == "127.0.0.1", "one node: MASTER_ADDR is 127.0.0.1")
    own = json.loads(run(short + [child], {k: v for k, v in env.items() if k != "LOCKSTEP_JOB_ID"}).stdout)
    job = own["environment"].get("LOCKSTEP_JOB_ID", "")
    check(
        job.startswith("launch-") and job[len("launch-") :].isdigit(),
        f"without one, the launcher names the job launch-<its pid> for `lockstep trace` ({job!r})",
    )
    plan = json.loads(run(short + [child], dict(env, MASTER_ADDR="10.1.2.3", MASTER_PORT="4321")).stdout)
    check(
        plan["environment"]["MASTER_ADDR"] == "10.1.2.3"
        and plan["environment"]["MASTER_PORT"] == "4321"
        and plan["master_addr_source"] == "environment MASTER_ADDR"
        and plan["forwarded"][-2:] == ["MASTER_ADDR", "MASTER_PORT"],
        "the user's MASTER_ADDR and MASTER_PORT are kept and forwarded",
    )
    p = run(short + ["--hostfile", os.path.join(tmp, "absent"), child], env)
    plan = json.loads(p.stdout)
    check(
        "MASTER_ADDR" not in plan["environment"] and any("MASTER_ADDR" in w for w in plan["warnings"]),
        "a hostfile that cannot be read: no MASTER_ADDR, and a warning says to set it",
    )
    # --no-torch-env: the program is started as it is, with no rendezvous.
    plan = json.loads(run(short + ["--no-torch-env", child, "a"], env).stdout)
    check(
        plan["command"][-2:] == [child, "a"]
        and wrapper not in plan["command"]
        and not any(k.startswith("MASTER_") for k in plan["environment"])
        and plan["master_addr_source"] is None,
        f"--no-torch-env: no wrapper, no MASTER_*: {plan['command']}",
    )

    slurm_env = dict(env, SLURM_JOB_ID="4242")
    # SLURM_MPI_TYPE is srun's own: srun reads it, lockstep passes no --mpi of its own.
    p = run(base + [child], dict(slurm_env, SLURM_MPI_TYPE="pmix"))  # --launcher auto: srun inside an allocation
    plan = json.loads(p.stdout)
    check(plan["launcher"] == "srun" and "4242" in plan["detected_from"], "SLURM_JOB_ID selects srun")
    check(
        plan["command"]
        == [
            "srun",
            "--ntasks=4",
            "--nodefile=" + hosts,
            "--ntasks-per-node=2",
            "--export=ALL," + ",".join(forwarded + ["MASTER_ADDR", "MASTER_PORT"]),
            "--tag-output",
            "--bind-to",
            "core",
            wrapper,
            "--from",
            "srun",
            "--",
            child,
        ],
        f"srun command: {plan['command']}",
    )
    check(plan["environment"]["MASTER_ADDR"] == "node7", "srun with a hostfile: MASTER_ADDR is its first host")
    check(plan["pmi"] == {"plugin": "pmix", "source": "environment SLURM_MPI_TYPE"}, f"SLURM_MPI_TYPE: {plan['pmi']}")
    p = run(base + ["--launcher", "openmpi", child], slurm_env)
    check(json.loads(p.stdout)["launcher"] == "openmpi", "--launcher overrides Slurm detection")

    # Without a hostfile, the node list is known only on the ranks: lockstep-rank-env reads its first host there.
    plan = json.loads(
        run([lockstep, "launch", "--dry-run", "--json", child], dict(slurm_env, SLURM_MPI_TYPE="pmix")).stdout
    )
    check(
        "MASTER_ADDR" not in plan["environment"]
        and "MASTER_PORT" in plan["environment"]
        and plan["command"][-5:] == [wrapper, "--from", "srun", "--", child],
        f"srun without a hostfile: MASTER_ADDR left to each rank ({plan['master_addr_source']})",
    )

    # Without a user's choice, srun gets the PMI plugin the Open MPI on PATH was built for (Debian's: PMIx) among those
    # `srun --mpi=list` offers (here a stand-in srun that answers as Slurm 22.05 does).
    short = [lockstep, "launch", "--dry-run", "--json"]
    srun_2205 = write(
        os.path.join(tmp, "srun-22.05"),
        '#!/bin/sh\n[ "$1" = --mpi=list ] || exit 1\n'
        "printf 'MPI plugin types are...\\n\\tpmix\\n\\tnone\\n\\tpmi2\\n"
        "specific pmix plugin versions available: pmix_v4\\n'\n",
    )
    srun_no_pmix = write(
        os.path.join(tmp, "srun-no-pmix"),
        '#!/bin/sh\n[ "$1" = --mpi=list ] || exit 1\n' "printf 'MPI plugin types are...\\n\\tnone\\n\\tpmi2\\n'\n",
    )
    os.chmod(srun_2205, 0o755)
    os.chmod(srun_no_pmix, 0o755)
    if open_mpi_pmix():
        p = run(short + ["--mpirun", srun_2205, "-n", "2", child], slurm_env)
        plan = json.loads(p.stdout)
        check(
            plan["pmi"]["plugin"] == "pmix"
            and "ompi_info" in plan["pmi"]["source"]
            and "could not be asked" not in plan["pmi"]["source"],
            f"PMIx from ompi_info and srun: {plan['pmi']}",
        )
        check(
            plan["command"][:3] == [srun_2205, "--ntasks=2", "--mpi=pmix"], f"srun gets --mpi=pmix: {plan['command']}"
        )
        p = run(short + ["--mpirun", srun_no_pmix, "-n", "2", child], slurm_env)
        plan = json.loads(p.stdout)
        check(
            plan["pmi"]["plugin"] is None and not any(w.startswith("--mpi") for w in plan["command"]),
            "a Slurm without PMIx: no plugin fits, none is passed",
        )
        check(
            "only none, pmi2" in p.stderr and any("only none, pmi2" in w for w in plan["warnings"]),
            "and the warning says what srun offers",
        )
    p = run([lockstep, "launch", "--dry-run", "--mpirun", srun_2205, "-n", "2", child], slurm_env)
    check("# pmi: " in p.stdout, "the text dry run shows the PMI plugin")
    p = run(short + ["--mpirun-args", "--mpi pmi2", child], slurm_env)
    plan = json.loads(p.stdout)
    check(
        plan["pmi"] == {"plugin": "pmi2", "source": "--mpirun-args --mpi pmi2"}
        and not any(w.startswith("--mpi=") for w in plan["command"]),
        "the user's --mpi wins, and is passed once",
    )

    # The process count of an allocation: flag > SLURM_NTASKS > config file > one per node of the allocation > 1.
    config = write(os.path.join(tmp, "five.yaml"), "lockstep: 1\nnum_processes: 5\n")
    allocation = dict(slurm_env, SLURM_NTASKS="3", SLURM_JOB_NUM_NODES="2", SLURM_MPI_TYPE="pmix")
    plan = json.loads(run(short + [child], allocation).stdout)
    check(
        plan["num_processes"] == 3 and plan["num_processes_source"] == "SLURM_NTASKS of Slurm allocation 4242",
        f"SLURM_NTASKS gives the count: {plan['num_processes_source']}",
    )
    check(
        plan["command"][:4] == ["srun", "--ntasks=3", "-N", "2"] and plan["num_nodes"] == 2,
        f"and the allocation's nodes: {plan['command']}",
    )
    plan = json.loads(run(short + ["--config", config, child], allocation).stdout)
    check(plan["num_processes"] == 3, "SLURM_NTASKS comes before the config file")
    plan = json.loads(run(short + ["-n", "4", child], allocation).stdout)
    check(
        plan["num_processes"] == 4 and plan["num_nodes"] is None and "-N" not in plan["command"],
        "-n comes before SLURM_NTASKS, and srun places the ranks",
    )
    nodes_only = dict(slurm_env, SLURM_JOB_NUM_NODES="2", SLURM_MPI_TYPE="pmix")
    plan = json.loads(run(short + ["--config", config, child], nodes_only).stdout)
    check(plan["num_processes"] == 5, "without SLURM_NTASKS the config file comes first")
    plan = json.loads(run(short + [child], nodes_only).stdout)
    check(
        plan["num_processes"] == 2 and "one per node" in plan["num_processes_source"],
        "then one rank per node of the allocation",
    )
    plan = json.loads(run(short + [child], dict(nodes_only, SLURM_NTASKS="lots")).stdout)
    check(plan["num_processes"] == 2, "a SLURM_NTASKS that is no count is ignored")
    plan = json.loads(run(short + ["--launcher", "openmpi", child], dict(env, SLURM_NTASKS="3")).stdout)
    check(
        plan["num_processes"] == 1 and plan["num_processes_source"] == "default",
        "outside an allocation (no SLURM_JOB_ID) SLURM_NTASKS is ignored",
    )

    p = run(short + ["--launcher", "openmpi", "--oversubscribe", child], env)
    check("--oversubscribe" in json.loads(p.stdout)["command"], "--oversubscribe reaches Open MPI's mpirun")
    p = run(short + ["--launcher", "srun", "--oversubscribe", "--mpirun-args=--mpi=pmix", child], env)
    check("--overcommit" in json.loads(p.stdout)["command"], "and srun as --overcommit")

    p = run([lockstep, "launch", "--dry-run", "-n", "2", "--no-debug", child, "a b"], env)
    check(
        p.returncode == 0 and "export LOCKSTEP_DEBUG_MODE=0" in p.stdout and "'a b'" in p.stdout,
        "text dry run prints exports and a shell-quoted command",
    )
    check(
        "export MASTER_ADDR=127.0.0.1" in p.stdout and "# MASTER_ADDR: 127.0.0.1" in p.stdout,
        "and the rendezvous, with where MASTER_ADDR comes from",
    )
    check("openmpi" in p.stdout.splitlines()[0], "auto detects OpenMPI from mpirun --version")

    for bad, word in (
        [["--bogus"], "--bogus"],
        [["--timeout", "soon"], "LOCKSTEP_TIMEOUT"],
        [["--log-level", "loud"], "LOCKSTEP_LOG_LEVEL"],
        [["--mpirun-args", "'open"], "unterminated"],
        [["--debug", "--no-debug"], "--no-debug"],
        [["--launcher", "pbs"], "pbs"],
        [[], "no program"],
    ):
        p = run([lockstep, "launch", "--dry-run"] + bad + ([child] if bad else []), env)
        check(p.returncode == 2 and word in p.stderr, f"usage error (exit 2) naming {word}")


def case_precedence(lockstep, child, tmp, _):
    config = write(os.path.join(tmp, "c.yaml"), "lockstep: 1\ndebug: true\ntimeout: 45\nnum_processes: 2\n")
    env = dict(os.environ, LOCKSTEP_LOG_LEVEL="error")
    p = run([lockstep, "launch", "--config", config, "--no-debug", "--", child], env)
    ranks = child_lines(p.stdout)
    check(p.returncode == 0 and len(ranks) == 2, "num_processes comes from the config file (2 ranks)")
    for r in ranks:
        check(
            r["debug"] is False and r["sources"]["debug"] == "launcher flag (LOCKSTEP_DEBUG_MODE)",
            f"rank {r['rank']}: --no-debug wins over 'debug: true', reported as a launcher flag",
        )
        check(
            r["timeout"] == 45 and r["sources"]["timeout"].startswith(config + ":3:"),
            f"rank {r['rank']}: timeout from the file with file:line:column",
        )
        check(
            r["log_level"] == "ERROR" and r["sources"]["log_level"] == "environment LOCKSTEP_LOG_LEVEL",
            f"rank {r['rank']}: variable from the caller's environment is forwarded",
        )
    p = run([lockstep, "launch", "--config", config, "--dry-run", "--json", "-n", "3", child])
    plan = json.loads(p.stdout)
    check(
        plan["num_processes"] == 3 and plan["num_processes_source"] == "flag --num-processes",
        "-n wins over the file's num_processes",
    )
    p = run([lockstep, "launch", "--config", config, "--dry-run", "--json", child])
    check(json.loads(p.stdout)["num_processes_source"].startswith(config + ":4:"), "num_processes source is file:line")


def case_launch(lockstep, child, tmp, np):
    p = run(
        [lockstep, "launch", "-n", np, "--debug", "--log-level", "info", "--timeout", "12", "--", child, "--exit", "0"]
    )
    ranks = child_lines(p.stdout)
    check(p.returncode == 0, "the job exits 0")
    check([r["rank"] for r in ranks] == list(range(int(np))), f"{np} ranks ran, each once")
    for r in ranks:
        check(
            r["size"] == int(np) and r["debug"] is True and r["log_level"] == "INFO" and r["timeout"] == 12,
            f"rank {r['rank']} sees the flags' values",
        )
        check(r["sources"]["timeout"] == "launcher flag (LOCKSTEP_TIMEOUT)", f"rank {r['rank']} knows the source")


def case_exit_codes(lockstep, child, tmp, _):
    p = run([lockstep, "launch", "-n", "2", child, "--exit", "3"])
    check(p.returncode == 3, f"a child exiting 3 makes launch exit 3 (got {p.returncode})")
    p = run([lockstep, "launch", "-n", "1", child, "--signal", "9"])
    check(p.returncode == 128 + 9, f"a child killed by SIGKILL makes launch exit 137 (got {p.returncode})")
    # SIGTERM sent to the launcher reaches the job: it ends promptly instead of running on.
    proc = subprocess.Popen([lockstep, "launch", "-n", "2", "--", "sleep", "60"])
    time.sleep(1.5)
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        rc = proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        rc = None
    check(rc not in (None, 0) and time.monotonic() - start < 20, f"SIGTERM is forwarded and the job ends (exit {rc})")
    p = run([lockstep, "launch", "--launcher", "openmpi", "--mpirun", "/nonexistent/mpirun", child])
    check(p.returncode == 1 and "/nonexistent/mpirun" in p.stderr, "a launcher that cannot start: exit 1, named")


def case_config(lockstep, child, tmp, _):
    path = os.path.join(tmp, "sub", "config.yaml")
    p = run([lockstep, "config", "--default", "--file", path])
    check(p.returncode == 0 and os.path.exists(path), "config --default writes the file (and its directory)")
    text = open(path).read()
    check("lockstep: 1" in text, "the file carries the schema version")
    p = run([lockstep, "config", "--check", path])
    check(
        p.returncode == 0 and "valid" in p.stdout and f"({path}:" in p.stdout, "config --check accepts it, with sources"
    )
    p = run([lockstep, "config", "--default", "--file", path])
    check(p.returncode == 1 and "--force" in p.stderr, "an existing file is not replaced without --force")
    p = run([lockstep, "config", "--default", "--file", path, "--force"])
    check(p.returncode == 0, "--force replaces it")
    p = run(
        [lockstep, "config", "--interactive", "--file", path, "--force"],
        input_text="4\nmaybe\nyes\ndebug\n\n8GiB\n\nbf16\n",
    )
    check(p.returncode == 0 and "not" in p.stdout, "interactive: a bad answer is explained and asked again")
    p = run([lockstep, "config", "--check", path])
    check(
        "num_processes: 4" in p.stdout
        and "debug: true" in p.stdout
        and "log_level: DEBUG" in p.stdout
        and "8 GiB" in p.stdout.replace("8.00 GiB", "8 GiB"),
        "interactive answers round-trip through --check",
    )
    # On a terminal the questions are asked without --interactive.
    master, slave = pty.openpty()
    proc = subprocess.Popen([lockstep, "config", "--file", path, "--force"], stdin=slave, stdout=slave, stderr=slave)
    os.close(slave)
    os.write(master, b"3\n\n\n\n\n\n\n")
    seen = b""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    rc = proc.wait(timeout=10)
    os.close(master)
    print(seen.decode(errors="replace"))
    check(rc == 0 and b"How many processes" in seen and b"wrote" in seen, "on a terminal the questions are asked")
    p = run([lockstep, "config", "--check", path])
    check("num_processes: 3" in p.stdout, "the terminal's answers are written")
    p = run([lockstep, "config", "--file", path, "--force"], input_text="")
    check(p.returncode == 2 and "--interactive" in p.stderr, "without a terminal: usage error pointing to the flags")
    accelerate = write(
        os.path.join(tmp, "accelerate.yaml"),
        "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nnum_processes: 8\n"
        "mixed_precision: bf16\nuse_cpu: false\n",
    )
    p = run([lockstep, "config", "--check", accelerate])
    check(p.returncode == 0 and "num_processes: 8" in p.stdout, "an Accelerate config file is read")


def case_malformed(lockstep, child, tmp, _):
    bad = write(os.path.join(tmp, "bad.yaml"), "lockstep: 1\ntimeout: [1, 2\n")
    p = run([lockstep, "config", "--check", bad])
    check(p.returncode == 1 and f"{bad}:" in p.stderr, "malformed YAML: exit 1 naming file:line")
    wrong = write(os.path.join(tmp, "wrong.yaml"), "lockstep: 1\ndebug: maybe\n")
    p = run([lockstep, "config", "--check", wrong])
    check(p.returncode == 1 and f"{wrong}:2:8" in p.stderr, "a bad value: exit 1 naming file:line:column")
    typo = write(os.path.join(tmp, "typo.yaml"), "lockstep: 1\ntimout: 3\n")
    p = run([lockstep, "config", "--check", typo])
    check(p.returncode == 1 and "timeout" in p.stderr, "an unknown key is reported with the likely key")
    p = run([lockstep, "config", "--check", os.path.join(tmp, "absent.yaml")])
    check(p.returncode == 2, "a missing file is a usage error")
    p = run([lockstep, "launch", "--config", wrong, "--dry-run", "prog"])
    check(p.returncode == 2 and f"{wrong}:2:8" in p.stderr, "launch --config with a bad file: exit 2, file:line:column")
    p = run([lockstep, "env"], dict(os.environ, LOCKSTEP_CONFIG_FILE=wrong))
    check(p.returncode == 1 and f"{wrong}:2:8" in p.stdout, "env reports the broken config file and exits 1")


def case_env(lockstep, child, tmp, _):
    env = dict(
        os.environ,
        LOCKSTEP_SEED="11",
        SLURM_JOB_ID="77",
        PMIX_TEST="p",
        OMPI_TEST="o",
        LOCKSTEP_STAGING_CHUNK_BYTES="64KiB",
    )
    p = run([lockstep, "env", "--json"], env)
    r = json.loads(p.stdout)
    check(p.returncode == 0 and r["schema"] == "lockstep.env/1", "env --json parses, with its schema")
    check(r["lockstep"]["version"] and r["lockstep"]["git_commit"], "version and git commit")
    check(r["os"]["kernel"] and "kernel_warning" in r["os"] and "name" in r["os"], "OS and kernel")
    check(r["compiler"].strip() != "", "compiler")
    check("MPI" in r["mpi"]["library"] and isinstance(r["mpi"]["cuda_aware"], bool), "MPI library, CUDA-awareness")
    check(set(r["cuda"]) >= {"runtime", "driver", "gpus"} and isinstance(r["cuda"]["gpus"], list), "CUDA section")
    check(r["host"]["cpu_cores"] > 0 and r["host"]["ram_bytes"] > 0 and r["host"]["shm_bytes"] > 0, "CPU, RAM, shm")
    check(
        r["config"]["settings"]["seed"] == {"value": 11, "source": "environment LOCKSTEP_SEED"},
        "resolved config with sources",
    )
    check(
        r["config"]["settings"]["staging_chunk_bytes"]
        == {"value": 65536, "source": "environment LOCKSTEP_STAGING_CHUNK_BYTES"},
        "every setting in the JSON",
    )
    check(
        r["config"]["settings"]["watchdog_host"]["value"] is None and "cuda_aware" in r["config"]["settings"],
        "unset settings are null",
    )
    check(
        all(k in r["environment"] for k in ("LOCKSTEP_SEED", "SLURM_JOB_ID", "PMIX_TEST", "OMPI_TEST")),
        "LOCKSTEP_*, OMPI_*, PMI*, SLURM_* variables",
    )
    check("HOME" not in r["environment"], "other variables are left out")
    p = run([lockstep, "env"], env)
    for field in (
        "lockstep:",
        "Kernel:",
        "Compiler:",
        "MPI library:",
        "MPI CUDA-aware:",
        "CUDA runtime:",
        "CUDA driver:",
        "GPUs:",
        "CPU:",
        "RAM:",
        "/dev/shm:",
        "### Config",
        "LOCKSTEP_SEED=11",
    ):
        check(field in p.stdout, f"Markdown report has {field}")
    check("\033[" not in p.stdout, "no colour when stdout is not a terminal")


def case_env_all_ranks(lockstep, child, tmp, np):
    p = run([lockstep, "launch", "-n", np, "--", lockstep, "env", "--all-ranks", "--json"])
    r = json.loads(p.stdout)
    check(p.returncode == 0 and len(r["ranks"]) == int(np), f"every one of {np} reports gathered")
    check([x["identity"]["rank"] for x in r["ranks"]] == list(range(int(np))), "reports in rank order")
    check(all(d["expected"] for d in r["differences"]), "ranks of one machine differ only in per-rank fields")
    p = run([lockstep, "launch", "-n", np, "--", lockstep, "env", "--all-ranks"])
    check(
        p.returncode == 0 and "## Differences between ranks" in p.stdout and "None" in p.stdout,
        "Markdown: the differences section says none",
    )
    if np != "2":
        return

    # Two ranks with the variables a Slurm node gives (MPMD: each rank its own environment). Per-node values may
    # differ; a job-wide one may not. (The PMIx server's own variables cannot be changed here: MPI_Init reads them.)
    def mpmd(job_name_0, job_name_1):
        ranks = []
        for node, gtids, job_name in (("n1", "0", job_name_0), ("n2", "1", job_name_1)):
            ranks += [
                ":",
                "-n",
                "1",
                "env",
                f"SLURMD_NODENAME={node}",
                f"SLURM_GTIDS={gtids}",
                f"SLURM_TOPOLOGY_ADDR={node}",
                f"SLURM_JOB_NAME={job_name}",
                lockstep,
                "env",
                "--all-ranks",
                "--json",
            ]
        return run(["mpirun"] + ranks[1:])

    p = mpmd("train", "train")
    r = json.loads(p.stdout)
    scopes = {d["path"]: d["scope"] for d in r["differences"]}
    check(p.returncode == 0, "per-node values that differ are no problem (exit 0)")
    check(
        scopes.get("environment.SLURMD_NODENAME") == "node"
        and scopes.get("environment.SLURM_GTIDS") == "node"
        and scopes.get("environment.SLURM_TOPOLOGY_ADDR") == "node",
        f"they are per-node fields: {scopes}",
    )
    check(all(d["expected"] == (d["scope"] != "job") for d in r["differences"]), "expected means not job-wide")
    p = mpmd("train", "other")
    r = json.loads(p.stdout)
    scopes = {d["path"]: d["scope"] for d in r["differences"]}
    check(
        p.returncode == 1 and scopes.get("environment.SLURM_JOB_NAME") == "job",
        "a job-wide value that differs is a problem (exit 1)",
    )
    p = run(
        ["mpirun"]
        + [
            "-n",
            "1",
            "env",
            "SLURMD_NODENAME=n1",
            "SLURM_JOB_NAME=a",
            lockstep,
            "env",
            "--all-ranks",
            ":",
            "-n",
            "1",
            "env",
            "SLURMD_NODENAME=n2",
            "SLURM_JOB_NAME=b",
            lockstep,
            "env",
            "--all-ranks",
        ]
    )
    check(
        p.returncode == 1 and "## Per-node fields" in p.stdout and "**environment.SLURM_JOB_NAME**" in p.stdout,
        "Markdown: the job-wide difference is listed apart from the per-node fields",
    )


def case_hints(lockstep, child, tmp, _):
    env = without_slurm(os.environ.copy())
    # The program is looked up before any launcher starts: a shell's exit statuses, one line, no launcher banner.
    p = run([lockstep, "launch", "--", "./lockstep-no-such-program"], env)
    check(
        p.returncode == 127
        and "'./lockstep-no-such-program' does not exist" in p.stderr
        and "Open MPI" not in p.stderr
        and "mpirun" not in p.stderr,
        "a missing program: exit 127, named, nothing started",
    )
    p = run([lockstep, "launch", "-n", "2", "lockstep-no-such-program"], env)
    check(p.returncode == 127 and "not found on PATH" in p.stderr, "a name not on PATH: exit 127")
    plain = write(os.path.join(tmp, "plain.sh"), "#!/bin/sh\nexit 0\n")
    p = run([lockstep, "launch", plain], env)
    check(p.returncode == 126 and "not executable" in p.stderr, "a file that is not executable: exit 126")
    p = run([lockstep, "launch", tmp], env)
    check(p.returncode == 126 and "directory" in p.stderr, "a directory: exit 126")
    p = run([lockstep, "launch", "--dry-run", "--", "./lockstep-no-such-program"], env)
    check(p.returncode == 0 and "warning" in p.stderr, "--dry-run only warns about a missing program")

    # More ranks than cores, without Open MPI's own permission from the test environment.
    strict = {k: v for k, v in env.items() if k != "OMPI_MCA_rmaps_base_oversubscribe"}
    many = str((os.cpu_count() or 1) + 1)
    p = run([lockstep, "launch", "-n", many, "--", child], strict)
    check(
        p.returncode != 0
        and "lockstep launch: there are fewer slots than the " + many in p.stderr
        and "--oversubscribe" in p.stderr.splitlines()[-1],
        f"-n {many} on {os.cpu_count()} cores: the hint names " "--oversubscribe",
    )
    hostfile = write(os.path.join(tmp, "one-slot"), "localhost slots=1\n")
    p = run([lockstep, "launch", "-n", "2", "--hostfile", hostfile, "--", child], strict)
    check(
        p.returncode != 0 and "fewer slots than the 2 processes" in p.stderr, "a hostfile's slots=1 and -n 2: the hint"
    )
    p = run([lockstep, "launch", "-n", "2", "--hostfile", hostfile, "--oversubscribe", "--", child], strict)
    check(p.returncode == 0 and len(child_lines(p.stdout)) == 2, "--oversubscribe starts 2 ranks on one slot")
    p = run([lockstep, "launch", "-n", "1", "--", child, "--exit", "4"], strict)
    check(p.returncode == 4 and "lockstep launch:" not in p.stderr, "a program's own failure gets no hint")


def case_torchrun(lockstep, child, tmp, np):
    """A script written for torchrun (RANK, LOCAL_RANK, ..., init_process_group("gloo") from env://) runs unchanged."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torchrun_style.py")
    python = "/usr/bin/python3"
    if subprocess.run([python, "-c", "import torch"], capture_output=True).returncode != 0:
        print(f"skipped: {python} cannot import torch")
        sys.exit(77)
    # A clean environment: none of torchrun's variables, no LOCKSTEP_* setting, no Slurm allocation.
    clean = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR") or k.startswith("OMPI_")}
    launch = [lockstep, "launch", "-n", np] + (["--oversubscribe"] if np != "2" else [])
    p = run(launch + ["--", python, script], clean, timeout=150)
    passed = sorted(line for line in p.stdout.splitlines() if line.startswith("PASS"))
    check(
        p.returncode == 0 and passed == [f"PASS rank {r} of {np} MASTER_ADDR=127.0.0.1" for r in range(int(np))],
        f"the torchrun-style script passes on each of {np} ranks",
    )
    # The user's MASTER_PORT is the one the ranks get.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    p = run(launch + ["--", python, script], dict(clean, MASTER_PORT=port, EXPECT_PORT=port), timeout=150)
    check(p.returncode == 0 and p.stdout.count("PASS") == int(np), f"with the user's MASTER_PORT {port}")
    # --no-torch-env: the program sees none of torchrun's variables.
    p = run(launch + ["--no-torch-env", "--", "/bin/sh", "-c", 'echo "rank=[$RANK] master=[$MASTER_ADDR]"'], clean)
    check(
        p.returncode == 0 and p.stdout.count("rank=[] master=[]") == int(np),
        "--no-torch-env: no RANK, no MASTER_ADDR",
    )


def case_selftest(lockstep, child, tmp, np):
    p = run([lockstep, "launch", "-n", np, "--", lockstep, "test"], timeout=240)
    check(p.returncode == 0, f"lockstep test passes on {np} ranks")
    check(f"lockstep test on {np} ranks" in p.stdout and " 0 failed" in p.stdout, "the table is printed once")
    check(p.stdout.count("lockstep test on") == 1, "only the main process prints the table")
    check("debug mode catches a shape mismatch" in p.stdout, "the debug-mode check ran")
    rows = [line.split() for line in p.stdout.splitlines() if line.startswith(("allreduce sum ", "broadcast "))]
    check(rows and any(r[-2] == "cpu" for r in rows), f"the rows name their device, cpu among them ({rows[:2]})")
    # Without a CUDA device (none on a machine without /dev/nvidia0), one line says so and no row used CUDA.
    if not os.path.exists("/dev/nvidia0"):
        check(p.stdout.count("cuda: skipped (no CUDA device)") == 1, "the CUDA skip is said once")
        check(not any(r[-2] == "cuda" for r in rows), "no row ran on CUDA without a device")
    elif "cuda: skipped" not in p.stdout:
        check(any(r[-2] == "cuda" for r in rows), "with a CUDA device, the checks ran on CUDA tensors too")


def case_hydra(lockstep, child, tmp, np):
    """A build against MPICH: launch picks MPICH's Hydra launcher by itself, and Hydra's flags reach every rank."""
    env = without_slurm(dict(os.environ, LOCKSTEP_SEED="11"))
    p = run([lockstep, "launch", "--dry-run", "--json", "-n", np, child], env)
    plan = json.loads(p.stdout)
    hydra = plan["command"][0]
    check(
        p.returncode == 0 and plan["launcher"] == "hydra" and "HYDRA" in plan["detected_from"],
        f"auto: the launcher of the MPI lockstep is built against says it is Hydra ({plan['detected_from']})",
    )
    check(hydra != "mpirun" and plan["command"][1:3] == ["-n", np], f"and runs it: {plan['command'][:3]}")
    genv = ["-genv", "LOCKSTEP_SEED", "11"]
    cmd = plan["command"]
    check(any(cmd[i : i + 3] == genv for i in range(len(cmd))), "LOCKSTEP_* travel as -genv NAME VALUE")

    def ranks_agree(p, what, **expected):
        ranks = child_lines(p.stdout)
        check(p.returncode == 0 and [r["rank"] for r in ranks] == list(range(int(np))), f"{what}: {np} ranks ran")
        for r in ranks:
            seen = {k: r[k] for k in expected}
            check(
                seen == expected and r["mpi_size"] == int(np) and r["allreduce_sum"] == sum(range(int(np))),
                f"{what}: rank {r['rank']} sees {seen} and sums the ranks over MPI",
            )

    # Real jobs: an MPI allreduce on every rank, the flags' values on every rank, the caller's LOCKSTEP_* too.
    flags = ["--debug", "--log-level", "info", "--timeout", "12"]
    p = run([lockstep, "launch", "-n", np] + flags + ["--", child, "--allreduce"], env)
    ranks_agree(p, "auto", debug=True, log_level="INFO", timeout=12, seed=11)
    # Named: --launcher hydra with the launcher's path, a hostfile in Hydra's form and ranks per node.
    hosts = write(os.path.join(tmp, "hosts"), f"# this node\nlocalhost:{np}\n")
    named = [lockstep, "launch", "--launcher", "hydra", "--mpirun", shutil.which(hydra) or hydra]
    placed = named + ["-n", np, "--hostfile", hosts, "--npernode", np, "--no-debug", child, "--allreduce"]
    command = json.loads(run(placed[:2] + ["--dry-run", "--json"] + placed[2:], env).stdout)["command"]
    check(command[1:7] == ["-n", np, "-f", hosts, "-ppn", np], f"the hostfile and ranks per node: {command[:7]}")
    ranks_agree(run(placed, env), "hostfile", debug=False, seed=11)
    p = run(named + ["-n", np, "--", child, "--exit", "3"], env)
    check(p.returncode == 3, f"a rank exiting 3 makes launch exit 3 under Hydra (got {p.returncode})")
    # Hydra exits 9 for a rank that SIGKILL ended, and says so on its stdout: launch gives 128+9, as with Open MPI.
    # One rank: when several die at once, MPICH 4.0's Hydra may trip over its own assertion (control_cb) and exit 255.
    p = run(named + ["-n", "1", "--", child, "--signal", "9"], env)
    check(p.returncode == 128 + 9, f"a rank killed by SIGKILL makes launch exit 137 under Hydra (got {p.returncode})")
    p = run(named + ["-n", np, "--", child, "--exit", "9"], env)
    check(p.returncode == 9, f"and a rank exiting 9 itself exit 9 (got {p.returncode})")


def main():
    lockstep, child, case = sys.argv[1], sys.argv[2], sys.argv[3]
    np = sys.argv[4] if len(sys.argv) > 4 else "1"
    # The checks expect exactly the LOCKSTEP_* settings each case makes: none may come from the caller's shell (the
    # launcher forwards every LOCKSTEP_* variable, e.g. a LOCKSTEP_BUILD_DIR set for tools/run-tests.sh).
    for name in [k for k in os.environ if k.startswith("LOCKSTEP_") and k != "LOCKSTEP_CONFIG_FILE"]:
        del os.environ[name]
    with tempfile.TemporaryDirectory() as tmp:
        globals()["case_" + case](lockstep, child, tmp, np)
    print(f"{len(FAILURES)} failed" if FAILURES else "all checks passed")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
