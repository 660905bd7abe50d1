#pragma once
// Communicator.begin_foreign, end_foreign and set_carrier: collectives another library carries (gloo, NCCL), checked
// and watched by lockstep (lockstep_foreign_begin in lockstep.h).
#include <pybind11/pybind11.h>

namespace lockstep_python {

namespace py = pybind11;

// Adds the methods to the class Communicator (bind_communicator first).
void bind_foreign(py::module_& m);

}  // namespace lockstep_python
