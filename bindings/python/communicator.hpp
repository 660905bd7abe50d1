#pragma once
// lockstep.Communicator: one communicator handle, checked against the runtime's generation on every use.
#include <Python.h>
#include <lockstep.h>
#include <pybind11/pybind11.h>

#include "arguments.hpp"
#include "errors.hpp"
#include "request.hpp"
#include "runtime.hpp"

#include <cstdint>

namespace lockstep_python {

namespace py = pybind11;

// One lockstep communicator handle. Never freed by the garbage collector: freeing is collective (every member, in the
// same order), which collection order across ranks cannot promise; free() does it, and finalize frees the rest.
class Communicator {
public:
    explicit Communicator(lockstep_comm_t handle) : handle_(handle), generation_(g_generation) {}

    lockstep_comm_t handle() const {
        if (generation_ != g_generation || g_finalized) {
            raise_status(LOCKSTEP_ERROR_INVALID_USAGE, "this communicator belongs to a lockstep that was finalised");
        }
        if (handle_ == nullptr) raise_status(LOCKSTEP_ERROR_INVALID_USAGE, "this communicator was freed");
        return handle_;
    }
    bool freed() const { return handle_ == nullptr; }
    // The handle without the checks of handle(), for callers that asked usable() first.
    bool usable() const noexcept { return handle_ != nullptr && generation_ == g_generation && !g_finalized; }
    lockstep_comm_t usable_handle() const noexcept { return handle_; }
    void free() {
        lockstep_comm_t handle = this->handle();
        lockstep_status_t status;
        {
            py::gil_scoped_release release;
            status = lockstep_comm_free(handle);
        }
        check(status);
        handle_ = nullptr;
        release_dropped_requests(handle);  // the library has finished with the memory of its operations
    }

    int32_t rank() const {
        int32_t rank = -1;
        check(lockstep_comm_rank(handle(), &rank));
        return rank;
    }
    int32_t size() const {
        int32_t size = 0;
        check(lockstep_comm_size(handle(), &size));
        return size;
    }

private:
    lockstep_comm_t handle_;
    uint64_t generation_;
};

// The Communicator an argument must be; a TypeError naming `where` for anything else.
Communicator& to_communicator(py::handle value, const Argument& where);

// The class Communicator: its constructors, properties, the collectives (with the fast entry of allreduce) and
// point-to-point; UNDEFINED_COLOR and ANY_SOURCE.
void bind_communicator(py::module_& m);

}  // namespace lockstep_python
