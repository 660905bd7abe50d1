#include "logging.hpp"

#include <pybind11/stl.h>

#include "arguments.hpp"
#include "errors.hpp"
#include "runtime.hpp"

#include <lockstep.h>

#include <optional>
#include <string>

namespace lockstep_python {

namespace {

lockstep_log_level_t parse_level(const py::object& level) {
    const Argument where{"lockstep.log", "level"};
    if (!PyFloat_Check(level.ptr()) && PyIndex_Check(level.ptr()) != 0) {
        // Python's logging numbers: DEBUG 10, INFO 20, WARNING 30, ERROR 40, CRITICAL 50.
        const auto number = to_integer<int64_t>(level, where);
        if (number >= 50) return LOCKSTEP_LOG_CRITICAL;
        if (number >= 40) return LOCKSTEP_LOG_ERROR;
        if (number >= 30) return LOCKSTEP_LOG_WARNING;
        if (number >= 20) return LOCKSTEP_LOG_INFO;
        return LOCKSTEP_LOG_DEBUG;
    }
    if (!PyUnicode_Check(level.ptr())) raise_type(level, where, "a level name or a number");
    const std::string name = to_string(level, where);
    if (name == "debug") return LOCKSTEP_LOG_DEBUG;
    if (name == "info") return LOCKSTEP_LOG_INFO;
    if (name == "warning" || name == "warn") return LOCKSTEP_LOG_WARNING;
    if (name == "error") return LOCKSTEP_LOG_ERROR;
    if (name == "critical") return LOCKSTEP_LOG_CRITICAL;
    raise_status(LOCKSTEP_ERROR_INVALID_ARGUMENT,
                 "unknown log level '" + name + "' (debug, info, warning, error, critical)");
}

lockstep_log_scope_t parse_scope(const py::object& name) {
    const std::string scope = to_string(name, {"lockstep.log", "scope"});
    if (scope == "main") return LOCKSTEP_LOG_MAIN_PROCESS;
    if (scope == "all") return LOCKSTEP_LOG_EVERY_RANK;
    if (scope == "ordered") return LOCKSTEP_LOG_IN_RANK_ORDER;
    raise_status(LOCKSTEP_ERROR_INVALID_ARGUMENT, "unknown log scope '" + scope + "' (main, all, ordered)");
}

}  // namespace

void bind_logging(py::module_& m) {
    m.def(
        "log",
        [](py::object message_object, py::object level, py::object scope, py::object logger_object) {
            const std::string message = to_string(message_object, {"lockstep.log", "message"});
            const auto logger = to_optional_string(logger_object, {"lockstep.log", "logger"});
            const lockstep_log_level_t log_level = parse_level(level);
            const lockstep_log_scope_t log_scope = parse_scope(scope);
            ensure_init();
            lockstep_status_t status;
            {
                // The ordered scope is collective over the world.
                py::gil_scoped_release release;
                status = lockstep_log(logger ? logger->c_str() : nullptr, log_level, log_scope, message.c_str());
            }
            check(status);
        },
        py::arg("message"), py::arg("level") = "info", py::arg("scope") = "main", py::arg("logger") = py::none());
}

}  // namespace lockstep_python
