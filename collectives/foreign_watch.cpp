// The watchdog for calls lockstep does not carry (lockstep/foreign_watch.hpp): their communicators are registered with
// the process's watchdog beside lockstep's own, under ids of their own (the top bit set, so that the two counters never
// collide), and their calls are written on the same boards as records that name the MPI function.

#include <lockstep/config.hpp>
#include <lockstep/foreign_watch.hpp>

#include "recorder/dump.hpp"
#include "recorder/ring.hpp"
#include "watchdog.hpp"
#include "watchdog/report.hpp"

#include <lockstep/logging.hpp>
#include <lockstep/runtime.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

namespace lockstep::foreign {

struct Watched {
    std::uint64_t id = 0;
    std::vector<detail::Endpoint> members;  // for watch_duplicate
    detail::Board* collectives = nullptr;   // null when the timeout is 0
    detail::Board* point_to_point = nullptr;
    bool shared = false;      // point-to-point writers serialise on the board's mutex
    std::uint64_t calls = 0;  // collectives begun: their call numbers
    // The flight recorder's rings (null when it is off), and the entry of the collective in flight.
    std::shared_ptr<detail::RecordedComm> recorded;
    detail::RecordWord* entry = nullptr;
    std::uint64_t entry_number = 0;
};

namespace {

static_assert(sizeof(detail::Endpoint) == sizeof(EndpointBytes) && std::is_trivially_copyable_v<detail::Endpoint>);

constexpr std::uint64_t foreign_ids = std::uint64_t{1} << 63;

std::mutex counter_mutex;
std::uint64_t next_id = 0;  // counter_mutex: the id this process would give the next communicator

detail::CallRecord record_of(const Call& call, detail::ForeignKind kind, std::uint64_t sequence) noexcept {
    detail::CallRecord r;
    r.sequence = sequence;
    r.foreign = kind;
    r.name = call.name;
    r.root = call.peer;
    r.message_tag = call.tag;
    r.count = call.count;
    r.datatype = call.datatype;
    if (call.file != nullptr) {
        r.file = call.file;
        r.line = call.line;
        r.function = call.function != nullptr ? call.function : "";
    } else {
        r.caller = call.caller;
    }
    r.request = call.request;
    r.request_caller = call.request_caller;
    return r;
}

// The recorder's entry of a call: what the board's record says, with its issue time.
void write_recorded(detail::RecordWord* slot, const Call& call, detail::RecordedKind kind, std::uint64_t sequence,
                    std::int64_t issued) noexcept {
    using detail::RecordedCall;
    LOCKSTEP_PUT(slot, sequence, sequence);
    LOCKSTEP_PUT(slot, issued, issued);
    LOCKSTEP_PUT(slot, signature, std::int64_t{0});
    LOCKSTEP_PUT(slot, payload, issued);
    LOCKSTEP_PUT(slot, completed, std::int64_t{0});
    LOCKSTEP_PUT(slot, waited, std::int64_t{0});
    LOCKSTEP_PUT(slot, outcome, static_cast<std::uint64_t>(detail::Outcome::in_flight));
    LOCKSTEP_PUT(slot, count, call.count);
    LOCKSTEP_PUT(slot, step, std::uint64_t{0});
    LOCKSTEP_PUT(slot, file, call.file != nullptr ? call.file : "");
    LOCKSTEP_PUT(slot, function, call.file != nullptr && call.function != nullptr ? call.function : "");
    LOCKSTEP_PUT(slot, name, call.name);
    LOCKSTEP_PUT(slot, datatype, call.datatype);
    LOCKSTEP_PUT(slot, caller, call.file != nullptr ? nullptr : call.caller);
    const bool collective = kind == detail::RecordedKind::collective;
    LOCKSTEP_PUT(slot, place, (RecordedCall::Place{call.file != nullptr ? call.line : 0, collective ? call.peer : -1}));
    LOCKSTEP_PUT(slot, message, (RecordedCall::Message{collective ? -1 : call.peer, call.tag}));
    LOCKSTEP_PUT(slot, traits,
                 (RecordedCall::Traits{OpKind::Barrier, DType::Float32, 0, kind, false, false,
                                       detail::RecordedStream::calls, 0}));
}

// What the recorder calls a point-to-point call or wait of `kind` (point_to_point_kind below).
detail::RecordedKind recorded_kind(detail::ForeignKind kind) noexcept {
    if (kind == detail::ForeignKind::send) return detail::RecordedKind::send;
    if (kind == detail::ForeignKind::receive) return detail::RecordedKind::recv;
    return detail::RecordedKind::wait;
}

// The entry of this thread's point-to-point call in flight (begin and end come in pairs on one thread).
struct PointToPointEntry {
    detail::RecordWord* slot = nullptr;
    std::uint64_t number = 0;
};
thread_local PointToPointEntry point_to_point_entry;

detail::ForeignKind point_to_point_kind(Direction d) noexcept {
    switch (d) {
        case Direction::send:
            return detail::ForeignKind::send;
        case Direction::receive:
            return detail::ForeignKind::receive;
        case Direction::none:
            break;
    }
    return detail::ForeignKind::request;
}

}  // namespace

void start(int world_rank) {
    detail::Watchdog::instance().ensure_started(0, world_rank);
}

EndpointBytes endpoint() {
    detail::Endpoint e = detail::Watchdog::instance().endpoint();
    {
        std::scoped_lock lock(counter_mutex);
        e.next_comm_id = next_id;
    }
    EndpointBytes bytes;
    std::memcpy(bytes.data(), &e, sizeof e);
    return bytes;
}

double configured_timeout() {
    return config().timeout;
}

namespace {

Watched* register_watched(std::uint64_t id, std::vector<detail::Endpoint> members, WatchOptions options) {
    auto& watchdog = detail::Watchdog::instance();
    auto watched = std::make_unique<Watched>();
    watched->id = id;
    watched->members = members;
    watched->shared = options.threads_share_point_to_point;
    const std::string name = options.name;
    const detail::Boards boards =
        watchdog.register_communicator(id, std::move(members), options.timeout, std::move(options.on_timeout));
    if (!options.name.empty()) watchdog.name_communicator(id, std::move(options.name));
    if (options.timeout > 0.0) {
        watched->collectives = boards.collectives;
        watched->point_to_point = boards.point_to_point;
    }
    // This process among the members: its rank in the communicator.
    const detail::Endpoint self = watchdog.endpoint();
    int rank = 0;
    std::vector<int> world_ranks;
    for (std::size_t i = 0; i < watched->members.size(); ++i) {
        const detail::Endpoint& m = watched->members[i];
        world_ranks.push_back(m.world_rank);
        if (m.pid == self.pid && m.host.str() == self.host.str()) rank = static_cast<int>(i);
    }
    detail::set_recorded_process(self.world_rank, self.host.str());
    const int size = static_cast<int>(world_ranks.size());  // before world_ranks is moved into the call
    watched->recorded = detail::record_communicator(id, name.empty() ? "MPI communicator" : name, size, rank,
                                                    std::move(world_ranks), config().trace_calls);
    return watched.release();
}

}  // namespace

Watched* watch(std::span<const EndpointBytes> members, WatchOptions options) {
    std::vector<detail::Endpoint> endpoints(members.size());
    std::uint64_t id = 0;
    for (std::size_t i = 0; i < members.size(); ++i) {
        std::memcpy(&endpoints[i], members[i].data(), sizeof(detail::Endpoint));
        id = std::max(id, endpoints[i].next_comm_id);
    }
    {
        std::scoped_lock lock(counter_mutex);
        next_id = std::max(next_id, id + 1);
    }
    return register_watched(foreign_ids | id, std::move(endpoints), std::move(options));
}

Watched* watch_duplicate(const Watched* parent, std::uint64_t index, WatchOptions options) {
    if (parent == nullptr) return nullptr;
    // A mix of the parent's id and the index (splitmix64's finaliser): far from the counted ids, and from the
    // duplicates of other parents.
    std::uint64_t id = parent->id ^ (0x9E3779B97F4A7C15ULL * (index + 1));
    id = (id ^ (id >> 30)) * 0xBF58476D1CE4E5B9ULL;
    id = (id ^ (id >> 27)) * 0x94D049BB133111EBULL;
    id ^= id >> 31;
    return register_watched(foreign_ids | id, parent->members, std::move(options));
}

void forget(Watched* comm) noexcept {
    if (comm == nullptr) return;
    const std::unique_ptr<Watched> owned(comm);
    detail::retire_recorded(comm->recorded);
    try {
        detail::Watchdog::instance().forget_communicator(comm->id);
    } catch (...) {  // a lock that failed: the entry stays registered, harmless
    }
}

void rename(Watched* comm, std::string name) {
    if (comm == nullptr) return;
    detail::name_recorded(comm->recorded, name);
    detail::Watchdog::instance().name_communicator(comm->id, std::move(name));
}

void begin_collective(Watched* comm, const Call& call) noexcept {
    if (comm == nullptr) return;
    const std::uint64_t sequence = ++comm->calls;
    if (comm->recorded != nullptr) {
        comm->entry = comm->recorded->calls.open(comm->entry_number);
        write_recorded(comm->entry, call, detail::RecordedKind::collective, sequence, detail::ticks());
        detail::CallRing::close(comm->entry);
    }
    if (comm->collectives == nullptr) return;
    comm->collectives->begin(record_of(call, detail::ForeignKind::collective, sequence));
}

void end_collective(Watched* comm, const char* error) noexcept {
    if (comm == nullptr) return;
    if (comm->entry != nullptr && detail::CallRing::reopen(comm->entry, comm->entry_number)) {
        detail::write_end(comm->entry, detail::ticks(), error);
        detail::CallRing::close(comm->entry);
    }
    if (comm->collectives == nullptr) return;
    comm->collectives->end();
}

void begin_point_to_point(Watched* comm, const Call& call) noexcept {
    if (comm == nullptr) return;
    if (comm->recorded != nullptr) {
        PointToPointEntry& e = point_to_point_entry;
        e.slot = comm->recorded->shared.open_shared(e.number);
        write_recorded(e.slot, call, recorded_kind(point_to_point_kind(call.direction)), e.number + 1, detail::ticks());
        detail::CallRing::close(e.slot);
    }
    if (comm->point_to_point == nullptr) return;
    const detail::CallRecord r = record_of(call, point_to_point_kind(call.direction), 0);
    if (comm->shared) {
        comm->point_to_point->begin_shared(r);
    } else {
        comm->point_to_point->begin(r);
    }
}

void end_point_to_point(Watched* comm, const char* error) noexcept {
    if (comm == nullptr) return;
    if (PointToPointEntry& e = point_to_point_entry; e.slot != nullptr) {
        if (comm->recorded != nullptr && detail::CallRing::reopen(e.slot, e.number)) {
            detail::write_end(e.slot, detail::ticks(), error);
            detail::CallRing::close(e.slot);
        }
        e.slot = nullptr;
    }
    if (comm->point_to_point == nullptr) return;
    if (comm->shared) {
        comm->point_to_point->end_shared();
    } else {
        comm->point_to_point->end();
    }
}

void set_symbolizer(Symbolizer symbolizer) noexcept {
    detail::set_code_address_namer(symbolizer);
}

void set_phase(std::string phase, const void* caller) {
    detail::Watchdog::instance().set_phase(std::move(phase), caller);
}

void write_trace_at_exit(MPI_Comm comm) noexcept {
    try {
        detail::dump_trace_at_exit(comm);
    } catch (const std::exception& e) {
        get_logger("lockstep.trace").error(every_rank, "No trace was written at exit: {}", e.what());
    }
}

}  // namespace lockstep::foreign
