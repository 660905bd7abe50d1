#pragma once
// The error hierarchy of lockstep. Every failure a caller can act on has its own type rooted at lockstep::Error, so
// that code recognises a condition (out of memory, a timeout, a mismatched collective) by type, never by message text.

#include <lockstep/export.hpp>

#include <cstddef>
#include <source_location>
#include <stdexcept>
#include <string>
#include <string_view>

namespace lockstep {

class LOCKSTEP_API Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// A setting that cannot be used. `source` names where it came from: an environment variable, "file:line:column",
// a launcher flag or an API argument.
class LOCKSTEP_API ConfigError : public Error {
public:
    ConfigError(std::string source, std::string message);
    [[nodiscard]] const std::string& source() const noexcept { return source_; }

private:
    std::string source_;
};

// Wrong shape for an operation; the message holds both shapes.
class LOCKSTEP_API ShapeError : public Error {
public:
    using Error::Error;
};

// Wrong or unsupported element type; the message holds both dtypes.
class LOCKSTEP_API DTypeError : public Error {
public:
    using Error::Error;
};

// A device that cannot be used: a malformed device string, or a CUDA tensor in a build without CUDA.
class LOCKSTEP_API DeviceError : public Error {
public:
    using Error::Error;
};

// An argument outside its domain (a negative size, an index out of range, an integer division by zero).
class LOCKSTEP_API InvalidArgumentError : public Error {
public:
    using Error::Error;
};

// A write into a tensor marked read-only (Tensor::read_only): one wrapped from read-only memory, such as a read-only
// numpy array or a DLPack tensor with the READ_ONLY flag, or one marked so by its owner. The message names the tensor
// and the write.
class LOCKSTEP_API ReadOnlyError : public Error {
public:
    using Error::Error;
};

// An operation, dtype or device that this build or this API does not support (a DLPack device type lockstep has no
// allocator for, say); the message says what was asked and what is supported.
class LOCKSTEP_API UnsupportedError : public Error {
public:
    using Error::Error;
};

// Raised by a collective whose arguments differ between ranks; every rank raises the same one.
class LOCKSTEP_API DistributedOperationError : public Error {
public:
    using Error::Error;
};
using DistributedOperationException = DistributedOperationError;  // the earlier name, kept for existing code

// A collective or a launch that outlived its time limit.
class LOCKSTEP_API TimeoutError : public Error {
public:
    using Error::Error;
};

// An MPI call that returned an error code.
class LOCKSTEP_API MpiError : public Error {
public:
    MpiError(std::string call, int code, std::source_location where);
    [[nodiscard]] const std::string& call() const noexcept { return call_; }
    [[nodiscard]] int code() const noexcept { return code_; }

private:
    std::string call_;
    int code_;
};

// A CUDA runtime or cuBLAS call that returned an error code.
class LOCKSTEP_API CudaError : public Error {
public:
    CudaError(std::string call, int code, std::string code_text, std::source_location where);
    [[nodiscard]] const std::string& call() const noexcept { return call_; }
    [[nodiscard]] int code() const noexcept { return code_; }

private:
    std::string call_;
    int code_;
};

namespace detail {
// Exported although in detail: LOCKSTEP_MPI_CHECK, a public macro, expands to a call of it in the program.
[[noreturn]] LOCKSTEP_API void throw_mpi_error(int rc, std::string_view call, std::source_location where);
// Throws MpiError unless rc is MPI_SUCCESS (0 in every MPI). Use LOCKSTEP_MPI_CHECK, which names the call. Inline, so
// that a successful check is a compare (the collectives' per-call contract: collectives/communicator_impl.hpp).
inline void check_mpi(int rc, std::string_view call, std::source_location where = std::source_location::current()) {
    if (rc != 0) [[unlikely]]
        throw_mpi_error(rc, call, where);
}
}  // namespace detail

}  // namespace lockstep

// Checks the return code of an MPI call; on failure throws lockstep::MpiError naming the call, the error text and the
// source position.
#define LOCKSTEP_MPI_CHECK(call) ::lockstep::detail::check_mpi((call), #call)
