// The flight recorder's registry of rings and its snapshot (recorder.hpp, ring.hpp). Communicators register their
// rings when they are made and retire them when they are freed, under one mutex; the calls themselves never take it.
// A freed communicator's rings stay in snapshots among the last `kept_retired` freed ones, so that a dump after a
// failure still shows the calls of the sub-communicator that failed; of each, a snapshot keeps the last
// `kept_retired_calls` calls, so that a dump stays of the size of the live communicators' rings, however many were
// made and freed before it (a test or a training loop that splits a communicator per step).

#include "recorder.hpp"

#include "../watchdog/channel.hpp"
#include "../watchdog/report.hpp"
#include "ring.hpp"

#include <lockstep/config.hpp>
#include <lockstep/operation.hpp>
#include <lockstep/runtime.hpp>

#include <cxxabi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <typeinfo>
#include <unordered_map>

namespace lockstep::detail {

WaitProfile process_wait_profile;

namespace {

constexpr std::size_t kept_retired = 16;
constexpr std::size_t kept_retired_calls = 64;  // of each ring

struct Registry {
    std::mutex mutex;
    std::vector<std::shared_ptr<RecordedComm>> live;
    std::deque<std::shared_ptr<RecordedComm>> retired;  // the last kept_retired freed, oldest first
    int world_rank = -1;
    std::string host;
};

// Never destroyed: communicators freed during static destruction (the world's, by a program that did not finalize)
// still retire theirs.
Registry& registry() {
    static Registry& r = *new Registry;
    return r;
}

}  // namespace

std::vector<RecordedCall> CallRing::read(std::uint64_t& torn) const {
    const std::uint64_t opened = opened_.load(std::memory_order_acquire);
    const std::uint64_t first = opened > capacity_ ? opened - capacity_ : 0;
    std::vector<RecordedCall> out;
    out.reserve(static_cast<std::size_t>(opened - first));
    for (std::uint64_t n = first; n < opened; ++n) {
        const RecordWord* slot = words_.get() + (n % capacity_) * recorded_words;
        bool whole = false;
        RecordWord copy[recorded_words];
        // A few tries: a writer holds an entry for a few stores only, unless it was overwritten since (then gone).
        for (int attempt = 0; attempt < 4 && !whole; ++attempt) {
            const RecordWord before =
                std::atomic_ref<RecordWord>(const_cast<RecordWord&>(slot[0])).load(std::memory_order_acquire);
            if (before / stamp_step != n) break;  // overwritten by a later entry (or not yet begun)
            if (before % 2 != 0) continue;
            for (std::size_t i = 1; i < recorded_words; ++i) {
                copy[i] = std::atomic_ref<RecordWord>(const_cast<RecordWord&>(slot[i])).load(std::memory_order_relaxed);
            }
            std::atomic_thread_fence(std::memory_order_acquire);
            const RecordWord after =
                std::atomic_ref<RecordWord>(const_cast<RecordWord&>(slot[0])).load(std::memory_order_relaxed);
            copy[0] = before;
            whole = after == before;
        }
        if (!whole) {
            ++torn;
            continue;
        }
        RecordedCall call;
        std::memcpy(static_cast<void*>(&call), copy, sizeof call);
        out.push_back(call);
    }
    return out;
}

void write_update(RecordedComm& comm, RecordedStream stream, std::uint64_t sequence, std::int64_t completed,
                  const char* error, std::int64_t waited) noexcept {
    std::uint64_t number = 0;
    RecordWord* slot = comm.shared.open_shared(number);
    LOCKSTEP_PUT(slot, sequence, sequence);
    LOCKSTEP_PUT(slot, completed, completed);
    LOCKSTEP_PUT(slot, waited, waited);
    LOCKSTEP_PUT(slot, outcome, static_cast<std::uint64_t>(error == nullptr ? Outcome::ok : Outcome::error));
    LOCKSTEP_PUT(slot, error, error);
    LOCKSTEP_PUT(
        slot, traits,
        (RecordedCall::Traits{OpKind::Barrier, DType::Float32, 0, RecordedKind::update, false, false, stream, 0}));
    CallRing::close(slot);
}

const char* current_exception_type() noexcept {
    const std::type_info* type = abi::__cxa_current_exception_type();
    return type != nullptr ? type->name() : "unknown";
}

std::shared_ptr<RecordedComm> record_communicator(std::uint64_t id, std::string name, int size, int rank,
                                                  std::vector<int> world_ranks, std::size_t capacity) {
    if (capacity == 0) return nullptr;
    auto comm = std::make_shared<RecordedComm>(capacity, id);
    comm->name = std::move(name);
    comm->size = size;
    comm->rank = rank;
    comm->world_ranks = std::move(world_ranks);
    process_wait_profile.start(ticks());
    Registry& r = registry();
    std::scoped_lock lock(r.mutex);
    r.live.push_back(comm);
    return comm;
}

void name_recorded(const std::shared_ptr<RecordedComm>& comm, std::string name) {
    if (comm == nullptr) return;
    Registry& r = registry();
    std::scoped_lock lock(r.mutex);
    comm->name = std::move(name);
}

void retire_recorded(const std::shared_ptr<RecordedComm>& comm) noexcept {
    if (comm == nullptr) return;
    Registry& r = registry();
    try {
        std::scoped_lock lock(r.mutex);
        std::erase(r.live, comm);
        r.retired.push_back(comm);
        if (r.retired.size() > kept_retired) r.retired.pop_front();
    } catch (...) {  // a lock or an allocation that failed: the rings go with the communicator
    }
}

void set_recorded_process(int world_rank, std::string host) {
    Registry& r = registry();
    std::scoped_lock lock(r.mutex);
    if (r.world_rank >= 0) return;
    r.world_rank = world_rank;
    r.host = std::move(host);
}

void WaitProfile::start(std::int64_t origin) noexcept {
    std::int64_t unset = 0;
    origin_.compare_exchange_strong(unset, origin == 0 ? 1 : origin, std::memory_order_relaxed);
}

std::uint64_t WaitProfile::widen(std::uint64_t since) noexcept {
    // Rare (once per doubling of the run), so a lock: two threads that cross the last bin together merge once.
    static std::mutex widening;
    const std::scoped_lock lock(widening);
    int shift = shift_.load(std::memory_order_relaxed);
    while (shift < 62 && (since >> shift) >= bins) {
        for (std::size_t i = 0; i < bins / 2; ++i) {
            const auto merged = [&](std::atomic<std::int64_t>* v) {
                return v[2 * i].load(std::memory_order_relaxed) + v[2 * i + 1].load(std::memory_order_relaxed);
            };
            wait_[i].store(merged(wait_), std::memory_order_relaxed);
            calls_[i].store(merged(calls_), std::memory_order_relaxed);
        }
        for (std::size_t i = bins / 2; i < bins; ++i) {
            wait_[i].store(0, std::memory_order_relaxed);
            calls_[i].store(0, std::memory_order_relaxed);
        }
        ++shift;
        shift_.store(shift, std::memory_order_relaxed);
    }
    return std::min<std::uint64_t>(since >> shift, bins - 1);
}

WaitProfile::View WaitProfile::view() const {
    View v;
    v.origin = origin_.load(std::memory_order_relaxed);
    v.shift = shift_.load(std::memory_order_relaxed);
    v.wait.resize(bins);
    v.calls.resize(bins);
    for (std::size_t i = 0; i < bins; ++i) {
        v.wait[i] = wait_[i].load(std::memory_order_relaxed);
        v.calls[i] = calls_[i].load(std::memory_order_relaxed);
    }
    return v;
}

namespace {

// Ticks to CLOCK_REALTIME microseconds, from one paired reading of both clocks.
struct TimeBase {
    std::int64_t ticks_now;
    double realtime_us;
    double us_per_tick;
    [[nodiscard]] double us(std::int64_t t) const noexcept {
        return realtime_us - static_cast<double>(ticks_now - t) * us_per_tick;
    }
    [[nodiscard]] nlohmann::json optional_us(std::int64_t t) const {
        return t != 0 ? nlohmann::json(us(t)) : nlohmann::json(nullptr);
    }
};

TimeBase time_base() {
    TimeBase b{};
    constexpr std::int64_t span = std::int64_t{1} << 30;
    b.us_per_tick = ticks_to_seconds(span) * 1e6 / static_cast<double>(span);
    b.ticks_now = ticks();
    b.realtime_us = realtime_us();
    return b;
}

std::string demangled(const char* name) {
    if (name == nullptr) return "unknown";
    int status = 0;
    std::unique_ptr<char, void (*)(void*)> text(abi::__cxa_demangle(name, nullptr, nullptr, &status), std::free);
    return status == 0 && text != nullptr ? std::string(text.get()) : std::string(name);
}

const char* kind_name(const RecordedCall& c) noexcept {
    switch (c.traits.kind) {
        case RecordedKind::collective:
            return "collective";
        case RecordedKind::send:
            return "send";
        case RecordedKind::recv:
            return "recv";
        case RecordedKind::wait:
        case RecordedKind::update:
            break;
    }
    return "wait";
}

std::string op_text(const RecordedCall& c) {
    if (c.name != nullptr) return c.name;
    std::string_view name = op_name(c.traits.op);
    if (name.starts_with("lockstep::")) name.remove_prefix(10);
    return std::string(name);
}

// The calls of one communicator, its updates applied.
struct CommCalls {
    std::shared_ptr<RecordedComm> comm;
    std::vector<RecordedCall> calls;   // of ring `calls`
    std::vector<RecordedCall> shared;  // of ring `shared`, updates left out
};

void apply_updates(CommCalls& c, const std::vector<RecordedCall>& updates) {
    std::unordered_map<std::uint64_t, RecordedCall*> by_sequence[2];
    for (auto& e : c.calls) by_sequence[0][e.sequence] = &e;
    for (auto& e : c.shared) by_sequence[1][e.sequence] = &e;
    for (const auto& u : updates) {
        auto& index = by_sequence[u.traits.stream == RecordedStream::calls ? 0 : 1];
        const auto it = index.find(u.sequence);
        if (it == index.end()) continue;  // its call was overwritten
        RecordedCall& target = *it->second;
        if (u.completed != 0) {
            target.completed = u.completed;
            target.outcome = u.outcome;
            target.error = u.error;
        }
        if (u.waited != 0) target.waited = u.waited;
    }
}

nlohmann::json call_json(const RecordedCall& c, std::uint64_t comm_id, const TimeBase& time,
                         std::map<const void*, std::string>& sites) {
    using nlohmann::json;
    json j;
    j["comm"] = comm_id;
    j["seq"] = c.sequence;
    j["op"] = op_text(c);
    j["kind"] = kind_name(c);
    j["nonblocking"] = c.traits.nonblocking;
    const bool foreign = c.name != nullptr;
    if (foreign) {
        j["dtype"] = c.datatype != nullptr ? json(c.datatype) : json(nullptr);
        j["shape"] = nullptr;
        j["count"] = c.count >= 0 ? json(c.count) : json(nullptr);
        j["bytes"] = nullptr;
    } else if (c.traits.has_tensor) {
        j["dtype"] = std::string(dtype_name(c.traits.dtype));
        json shape = json::array();
        for (std::size_t i = 0; i < c.traits.ndim; ++i) shape.push_back(c.dims[i]);
        j["shape"] = shape;
        j["count"] = c.count;
        j["bytes"] = c.count * static_cast<std::int64_t>(dtype_size(c.traits.dtype));
    } else {
        j["dtype"] = nullptr;
        j["shape"] = nullptr;
        j["count"] = c.count >= 0 ? json(c.count) : json(nullptr);
        j["bytes"] = nullptr;
    }
    j["root"] = c.place.root;
    j["peer"] = c.message.peer;
    j["tag"] = c.message.tag;
    j["step"] = c.step;
    const bool has_file = c.file != nullptr && *c.file != '\0';
    j["file"] = has_file ? c.file : "";
    j["line"] = c.place.line;
    j["function"] = c.function != nullptr ? c.function : "";
    if (has_file) {
        std::string site = std::string(c.file);
        if (const auto slash = site.rfind('/'); slash != std::string::npos) site.erase(0, slash + 1);
        site += ":" + std::to_string(c.place.line);
        if (c.function != nullptr && *c.function != '\0') site += " (" + std::string(c.function) + ")";
        j["site"] = site;
    } else if (c.caller != nullptr) {
        auto it = sites.find(c.caller);
        if (it == sites.end()) it = sites.emplace(c.caller, code_address_text(c.caller)).first;
        j["site"] = it->second;
    } else {
        j["site"] = "";
    }
    j["issued_us"] = time.us(c.issued);
    j["signature_us"] = time.optional_us(c.signature);
    j["payload_us"] = time.optional_us(c.payload);
    j["completed_us"] = time.optional_us(c.completed);
    j["waited_us"] = time.optional_us(c.waited);
    switch (static_cast<Outcome>(c.outcome)) {
        case Outcome::ok:
            j["outcome"] = "ok";
            break;
        case Outcome::error:
            j["outcome"] = "error";
            j["error"] = demangled(c.error);
            break;
        case Outcome::in_flight:
            j["outcome"] = "in_flight";
            break;
    }
    return j;
}

}  // namespace

nlohmann::json recorder_snapshot() {
    using nlohmann::json;
    std::vector<std::shared_ptr<RecordedComm>> comms;
    std::size_t retired = 0;  // comms[0, retired) are freed ones
    json communicators = json::array();
    int world_rank = -1;
    std::string host;
    {
        Registry& r = registry();
        std::scoped_lock lock(r.mutex);
        comms.assign(r.retired.begin(), r.retired.end());
        retired = comms.size();
        comms.insert(comms.end(), r.live.begin(), r.live.end());
        world_rank = r.world_rank;
        host = r.host;
        for (const auto& c : comms) {
            communicators.push_back({{"id", c->id},
                                     {"name", c->name},
                                     {"size", c->size},
                                     {"rank", c->rank},
                                     {"world_ranks", c->world_ranks},
                                     {"capacity", c->calls.capacity()}});
        }
    }
    if (host.empty()) host = host_name();
    const TimeBase time = time_base();
    json calls = json::array();
    std::uint64_t torn = 0;
    std::map<const void*, std::string> sites;
    for (std::size_t i = 0; i < comms.size(); ++i) {
        const auto& comm = comms[i];
        // Counted before the rings are read: a call made meanwhile is left out of both counts.
        const std::uint64_t opened[] = {comm->calls.opened(), comm->shared.opened()};
        const std::uint64_t recorded = opened[0] + opened[1];
        std::uint64_t kept = std::min<std::uint64_t>(opened[0], comm->calls.capacity()) +
                             std::min<std::uint64_t>(opened[1], comm->shared.capacity());
        CommCalls c{comm, comm->calls.read(torn), {}};
        std::vector<RecordedCall> updates;
        for (const auto& e : comm->shared.read(torn)) {
            (e.traits.kind == RecordedKind::update ? updates : c.shared).push_back(e);
        }
        apply_updates(c, updates);
        for (auto* part : {&c.calls, &c.shared}) {
            if (i < retired && part->size() > kept_retired_calls) {
                const std::size_t left_out = part->size() - kept_retired_calls;
                part->erase(part->begin(), part->begin() + static_cast<std::ptrdiff_t>(left_out));
                kept -= std::min<std::uint64_t>(kept, left_out);
            }
            for (const auto& e : *part) calls.push_back(call_json(e, comm->id, time, sites));
        }
        communicators[i]["recorded"] = recorded;
        communicators[i]["dropped"] = recorded - std::min(recorded, kept);
        communicators[i]["freed"] = i < retired;
    }
    std::stable_sort(calls.begin(), calls.end(), [](const json& a, const json& b) {
        return a["issued_us"].get<double>() < b["issued_us"].get<double>();
    });
    const WaitProfile::View profile = process_wait_profile.view();
    const double bin_us = time.us_per_tick * static_cast<double>(std::int64_t{1} << profile.shift);
    json wait_us = json::array();
    for (const auto w : profile.wait) wait_us.push_back(static_cast<double>(w) * time.us_per_tick);
    json out;
    out["rank"] = world_rank;
    out["host"] = host;
    out["pid"] = static_cast<int>(::getpid());
    out["snapshot_us"] = time.realtime_us;
    out["capacity"] = config().trace_calls;
    out["communicators"] = std::move(communicators);
    out["calls"] = std::move(calls);
    out["torn"] = torn;
    out["profile"] = {{"start_us", profile.origin != 0 ? json(time.us(profile.origin)) : json(nullptr)},
                      {"bin_us", bin_us},
                      {"wait_us", std::move(wait_us)},
                      {"calls", profile.calls}};
    return out;
}

}  // namespace lockstep::detail
