// The shared state's outcome and the process's registry of non-blocking operations not yet settled.

#include "../watchdog/report.hpp"
#include "queue.hpp"

#include <lockstep/errors.hpp>
#include <lockstep/logging.hpp>
#include <lockstep/runtime.hpp>

#include <fmt/core.h>

#include <map>
#include <set>
#include <thread>

namespace lockstep::detail {

void WorkState::complete(std::exception_ptr failure) {
    {
        std::scoped_lock lock(done_mutex);
        // The first outcome stands: a collective the watchdog failed (on_timeout raise) may still return later.
        if (phase.load(std::memory_order_acquire) == WorkPhase::Done) return;
        error = std::move(failure);
        phase.store(WorkPhase::Done, std::memory_order_release);
    }
    done_cv.notify_all();
}

const char* WorkState::phase_text() const noexcept {
    switch (phase.load(std::memory_order_acquire)) {
        case WorkPhase::Queued:
            return collective() ? "queued, not started" : "posted, not matched yet";
        case WorkPhase::Running:
            return "running";
        case WorkPhase::Done:
            break;
    }
    return error != nullptr ? "failed" : "completed";
}

std::string WorkState::text() const {
    return fmt::format("request #{}: {} issued at {}", id, what(), site());
}

std::string WorkState::what() const {
    if (!collective()) return record_text(record);
    // A collective has no call number until it runs.
    CallRecord r = record;
    r.sequence = 0;
    std::string s = record_text(r);
    if (const auto hash = s.find(" #0"); hash != std::string::npos) s.erase(hash, 3);
    return s;
}

std::string WorkState::site() const {
    return site_text(record);
}

namespace {

struct Registry {
    std::mutex mutex;
    std::map<std::uint64_t, std::shared_ptr<WorkState>> works;  // by id: in issue order
    std::set<AsyncQueue*> queues;
    bool hooked = false;
};

Registry& registry() {
    static auto* r = new Registry;  // never destroyed: states may be settled from threads at exit
    return *r;
}

std::string error_text(const std::exception_ptr& error) {
    try {
        std::rethrow_exception(error);
    } catch (const std::exception& e) {
        const std::string what = e.what();
        return what.substr(0, what.find('\n'));
    } catch (...) {
        return "an exception of unknown type";
    }
}

}  // namespace
void retire_unsettled(std::uint64_t comm_id, std::string_view when);
namespace {

// At finalize, while MPI still runs: names what was never waited for, then lets every queue finish its collectives
// (a communicator freed after MPI_Finalize could no longer run them).
void at_finalize() {
    {
        std::scoped_lock lock(registry().mutex);
        registry().hooked = false;  // a runtime initialised again registers it again
    }
    std::vector<AsyncQueue*> queues;
    {
        std::scoped_lock lock(registry().mutex);
        queues.assign(registry().queues.begin(), registry().queues.end());
    }
    for (AsyncQueue* q : queues) q->drain();
    retire_unsettled(0, "the runtime finalized");
}

void hook_finalize(Registry& r) {
    if (r.hooked) return;
    r.hooked = true;
    at_runtime_finalize(at_finalize);
}

}  // namespace

std::uint64_t next_work_id() noexcept {
    static std::atomic<std::uint64_t> counter{0};
    return counter.fetch_add(1, std::memory_order_relaxed) + 1;
}

void register_work(const std::shared_ptr<WorkState>& state) {
    Registry& r = registry();
    std::scoped_lock lock(r.mutex);
    hook_finalize(r);
    r.works.emplace(state->id, state);
}

void settle_work(const WorkState& state) {
    Registry& r = registry();
    std::scoped_lock lock(r.mutex);
    r.works.erase(state.id);
}

namespace {

// A send or receive not completed when its communicator goes: cancelled, and given up to a second to say so. One that
// still has not completed (a send MPI cannot cancel) keeps its buffer for the life of the process, since MPI may still
// read or write it.
void cancel(const std::shared_ptr<WorkState>& w) {
    std::scoped_lock lock(w->progress_mutex);
    if (w->done() || w->request == MPI_REQUEST_NULL) return;
    MPI_Cancel(&w->request);
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    int flag = 0;
    while (flag == 0 && std::chrono::steady_clock::now() < limit) {
        if (MPI_Test(&w->request, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
        if (flag == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (flag == 0) {
        static auto* kept = new std::vector<std::shared_ptr<WorkState>>;
        kept->push_back(w);
        return;
    }
    w->complete(std::make_exception_ptr(
        DistributedOperationError("cancelled: its communicator was freed before the operation completed")));
}

}  // namespace

void retire_unsettled(std::uint64_t comm_id, std::string_view when) {
    std::vector<std::shared_ptr<WorkState>> left;
    {
        Registry& r = registry();
        std::scoped_lock lock(r.mutex);
        for (auto it = r.works.begin(); it != r.works.end();) {
            if (comm_id == 0 || it->second->record.comm_id == comm_id) {
                left.push_back(std::move(it->second));
                it = r.works.erase(it);
            } else {
                ++it;
            }
        }
    }
    if (left.empty()) return;
    std::string text = fmt::format("{} with {} never waited for:", when,
                                   left.size() == 1 ? std::string("a non-blocking operation")
                                                    : fmt::format("{} non-blocking operations", left.size()));
    int finalized = 0;
    MPI_Finalized(&finalized);
    for (const auto& w : left) {
        text += fmt::format("\n  - {} ({}", w->text(), w->phase_text());
        if (w->done() && w->error != nullptr) text += ": " + error_text(w->error);
        text += w->dropped.load() ? "; its last handle was dropped without a wait)" : ")";
        if (!w->collective() && !w->done() && finalized == 0) {
            cancel(w);
            text += w->done() ? "; cancelled" : "; MPI could not cancel it";
        }
    }
    text +=
        "\nWait for every request (its wait, or its test until it says completed) before its communicator is "
        "freed and before the runtime finalizes.";
    get_logger("lockstep.async").warning(every_rank, "{}", text);
}

nlohmann::json requests_json() {
    const auto now = std::chrono::steady_clock::now();
    nlohmann::json list = nlohmann::json::array();
    Registry& r = registry();
    std::scoped_lock lock(r.mutex);
    for (const auto& [id, w] : r.works) {
        list.push_back({{"id", id},
                        {"op", w->what()},
                        {"site", w->site()},
                        {"comm", w->record.comm_id},
                        {"state", w->phase_text()},
                        {"collective", w->collective()},
                        {"waiting", w->waiting.load(std::memory_order_relaxed) > 0},
                        {"dropped", w->dropped.load(std::memory_order_relaxed)},
                        {"seconds", std::chrono::duration<double>(now - w->issued).count()}});
    }
    return list;
}

void register_queue(AsyncQueue* queue) {
    Registry& r = registry();
    std::scoped_lock lock(r.mutex);
    hook_finalize(r);
    r.queues.insert(queue);
}

void forget_queue(AsyncQueue* queue) {
    Registry& r = registry();
    std::scoped_lock lock(r.mutex);
    r.queues.erase(queue);
}

}  // namespace lockstep::detail
