// The checks of MPI_Finalize in debug mode: how many collectives each process made on each communicator (freed ones
// included), and the requests each started and never completed or freed ("a request never waited for"). Every
// process sends its rows to every other over the world's shadow, so that every process prints the same report.

#include "collective.hpp"
#include "communicators.hpp"
#include "entry.hpp"

#include <lockstep/base/rank_groups.hpp>

#include <fmt/format.h>

#include <chrono>
#include <map>

namespace lockstep::check {
namespace {

struct CountRow {
    std::uint64_t id;
    std::uint64_t collectives;
    detail::FixedText<176> name;
};
struct RequestRow {
    detail::FixedText<200> call;
};

// Every process's rows, in rank order (one exchange of the row counts, one of the rows).
template <class Row>
std::vector<std::vector<Row>> gather_rows(const std::vector<Row>& mine, MPI_Comm comm, int size) {
    int my_count = static_cast<int>(mine.size());
    std::vector<int> counts(static_cast<std::size_t>(size));
    PMPI_Allgather(&my_count, 1, MPI_INT, counts.data(), 1, MPI_INT, comm);
    std::vector<int> bytes(static_cast<std::size_t>(size));
    std::vector<int> displs(static_cast<std::size_t>(size));
    int total = 0;
    for (int r = 0; r < size; ++r) {
        bytes[static_cast<std::size_t>(r)] = counts[static_cast<std::size_t>(r)] * static_cast<int>(sizeof(Row));
        displs[static_cast<std::size_t>(r)] = total;
        total += bytes[static_cast<std::size_t>(r)];
    }
    std::vector<Row> all(static_cast<std::size_t>(total) / sizeof(Row));
    PMPI_Allgatherv(mine.data(), my_count * static_cast<int>(sizeof(Row)), MPI_BYTE, all.data(), bytes.data(),
                    displs.data(), MPI_BYTE, comm);
    std::vector<std::vector<Row>> by_rank(static_cast<std::size_t>(size));
    for (int r = 0; r < size; ++r) {
        const auto first = all.begin() + displs[static_cast<std::size_t>(r)] / static_cast<int>(sizeof(Row));
        by_rank[static_cast<std::size_t>(r)].assign(first, first + counts[static_cast<std::size_t>(r)]);
    }
    return by_rank;
}

// Deferred collectives still in flight get a moment to finish (a request the program never waited for may still
// complete, its payload started by this process's last progress).
void settle_deferred() {
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    while (deferred_pending() && std::chrono::steady_clock::now() < until) progress_deferred();
}

}  // namespace

int check_at_finalize() {
    CommunicatorRecord* world = find_communicator(MPI_COMM_WORLD);
    if (world == nullptr || world->shadow == MPI_COMM_NULL) return MPI_SUCCESS;
    settle_deferred();

    std::vector<CountRow> counts;
    for (const auto& c : communicator_counts()) {
        CountRow row{c.id, c.collectives, {}};
        row.name.assign(c.name);
        counts.push_back(row);
    }
    std::vector<RequestRow> requests;
    auto open = deferred_never_completed();
    const auto tracked = tracked_never_completed();
    open.insert(open.end(), tracked.begin(), tracked.end());
    for (const auto& call : open) {
        RequestRow row{};
        row.call.assign(call);
        requests.push_back(row);
    }
    const auto all_counts = gather_rows(counts, world->shadow, world->size);
    const auto all_requests = gather_rows(requests, world->shadow, world->size);

    std::string problems;
    // Per communicator (by identifier, in the order the lowest process lists them): the counts of its members.
    std::vector<std::uint64_t> order;
    std::map<std::uint64_t, std::map<int, std::uint64_t>> made;
    std::map<std::uint64_t, std::string> names;
    for (int r = 0; r < world->size; ++r) {
        for (const auto& row : all_counts[static_cast<std::size_t>(r)]) {
            if (!made.contains(row.id)) {
                order.push_back(row.id);
                names[row.id] = row.name.str();
            }
            made[row.id][r] += row.collectives;
        }
    }
    for (const std::uint64_t id : order) {
        const auto& per_rank = made[id];
        if (per_rank.size() < 2) continue;
        const std::uint64_t first = per_rank.begin()->second;
        bool differ = false;
        for (const auto& [rank, n] : per_rank) differ = differ || n != first;
        if (!differ) continue;
        std::map<std::uint64_t, std::vector<int>> by_count;
        for (const auto& [rank, n] : per_rank) by_count[n].push_back(rank);
        problems += fmt::format("  {}: the processes made different numbers of collectives on it:\n", names[id]);
        for (const auto& [n, ranks] : by_count) {
            problems += fmt::format("    - {}: {}\n", base::processes_text(ranks),
                                    base::count_text(n, "collective", "collectives"));
        }
    }
    for (int r = 0; r < world->size; ++r) {
        for (const auto& row : all_requests[static_cast<std::size_t>(r)]) {
            problems += fmt::format("  Process {}: a request never waited for: {}\n", r, row.call.str());
        }
    }
    if (problems.empty()) return MPI_SUCCESS;
    const std::string report = "lockstep check: at MPI_Finalize:\n" + problems;
    return handle_mismatch(*world, report);
}

}  // namespace lockstep::check
