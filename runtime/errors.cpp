#include <lockstep/errors.hpp>
#include <lockstep/runtime.hpp>

#include <fmt/core.h>
#include <mpi.h>

#include <filesystem>

namespace lockstep {

namespace {
std::string position(const std::source_location& where) {
    return fmt::format("{}:{}", std::filesystem::path(where.file_name()).filename().string(), where.line());
}

}  // namespace

// Names of the standard error classes: available even when MPI is not running, where MPI_Error_string is not allowed.
const char* mpi_error_class_name(int error_class) noexcept {
    switch (error_class) {
        case MPI_ERR_BUFFER:
            return "MPI_ERR_BUFFER";
        case MPI_ERR_COUNT:
            return "MPI_ERR_COUNT";
        case MPI_ERR_TYPE:
            return "MPI_ERR_TYPE";
        case MPI_ERR_TAG:
            return "MPI_ERR_TAG";
        case MPI_ERR_COMM:
            return "MPI_ERR_COMM";
        case MPI_ERR_RANK:
            return "MPI_ERR_RANK";
        case MPI_ERR_REQUEST:
            return "MPI_ERR_REQUEST";
        case MPI_ERR_ROOT:
            return "MPI_ERR_ROOT";
        case MPI_ERR_GROUP:
            return "MPI_ERR_GROUP";
        case MPI_ERR_OP:
            return "MPI_ERR_OP";
        case MPI_ERR_TOPOLOGY:
            return "MPI_ERR_TOPOLOGY";
        case MPI_ERR_DIMS:
            return "MPI_ERR_DIMS";
        case MPI_ERR_ARG:
            return "MPI_ERR_ARG";
        case MPI_ERR_UNKNOWN:
            return "MPI_ERR_UNKNOWN";
        case MPI_ERR_TRUNCATE:
            return "MPI_ERR_TRUNCATE";
        case MPI_ERR_OTHER:
            return "MPI_ERR_OTHER";
        case MPI_ERR_INTERN:
            return "MPI_ERR_INTERN";
        case MPI_ERR_IN_STATUS:
            return "MPI_ERR_IN_STATUS";
        case MPI_ERR_PENDING:
            return "MPI_ERR_PENDING";
        case MPI_ERR_NO_MEM:
            return "MPI_ERR_NO_MEM";
        case MPI_ERR_INFO:
            return "MPI_ERR_INFO";
        case MPI_ERR_KEYVAL:
            return "MPI_ERR_KEYVAL";
        case MPI_ERR_SIZE:
            return "MPI_ERR_SIZE";
        case MPI_ERR_UNSUPPORTED_OPERATION:
            return "MPI_ERR_UNSUPPORTED_OPERATION";
        default:
            return "MPI error";
    }
}

namespace {

bool mpi_running() {
    int initialized = 0;
    int finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    return initialized != 0 && finalized == 0;
}

std::string mpi_code_text(int code) {
    if (!mpi_running()) {
        // Codes below MPI_ERR_LASTCODE that are not implementation-specific are their own class.
        return fmt::format("{} (code {})", mpi_error_class_name(code), code);
    }
    int error_class = MPI_ERR_UNKNOWN;
    MPI_Error_class(code, &error_class);
    char text[MPI_MAX_ERROR_STRING] = {};
    int len = 0;
    if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) len = 0;
    return fmt::format("{}: {} (code {})", mpi_error_class_name(error_class),
                       std::string_view(text, static_cast<std::size_t>(len)), code);
}
}  // namespace

ConfigError::ConfigError(std::string source, std::string message)
    : Error(fmt::format("invalid configuration from {}: {}", source, message)), source_(std::move(source)) {}

MpiError::MpiError(std::string call, int code, std::source_location where)
    : Error(fmt::format("{} failed at {}: {}", call, position(where), mpi_code_text(code))),
      call_(std::move(call)),
      code_(code) {}

CudaError::CudaError(std::string call, int code, std::string code_text, std::source_location where)
    : Error(fmt::format("{} failed at {}: {} (code {})", call, position(where), code_text, code)),
      call_(std::move(call)),
      code_(code) {}

std::string mpi_error_string(int code) {
    return mpi_code_text(code);
}

namespace detail {
static_assert(MPI_SUCCESS == 0, "check_mpi (errors.hpp) compares return codes with 0");

void throw_mpi_error(int rc, std::string_view call, std::source_location where) {
    throw MpiError(std::string(call), rc, where);
}
}  // namespace detail

}  // namespace lockstep
