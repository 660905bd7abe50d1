// The run of a checked collective (debug mode): the signature exchange on the communicator's shadow, for the
// v-variants the per-peer comparison, then the payload.
//
// The exchanges are point-to-point messages on the shadow (each process sends its record to every other), never
// collectives: MPI matches a blocking point-to-point call with a non-blocking one, whereas it never matches a blocking
// collective with a non-blocking one, and whether a call must keep deferred ones moving while it waits (and so cannot
// block) differs between processes. Messages between two processes on one shadow arrive in the order they were sent,
// and every process makes its exchanges in the order of its calls, so the k-th record from a peer is its k-th call's.
// Tags keep the stages apart. The record is a digest of numbers (CheckDigest, under the size above which shared-memory
// transports slow down); the names and call sites travel only in the exchange a report makes. The payload keeps the
// program's form. A blocking collective made while no non-blocking one is in flight waits for its exchanges in
// PMPI_Waitall, then runs its payload (check_blocking_now: one state per thread whose buffers are kept, no
// allocation). A non-blocking one gets a generalized request (MPI_Grequest_start) as the program's handle, joins the
// queue of deferred calls, and posts its exchange with non-blocking calls; its payload starts only once the exchange
// agreed, and the request completes when the payload has. Deferred calls move on in progress_deferred, which every
// intercepted blocking call runs while it waits (a blocking call made while something is deferred joins the queue and
// waits for its turn the same way, up to its payload, which it then runs as the blocking call it is), so a correct
// program that waits for a non-blocking collective on one process while its peer blocks elsewhere still runs: the
// peer's wait moves its deferred call on.
//
// MPI wants the collectives of one communicator started in the same order on every process, and the exchanges on the
// shadow must follow the order of the calls: only the oldest deferred call of a communicator that has not started its
// payload posts exchanges, so that every process posts them, and starts the payloads, in the order of its calls.

#include "collective.hpp"
#include "entry.hpp"
#include "python_site.hpp"
#include "type_signature.hpp"

#include <lockstep/base/symbolizer.hpp>

#include <algorithm>
#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <unordered_map>

namespace lockstep::check {
namespace {

enum class Stage { Exchange, Transpose, Verdict, StartPayload, Payload, Done };

struct Pending {
    CollectiveCall call;
    CommunicatorRecord* comm = nullptr;
    Stage stage = Stage::Exchange;
    bool posted = false;                // the current stage's exchange is in flight
    std::vector<MPI_Request> messages;  // its sends and receives
    MPI_Request payload = MPI_REQUEST_NULL;
    MPI_Request user = MPI_REQUEST_NULL;  // the program's handle; null for a blocking call
    CheckDigest mine{};
    std::vector<CheckDigest> mine_out;  // mine, once per peer, while the sends are in flight
    std::vector<CheckDigest> all;
    std::vector<SideSignature> sends;
    std::vector<SideSignature> received;
    Verdict verdict{};
    std::vector<Verdict> verdict_out;
    std::vector<Verdict> verdicts;
    int error = MPI_SUCCESS;
};

struct Engine {
    std::mutex mutex;
    std::deque<std::shared_ptr<Pending>> queue;  // not done, in the order of the program's calls
    std::unordered_map<MPI_Request, std::shared_ptr<Pending>> by_request;  // handles the program holds
    // Datatypes the program freed while a deferred call that uses them had not started its payload: freed once none
    // does (MPI keeps a type alive for the operations started with it, not for those still to start).
    std::vector<MPI_Datatype> postponed_frees;
    std::atomic<int> active{0};
    std::vector<MPI_Comm> waiting;  // progress_locked's, kept from call to call
    // Calls that neither the queue nor the program's handles hold any more, their buffers kept for the next.
    std::vector<std::shared_ptr<Pending>> spare;

    // Drops `p`, keeping it for reuse where nothing else holds it.
    void release(std::shared_ptr<Pending>&& p) {
        if (p.use_count() == 1 && spare.size() < 64) spare.push_back(std::move(p));
        p.reset();
    }
    // A fresh call's state (under the mutex).
    std::shared_ptr<Pending> take() {
        if (spare.empty()) return std::make_shared<Pending>();
        std::shared_ptr<Pending> p = std::move(spare.back());
        spare.pop_back();
        p->stage = Stage::Exchange;
        p->posted = false;
        p->payload = MPI_REQUEST_NULL;
        p->user = MPI_REQUEST_NULL;
        p->verdict = Verdict{};
        p->error = MPI_SUCCESS;
        return p;
    }
};

Engine& engine() {
    static auto* e = new Engine;
    return *e;
}

// The generalized request's callbacks: a collective's status has no source, tag or count.
int query_status(void* /*state*/, MPI_Status* status) {
    PMPI_Status_set_elements(status, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(status, 0);
    status->MPI_SOURCE = MPI_UNDEFINED;
    status->MPI_TAG = MPI_UNDEFINED;
    return MPI_SUCCESS;
}
int free_state(void* /*state*/) {
    return MPI_SUCCESS;
}
int cancel_nothing(void* /*state*/, int /*complete*/) {
    return MPI_SUCCESS;
}  // collectives cannot be cancelled

// The stages' tags on the shadow.
enum Tag : int { kRecordTag = 1, kTransposeTag, kVerdictTag, kSiteTag };

// Posts an exchange on the shadow: `out[j]` goes to process j, `in[j]` comes from it (out[me] is copied to in[me]).
template <class T>
int post_exchange(const std::vector<T>& out, std::vector<T>& in, const CommunicatorRecord& comm, Tag tag,
                  std::vector<MPI_Request>& messages) {
    in.resize(static_cast<std::size_t>(comm.size));
    in[static_cast<std::size_t>(comm.rank)] = out[static_cast<std::size_t>(comm.rank)];
    messages.clear();
    for (int j = 0; j < comm.size; ++j) {
        if (j == comm.rank) continue;
        messages.push_back(MPI_REQUEST_NULL);
        if (const int rc = PMPI_Irecv(&in[static_cast<std::size_t>(j)], sizeof(T), MPI_BYTE, j, tag, comm.shadow,
                                      &messages.back());
            rc != MPI_SUCCESS) {
            return rc;
        }
    }
    for (int j = 0; j < comm.size; ++j) {
        if (j == comm.rank) continue;
        messages.push_back(MPI_REQUEST_NULL);
        if (const int rc = PMPI_Isend(&out[static_cast<std::size_t>(j)], sizeof(T), MPI_BYTE, j, tag, comm.shadow,
                                      &messages.back());
            rc != MPI_SUCCESS) {
            return rc;
        }
    }
    return MPI_SUCCESS;
}

// The same record to every process (`out` keeps it until the sends complete).
template <class T>
int post_allgather(const T& mine, std::vector<T>& out, std::vector<T>& all, const CommunicatorRecord& comm, Tag tag,
                   std::vector<MPI_Request>& messages) {
    out.assign(static_cast<std::size_t>(comm.size), mine);
    return post_exchange(out, all, comm, tag, messages);
}

// Whether the current stage's exchange is done (posting it first; `blocking`: waiting for it); false: come back later.
template <class Post>
bool round_done(Pending& p, bool blocking, Post post) {
    if (!p.posted) {
        p.posted = true;
        if (const int rc = post(); rc != MPI_SUCCESS) {
            p.error = rc;
            p.stage = Stage::Done;
            return false;
        }
    }
    int flag = 0;
    const int count = static_cast<int>(p.messages.size());
    if (blocking) {
        PMPI_Waitall(count, p.messages.data(), MPI_STATUSES_IGNORE);
        flag = 1;
    } else {
        PMPI_Testall(count, p.messages.data(), &flag, MPI_STATUSES_IGNORE);
    }
    if (flag == 0) return false;
    p.posted = false;
    return true;
}

void finish(Pending& p) {
    p.stage = Stage::Done;
    if (p.user != MPI_REQUEST_NULL) PMPI_Grequest_complete(p.user);
}

// What a report needs of each process, exchanged once a disagreement was found: its call with names and its call site.
struct ReportPart {
    CheckRecord record;
    detail::FixedText<200> site;
};
static_assert(detail::FixedRecord<ReportPart>);

// Every process found the same disagreement: one more exchange brings every process's call, named, and call site;
// `headline` makes the headline from the records; then the report.
template <class Headline>
void fail(Pending& p, Headline headline) {
    ReportPart part{};
    part.record = make_record(p.call, *p.comm, p.mine.call_number);
    part.site.assign(report_call_site(p.call.caller), true);
    std::vector<ReportPart> out;
    std::vector<ReportPart> parts;
    std::vector<CheckRecord> records;
    std::vector<std::string> site_texts;
    if (post_allgather(part, out, parts, *p.comm, kSiteTag, p.messages) == MPI_SUCCESS &&
        PMPI_Waitall(static_cast<int>(p.messages.size()), p.messages.data(), MPI_STATUSES_IGNORE) == MPI_SUCCESS) {
        for (const auto& s : parts) {
            records.push_back(s.record);
            site_texts.push_back(s.site.str());
        }
    } else {  // only this process's call is known
        records.assign(static_cast<std::size_t>(p.comm->size), part.record);
        site_texts.assign(static_cast<std::size_t>(p.comm->size), "an unknown call site");
    }
    p.error = handle_mismatch(*p.comm, mismatch_report(*p.comm, headline(records), records, site_texts));
    finish(p);
}

// Moves `p` on as far as it goes now (blocking: waiting for every exchange). A blocking call ends at its payload,
// which its caller runs.
void step(Pending& p, bool blocking) {
    const int size = p.comm->size;
    const CommunicatorRecord& comm = *p.comm;
    for (;;) {
        switch (p.stage) {
            case Stage::Exchange:
                if (!round_done(p, blocking, [&] {
                        return post_allgather(p.mine, p.mine_out, p.all, comm, kRecordTag, p.messages);
                    })) {
                    return;
                }
                if (const auto found = compare_records(p.call.rule, p.all)) {
                    return fail(p, [&](const std::vector<CheckRecord>& all) { return headline(*found, all); });
                }
                p.stage = needs_transpose(p.call.rule)  ? Stage::Transpose
                          : needs_verdicts(p.call.rule) ? Stage::Verdict
                                                        : Stage::StartPayload;
                break;
            case Stage::Transpose:
                if (!round_done(p, blocking, [&] {
                        p.sends = sends_to_peers(p.call, size);
                        return post_exchange(p.sends, p.received, comm, kTransposeTag, p.messages);
                    })) {
                    return;
                }
                p.stage = Stage::Verdict;
                break;
            case Stage::Verdict:
                if (!round_done(p, blocking, [&] {
                        p.verdict = local_verdict(p.call, *p.comm, p.all, p.received);
                        return post_allgather(p.verdict, p.verdict_out, p.verdicts, comm, kVerdictTag, p.messages);
                    })) {
                    return;
                }
                for (const Verdict& v : p.verdicts) {
                    if (v.mismatches != 0) {
                        return fail(p, [&](const std::vector<CheckRecord>& all) {
                            name_peer_sides(p.call.rule, p.verdicts, all);
                            return verdict_headline(all.front(), p.verdicts);
                        });
                    }
                }
                p.stage = Stage::StartPayload;
                break;
            case Stage::StartPayload:
                if (p.user == MPI_REQUEST_NULL) {
                    // A blocking call: the caller runs its payload, outside the queue.
                    p.stage = Stage::Done;
                    return;
                }
                if (const int rc = p.call.start(&p.payload); rc != MPI_SUCCESS) {
                    p.error = rc;
                    return finish(p);
                }
                p.stage = Stage::Payload;
                break;
            case Stage::Payload: {
                int flag = 0;
                if (const int rc = PMPI_Test(&p.payload, &flag, MPI_STATUS_IGNORE); rc != MPI_SUCCESS) {
                    p.error = rc;
                    return finish(p);
                }
                if (flag == 0) return;
                return finish(p);
            }
            case Stage::Done:
                return;
        }
    }
}

// Whether a deferred call that has not started its payload uses `type`.
bool waiting_call_uses(const Engine& e, MPI_Datatype type) {
    for (const auto& p : e.queue) {
        if (p->stage >= Stage::Payload) continue;
        const CollectiveCall& c = p->call;
        if (c.sendtype == type || c.recvtype == type) return true;
        for (int j = 0; c.rule == Rule::Alltoallw && j < p->comm->size; ++j) {
            if (c.sendtypes[j] == type || c.recvtypes[j] == type) return true;
        }
    }
    return false;
}

void progress_locked(Engine& e) {
    // The communicators whose oldest deferred call has not started its payload (few: a linear search).
    std::vector<MPI_Comm>& waiting = e.waiting;
    waiting.clear();
    const auto is_waiting = [&](MPI_Comm comm) {
        return std::find(waiting.begin(), waiting.end(), comm) != waiting.end();
    };
    for (const auto& p : e.queue) {
        const bool before_payload = p->stage < Stage::Payload;
        if (before_payload && is_waiting(p->call.comm)) continue;
        step(*p, false);
        if (p->stage < Stage::Payload && !is_waiting(p->call.comm)) waiting.push_back(p->call.comm);
    }
    std::size_t kept = 0;
    for (std::size_t i = 0; i < e.queue.size(); ++i) {
        if (e.queue[i]->stage == Stage::Done) {
            e.release(std::move(e.queue[i]));
        } else if (kept++ != i) {
            e.queue[kept - 1] = std::move(e.queue[i]);
        }
    }
    e.queue.resize(kept);
    std::erase_if(e.postponed_frees, [&](MPI_Datatype type) {
        if (waiting_call_uses(e, type)) return false;
        forget_type_signature(type);  // looked up again since it was freed
        PMPI_Type_free(&type);
        return true;
    });
    e.active.store(static_cast<int>(e.queue.size()), std::memory_order_relaxed);
}

}  // namespace

bool deferred_pending() noexcept {
    return engine().active.load(std::memory_order_relaxed) != 0;
}

void progress_deferred() {
    Engine& e = engine();
    const InsideLockstep inside;
    std::scoped_lock lock(e.mutex);
    progress_locked(e);
}

int wait_progressing(MPI_Request* request, MPI_Status* status) {
    for (;;) {
        progress_deferred();
        int flag = 0;
        const int rc = PMPI_Test(request, &flag, status);
        if (rc != MPI_SUCCESS || flag != 0) return rc;
    }
}

int run_checked(CollectiveCall call, MPI_Request* request) {
    const InsideLockstep inside;
    CommunicatorRecord* comm = find_communicator(call.comm);
    if (comm == nullptr || comm->shadow == MPI_COMM_NULL) {
        // Not checked (an intercommunicator, MPI_COMM_NULL: MPI reports the latter).
        return request != nullptr ? call.start(request) : call.run();
    }
    if (request == nullptr) {
        if (const auto checked = check_blocking_now(call)) return *checked != MPI_SUCCESS ? *checked : call.run();
    }
    ++comm->collectives;
    Engine& e = engine();
    std::shared_ptr<Pending> p;
    {
        std::scoped_lock lock(e.mutex);
        p = e.take();
    }
    p->call = std::move(call);
    p->comm = comm;
    p->mine = make_digest(p->call, *comm);
    if (request != nullptr) {
        if (const int rc = PMPI_Grequest_start(query_status, free_state, cancel_nothing, nullptr, &p->user);
            rc != MPI_SUCCESS) {
            return rc;
        }
        *request = p->user;
    }
    {
        std::scoped_lock lock(e.mutex);
        e.queue.push_back(p);
        if (request != nullptr) e.by_request[p->user] = p;
        progress_locked(e);
    }
    if (request != nullptr) return MPI_SUCCESS;
    while (p->stage != Stage::Done) progress_deferred();
    return p->error != MPI_SUCCESS ? p->error : p->call.run();
}

std::optional<int> check_blocking_now(const CollectiveCall& call) {
    const InsideLockstep inside;
    CommunicatorRecord* comm = find_communicator(call.comm);
    if (comm == nullptr || comm->shadow == MPI_COMM_NULL) return MPI_SUCCESS;  // not checked (run_checked's case)
    // One call's state per thread, its buffers kept from call to call; a call made while it is in use (from an error
    // handler the program set) takes the general way.
    thread_local Pending p;
    thread_local bool in_use = false;
    if (in_use || deferred_pending()) return std::nullopt;
    in_use = true;
    ++comm->collectives;
    p.call = call;
    p.comm = comm;
    p.stage = Stage::Exchange;
    p.posted = false;
    p.error = MPI_SUCCESS;
    p.mine = make_digest(call, *comm);
    step(p, true);
    in_use = false;
    return p.error;
}

bool postpone_type_free(MPI_Datatype type) {
    if (!deferred_pending()) return false;
    Engine& e = engine();
    std::scoped_lock lock(e.mutex);
    if (!waiting_call_uses(e, type)) return false;
    e.postponed_frees.push_back(type);
    return true;
}

// ------------------------------------------------------------------ the program's requests (requests.cpp)

DeferredOutcome take_deferred(MPI_Request request) {
    Engine& e = engine();
    std::scoped_lock lock(e.mutex);
    const auto it = e.by_request.find(request);
    if (it == e.by_request.end()) return {false, MPI_SUCCESS};
    const int error = it->second->error;
    e.release(std::move(it->second));
    e.by_request.erase(it);
    return {true, error};
}

std::vector<std::string> deferred_never_completed() {
    Engine& e = engine();
    std::scoped_lock lock(e.mutex);
    std::vector<std::string> calls;
    for (const auto& [request, p] : e.by_request) {
        calls.push_back(std::string(p->call.function) + " at " + base::describe_call_site(p->call.caller));
    }
    return calls;
}

}  // namespace lockstep::check
