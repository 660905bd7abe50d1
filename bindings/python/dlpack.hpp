#pragma once
// DLPack both ways: a capsule or an object with __dlpack__ consumed into a Tensor (lockstep then calls the producer's
// deleter; the capsule is renamed "used_dltensor[_versioned]"), and a Tensor's __dlpack__.
#include <Python.h>
#include <lockstep.h>
#include <pybind11/pybind11.h>

#include "tensor.hpp"

namespace lockstep_python {

namespace py = pybind11;

// from_dlpack(obj, copy): a capsule, or an object with __dlpack__ (asked for the versioned form first; a producer that
// does not know max_version raises TypeError and is asked again for the legacy form).
Tensor tensor_from_dlpack(const py::handle& object, const py::object& copy);

// __dlpack__(*, stream, max_version, dl_device, copy) of the current protocol.
py::object tensor_dlpack(const Tensor& tensor, const py::object& stream, const py::object& max_version,
                         const py::object& dl_device, const py::object& copy);

}  // namespace lockstep_python
