#include "runtime.hpp"

#include <pybind11/stl.h>

#include "arguments.hpp"
#include "errors.hpp"
#include "request.hpp"

#include <string>

namespace lockstep_python {

uint64_t g_generation = 0;
bool g_finalized = false;
// The cached world Communicator of this generation (a strong reference, dropped by finalize).
PyObject* g_world = nullptr;

void ensure_init() {
    if (lockstep_is_initialized()) return;
    if (g_finalized) raise_status(LOCKSTEP_ERROR_INVALID_USAGE, "lockstep was finalised: it cannot be used again");
    lockstep_status_t status;
    {
        py::gil_scoped_release release;
        status = lockstep_init(nullptr, nullptr);
    }
    check(status);
}

namespace {

struct Identity {
    int32_t rank = 0, size = 0, local_rank = 0, local_size = 0;
};

Identity identity() {
    ensure_init();
    Identity id;
    check(lockstep_runtime_identity(nullptr, &id.rank, &id.size, &id.local_rank, &id.local_size));
    return id;
}

lockstep_runtime_t runtime_handle() {
    ensure_init();
    lockstep_runtime_t runtime = nullptr;
    lockstep_status_t status;
    {
        py::gil_scoped_release release;
        status = lockstep_init(nullptr, &runtime);
    }
    check(status);
    return runtime;
}

}  // namespace

void bind_runtime(py::module_& m) {
    m.def("version", []() {
        int32_t major = 0, minor = 0, patch = 0;
        lockstep_get_version(&major, &minor, &patch);
        return py::make_tuple(major, minor, patch);
    });
    m.def("header_version", []() { return LOCKSTEP_C_VERSION; });
    m.def(
        "build_info", []() { return std::string(lockstep_get_build_info()); },
        "One line: the versions of the C interface and of lockstep, the commit, whether CUDA is built in.");

    m.def(
        "init",
        [](py::object debug, py::object timeout, py::object config_file, py::object on_timeout) {
            if (g_finalized)
                raise_status(LOCKSTEP_ERROR_INVALID_USAGE, "lockstep was finalised: it cannot be used again");
            lockstep_init_options_t options = LOCKSTEP_INIT_OPTIONS_INIT;
            if (const auto on = to_optional_bool(debug, {"lockstep.init", "debug"})) options.debug = *on ? 1 : 0;
            if (const auto seconds = to_optional_double(timeout, {"lockstep.init", "timeout"})) {
                options.timeout = *seconds;
            }
            options.on_timeout = to_on_timeout(on_timeout, {"lockstep.init", "on_timeout"});
            std::string file;
            if (!config_file.is_none()) {
                file = py::str(config_file).cast<std::string>();
                options.config_file = file.c_str();
            }
            lockstep_status_t status;
            {
                py::gil_scoped_release release;
                status = lockstep_init(&options, nullptr);
            }
            check(status);
        },
        py::arg("debug") = py::none(), py::arg("timeout") = py::none(), py::arg("config_file") = py::none(),
        py::arg("on_timeout") = py::none(),
        "Starts lockstep, and MPI unless it runs already (then lockstep adopts it). Idempotent; every other function "
        "calls it on first use. `debug`, `timeout` (seconds; 0: no watchdog) and `on_timeout` (\"end\" or "
        "\"raise\") override the configuration for every communicator that does not set its own.");
    m.def(
        "finalize",
        []() {
            if (!lockstep_is_initialized()) return;
            // The cached world communicator and every Communicator object of this generation become invalid.
            Py_XDECREF(g_world);
            g_world = nullptr;
            ++g_generation;
            g_finalized = true;
            lockstep_status_t status;
            {
                py::gil_scoped_release release;
                status = lockstep_finalize();
            }
            release_dropped_requests(nullptr);  // finalize completed or cancelled every operation
            check(status);
        },
        "Ends lockstep (collective): completes the queued collectives, cancels pending sends and receives, frees "
        "every communicator, and finalises MPI if lockstep started it. Nothing of lockstep can be used afterwards. "
        "Does nothing when lockstep was not started. Raises lockstep.Error (an MpiError, say) when finalising fails. "
        "Runs at interpreter exit by itself.");
    m.def(
        "is_initialized", []() { return lockstep_is_initialized() != 0; },
        "True between lockstep's start (init, or the first call that needs it) and finalize.");
    m.def("is_finalized", []() { return g_finalized; });
    m.def(
        "owns_mpi", []() { return lockstep_runtime_owns_mpi(runtime_handle()) != 0; },
        "True when lockstep initialised MPI (and finalises it), False when it adopted an MPI someone else started.");
    m.def(
        "rank", []() { return identity().rank; }, "This process's rank in the world (starts lockstep if needed).");
    m.def(
        "size", []() { return identity().size; }, "The number of processes in the world (starts lockstep if needed).");
    m.def(
        "local_rank", []() { return identity().local_rank; },
        "This process's rank among the processes of its node (starts lockstep if needed).");
    m.def(
        "local_size", []() { return identity().local_size; },
        "The number of processes on this process's node (starts lockstep if needed).");
    m.def(
        "free_memory",
        []() {
            ensure_init();
            lockstep_status_t status;
            {
                py::gil_scoped_release release;
                status = lockstep_free_memory();
            }
            check(status);
        },
        "Releases the memory lockstep's allocators keep cached (host and CUDA) back to the system; no "
        "communication.");
    m.def(
        "set_seed",
        [](py::object seed, py::object device_specific) {
            const auto value = to_integer<uint64_t>(seed, {"lockstep.set_seed", "seed"});
            const bool per_device = to_bool(device_specific, {"lockstep.set_seed", "device_specific"});
            ensure_init();
            check(lockstep_set_seed(value, per_device ? 1 : 0));
        },
        py::arg("seed"), py::arg("device_specific") = false,
        "Seeds lockstep's random generators with `seed` (an integer 0 <= seed < 2**64), the same on every rank, or "
        "per device (seed plus the device's index) with device_specific=True. Raises TypeError or OverflowError for "
        "a seed that is not such an integer.");
}

}  // namespace lockstep_python
