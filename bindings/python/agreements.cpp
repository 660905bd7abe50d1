#include "agreements.hpp"

#include <pybind11/stl.h>

#include "arguments.hpp"
#include "collective_call.hpp"
#include "communicator.hpp"
#include "errors.hpp"

#include <lockstep.h>

#include <exception>
#include <optional>
#include <utility>

namespace lockstep_python {

namespace {

struct BatchSearch {
    py::object function;
    py::object is_out_of_memory;
    std::optional<py::error_already_set> error;
};

extern "C" lockstep_status_t call_batch_function(int64_t batch_size, void* user_data) {
    auto* search = static_cast<BatchSearch*>(user_data);
    py::gil_scoped_acquire gil;
    try {
        search->function(batch_size);
        return LOCKSTEP_OK;
    } catch (py::error_already_set& error) {
        bool out_of_memory = false;
        try {
            out_of_memory = search->is_out_of_memory(error.value()).cast<bool>();
        } catch (py::error_already_set&) {
            out_of_memory = false;  // a broken predicate: the original exception is what the caller must see
        }
        if (out_of_memory) return LOCKSTEP_ERROR_OUT_OF_MEMORY;
        search->error.emplace(std::move(error));
        return LOCKSTEP_ERROR_CALLBACK;
    } catch (const StatusError& error) {
        set_python_error(error);
        search->error.emplace();
        return LOCKSTEP_ERROR_CALLBACK;
    } catch (const std::exception& error) {
        PyErr_SetString(PyExc_RuntimeError, error.what());
        search->error.emplace();
        return LOCKSTEP_ERROR_CALLBACK;
    }
}

int64_t find_executable_batch_size(const py::object& comm, const py::object& function,
                                   const py::object& starting_batch_size, const py::object& factor,
                                   const py::object& minimum, const py::object& refine_upward,
                                   const py::object& is_out_of_memory) {
    constexpr const char* where = "lockstep.find_executable_batch_size";
    lockstep_comm_t handle = to_communicator(comm, {where, "comm"}).handle();
    if (PyCallable_Check(function.ptr()) == 0) raise_type(function, {where, "function"}, "callable");
    const auto starting = to_integer<int64_t>(starting_batch_size, {where, "starting_batch_size"});
    BatchSearch search{function, is_out_of_memory, std::nullopt};
    lockstep_batch_size_options_t options = LOCKSTEP_BATCH_SIZE_OPTIONS_INIT;
    options.factor = to_double(factor, {where, "factor"});
    options.minimum = to_integer<int64_t>(minimum, {where, "minimum"});
    if (to_bool(refine_upward, {where, "refine_upward"})) options.flags |= LOCKSTEP_BATCH_REFINE_UPWARD;
    int64_t batch_size = 0;
    lockstep_status_t status;
    {
        py::gil_scoped_release release;
        status =
            lockstep_find_executable_batch_size(handle, starting, &call_batch_function, &search, &options, &batch_size);
    }
    if (search.error) {
        // This rank's own exception, as the function raised it; the other ranks get the library's DistributedError.
        py::error_already_set error = std::move(*search.error);
        search.error.reset();
        throw error;
    }
    check(status);
    return batch_size;
}

}  // namespace

void bind_agreements(py::module_& m) {
    m.def(
        "set_trigger",
        [](py::object comm) {
            check(lockstep_set_trigger(to_communicator(comm, {"lockstep.set_trigger", "comm"}).handle()));
        },
        py::arg("comm"));
    m.def(
        "check_trigger",
        [](py::object comm, py::object tag, py::object stream) {
            lockstep_comm_t handle = to_communicator(comm, {"lockstep.check_trigger", "comm"}).handle();
            int32_t triggered = 0;
            run_collective("lockstep.check_trigger", tag, stream, [&](const lockstep_call_options_t* o) {
                return lockstep_check_trigger(handle, &triggered, o);
            });
            return triggered != 0;
        },
        py::arg("comm"), py::kw_only(), py::arg("tag") = py::none(), py::arg("stream") = py::none());
    m.def("find_executable_batch_size", &find_executable_batch_size, py::arg("comm"), py::arg("function"),
          py::arg("starting_batch_size"), py::arg("factor"), py::arg("minimum"), py::arg("refine_upward"),
          py::arg("is_out_of_memory"),
          "The batch-size search of lockstep_find_executable_batch_size; function(batch_size) is called with the GIL.");
}

}  // namespace lockstep_python
