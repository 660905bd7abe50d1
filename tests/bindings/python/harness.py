"""What the Python test programs share: checks that name what failed, and a main() that ends the whole job when one
rank fails (an assertion on one rank would otherwise leave the others waiting in their next collective)."""
import inspect
import os
import signal
import subprocess
import sys
import time
import traceback


def caller_line() -> int:
    """The line number of the caller's current line."""
    return inspect.currentframe().f_back.f_lineno


def expect_raises(exception_class, call, *args, **kwargs):
    """Calls call(*args, **kwargs) and returns the exception it raised, which must be an exception_class."""
    try:
        call(*args, **kwargs)
    except exception_class as error:
        return error
    except BaseException as error:
        raise AssertionError(f"expected {exception_class.__name__}, got {type(error).__name__}: {error}") from error
    raise AssertionError(f"expected {exception_class.__name__}, nothing was raised")


class raises:
    """`with raises(cls) as caught:` runs the block, which must raise a cls; caught.error is the exception. Unlike
    expect_raises, the call stays in the caller's own frame (for checks of the call site lockstep reports)."""

    def __init__(self, exception_class):
        self.exception_class = exception_class
        self.error = None

    def __enter__(self):
        return self

    def __exit__(self, kind, error, tb):
        if kind is None:
            raise AssertionError(f"expected {self.exception_class.__name__}, nothing was raised")
        if not issubclass(kind, self.exception_class):
            raise AssertionError(f"expected {self.exception_class.__name__}, got {kind.__name__}: {error}") from error
        self.error = error
        return True


def skip(name, why):
    """Ends this rank after printing "SKIP name rank r/n: why"; run_job.py reports the job as skipped (meson's 77) when
    every rank did so. The rank exits 0, since mpirun would end the other ranks before they print at a non-zero exit.
    Call it before lockstep starts: every rank must decide the same way."""
    rank = os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0"))
    size = os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("PMI_SIZE", "1"))
    sys.stdout.write(f"SKIP {name} rank {rank}/{size}: {why}\n")
    sys.stdout.flush()
    sys.exit(0)


def run_checks(comm, checks):
    """Runs each check(comm, rank, size) in turn, with a barrier after each; rank 0 prints "ok: <check>"."""
    r, n = comm.rank, comm.size
    for check in checks:
        check(comm, r, n)
        comm.barrier()
        if r == 0:
            print(f"ok: {check.__name__}", flush=True)
    return r, n


def run(name, main):
    """Runs main() (which returns (rank, size)) and prints "PASS name rank r/n"; on any exception prints it and ends
    the job at once, with lockstep's abort when lockstep is running."""
    try:
        rank, size = main()
    except BaseException:  # noqa: B902 - every failure must end the job
        sys.stdout.flush()
        print(f"FAIL {name} rank {os.environ.get('OMPI_COMM_WORLD_RANK', '?')}:", file=sys.stderr)
        traceback.print_exc()
        sys.stderr.flush()
        lockstep = sys.modules.get("lockstep")
        if lockstep is not None and lockstep.is_initialized() and not lockstep._lockstep.is_finalized():
            try:
                lockstep.Communicator.world().abort(1, f"{name} failed")
            except BaseException:
                pass
        os._exit(1)
    # One write: ranks' lines reach mpirun's output separately and must not be split by another rank's line.
    sys.stdout.write(f"PASS {name} rank {rank}/{size}\n")
    sys.stdout.flush()


def run_launcher(command, env, limit):
    """Runs a launcher's command line in its own session and returns (exit status, stdout, stderr, seconds), after
    printing the command and both outputs; None when it still ran after `limit` seconds (then it is killed with its
    whole session, and the outputs are printed too)."""
    print("$ " + " ".join(command), flush=True)
    start = time.monotonic()
    proc = subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        print(out)
        print(err)
        return None
    elapsed = time.monotonic() - start
    print(out)
    print("---- stderr ----")
    print(err)
    return proc.returncode, out, err, elapsed
