#define BOOST_TEST_MODULE trace_format
#include <boost/test/unit_test.hpp>

// The trace file (collectives/recorder/trace_format.hpp) from snapshots made by hand: three ranks of a job of four
// (rank 3 never answered), rank 1 on a host whose clock is 0.5 s ahead, rank 2 the straggler. Collective 1 is
// blocking, 2 non-blocking, 3 is in flight on ranks 0 and 1 while rank 2 never issued it. With
// LOCKSTEP_TRACE_TEST_OUT set, the case written_for_the_validator leaves its files there for validate_trace.py.

#include "sample_job.hpp"

#include <collectives/recorder/trace_format.hpp>
#include <lockstep/errors.hpp>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using lockstep::detail::merge_trace;
using lockstep::detail::trace_summary;
using lockstep::detail::TraceContext;
using lockstep::detail::write_trace;
using lockstep::trace_test::call;
using lockstep::trace_test::CallSpec;
using lockstep::trace_test::communicator;
using lockstep::trace_test::kJobStartUs;
using lockstep::trace_test::snapshot;
using nlohmann::json;

namespace {

constexpr double T = kJobStartUs;
constexpr double kAhead = 500000.0;  // rank 1's clock

std::vector<json> three_ranks() {
    const std::vector<int> world = {0, 1, 2, 3};
    // issued and completed (true clock) per rank, for collectives 1 and 2; rank 1 records them kAhead later.
    const auto comms = [&](int rank) { return json::array({communicator(0, "world", world, rank, 4)}); };
    std::vector<json> r0 = {
        call({.seq = 1, .issued_us = T + 100, .completed_us = T + 5300}),
        call({.op = "send", .kind = "send", .seq = 1, .issued_us = T + 5400, .completed_us = T + 5500, .peer = 1}),
        call({.seq = 2,
              .nonblocking = true,
              .issued_us = T + 6000,
              .completed_us = T + 9100,
              .waited_us = T + 9500,
              .line = 95}),
        call({.seq = 3, .issued_us = T + 10000}),
    };
    std::vector<json> r1 = {
        call({.seq = 1, .issued_us = T + kAhead + 150, .completed_us = T + kAhead + 5300}),
        call({.op = "recv",
              .kind = "recv",
              .seq = 1,
              .issued_us = T + kAhead + 5400,
              .completed_us = T + kAhead + 5450,
              .peer = 0}),
        call({.seq = 2,
              .nonblocking = true,
              .issued_us = T + kAhead + 6010,
              .completed_us = T + kAhead + 9100,
              .waited_us = T + kAhead + 9600,
              .line = 95}),
        call({.seq = 3, .issued_us = T + kAhead + 10050}),
    };
    std::vector<json> r2 = {
        call({.seq = 1, .issued_us = T + 5100, .completed_us = T + 5300}),
        call({.seq = 2,
              .nonblocking = true,
              .issued_us = T + 9000,
              .completed_us = T + 9100,
              .waited_us = T + 9200,
              .line = 95}),
    };
    return {snapshot(0, "node1", T + 20000, comms(0), r0),
            snapshot(1, "node2", T + kAhead + 20100, comms(1), r1, -kAhead),
            snapshot(2, "node1", T + 20200, comms(2), r2)};
}

const TraceContext kContext{.reason = "hang", .job = "4242", .expected_ranks = 4, .stacks = nullptr};

// The events of `ph` on rank `pid` (any rank: -1) named `name` (any: "").
std::vector<json> events(const json& trace, const std::string& ph, int pid = -1, const std::string& name = "") {
    std::vector<json> out;
    for (const json& e : trace["traceEvents"]) {
        if (e["ph"] == ph && (pid < 0 || e["pid"] == pid) && (name.empty() || e["name"] == name)) out.push_back(e);
    }
    return out;
}

// The slice of rank `pid` for collective `seq` ("X" or async begin "b").
json slice(const json& trace, int pid, int seq) {
    for (const json& e : trace["traceEvents"]) {
        if ((e["ph"] == "X" || e["ph"] == "b") && e["pid"] == pid && e["args"]["kind"] == "collective" &&
            e["args"]["seq"] == seq) {
            return e;
        }
    }
    BOOST_FAIL("no slice of rank " << pid << " for collective " << seq);
    return nullptr;
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

bool has_line(const std::string& text, const std::string& line) {
    for (const std::string& l : lines_of(text)) {
        if (l == line) return true;
    }
    return false;
}

bool has_line_starting(const std::string& text, const std::string& start) {
    for (const std::string& l : lines_of(text)) {
        if (l.starts_with(start)) return true;
    }
    return false;
}

std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

struct TemporaryDirectory {
    fs::path path;
    TemporaryDirectory() {
        std::string pattern = (fs::temp_directory_path() / "lockstep-trace-test-XXXXXX").string();
        BOOST_REQUIRE(::mkdtemp(pattern.data()) != nullptr);
        path = pattern;
    }
    ~TemporaryDirectory() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

}  // namespace

BOOST_AUTO_TEST_CASE(one_process_per_rank_with_its_name_and_the_missing_rank_recorded) {
    const json trace = merge_trace(three_ranks(), kContext);
    std::map<int, std::string> names;
    for (const json& e : events(trace, "M", -1, "process_name")) names[e["pid"]] = e["args"]["name"];
    BOOST_TEST(names[0] == "rank 0 (node1, pid 4000)");
    BOOST_TEST(names[1] == "rank 1 (node2, pid 4001)");
    BOOST_TEST(names[2] == "rank 2 (node1, pid 4002)");
    BOOST_TEST(names[3] == "rank 3 (missing)");
    BOOST_TEST(events(trace, "M", -1, "process_sort_index").size() == 4u);
    BOOST_TEST(trace["lockstep"]["missing_ranks"] == json::array({3}));
    BOOST_TEST(trace["otherData"]["missing_ranks"] == "3");
    BOOST_TEST(trace["otherData"]["ranks"] == "4");
    BOOST_TEST(trace["otherData"]["lockstep_trace_version"] == "1");
    BOOST_TEST(trace["otherData"]["reason"] == "hang");
    BOOST_TEST(trace["displayTimeUnit"] == "ms");
    BOOST_TEST(trace["lockstep"]["version"] == 1);
    BOOST_TEST(trace["lockstep"]["ranks"].size() == 3u);
    BOOST_TEST(trace["lockstep"]["ranks"][1]["clock_offset_us"] == -kAhead);
    BOOST_TEST(trace["lockstep"]["ranks"][0]["clock_offset_us"] == 0.0);
    BOOST_TEST(trace["lockstep"]["origin_us"] == T + 100);
    BOOST_TEST(!trace["lockstep"].contains("stacks"));
}

BOOST_AUTO_TEST_CASE(the_last_arriver_is_marked_on_the_merged_clock) {
    const json trace = merge_trace(three_ranks(), kContext);
    // Without the correction rank 1 (0.5 s ahead) would look last; with it, rank 2 is, 5 ms after rank 0.
    const json s0 = slice(trace, 0, 1), s1 = slice(trace, 1, 1), s2 = slice(trace, 2, 1);
    BOOST_TEST(s0["ph"] == "X");
    BOOST_TEST(s0["tid"] == 0);
    BOOST_TEST(s0["ts"] == 0.0);
    BOOST_TEST(s0["dur"] == 5200.0);
    BOOST_TEST(s1["ts"] == 50.0);
    BOOST_TEST(s2["ts"] == 5000.0);
    BOOST_TEST(s2["dur"] == 200.0);
    BOOST_TEST(s0["args"]["arrival"] == 1);
    BOOST_TEST(s1["args"]["arrival"] == 2);
    BOOST_TEST(s2["args"]["arrival"] == 3);
    BOOST_TEST(s2["args"]["of"] == 3);
    BOOST_TEST(s2["args"]["members"] == 4);
    BOOST_TEST(s1["args"]["late_by_us"] == 50.0);
    BOOST_TEST(s2["args"]["late_by_us"] == 5000.0);
    BOOST_TEST(s2["args"]["last_arriver"] == true);
    BOOST_TEST(s2["cname"] == "terrible");
    for (const json& s : {s0, s1}) {
        BOOST_TEST(s["args"]["last_arriver"] == false);
        BOOST_TEST(s["args"]["waited_for"] == 2);
        BOOST_TEST(!s.contains("cname"));
    }
    BOOST_TEST(!s2["args"].contains("waited_for"));
    BOOST_TEST(s0["args"]["site"] == "train.cpp:88 (train_step)");
    BOOST_TEST(s0["args"]["completed_us"] == 5200.0);
    BOOST_TEST(s1["args"]["completed_us"] == 5200.0);  // rank 1's time, corrected
    BOOST_TEST(s0["args"]["outcome"] == "ok");
    // Point-to-point calls are slices too, with no arrival.
    const std::vector<json> sends = events(trace, "X", 0, "send");
    BOOST_REQUIRE(sends.size() == 1u);
    BOOST_TEST(sends[0]["cat"] == "p2p");
    BOOST_TEST(sends[0]["args"]["peer"] == 1);
    BOOST_TEST(!sends[0]["args"].contains("arrival"));
}

BOOST_AUTO_TEST_CASE(a_flow_from_the_last_arriver_to_each_waiting_member) {
    const json trace = merge_trace(three_ranks(), kContext);
    const std::vector<json> starts = events(trace, "s");
    const std::vector<json> ends = events(trace, "f");
    // Collective 1 only: 2 is non-blocking (async slices bind no flow), 3 has no last arriver.
    BOOST_REQUIRE(starts.size() == 2u);
    BOOST_REQUIRE(ends.size() == 2u);
    std::map<std::uint64_t, json> start_of;
    for (const json& s : starts) {
        BOOST_TEST(s["pid"] == 2);
        BOOST_TEST(s["cat"] == "wait");
        BOOST_TEST(s["ts"] == 5000.001);  // inside rank 2's slice [5000, 5200)
        start_of[s["id"]] = s;
    }
    std::vector<int> waiting;
    for (const json& f : ends) {
        BOOST_REQUIRE(start_of.count(f["id"]) == 1u);
        const json& s = start_of[f["id"]];
        BOOST_TEST(f["cat"] == s["cat"]);
        BOOST_TEST(f["name"] == s["name"]);
        BOOST_TEST(f["bp"] == "e");
        BOOST_TEST(f["ts"].get<double>() > s["ts"].get<double>());
        const json waiting_slice = slice(trace, f["pid"], 1);
        BOOST_TEST(f["ts"].get<double>() >= waiting_slice["ts"].get<double>());
        BOOST_TEST(f["ts"].get<double>() < waiting_slice["ts"].get<double>() + waiting_slice["dur"].get<double>());
        waiting.push_back(f["pid"]);
    }
    std::sort(waiting.begin(), waiting.end());
    BOOST_TEST(waiting == (std::vector<int>{0, 1}));
}

BOOST_AUTO_TEST_CASE(a_non_blocking_call_is_an_async_slice_until_it_was_waited_for) {
    const json trace = merge_trace(three_ranks(), kContext);
    const json b0 = slice(trace, 0, 2), b2 = slice(trace, 2, 2);
    BOOST_TEST(b0["ph"] == "b");
    BOOST_TEST(b0["cat"] == "nonblocking");
    BOOST_TEST(b0["ts"] == 5900.0);
    BOOST_TEST(b2["args"]["last_arriver"] == true);
    BOOST_TEST(b2["cname"] == "terrible");
    BOOST_TEST(b0["args"]["waited_for"] == 2);
    BOOST_TEST(b0["args"]["waited_us"] == 9400.0);
    std::set<std::uint64_t> ids;
    for (const json& b : events(trace, "b")) ids.insert(b["id"].get<std::uint64_t>());
    BOOST_TEST(ids.size() == 3u);  // one id per rank and call
    for (const json& e : events(trace, "e", 0)) {
        BOOST_TEST(e["id"] == b0["id"]);
        BOOST_TEST(e["cat"] == "nonblocking");
        BOOST_TEST(e["name"] == b0["name"]);
        BOOST_TEST(e["ts"] == 9400.0);  // waited, not completed
    }
    BOOST_TEST(events(trace, "e").size() == 3u);
}

BOOST_AUTO_TEST_CASE(a_call_in_flight_ends_at_its_ranks_snapshot_and_names_who_never_arrived) {
    const json trace = merge_trace(three_ranks(), kContext);
    const json s0 = slice(trace, 0, 3), s1 = slice(trace, 1, 3);
    BOOST_TEST(s0["ts"] == 9900.0);
    BOOST_TEST(s0["dur"] == 10000.0);  // until rank 0's snapshot
    BOOST_TEST(s1["dur"] == 10050.0);  // until rank 1's
    for (const json& s : {s0, s1}) {
        BOOST_TEST(s["args"]["outcome"] == "in_flight");
        BOOST_TEST(s["args"]["completed_us"].is_null());
        BOOST_TEST(s["args"]["not_arrived"] == json::array({2}));
        BOOST_TEST(s["args"]["last_arriver"] == false);
        BOOST_TEST(!s["args"].contains("waited_for"));
        BOOST_TEST(!s.contains("cname"));
    }
    const json& collectives = trace["lockstep"]["collectives"];
    BOOST_REQUIRE(collectives.size() == 3u);
    BOOST_TEST(collectives[0]["last_arriver"] == 2);
    BOOST_TEST(collectives[2]["seq"] == 3);
    BOOST_TEST(collectives[2]["last_arriver"].is_null());
    BOOST_TEST(collectives[2]["not_arrived"] == json::array({2}));
    BOOST_TEST(collectives[2]["arrivals"][1]["in_flight"] == true);
}

BOOST_AUTO_TEST_CASE(a_call_that_failed_ends_at_its_last_recorded_time_with_its_error) {
    const std::vector<int> world = {0};
    json failed = call({.seq = 1, .issued_us = T, .error = "SignatureMismatchError"});
    failed["payload_us"] = T + 40;
    const json trace =
        merge_trace({snapshot(0, "node1", T + 1000, json::array({communicator(0, "world", world, 0, 1)}), {failed})},
                    {.reason = "error"});
    const std::vector<json> slices = events(trace, "X");
    BOOST_REQUIRE(slices.size() == 1u);
    BOOST_TEST(slices[0]["dur"] == 40.0);  // not until the snapshot
    BOOST_TEST(slices[0]["args"]["outcome"] == "error");
    BOOST_TEST(slices[0]["args"]["error"] == "SignatureMismatchError");
}

BOOST_AUTO_TEST_CASE(ts_never_decreases_on_a_track) {
    for (const json& trace : {merge_trace(three_ranks(), kContext),
                              merge_trace(lockstep::trace_test::sample_job({.ranks = 5}), kContext)}) {
        std::map<std::pair<int, int>, double> last;
        for (const json& e : trace["traceEvents"]) {
            if (e["ph"] == "M") continue;
            const auto track = std::make_pair(e["pid"].get<int>(), e["tid"].get<int>());
            const double ts = e["ts"].get<double>();
            BOOST_TEST(ts >= 0.0);
            if (last.count(track) != 0) BOOST_TEST(ts >= last[track], e.dump());
            last[track] = ts;
        }
    }
}

BOOST_AUTO_TEST_CASE(overlapping_blocking_calls_of_one_rank_go_on_another_thread) {
    const std::vector<int> world = {0};
    const json comms = json::array({communicator(0, "world", world, 0, 2), communicator(1, "other", world, 0, 1)});
    const std::vector<json> ranks = {
        snapshot(0, "node1", T + 1000, comms,
                 {call({.seq = 1, .issued_us = T, .completed_us = T + 500}),
                  call({.op = "barrier", .comm = 1, .seq = 1, .issued_us = T + 200, .completed_us = T + 800}),
                  call({.seq = 2, .issued_us = T + 600, .completed_us = T + 700})})};
    const json trace = merge_trace(ranks, kContext);
    const std::vector<json> slices = events(trace, "X");
    BOOST_REQUIRE(slices.size() == 3u);
    BOOST_TEST(slices[0]["tid"] == 0);
    // The barrier overlaps the first allreduce without nesting: another thread, whose id is no rank's (Perfetto reads
    // thread 0 of process P as thread P).
    BOOST_TEST(slices[1]["tid"].get<int>() > (1 << 20));
    BOOST_TEST(slices[2]["tid"] == 0);
    BOOST_TEST(events(trace, "M", 0, "thread_name").size() == 2u);
    BOOST_TEST(trace["lockstep"]["missing_ranks"] == json::array({1, 2, 3}));
}

// The check library's communicator ids have the top bit set: read as doubles or as 32-bit numbers, two communicators
// would become one. A dump of a sub-communicator asks its members only: the other ranks of the job are not missing.
BOOST_AUTO_TEST_CASE(communicator_ids_keep_all_64_bits_and_only_the_asked_ranks_can_be_missing) {
    const std::uint64_t first = (std::uint64_t{1} << 63) + 1;
    const std::vector<int> pair = {1, 3};
    std::vector<json> ranks;
    for (const int r : pair) {
        json a = communicator(0, "first", pair, r, 1);
        json b = communicator(0, "second", pair, r, 1);
        a["id"] = first;
        b["id"] = first + 1;
        json on_a = call({.seq = 1, .issued_us = T + r, .completed_us = T + 500});
        json on_b = call({.op = "barrier", .seq = 1, .issued_us = T + 600 + r, .completed_us = T + 700});
        on_a["comm"] = first;
        on_b["comm"] = first + 1;
        ranks.push_back(snapshot(r, "node1", T + 1000, json::array({a, b}), {on_a, on_b}));
    }
    TraceContext context = kContext;
    context.asked = pair;
    const json trace = merge_trace(ranks, context);
    BOOST_TEST(trace["lockstep"]["missing_ranks"].empty());
    const json& collectives = trace["lockstep"]["collectives"];
    BOOST_REQUIRE(collectives.size() == 2u);
    for (const json& c : collectives) {
        BOOST_TEST(c["members"] == 2);
        BOOST_TEST(c["arrivals"].size() == 2u);
        BOOST_TEST(c["last_arriver"] == 3);
    }
    const std::string text = trace_summary(trace);
    BOOST_TEST(text.find("(id " + std::to_string(first) + ", 2 ranks)") != std::string::npos, text);
    BOOST_TEST(text.find("(id " + std::to_string(first + 1) + ", 2 ranks)") != std::string::npos, text);
}

BOOST_AUTO_TEST_CASE(broken_snapshots_are_left_out_not_fatal) {
    std::vector<json> ranks = three_ranks();
    ranks.push_back(json::array({1, 2}));                             // not an object
    ranks.push_back({{"host", "x"}});                                 // no rank
    ranks.push_back(snapshot(0, "elsewhere", T, json::array(), {}));  // rank 0 again: the first one is kept
    ranks.push_back({{"rank", 3}, {"calls", "none"}, {"communicators", 7}});
    ranks.push_back({{"rank", 1e15}});  // no such rank: left out, and no billions of missing ranks
    ranks[0]["communicators"].push_back(communicator(5, "odd", {0, 2000000000}, 0, 0));
    ranks[2]["calls"].push_back({{"op", "allreduce"}});  // no issued time
    ranks[2]["calls"].push_back(call({.seq = 9, .issued_us = T + 19000, .file = "bad\xff.cpp"}));
    const json trace = merge_trace(ranks, kContext);
    BOOST_TEST(trace["lockstep"]["ranks"].size() == 4u);
    BOOST_TEST(trace["lockstep"]["missing_ranks"].empty());
    BOOST_TEST(trace["lockstep"]["ranks"][0]["host"] == "node1");
    BOOST_TEST(merge_trace(ranks, {})["lockstep"]["missing_ranks"].size() <= 1u << 16);
    TemporaryDirectory dir;
    BOOST_CHECK_NO_THROW(write_trace(dir.path / "broken.json", trace));  // invalid UTF-8 replaced, not thrown
    BOOST_TEST(json::parse(read_file(dir.path / "broken.json"))["traceEvents"].is_array());
    BOOST_CHECK_NO_THROW(merge_trace({}, {}));
    BOOST_CHECK_NO_THROW((void)trace_summary(json::object()));
    BOOST_CHECK_NO_THROW((void)trace_summary(json::array()));
    BOOST_CHECK_NO_THROW((void)trace_summary({{"lockstep", {{"collectives", {{{"arrivals", 5}}}}}}}));
}

BOOST_AUTO_TEST_CASE(the_summary_names_state_stragglers_and_arrivals) {
    const std::string text = trace_summary(merge_trace(three_ranks(), kContext));
    BOOST_TEST_MESSAGE(text);
    BOOST_TEST(has_line_starting(text, "lockstep trace: reason hang, job 4242, written "));
    BOOST_TEST(has_line(text, "Ranks: 3 of 4 recorded (0-2); missing: rank 3"));
    BOOST_TEST(has_line_starting(
        text, "Window: 20.1 ms from 2026-12-05T12:00:00.000Z to the last snapshot, 10 calls recorded"));
    BOOST_TEST(has_line(text, "Communicator world (id 0, 4 ranks):"));
    BOOST_TEST(has_line_starting(
        text,
        "  ranks 0-1: last completed allreduce #2; in flight allreduce #3 at train.cpp:88 (train_step), for 10."));
    BOOST_TEST(has_line(text, "  rank 2: last completed allreduce #2; not in a call"));
    BOOST_TEST(has_line(text, "Not arrived: allreduce #3 on world: ranks 0-1 waiting, rank 2 never issued it"));
    BOOST_TEST(has_line(text, "Late arrivals (2 collectives with 2 or more ranks):"));
    BOOST_TEST(has_line(text, "  rank 2 was last in 2 of 2 collectives, median 4.0 ms after the first"));
    BOOST_TEST(has_line(text, "  world #1 allreduce: 0 +0.00 ms, 1 +0.05 ms, 2 +5.00 ms (last)"));
    BOOST_TEST(
        has_line(text, "  world #3 allreduce: 0 +0.00 ms (in flight), 1 +0.05 ms (in flight); rank 2 not arrived"));
}

BOOST_AUTO_TEST_CASE(the_summary_stays_short_for_a_large_job) {
    std::vector<json> ranks =
        lockstep::trace_test::sample_job({.ranks = 96, .steps = 20, .straggler = 41, .hang = false});
    // A communicator of its own on every rank, and a different call in flight on every rank of the world.
    for (json& s : ranks) {
        const int r = s["rank"];
        s["communicators"].push_back(communicator(2 + r, "solo", {r}, r, 0));
        s["calls"].push_back(call({.op = "reduce", .comm = 0, .seq = 1000 + r, .issued_us = T, .line = r}));
    }
    const std::string text = trace_summary(merge_trace(ranks, {.reason = "demand", .expected_ranks = 100}));
    BOOST_TEST_MESSAGE(text);
    BOOST_TEST(lines_of(text).size() <= 40u);
    BOOST_TEST(has_line(text, "Ranks: 96 of 100 recorded (0-95); missing: ranks 96-99"));
    BOOST_TEST(has_line(text, "  ... and 92 more states"));
    BOOST_TEST(has_line(text, "... and 95 more communicators (the JSON has them all)"));
    BOOST_TEST(has_line_starting(text, "  rank 41 was last in 61 of 61 collectives, median "));
    BOOST_TEST(has_line_starting(text, "  world #61 allreduce: 96 ranks, first rank "));
    BOOST_TEST(text.find(" #1095 ") == std::string::npos);  // one rank alone: nothing to compare
}

BOOST_AUTO_TEST_CASE(write_trace_writes_the_json_and_the_summary_beside_it) {
    TemporaryDirectory dir;
    const json trace = merge_trace(three_ranks(), kContext);
    const fs::path file = dir.path / "job.json";
    write_trace(file, trace);
    const std::string text = read_file(file);
    BOOST_TEST(json::parse(text) == trace);
    BOOST_TEST(text.starts_with("{\n\"traceEvents\": [\n{"));  // the events first, one a line
    BOOST_TEST(read_file(dir.path / "job.json.txt") == trace_summary(trace));
    write_trace(file, merge_trace(three_ranks(), {.reason = "demand"}));  // replaces the earlier one
    BOOST_TEST(json::parse(read_file(file))["lockstep"]["reason"] == "demand");
    std::size_t entries = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path)) ++entries;
    BOOST_TEST(entries == 2u);  // no temporary file left
}

BOOST_AUTO_TEST_CASE(write_trace_names_the_path_and_the_reason_when_it_cannot) {
    TemporaryDirectory dir;
    const json trace = merge_trace(three_ranks(), kContext);
    const auto fails_with = [&](const fs::path& file, const std::string& reason) {
        try {
            write_trace(file, trace);
            BOOST_ERROR("no error writing " << file);
        } catch (const lockstep::Error& e) {
            const std::string what = e.what();
            BOOST_TEST(what.find(file.string()) != std::string::npos, what);
            BOOST_TEST(what.find(reason) != std::string::npos, what);
        }
    };
    fails_with(dir.path / "no" / "such" / "dir" / "t.json", "No such file or directory");
    std::ofstream(dir.path / "plain").put('x');
    fails_with(dir.path / "plain" / "t.json", "Not a directory");
    // A file system that refuses the data part-way (as a full disk does): a file size limit, its signal ignored.
    rlimit saved{};
    BOOST_REQUIRE(::getrlimit(RLIMIT_FSIZE, &saved) == 0);
    const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
    rlimit small = saved;
    small.rlim_cur = 4096;
    BOOST_REQUIRE(::setrlimit(RLIMIT_FSIZE, &small) == 0);
    fails_with(dir.path / "big.json", "File too large");
    ::setrlimit(RLIMIT_FSIZE, &saved);
    std::signal(SIGXFSZ, old_handler);
    std::size_t entries = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir.path)) ++entries;
    BOOST_TEST(entries == 1u);  // "plain": neither a temporary file nor a partial trace left
}

BOOST_AUTO_TEST_CASE(written_for_the_validator) {
    const char* out = std::getenv("LOCKSTEP_TRACE_TEST_OUT");
    TemporaryDirectory dir;
    const fs::path where = out != nullptr ? fs::path(out) : dir.path;
    write_trace(where / "three_ranks.json", merge_trace(three_ranks(), kContext));
    write_trace(where / "sample_job.json", merge_trace(lockstep::trace_test::sample_job({}), kContext));
    BOOST_TEST(fs::exists(where / "three_ranks.json.txt"));
}
