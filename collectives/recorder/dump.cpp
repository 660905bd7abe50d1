#include "dump.hpp"

#include "../watchdog.hpp"
#include "collect.hpp"
#include "job_directory.hpp"
#include "recorder.hpp"

#include <lockstep/config.hpp>
#include <lockstep/logging.hpp>
#include <lockstep/runtime.hpp>

#include <unistd.h>

#include <fmt/core.h>

#include <algorithm>
#include <ctime>
#include <mutex>
#include <set>

namespace lockstep::detail {

namespace {

std::filesystem::path trace_directory() {
    return std::filesystem::path(config().trace_dir.value_or(""));
}

bool same_process(const Endpoint& a, const Endpoint& b) {
    return a.pid == b.pid && a.port == b.port && a.host.str() == b.host.str();
}

nlohmann::json own_snapshot() {
    nlohmann::json snapshot = recorder_snapshot();
    snapshot["clock_us"] = realtime_us();
    return snapshot;
}

// The world size as far as these processes tell: one more than the highest world rank among them.
int rank_count(const std::vector<Endpoint>& ranks) {
    int count = 0;
    for (const Endpoint& e : ranks) count = std::max(count, e.world_rank + 1);
    return count;
}

void write_merged(const std::filesystem::path& file, const nlohmann::json& merged) {
    std::error_code ec;
    if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path(), ec);
    write_trace(file, merged);
}

}  // namespace

std::filesystem::path trace_destination(std::string_view reason) {
    if (const auto& file = config().trace_file) return *file;
    return trace_directory() / trace_file_name(reason, std::time(nullptr), ::getpid());
}

std::string dump_trace(const std::vector<Endpoint>& ranks, const std::string& reason, const std::filesystem::path& file,
                       nlohmann::json stacks) {
    try {
        const Endpoint self = Watchdog::instance().endpoint();
        std::vector<Endpoint> remote;
        std::vector<nlohmann::json> local;
        for (const Endpoint& e : ranks) {
            if (same_process(e, self)) {
                local.push_back(own_snapshot());
            } else {
                remote.push_back(e);
            }
        }
        std::vector<int> asked;
        for (const Endpoint& e : ranks) asked.push_back(e.world_rank);
        const TraceContext context{reason, job_id_from_environment(), rank_count(ranks), std::move(stacks),
                                   std::move(asked)};
        const CollectedTrace trace = collect_trace(remote, std::move(local), context, Clock::now() + dump_deadline);
        write_merged(file, trace.merged);
        std::string text = trace_written_text(file);
        for (const std::string& missing : trace.missing) text += fmt::format("  missing {}\n", missing);
        return text;
    } catch (const std::exception& e) {
        return fmt::format("No trace was written: {}\n", e.what());
    }
}

std::string collective_error_trace(std::uint64_t comm_id, std::uint64_t sequence) {
    // A program that silences the debug-mode report (an expected mismatch, as `lockstep test` makes) gets no trace.
    Watchdog& watchdog = Watchdog::instance();
    if (!watchdog.running() || !get_logger("lockstep.debug").enabled_for(LogLevel::Error)) return {};
    const std::vector<Endpoint> members = watchdog.members(comm_id);
    if (members.empty()) return {};
    {
        // One trace per communicator, at its first error: a program that catches the errors and goes on (a test, a
        // retry) would otherwise write a whole trace for every call. Every member sees the same errors on it, so every
        // member decides alike, and the messages stay identical.
        static std::mutex mutex;
        static std::set<std::uint64_t> traced;
        std::scoped_lock lock(mutex);
        if (!traced.insert(comm_id).second) return {};
    }
    const Endpoint& first = members.front();
    std::filesystem::path file;
    if (const auto& named = config().trace_file) {
        file = *named;
    } else {
        const std::string name =
            trace_file_name(fmt::format("error-{}.{}", comm_id, sequence), first.started_s, first.pid);
        file = trace_directory() / name;
    }
    if (same_process(first, watchdog.endpoint())) {
        const std::string written = dump_trace(members, "error", file);
        get_logger("lockstep.trace").info(every_rank, "{}", written);
    }
    return fmt::format(
        "\nTrace of every process's last calls, written by process {}: {} (summary: {}.txt; open it in "
        "https://ui.perfetto.dev or with `lockstep trace show {}`)\n",
        first.world_rank, file.string(), file.string(), file.string());
}

void dump_trace_at_exit(MPI_Comm comm) {
    const auto& file = config().trace_file;
    if (!file) return;
    int rank = 0;
    int size = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    nlohmann::json mine;
    try {
        mine = recorder_snapshot();
    } catch (const std::exception& e) {
        mine = {{"error", e.what()}};
    }
    // Every clock read as the same barrier ends: rank 0 relates the clocks of other hosts to its own by these.
    const Logger log = get_logger("lockstep.trace");
    if (const int rc = MPI_Barrier(comm); rc != MPI_SUCCESS) {
        log.error(every_rank, "No trace was written at exit: MPI_Barrier failed ({})", lockstep::mpi_error_string(rc));
        return;
    }
    mine["clock_us"] = realtime_us();
    const std::string text = mine.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    int length = static_cast<int>(text.size());
    std::vector<int> lengths(static_cast<std::size_t>(size));
    if (const int rc = MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0, comm); rc != MPI_SUCCESS) {
        log.error(every_rank, "No trace was written at exit: MPI_Gather failed ({})", lockstep::mpi_error_string(rc));
        return;
    }
    std::vector<int> offsets(static_cast<std::size_t>(size), 0);
    for (std::size_t r = 1; r < offsets.size(); ++r) offsets[r] = offsets[r - 1] + lengths[r - 1];
    std::string all(rank == 0 ? static_cast<std::size_t>(offsets.back() + lengths.back()) : 0, '\0');
    if (const int rc =
            MPI_Gatherv(text.data(), length, MPI_CHAR, all.data(), lengths.data(), offsets.data(), MPI_CHAR, 0, comm);
        rc != MPI_SUCCESS) {
        log.error(every_rank, "No trace was written at exit: MPI_Gatherv failed ({})", lockstep::mpi_error_string(rc));
        return;
    }
    if (rank != 0) return;
    const double my_clock = mine["clock_us"].get<double>();
    const std::string my_host = mine.value("host", "");
    std::vector<nlohmann::json> ranks;
    for (std::size_t r = 0; r < lengths.size(); ++r) {
        nlohmann::json snapshot = nlohmann::json::parse(
            all.substr(static_cast<std::size_t>(offsets[r]), static_cast<std::size_t>(lengths[r])), nullptr, false);
        if (!snapshot.is_object() || !snapshot.contains("calls")) continue;
        const bool here = snapshot.value("host", "") == my_host;
        snapshot["clock_offset_us"] = here ? 0.0 : my_clock - snapshot.value("clock_us", my_clock);
        ranks.push_back(std::move(snapshot));
    }
    try {
        const TraceContext context{"exit", job_id_from_environment(), size, {}};
        write_merged(*file, merge_trace(ranks, context));
        log.info(every_rank, "{}", trace_written_text(*file));
    } catch (const std::exception& e) {
        log.error(every_rank, "No trace was written at exit: {}", e.what());
    }
}

}  // namespace lockstep::detail
