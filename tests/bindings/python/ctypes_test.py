"""liblockstep_c.so.1 driven through ctypes alone (any FFI can drive it): version, init, the world communicator, rank
and size, a tensor over a ctypes array, an allreduce with checked values, status strings and the last error.

Usage (under mpirun -n 2, by run_job.py): ctypes_test.py PATH/liblockstep_c.so.1
"""
import ctypes
import sys

from harness import run

status_t = ctypes.c_int32
OK, INVALID_ARGUMENT, READ_ONLY = 0, 12, 9
FLOAT64, INT32, DEVICE_CPU, SUM, MAX = 1, 6, 0, 0, 2
TENSOR_READ_ONLY = 1


class Device(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int32), ("index", ctypes.c_int32)]


class CallOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_size_t),
        ("flags", ctypes.c_uint64),
        ("cuda_stream", ctypes.c_void_p),
        ("file", ctypes.c_char_p),
        ("line", ctypes.c_int32),
        ("function", ctypes.c_char_p),
        ("tag", ctypes.c_char_p),
    ]


def load(path):
    lib = ctypes.CDLL(path)
    p = ctypes.c_void_p
    for name, restype, argtypes in [
        ("lockstep_get_version", ctypes.c_int32, [ctypes.POINTER(ctypes.c_int32)] * 3),
        ("lockstep_get_build_info", ctypes.c_char_p, []),
        ("lockstep_status_string", ctypes.c_char_p, [status_t]),
        ("lockstep_last_error", ctypes.c_char_p, []),
        ("lockstep_last_error_status", status_t, []),
        ("lockstep_init_versioned", status_t, [ctypes.c_int32, p, ctypes.POINTER(p)]),
        ("lockstep_is_initialized", ctypes.c_int32, []),
        ("lockstep_finalize", status_t, []),
        ("lockstep_comm_world", status_t, [ctypes.POINTER(p)]),
        ("lockstep_comm_rank", status_t, [p, ctypes.POINTER(ctypes.c_int32)]),
        ("lockstep_comm_size", status_t, [p, ctypes.POINTER(ctypes.c_int32)]),
        ("lockstep_comm_free", status_t, [p]),
        (
            "lockstep_tensor_wrap",
            status_t,
            [
                p,
                ctypes.POINTER(ctypes.c_int64),
                ctypes.c_int32,
                ctypes.c_int32,
                Device,
                ctypes.c_uint64,
                p,
                p,
                ctypes.POINTER(p),
            ],
        ),
        ("lockstep_tensor_release", status_t, [p]),
        ("lockstep_tensor_data", status_t, [p, ctypes.POINTER(p)]),
        ("lockstep_allreduce", status_t, [p, p, p, ctypes.c_int32, ctypes.POINTER(CallOptions)]),
    ]:
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes
    return lib


def main():
    lib = load(sys.argv[1])
    major, minor, patch = ctypes.c_int32(), ctypes.c_int32(), ctypes.c_int32()
    encoded = lib.lockstep_get_version(ctypes.byref(major), ctypes.byref(minor), ctypes.byref(patch))
    assert major.value == 1 and encoded == major.value * 10000 + minor.value * 100 + patch.value, encoded
    assert lib.lockstep_get_build_info()
    # status strings, before and after init
    assert lib.lockstep_status_string(OK) == b"LOCKSTEP_OK"
    assert lib.lockstep_status_string(8) == b"LOCKSTEP_ERROR_TIMEOUT"
    assert lib.lockstep_status_string(12345) == b"LOCKSTEP_ERROR_UNKNOWN"
    # init through the versioned entry point (lockstep_init is a static inline of the header)
    assert lib.lockstep_init_versioned(encoded, None, None) == OK, lib.lockstep_last_error()
    assert lib.lockstep_is_initialized() == 1
    # a header of another major version is refused
    assert lib.lockstep_init_versioned(2 * 10000, None, None) == 11
    assert b"version" in lib.lockstep_last_error().lower()
    comm = ctypes.c_void_p()
    assert lib.lockstep_comm_world(ctypes.byref(comm)) == OK
    rank, size = ctypes.c_int32(-1), ctypes.c_int32(0)
    assert lib.lockstep_comm_rank(comm, ctypes.byref(rank)) == OK
    assert lib.lockstep_comm_size(comm, ctypes.byref(size)) == OK
    r, n = rank.value, size.value
    assert 0 <= r < n
    # a tensor over a ctypes array; an in-place allreduce with a call site of our own
    data = (ctypes.c_double * 4)(*[r + 1.0, 2.0 * r, -1.0, 0.5])
    shape = (ctypes.c_int64 * 1)(4)
    tensor = ctypes.c_void_p()
    assert (
        lib.lockstep_tensor_wrap(
            ctypes.cast(data, ctypes.c_void_p),
            shape,
            1,
            FLOAT64,
            Device(DEVICE_CPU, 0),
            0,
            None,
            None,
            ctypes.byref(tensor),
        )
        == OK
    ), lib.lockstep_last_error()
    pointer = ctypes.c_void_p()
    assert lib.lockstep_tensor_data(tensor, ctypes.byref(pointer)) == OK
    assert pointer.value == ctypes.addressof(data)
    options = CallOptions(ctypes.sizeof(CallOptions), 0, None, __file__.encode(), 77, b"main", b"ctypes allreduce")
    assert lib.lockstep_allreduce(comm, tensor, tensor, SUM, ctypes.byref(options)) == OK, lib.lockstep_last_error()
    assert list(data) == [n * (n + 1) / 2, n * (n - 1), -1.0 * n, 0.5 * n], list(data)
    assert lib.lockstep_allreduce(comm, tensor, tensor, MAX, None) == OK
    assert list(data) == [n * (n + 1) / 2, n * (n - 1), -1.0 * n, 0.5 * n]
    assert lib.lockstep_tensor_release(tensor) == OK
    # a read-only int32 tensor refused as an in-place target (every rank read-only: no rank starts)
    ints = (ctypes.c_int32 * 2)(1, 2)
    ro = ctypes.c_void_p()
    shape[0] = 2
    assert (
        lib.lockstep_tensor_wrap(
            ctypes.cast(ints, ctypes.c_void_p),
            shape,
            1,
            INT32,
            Device(DEVICE_CPU, 0),
            TENSOR_READ_ONLY,
            None,
            None,
            ctypes.byref(ro),
        )
        == OK
    )
    status = lib.lockstep_allreduce(comm, ro, ro, SUM, None)
    assert status == READ_ONLY, (status, lib.lockstep_last_error())
    assert lib.lockstep_status_string(status) == b"LOCKSTEP_ERROR_READ_ONLY"
    assert lib.lockstep_last_error_status() == READ_ONLY and lib.lockstep_last_error()
    assert list(ints) == [1, 2]
    lib.lockstep_tensor_release(ro)
    # argument errors: a NULL handle
    status = lib.lockstep_comm_rank(None, ctypes.byref(rank))
    assert status == INVALID_ARGUMENT and lib.lockstep_status_string(status) == b"LOCKSTEP_ERROR_INVALID_ARGUMENT"
    assert b"NULL" in lib.lockstep_last_error()
    assert lib.lockstep_comm_free(comm) == OK
    assert lib.lockstep_finalize() == OK
    assert lib.lockstep_is_initialized() == 0
    return r, n


if __name__ == "__main__":
    run("ctypes", main)
