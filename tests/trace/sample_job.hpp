#pragma once
// Recorder snapshots made by hand (docs/tracing.md: the per-rank snapshot), for the trace file's tests and for the
// sample trace: single calls and snapshots to assert on, and a whole small training job in which one rank is slow
// (and, if asked, finally never arrives), with non-blocking and point-to-point calls, a second communicator and a
// host whose clock is off.

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lockstep::trace_test {

using nlohmann::json;

// 2026-12-05 12:00:00 UTC in CLOCK_REALTIME microseconds: where the synthetic jobs start.
inline constexpr double kJobStartUs = 1796472000.0 * 1e6;

struct CallSpec {
    std::string op = "allreduce";
    std::string kind = "collective";
    std::int64_t comm = 0;
    std::int64_t seq = 0;
    bool nonblocking = false;
    double issued_us = 0;
    std::optional<double> completed_us;  // none: in flight
    std::optional<double> waited_us;
    std::string file = "train.cpp";
    int line = 88;
    std::string function = "train_step";
    std::int64_t step = 0;
    int root = -1;
    int peer = -1;
    std::int64_t bytes = 4096;
    std::string error;  // outcome "error" when set
};

inline json call(const CallSpec& spec) {
    const bool in_flight = !spec.completed_us.has_value();
    json c = {{"comm", spec.comm},
              {"seq", spec.seq},
              {"op", spec.op},
              {"kind", spec.kind},
              {"nonblocking", spec.nonblocking},
              {"dtype", "float32"},
              {"shape", {spec.bytes / 4}},
              {"count", spec.bytes / 4},
              {"bytes", spec.bytes},
              {"root", spec.root},
              {"peer", spec.peer},
              {"tag", 0},
              {"step", spec.step},
              {"file", spec.file},
              {"line", spec.line},
              {"function", spec.function},
              {"site", spec.file + ":" + std::to_string(spec.line) + " (" + spec.function + ")"},
              {"issued_us", spec.issued_us},
              {"signature_us", nullptr},
              {"payload_us", spec.issued_us + 1.0},
              {"completed_us", in_flight ? json(nullptr) : json(*spec.completed_us)},
              {"waited_us", spec.waited_us ? json(*spec.waited_us) : json(nullptr)},
              {"outcome", !spec.error.empty() ? "error" : (in_flight ? "in_flight" : "ok")}};
    if (!spec.error.empty()) c["error"] = spec.error;
    return c;
}

inline json communicator(std::int64_t id, const std::string& name, const std::vector<int>& world_ranks, int world_rank,
                         std::int64_t recorded) {
    const auto at = std::find(world_ranks.begin(), world_ranks.end(), world_rank);
    return {{"id", id},
            {"name", name},
            {"size", world_ranks.size()},
            {"rank", at == world_ranks.end() ? -1 : at - world_ranks.begin()},
            {"world_ranks", world_ranks},
            {"recorded", recorded},
            {"dropped", 0}};
}

// One rank's snapshot; its calls sorted by issued time, as the recorder gives them.
inline json snapshot(int rank, const std::string& host, double snapshot_us, json communicators, std::vector<json> calls,
                     std::optional<double> clock_offset_us = std::nullopt) {
    std::stable_sort(calls.begin(), calls.end(), [](const json& a, const json& b) {
        return a["issued_us"].get<double>() < b["issued_us"].get<double>();
    });
    json s = {{"rank", rank},
              {"host", host},
              {"pid", 4000 + rank},
              {"snapshot_us", snapshot_us},
              {"capacity", 2048},
              {"communicators", std::move(communicators)},
              {"calls", std::move(calls)}};
    if (clock_offset_us) s["clock_offset_us"] = *clock_offset_us;
    return s;
}

struct SampleJob {
    int ranks = 4;
    int steps = 8;
    int straggler = 2;  // computes longer each step: the last arriver of every collective it belongs to
    bool hang = true;   // after the last step the straggler never comes to the final allreduce
    // The last rank runs on another host whose clock is this far ahead; its snapshot says how to correct it.
    double clock_ahead_us = 250000.0;
};

// A training job: a broadcast of the parameters, a barrier of ranks 0 and 1 on their own communicator, then per step
// a forward and backward pass (the straggler's 12 ms longer, and 3 ms longer before each other collective), two
// gradient allreduces, a non-blocking allreduce of the loss waited for after a point-to-point exchange with the
// neighbours (isend to the right, recv from the left). With `hang`, the ranks other than the straggler wait in a last
// allreduce when the snapshots are taken, 2 s later.
inline std::vector<json> sample_job(const SampleJob& job) {
    const int n = job.ranks;
    std::vector<std::vector<json>> calls(static_cast<std::size_t>(n));
    std::vector<int> world(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) world[static_cast<std::size_t>(r)] = r;
    const std::vector<int> pair = {0, 1};
    std::int64_t seq = 0;
    std::int64_t p2p = 0;
    double now = kJobStartUs + 1000.0;
    const auto jitter = [](int rank, std::int64_t k) { return static_cast<double>((rank * 37 + k * 53) % 200); };
    const auto slow = [&](int rank, double us) { return rank == job.straggler ? us : 0.0; };
    // A blocking collective of `members`, each arriving at start[r]: all complete together after the last arrival.
    const auto collective = [&](const std::string& op, std::int64_t comm, std::int64_t s,
                                const std::vector<int>& members, const std::vector<double>& start, std::int64_t step,
                                int line, std::int64_t bytes) {
        double last = 0;
        for (const int r : members) last = std::max(last, start[static_cast<std::size_t>(r)]);
        const double done = last + 400.0 + static_cast<double>(bytes) / 10000.0;
        for (const int r : members) {
            CallSpec c{.op = op,
                       .comm = comm,
                       .seq = s,
                       .issued_us = start[static_cast<std::size_t>(r)],
                       .completed_us = done,
                       .line = line,
                       .step = step,
                       .bytes = bytes};
            if (op == "broadcast") c.root = 0;
            calls[static_cast<std::size_t>(r)].push_back(call(c));
        }
        return done;
    };
    std::vector<double> start(static_cast<std::size_t>(n));
    for (int r = 0; r < n; ++r) start[static_cast<std::size_t>(r)] = now + jitter(r, 0) + slow(r, 2000.0);
    now = collective("broadcast", 0, ++seq, world, start, 0, 61, 1 << 22);
    if (n >= 2) {
        std::vector<double> at(static_cast<std::size_t>(n), now + 100.0);
        at[1] += 350.0;
        now = std::max(now, collective("barrier", 1, 1, pair, at, 0, 64, 0));
    }
    for (int step = 1; step <= job.steps; ++step) {
        for (int r = 0; r < n; ++r) {
            const double compute = 10000.0 + (r == job.straggler ? 12000.0 : 0.0) + jitter(r, step) * 5.0;
            start[static_cast<std::size_t>(r)] = now + compute;
        }
        for (int bucket = 0; bucket < 2; ++bucket) {
            const double done = collective("allreduce", 0, ++seq, world, start, step, 88 + bucket, 8 << 20);
            for (int r = 0; r < n; ++r)
                start[static_cast<std::size_t>(r)] = done + 50.0 + jitter(r, seq) + slow(r, 3000.0);
        }
        // The loss: a non-blocking allreduce, waited for after the exchange with the neighbours.
        const std::int64_t loss_seq = ++seq;
        double last = 0;
        for (int r = 0; r < n; ++r) last = std::max(last, start[static_cast<std::size_t>(r)]);
        ++p2p;
        for (int r = 0; r < n; ++r) {
            const double issued = start[static_cast<std::size_t>(r)];
            const double exchanged = last + 900.0 + jitter(r, p2p);
            auto& mine = calls[static_cast<std::size_t>(r)];
            mine.push_back(call({.op = "allreduce",
                                 .comm = 0,
                                 .seq = loss_seq,
                                 .nonblocking = true,
                                 .issued_us = issued,
                                 .completed_us = last + 300.0,
                                 .waited_us = exchanged + 20.0,
                                 .line = 95,
                                 .step = step,
                                 .bytes = 4}));
            mine.push_back(call({.op = "send",
                                 .kind = "send",
                                 .comm = 0,
                                 .seq = p2p,
                                 .nonblocking = true,
                                 .issued_us = issued + 10.0,
                                 .completed_us = last + 500.0,
                                 .waited_us = exchanged + 10.0,
                                 .line = 97,
                                 .step = step,
                                 .peer = (r + 1) % n,
                                 .bytes = 1 << 16}));
            mine.push_back(call({.op = "recv",
                                 .kind = "recv",
                                 .comm = 0,
                                 .seq = p2p,
                                 .issued_us = issued + 20.0,
                                 .completed_us = exchanged,
                                 .line = 98,
                                 .step = step,
                                 .peer = (r + n - 1) % n,
                                 .bytes = 1 << 16}));
            mine.push_back(call({.op = "wait",
                                 .kind = "wait",
                                 .comm = 0,
                                 .seq = loss_seq,
                                 .issued_us = exchanged + 5.0,
                                 .completed_us = exchanged + 20.0,
                                 .line = 99,
                                 .step = step,
                                 .bytes = 0}));
        }
        now = last + 1200.0;
    }
    double snapshot_at = now + 1000.0;
    if (job.hang) {
        const std::int64_t stuck = ++seq;
        for (int r = 0; r < n; ++r) {
            if (r == job.straggler) continue;
            calls[static_cast<std::size_t>(r)].push_back(call({.op = "allreduce",
                                                               .comm = 0,
                                                               .seq = stuck,
                                                               .issued_us = now + 10000.0 + jitter(r, stuck),
                                                               .line = 88,
                                                               .step = job.steps + 1,
                                                               .bytes = 8 << 20}));
        }
        snapshot_at = now + 2e6;
    }
    std::vector<json> snapshots;
    for (int r = 0; r < n; ++r) {
        const bool other_host = n > 1 && r == n - 1 && job.clock_ahead_us != 0;
        const double ahead = other_host ? job.clock_ahead_us : 0.0;
        std::vector<json> mine = calls[static_cast<std::size_t>(r)];
        for (json& c : mine) {
            for (const char* key : {"issued_us", "payload_us", "completed_us", "waited_us"}) {
                if (c[key].is_number()) c[key] = c[key].get<double>() + ahead;
            }
        }
        const auto on_world = std::count_if(mine.begin(), mine.end(), [](const json& c) { return c["comm"] == 0; });
        json comms = json::array();
        comms.push_back(communicator(0, "world", world, r, on_world));
        if (r < 2 && n >= 2) comms.push_back(communicator(1, "pair", pair, r, 1));
        snapshots.push_back(snapshot(r, other_host ? "node2" : "node1", snapshot_at + 300.0 * r + ahead,
                                     std::move(comms), std::move(mine),
                                     other_host ? std::optional<double>(-ahead) : std::nullopt));
    }
    return snapshots;
}

}  // namespace lockstep::trace_test
