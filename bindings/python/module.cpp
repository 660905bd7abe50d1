// _lockstep: the Python binding of lockstep's C interface (lockstep.h, liblockstep_c.so.1), the extension module under
// the package `lockstep` (bindings/python/lockstep/__init__.py builds the public API on it; bindings/python/README.md
// describes it).
//
// Three rules hold for every function of the module:
//  - The GIL is released around every C call that may block or communicate (collectives, init, finalize, creation and
//    freeing of communicators, the batch-size search); it is taken again only to call back into Python.
//  - A failing status becomes the exception class __init__.py registered for that code (_register_errors), with
//    lockstep_last_error() as its message, read on the thread that made the call.
//  - Every collective names its caller: the first Python frame outside this package and outside torch/distributed,
//    so that the debug-mode report and the watchdog point at the user's file:line and not at a wrapper.
//
// Memory is never copied on the way in: a buffer-protocol object (numpy array, bytearray, memoryview) is wrapped with
// lockstep_tensor_wrap and its Py_buffer is released by the tensor's deleter; a DLPack capsule is consumed (renamed
// "used_dltensor[_versioned]") and lockstep calls the producer's deleter.
//
// This file only registers the parts, each through its header's bind_* (Tensor and Request before Communicator, whose
// collectives return them, so that their signatures name the Python classes). Every part includes pybind11/stl.h:
// pybind11 needs the same type casters in every translation unit of a module.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "agreements.hpp"
#include "call_site.hpp"
#include "collective_call.hpp"
#include "communicator.hpp"
#include "errors.hpp"
#include "foreign.hpp"
#include "logging.hpp"
#include "request.hpp"
#include "runtime.hpp"
#include "tensor.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_lockstep, m) {
    m.doc() = "lockstep's C interface (lockstep.h) for Python; use the package `lockstep`, which builds on it.";

    lockstep_python::bind_errors(m);
    lockstep_python::bind_call_site(m);
    lockstep_python::bind_collective_call(m);
    lockstep_python::bind_runtime(m);
    lockstep_python::bind_tensor(m);
    lockstep_python::bind_request(m);
    lockstep_python::bind_communicator(m);
    lockstep_python::bind_foreign(m);
    lockstep_python::bind_agreements(m);
    lockstep_python::bind_logging(m);
}
