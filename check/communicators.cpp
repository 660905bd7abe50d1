// The communicator registry (communicators.hpp).

#include "communicators.hpp"

#include <lockstep/base/symbolizer.hpp>
#include "hooks.hpp"

#include <atomic>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

namespace lockstep::check {
namespace {

// Mixes the parts of a communicator's identifier (splitmix64 steps): equal parts give equal identifiers everywhere.
}  // namespace

std::uint64_t mix_id(std::uint64_t h, std::uint64_t v) noexcept {
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebULL;
    h ^= h >> 31;
    return h;
}

namespace {

constexpr std::uint64_t kWorldId = 1;
constexpr std::uint64_t kSelfId = 2;

struct Registry {
    std::shared_mutex mutex;
    std::unordered_map<MPI_Comm, std::unique_ptr<CommunicatorRecord>> live;
    std::vector<CommunicatorCount> freed;
    std::atomic<std::uint64_t> generation{0};  // advanced under the lock whenever `live` changes
};

// The last communicator this thread found, valid while the registry's generation is the one it was found in.
struct LastFound {
    MPI_Comm comm = MPI_COMM_NULL;
    CommunicatorRecord* record = nullptr;
    std::uint64_t generation = ~std::uint64_t{0};
};
thread_local LastFound last_found;

Registry& registry() {
    static Registry* r = new Registry;  // never destroyed: entry points may run during static destruction
    return *r;
}

}  // namespace

std::string communicator_label(const CommunicatorRecord& r) {
    if (r.id == kWorldId) return "MPI_COMM_WORLD";
    if (r.id == kSelfId) return "MPI_COMM_SELF";
    std::string name = std::string("the communicator of ") + r.created_by;
    if (r.caller != nullptr) name += " at " + base::describe_call_site(r.caller);
    return name;
}

namespace {

std::unique_ptr<CommunicatorRecord> make_record(MPI_Comm comm, std::uint64_t id, const char* function,
                                                const void* caller) {
    auto r = std::make_unique<CommunicatorRecord>();
    r->comm = comm;
    r->id = id;
    r->created_by = function;
    r->caller = caller;
    int inter = 0;
    PMPI_Comm_test_inter(comm, &inter);
    r->inter = inter != 0;
    PMPI_Comm_rank(comm, &r->rank);
    PMPI_Comm_size(comm, &r->size);
    // Intercommunicators are not checked (docs/checking.md): they get no shadow.
    if (!r->inter) PMPI_Comm_dup(comm, &r->shadow);
    return r;
}

}  // namespace

void register_predefined_communicators() {
    Registry& reg = registry();
    std::unique_lock lock(reg.mutex);
    reg.live[MPI_COMM_WORLD] = make_record(MPI_COMM_WORLD, kWorldId, "MPI_Init", nullptr);
    reg.generation.fetch_add(1, std::memory_order_release);
    reg.live[MPI_COMM_SELF] = make_record(MPI_COMM_SELF, kSelfId, "MPI_Init", nullptr);
    reg.generation.fetch_add(1, std::memory_order_release);
}

void register_communicator(MPI_Comm created, MPI_Comm parent, const char* function, const void* caller,
                           std::uint64_t color, Derivation derivation) {
    std::uint64_t id = 0;
    CommunicatorRecord* p = find_communicator(parent);
    // Every member of the parent counts the call, also those that got MPI_COMM_NULL (a split's MPI_UNDEFINED).
    const std::uint64_t child = p != nullptr && derivation == Derivation::EveryMember ? ++p->children : 0;
    if (created == MPI_COMM_NULL) return;
    if (p != nullptr && p->id != 0) {
        id = derivation == Derivation::EveryMember ? mix_id(mix_id(p->id, child), color)
                                                   : mix_id(mix_id(p->id, 0x67726f7570), color);
    }
    auto record = make_record(created, id, function, caller);
    Registry& reg = registry();
    std::unique_lock lock(reg.mutex);
    reg.live[created] = std::move(record);
    reg.generation.fetch_add(1, std::memory_order_release);
}

void register_nonblocking_dup(MPI_Comm created, MPI_Comm parent, const char* function, const void* caller) {
    CommunicatorRecord* p = find_communicator(parent);
    if (p == nullptr) return;  // a new communicator of an unknown parent gets its shadow at its first collective
    auto record = std::make_unique<CommunicatorRecord>();
    record->comm = created;
    record->id = p->id != 0 ? mix_id(mix_id(p->id, ++p->children), 0) : 0;
    record->created_by = function;
    record->caller = caller;
    record->rank = p->rank;
    record->size = p->size;
    record->inter = p->inter;
    if (p->shadow != MPI_COMM_NULL) PMPI_Comm_idup(p->shadow, &record->shadow, &record->shadow_pending);
    Registry& reg = registry();
    std::unique_lock lock(reg.mutex);
    reg.live[created] = std::move(record);
    reg.generation.fetch_add(1, std::memory_order_release);
}

CommunicatorRecord* find_communicator(MPI_Comm comm) {
    if (comm == MPI_COMM_NULL) return nullptr;
    Registry& reg = registry();
    CommunicatorRecord* found = nullptr;
    const std::uint64_t generation = reg.generation.load(std::memory_order_acquire);
    if (last_found.comm == comm && last_found.generation == generation) {
        found = last_found.record;
    } else {
        std::shared_lock lock(reg.mutex);
        const auto it = reg.live.find(comm);
        if (it != reg.live.end()) found = it->second.get();
        last_found = {comm, found, reg.generation.load(std::memory_order_relaxed)};
    }
    if (found != nullptr) {
        // Every member duplicated the shadow with the program's MPI_Comm_idup, whose request completed before this use.
        if (found->shadow_pending != MPI_REQUEST_NULL) PMPI_Wait(&found->shadow_pending, MPI_STATUS_IGNORE);
        return found;
    }
    // Unknown: made by a function this library does not intercept. Every member meets it first at the same
    // collective, where each makes its shadow now.
    auto record = make_record(comm, 0, "an MPI call lockstep does not intercept", nullptr);
    std::unique_lock lock(reg.mutex);
    auto& slot = reg.live[comm];
    slot = std::move(record);
    reg.generation.fetch_add(1, std::memory_order_release);
    return slot.get();
}

void forget_communicator(MPI_Comm comm) {
    Registry& reg = registry();
    std::unique_ptr<CommunicatorRecord> record;
    {
        std::unique_lock lock(reg.mutex);
        const auto it = reg.live.find(comm);
        if (it == reg.live.end()) return;
        record = std::move(it->second);
        reg.live.erase(it);
        reg.generation.fetch_add(1, std::memory_order_release);
        if (record->id != 0 && record->size > 1) {
            reg.freed.push_back({record->id, record->collectives, record->size, communicator_label(*record)});
        }
    }
    if (record->shadow != MPI_COMM_NULL) PMPI_Comm_free(&record->shadow);
}

std::vector<CommunicatorCount> communicator_counts() {
    Registry& reg = registry();
    std::shared_lock lock(reg.mutex);
    std::vector<CommunicatorCount> counts = reg.freed;
    for (const auto& [comm, r] : reg.live) {
        if (!r->inter && r->id != 0 && r->size > 1)
            counts.push_back({r->id, r->collectives, r->size, communicator_label(*r)});
    }
    return counts;
}

void free_shadows() {
    Registry& reg = registry();
    std::unique_lock lock(reg.mutex);
    for (auto& [comm, r] : reg.live) {
        if (r->shadow != MPI_COMM_NULL) PMPI_Comm_free(&r->shadow);
    }
    reg.live.clear();
    reg.generation.fetch_add(1, std::memory_order_release);
}

}  // namespace lockstep::check
