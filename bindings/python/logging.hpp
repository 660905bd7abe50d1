#pragma once
// lockstep.log: a message through lockstep's logging, by Python's level names or numbers, to the main process, every
// rank, or every rank in rank order (collective over the world).
#include <pybind11/pybind11.h>

namespace lockstep_python {

namespace py = pybind11;

void bind_logging(py::module_& m);

}  // namespace lockstep_python
