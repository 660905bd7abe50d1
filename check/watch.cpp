// The watchdog side of the interposition library: the hooks every intercepted call makes (hooks.hpp), writing the
// program's calls on lockstep's watchdog boards (lockstep/foreign_watch.hpp).
//
// At MPI_Init the watchdog starts; every communicator the program gets (world and self included) is watched: its
// members' endpoints are exchanged with one PMPI_Allgather on the new communicator itself, the first collective on it
// on every member (collectives never match point-to-point messages, so the program's traffic is not disturbed). Then
// every intercepted call writes its record on the communicator's board, collectives on one board and sends, receives,
// probes and waits on the other: a call that outlives lockstep's timeout (LOCKSTEP_TIMEOUT) becomes the hang report,
// and the job ends with exit code 124.
//
// The per-call path: which communicator a call is on is found through a per-thread one-entry cache, then a hash map;
// with MPI_THREAD_MULTIPLE the maps (communicators, requests) take a mutex, below it only the program's one thread at a
// time touches them (MPI's rule for those levels). A wait finds the request it waits for in the table of requests the
// program started (p2p.cpp's non-blocking sends and receives, the core's non-blocking collectives).

#include "entry.hpp"
#include "hooks.hpp"

#include <lockstep/base/symbolizer.hpp>
#include <lockstep/foreign_watch.hpp>
#include <lockstep/runtime.hpp>

#include <fmt/core.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace lockstep::check {

namespace {

namespace foreign = lockstep::foreign;

// What a call that returned `rc` failed with, for the flight recorder (a string of static storage): debug mode's
// mismatch as lockstep's own calls name it, else the MPI error class's name. Only on the error path, with
// PMPI_Error_class: an MPI implementation's error codes may carry more than their class (MPICH's do).
const char* outcome_name(int rc) noexcept {
    int error_class = MPI_ERR_UNKNOWN;
    if (PMPI_Error_class(rc, &error_class) != MPI_SUCCESS) return "an MPI error code that MPI does not know";
    if (error_class == mismatch_error_class && error_class != MPI_SUCCESS) return "lockstep::SignatureMismatchError";
    return mpi_error_class_name(error_class);
}

// What the program started without blocking: enough to say in a report what a wait for it waits for.
struct RequestRecord {
    foreign::Watched* comm = nullptr;
    const char* function = "";
    foreign::Direction direction = foreign::Direction::none;
    int peer = foreign::no_peer;
    int tag = 0;
    long long count = -1;
    const char* datatype = nullptr;
    const void* caller = nullptr;
};

// The requests the program started and has not seen complete, by handle: open addressing with linear probing in a
// table allocated once, so that recording a request allocates nothing. Three quarters full, a new request goes
// unrecorded (a wait for it is then not watched); a handle MPI reuses replaces its old entry.
class RequestTable {
public:
    void put(MPI_Request key, const RequestRecord& record) noexcept {
        std::size_t i = home(key);
        while (slots_[i].key != MPI_REQUEST_NULL && slots_[i].key != key) i = (i + 1) & mask;
        if (slots_[i].key == MPI_REQUEST_NULL) {
            if (used_ >= capacity / 4 * 3) return;
            ++used_;
        }
        slots_[i] = {key, record};
    }
    [[nodiscard]] const RequestRecord* find(MPI_Request key) const noexcept {
        for (std::size_t i = home(key); slots_[i].key != MPI_REQUEST_NULL; i = (i + 1) & mask) {
            if (slots_[i].key == key) return &slots_[i].record;
        }
        return nullptr;
    }
    // Backward-shift deletion: the entries after the hole that belong before it move up, so that no probe sequence
    // is cut.
    void erase(MPI_Request key) noexcept {
        std::size_t hole = home(key);
        while (slots_[hole].key != key) {
            if (slots_[hole].key == MPI_REQUEST_NULL) return;
            hole = (hole + 1) & mask;
        }
        --used_;
        for (std::size_t next = (hole + 1) & mask; slots_[next].key != MPI_REQUEST_NULL; next = (next + 1) & mask) {
            const std::size_t want = home(slots_[next].key);
            // The entry at `next` may move to the hole unless its home lies cyclically in (hole, next].
            const bool stays = hole <= next ? (hole < want && want <= next) : (hole < want || want <= next);
            if (stays) continue;
            slots_[hole] = slots_[next];
            hole = next;
        }
        slots_[hole].key = MPI_REQUEST_NULL;
    }
    // Every request of a communicator the program freed. An erase may shift a later entry into slot i: look again.
    void erase_communicator(const foreign::Watched* comm) noexcept {
        for (std::size_t i = 0; i < capacity; ++i) {
            while (slots_[i].key != MPI_REQUEST_NULL && slots_[i].record.comm == comm) erase(slots_[i].key);
        }
    }

private:
    static constexpr std::size_t capacity = 4096;  // a power of two
    static constexpr std::size_t mask = capacity - 1;
    struct Slot {
        MPI_Request key = MPI_REQUEST_NULL;
        RequestRecord record;
    };
    // Open MPI's handles are pointers, MPICH's integers: either is mixed (Fibonacci hashing) into the table's range.
    template <class Handle>
    static std::uint64_t bits(Handle h) noexcept {
        if constexpr (std::is_pointer_v<Handle>) {
            return reinterpret_cast<std::uintptr_t>(h);
        } else {
            return static_cast<std::uint64_t>(h);
        }
    }
    static std::size_t home(MPI_Request key) noexcept {
        return static_cast<std::size_t>((bits(key) * 0x9E3779B97F4A7C15ULL) >> 52);  // the top 12 bits: 4096 slots
    }
    std::vector<Slot> slots_ = std::vector<Slot>(capacity);
    std::size_t used_ = 0;
};

struct WatchState {
    bool on = false;       // the watchdog runs and a timeout is set
    bool threads = false;  // MPI_THREAD_MULTIPLE: the maps take the mutex
    double timeout = 0.0;
    int any_source = MPI_ANY_SOURCE;
    std::mutex mutex;
    std::unordered_map<MPI_Comm, foreign::Watched*> comms;
    std::unordered_map<MPI_Comm, std::uint64_t> duplicates_made;  // MPI_Comm_idup's of each communicator so far
    RequestTable requests;
    // Bumped whenever a communicator is forgotten: the per-thread caches of the last communicator compare it.
    std::atomic<std::uint64_t> generation{1};
};

WatchState& state() {
    static WatchState* s = new WatchState();  // never destroyed: calls may come during exit
    return *s;
}

// The mutex when threads share the maps, nothing otherwise.
class MapLock {
public:
    explicit MapLock(WatchState& s) : lock_(s.mutex, std::defer_lock) {
        if (s.threads) lock_.lock();
    }

private:
    std::unique_lock<std::mutex> lock_;
};

struct CommCache {
    MPI_Comm comm = MPI_COMM_NULL;
    foreign::Watched* watched = nullptr;
    std::uint64_t generation = 0;
};
thread_local CommCache last_comm __attribute__((tls_model("initial-exec")));

foreign::Watched* watched_of(MPI_Comm comm) noexcept {
    WatchState& s = state();
    const std::uint64_t generation = s.generation.load(std::memory_order_acquire);
    if (last_comm.comm == comm && last_comm.generation == generation) return last_comm.watched;
    foreign::Watched* found = nullptr;
    {
        const MapLock lock(s);
        if (const auto it = s.comms.find(comm); it != s.comms.end()) found = it->second;
    }
    last_comm = {comm, found, generation};
    return found;
}

// The name of a predefined datatype (a static string), or null for a derived one.
const char* datatype_name(MPI_Datatype t) noexcept {
#define LOCKSTEP_CHECK_TYPE(name) \
    if (t == name) return #name;
    LOCKSTEP_CHECK_TYPE(MPI_INT)
    LOCKSTEP_CHECK_TYPE(MPI_DOUBLE)
    LOCKSTEP_CHECK_TYPE(MPI_FLOAT)
    LOCKSTEP_CHECK_TYPE(MPI_CHAR)
    LOCKSTEP_CHECK_TYPE(MPI_BYTE)
    LOCKSTEP_CHECK_TYPE(MPI_LONG)
    LOCKSTEP_CHECK_TYPE(MPI_LONG_LONG)
    LOCKSTEP_CHECK_TYPE(MPI_UNSIGNED)
    LOCKSTEP_CHECK_TYPE(MPI_UNSIGNED_LONG)
    LOCKSTEP_CHECK_TYPE(MPI_UNSIGNED_LONG_LONG)
    LOCKSTEP_CHECK_TYPE(MPI_SHORT)
    LOCKSTEP_CHECK_TYPE(MPI_UNSIGNED_CHAR)
    LOCKSTEP_CHECK_TYPE(MPI_SIGNED_CHAR)
    LOCKSTEP_CHECK_TYPE(MPI_LONG_DOUBLE)
    LOCKSTEP_CHECK_TYPE(MPI_C_BOOL)
    LOCKSTEP_CHECK_TYPE(MPI_INT8_T)
    LOCKSTEP_CHECK_TYPE(MPI_INT16_T)
    LOCKSTEP_CHECK_TYPE(MPI_INT32_T)
    LOCKSTEP_CHECK_TYPE(MPI_INT64_T)
    LOCKSTEP_CHECK_TYPE(MPI_UINT8_T)
    LOCKSTEP_CHECK_TYPE(MPI_UINT16_T)
    LOCKSTEP_CHECK_TYPE(MPI_UINT32_T)
    LOCKSTEP_CHECK_TYPE(MPI_UINT64_T)
    LOCKSTEP_CHECK_TYPE(MPI_C_DOUBLE_COMPLEX)
    LOCKSTEP_CHECK_TYPE(MPI_C_FLOAT_COMPLEX)
    LOCKSTEP_CHECK_TYPE(MPI_DOUBLE_INT)
    LOCKSTEP_CHECK_TYPE(MPI_FLOAT_INT)
    LOCKSTEP_CHECK_TYPE(MPI_2INT)
    LOCKSTEP_CHECK_TYPE(MPI_PACKED)
#undef LOCKSTEP_CHECK_TYPE
    return t == MPI_DATATYPE_NULL ? nullptr : "a derived datatype";
}

int peer_of(int peer) noexcept {
    if (peer == kNoPeer) return foreign::no_peer;
    if (peer == state().any_source) return foreign::any_source;
    return peer;
}

int tag_of(int tag) noexcept {
    if (tag == kNoTag) return 0;
    return tag == MPI_ANY_TAG ? foreign::any_tag : tag;
}

foreign::Call call_of(const CallDescriptor& d, foreign::Direction direction) noexcept {
    return {.name = d.function,
            .direction = direction,
            .peer = peer_of(d.peer),
            .tag = tag_of(d.tag),
            .count = d.datatype == MPI_DATATYPE_NULL ? -1 : static_cast<std::int64_t>(d.count),
            .datatype = datatype_name(d.datatype),
            .caller = d.caller};
}

// A token says which board to end: the communicator, with the low bit set for the point-to-point board.
CallToken token_of(foreign::Watched* w, bool point_to_point) noexcept {
    return reinterpret_cast<CallToken>(w) | (point_to_point ? 1U : 0U);
}

// A wait: the first of its requests the program started and has not seen complete.
std::optional<RequestRecord> request_waited_for(const CallDescriptor& call) noexcept {
    if (call.requests == nullptr || call.request_count <= 0) return std::nullopt;
    WatchState& s = state();
    const MapLock lock(s);
    for (int i = 0; i < call.request_count; ++i) {
        if (call.requests[i] == MPI_REQUEST_NULL) continue;
        if (const RequestRecord* r = s.requests.find(call.requests[i]); r != nullptr) return *r;
    }
    return std::nullopt;
}

foreign::WatchOptions options(std::string name) {
    const WatchState& s = state();
    return {.timeout = s.timeout, .threads_share_point_to_point = s.threads, .name = std::move(name)};
}

void remember(MPI_Comm comm, foreign::Watched* watched) {
    WatchState& s = state();
    const MapLock lock(s);
    if (auto [it, added] = s.comms.emplace(comm, watched); !added) {
        foreign::forget(it->second);
        it->second = watched;
    }
    s.generation.fetch_add(1, std::memory_order_acq_rel);
}

void watch_communicator(MPI_Comm comm, std::string name) {
    int inter = 0;
    PMPI_Comm_test_inter(comm, &inter);
    if (inter != 0) return;  // an intercommunicator's calls are not watched
    int size = 0;
    PMPI_Comm_size(comm, &size);
    const foreign::EndpointBytes mine = foreign::endpoint();
    std::vector<foreign::EndpointBytes> members(static_cast<std::size_t>(size));
    if (PMPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, members.data(),
                       static_cast<int>(mine.size()), MPI_BYTE, comm) != MPI_SUCCESS) {
        return;
    }
    remember(comm, foreign::watch(members, options(std::move(name))));
}

// A non-blocking duplicate is not usable before its request completes, so no exchange can run on it: it is registered
// with its parent's members (the same, in the same order), under an id derived from the parent's.
void watch_nonblocking_duplicate(MPI_Comm comm, MPI_Comm parent, const char* function) {
    WatchState& s = state();
    foreign::Watched* of = nullptr;
    std::uint64_t index = 0;
    {
        const MapLock lock(s);
        const auto it = s.comms.find(parent);
        if (it == s.comms.end()) return;
        of = it->second;
        index = s.duplicates_made[parent]++;
    }
    remember(comm, foreign::watch_duplicate(of, index, options(fmt::format("a communicator from {}", function))));
}

}  // namespace

// p2p.cpp's: a send, receive or probe (the direction of its data), and a request it started.
CallToken point_to_point_begin(const CallDescriptor& call, foreign::Direction direction) noexcept {
    if (!state().on) return 0;
    foreign::Watched* w = watched_of(call.comm);
    if (w == nullptr) return 0;
    foreign::begin_point_to_point(w, call_of(call, direction));
    return token_of(w, true);
}

void request_begun(MPI_Request request, const CallDescriptor& call, foreign::Direction direction) noexcept {
    WatchState& s = state();
    if (!s.on || request == MPI_REQUEST_NULL) return;
    foreign::Watched* w = watched_of(call.comm);
    if (w == nullptr) return;
    try {
        const MapLock lock(s);
        s.requests.put(
            request, {w, call.function, direction, peer_of(call.peer), tag_of(call.tag),
                      call.datatype == MPI_DATATYPE_NULL ? -1 : call.count, datatype_name(call.datatype), call.caller});
    } catch (...) {  // the mutex failed: the wait is then not watched
    }
}

void on_init(int provided) noexcept {
    WatchState& s = state();
    const InsideLockstep inside;
    try {
        s.timeout = foreign::configured_timeout();
        if (s.timeout <= 0.0) return;
        int rank = 0;
        PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
        foreign::start(rank);
        // Reports name call sites with the program's debug information (function, file:line).
        foreign::set_symbolizer([](const void* address) { return base::describe_call_site(address); });
        s.threads = provided == MPI_THREAD_MULTIPLE;
        s.on = true;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "lockstep check: the watchdog did not start: %s\n", e.what());
    }
}

void on_finalize(const void* caller) noexcept {
    if (!state().on) return;
    const InsideLockstep inside;
    try {
        foreign::set_phase("in MPI_Finalize", caller);
    } catch (...) {
    }
}

CallToken call_begin(const CallDescriptor& call) noexcept {
    if (!state().on) return 0;
    if (call.kind == CallKind::Collective) {
        foreign::Watched* w = watched_of(call.comm);
        if (w == nullptr) return 0;
        foreign::begin_collective(w, call_of(call, foreign::Direction::none));
        return token_of(w, false);
    }
    if (call.requests != nullptr) {
        // A wait or test: on the board of its request's communicator, with what that request is.
        const std::optional<RequestRecord> r = request_waited_for(call);
        if (!r) return 0;
        foreign::begin_point_to_point(r->comm, {.name = call.function,
                                                .direction = r->direction,
                                                .peer = r->peer,
                                                .tag = r->tag,
                                                .count = r->count,
                                                .datatype = r->datatype,
                                                .caller = call.caller,
                                                .request = r->function,
                                                .request_caller = r->caller});
        return token_of(r->comm, true);
    }
    if (call.kind == CallKind::PointToPoint) return point_to_point_begin(call, foreign::Direction::none);
    return 0;
}

void call_end(CallToken token, int rc) noexcept {
    if (token == 0) return;
    auto* w = reinterpret_cast<foreign::Watched*>(token & ~CallToken{1});
    const char* error = rc == MPI_SUCCESS ? nullptr : outcome_name(rc);
    if ((token & 1U) != 0) {
        foreign::end_point_to_point(w, error);
    } else {
        foreign::end_collective(w, error);
    }
}

void request_started(MPI_Request request, const CallDescriptor& call) noexcept {
    request_begun(request, call, foreign::Direction::none);
}

void request_completed(MPI_Request request) noexcept {
    WatchState& s = state();
    if (!s.on) return;
    const MapLock lock(s);
    s.requests.erase(request);
}

void communicator_created(MPI_Comm created, MPI_Comm parent, const char* function, const void* /*caller*/) noexcept {
    if (!state().on || created == MPI_COMM_NULL) return;
    const InsideLockstep inside;
    try {
        if (created == MPI_COMM_SELF) return;  // its collectives cannot wait for anyone
        if (std::string_view(function).starts_with("MPI_Comm_idup")) {
            watch_nonblocking_duplicate(created, parent, function);
            return;
        }
        watch_communicator(created, created == MPI_COMM_WORLD ? std::string("MPI_COMM_WORLD")
                                                              : fmt::format("a communicator from {}", function));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "lockstep check: a communicator is not watched: %s\n", e.what());
    }
}

void communicator_freed(MPI_Comm comm) noexcept {
    WatchState& s = state();
    if (!s.on) return;
    const InsideLockstep inside;
    foreign::Watched* w = nullptr;
    {
        const MapLock lock(s);
        if (const auto it = s.comms.find(comm); it != s.comms.end()) {
            w = it->second;
            s.comms.erase(it);
            s.duplicates_made.erase(comm);
        }
        if (w != nullptr) s.requests.erase_communicator(w);
        s.generation.fetch_add(1, std::memory_order_acq_rel);
    }
    foreign::forget(w);
}

}  // namespace lockstep::check
