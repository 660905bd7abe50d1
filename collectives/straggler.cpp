#include "fixed_record.hpp"
#include "recorder/job_directory.hpp"
#include "recorder/recorder.hpp"
#include "recorder/trace_format.hpp"
#include "wait_statistics.hpp"
#include "watchdog/channel.hpp"
#include "world_hooks.hpp"

#include <lockstep/logging.hpp>
#include <lockstep/runtime.hpp>
#include <lockstep/straggler.hpp>

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstring>

namespace lockstep {

StragglerRow local_straggler_row() {
    StragglerRow row;
    row.rank = current_identity().rank;
    row.host = host_name();
    row.elapsed_seconds = detail::seconds_since_world_start();
    row.wait_seconds = detail::process_wait_seconds();
    return row;
}

namespace {
// One rank's row as it travels in the allgather.
struct StragglerRecord {
    double elapsed_seconds;
    double wait_seconds;
    detail::FixedText<64> host;
};
}  // namespace

std::vector<StragglerRow> gather_straggler_rows(Communicator& comm) {
    // Read the totals before the gather, so that the report's own collective is not counted as waiting.
    const StragglerRow mine = local_straggler_row();
    StragglerRecord record{mine.elapsed_seconds, mine.wait_seconds, {}};
    record.host.assign(mine.host);
    std::vector<StragglerRow> rows;
    int rank = 0;
    for (const StragglerRecord& r : detail::allgather_fixed(comm, record)) {
        rows.push_back({rank++, r.host.str(), r.elapsed_seconds, r.wait_seconds});
    }
    return rows;
}

namespace {

// The rank the others wait for (the one that waits least) and the median wait of the others; rows has two or more.
struct Awaited {
    const StragglerRow* rank;
    double median_other_wait;
};

Awaited awaited_rank(const std::vector<StragglerRow>& rows) {
    const auto least = std::min_element(rows.begin(), rows.end(),
                                        [](const auto& a, const auto& b) { return a.wait_seconds < b.wait_seconds; });
    std::vector<double> others;
    for (const auto& r : rows) {
        if (r.rank != least->rank) others.push_back(r.wait_seconds);
    }
    std::sort(others.begin(), others.end());
    const std::size_t mid = others.size() / 2;
    return {&*least, others.size() % 2 == 1 ? others[mid] : (others[mid - 1] + others[mid]) / 2.0};
}

bool waits_too_long(const Awaited& a) {
    const double extra = a.median_other_wait - a.rank->wait_seconds;
    return extra > straggler_share * a.rank->elapsed_seconds && extra >= straggler_floor_seconds;
}

}  // namespace

bool someone_waits(const std::vector<StragglerRow>& rows) {
    return rows.size() > 1 && waits_too_long(awaited_rank(rows));
}

std::string format_straggler_report(const std::vector<StragglerRow>& rows) {
    if (rows.empty()) return "Straggler report: no ranks\n";
    std::string text =
        "Straggler report (time since start, split into compute and waiting in collectives):\n\n"
        "| rank | host | total s | compute s | wait s | wait % |\n|---:|---|---:|---:|---:|---:|\n";
    for (const auto& r : rows) {
        const double share = r.elapsed_seconds > 0 ? 100.0 * r.wait_seconds / r.elapsed_seconds : 0.0;
        text += fmt::format("| {} | {} | {:.3f} | {:.3f} | {:.3f} | {:.1f} % |\n", r.rank, r.host, r.elapsed_seconds,
                            r.compute_seconds(), r.wait_seconds, share);
    }
    if (rows.size() == 1) return text + "\nOne rank: nobody waits for anybody.\n";
    const Awaited awaited = awaited_rank(rows);
    text += fmt::format(
        "\nThe others wait for rank {} ({}): it waits {:.3f} s, the other ranks a median of {:.3f} s. {}\n",
        awaited.rank->rank, awaited.rank->host, awaited.rank->wait_seconds, awaited.median_other_wait,
        waits_too_long(awaited)
            ? "Give it less work or a faster device, or look for work only it does (logging, checkpoints, I/O)."
            : "The difference is small: the ranks are balanced.");
    return text;
}

std::string straggler_report(Communicator& comm) {
    const std::vector<StragglerRow> rows = gather_straggler_rows(comm);
    std::string text = format_straggler_report(rows);
    // A warning only when it asks for action; a balanced job (or one rank) reports at INFO.
    const Logger log = get_logger("lockstep.straggler");
    if (someone_waits(rows)) {
        log.warning("{}", text);
    } else {
        log.info("{}", text);
    }
    return text;
}

namespace {

// What every rank sends ahead of its snapshot: the snapshot's length, and its realtime clock read just after a barrier
// that all ranks leave within microseconds, so that the main process can put ranks of other hosts on its clock (the
// wait profile's bins are milliseconds to seconds wide).
struct SnapshotHeader {
    std::int64_t bytes;
    double clock_us;
    detail::FixedText<64> host;
};

// Every rank's recorder snapshot, each with "clock_offset_us", on comm's rank 0 in rank order (empty elsewhere):
// one allgather of the lengths, then one gather of the snapshots padded to the longest.
std::vector<nlohmann::json> gather_snapshots(Communicator& comm, const nlohmann::json& mine) {
    const std::string text = mine.dump();
    comm.barrier();
    SnapshotHeader header{static_cast<std::int64_t>(text.size()), detail::realtime_us(), {}};
    header.host.assign(host_name());
    const std::vector<SnapshotHeader> headers = detail::allgather_fixed(comm, header);
    std::int64_t longest = 0;
    for (const SnapshotHeader& h : headers) longest = std::max(longest, h.bytes);
    Tensor padded = Tensor::zeros({longest}, DType::UInt8);
    std::memcpy(padded.data(), text.data(), text.size());
    const Tensor all = comm.gather(padded, 0);
    std::vector<nlohmann::json> snapshots;
    if (comm.rank() != 0) return snapshots;
    const auto* bytes = static_cast<const char*>(all.data());
    for (std::size_t r = 0; r < headers.size(); ++r) {
        const std::string_view one(bytes + r * static_cast<std::size_t>(longest),
                                   static_cast<std::size_t>(headers[r].bytes));
        nlohmann::json snapshot = nlohmann::json::parse(one);
        // Ranks on the main process's host share its clock; the others are put on it by the barrier's readings.
        const bool same_host = headers[r].host.str() == headers[0].host.str();
        snapshot["clock_offset_us"] = same_host ? 0.0 : headers[0].clock_us - headers[r].clock_us;
        snapshots.push_back(std::move(snapshot));
    }
    return snapshots;
}

}  // namespace

std::string straggler_report(Communicator& comm, const std::filesystem::path& trace_file) {
    // The snapshot before the report's own collectives, so that the picture ends with the program's calls.
    const nlohmann::json mine = detail::recorder_snapshot();
    std::string text = straggler_report(comm);
    const std::vector<nlohmann::json> snapshots = gather_snapshots(comm, mine);
    if (comm.rank() != 0) return text;
    detail::TraceContext context;
    context.reason = "straggler";
    context.job = detail::job_id_from_environment();
    context.expected_ranks = comm.size();
    detail::write_trace(trace_file, detail::merge_trace(snapshots, context));
    const std::string written = fmt::format(
        "Straggler trace written to {0}; draw each rank's waiting over the whole run with: lockstep trace show {0} "
        "--whole-run\n",
        trace_file.string());
    get_logger("lockstep.straggler").info("{}", written);
    return text + written;
}

namespace {
// The straggler table is a section of every Runtime::report() from the moment the world communicator is made.
[[maybe_unused]] const bool straggler_report_registered = detail::at_world_start(
    [](Communicator&) { detail::at_runtime_report([] { return straggler_report(Communicator::world()); }); });
}  // namespace

}  // namespace lockstep
