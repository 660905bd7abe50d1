#pragma once
// What the C interface's sources share (internal): the handles behind lockstep.h's opaque types, the one place where
// C++ exceptions become status codes, and the reading of versioned option structs.
//
// Every entry point is `return guarded(comm_or_null, [&] { ... });`: the body may throw anything; guarded catches it,
// records the error's text for the thread (and the communicator), and returns its code. Nothing is thrown across the
// interface, and the success path costs a call through a lambda the compiler inlines.

#include "live_handles.hpp"
#include "lockstep.h"

#include <lockstep/communicator.hpp>
#include <lockstep/errors.hpp>
#include <lockstep/tensor.hpp>

#include <atomic>
#include <cstddef>
#include <cstring>
#include <exception>
#include <functional>
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

// A non-blocking operation (request_c.cpp): the C++ Work, and what this layer adds to it.
struct lockstep_request_s {
    lockstep::Work work;
    lockstep_comm_s* comm = nullptr;  // where its errors are recorded too, while that handle lives
    bool gives_result = false;        // lockstep_igather_uneven: lockstep_request_result hands out the new tensor
    // Where the C++ operation returns a new tensor and the C call has an output, the copy into that output: run once,
    // by the first call that sees the operation complete (wait, wait_for, test, source, result).
    std::function<void(const lockstep::Tensor& result)> finish;
    std::mutex mutex;
    bool settled = false;        // under mutex: the outcome below is final
    std::exception_ptr failure;  // under mutex: the operation's error, or the copy's
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
T* require(T* pointer, const char* what) {
    if (pointer == nullptr) fail(LOCKSTEP_ERROR_INVALID_ARGUMENT, std::string(what) + " is NULL");
    return pointer;
}
template <typename T>
void require_out(T* out, const char* what) {
    if (out == nullptr) fail(LOCKSTEP_ERROR_INVALID_ARGUMENT, std::string("the output pointer ") + what + " is NULL");
}

// A new handle over a communicator (owned) or the world's (not owned), known to lockstep_finalize until freed.
lockstep_comm_s* new_comm_handle(std::unique_ptr<Communicator> owned, bool world);
// Takes a handle out of that list (lockstep_comm_free); false when it is not there (freed already, or never made).
bool forget_comm_handle(lockstep_comm_s* handle) noexcept;

// The communicator behind the handle argument `argument` of `entry`: INVALID_ARGUMENT for NULL and for a pointer that
// is no live communicator handle (freed, or never made by this library), INVALID_USAGE once lockstep_finalize freed
// the communicator.
Communicator& communicator(lockstep_comm_s* handle, const char* entry, const char* argument = "comm");
// Whether `handle` is a communicator handle this library made and has not freed (NULL is not).
[[nodiscard]] bool is_live(const lockstep_comm_s* handle) noexcept;

// The tensor behind a live handle, else null (NULL, released, or never made): one lookup, no exception.
[[nodiscard]] inline lockstep::Tensor* live_tensor(lockstep_tensor_s* handle) noexcept {
    return live_handles_set().contains(handle, HandleKind::Tensor) ? &handle->tensor : nullptr;
}
// What is wrong with the tensor handle argument `argument` of `entry`, for a handle live_tensor refused.
std::string dead_tensor_text(const lockstep_tensor_s* handle, const char* entry, const char* argument);
// The tensor behind the handle argument `argument` of `entry`; INVALID_ARGUMENT for NULL and a handle no live tensor's.
lockstep::Tensor& tensor(lockstep_tensor_s* handle, const char* entry, const char* argument);

// A handle being made: in the live set from the start, so that nothing can fail once it holds memory taken over from
// the caller; erased and deleted again unless handed out with release().
template <typename Handle, HandleKind kind>
class NewHandle {
public:
    NewHandle() : handle_(std::make_unique<Handle>()) { live_handles_set().insert(handle_.get(), kind); }
    ~NewHandle() {
        if (handle_ != nullptr) live_handles_set().erase(handle_.get(), kind);
    }
    NewHandle(const NewHandle&) = delete;
    NewHandle& operator=(const NewHandle&) = delete;
    Handle* operator->() const noexcept { return handle_.get(); }
    Handle* release() noexcept { return handle_.release(); }

private:
    std::unique_ptr<Handle> handle_;
};
using NewTensorHandle = NewHandle<lockstep_tensor_s, HandleKind::Tensor>;
using NewRequestHandle = NewHandle<lockstep_request_s, HandleKind::Request>;
lockstep_tensor_s* new_tensor_handle(lockstep::Tensor t);

// The request behind the handle argument `argument` of `entry`; INVALID_ARGUMENT for NULL and a handle no live
// request's (freed, or never made).
lockstep_request_s& request(lockstep_request_s* handle, const char* entry, const char* argument = "request");

// Reads a caller's options struct of any earlier or equal version: fields the caller's struct has override
// `defaults`, the others keep them. A struct_size smaller than the first two fields is INVALID_ARGUMENT; a larger
// one (a newer header) is accepted only when the fields this library does not know are zero, else VERSION; one
// above max_options_size is INVALID_ARGUMENT, read no further than its size field (garbage there would otherwise have
// this function read on until a non-zero byte, or the end of a mapped page).
// The option structs have no padding (explicit reserved fields instead): a later version's field always has bytes of
// its own, and a caller's struct holds no bytes this library reads without meaning to.
static_assert(sizeof(lockstep_init_options_t) == 48 && sizeof(lockstep_comm_options_t) == 40 &&
              sizeof(lockstep_call_options_t) == 64 && sizeof(lockstep_batch_size_options_t) == 32);

inline constexpr std::size_t max_options_size = 4096;

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
    if (size > max_options_size) {
        fail(LOCKSTEP_ERROR_INVALID_ARGUMENT, std::string(type_name) + ": struct_size " + std::to_string(size) +
                                                  " is larger than any version of the " + "struct can be (" +
                                                  std::to_string(max_options_size) +
                                                  " bytes at most); initialise it with its _INIT macro");
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
// The call site of a non-blocking operation, once the caller's stream was waited for (comm_c.cpp): its tag is kept for
// the process's life too, since the operation reads it after the call returned.
CallSite nonblocking_call_site(const lockstep_call_options_t* options, const char* entry);

// The DType of a lockstep_dtype_t; a DTypeError for a code no version defines.
DType dtype_of_code(lockstep_dtype_t code);

// The strings of a call site, kept once for the life of the process.
const char* intern(std::string_view text);

}  // namespace lockstep::c_api
