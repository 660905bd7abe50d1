#pragma once
// What the C interface's sources share (internal): the handles behind lockstep.h's opaque types, the one place where
// C++ exceptions become status codes, and the reading of versioned option structs.
//
// Every entry point is `return guarded(comm_or_null, [&] { ... });`: the body may throw anything; guarded catches it,
// records the error's text for the thread (and the communicator), and returns its code. Nothing is thrown across the
// interface, and the success path costs a call through a lambda the compiler inlines.

#include "lockstep.h"

#include <lockstep/communicator.hpp>
#include <lockstep/errors.hpp>
#include <lockstep/tensor.hpp>

#include <atomic>
#include <cstddef>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

struct lockstep_tensor_s {
    std::atomic<std::int64_t> references{1};
    lockstep::Tensor tensor;
};

struct lockstep_comm_s {
    lockstep::Communicator* comm = nullptr;  // null once lockstep_finalize freed it
    std::unique_ptr<lockstep::Communicator> owned;
    bool world = false;
    std::mutex error_mutex;
    std::string last_error;  // under error_mutex
};

struct lockstep_runtime_s {
    int unused = 0;
};

namespace lockstep::c_api {

// An error of the C layer itself, with its code (version, usage, argument checks before any C++ call).
class StatusError : public std::exception {
public:
    StatusError(lockstep_status_t status, std::string message) : status_(status), message_(std::move(message)) {}
    [[nodiscard]] const char* what() const noexcept override { return message_.c_str(); }
    [[nodiscard]] lockstep_status_t status() const noexcept { return status_; }

private:
    lockstep_status_t status_;
    std::string message_;
};

// Records the exception being handled (call only inside a catch) for this thread and, when given, for `comm`, and
// returns its code.
lockstep_status_t record_current_exception(lockstep_comm_s* comm) noexcept;

template <typename Body>
lockstep_status_t guarded(lockstep_comm_s* comm, Body&& body) noexcept {
    try {
        body();
        return LOCKSTEP_OK;
    } catch (...) {
        return record_current_exception(comm);
    }
}

[[noreturn]] void fail(lockstep_status_t status, std::string message);

template <typename T>
T* require(T* handle, const char* what) {
    if (handle == nullptr) fail(LOCKSTEP_ERROR_INVALID_ARGUMENT, std::string(what) + " is NULL");
    return handle;
}
template <typename T>
void require_out(T* out, const char* what) {
    if (out == nullptr) fail(LOCKSTEP_ERROR_INVALID_ARGUMENT, std::string("the output pointer ") + what + " is NULL");
}

// A new handle over a communicator (owned) or the world's (not owned), known to lockstep_finalize until freed.
lockstep_comm_s* new_comm_handle(std::unique_ptr<Communicator> owned, bool world);
// Takes a handle out of that list (lockstep_comm_free); false when it is not there (freed already).
bool forget_comm_handle(lockstep_comm_s* handle) noexcept;

// The communicator behind a handle; INVALID_USAGE once lockstep_finalize freed it.
Communicator& communicator(lockstep_comm_s* handle);
lockstep::Tensor& tensor(lockstep_tensor_s* handle, const char* what);
lockstep_tensor_s* new_tensor_handle(lockstep::Tensor t);

// Reads a caller's options struct of any earlier or equal version: fields the caller's struct has override
// `defaults`, the others keep them. A struct_size smaller than the first two fields is INVALID_ARGUMENT; a larger
// one (a newer header) is accepted only when the fields this library does not know are zero, else VERSION.
// The option structs have no padding (explicit reserved fields instead): a later version's field always has bytes of
// its own, and a caller's struct holds no bytes this library reads without meaning to.
static_assert(sizeof(lockstep_init_options_t) == 40 && sizeof(lockstep_comm_options_t) == 32 &&
              sizeof(lockstep_call_options_t) == 56 && sizeof(lockstep_batch_size_options_t) == 32);

template <typename Options>
Options read_options(const Options* given, const Options& defaults, const char* type_name) {
    static_assert(std::is_trivially_copyable_v<Options>);
    if (given == nullptr) return defaults;
    const std::size_t size = given->struct_size;
    constexpr std::size_t minimum = offsetof(Options, flags) + sizeof(std::uint64_t);
    if (size < minimum) {
        fail(LOCKSTEP_ERROR_INVALID_ARGUMENT,
             std::string(type_name) + ": struct_size " + std::to_string(size) +
                 " is smaller than any version of the struct; initialise it with its _INIT macro");
    }
    if (size > sizeof(Options)) {
        const auto* bytes = reinterpret_cast<const unsigned char*>(given);
        for (std::size_t i = sizeof(Options); i < size; ++i) {
            if (bytes[i] != 0) {
                fail(LOCKSTEP_ERROR_VERSION,
                     std::string(type_name) + ": the caller's struct (" + std::to_string(size) +
                         " bytes) sets fields this library (" + std::to_string(sizeof(Options)) +
                         " bytes) does not know; use a liblockstep_c at least as new as the header");
            }
        }
    }
    Options out = defaults;
    std::memcpy(static_cast<void*>(&out), given, std::min(size, sizeof(Options)));
    out.struct_size = sizeof(Options);
    return out;
}

void check_flags(std::uint64_t flags, std::uint64_t known, const char* where);

// The call site of a collective from its options: the caller's place when given (strings kept for the process's
// life, since the watchdog may read them at any time), else the name of the C entry point.
CallSite call_site(const lockstep_call_options_t* options, const char* entry, lockstep_call_options_t* parsed);

// Parses a collective's options and waits for the caller's stream. A failure joins the call as a rejection
// (Communicator::reject_call): in debug mode the other ranks are already in the collective's signature exchange.
CallSite begin_call(Communicator& c, const lockstep_call_options_t* options, const char* entry, OpKind op,
                    const Tensor* input, int root, std::optional<ReduceOp> reduce_op);
void wait_for_stream(void* stream);

// The strings of a call site, kept once for the life of the process.
const char* intern(std::string_view text);

}  // namespace lockstep::c_api
