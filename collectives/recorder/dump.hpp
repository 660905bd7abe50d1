#pragma once
// When a running job writes a trace file (internal; docs/tracing.md, "Taking a trace"): after a hang report (the
// watchdog's reporter), on a collective error found in debug mode (the communicator's first process), and at
// Runtime::finalize when the setting trace_file asks for it (world rank 0, over MPI). `lockstep trace` takes one from
// outside (tools/trace/).

#include "../watchdog/endpoint.hpp"

#include <mpi.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace lockstep::detail {

// How long a dump waits for the processes' answers: a process that has not answered by then is named missing.
constexpr auto dump_deadline = std::chrono::seconds(3);

// Where a trace taken for `reason` goes: the setting trace_file if set, else trace_dir (default: the working
// directory) / lockstep-trace-<reason>-<UTC time>-<pid>.json.
[[nodiscard]] std::filesystem::path trace_destination(std::string_view reason);

// Collects the snapshots of `ranks` (this process's own without the network, the others' over the channel, at most
// dump_deadline), writes the trace to `file` and returns the lines that name it for a report (and the ranks that did
// not answer), or the line that says why it could not be written. `stacks` (the hang report's, by rank; may be null)
// go into the file as they are. Never throws.
[[nodiscard]] std::string dump_trace(const std::vector<Endpoint>& ranks, const std::string& reason,
                                     const std::filesystem::path& file, nlohmann::json stacks = nullptr);

// Called on every process of a communicator whose collective `sequence` failed the debug-mode check, before the error
// is raised (only the communicator's first error writes a trace; later ones return nothing): the communicator's first
// process collects and writes the trace (within dump_deadline), and every process returns the same line for the error's
// message, naming the file. The file's name is derived from what every member knows alike: the first member's endpoint
// (its pid and the time its watchdog started), the communicator and the sequence. Empty when the watchdog does not know
// the communicator (no channel to collect over).
[[nodiscard]] std::string collective_error_trace(std::uint64_t comm_id, std::uint64_t sequence);

// At Runtime::finalize, on every process of `comm` (the world's): when the setting trace_file is set, every process's
// snapshot is gathered with MPI to rank 0, which writes the file. Collective over `comm`; does nothing otherwise.
void dump_trace_at_exit(MPI_Comm comm);

}  // namespace lockstep::detail
