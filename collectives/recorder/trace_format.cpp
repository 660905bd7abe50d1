#include "trace_format.hpp"

// The merge, in four steps:
// 1. Each rank's calls are put on one clock: a recorded time plus the rank's clock_offset_us. The earliest issued time
//    of any call is the origin, ts 0 of the file.
// 2. The calls of a collective are found on every member by (communicator, seq): the communicator by its id and its
//    world ranks, so that two communicators that happen to share an id on different ranks are not taken for one.
//    The members recorded are ordered by issued time (arrival 1 = first); the last of two or more is the last
//    arriver, and the others waited for it. A member whose snapshot shows that it had not issued the call by the
//    time the others had (its highest seq on that communicator is lower, its snapshot taken after the last member
//    recorded arrived) has not arrived: then no recorded member is the last, and every member names who is missing.
// 3. Each rank becomes one process of the trace: blocking calls are complete slices ("X") on thread 0 (another
//    thread only where two blocking calls of one rank overlap without nesting, which several calling threads can
//    produce), non-blocking calls async slices ("b"/"e"), and each wait for a last arriver is a flow from the last
//    arriver's slice to the waiting member's slice, one flow ("s" then "f", its own id) per waiting member.
// 4. A rank's events are written in time order (metadata first), so that ts never decreases on any of its tracks.

#include <lockstep/base/file_descriptor.hpp>
#include <lockstep/base/rank_groups.hpp>
#include <lockstep/errors.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <thread>

namespace lockstep::detail {
namespace {

using nlohmann::json;

// Times in the file are microseconds kept to the nanosecond: enough for any call, and no float noise in the text.
double rounded(double us) {
    return std::round(us * 1000.0) / 1000.0;
}

std::optional<double> number_at(const json& object, const char* key) {
    if (!object.is_object()) return std::nullopt;
    const auto it = object.find(key);
    if (it == object.end() || !it->is_number()) return std::nullopt;
    return it->get<double>();
}

std::int64_t integer_at(const json& object, const char* key, std::int64_t fallback) {
    const auto value = number_at(object, key);
    return value && std::abs(*value) < 9e18 ? static_cast<std::int64_t>(*value) : fallback;
}

// A communicator's id, exactly (ids use all 64 bits: the check library's have the top one set); 0 when absent.
std::uint64_t id_at(const json& object, const char* key) {
    if (!object.is_object()) return 0;
    const auto it = object.find(key);
    if (it == object.end()) return 0;
    if (it->is_number_unsigned()) return it->get<std::uint64_t>();
    if (it->is_number_integer()) return static_cast<std::uint64_t>(it->get<std::int64_t>());
    if (it->is_number_float() && it->get<double>() >= 0 && it->get<double>() < 1.8e19) {
        return static_cast<std::uint64_t>(it->get<double>());
    }
    return 0;
}

std::string text_at(const json& object, const char* key, std::string fallback = {}) {
    if (!object.is_object()) return fallback;
    const auto it = object.find(key);
    return it != object.end() && it->is_string() ? it->get<std::string>() : fallback;
}

// The value recorded under `key`: null when absent.
const json& field_at(const json& object, const char* key) {
    static const json null;
    if (!object.is_object()) return null;
    const auto it = object.find(key);
    return it == object.end() ? null : *it;
}

// The array recorded under `key`: empty when absent or not an array.
const json& array_at(const json& object, const char* key) {
    static const json empty = json::array();
    const json& value = field_at(object, key);
    return value.is_array() ? value : empty;
}

std::vector<int> rank_list(const json& ranks) {
    std::vector<int> out;
    for (const json& r : ranks) {
        if (r.is_number_integer()) out.push_back(r.get<int>());
    }
    return out;
}

std::string communicator_key(std::uint64_t id, const json& world_ranks) {
    return fmt::format("{}/{}", id, world_ranks.is_array() ? world_ranks.dump() : std::string());
}

std::string ranks_text(const std::vector<int>& ranks) {
    return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", base::format_rank_ranges(ranks));
}

// "850 us", "12.3 ms", "4.21 s".
std::string duration_text(double us) {
    if (us < 1000.0) return fmt::format("{:.0f} us", us);
    if (us < 1e6) return fmt::format("{:.1f} ms", us / 1e3);
    return fmt::format("{:.2f} s", us / 1e6);
}

// CLOCK_REALTIME microseconds as ISO-8601 UTC, to the millisecond ("2026-12-05T12:00:01.234Z").
std::string iso_time(double realtime_us) {
    const auto seconds = static_cast<std::time_t>(std::floor(realtime_us / 1e6));
    const auto millis = static_cast<int>(std::floor(realtime_us / 1e3) - static_cast<double>(seconds) * 1e3);
    std::tm utc{};
    ::gmtime_r(&seconds, &utc);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &utc);
    return fmt::format("{}.{:03d}Z", text, std::clamp(millis, 0, 999));
}

std::string iso_now() {
    const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
    std::tm utc{};
    ::gmtime_r(&now, &utc);
    char text[32];
    std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
    return text;
}

// Bounds on rank numbers: a snapshot of a higher rank is left out, and the job's size guessed from the communicators'
// members stays below the second, so that a malformed number cannot turn into millions of missing ranks.
constexpr std::int64_t kMostRanks = 1 << 24;
constexpr int kMostRanksGuessed = 1 << 16;

// One recorded call on the merged clock, with what the merge learns about it.
struct Call {
    int rank = 0;
    const json* recorded = nullptr;  // as its rank recorded it, in the snapshot merge_trace was given
    std::string comm_key;
    std::string comm_name;
    std::uint64_t comm = 0;
    std::int64_t seq = 0;
    std::string op;
    std::string kind;
    bool nonblocking = false;
    bool in_flight = false;
    double issued = 0;  // merged clock, absolute microseconds
    double end = 0;     // completed (blocking), waited or completed (non-blocking), or the snapshot time
    int lane = 0;       // 0, or the overlapping calls' thread of a blocking call's slice
    // Collectives only.
    int arrival = 0;
    int of = 0;
    int members = 0;
    double late_by = 0;
    bool last_arriver = false;
    std::optional<int> waited_for;
    std::vector<int> not_arrived;
    [[nodiscard]] bool collective() const { return kind == "collective"; }
};

struct Communicator {
    std::string key;
    std::string name;
    std::int64_t size = 0;
    std::vector<int> world_ranks;
};

struct RankRecord {
    int rank = 0;
    json snapshot;  // as received, with clock_offset_us
    double offset = 0;
    double snapshot_us = 0;  // merged clock
    std::vector<Call> calls;
    std::map<std::uint64_t, Communicator> communicators;  // by this rank's id
    std::set<std::string> communicator_keys;
    std::map<std::string, std::int64_t> highest_seq;  // of a collective, by communicator key
};

struct Collective {
    std::string comm_key;
    std::int64_t seq = 0;
    std::vector<Call*> members;  // in arrival order
    std::vector<int> not_arrived;
    std::int64_t size = 0;
};

RankRecord read_snapshot(const json& snapshot) {
    RankRecord record;
    record.rank = static_cast<int>(integer_at(snapshot, "rank", -1));
    record.snapshot = snapshot;
    record.offset = number_at(snapshot, "clock_offset_us").value_or(0.0);
    record.snapshot["clock_offset_us"] = record.offset;
    record.snapshot_us = number_at(snapshot, "snapshot_us").value_or(0.0) + record.offset;
    if (const auto it = snapshot.find("communicators"); it != snapshot.end() && it->is_array()) {
        for (const json& c : *it) {
            const std::uint64_t id = id_at(c, "id");
            Communicator comm;
            const json world_ranks = field_at(c, "world_ranks");
            comm.key = communicator_key(id, world_ranks);
            comm.name = text_at(c, "name");
            comm.size = integer_at(c, "size", 0);
            if (world_ranks.is_array()) {
                for (const json& r : world_ranks) {
                    if (r.is_number_integer() && r.get<std::int64_t>() >= 0 && r.get<std::int64_t>() < kMostRanks) {
                        comm.world_ranks.push_back(r.get<int>());
                    }
                }
            }
            record.communicator_keys.insert(comm.key);
            record.communicators[id] = std::move(comm);
        }
    }
    const auto calls = snapshot.find("calls");
    if (calls == snapshot.end() || !calls->is_array()) return record;
    for (const json& recorded : *calls) {
        const auto issued = number_at(recorded, "issued_us");
        if (!issued) continue;  // nothing to place it by
        Call call;
        call.rank = record.rank;
        call.recorded = &recorded;
        call.comm = id_at(recorded, "comm");
        if (const auto c = record.communicators.find(call.comm); c != record.communicators.end()) {
            call.comm_key = c->second.key;
            call.comm_name = c->second.name;
            call.members = static_cast<int>(c->second.size);
        } else {
            call.comm_key = communicator_key(call.comm, nullptr);
        }
        call.seq = integer_at(recorded, "seq", 0);
        call.op = text_at(recorded, "op", "call");
        call.kind = text_at(recorded, "kind", "collective");
        call.nonblocking = field_at(recorded, "nonblocking") == json(true);
        call.issued = *issued + record.offset;
        // The end of its slice: completed (blocking) or waited for (non-blocking; completed if never waited for);
        // the snapshot for a call in flight; the last time recorded for a call that failed before completing.
        const auto completed = number_at(recorded, "completed_us");
        const auto waited = number_at(recorded, "waited_us");
        const std::string outcome = text_at(recorded, "outcome");
        call.in_flight = outcome == "in_flight" || (outcome.empty() && !completed);
        std::optional<double> end = call.nonblocking && waited ? waited : completed;
        if (call.in_flight && !(call.nonblocking && completed)) {
            end = record.snapshot_us - record.offset;
        } else if (!end) {
            end = std::max({*issued, number_at(recorded, "signature_us").value_or(*issued),
                            number_at(recorded, "payload_us").value_or(*issued)});
        }
        call.end = std::max(call.issued, *end + record.offset);
        if (call.collective()) {
            auto& highest = record.highest_seq[call.comm_key];
            highest = std::max(highest, call.seq);
        }
        record.calls.push_back(std::move(call));
    }
    return record;
}

// Step 2: the collectives, each with its members in arrival order, marked.
std::vector<Collective> match_collectives(std::vector<RankRecord>& records) {
    std::map<std::pair<std::string, std::int64_t>, Collective> by_key;
    std::map<int, const RankRecord*> by_rank;
    for (RankRecord& record : records) {
        by_rank[record.rank] = &record;
        for (Call& call : record.calls) {
            if (!call.collective()) continue;
            Collective& c = by_key[{call.comm_key, call.seq}];
            c.comm_key = call.comm_key;
            c.seq = call.seq;
            c.members.push_back(&call);
        }
    }
    std::vector<Collective> collectives;
    for (auto& [key, c] : by_key) {
        std::stable_sort(c.members.begin(), c.members.end(), [](const Call* a, const Call* b) {
            return a->issued < b->issued || (a->issued == b->issued && a->rank < b->rank);
        });
        const double first = c.members.front()->issued;
        const double last = c.members.back()->issued;
        // Who belongs: the first member's view of the communicator.
        const RankRecord& first_rank = *by_rank.at(c.members.front()->rank);
        std::vector<int> world_ranks;
        for (const auto& [id, comm] : first_rank.communicators) {
            if (comm.key == c.comm_key) {
                world_ranks = comm.world_ranks;
                c.size = comm.size;
            }
        }
        std::set<int> recorded;
        for (const Call* m : c.members) recorded.insert(m->rank);
        for (const int w : world_ranks) {
            if (recorded.count(w) != 0) continue;
            const auto other = by_rank.find(w);
            if (other == by_rank.end() || other->second->communicator_keys.count(c.comm_key) == 0) continue;
            const auto highest = other->second->highest_seq.find(c.comm_key);
            const bool reached = highest != other->second->highest_seq.end() && highest->second >= c.seq;
            // A snapshot taken before the others arrived cannot tell whether this rank is late.
            if (!reached && other->second->snapshot_us >= last) c.not_arrived.push_back(w);
        }
        const bool marked = c.members.size() >= 2 && c.not_arrived.empty();
        for (std::size_t i = 0; i < c.members.size(); ++i) {
            Call& m = *c.members[i];
            m.arrival = static_cast<int>(i) + 1;
            m.of = static_cast<int>(c.members.size());
            m.late_by = m.issued - first;
            m.not_arrived = c.not_arrived;
            if (!marked) continue;
            if (i + 1 == c.members.size()) {
                m.last_arriver = true;
            } else {
                m.waited_for = c.members.back()->rank;
            }
        }
        collectives.push_back(std::move(c));
    }
    std::stable_sort(collectives.begin(), collectives.end(), [](const Collective& a, const Collective& b) {
        return a.members.front()->issued < b.members.front()->issued;
    });
    return collectives;
}

// The thread id of a lane. Lane 0 is thread 0; Perfetto reads thread 0 of process P as thread P, so the other lanes
// take ids above every rank number, where they meet no rank's.
int lane_tid(int lane) {
    return lane == 0 ? 0 : static_cast<int>(kMostRanks) + lane;
}

// A blocking call's slice goes on the lowest lane whose slices have all ended by its start.
void assign_lanes(RankRecord& record) {
    std::vector<Call*> blocking;
    for (Call& call : record.calls) {
        if (!call.nonblocking) blocking.push_back(&call);
    }
    std::stable_sort(blocking.begin(), blocking.end(), [](const Call* a, const Call* b) {
        return a->issued < b->issued || (a->issued == b->issued && a->end > b->end);
    });
    std::vector<double> lane_end;
    for (Call* call : blocking) {
        std::size_t lane = 0;
        while (lane < lane_end.size() && lane_end[lane] > call->issued) ++lane;
        if (lane == lane_end.size()) lane_end.push_back(0);
        lane_end[lane] = call->end;
        call->lane = static_cast<int>(lane);
    }
}

// "train.cpp:88 (train_step)": as symbolised by the rank, else from the file, line and function recorded.
std::string call_site(const json& recorded) {
    std::string site = text_at(recorded, "site");
    if (site.empty() && !text_at(recorded, "file").empty()) {
        site = fmt::format("{}:{}", text_at(recorded, "file"), integer_at(recorded, "line", 0));
        if (const std::string function = text_at(recorded, "function"); !function.empty())
            site += " (" + function + ")";
    }
    return site;
}

json relative(const json& recorded, const char* key, double shift) {
    const auto value = number_at(recorded, key);
    return value ? json(rounded(*value + shift)) : json(nullptr);
}

json slice_args(const Call& call, double origin, double offset) {
    const json& r = *call.recorded;
    const double shift = offset - origin;
    json args = {
        {"comm", call.comm},
        {"comm_name", call.comm_name},
        {"seq", call.seq},
        {"op", call.op},
        {"kind", call.kind},
        {"nonblocking", call.nonblocking},
        {"dtype", field_at(r, "dtype")},
        {"shape", field_at(r, "shape")},
        {"count", field_at(r, "count")},
        {"bytes", field_at(r, "bytes")},
        {"root", integer_at(r, "root", -1)},
        {"peer", integer_at(r, "peer", -1)},
        {"tag", integer_at(r, "tag", 0)},
        {"step", integer_at(r, "step", 0)},
        {"site", call_site(r)},
        {"outcome", call.in_flight ? std::string("in_flight") : text_at(r, "outcome", "ok")},
        {"issued_us", rounded(call.issued - origin)},
        {"signature_us", relative(r, "signature_us", shift)},
        {"payload_us", relative(r, "payload_us", shift)},
        {"completed_us", relative(r, "completed_us", shift)},
        {"waited_us", relative(r, "waited_us", shift)},
    };
    if (r.contains("error")) args["error"] = field_at(r, "error");
    if (call.collective()) {
        args["arrival"] = call.arrival;
        args["of"] = call.of;
        args["members"] = call.members;
        args["last_arriver"] = call.last_arriver;
        args["late_by_us"] = rounded(call.late_by);
        if (call.waited_for) args["waited_for"] = *call.waited_for;
        if (!call.not_arrived.empty()) args["not_arrived"] = call.not_arrived;
    }
    return args;
}

// An event of one rank's process, ordered by time and, at one time, by `order`: a slice before a flow bound to it,
// an async slice's end after its begin.
struct Event {
    double ts;  // as written (rounded)
    int order;
    json body;
};

json event(std::string_view name, std::string_view ph, double ts, int pid, int tid) {
    return json{{"name", name}, {"ph", ph}, {"ts", rounded(ts)}, {"pid", pid}, {"tid", tid}};
}

json metadata(std::string_view name, int pid, int tid, json args) {
    json m = event(name, "M", 0, pid, tid);
    m["args"] = std::move(args);
    return m;
}

// A flow event's time on a slice [start, end) (relative to the origin): `at` moved inside it, at most `nudge` before
// its end, so that a viewer binds the event to that slice.
double inside(double at, double start, double end, double nudge) {
    return std::max(start, std::min(at, end - nudge));
}

// The category of a blocking call's slice, by kind; "wait" is the flows'.
std::string slice_category(const std::string& kind) {
    if (kind == "send" || kind == "recv") return "p2p";
    if (kind == "wait") return "request";
    return kind;
}

}  // namespace

json merge_trace(const std::vector<json>& ranks, const TraceContext& context) {
    // Step 1: the snapshots, one per rank (the first of a rank given twice), on one clock.
    std::vector<RankRecord> records;
    std::set<int> seen;
    for (const json& snapshot : ranks) {
        if (!snapshot.is_object()) continue;
        const std::int64_t rank = integer_at(snapshot, "rank", -1);
        if (rank < 0 || rank >= kMostRanks || !seen.insert(static_cast<int>(rank)).second) continue;
        records.push_back(read_snapshot(snapshot));
    }
    std::sort(records.begin(), records.end(), [](const RankRecord& a, const RankRecord& b) { return a.rank < b.rank; });
    double origin = std::numeric_limits<double>::infinity();
    for (const RankRecord& record : records) {
        for (const Call& call : record.calls) origin = std::min(origin, call.issued);
    }
    if (!std::isfinite(origin)) {
        for (const RankRecord& record : records) origin = std::min(origin, record.snapshot_us);
    }
    if (!std::isfinite(origin)) origin = 0;

    // The job's size; guessed from the snapshots when not given.
    int expected = context.expected_ranks;
    if (expected <= 0) {
        for (const RankRecord& record : records) {
            for (const auto& [id, comm] : record.communicators) {
                for (const int w : comm.world_ranks) expected = std::max(expected, std::min(w + 1, kMostRanksGuessed));
            }
        }
        for (const RankRecord& record : records) expected = std::max(expected, record.rank + 1);
    }
    std::vector<int> missing;
    if (!context.asked.empty()) {
        for (const int r : std::set<int>(context.asked.begin(), context.asked.end())) {
            if (seen.count(r) == 0) missing.push_back(r);
        }
    } else {
        for (int r = 0; r < expected; ++r) {
            if (seen.count(r) == 0) missing.push_back(r);
        }
    }

    // Step 2.
    const std::vector<Collective> collectives = match_collectives(records);

    // Step 3.
    json trace_events = json::array();
    for (const int r : missing) {
        trace_events.push_back(metadata("process_name", r, 0, {{"name", fmt::format("rank {} (missing)", r)}}));
        trace_events.push_back(metadata("process_sort_index", r, 0, {{"sort_index", r}}));
    }
    std::map<int, std::vector<Event>> events_of;
    std::uint64_t async_id = 0;
    std::map<int, int> lanes_of;
    for (RankRecord& record : records) {
        assign_lanes(record);
        std::vector<Event>& events = events_of[record.rank];
        int lanes = 1;
        for (const Call& call : record.calls) {
            const std::string cat = call.nonblocking ? std::string("nonblocking") : slice_category(call.kind);
            json args = slice_args(call, origin, record.offset);
            if (call.nonblocking) {
                json begin = event(call.op, "b", call.issued - origin, record.rank, 0);
                json end = event(call.op, "e", call.end - origin, record.rank, 0);
                ++async_id;
                for (json* e : {&begin, &end}) {
                    (*e)["cat"] = cat;
                    (*e)["id"] = async_id;
                }
                if (call.last_arriver) begin["cname"] = "terrible";
                begin["args"] = std::move(args);
                end["args"] = json::object();
                events.push_back({rounded(call.issued - origin), 0, std::move(begin)});
                events.push_back({rounded(call.end - origin), 2, std::move(end)});
                continue;
            }
            json slice = event(call.op, "X", call.issued - origin, record.rank, lane_tid(call.lane));
            // The same rounded end as the flows bound to this slice reckon with.
            slice["dur"] = rounded(rounded(call.end - origin) - rounded(call.issued - origin));
            slice["cat"] = cat;
            if (call.last_arriver) slice["cname"] = "terrible";
            slice["args"] = std::move(args);
            events.push_back({rounded(call.issued - origin), 0, std::move(slice)});
            lanes = std::max(lanes, call.lane + 1);
        }
        lanes_of[record.rank] = lanes;
    }
    std::uint64_t flow_id = 0;
    for (const Collective& c : collectives) {
        const Call& last = *c.members.back();
        if (!last.last_arriver || last.nonblocking) continue;
        for (const Call* waiting : c.members) {
            if (!waiting->waited_for || waiting->nonblocking) continue;
            // 1 ns into the last arriver's slice, as a flow event at exactly a slice's start may be read before the
            // slice; the end 1 ns later still, as viewers read the events in time order and the start must come first.
            const double at = rounded(last.issued - origin);
            const double start_ts = inside(at + 0.001, at, rounded(last.end - origin), 0.001);
            const double finish_ts =
                inside(at + 0.002, rounded(waiting->issued - origin), rounded(waiting->end - origin), 0.001);
            // A waiting member's slice over before the last arrived: the clock offsets are off, the flow not drawn.
            if (finish_ts < start_ts) continue;
            ++flow_id;
            json start = event("wait", "s", start_ts, last.rank, lane_tid(last.lane));
            json finish = event("wait", "f", finish_ts, waiting->rank, lane_tid(waiting->lane));
            for (json* e : {&start, &finish}) {
                (*e)["cat"] = "wait";
                (*e)["id"] = flow_id;
                (*e)["args"] = {
                    {"comm", last.comm}, {"seq", last.seq}, {"last_arriver", last.rank}, {"waiting", waiting->rank}};
            }
            finish["bp"] = "e";
            events_of[last.rank].push_back({rounded(start_ts), 1, std::move(start)});
            events_of[waiting->rank].push_back({rounded(finish_ts), 1, std::move(finish)});
        }
    }

    // Step 4.
    json snapshots = json::array();
    for (RankRecord& record : records) {
        const int r = record.rank;
        trace_events.push_back(
            metadata("process_name", r, 0,
                     {{"name", fmt::format("rank {} ({}, pid {})", r, text_at(record.snapshot, "host", "?"),
                                           integer_at(record.snapshot, "pid", 0))}}));
        trace_events.push_back(metadata("process_sort_index", r, 0, {{"sort_index", r}}));
        for (int lane = 0; lane < lanes_of[r]; ++lane) {
            trace_events.push_back(
                metadata("thread_name", r, lane_tid(lane), {{"name", lane == 0 ? "calls" : "calls (overlapping)"}}));
        }
        std::vector<Event>& events = events_of[r];
        std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
            return a.ts < b.ts || (a.ts == b.ts && a.order < b.order);
        });
        for (Event& e : events) trace_events.push_back(std::move(e.body));
        snapshots.push_back(std::move(record.snapshot));
    }

    json collective_list = json::array();
    for (const Collective& c : collectives) {
        const Call& first = *c.members.front();
        json arrivals = json::array();
        for (const Call* m : c.members) {
            arrivals.push_back({{"rank", m->rank},
                                {"issued_us", rounded(m->issued - origin)},
                                {"late_by_us", rounded(m->late_by)},
                                {"in_flight", m->in_flight}});
        }
        const Call& last = *c.members.back();
        collective_list.push_back({{"comm", first.comm},
                                   {"comm_name", first.comm_name},
                                   {"seq", c.seq},
                                   {"op", first.op},
                                   {"members", c.size},
                                   {"arrivals", std::move(arrivals)},
                                   {"last_arriver", last.last_arriver ? json(last.rank) : json(nullptr)},
                                   {"not_arrived", c.not_arrived}});
    }

    json lockstep = {{"version", 1},
                     {"reason", context.reason},
                     {"job", context.job},
                     {"expected_ranks", expected},
                     {"ranks", std::move(snapshots)},
                     {"missing_ranks", missing},
                     {"origin_us", origin},
                     {"collectives", std::move(collective_list)}};
    if (!context.stacks.is_null()) lockstep["stacks"] = context.stacks;
    return {{"traceEvents", std::move(trace_events)},
            {"displayTimeUnit", "ms"},
            {"otherData",
             {{"lockstep_trace_version", "1"},
              {"reason", context.reason},
              {"job", context.job},
              {"created", iso_now()},
              {"ranks", std::to_string(expected)},
              {"missing_ranks", base::format_rank_ranges(missing)}}},
            {"lockstep", std::move(lockstep)}};
}

namespace {

// The summary's view of one rank on one communicator.
struct RankState {
    std::string text;              // what is the same on ranks in the same state
    std::optional<double> for_us;  // how long the call in flight has been in flight
};

RankState rank_state(const json& snapshot, std::uint64_t comm) {
    const json* last = nullptr;
    const json* flight = nullptr;
    int in_flight = 0;
    const double snapshot_us = number_at(snapshot, "snapshot_us").value_or(0.0);
    for (const json& call : array_at(snapshot, "calls")) {
        if (id_at(call, "comm") != comm || !number_at(call, "issued_us")) continue;
        const auto completed = number_at(call, "completed_us");
        if (!completed || text_at(call, "outcome") == "in_flight") {
            ++in_flight;
            // The blocking call in flight, else the earliest issued.
            if (flight == nullptr ||
                (field_at(*flight, "nonblocking") == json(true) && field_at(call, "nonblocking") != json(true))) {
                flight = &call;
            }
        } else if (last == nullptr || *completed >= number_at(*last, "completed_us").value_or(0.0)) {
            last = &call;
        }
    }
    RankState state;
    state.text = last != nullptr
                     ? fmt::format("last completed {} #{}", text_at(*last, "op"), integer_at(*last, "seq", 0))
                     : std::string("nothing completed");
    if (flight == nullptr) {
        state.text += "; not in a call";
        return state;
    }
    state.text += fmt::format("; in flight {} #{}", text_at(*flight, "op"), integer_at(*flight, "seq", 0));
    if (const std::string site = call_site(*flight); !site.empty()) state.text += " at " + site;
    if (in_flight > 1) state.text += fmt::format(" (+{} more in flight)", in_flight - 1);
    state.for_us = std::max(0.0, snapshot_us - number_at(*flight, "issued_us").value_or(snapshot_us));
    return state;
}

double median(std::vector<double> values) {
    if (values.empty()) return 0;
    std::sort(values.begin(), values.end());
    const std::size_t n = values.size();
    return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// Limits that keep the summary about 40 lines long whatever the job's size.
constexpr std::size_t kCommunicatorsShown = 3;
constexpr std::size_t kStatesShown = 4;
constexpr std::size_t kNotArrivedShown = 2;
constexpr std::size_t kLateRanksShown = 3;
constexpr std::size_t kLastCollectivesShown = 5;
constexpr std::size_t kArrivalsListed = 8;

}  // namespace

std::string trace_summary(const json& merged) {
    const json& lockstep = field_at(merged, "lockstep");
    const json& other = field_at(merged, "otherData");
    const json& snapshots = array_at(lockstep, "ranks");
    const json& collectives = array_at(lockstep, "collectives");
    const double origin = number_at(lockstep, "origin_us").value_or(0.0);
    std::vector<std::string> lines;

    std::string head = fmt::format("lockstep trace: reason {}", text_at(lockstep, "reason", "unknown"));
    if (const std::string job = text_at(lockstep, "job"); !job.empty()) head += fmt::format(", job {}", job);
    if (const std::string created = text_at(other, "created"); !created.empty()) head += ", written " + created;
    lines.push_back(head);

    std::vector<int> present;
    double end = origin;
    std::size_t calls = 0;
    for (const json& s : snapshots) {
        present.push_back(static_cast<int>(integer_at(s, "rank", -1)));
        end = std::max(end, number_at(s, "snapshot_us").value_or(origin) + number_at(s, "clock_offset_us").value_or(0));
        calls += array_at(s, "calls").size();
    }
    const std::vector<int> missing = rank_list(array_at(lockstep, "missing_ranks"));
    lines.push_back(fmt::format("Ranks: {} of {} recorded ({}); missing: {}", present.size(),
                                integer_at(lockstep, "expected_ranks", static_cast<std::int64_t>(present.size())),
                                base::format_rank_ranges(present),
                                missing.empty() ? std::string("none") : ranks_text(missing)));
    lines.push_back(fmt::format("Window: {} from {} to the last snapshot, {} recorded", duration_text(end - origin),
                                iso_time(origin), base::count_text(calls, "call", "calls")));

    // Per communicator, the ranks grouped by state; communicators with a call in flight first, then the larger.
    struct CommunicatorView {
        std::string name;
        std::uint64_t id = 0;
        std::int64_t size = 0;
        std::vector<std::pair<int, RankState>> states;
        bool busy = false;
    };
    std::map<std::string, CommunicatorView> views;
    for (const json& s : snapshots) {
        for (const json& c : array_at(s, "communicators")) {
            const std::uint64_t id = id_at(c, "id");
            CommunicatorView& view = views[communicator_key(id, field_at(c, "world_ranks"))];
            view.name = text_at(c, "name", "communicator");
            view.id = id;
            view.size = integer_at(c, "size", 0);
            view.states.emplace_back(static_cast<int>(integer_at(s, "rank", -1)), rank_state(s, id));
            view.busy = view.busy || view.states.back().second.for_us.has_value();
        }
    }
    std::vector<const CommunicatorView*> order;
    for (const auto& [key, view] : views) order.push_back(&view);
    std::stable_sort(order.begin(), order.end(), [](const CommunicatorView* a, const CommunicatorView* b) {
        return a->busy != b->busy ? a->busy : a->size > b->size;
    });
    for (std::size_t i = 0; i < order.size() && i < kCommunicatorsShown; ++i) {
        const CommunicatorView& view = *order[i];
        lines.push_back(fmt::format("Communicator {} (id {}, {}):", view.name, view.id,
                                    base::count_text(static_cast<std::uint64_t>(view.size), "rank", "ranks")));
        std::vector<std::string> texts;
        std::vector<std::vector<int>> ranks;
        std::vector<std::pair<double, double>> spans;
        for (const auto& [rank, state] : view.states) {
            const auto at = std::find(texts.begin(), texts.end(), state.text) - texts.begin();
            if (static_cast<std::size_t>(at) == texts.size()) {
                texts.push_back(state.text);
                ranks.emplace_back();
                spans.emplace_back(std::numeric_limits<double>::infinity(), 0.0);
            }
            ranks[at].push_back(rank);
            if (state.for_us)
                spans[at] = {std::min(spans[at].first, *state.for_us), std::max(spans[at].second, *state.for_us)};
        }
        for (std::size_t g = 0; g < texts.size() && g < kStatesShown; ++g) {
            std::string line = fmt::format("  {}: {}", ranks_text(ranks[g]), texts[g]);
            if (std::isfinite(spans[g].first)) {
                line +=
                    duration_text(spans[g].first) == duration_text(spans[g].second)
                        ? fmt::format(", for {}", duration_text(spans[g].second))
                        : fmt::format(", for {} to {}", duration_text(spans[g].first), duration_text(spans[g].second));
            }
            lines.push_back(line);
        }
        if (texts.size() > kStatesShown) {
            lines.push_back(fmt::format("  ... and {} more states", texts.size() - kStatesShown));
        }
    }
    if (order.size() > kCommunicatorsShown) {
        lines.push_back(
            fmt::format("... and {} more communicators (the JSON has them all)", order.size() - kCommunicatorsShown));
    }

    // Collectives that some member had not arrived at when its snapshot was taken: the latest first.
    std::vector<const json*> stuck;
    for (const json& c : collectives) {
        if (!array_at(c, "not_arrived").empty() && !array_at(c, "arrivals").empty()) stuck.push_back(&c);
    }
    for (std::size_t i = 0; i < stuck.size() && i < kNotArrivedShown; ++i) {
        const json& c = *stuck[stuck.size() - 1 - i];
        std::vector<int> waiting;
        for (const json& a : array_at(c, "arrivals")) waiting.push_back(static_cast<int>(integer_at(a, "rank", -1)));
        lines.push_back(fmt::format("Not arrived: {} #{} on {}: {} waiting, {} never issued it", text_at(c, "op"),
                                    integer_at(c, "seq", 0), text_at(c, "comm_name", "communicator"),
                                    ranks_text(waiting), ranks_text(rank_list(array_at(c, "not_arrived")))));
    }

    // Who arrived last, how often and how late.
    std::map<int, std::size_t> member_of;
    std::map<int, std::vector<double>> late;
    std::size_t decided = 0;
    for (const json& c : collectives) {
        const json last = field_at(c, "last_arriver");
        if (!last.is_number_integer()) continue;
        ++decided;
        for (const json& a : array_at(c, "arrivals")) {
            const int rank = static_cast<int>(integer_at(a, "rank", -1));
            ++member_of[rank];
            if (rank == last.get<int>()) late[rank].push_back(number_at(a, "late_by_us").value_or(0.0));
        }
    }
    std::vector<std::pair<int, std::vector<double>>> latest(late.begin(), late.end());
    std::stable_sort(latest.begin(), latest.end(),
                     [](const auto& a, const auto& b) { return a.second.size() > b.second.size(); });
    lines.push_back(decided == 0 ? std::string("Late arrivals: no collective with 2 or more ranks recorded")
                                 : fmt::format("Late arrivals ({} with 2 or more ranks):",
                                               base::count_text(decided, "collective", "collectives")));
    for (std::size_t i = 0; i < latest.size() && i < kLateRanksShown; ++i) {
        const auto& [rank, lateness] = latest[i];
        lines.push_back(fmt::format("  rank {} was last in {} of {} collectives, median {} after the first", rank,
                                    lateness.size(), member_of[rank], duration_text(median(lateness))));
    }
    if (latest.size() > kLateRanksShown) {
        lines.push_back(fmt::format("  ... and {} more ranks were last at times", latest.size() - kLateRanksShown));
    }

    // The last few collectives with something to compare (two or more ranks recorded, or one that never arrived),
    // each rank's arrival after the first.
    std::vector<const json*> compared;
    for (const json& c : collectives) {
        if (array_at(c, "arrivals").size() >= 2 ||
            (!array_at(c, "arrivals").empty() && !array_at(c, "not_arrived").empty())) {
            compared.push_back(&c);
        }
    }
    if (!compared.empty()) lines.push_back("Last collectives (arrival after the first):");
    const std::size_t shown = std::min(compared.size(), kLastCollectivesShown);
    for (std::size_t i = compared.size() - shown; i < compared.size(); ++i) {
        const json& c = *compared[i];
        const json& arrivals = array_at(c, "arrivals");
        const json last = field_at(c, "last_arriver");
        std::string line = fmt::format("  {} #{} {}: ", text_at(c, "comm_name", "communicator"),
                                       integer_at(c, "seq", 0), text_at(c, "op"));
        auto offset_text = [&](const json& a) {
            const int rank = static_cast<int>(integer_at(a, "rank", -1));
            std::string text = fmt::format("{} +{:.2f} ms", rank, number_at(a, "late_by_us").value_or(0.0) / 1e3);
            if (last.is_number_integer() && last.get<int>() == rank) text += " (last)";
            if (field_at(a, "in_flight") == json(true)) text += " (in flight)";
            return text;
        };
        if (arrivals.size() <= kArrivalsListed) {
            std::vector<std::pair<int, std::string>> by_rank;
            for (const json& a : arrivals)
                by_rank.emplace_back(static_cast<int>(integer_at(a, "rank", -1)), offset_text(a));
            std::sort(by_rank.begin(), by_rank.end());
            for (std::size_t k = 0; k < by_rank.size(); ++k) line += (k == 0 ? "" : ", ") + by_rank[k].second;
        } else {
            std::vector<double> offsets;
            for (const json& a : arrivals) offsets.push_back(number_at(a, "late_by_us").value_or(0.0));
            line += fmt::format("{} ranks, first rank {}, median +{:.2f} ms, latest rank {}", arrivals.size(),
                                integer_at(arrivals.front(), "rank", -1), median(offsets) / 1e3,
                                offset_text(arrivals.back()));
        }
        if (const std::vector<int> absent = rank_list(array_at(c, "not_arrived")); !absent.empty()) {
            line += fmt::format("; {} not arrived", ranks_text(absent));
        }
        lines.push_back(line);
    }

    std::string text;
    for (const std::string& line : lines) text += line + "\n";
    return text;
}

namespace {

// Writes `text` to `target` through a temporary file beside it, renamed into place, so that a reader never sees
// half a file and a failure leaves no partial one.
void write_atomically(const std::filesystem::path& target, std::string_view text) {
    // Named by process and thread, so that two dumps writing the same name at once do not share a temporary file.
    const std::filesystem::path temporary =
        target.string() +
        fmt::format(".tmp.{}.{:x}", ::getpid(), std::hash<std::thread::id>{}(std::this_thread::get_id()));
    const auto fail = [&](std::string_view what, int error) {
        ::unlink(temporary.c_str());
        throw Error(fmt::format("cannot write the trace file {}: {}: {}", target.string(), what, std::strerror(error)));
    };
    base::FileDescriptor fd(::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!fd) {
        const int error = errno;
        throw Error(fmt::format("cannot write the trace file {}: cannot create {}: {}", target.string(),
                                temporary.string(), std::strerror(error)));
    }
    for (std::size_t done = 0; done < text.size();) {
        const ssize_t n = ::write(fd.get(), text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail("write", errno);
        done += static_cast<std::size_t>(n);
    }
    // Data a file system only refuses at the end (a full disk, a quota) shows up in fsync or close.
    if (::fsync(fd.get()) != 0 && errno != EINVAL) fail("fsync", errno);
    if (::close(fd.release()) != 0) fail("close", errno);
    if (::rename(temporary.c_str(), target.c_str()) != 0) fail("rename", errno);
}

// The trace as text: one event a line, so that the file reads and greps well.
std::string trace_text(const json& merged) {
    const auto dump = [](const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); };
    if (!merged.is_object()) return dump(merged) + "\n";
    // traceEvents first: a reader that streams the file (Perfetto) finds the events before lockstep's own keys.
    std::vector<std::string> keys;
    if (merged.contains("traceEvents")) keys.push_back("traceEvents");
    for (const auto& [key, value] : merged.items()) {
        if (key != "traceEvents") keys.push_back(key);
    }
    std::string out = "{";
    for (std::size_t k = 0; k < keys.size(); ++k) {
        const json& value = merged.at(keys[k]);
        out += (k == 0 ? "\n" : ",\n") + dump(keys[k]) + ": ";
        if (keys[k] != "traceEvents" || !value.is_array()) {
            out += dump(value);
            continue;
        }
        out += "[";
        for (std::size_t i = 0; i < value.size(); ++i) out += (i == 0 ? "\n" : ",\n") + dump(value[i]);
        out += "\n]";
    }
    return out + "\n}\n";
}

}  // namespace

void write_trace(const std::filesystem::path& file, const json& merged) {
    const std::string summary = trace_summary(merged);
    write_atomically(file, trace_text(merged));
    std::filesystem::path text_file = file;
    text_file += ".txt";
    write_atomically(text_file, summary);
}

}  // namespace lockstep::detail
