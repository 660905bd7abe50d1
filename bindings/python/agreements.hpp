#pragma once
// The agreements Python calls directly: the trigger (set on one rank, seen by all) and the batch-size search, whose
// function is called back with the GIL.
#include <pybind11/pybind11.h>

namespace lockstep_python {

namespace py = pybind11;

// set_trigger, check_trigger and find_executable_batch_size.
void bind_agreements(py::module_& m);

}  // namespace lockstep_python
