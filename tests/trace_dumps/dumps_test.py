#!/usr/bin/env python3
"""The flight recorder's dumps, end to end: trace files written at exit, on demand, on a hang and on a collective
error, and `lockstep trace`'s answers to bad input.

Usage: dumps_test.py CASE LOCKSTEP MPIRUN PROGRAM NP [VALIDATOR]
CASE: exit (`lockstep launch --trace FILE` of a job with a straggler), demand (`lockstep trace` of a running job; the
channel's TRACE and PEERS verbs with and without the key), hang (the watchdog's report names the file), mismatch (a
debug-mode error names the file), bad_input (no job, an unknown job). PROGRAM is trace_job; VALIDATOR, when given, is
tests/trace/validate_trace.py, run on every file written. Every job runs in a temporary folder with its own
XDG_RUNTIME_DIR (the job directory) and LOCKSTEP_TRACE_DIR; every child has a time limit.
"""
import glob
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time

FAILURES = []
JOB_LIMIT = 90


def check(ok, what):
    print(("ok:   " if ok else "FAIL: ") + what, flush=True)
    if not ok:
        FAILURES.append(what)


def environment(tmp, **extra):
    env = dict(os.environ)
    env.update(
        XDG_RUNTIME_DIR=os.path.join(tmp, "run"),
        LOCKSTEP_TRACE_DIR=os.path.join(tmp, "traces"),
        LOCKSTEP_PYTHON="/usr/bin/python3",
    )
    env.pop("LOCKSTEP_TRACE_FILE", None)
    env.pop("LOCKSTEP_JOB_ID", None)
    os.makedirs(env["XDG_RUNTIME_DIR"], mode=0o700, exist_ok=True)
    env.update(extra)
    return env


def run(args, env, limit=JOB_LIMIT):
    proc = subprocess.Popen(
        args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        print(out + err)
        check(False, f"{' '.join(args[:4])}... ended within {limit} s")
    return proc.returncode, out, err


def load(path):
    with open(path) as f:
        return json.load(f)


def check_trace(path, np, validator, straggler=None):
    """The file is a merged trace with every rank, and passes the validator."""
    check(os.path.isfile(path), f"the trace {path} was written")
    check(os.path.isfile(path + ".txt"), "its summary was written beside it")
    if not os.path.isfile(path):
        return None
    trace = load(path)
    check("traceEvents" in trace and "lockstep" in trace, "the file is a lockstep Chrome trace")
    ranks = sorted(r.get("rank") for r in trace.get("lockstep", {}).get("ranks", []))
    check(ranks == list(range(np)), f"every rank is present (got {ranks})")
    check(trace.get("lockstep", {}).get("missing_ranks", []) == [], "no rank is missing")
    if validator:
        args = ["/usr/bin/python3", validator, path, "--ranks", str(np)]
        if straggler is not None:
            args += ["--straggler", str(straggler)]
        code, out, err = run(args, dict(os.environ), limit=60)
        print(out + err)
        check(code == 0, f"validate_trace.py {' '.join(args[3:])} passes")
    return trace


def case_exit(lockstep, mpirun, program, np, validator):
    late = np - 1
    with tempfile.TemporaryDirectory() as tmp:
        env = environment(tmp)
        file = os.path.join(tmp, "straggler.json")
        code, out, err = run(
            [
                lockstep,
                "launch",
                "-n",
                str(np),
                "--oversubscribe",
                "--trace",
                file,
                "--",
                program,
                "straggler",
                str(late),
            ],
            env,
        )
        print(out + err)
        check(code == 0, f"the job exits 0 (got {code})")
        trace = check_trace(file, np, validator, straggler=late)
        if trace is not None:
            summary = open(file + ".txt").read()
            print(summary)
            check(
                re.search(rf"\brank {late} was last in \d+ of \d+ collectives", summary) is not None,
                f"the summary names rank {late} as the last to arrive",
            )
            check(trace["lockstep"].get("reason") == "exit", "the reason is exit")
            # The picture, through the installed renderer (tools/trace/trace_show.py).
            png = os.path.join(tmp, "straggler-picture.png")
            code, out, err = run([lockstep, "trace", "show", file, "-o", png, "--calls", "10"], env, limit=120)
            print(out + err)
            check(code == 0 and os.path.getsize(png) > 0 if os.path.exists(png) else False, "trace show draws a PNG")
            whole = os.path.join(tmp, "whole.png")
            code, out, err = run(
                [lockstep, "trace", "show", file, "-o", whole, "--whole-run", "--title", "straggler"], env, limit=120
            )
            check(code == 0 and os.path.exists(whole) and os.path.getsize(whole) > 0, "trace show --whole-run draws")
            code, out, err = run([lockstep, "trace", "show", file + ".txt"], env, limit=120)
            check(code == 2, f"trace show of a file that is no trace exits 2 (got {code})")
        # Relative --trace: made absolute by launch, so the file lands where launch ran.
        code, out, err = run(
            [
                lockstep,
                "launch",
                "-n",
                "2",
                "--oversubscribe",
                "--trace",
                "rel.json",
                "--dry-run",
                "--",
                program,
                "straggler",
            ],
            env,
        )
        check(
            f"LOCKSTEP_TRACE_FILE={os.path.join(os.getcwd(), 'rel.json')}" in out,
            "launch --trace forwards an absolute LOCKSTEP_TRACE_FILE",
        )


def ask(endpoint, line, limit=10.0):
    """Sends one request line; returns what the server sent before it closed or the limit passed."""
    with socket.create_connection((endpoint["host"], endpoint["port"]), timeout=limit) as s:
        s.sendall(line.encode())
        got = b""
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(1 << 16)
            except socket.timeout:
                break
            if not chunk:
                break
            got += chunk
            if got.endswith(b"\n"):
                break
        return got.decode(errors="replace")


def ask_slowly(endpoint, line, pause=1.5):
    """Asks with a small receive buffer and reads only after `pause`: the server must keep a large answer going past
    its deadline for requests (500 ms)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.settimeout(10)
    with s:
        s.connect((endpoint["host"], endpoint["port"]))
        s.sendall(line.encode())
        time.sleep(pause)
        got = b""
        while not got.endswith(b"\n"):
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
        return got.decode(errors="replace")


def case_demand(lockstep, mpirun, program, np, validator):
    with tempfile.TemporaryDirectory() as tmp:
        env = environment(tmp)
        # The default ring (the sanitizer phase keeps fewer calls): a TRACE answer that outgrows the sockets' buffers.
        env["LOCKSTEP_TRACE_CALLS"] = "2048"
        stop_dir = os.path.join(tmp, "flags")
        os.makedirs(stop_dir)
        job = subprocess.Popen(
            [lockstep, "launch", "-n", str(np), "--oversubscribe", "--", program, "loop", stop_dir],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 60
            while not os.path.exists(os.path.join(stop_dir, "ready")) and time.monotonic() < deadline:
                time.sleep(0.1)
            check(os.path.exists(os.path.join(stop_dir, "ready")), "the job started its loop")
            jobs_root = os.path.join(env["XDG_RUNTIME_DIR"], f"lockstep-{os.getuid()}", "jobs")
            while time.monotonic() < deadline:  # every rank publishes itself when its watchdog starts
                if len(glob.glob(os.path.join(jobs_root, "*", "rank-*.json"))) == np:
                    break
                time.sleep(0.1)
            files = glob.glob(os.path.join(jobs_root, "*", "rank-*.json"))
            check(len(files) == np, f"every rank published its endpoint ({len(files)} of {np})")
            for path in [os.path.dirname(jobs_root), jobs_root] + [os.path.dirname(f) for f in files[:1]]:
                check(os.stat(path).st_mode & 0o777 == 0o700, f"{path} is 0700")
            for path in files:
                check(os.stat(path).st_mode & 0o777 == 0o600, f"{os.path.basename(path)} is 0600")
            job_id = os.path.basename(os.path.dirname(files[0])) if files else "?"

            code, out, err = run([lockstep, "trace", "list"], env, limit=30)
            print(out + err)
            check(code == 0 and job_id in out, "lockstep trace list names the job")

            file = os.path.join(tmp, "demand.json")
            code, out, err = run([lockstep, "trace", "-o", file, "--job", job_id, "--text"], env, limit=60)
            print(out + err)
            check(code == 0, f"lockstep trace exits 0 (got {code})")
            check(file in out and "ui.perfetto.dev" in out, "it names the file and how to open it")
            trace = check_trace(file, np, validator)
            if trace is not None:
                check(trace["lockstep"].get("reason") == "demand", "the reason is demand")
            # Without --job and -o: the only job, into LOCKSTEP_TRACE_DIR.
            code, out, err = run([lockstep, "trace"], env, limit=60)
            written = glob.glob(os.path.join(env["LOCKSTEP_TRACE_DIR"], "lockstep-trace-demand-*.json"))
            check(code == 0 and len(written) == 1, "without options: the only job, a file in LOCKSTEP_TRACE_DIR")
            # An output that cannot be written: named, exit 1.
            bad = os.path.join(tmp, "no-such-folder", "x.json")
            code, out, err = run([lockstep, "trace", "-o", bad], env, limit=60)
            print(out + err)
            check(code == 1 and bad in err, "an unwritable output is named, exit 1")

            # The channel: TRACE and PEERS with the key; nothing without it.
            endpoint = load(files[0]) if files else {}
            if endpoint:
                answer = ask(endpoint, f"TRACE {endpoint['key']}\n")
                snapshot = json.loads(answer) if answer.strip() else {}
                check("calls" in snapshot and "clock_us" in snapshot, "TRACE with the key: a snapshot and clock_us")
                until = time.monotonic() + 30  # a ring of a few hundred calls: more than the sockets buffer
                while len(ask(endpoint, f"TRACE {endpoint['key']}\n")) < 150000 and time.monotonic() < until:
                    time.sleep(0.5)
                slow = ask_slowly(endpoint, f"TRACE {endpoint['key']}\n")
                check(
                    len(slow) > 150000 and slow.endswith("\n") and "calls" in json.loads(slow),
                    f"a large TRACE answer ({len(slow)} bytes) read slowly arrives whole",
                )
                answer = ask(endpoint, f"PEERS {endpoint['key']}\n")
                peers = json.loads(answer).get("peers", []) if answer.strip() else []
                check(
                    sorted(p["world_rank"] for p in peers) == list(range(np)) and all("key" in p for p in peers),
                    "PEERS with the key: every rank's endpoint and key",
                )
                wrong = "0" * len(endpoint["key"])
                check(ask(endpoint, f"TRACE {wrong}\n", limit=3) == "", "TRACE with a wrong key: no answer")
                check(ask(endpoint, f"PEERS {wrong}\n", limit=3) == "", "PEERS with a wrong key: no answer")
                check(ask(endpoint, "TRACE\n", limit=3) == "", "TRACE without a key: no answer")
        finally:
            open(os.path.join(stop_dir, "stop"), "w").close()
            try:
                out, err = job.communicate(timeout=JOB_LIMIT)
            except subprocess.TimeoutExpired:
                os.killpg(job.pid, signal.SIGKILL)
                out, err = job.communicate()
        print(out + err)
        check(job.returncode == 0, f"the job exits 0 after the dumps (got {job.returncode})")
        check(out.count("results ok") == np, "every rank's results are right")
        jobs_root = os.path.join(env["XDG_RUNTIME_DIR"], f"lockstep-{os.getuid()}", "jobs")
        check(glob.glob(os.path.join(jobs_root, "*", "rank-*.json")) == [], "the ranks removed their files at exit")


def case_hang(lockstep, mpirun, program, np, validator):
    with tempfile.TemporaryDirectory() as tmp:
        env = environment(tmp, LOCKSTEP_TIMEOUT="3")
        code, out, err = run([mpirun, "-n", str(np), "--oversubscribe", program, "hang"], env)
        print(out + err)
        text = out + err
        check(code != 0, f"the hung job exits non-zero (got {code})")
        m = re.search(r"Trace of every process's last calls: (\S+\.json)", text)
        check(m is not None, "the report names the trace file")
        check("ui.perfetto.dev" in text and "lockstep trace show" in text, "and says how to open it")
        if m:
            ending = text.find("Ending the job")
            check(ending < 0 or m.start() < ending, "the trace is named before the job ends")
            trace = check_trace(m.group(1), np, validator)
            if trace is not None:
                outcomes = [c.get("outcome") for r in trace["lockstep"]["ranks"] for c in r.get("calls", [])]
                check("in_flight" in outcomes, "the call in flight is marked in_flight")
                check(trace["lockstep"].get("reason") == "hang", "the reason is hang")
                stacks = trace["lockstep"].get("stacks") or {}
                check(
                    sorted(stacks) == [str(r) for r in range(np)]
                    and all(s.get("native", {}).get("frames") for s in stacks.values()),
                    f"the file keeps the report's stacks, every rank's native frames ({sorted(stacks)})",
                )


def case_mismatch(lockstep, mpirun, program, np, validator):
    with tempfile.TemporaryDirectory() as tmp:
        env = environment(tmp, LOCKSTEP_DEBUG_MODE="1")
        code, out, err = run([mpirun, "-n", str(np), "--oversubscribe", program, "mismatch"], env)
        print(out + err)
        check(code == 0, f"the job exits 0 (got {code})")
        messages = re.findall(r"^rank \d+ message 0: (.*)$", out, re.M)
        check(len(messages) == np, f"every rank caught the SignatureMismatchError ({len(messages)} of {np})")
        check(len(set(messages)) == 1, "every rank's message is the same")
        again = re.findall(r"^rank \d+ message 1: (.*)$", out, re.M)
        check(len(again) == np and len(set(again)) == 1, "the second mismatch too, the same on every rank")
        check(all("Trace of every process" not in m for m in again), "the second error on it writes no trace")
        written = [f for f in os.listdir(env["LOCKSTEP_TRACE_DIR"]) if f.endswith(".json")]
        check(len(written) == 1, f"one trace file for the communicator's errors ({written})")
        m = re.search(r"Trace of every process's last calls, written by process 0: (\S+\.json)", out)
        check(m is not None, "the message names the trace file")
        if m:
            path = m.group(1)
            if not os.path.isabs(path):
                path = os.path.join(env["LOCKSTEP_TRACE_DIR"], os.path.basename(path))
            trace = check_trace(path, np, validator)
            if trace is not None:
                check(trace["lockstep"].get("reason") == "error", "the reason is error")


def case_bad_input(lockstep, mpirun, program, np, validator):
    with tempfile.TemporaryDirectory() as tmp:
        env = environment(tmp)
        code, out, err = run([lockstep, "trace"], env, limit=30)
        print(out + err)
        check(code == 1 and "no running lockstep job" in err, "no job: said, exit 1")
        code, out, err = run([lockstep, "trace", "--job", "nope"], env, limit=30)
        print(out + err)
        check(code == 1 and "no running job 'nope'" in err, "an unknown job: named, exit 1")
        code, out, err = run([lockstep, "trace", "list"], env, limit=30)
        check(code == 0 and "No running lockstep job" in out, "list without jobs says so")
        # A stale job (its process gone) is removed, not offered.
        stale = os.path.join(env["XDG_RUNTIME_DIR"], f"lockstep-{os.getuid()}", "jobs", "old")
        os.makedirs(stale, mode=0o700)
        os.chmod(os.path.dirname(os.path.dirname(stale)), 0o700)
        os.chmod(os.path.dirname(stale), 0o700)
        dead = subprocess.Popen(["true"])
        dead.wait()
        with open(os.path.join(stale, "rank-0.json"), "w") as f:
            json.dump({"host": "127.0.0.1", "port": 1, "pid": dead.pid, "world_rank": 0, "key": "00" * 16}, f)
        code, out, err = run([lockstep, "trace"], env, limit=30)
        check(
            code == 1 and "no running lockstep job" in err and not os.path.exists(stale),
            "a stale job directory is removed",
        )
        code, out, err = run([lockstep, "trace", "bogus"], env, limit=30)
        check(code == 2, "an unknown action is a usage error")
        code, out, err = run([lockstep, "trace", "show"], env, limit=30)
        check(code == 2, "show without a file is a usage error")


def main():
    case, lockstep, mpirun, program, np = sys.argv[1:6]
    validator = sys.argv[6] if len(sys.argv) > 6 else None
    cases = {
        "exit": case_exit,
        "demand": case_demand,
        "hang": case_hang,
        "mismatch": case_mismatch,
        "bad_input": case_bad_input,
    }
    cases[case](lockstep, mpirun, program, int(np), validator)
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
