"""lockstep.Tensor in one process: the buffer protocol (every format, read-only buffers, bfloat16 refused), wrapping
without copies and the lifetime of the wrapped object, DLPack export (legacy and versioned capsules, every keyword of
__dlpack__, the capsule destructor only for unconsumed capsules) and import (versioned first, legacy fallback, capsules,
copy=), numpy and torch as peers, and dtype/device parsing with its exceptions.

Run by run_job.py under mpirun -n 1 (lockstep initialises MPI on first use).
"""
import ctypes
import gc
import weakref

import numpy as np

import lockstep
from harness import expect_raises, run

_get_name = ctypes.pythonapi.PyCapsule_GetName
_get_name.restype = ctypes.c_char_p
_get_name.argtypes = [ctypes.py_object]


_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_set_name = ctypes.pythonapi.PyCapsule_SetName
_capsule_set_name.argtypes = [ctypes.py_object, ctypes.c_char_p]
PYBUF_WRITABLE = 0x0001


def get_buffer(obj, flags):
    """PyObject_GetBuffer(obj, flags) as a C consumer calls it (then PyBuffer_Release)."""
    view = (ctypes.c_char * 256)()  # room for a Py_buffer
    ctypes.pythonapi.PyObject_GetBuffer.argtypes = [ctypes.py_object, ctypes.c_void_p, ctypes.c_int]
    ctypes.pythonapi.PyBuffer_Release.argtypes = [ctypes.c_void_p]
    ctypes.pythonapi.PyObject_GetBuffer(obj, ctypes.addressof(view), flags)
    ctypes.pythonapi.PyBuffer_Release(ctypes.addressof(view))


def capsule_name(capsule):
    return _get_name(capsule).decode()


FORMATS = {
    "float32": ("f", 4, np.float32),
    "float64": ("d", 8, np.float64),
    "float16": ("e", 2, np.float16),
    "int8": ("b", 1, np.int8),
    "uint8": ("B", 1, np.uint8),
    "int32": ("i", 4, np.int32),
    "int64": ("q", 8, np.int64),
    "bool": ("?", 1, np.bool_),
}


def check_buffer_export():
    for dtype, (fmt, itemsize, np_type) in FORMATS.items():
        t = lockstep.empty((2, 3), dtype)
        assert (t.shape, t.dtype, t.device, t.numel, t.nbytes) == ((2, 3), dtype, "cpu", 6, 6 * itemsize), t
        view = memoryview(t)
        assert view.format == fmt and view.itemsize == itemsize and view.shape == (2, 3), (dtype, view.format)
        assert not view.readonly and view.c_contiguous
        a = t.numpy()
        assert a.dtype == np_type and a.shape == (2, 3) and a.ctypes.data == t.data_ptr
        a[...] = 1
        assert np.asarray(t).ravel()[5] == 1
        del view
    scalar = lockstep.empty((), "float64")
    assert scalar.shape == () and memoryview(scalar).ndim == 0
    bf16 = lockstep.empty((4,), "bfloat16")
    assert bf16.dtype == "bfloat16" and bf16.nbytes == 8
    expect_raises(BufferError, memoryview, bf16)
    # bytes-like consumers of a writable tensor
    t = lockstep.empty((4,), "uint8")
    bytearray_view = memoryview(t).cast("B")
    bytearray_view[:] = b"abcd"
    assert bytes(t) == b"abcd"


def check_wrap_buffers():
    # numpy arrays of every dtype, without copies
    for dtype, (fmt, itemsize, np_type) in FORMATS.items():
        a = np.zeros((3, 2), dtype=np_type)
        t = lockstep.as_tensor(a)
        assert t.data_ptr == a.ctypes.data and t.dtype == dtype and t.shape == (3, 2) and not t.read_only
    # read-only buffers give read-only tensors, which export read-only buffers
    a = np.arange(4.0)
    a.flags.writeable = False
    t = lockstep.as_tensor(a)
    assert t.read_only and memoryview(t).readonly
    assert not t.numpy().flags.writeable
    expect_raises(BufferError, get_buffer, t, PYBUF_WRITABLE)
    get_buffer(lockstep.as_tensor(np.zeros(2)), PYBUF_WRITABLE)
    b = lockstep.as_tensor(b"xyz")
    assert b.read_only and b.dtype == "uint8" and b.shape == (3,)
    ba = bytearray(b"hello")
    t = lockstep.as_tensor(ba)
    assert not t.read_only and t.shape == (5,)
    t.numpy()[0] = ord("j")
    assert ba == bytearray(b"jello")
    mv = memoryview(np.arange(6, dtype=np.int32).reshape(2, 3))
    t = lockstep.as_tensor(mv)
    assert t.shape == (2, 3) and t.dtype == "int32"
    assert lockstep.as_tensor(t) is t
    # unsupported formats and layouts
    expect_raises(lockstep.DTypeError, lockstep.as_tensor, np.zeros(2, dtype=np.longdouble))
    expect_raises(lockstep.DTypeError, lockstep.as_tensor, np.zeros(2, dtype=np.clongdouble))
    expect_raises((BufferError, ValueError, lockstep.Error), lockstep.as_tensor, np.zeros((4, 4))[:, 1])


def check_wrapped_object_lifetime():
    # The wrapped array lives as long as the tensor, whatever the caller drops; then it is freed.
    a = np.arange(10.0)
    alive = weakref.ref(a)
    t = lockstep.as_tensor(a)
    del a
    gc.collect()
    assert alive() is not None
    assert t.numpy()[9] == 9.0
    del t
    gc.collect()
    assert alive() is None
    # A legacy capsule that nobody consumed: its destructor gives the tensor back (the array is freed).
    a = np.arange(3.0)
    alive = weakref.ref(a)
    t = lockstep.as_tensor(a)
    capsule = t.__dlpack__()
    assert capsule_name(capsule) == "dltensor"
    del a, t
    gc.collect()
    assert alive() is not None  # the capsule holds it
    del capsule
    gc.collect()
    assert alive() is None
    # A versioned capsule consumed by lockstep: renamed, and its destructor does not free what lockstep now owns.
    a = np.arange(3.0)
    alive = weakref.ref(a)
    capsule = lockstep.as_tensor(a).__dlpack__(max_version=(1, 0))
    assert capsule_name(capsule) == "dltensor_versioned"
    t = lockstep.from_dlpack(capsule)
    assert capsule_name(capsule) == "used_dltensor_versioned"
    del capsule
    gc.collect()
    assert t.numpy()[2] == 2.0 and alive() is not None
    del a, t
    gc.collect()
    assert alive() is None
    # A consumer that calls the deleter without holding the GIL (a ctypes CFUNCTYPE call releases it): the wrapped
    # array's reference is given back all the same (the deleter takes the GIL itself).
    a = np.arange(3.0)
    alive = weakref.ref(a)
    capsule = lockstep.as_tensor(a).__dlpack__(max_version=(1, 0))
    address = _capsule_pointer(capsule, b"dltensor_versioned")
    _capsule_set_name(capsule, b"used_dltensor_versioned")  # consumed: the capsule's destructor must not free it
    del a, capsule
    gc.collect()
    assert alive() is not None
    deleter = ctypes.CFUNCTYPE(None, ctypes.c_void_p).from_address(address + 16)  # after version and manager_ctx
    deleter(address)
    gc.collect()
    assert alive() is None
    # A legacy capsule consumed by numpy.
    t = lockstep.empty((3,), "int32")
    t.numpy()[:] = [4, 5, 6]
    capsule = t.__dlpack__()
    consumer = np.from_dlpack(_CapsuleHolder(capsule))
    assert capsule_name(capsule) == "used_dltensor"
    del capsule, t
    gc.collect()
    assert list(consumer) == [4, 5, 6]


class _CapsuleHolder:
    """Hands out one ready-made capsule (np.from_dlpack wants an object with __dlpack__)."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, stream=None):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)


class _LegacyProducer:
    """A producer of the pre-2023 protocol: __dlpack__ takes no max_version (numpy 1.24, torch 1.13)."""

    def __init__(self, array):
        self.array = array
        self.calls = []

    def __dlpack__(self, stream=None):
        self.calls.append(stream)
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def check_dlpack():
    t = lockstep.empty((2, 2), "float32")
    t.numpy()[:] = [[1, 2], [3, 4]]
    assert t.__dlpack_device__() == (1, 0)
    # every keyword of the current protocol
    for kwargs, name in [
        ({}, "dltensor"),
        ({"max_version": (1, 0)}, "dltensor_versioned"),
        ({"max_version": (1, 3)}, "dltensor_versioned"),
        ({"max_version": (0, 8)}, "dltensor"),
        ({"stream": None, "dl_device": (1, 0), "copy": False}, "dltensor"),
        ({"max_version": (1, 0), "dl_device": (1, 0), "copy": None}, "dltensor_versioned"),
    ]:
        assert capsule_name(t.__dlpack__(**kwargs)) == name, kwargs
    expect_raises(BufferError, t.__dlpack__, dl_device=(2, 0), copy=False)
    expect_raises(TypeError, t.__dlpack__, (1, 0))  # keyword-only
    # malformed keywords: clear errors, not a raw IndexError
    for kwargs in [{"max_version": 1}, {"max_version": (1,)}, {"dl_device": (1,)}, {"dl_device": "cpu"}]:
        error = expect_raises(TypeError, t.__dlpack__, **kwargs)
        assert "tuple of two integers" in str(error), (kwargs, error)
    # integers are anything with __index__ (numpy's integer scalars too)
    assert capsule_name(t.__dlpack__(max_version=(np.int64(1), np.int64(0)))) == "dltensor_versioned"
    error = expect_raises(BufferError, t.__dlpack__, stream=1)  # a CPU tensor has no streams
    assert "stream=None" in str(error), error
    # copy=True exports a copy (flagged IS_COPIED in the versioned form)
    copied = lockstep.from_dlpack(_CapsuleHolder(t.__dlpack__(max_version=(1, 0), copy=True)))
    assert copied.data_ptr != t.data_ptr and copied.numpy().tolist() == [[1, 2], [3, 4]]
    # import: a lockstep producer answers max_version with the versioned form, shared
    u = lockstep.from_dlpack(t)
    assert u.data_ptr == t.data_ptr and u.shape == (2, 2)
    # a legacy-only producer: the versioned request raises TypeError, the legacy one is used
    a = np.arange(6, dtype=np.int64).reshape(3, 2)
    producer = _LegacyProducer(a)
    v = lockstep.from_dlpack(producer)
    assert v.data_ptr == a.ctypes.data and v.dtype == "int64" and v.shape == (3, 2)
    assert len(producer.calls) == 1
    # a capsule given directly; consumed once only
    capsule = a.__dlpack__()
    w = lockstep.from_dlpack(capsule)
    assert w.data_ptr == a.ctypes.data and capsule_name(capsule) == "used_dltensor"
    expect_raises(lockstep.InvalidArgumentError, lockstep.from_dlpack, capsule)
    # copy=True imports a copy; copy=False refuses a non-contiguous producer, copy=None copies it
    c = lockstep.from_dlpack(a, copy=True)
    assert c.data_ptr != a.ctypes.data and c.numpy().tolist() == a.tolist()
    strided = a[:, 1]
    expect_raises(lockstep.InvalidArgumentError, lockstep.from_dlpack, strided, copy=False)
    s = lockstep.from_dlpack(strided)
    assert s.numpy().tolist() == [1, 3, 5]
    # read-only: the legacy form cannot say so and is refused; the versioned one carries the flag
    ro = lockstep.as_tensor(np.frombuffer(b"\x01\x02", dtype=np.uint8))
    expect_raises(lockstep.ReadOnlyError, ro.__dlpack__)
    assert lockstep.from_dlpack(ro).read_only
    expect_raises(TypeError, lockstep.from_dlpack, 3)
    # bool (DLPack 1.0's code 6, which numpy 1.24 and torch 1.13 do not read yet) between lockstep tensors, float16 to
    # numpy
    flags = lockstep.as_tensor(np.array([True, False, True]))
    imported = lockstep.from_dlpack(flags)
    assert imported.dtype == "bool" and imported.data_ptr == flags.data_ptr
    assert imported.numpy().tolist() == [True, False, True]
    half = lockstep.as_tensor(np.array([0.5, -2.0], dtype=np.float16))
    assert np.from_dlpack(half).tolist() == [0.5, -2.0] and np.from_dlpack(half).dtype == np.float16


def check_torch():
    try:
        import torch
    except ImportError:
        print("torch not importable: its DLPack checks skipped")
        return
    x = torch.arange(6, dtype=torch.float32)
    t = lockstep.from_dlpack(x)  # torch 1.13 speaks the legacy protocol only
    assert t.data_ptr == x.data_ptr() and t.shape == (6,) and t.dtype == "float32"
    t.numpy()[0] = 42
    assert x[0].item() == 42
    y = torch.from_dlpack(lockstep.empty((3,), "int64"))
    assert y.dtype == torch.int64 and y.shape == (3,)
    z = lockstep.as_tensor(torch.zeros(2, 2, dtype=torch.float16))
    assert z.dtype == "float16" and z.shape == (2, 2)
    comm = lockstep.Communicator.world()
    v = torch.full((4,), 2.5, dtype=torch.float64)
    assert comm.allreduce(v) is v and v.tolist() == [2.5 * comm.size] * 4
    # a non-contiguous tensor cannot be a collective's in-place target: refused, not silently copied
    expect_raises(lockstep.InvalidArgumentError, comm.allreduce, torch.zeros(4, 4)[:, 0])


def check_parsing():
    assert lockstep.empty(3, np.float32).dtype == "float32"
    assert lockstep.empty([3], np.dtype("int32")).dtype == "int32"
    assert lockstep.empty((1,), "torch.float16").dtype == "float16"
    assert lockstep.empty((1,), "half").dtype == "float16"
    error = expect_raises(lockstep.DTypeError, lockstep.empty, (2,), "float128")
    assert error.status == 3 and error.name == "LOCKSTEP_ERROR_DTYPE" and "float128" in str(error)
    error = expect_raises(lockstep.DeviceError, lockstep.empty, (2,), "float32", "tpu")
    assert error.status == 4
    assert repr(lockstep.empty((2,), "bool")) == "lockstep.Tensor(shape=(2,), dtype=bool, device=cpu)"
    # numpy() of what numpy cannot hold is an error, not a 0-d object array
    error = expect_raises(lockstep.DTypeError, lockstep.empty((2,), "bfloat16").numpy)
    assert "bfloat16" in str(error), error
    # a shape whose bytes overflow is refused, not made smaller than its shape
    error = expect_raises(lockstep.ShapeError, lockstep.empty, 2**62 + 16)
    assert "more bytes than memory" in str(error), error
    assert lockstep.version() == tuple(int(p) for p in lockstep.__version__.split("."))
    assert "C interface" in lockstep.build_info() or lockstep.build_info()
    assert lockstep.is_initialized()


def main():
    for check in (
        check_buffer_export,
        check_wrap_buffers,
        check_wrapped_object_lifetime,
        check_dlpack,
        check_torch,
        check_parsing,
    ):
        check()
        print(f"ok: {check.__name__}", flush=True)
    lockstep.log("tensor_test: every check passed", level="info", scope="all", logger="tests.python")
    lockstep.get_logger("tests.python").info("logger works", scope="ordered")
    return lockstep.rank(), lockstep.size()


if __name__ == "__main__":
    run("tensor", main)
