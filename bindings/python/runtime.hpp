#pragma once
// The runtime's state as the extension sees it: started on first use (ensure_init), finalised once for good, and the
// generation that tells a Communicator whether its handle still belongs to a live runtime.
#include <Python.h>
#include <lockstep.h>
#include <pybind11/pybind11.h>

#include <cstdint>

namespace lockstep_python {

namespace py = pybind11;

// Bumped by finalize: communicators of an older generation refer to handles the library has freed.
extern uint64_t g_generation;
extern bool g_finalized;
// The cached world Communicator of this generation (a strong reference, dropped by finalize).
extern PyObject* g_world;

// Starts lockstep unless it runs (with the GIL released); after finalize an INVALID_USAGE error.
void ensure_init();

// version, build_info, init, finalize, the identity (rank, size, ...), free_memory and set_seed.
void bind_runtime(py::module_& m);

}  // namespace lockstep_python
