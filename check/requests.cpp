// The wait, test, free and cancel functions, for every request the program holds: point-to-point ones, and the
// generalized requests that stand for deferred collectives (deferred.cpp). While a deferred collective is in flight a
// wait becomes a test loop that moves the deferred calls on; a completed request is announced to the watchdog side
// (request_completed) and, in debug mode, forgotten by the check of requests never completed.

#include "entry.hpp"

#include <lockstep/base/symbolizer.hpp>

#include <mutex>
#include <unordered_map>

namespace lockstep::check {
namespace {

struct Tracked {
    std::mutex mutex;
    std::unordered_map<MPI_Request, CallDescriptor> requests;
};

Tracked& tracked() {
    static auto* t = new Tracked;
    return *t;
}

// The program's handles as they were before the call (MPI sets completed ones to MPI_REQUEST_NULL); reused, so that
// the common path allocates nothing once it has grown.
thread_local std::vector<MPI_Request> saved;

void save(int count, const MPI_Request* requests) {
    saved.assign(requests, requests + std::max(count, 0));
}

// `handle` completed (or was freed): the watchdog side hears of it; in debug mode its outcome replaces `rc` when it
// was a deferred collective that failed its check.
int completed(MPI_Request handle, int rc, MPI_Status* status) {
    if (handle == MPI_REQUEST_NULL) return rc;
    request_completed(handle);
    if (!debug_mode) return rc;
    {
        Tracked& t = tracked();
        std::scoped_lock lock(t.mutex);
        t.requests.erase(handle);
    }
    const DeferredOutcome outcome = take_deferred(handle);
    if (!outcome.deferred || outcome.error == MPI_SUCCESS) return rc;
    if (status != MPI_STATUS_IGNORE && status != nullptr) status->MPI_ERROR = outcome.error;
    return outcome.error;
}

MPI_Status* status_at(MPI_Status* statuses, int i) {
    return statuses == MPI_STATUSES_IGNORE ? MPI_STATUS_IGNORE : &statuses[i];
}

// Blocking waits while something is deferred: the test form, then the deferred calls, until it completes.
template <class Test>
int test_loop(Test test) {
    for (;;) {
        progress_deferred();
        int done = 0;
        const int rc = test(&done);
        if (rc != MPI_SUCCESS || done != 0) return rc;
    }
}

}  // namespace

void track_request(MPI_Request request, const CallDescriptor& call) {
    if (!debug_mode || request == MPI_REQUEST_NULL) return;
    Tracked& t = tracked();
    std::scoped_lock lock(t.mutex);
    t.requests[request] = call;
}

std::vector<std::string> tracked_never_completed() {
    Tracked& t = tracked();
    std::scoped_lock lock(t.mutex);
    std::vector<std::string> calls;
    for (const auto& [request, call] : t.requests) {
        calls.push_back(std::string(call.function) + " at " + base::describe_call_site(call.caller));
    }
    return calls;
}

}  // namespace lockstep::check

using namespace lockstep::check;

namespace {

CallDescriptor wait_call(const char* function, int count, const MPI_Request* requests, const void* caller) {
    return CallDescriptor{function, MPI_COMM_NULL,          kNoPeer,  kNoTag, count, MPI_DATATYPE_NULL,
                          caller,   CallKind::PointToPoint, requests, count};
}

}  // namespace

LOCKSTEP_CHECK_ENTRY int MPI_Wait(MPI_Request* request, MPI_Status* status) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Wait(request, status));
    CallScope scope(wait_call("MPI_Wait", 1, request, LOCKSTEP_CHECK_CALLER()));
    const MPI_Request handle = *request;
    const int rc = debug_mode && deferred_pending() ? wait_progressing(request, status) : PMPI_Wait(request, status);
    return scope.returned(rc == MPI_SUCCESS ? completed(handle, rc, status) : rc);
}

LOCKSTEP_CHECK_ENTRY int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Waitall(count, requests, statuses));
    CallScope scope(wait_call("MPI_Waitall", count, requests, LOCKSTEP_CHECK_CALLER()));
    save(count, requests);
    int rc = debug_mode && deferred_pending()
                 ? test_loop([&](int* done) { return PMPI_Testall(count, requests, done, statuses); })
                 : PMPI_Waitall(count, requests, statuses);
    if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) return scope.returned(rc);
    for (int i = 0; i < count; ++i) rc = completed(saved[static_cast<std::size_t>(i)], rc, status_at(statuses, i));
    return scope.returned(rc);
}

LOCKSTEP_CHECK_ENTRY int MPI_Waitany(int count, MPI_Request requests[], int* index, MPI_Status* status) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Waitany(count, requests, index, status));
    CallScope scope(wait_call("MPI_Waitany", count, requests, LOCKSTEP_CHECK_CALLER()));
    save(count, requests);
    const int rc = debug_mode && deferred_pending()
                       ? test_loop([&](int* done) { return PMPI_Testany(count, requests, index, done, status); })
                       : PMPI_Waitany(count, requests, index, status);
    if (rc != MPI_SUCCESS || *index == MPI_UNDEFINED) return scope.returned(rc);
    return scope.returned(completed(saved[static_cast<std::size_t>(*index)], rc, status));
}

LOCKSTEP_CHECK_ENTRY int MPI_Waitsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                                      MPI_Status statuses[]) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Waitsome(incount, requests, outcount, indices, statuses));
    CallScope scope(wait_call("MPI_Waitsome", incount, requests, LOCKSTEP_CHECK_CALLER()));
    save(incount, requests);
    int rc = debug_mode && deferred_pending() ? test_loop([&](int* done) {
        const int r = PMPI_Testsome(incount, requests, outcount, indices, statuses);
        *done = *outcount != 0 ? 1 : 0;
        return r;
    })
                                              : PMPI_Waitsome(incount, requests, outcount, indices, statuses);
    if ((rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) || *outcount == MPI_UNDEFINED) return scope.returned(rc);
    for (int k = 0; k < *outcount; ++k) {
        rc = completed(saved[static_cast<std::size_t>(indices[k])], rc, status_at(statuses, k));
    }
    return scope.returned(rc);
}

LOCKSTEP_CHECK_ENTRY int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Test(request, flag, status));
    const MPI_Request handle = *request;
    if (debug_mode && deferred_pending()) progress_deferred();
    const int rc = PMPI_Test(request, flag, status);
    return rc == MPI_SUCCESS && *flag != 0 ? completed(handle, rc, status) : rc;
}

LOCKSTEP_CHECK_ENTRY int MPI_Testall(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Testall(count, requests, flag, statuses));
    save(count, requests);
    if (debug_mode && deferred_pending()) progress_deferred();
    int rc = PMPI_Testall(count, requests, flag, statuses);
    if ((rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) || *flag == 0) return rc;
    for (int i = 0; i < count; ++i) rc = completed(saved[static_cast<std::size_t>(i)], rc, status_at(statuses, i));
    return rc;
}

LOCKSTEP_CHECK_ENTRY int MPI_Testany(int count, MPI_Request requests[], int* index, int* flag, MPI_Status* status) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Testany(count, requests, index, flag, status));
    save(count, requests);
    if (debug_mode && deferred_pending()) progress_deferred();
    const int rc = PMPI_Testany(count, requests, index, flag, status);
    if (rc != MPI_SUCCESS || *flag == 0 || *index == MPI_UNDEFINED) return rc;
    return completed(saved[static_cast<std::size_t>(*index)], rc, status);
}

LOCKSTEP_CHECK_ENTRY int MPI_Testsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                                      MPI_Status statuses[]) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Testsome(incount, requests, outcount, indices, statuses));
    save(incount, requests);
    if (debug_mode && deferred_pending()) progress_deferred();
    int rc = PMPI_Testsome(incount, requests, outcount, indices, statuses);
    if ((rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) || *outcount == MPI_UNDEFINED) return rc;
    for (int k = 0; k < *outcount; ++k) {
        rc = completed(saved[static_cast<std::size_t>(indices[k])], rc, status_at(statuses, k));
    }
    return rc;
}

// A deferred collective whose request is freed still runs to its end (MPI completes a freed request's operation);
// only the program's handle goes.
LOCKSTEP_CHECK_ENTRY int MPI_Request_free(MPI_Request* request) {
    LOCKSTEP_CHECK_PASS_THROUGH(PMPI_Request_free(request));
    const MPI_Request handle = *request;
    const int rc = PMPI_Request_free(request);
    if (rc == MPI_SUCCESS) (void)completed(handle, rc, MPI_STATUS_IGNORE);
    return rc;
}
