#include <lockstep/logging.hpp>
#include <lockstep/runtime.hpp>
#include <lockstep/straggler.hpp>

#include <fmt/core.h>

#include <algorithm>
#include <cstring>

namespace lockstep {

namespace detail {
double process_wait_seconds();     // communicator.cpp
double seconds_since_world_start();  // communicator.cpp
}  // namespace detail

StragglerRow local_straggler_row() {
    StragglerRow row;
    row.rank = current_identity().rank;
    row.host = host_name();
    row.elapsed_seconds = detail::seconds_since_world_start();
    row.wait_seconds = detail::process_wait_seconds();
    return row;
}

std::vector<StragglerRow> gather_straggler_rows(Communicator& comm) {
    // Read the totals before the gather, so that the report's own collective is not counted as waiting.
    const StragglerRow mine = local_straggler_row();
    const Tensor numbers = comm.allgather(Tensor::from_data<double>({mine.elapsed_seconds, mine.wait_seconds}, {2}));
    char host[64] = {};
    std::strncpy(host, mine.host.c_str(), sizeof host - 1);
    const Tensor hosts = comm.allgather(Tensor::from_data<std::uint8_t>(
        std::vector<std::uint8_t>(host, host + sizeof host), {static_cast<std::int64_t>(sizeof host)}));
    const auto v = numbers.to_vector<double>();
    const auto h = hosts.to_vector<std::uint8_t>();
    std::vector<StragglerRow> rows(static_cast<std::size_t>(comm.size()));
    for (std::size_t r = 0; r < rows.size(); ++r) {
        rows[r].rank = static_cast<int>(r);
        const char* name = reinterpret_cast<const char*>(h.data()) + r * sizeof host;
        rows[r].host = std::string(name, strnlen(name, sizeof host));
        rows[r].elapsed_seconds = v[2 * r];
        rows[r].wait_seconds = v[2 * r + 1];
    }
    return rows;
}

std::string format_straggler_report(const std::vector<StragglerRow>& rows) {
    if (rows.empty()) return "Straggler report: no ranks\n";
    std::string text = "Straggler report (time since start, split into compute and waiting in collectives):\n\n"
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
