"""Bad arguments to every kind of function of the package: an integer out of its C type's range is an OverflowError, a
value of the wrong type a TypeError, both naming the function and the argument (never pybind11's "Unable to cast"
RuntimeError or its "incompatible function arguments"); an output of another dtype than its input is a DTypeError; in
debug mode, a collective's argument that one rank cannot convert makes every rank raise CallRejectedError instead of
leaving the others waiting. The exception classes take their status codes from the C library.

Run by run_job.py under mpirun -n 2.
"""
import numpy as np

import lockstep
from harness import expect_raises, run


def refused(exception_class, function, argument, call, *args, **kwargs):
    """call(*args, **kwargs) must raise exception_class (and not as a lockstep.Error unless asked for), with a message
    that names the function and the argument."""
    error = expect_raises(exception_class, call, *args, **kwargs)
    text = str(error)
    assert function in text and argument in text, f"{function}/{argument} not named in: {text}"
    assert "Unable to cast" not in text and "incompatible function arguments" not in text, text
    return error


def check_tensor_arguments():
    refused(OverflowError, "lockstep.empty", "shape", lockstep.empty, 2**63)
    refused(OverflowError, "lockstep.empty", "shape[1]", lockstep.empty, (2, -(2**63) - 1))
    refused(TypeError, "lockstep.empty", "shape", lockstep.empty, "three")
    refused(TypeError, "lockstep.empty", "shape", lockstep.empty, 2.5)
    refused(TypeError, "lockstep.empty", "shape", lockstep.empty, None)
    refused(TypeError, "lockstep.empty", "shape[1]", lockstep.empty, [2, "x"])
    refused(TypeError, "lockstep.empty", "device", lockstep.empty, (2,), "float32", 3)
    assert lockstep.empty(np.int64(3)).shape == (3,)
    assert lockstep.empty(np.array([2, 3]).tolist(), np.float64).shape == (2, 3)
    assert lockstep.empty((np.int32(2), 1)).shape == (2, 1)
    refused(TypeError, "lockstep.from_dlpack", "copy", lockstep.from_dlpack, np.ones(2), copy="yes")
    t = lockstep.empty((2,))
    refused(OverflowError, "__dlpack__", "max_version", t.__dlpack__, max_version=(2**40, 0))
    refused(TypeError, "__dlpack__", "copy", t.__dlpack__, copy="no")
    refused(TypeError, "status_string", "status", lockstep._lockstep.status_string, "x")
    refused(OverflowError, "status_string", "status", lockstep._lockstep.status_string, 2**40)


def check_runtime_arguments():
    refused(TypeError, "lockstep.init", "debug", lockstep.init, debug="yes")
    refused(TypeError, "lockstep.init", "timeout", lockstep.init, timeout="soon")
    refused(OverflowError, "lockstep.set_seed", "seed", lockstep.set_seed, -1)
    refused(OverflowError, "lockstep.set_seed", "seed", lockstep.set_seed, 2**64)
    refused(TypeError, "lockstep.set_seed", "seed", lockstep.set_seed, "1")
    refused(TypeError, "lockstep.set_seed", "device_specific", lockstep.set_seed, 1, device_specific="yes")
    lockstep.set_seed(2**64 - 1, device_specific=np.bool_(True))
    refused(TypeError, "lockstep.log", "level", lockstep.log, "m", level=[1])
    refused(OverflowError, "lockstep.log", "level", lockstep.log, "m", level=2**80)
    refused(TypeError, "lockstep.log", "scope", lockstep.log, "m", scope=3)
    refused(TypeError, "lockstep.log", "logger", lockstep.log, "m", logger=3)
    refused(TypeError, "lockstep.set_trigger", "comm", lockstep.set_trigger, "world")
    refused(TypeError, "lockstep.check_trigger", "comm", lockstep.check_trigger, 5)
    search = lockstep.find_executable_batch_size(lambda size: size, starting_batch_size="big")
    refused(TypeError, "lockstep.find_executable_batch_size", "starting_batch_size", search)
    search = lockstep.find_executable_batch_size(lambda size: size, factor="half")
    refused(TypeError, "lockstep.find_executable_batch_size", "factor", search)
    search = lockstep.find_executable_batch_size(lambda size: size, minimum=2**64)
    refused(OverflowError, "lockstep.find_executable_batch_size", "minimum", search)


def check_communicator_arguments(comm):
    r, n = comm.rank, comm.size
    x = np.ones(4, np.float32)
    refused(TypeError, "Communicator.split", "color", comm.split, "a")
    refused(OverflowError, "Communicator.split", "color", comm.split, 2**40)
    refused(TypeError, "Communicator.split", "key", comm.split, 0, key=1.5)
    refused(TypeError, "Communicator.create_group", "ranks", comm.create_group, "01")
    refused(OverflowError, "Communicator.create_group", "ranks[1]", comm.create_group, [0, 2**40])
    refused(TypeError, "Communicator.create_group", "tag", comm.create_group, [0, 1], tag="t")
    refused(TypeError, "Communicator.from_fortran", "handle", lockstep.Communicator.from_fortran, "x")
    refused(OverflowError, "Communicator.from_fortran", "handle", lockstep.Communicator.from_fortran, 2**70)
    refused(TypeError, "Communicator.from_fortran", "debug", lockstep.Communicator.from_fortran, 0, debug="on")
    refused(TypeError, "Communicator.from_mpi4py", "comm", lockstep.Communicator.from_mpi4py, 5)
    refused(TypeError, "Communicator.set_step", "step", comm.set_step, "1")
    refused(OverflowError, "Communicator.set_step", "step", comm.set_step, -1)
    refused(TypeError, "Communicator.abort", "code", comm.abort, "x")
    refused(OverflowError, "Communicator.abort", "code", comm.abort, 2**40)
    error = expect_raises(TypeError, setattr, comm, "debug", "yes")
    assert "Communicator.debug" in str(error), error
    # Collectives: every rank passes the same bad argument and raises at once, with no communication.
    refused(TypeError, "Communicator.broadcast", "root", comm.broadcast, x, root="0")
    refused(OverflowError, "Communicator.broadcast", "root", comm.broadcast, x, root=2**31)
    refused(TypeError, "Communicator.reduce", "root", comm.reduce, x, root=1.0)
    refused(TypeError, "Communicator.gather", "root", comm.gather, x, root=None)
    refused(TypeError, "Communicator.scatter", "root", comm.scatter, None, x, root=[0])
    refused(TypeError, "Communicator.allreduce", "op", comm.allreduce, x, op=3)
    refused(TypeError, "Communicator.reduce_scatter", "op", comm.reduce_scatter, np.ones(2 * n, np.float32), op=None)
    refused(TypeError, "Communicator.allreduce", "tag", comm.allreduce, x, tag=5)
    refused(TypeError, "Communicator.allreduce", "stream", comm.allreduce, x, stream="s")
    refused(OverflowError, "Communicator.barrier", "stream", comm.barrier, stream=-1)
    refused(TypeError, "Communicator.allgather", "tag", comm.allgather, x, tag=b"t")
    refused(TypeError, "Communicator.alltoall", "stream", comm.alltoall, np.ones(n, np.float32), stream=1.0)
    refused(TypeError, "Communicator.gather_uneven", "tag", comm.gather_uneven, np.ones((1, 2)), tag=1)
    refused(TypeError, "Communicator.send", "dest", comm.send, x, "1")
    refused(TypeError, "Communicator.send", "name", comm.send, x, 1 - r, name=1)
    refused(OverflowError, "Communicator.recv", "source", comm.recv, x, source=2**40)
    refused(TypeError, "Communicator.recv", "tag", comm.recv, x, 1 - r, tag="0")
    # The communicator is fine afterwards.
    comm.allreduce(x)
    assert x[0] == n, x


def check_output_dtype(comm):
    n = comm.size
    x = np.ones(2 * n, np.float32)
    error = expect_raises(lockstep.DTypeError, comm.allreduce, x, out=np.zeros(2 * n, np.float64))
    assert "float64" in str(error), error
    expect_raises(lockstep.DTypeError, comm.alltoall, x, out=np.zeros(2 * n, np.int64))
    expect_raises(lockstep.DTypeError, comm.reduce, x, out=np.zeros(2 * n, np.float64))
    expect_raises(lockstep.DTypeError, comm.gather, x, out=np.zeros(2 * n * n, np.int32))
    expect_raises(lockstep.ShapeError, comm.allreduce, x, out=np.zeros(2 * n + 1, np.float32))


def check_debug_mode_conversion(comm):
    """One rank's root cannot be converted: in debug mode every rank raises the same CallRejectedError, naming that
    rank's reason, instead of the others waiting in the broadcast."""
    r, n = comm.rank, comm.size
    comm.debug = True
    try:
        x = np.full(3, r, np.int32)
        bad = "0" if r == n - 1 else 0
        error = expect_raises(lockstep.CallRejectedError, comm.broadcast, x, root=bad)
        assert "root" in str(error) and "Communicator.broadcast" in str(error), error
        comm.broadcast(x, root=0)
        assert list(x) == [0, 0, 0], x
    finally:
        comm.debug = False


def check_status_codes():
    """Every code the C library names has its class, and each class's number and name are the library's."""
    names = lockstep._lockstep.STATUS_NAMES
    assert names[0] == "LOCKSTEP_OK" and len(names) >= 20, names
    classes = {cls.status: cls for cls in lockstep.Error.__subclasses__()}
    for code, name in names.items():
        if code == 0:
            continue
        assert code in classes, f"no exception class for {name} ({code})"
        assert classes[code].name == name, (classes[code], name)
        assert lockstep._lockstep.status_string(code) == name
    assert lockstep.ShapeError.status == 2 and lockstep.CallbackError.name == "LOCKSTEP_ERROR_CALLBACK"


def main():
    comm = lockstep.Communicator.world()
    for check in (
        check_tensor_arguments,
        check_runtime_arguments,
        lambda: check_communicator_arguments(comm),
        lambda: check_output_dtype(comm),
        lambda: check_debug_mode_conversion(comm),
        check_status_codes,
    ):
        check()
        comm.barrier()
    return comm.rank, comm.size


if __name__ == "__main__":
    run("arguments", main)
