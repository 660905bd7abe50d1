// The C interface: requests of non-blocking operations (the entry points that issue them are in comm_c.cpp).
//
// A request handle holds the C++ Work and, where the C call has an output that the C++ operation does not write (its
// result is a new tensor), the copy into it. The first call that sees the operation complete settles the request
// under its mutex: it runs that copy and keeps the outcome, so that every later call returns the same status and
// text, from any thread. The Work keeps the operation's tensors alive until it has completed (a wrapped tensor's
// deleter cannot run before then, whatever the caller released); the copy keeps the output until it has run.

#include "c_api_internal.hpp"

#include <lockstep/runtime.hpp>

#include <fmt/core.h>

#include <chrono>
#include <cmath>

using namespace lockstep;
using namespace lockstep::c_api;

namespace lockstep::c_api {

lockstep_request_s& request(lockstep_request_s* handle, const char* entry, const char* argument) {
    if (!live_handles_set().contains(handle, HandleKind::Request)) {
        if (handle == nullptr) fail(LOCKSTEP_ERROR_INVALID_ARGUMENT, fmt::format("{}: {} is NULL", entry, argument));
        fail(LOCKSTEP_ERROR_INVALID_ARGUMENT,
             fmt::format("{}: {} is not a live request handle (freed by lockstep_request_free already, or never made "
                         "by lockstep)",
                         entry, argument));
    }
    return *handle;
}

}  // namespace lockstep::c_api

namespace {

// The communicator handle to record a request's errors in, while it lives.
lockstep_comm_s* comm_of(lockstep_request_s* handle) noexcept {
    return live_handles_set().contains(handle, HandleKind::Request) ? handle->comm : nullptr;
}

// An operation not complete when lockstep_finalize ran can never complete now: refused instead of waited for.
void require_runtime(const lockstep_request_s& r, const char* entry) {
    if (!r.work.is_completed() && !Runtime::initialized()) {
        fail(LOCKSTEP_ERROR_INVALID_USAGE,
             fmt::format("{}: the runtime was finalized before this operation ({}) completed; wait for every request "
                         "before lockstep_finalize",
                         entry, r.work.describe()));
    }
}

// For a completed operation: runs the copy into the caller's output once, then throws the outcome's error, if any.
void settle(lockstep_request_s& r) {
    std::scoped_lock lock(r.mutex);
    if (!r.settled) {
        try {
            r.work.wait();  // complete already: returns at once, or throws the operation's error
            if (r.finish) r.finish(r.work.result());
        } catch (...) {
            r.failure = std::current_exception();
        }
        r.finish = nullptr;  // lets go of the output
        r.settled = true;
    }
    if (r.failure != nullptr) std::rethrow_exception(r.failure);
}

// Makes progress through `step`, which returns whether the operation has completed. An error it throws once the
// operation has completed is the operation's, which settle reads again.
template <typename Step>
bool progressed(const lockstep_request_s& r, Step&& step) {
    try {
        return step();
    } catch (...) {
        if (!r.work.is_completed()) throw;
        return true;
    }
}

// A completed request, settled; INVALID_USAGE while the operation runs.
lockstep_request_s& completed(lockstep_request_s* handle, const char* entry) {
    lockstep_request_s& r = request(handle, entry);
    if (!r.work.is_completed()) {
        fail(LOCKSTEP_ERROR_INVALID_USAGE,
             fmt::format("{}: the operation has not completed yet ({}); call lockstep_request_wait, or "
                         "lockstep_request_test until it says so, first",
                         entry, r.work.describe()));
    }
    settle(r);
    return r;
}

}  // namespace

extern "C" {

lockstep_status_t lockstep_request_wait(lockstep_request_t request) {
    return guarded(comm_of(request), [&] {
        lockstep_request_s& r = c_api::request(request, "lockstep_request_wait");
        require_runtime(r, "lockstep_request_wait");
        progressed(r, [&] {
            r.work.wait();
            return true;
        });
        settle(r);
    });
}

lockstep_status_t lockstep_request_wait_for(lockstep_request_t request, double seconds, int32_t* completed) {
    return guarded(comm_of(request), [&] {
        constexpr const char* entry = "lockstep_request_wait_for";
        lockstep_request_s& r = c_api::request(request, entry);
        require_out(completed, "completed");
        if (!(seconds >= 0.0)) {  // NaN too
            fail(LOCKSTEP_ERROR_INVALID_ARGUMENT,
                 fmt::format("{}: seconds is {}; it must be a number >= 0", entry, seconds));
        }
        require_runtime(r, entry);
        *completed = progressed(r, [&] { return r.work.wait_for(std::chrono::duration<double>(seconds)); }) ? 1 : 0;
        if (*completed != 0) settle(r);
    });
}

lockstep_status_t lockstep_request_test(lockstep_request_t request, int32_t* completed) {
    return guarded(comm_of(request), [&] {
        lockstep_request_s& r = c_api::request(request, "lockstep_request_test");
        require_out(completed, "completed");
        require_runtime(r, "lockstep_request_test");
        *completed = progressed(r, [&] { return r.work.test(); }) ? 1 : 0;
        if (*completed != 0) settle(r);
    });
}

lockstep_status_t lockstep_request_source(lockstep_request_t request, int32_t* source) {
    return guarded(comm_of(request), [&] {
        require_out(source, "source");
        *source = completed(request, "lockstep_request_source").work.source();
    });
}

lockstep_status_t lockstep_request_result(lockstep_request_t request, lockstep_tensor_t* result) {
    return guarded(comm_of(request), [&] {
        require_out(result, "result");
        lockstep_request_s& r = completed(request, "lockstep_request_result");
        *result = r.gives_result ? new_tensor_handle(r.work.result()) : nullptr;
    });
}

lockstep_status_t lockstep_request_free(lockstep_request_t request) {
    return guarded(nullptr, [&] {
        if (request == nullptr) return;
        if (!live_handles_set().erase(request, HandleKind::Request)) {
            fail(LOCKSTEP_ERROR_INVALID_ARGUMENT,
                 "lockstep_request_free: request is not a live request handle (freed already, or never made by "
                 "lockstep)");
        }
        // The operation goes on without it: a collective still runs in its queue, a send or receive stays posted;
        // one never waited for is named when its communicator is freed or the runtime finalizes.
        std::unique_ptr<lockstep_request_s> gone(request);
    });
}

}  // extern "C"
