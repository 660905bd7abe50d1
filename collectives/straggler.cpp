#include "fixed_record.hpp"
#include "wait_statistics.hpp"
#include "world_hooks.hpp"

#include <lockstep/logging.hpp>
#include <lockstep/runtime.hpp>
#include <lockstep/straggler.hpp>

#include <fmt/core.h>

#include <algorithm>

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
// The straggler table is a section of every Runtime::report() from the moment the world communicator is made.
[[maybe_unused]] const bool straggler_report_registered = detail::at_world_start(
    [](Communicator&) { detail::at_runtime_report([] { return straggler_report(Communicator::world()); }); });
}  // namespace

}  // namespace lockstep
