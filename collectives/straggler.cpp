#include "fixed_record.hpp"
#include "wait_statistics.hpp"

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
    const auto least = std::min_element(rows.begin(), rows.end(),
                                        [](const auto& a, const auto& b) { return a.wait_seconds < b.wait_seconds; });
    std::vector<double> others;
    for (const auto& r : rows) {
        if (r.rank != least->rank) others.push_back(r.wait_seconds);
    }
    std::sort(others.begin(), others.end());
    const std::size_t mid = others.size() / 2;
    const double median_other = others.size() % 2 == 1 ? others[mid] : (others[mid - 1] + others[mid]) / 2.0;
    text += fmt::format(
        "\nThe others wait for rank {} ({}): it waits {:.3f} s, the other ranks a median of {:.3f} s. {}\n",
        least->rank, least->host, least->wait_seconds, median_other,
        median_other - least->wait_seconds > 0.05 * std::max(least->elapsed_seconds, 1e-9)
            ? "Give it less work or a faster device, or look for work only it does (logging, checkpoints, I/O)."
            : "The difference is small: the ranks are balanced.");
    return text;
}

std::string straggler_report(Communicator& comm) {
    std::string text = format_straggler_report(gather_straggler_rows(comm));
    get_logger("lockstep.straggler").warning("{}", text);
    return text;
}

}  // namespace lockstep
